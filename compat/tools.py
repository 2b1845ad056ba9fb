"""Run Kafka's own ``DumpLogSegments`` and parse its output into ``kafkalog dump --json`` structures.

One JVM dumps many files (``--files a,b,c``): pass all files of a fixture at once. Keys and payloads are
printed through a tiny base64 decoder (``io.kafkalog.compat.Base64Decoder``, compiled once per Kafka version
with ``javac`` into the cache), so binary data survives the text output byte-exactly.

Batch dicts (one per batch; v0/v1: one per outer message) carry exactly the keys of ``kafkalog dump --json``::

    file baseOffset lastOffset count position size magic codec crc isValid timestampType maxTimestamp
    producerId producerEpoch baseSequence partitionLeaderEpoch isTransactional isControl deleteHorizonMs
    [records: [{offset, timestamp, key, value, headers}]]     (deep iteration)

``key``/``value`` are base64 or None; ``headers`` is ``[[name, None], ...]`` because DumpLogSegments prints
header names only. Record dicts may also hold ``sequence`` (v2), ``crc``/``isValid`` (legacy), ``control``
(text after the metadata of a control record) and, with the internal-topic decoders, ``keyText``/``valueText``.
For legacy batches DumpLogSegments prints only the wrapper's (last) offset: ``baseOffset``/``count`` come from
the inner records under deep iteration, else ``baseOffset = lastOffset, count = 1`` for uncompressed messages
and None for compressed wrappers.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kafkalog.compat import jars
from kafkalog.compat.broker import log4j_config
from kafkalog.compat.errors import HarnessError, ToolError

Decoder = Literal["offsets", "transaction", "cluster-metadata"]
_DECODER_FLAGS = {
    "offsets": "--offsets-decoder",
    "transaction": "--transaction-log-decoder",
    "cluster-metadata": "--cluster-metadata-decoder",
}

DECODER_CLASS = "io.kafkalog.compat.Base64Decoder"
_DECODER_SOURCE = """\
package io.kafkalog.compat;

/** Prints keys/payloads as base64 so DumpLogSegments output stays one line per record, byte-exact. */
public class Base64Decoder implements org.apache.kafka.tools.api.Decoder<String> {
    public Base64Decoder() {}

    @Override
    public String fromBytes(byte[] bytes) {
        return java.util.Base64.getEncoder().encodeToString(bytes);
    }
}
"""
#: Kafka < 3.5 instantiates kafka.serializer.Decoder implementations with a VerifiableProperties argument.
_LEGACY_DECODER_SOURCE = """\
package io.kafkalog.compat;

public class Base64Decoder implements kafka.serializer.Decoder<String> {
    public Base64Decoder(kafka.utils.VerifiableProperties props) {}

    @Override
    public String fromBytes(byte[] bytes) {
        return java.util.Base64.getEncoder().encodeToString(bytes);
    }
}
"""

BATCH_KEYS = (
    "file", "baseOffset", "lastOffset", "count", "position", "size", "magic", "codec", "crc", "isValid",
    "timestampType", "maxTimestamp", "producerId", "producerEpoch", "baseSequence", "partitionLeaderEpoch",
    "isTransactional", "isControl", "deleteHorizonMs",
)  # fmt: skip
RECORD_KEYS = ("offset", "timestamp", "key", "value", "headers")


# --------------------------------------------------------------------------- running


def dump_class(version: str) -> str:
    """DumpLogSegments moved from core (``kafka.tools``) to kafka-tools (``org.apache.kafka.tools``) in 4.x."""
    return jars.find_class(jars.ensure_kafka(version), "org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments")


def decoder_classes(version: str) -> Path:
    """Directory with the compiled Base64Decoder for ``version`` (compiled with javac on first use)."""
    libs = jars.ensure_kafka(version)
    out = jars.kafka_home(version) / "kafkalog-tools"
    target = out / "io" / "kafkalog" / "compat" / "Base64Decoder.class"
    if target.is_file():
        return out
    src_dir = out / "src"
    src_dir.mkdir(parents=True, exist_ok=True)
    src = src_dir / "Base64Decoder.java"
    src.write_text(_DECODER_SOURCE if jars.parse_version(version) >= (3, 5) else _LEGACY_DECODER_SOURCE)
    proc = subprocess.run(
        [jars.javac_executable(), "-nowarn", "--release", "11", "-cp", jars.classpath(libs), "-d", str(out), str(src)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise ToolError(f"javac failed for the DumpLogSegments decoder: {proc.stderr.strip()[-1500:]}")
    return out


def _tools_log_config(version: str) -> list[str]:
    prop, content = log4j_config(version, level="WARN", stderr=True)
    home = jars.kafka_home(version)
    cfg = home / ("tools-log4j2.properties" if "log4j2" in prop else "tools-log4j.properties")
    if not cfg.is_file() or cfg.read_text() != content:
        cfg.write_text(content)
    return [f"-D{prop}={cfg if 'log4j2' in prop else cfg.as_uri()}"]


def run_tool(version: str, main_class: str, args: Sequence[str], *, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    """Run a Kafka command-line class from the jars of ``version`` (logging at WARN to stderr)."""
    libs = jars.ensure_kafka(version)
    jars.check_java(version)
    cp = jars.classpath(libs) + ":" + str(decoder_classes(version))
    cmd = [
        jars.java_executable(), "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-Djava.awt.headless=true", "-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8",
        "-Dsun.stderr.encoding=UTF-8", *_tools_log_config(version), "-cp", cp, main_class, *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout, encoding="utf-8", errors="replace")


def dump_log_segments(
    version: str,
    files: Sequence[str | Path],
    *,
    deep: bool = True,
    print_data: bool = True,
    decoder: Decoder | None = None,
    verify_index_only: bool = False,
    index_sanity_check: bool = False,
    max_message_size: int | None = None,
    extra_args: Sequence[str] = (),
    timeout: float = 600.0,
    on_error: Literal["raise", "split"] = "raise",
) -> DumpRun:
    """Dump ``files`` (any mix of .log/.index/.timeindex/.txnindex/.snapshot/.checkpoint) in one JVM.

    Paths are made absolute so stdout sections and stderr reports (which use absolute paths) line up.
    The tool aborts the whole run at the first exception (a corrupt batch, an index entry past the end of
    its log, ...): with ``on_error="raise"`` that is a ToolError; with ``"split"`` the file it was dumping
    (the last ``Dumping`` section) gets a FileDump whose ``error`` holds the tool's stderr (what it printed
    before failing is kept), the files before it are dumped again on their own (their end-of-run reports
    were lost with the crash) and the files after it are dumped next: about two JVMs per failing file.
    """
    kwargs: dict[str, Any] = dict(
        deep=deep, print_data=print_data, decoder=decoder, verify_index_only=verify_index_only,
        index_sanity_check=index_sanity_check, max_message_size=max_message_size, extra_args=extra_args,
        timeout=timeout,
    )  # fmt: skip
    try:
        return _dump_once(version, files, **kwargs)
    except ToolError as exc:
        if on_error == "raise":
            raise
        crashed = parse_dump_output(exc.stdout, "", base64_data=decoder is None and print_data, deep=deep)
        paths = [str(Path(f).absolute()) for f in files]
        failed = paths.index(crashed.files[-1].path) if crashed.files else 0
        bad = crashed.files[-1] if crashed.files else FileDump(path=paths[0], kind=_kind(paths[0]))
        bad.error = exc.stderr.strip()
        parts = []
        if failed > 0:
            parts.append(dump_log_segments(version, files[:failed], on_error="split", **kwargs))
        parts.append(DumpRun([bad]))
        if failed + 1 < len(files):
            parts.append(dump_log_segments(version, files[failed + 1 :], on_error="split", **kwargs))
        return DumpRun(
            [f for r in parts for f in r.files],
            [pair for r in parts for pair in r.timeindex_not_found],
            "".join(r.stderr for r in parts),
        )


def _dump_once(
    version: str,
    files: Sequence[str | Path],
    *,
    deep: bool,
    print_data: bool,
    decoder: Decoder | None,
    verify_index_only: bool,
    index_sanity_check: bool,
    max_message_size: int | None,
    extra_args: Sequence[str],
    timeout: float,
) -> DumpRun:
    paths = [str(Path(f).absolute()) for f in files]
    if not paths:
        raise ValueError("no files to dump")
    if any("," in p for p in paths):
        raise ValueError("DumpLogSegments --files cannot take paths containing ','")
    if bad := [p for p in paths if "." not in Path(p).name]:
        raise ValueError(f"DumpLogSegments crashes on names without '.': {bad[0]} (filter with dumpable())")
    args: list[str] = []
    if deep:
        args.append("--deep-iteration")
    if decoder is not None:
        args.append(_DECODER_FLAGS[decoder])
    elif print_data:
        args += ["--print-data-log", "--key-decoder-class", DECODER_CLASS, "--value-decoder-class", DECODER_CLASS]
    if verify_index_only:
        args.append("--verify-index-only")
    if index_sanity_check:
        args.append("--index-sanity-check")
    if max_message_size is not None:
        args += ["--max-message-size", str(max_message_size)]
    args += list(extra_args)
    args += ["--files", ",".join(paths)]
    proc = run_tool(version, dump_class(version), args, timeout=timeout)
    if proc.returncode != 0:
        raise ToolError(
            f"DumpLogSegments (Kafka {version}) failed with exit code {proc.returncode}: {proc.stderr.strip()[-3000:]}",
            stdout=proc.stdout, stderr=proc.stderr,
        )  # fmt: skip
    return parse_dump_output(proc.stdout, proc.stderr, base64_data=decoder is None and print_data, deep=deep)


# --------------------------------------------------------------------------- parsed structures


@dataclass
class FileDump:
    """Everything DumpLogSegments printed for one file."""

    path: str
    kind: str  # log, checkpoint, index, timeindex, txnindex, snapshot, unknown
    header: str | None = None
    batches: list[dict[str, Any]] = field(default_factory=list)
    #: .index: {offset, position}; .timeindex: {timestamp, offset}; .txnindex / .snapshot: all printed fields
    entries: list[dict[str, Any]] = field(default_factory=list)
    empty: bool = False
    passed_sanity_check: bool = False
    invalid_bytes: int = 0
    #: (previous offset, next offset) pairs from stderr, in order of discovery
    non_consecutive: list[tuple[int, int]] = field(default_factory=list)
    #: .index entries whose batch last offset differs: (index offset, log offset), in order of discovery
    index_mismatches: list[tuple[int, int]] = field(default_factory=list)
    #: .timeindex: (index timestamp, log timestamp) and (index timestamp, previous timestamp) pairs
    timestamp_mismatches: list[tuple[int, int]] = field(default_factory=list)
    out_of_order_timestamps: list[tuple[int, int]] = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)
    #: the tool's stderr when it crashed on this file (only with on_error="split")
    error: str | None = None

    def records(self) -> list[dict[str, Any]]:
        return [r for b in self.batches for r in b.get("records", [])]


@dataclass
class DumpRun:
    files: list[FileDump]
    #: "Indexed offset: o, found log offset: l" pairs (the tool does not say which file they belong to)
    timeindex_not_found: list[tuple[int, int]] = field(default_factory=list)
    stderr: str = ""

    def by_path(self) -> dict[str, FileDump]:
        return {f.path: f for f in self.files}

    def __getitem__(self, path: str | Path) -> FileDump:
        want = str(Path(path).absolute())
        for f in self.files:
            if f.path == want or f.path == str(path):
                return f
        raise KeyError(str(path))

    def batches(self) -> list[dict[str, Any]]:
        return [b for f in self.files for b in f.batches]


# --------------------------------------------------------------------------- parsing

_BOOL = {"true": True, "false": False}
_V2_BATCH = re.compile(
    r"baseOffset: (?P<baseOffset>-?\d+) lastOffset: (?P<lastOffset>-?\d+) count: (?P<count>-?\d+) "
    r"baseSequence: (?P<baseSequence>-?\d+) lastSequence: (?P<lastSequence>-?\d+) "
    r"producerId: (?P<producerId>-?\d+) producerEpoch: (?P<producerEpoch>-?\d+) "
    r"partitionLeaderEpoch: (?P<partitionLeaderEpoch>-?\d+) isTransactional: (?P<isTransactional>true|false) "
    r"isControl: (?P<isControl>true|false)(?: deleteHorizonMs: (?P<deleteHorizonMs>OptionalLong(?:\.empty|\[-?\d+\])))? "
    r"position: (?P<position>\d+) (?P<timestampType>\w+): (?P<maxTimestamp>-?\d+) size: (?P<size>\d+) "
    r"magic: (?P<magic>\d+) compresscodec: (?P<codec>\S+) crc: (?P<crc>\d+) isvalid: (?P<isValid>true|false)$"
)
_LEGACY_BATCH = re.compile(
    r"offset: (?P<lastOffset>-?\d+) position: (?P<position>\d+) (?P<timestampType>\w+): (?P<maxTimestamp>-?\d+) "
    r"size: (?P<size>\d+) magic: (?P<magic>\d+) compresscodec: (?P<codec>\S+) crc: (?P<crc>\d+) "
    r"isvalid: (?P<isValid>true|false)$"
)
_RECORD = re.compile(
    r"\| offset: (?P<offset>-?\d+) (?P<timestampType>\w+): (?P<timestamp>-?\d+) "
    r"key[sS]ize: (?P<keySize>-?\d+) value[sS]ize: (?P<valueSize>-?\d+)(?P<rest>.*)$"
)
_SEQ_HEADERS = re.compile(r"^ sequence: (?P<sequence>-?\d+) headerKeys: \[(?P<headers>.*?)\](?= |$)")
_LEGACY_REC = re.compile(r"^ isValid: (?P<isValid>true|false) crc: (?P<crc>\d+)\}?")  # "}" up to 3.9
_INDEX = re.compile(r"offset: (?P<offset>-?\d+) position: (?P<position>-?\d+)$")
_TIMEINDEX = re.compile(r"timestamp: (?P<timestamp>-?\d+) offset: (?P<offset>-?\d+)$")
_FIELDS = re.compile(r"(\w+): (\S+)")
_INVALID = re.compile(r"Found (\d+) invalid bytes at the end of (.+)$")
_PAIR_NONCONSEC = re.compile(r"^\s+(-?\d+) is followed by (-?\d+)$")
_PAIR_INDEX = re.compile(r"^\s+Index offset: (-?\d+), log offset: (-?\d+)$")
_PAIR_TS = re.compile(r"^\s+Index timestamp: (-?\d+), (?:log|Previously indexed) timestamp: (-?\d+)$")
_PAIR_NOTFOUND = re.compile(r"^Indexed offset: (-?\d+), found log offset: (-?\d+)$")

_KINDS = {".log": "log", ".checkpoint": "checkpoint", ".index": "index", ".timeindex": "timeindex",
          ".txnindex": "txnindex", ".snapshot": "snapshot"}  # fmt: skip


def dumpable(path: str | Path) -> bool:
    """True for the suffixes DumpLogSegments handles (.log .index .timeindex .txnindex .snapshot .checkpoint)."""
    return _kind(str(path)) != "unknown"


def _kind(path: str) -> str:
    name = Path(path).name
    return _KINDS.get(name[name.rfind(".") :], "unknown") if "." in name else "unknown"


def _opt_long(text: str | None) -> int | None:
    if text is None or text == "OptionalLong.empty":
        return None
    return int(text[len("OptionalLong[") : -1])


def _v2_batch(m: re.Match[str], path: str) -> dict[str, Any]:
    g = m.groupdict()
    return {
        "file": path,
        "baseOffset": int(g["baseOffset"]),
        "lastOffset": int(g["lastOffset"]),
        "count": int(g["count"]),
        "position": int(g["position"]),
        "size": int(g["size"]),
        "magic": int(g["magic"]),
        "codec": g["codec"].lower(),
        "crc": int(g["crc"]),
        "isValid": _BOOL[g["isValid"]],
        "timestampType": g["timestampType"],
        "maxTimestamp": int(g["maxTimestamp"]),
        "producerId": int(g["producerId"]),
        "producerEpoch": int(g["producerEpoch"]),
        "baseSequence": int(g["baseSequence"]),
        "partitionLeaderEpoch": int(g["partitionLeaderEpoch"]),
        "isTransactional": _BOOL[g["isTransactional"]],
        "isControl": _BOOL[g["isControl"]],
        "deleteHorizonMs": _opt_long(g["deleteHorizonMs"]),
    }


def _legacy_batch(m: re.Match[str], path: str) -> dict[str, Any]:
    g = m.groupdict()
    codec = g["codec"].lower()
    last = int(g["lastOffset"])
    plain = codec in ("none", "nocompressioncodec")
    return {
        "file": path,
        "baseOffset": last if plain else None,
        "lastOffset": last,
        "count": 1 if plain else None,
        "position": int(g["position"]),
        "size": int(g["size"]),
        "magic": int(g["magic"]),
        "codec": codec,
        "crc": int(g["crc"]),
        "isValid": _BOOL[g["isValid"]],
        "timestampType": g["timestampType"],
        "maxTimestamp": int(g["maxTimestamp"]),
        "producerId": -1,
        "producerEpoch": -1,
        "baseSequence": -1,
        "partitionLeaderEpoch": -1,
        "isTransactional": False,
        "isControl": False,
        "deleteHorizonMs": None,
    }


def _batch_line(line: str, path: str) -> dict[str, Any] | None:
    """The batch a DumpLogSegments line starts (a v2 batch or a v0/v1 entry), or None."""
    if m := _V2_BATCH.match(line):
        return _v2_batch(m, path)
    if m := _LEGACY_BATCH.match(line):
        return _legacy_batch(m, path)
    return None


def _new_record(offset: int, timestamp: int, key_size: int, value_size: int) -> dict[str, Any]:
    return {"offset": offset, "timestamp": timestamp, "key": None, "value": None, "headers": [],
            "keySize": key_size, "valueSize": value_size}  # fmt: skip


def _headers(joined: str) -> list[list[Any]]:
    return [[h, None] for h in joined.split(",")] if joined else []


def _record_tail(rec: dict[str, Any], rest: str, base64_data: bool) -> dict[str, Any]:
    """Fill ``rec`` from the text after the record metadata: ``[control part][ key: K][ payload: V]``."""
    key_text: str | None = None
    value_text: str | None = None
    if (p := rest.find(" payload: ")) >= 0:
        rest, value_text = rest[:p], rest[p + len(" payload: ") :]
    if (k := rest.find(" key: ")) >= 0:
        rest, key_text = rest[:k], rest[k + len(" key: ") :]
    if rest.strip():
        rec["control"] = rest.strip()
    elif base64_data:
        # a null key/value prints nothing; an empty one prints an empty base64 string
        rec["key"] = (key_text or "") if rec["keySize"] >= 0 else None
        rec["value"] = (value_text or "") if rec["valueSize"] >= 0 else None
    if not base64_data:
        if key_text is not None:
            rec["keyText"] = key_text
        if value_text is not None:
            rec["valueText"] = value_text
    return rec


def _record(m: re.Match[str], base64_data: bool) -> dict[str, Any]:
    rec = _new_record(int(m["offset"]), int(m["timestamp"]), int(m["keySize"]), int(m["valueSize"]))
    rest = m["rest"]
    if sh := _SEQ_HEADERS.match(rest):
        rec["sequence"] = int(sh["sequence"])
        rec["headers"] = _headers(sh["headers"])
        rest = rest[sh.end() :]
    if lg := _LEGACY_REC.match(rest):
        rec["isValid"] = _BOOL[lg["isValid"]]
        rec["crc"] = int(lg["crc"])
        rest = rest[lg.end() :]
    return _record_tail(rec, rest, base64_data)


_TS_TYPES = ("CreateTime", "LogAppendTime", "NoTimestampType")
_HEADER_KEYS = re.compile(r" headerKeys: \[(.*?)\]")


def _record_generic(line: str, base64_data: bool) -> dict[str, Any] | None:
    """Record lines of older releases (2.x: ``| offset: 0 isValid: true crc: null keySize: -1 valueSize: 2
    CreateTime: 1 baseOffset: 0 ... sequence: -1 headerKeys: [] payload: ...``): fields in any order."""
    body = line[2:]
    if (h := _HEADER_KEYS.search(body)) is not None:
        meta, rest = body[: h.start()], body[h.end() :]
    else:
        cut = min((i for i in (body.find(" key: "), body.find(" payload: ")) if i >= 0), default=len(body))
        meta, rest = body[:cut], body[cut:]
    fields = {k.lower(): v for k, v in _FIELDS.findall(meta)}
    ts_type = next((t.lower() for t in _TS_TYPES if t.lower() in fields), None)
    if ts_type is None or not {"offset", "keysize", "valuesize"} <= fields.keys():
        return None
    rec = _new_record(int(fields["offset"]), int(fields[ts_type]), int(fields["keysize"]), int(fields["valuesize"]))
    if h is not None:
        rec["headers"] = _headers(h[1])
    if "sequence" in fields:
        rec["sequence"] = int(fields["sequence"])
    return _record_tail(rec, rest, base64_data)


def _finish_legacy(batch: dict[str, Any]) -> None:
    records = batch.get("records")
    if batch["magic"] < 2 and records:
        batch["baseOffset"] = records[0]["offset"]
        batch["count"] = len(records)


def parse_dump_output(stdout: str, stderr: str = "", *, base64_data: bool = True, deep: bool = True) -> DumpRun:
    """Parse DumpLogSegments stdout (+ stderr reports) into :class:`DumpRun`.

    With ``deep`` every batch gets a ``records`` list (empty for batches without records, e.g. the empty
    batches the cleaner keeps for producer state); without it only batches followed by record lines do.
    """
    files: list[FileDump] = []
    cur: FileDump | None = None
    batch: dict[str, Any] | None = None
    for line in stdout.splitlines():
        if line.startswith("Dumping "):
            if batch is not None:
                _finish_legacy(batch)
            batch = None
            path = line[len("Dumping ") :]
            cur = FileDump(path=path, kind=_kind(path))
            files.append(cur)
            continue
        if cur is None:
            continue
        if line.startswith("| ") or line == "|":
            m = _RECORD.match(line)
            rec = _record(m, base64_data) if m is not None else _record_generic(line, base64_data)
            if rec is None or batch is None:
                cur.unparsed.append(line)
            else:
                batch.setdefault("records", []).append(rec)
            continue
        if cur.kind in ("log", "checkpoint"):
            if (started := _batch_line(line, cur.path)) is not None:
                if batch is not None:
                    _finish_legacy(batch)
                batch = started
                if deep:
                    batch["records"] = []
                cur.batches.append(batch)
            elif m := _INVALID.match(line):
                cur.invalid_bytes = int(m[1])
            elif line.startswith(("Log starting offset:", "Starting offset:", "Snapshot end offset:", "KRaft bootstrap snapshot")):
                cur.header = line
            elif line:
                cur.unparsed.append(line)
            continue
        if line == f"{cur.path} is empty.":
            cur.empty = True
        elif line == f"{cur.path} passed sanity check.":
            cur.passed_sanity_check = True
        elif cur.kind == "index" and (m := _INDEX.match(line)):
            cur.entries.append({"offset": int(m["offset"]), "position": int(m["position"])})
        elif cur.kind == "timeindex" and (m := _TIMEINDEX.match(line)):
            cur.entries.append({"timestamp": int(m["timestamp"]), "offset": int(m["offset"])})
        elif cur.kind in ("txnindex", "snapshot") and line.strip():
            cur.entries.append({k: _scalar(v) for k, v in _FIELDS.findall(line)})
        elif line:
            cur.unparsed.append(line)
    if batch is not None:
        _finish_legacy(batch)
    run = DumpRun(files=files, stderr=stderr)
    _parse_stderr(run, stderr)
    return run


def _scalar(text: str) -> Any:
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if text.startswith("OptionalLong"):
        return _opt_long(text)
    return _BOOL.get(text, text)


def _parse_stderr(run: DumpRun, stderr: str) -> None:
    by_abs = {str(Path(f.path).absolute()): f for f in run.files}
    target: list[tuple[int, int]] | None = None
    for line in stderr.splitlines():
        head = None
        for prefix, attr in (
            ("Non-consecutive offsets in ", "non_consecutive"),
            ("Mismatches in :", "index_mismatches"),
            ("Found timestamp mismatch in :", "timestamp_mismatches"),
            ("Found out of order timestamp in :", "out_of_order_timestamps"),
        ):
            if line.startswith(prefix):
                head = (line[len(prefix) :].strip(), attr)
                break
        if head is not None:
            fd = by_abs.get(head[0])
            target = getattr(fd, head[1]) if fd is not None else None
            continue
        if line.startswith("The following indexed offsets are not found in the log."):
            target = run.timeindex_not_found
            continue
        m = _PAIR_NONCONSEC.match(line) or _PAIR_INDEX.match(line) or _PAIR_TS.match(line) or _PAIR_NOTFOUND.match(line)
        if m and target is not None:
            # the tool prints these lists newest first (Scala list prepend): restore discovery order
            target.insert(0, (int(m[1]), int(m[2])))
        elif not line.startswith(" "):
            target = None


def kafkalog_batches(run: DumpRun, *, records: bool = True) -> list[dict[str, Any]]:
    """The batches of ``run`` restricted to the ``kafkalog dump --json`` keys (records: the five record keys)."""
    out = []
    for b in run.batches():
        d = {k: b[k] for k in BATCH_KEYS}
        if records and "records" in b:
            d["records"] = [{k: r[k] for k in RECORD_KEYS} for r in b["records"]]
        out.append(d)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kafkalog.compat.tools 4.3.1 FILE...``: DumpLogSegments parsed to JSON lines."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m kafkalog.compat.tools")
    parser.add_argument("version")
    parser.add_argument("files", nargs="+")
    parser.add_argument("--shallow", action="store_true", help="no --deep-iteration")
    parser.add_argument("--decoder", choices=sorted(_DECODER_FLAGS))
    args = parser.parse_args(argv)
    try:
        run = dump_log_segments(args.version, args.files, deep=not args.shallow, decoder=args.decoder)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for f in run.files:
        for b in f.batches:
            print(json.dumps(b))
        for e in f.entries:
            print(json.dumps({"file": f.path, **e}))
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------------------ Kafka's own compression
_COMPRESS_SOURCE = """\
package io.kafkalog.compat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.utils.ByteBufferOutputStream;

/** Compress files through Kafka's Compression classes (stdin: "codec level|default magic infile outfile"). */
public class CompressWithKafka {
    public static void main(String[] args) throws Exception {
        BufferedReader r = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = r.readLine()) != null) {
            String[] a = line.trim().split(" ");
            if (a.length < 5) continue;
            byte[] in = Files.readAllBytes(Paths.get(a[3]));
            Compression c = build(a[0], a[1]);
            ByteBufferOutputStream bb = new ByteBufferOutputStream(Math.max(1024, in.length / 2));
            try (OutputStream os = c.wrapForOutput(bb, Byte.parseByte(a[2]))) {
                int p = 0;  // in small writes, as MemoryRecordsBuilder writes records field by field
                while (p < in.length) { int n = Math.min(97, in.length - p); os.write(in, p, n); p += n; }
            }
            ByteBuffer out = bb.buffer();
            out.flip();
            byte[] o = new byte[out.remaining()];
            out.get(o);
            Files.write(Paths.get(a[4]), o);
        }
    }

    static Compression build(String codec, String level) {
        boolean dflt = level.equals("default");
        int l = dflt ? 0 : Integer.parseInt(level);
        switch (codec) {
            case "gzip": return dflt ? Compression.gzip().build() : Compression.gzip().level(l).build();
            case "snappy": return Compression.snappy().build();
            case "lz4": return dflt ? Compression.lz4().build() : Compression.lz4().level(l).build();
            case "zstd": return dflt ? Compression.zstd().build() : Compression.zstd().level(l).build();
            default: throw new IllegalArgumentException("unknown codec " + codec);
        }
    }
}
"""


def compress_with_kafka(version: str, tasks: Sequence[tuple[str, int | None, int, bytes]], work: Path) -> list[bytes]:
    """``tasks`` -- ``(codec name, level or None for Kafka's default, magic, data)`` -- compressed by Kafka
    ``version``'s own ``Compression`` classes (3.8 and later: the builders with levels, KIP-390) on the JDK, in one
    JVM. Returns the compressed bytes per task, in order."""
    if jars.parse_version(version) < (3, 8):
        raise HarnessError(f"Kafka {version} has no Compression builders (3.8 and later have)")
    libs = jars.ensure_kafka(version)
    out = jars.kafka_home(version) / "kafkalog-tools"
    if not (out / "io" / "kafkalog" / "compat" / "CompressWithKafka.class").is_file():
        src = out / "src" / "CompressWithKafka.java"
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(_COMPRESS_SOURCE)
        proc = subprocess.run([jars.javac_executable(), "-nowarn", "--release", "11", "-cp", jars.classpath(libs),
                               "-d", str(out), str(src)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ToolError(f"javac failed for the compression helper: {proc.stderr.strip()[-1500:]}")
    work.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (codec, level, magic, data) in enumerate(tasks):
        (work / f"{i}.in").write_bytes(data)
        lines.append(f"{codec} {'default' if level is None else level} {magic} {work / f'{i}.in'} {work / f'{i}.out'}")
    proc = subprocess.run([jars.java_executable(), "-cp", f"{out}:{jars.classpath(libs)}",
                           "io.kafkalog.compat.CompressWithKafka"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, check=False, timeout=600)
    if proc.returncode != 0:
        raise ToolError(f"Kafka {version}'s compression failed: {proc.stderr.strip()[-1500:]}")
    return [(work / f"{i}.out").read_bytes() for i in range(len(tasks))]
