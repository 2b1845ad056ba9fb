"""Differential conformance scenarios: kafkalog (or any Kafka-compatible writer/reader) against a real Apache
Kafka broker, for ``kafkalog conformance`` and the ``kafka`` tests.

Each scenario is a library function ``scenario(factory, workdir, version, mode="kraft") -> ScenarioResult``:
``factory`` starts brokers (:class:`LocalBrokerFactory`, or the pytest plugin's ``broker_factory``), ``workdir``
receives its data dirs (and the brokers' logs, kept for a failing run). A scenario never raises for a
difference: every mismatch becomes a line in ``ScenarioResult.problems``; an exception that stops it (a broker
that does not start, a tool that crashes) becomes ``ScenarioResult.error``. The brokers a scenario started are
killed when it ends (its data dirs stay). Every scenario runs in KRaft and ZooKeeper mode (Kafka 4.3.1, 3.9.2,
and 2.8.2 in ZooKeeper mode were run).

Scenarios (:data:`SCENARIOS`):

* ``kafka-writes-kafkalog-reads``: both clients produce (every codec, headers incl. null values, null keys,
  tombstones, idempotent producers, a committed and an aborted transaction, a LogAppendTime topic); after a
  clean stop ``dump_log(deep=True)`` must equal DumpLogSegments' deep iteration field by field (batch headers,
  CRCs, positions, records, control markers) and equal what the producers sent, at the acknowledged offsets.
* ``kafkalog-writes-kafka-serves``: a topic is created and the broker stopped; kafkalog's ``LogWriter`` appends
  batches into the broker's partition dir (several segments, every codec, headers, null keys, tombstones,
  an idempotent producer, a committed and an aborted transaction with markers, plus a LogAppendTime topic);
  ``kafkalog flush`` writes the checkpoints; the segments pass DumpLogSegments ``--verify-index-only`` and
  ``--index-sanity-check``; the restarted broker performs no recovery and serves exactly those records at
  the same offsets to kafka-python and confluent-kafka, read_uncommitted and read_committed (aborted hidden).
* ``index-rebuild``: the closed segments' ``.index``/``.timeindex``/``.txnindex`` are deleted, the broker
  rebuilds them at start; kafkalog's recovery-time rebuild must equal them byte for byte.
* ``recovery``: SIGKILL while a producer sends, a torn last batch; the broker recovers copy A, ``kafkalog repair
  --kafka-exact`` + ``kafkalog flush`` copy B; every file must match (:func:`compare_recovered_dirs`).

Compaction is not a scenario here: its differential recipe lives in ``tests/kafka/test_cleaner_diff.py``.
"""

from __future__ import annotations

import base64
import filecmp
import os
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kafkalog.compat import jars
from kafkalog.compat.broker import Brokers, KafkaBroker, Mode, make_broker
from kafkalog.compat.clients import (
    CLIENTS,
    CODECS,
    Produced,
    Record,
    consume,
    create_topic,
    produce,
    producer,
)
from kafkalog.compat.tools import BATCH_KEYS, dump_log_segments
from kafkalog.storage.files.checkpoints import read_offset_checkpoint
from kafkalog.storage.files.clean_shutdown import CleanShutdownMarker
from kafkalog.storage.files.leader_epoch import read_leader_epoch_checkpoint
from kafkalog.storage.files.partition_metadata import read_partition_metadata
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.records import LogScanner

# --------------------------------------------------------------------------------------------- results


@dataclass
class ScenarioResult:
    """What one scenario compared and found. ``passed`` is False on any problem or error."""

    scenario: str
    version: str
    mode: str
    compared: str
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    skipped: str | None = None  # why the scenario does not apply to this mode (see Scenario.modes)
    #: what the scenario built, for callers that look closer (tests); not part of :meth:`to_json`
    artifacts: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def passed(self) -> bool:
        return self.error is None and not self.problems and self.skipped is None

    @property
    def status(self) -> str:
        return "skip" if self.skipped is not None else "pass" if self.passed else "FAIL"

    @property
    def detail(self) -> str:
        """One paragraph for a table: the error or the first problems (empty when passed)."""
        if self.skipped is not None:
            return self.skipped
        lines = ([self.error] if self.error else []) + self.problems[:5]
        if len(self.problems) > 5:
            lines.append(f"... and {len(self.problems) - 5} more")
        return "\n".join(lines)

    def summary(self) -> str:
        """``compared`` plus the counters, e.g. ``dump_log vs DumpLogSegments vs producers (412 records ...)``."""
        if not self.stats:
            return self.compared
        return f"{self.compared} ({', '.join(f'{v} {k}' for k, v in self.stats.items())})"

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "kafkaVersion": self.version, "mode": self.mode,
                "status": self.status, "passed": self.passed, "compared": self.compared,
                "stats": {_camel(k): v for k, v in self.stats.items()},
                "seconds": round(self.seconds, 1), "problems": self.problems, "error": self.error,
                "skipped": self.skipped}


class Check:
    """Collects problems and counters while a scenario runs."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.stats: dict[str, int] = {}
        self.artifacts: dict[str, Any] = {}

    def fail(self, message: str) -> None:
        self.problems.append(message)

    def count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    def equal(self, what: str, got: Any, want: Any) -> bool:
        if got == want:
            return True
        self.fail(f"{what}: {describe_difference(got, want)}")
        return False


def _camel(name: str) -> str:
    """A counter's name (``records consumed``) as a JSON key (``recordsConsumed``)."""
    first, *rest = name.replace("-", " ").replace("_", " ").split()
    return first + "".join(w[:1].upper() + w[1:] for w in rest)


def _short(obj: Any, limit: int = 240) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_difference(got: Any, want: Any) -> str:
    """Where two values differ, briefly: for sequences the first differing index, for dicts the first key."""
    if isinstance(got, Sequence) and isinstance(want, Sequence) and not isinstance(got, str | bytes):
        for i, (a, b) in enumerate(zip(got, want, strict=False)):
            if a != b:
                return f"first difference at #{i}: {describe_difference(a, b)} (lengths {len(got)} vs {len(want)})"
        return f"lengths {len(got)} vs {len(want)}; extra: {_short(list(got[len(want):]) or list(want[len(got):]))}"
    if isinstance(got, Mapping) and isinstance(want, Mapping):
        for k in list(want) + [k for k in got if k not in want]:
            if got.get(k, "<missing>") != want.get(k, "<missing>"):
                return f"[{k!r}] {_short(got.get(k, '<missing>'))} != {_short(want.get(k, '<missing>'))}"
    return f"{_short(got)} != {_short(want)}"


# --------------------------------------------------------------------------------------------- brokers


class BrokerFactory(Protocol):
    """Starts a broker (the pytest plugin's ``BrokerFactory`` and :class:`LocalBrokerFactory` both fit)."""

    def __call__(self, version: str, *, mode: Mode = "kraft", data_dir: Path | None = None,
                 server_properties: Mapping[str, str] | None = None, start: bool = True) -> KafkaBroker: ...


class LocalBrokerFactory(Brokers):
    """Brokers under ``base`` (JVM, or containers with ``KAFKALOG_BROKER=container``); :meth:`close` kills
    whatever still runs. Use as a context manager."""

    def __init__(self, base: Path, *, backend: str | None = None, image: str | None = None) -> None:
        super().__init__()
        self.base = Path(base)
        self.backend = backend
        self.image = image

    def __call__(self, version: str, *, mode: Mode = "kraft", data_dir: Path | None = None,
                 server_properties: Mapping[str, str] | None = None, start: bool = True) -> KafkaBroker:
        if data_dir is None:
            data_dir = self.base / f"broker-{len(self.brokers)}" / "data"
        return self._made(make_broker(version, backend=self.backend, image=self.image, mode=mode,
                                      data_dir=data_dir, server_properties=server_properties), start)

    def __enter__(self) -> LocalBrokerFactory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Tracking(Brokers):
    """Wraps a factory to kill, after a scenario, the brokers it started that still run."""

    def __init__(self, factory: BrokerFactory) -> None:
        super().__init__()
        self.factory = factory

    def __call__(self, version: str, *, mode: Mode = "kraft", data_dir: Path | None = None,
                 server_properties: Mapping[str, str] | None = None, start: bool = True) -> KafkaBroker:
        return self._made(self.factory(version, mode=mode, data_dir=data_dir, server_properties=server_properties,
                                       start=False), start)


def segment_config(version: str, segment_bytes: int, **extra: str) -> dict[str, str]:
    """Topic config with a small segment size (Kafka 4.1+ refuses ``segment.bytes`` below 1 MiB and has
    ``internal.segment.bytes`` for it)."""
    key = "internal.segment.bytes" if jars.parse_version(version) >= (4, 1) else "segment.bytes"
    return {key: str(segment_bytes), **{k.replace("_", "."): v for k, v in extra.items()}}


def kafkalog_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``kafkalog ARGS`` with this interpreter (what a user runs; output captured)."""
    return subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


RECOVERY_LINES = ("Recovering unflushed segment", "no clean shutdown file was found")


def recovery_lines(log_text: str, topics: Sequence[str]) -> list[str]:
    """Broker log lines saying it recovered one of ``topics``' partitions."""
    return [line for line in log_text.splitlines() if any(s in line for s in RECOVERY_LINES)
            and any(f"{t}-" in line for t in topics)]


# --------------------------------------------------------------------------------------------- records


def sample_records(tag: str, n: int, *, ts0: int, partitions: int = 1,
                   null_header_values: bool = True) -> list[Record]:
    """Deterministic records: null keys, tombstones, empty values, headers (a null value unless the client
    cannot send one, a non-ASCII name, binary values), timestamps that step back now and then."""
    out = []
    for i in range(n):
        key = None if i % 9 == 4 else b"%s-key-%d" % (tag.encode(), i % 23)
        if key is not None and i % 11 == 7:
            value: bytes | None = None  # tombstone
        elif i % 13 == 5:
            value = b""
        else:
            value = b"%s value %d " % (tag.encode(), i) * (1 + i % 6) + bytes(range(i % 7))
        hdrs = ((), (("trace", b"t-%d" % i),),
                (("a", b"1"), ("null-value", None if null_header_values else b""), ("schl\u00fcssel", b"\x00\xff")))[i % 3]
        out.append(Record(value, key, hdrs, ts0 + i * 10 - (55 if i % 7 == 6 else 0), i % partitions))
    return out


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _headers(h: Sequence[Sequence[Any]] | None) -> tuple[tuple[str, bytes | None], ...]:
    return tuple((str(k), None if v is None else bytes(v)) for k, v in (h or ()))


# --------------------------------------------------------------------------------------------- registry

ScenarioBody = Callable[[BrokerFactory, Path, str, Mode, Check], None]


@dataclass(frozen=True)
class Scenario:
    name: str
    compares: str
    body: ScenarioBody
    modes: tuple[Mode, ...] = ("kraft", "zk")
    skip_reason: str = ""

    def __call__(self, factory: BrokerFactory, workdir: Path, version: str = jars.LATEST_4,
                 mode: Mode = "kraft") -> ScenarioResult:
        result = ScenarioResult(self.name, version, mode, self.compares)
        if mode not in self.modes:
            result.skipped = self.skip_reason or f"not available in {mode} mode"
            return result
        check = Check()
        started = time.monotonic()
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        tracked = _Tracking(factory)
        try:
            self.body(tracked, workdir, version, mode, check)
        except Exception as exc:  # a conformance run reports every failure as a result, never a traceback
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            result.error = (f"{type(exc).__name__}: {str(exc).strip()[:3000]} "
                            f"(at {Path(frame.filename).name}:{frame.lineno})")
        finally:
            tracked.close()  # the scenario is over: free the JVMs (its data dirs stay for inspection)
        result.seconds = time.monotonic() - started
        result.problems, result.stats, result.artifacts = check.problems, check.stats, check.artifacts
        return result


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, compares: str, *, modes: tuple[Mode, ...] = ("kraft", "zk"), skip_reason: str = ""):
    def register(body: ScenarioBody) -> Scenario:
        s = Scenario(name, compares, body, modes, skip_reason)
        SCENARIOS[name] = s
        return s

    return register


def run_conformance(version: str, *, mode: Mode = "kraft", scenarios: Sequence[str] | None = None,
                    workdir: Path, factory: BrokerFactory | None = None,
                    on_start: Callable[[str], None] | None = None,
                    on_result: Callable[[ScenarioResult], None] | None = None,
                    backend: str | None = None, image: str | None = None) -> list[ScenarioResult]:
    """Run ``scenarios`` (default: all) against Kafka ``version`` in ``mode``, each in ``workdir/<name>``, on
    brokers of ``backend`` (``jvm`` or ``container``; default ``KAFKALOG_BROKER``) unless ``factory`` is
    given."""
    names = list(scenarios or SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenario {unknown[0]!r} (one of {', '.join(SCENARIOS)})")
    results = []
    own = factory is None
    fac: Any = factory or LocalBrokerFactory(workdir / "brokers", backend=backend, image=image)
    try:
        for name in names:
            if on_start is not None:
                on_start(name)
            r = SCENARIOS[name](fac, workdir / name, version, mode)
            results.append(r)
            if on_result is not None:
                on_result(r)
    finally:
        if own:
            fac.close()
    return results


# ================================================================================ kafka writes, kafkalog reads

_LAT = "log-append-time"


def ours_vs_dumplogsegments(version: str, logs: Sequence[Path], check: Check) -> dict[Path, list[dict]]:
    """``dump_log(deep=True)`` of every ``.log`` in ``logs`` against DumpLogSegments' deep iteration, field by
    field (batch keys of ``kafkalog dump --json``, records' offset/timestamp/key/value/header names, control
    markers). Returns kafkalog's batch dicts per file."""
    from kafkalog.storage.records.dump import dump_log

    run = dump_log_segments(version, logs, deep=True, print_data=True)
    kafka = {Path(f.path): f for f in run.files}
    out: dict[Path, list[dict]] = {}
    for path in logs:
        path = Path(path).absolute()
        kf = kafka.get(path)
        if kf is None:
            check.fail(f"{path.name}: DumpLogSegments printed nothing for it")
            continue
        if kf.unparsed or kf.invalid_bytes:
            check.fail(f"{path}: DumpLogSegments: {kf.invalid_bytes} invalid bytes, unparsed {kf.unparsed[:2]}")
        ours = list(dump_log(path, deep=True))
        out[path] = ours
        if bad := [d for d in ours if "event" in d or "error" in d]:
            check.fail(f"{path}: kafkalog reports {_short(bad[0])}")
        theirs = [{k: b[k] for k in BATCH_KEYS} | {"records": [
            {"offset": r["offset"], "timestamp": r["timestamp"], "key": r["key"], "value": r["value"],
             "headers": [h[0] for h in r["headers"]], "control": r.get("control")} for r in b.get("records", [])]}
            for b in kf.batches]
        mine = []
        for d in ours:
            if "event" in d or "error" in d:
                continue
            recs = []
            for r in d["records"]:
                ctl = None
                if d["isControl"]:
                    ctl = f"endTxnMarker: {r.get('controlType')} coordinatorEpoch: {r.get('coordinatorEpoch')}"
                recs.append({"offset": r["offset"], "timestamp": r["timestamp"],
                             "key": None if d["isControl"] else _b64(r["key"]),
                             "value": None if d["isControl"] else _b64(r["value"]),
                             "headers": [h for h, _ in r["headers"]], "control": ctl})
            mine.append({k: d[k] for k in BATCH_KEYS} | {"file": str(path), "records": recs})
        check.equal(f"{path.parent.name}/{path.name}: kafkalog dump vs DumpLogSegments", mine, theirs)
        check.count("batches", len(mine))
    return out


def _kafka_writes_kafkalog_reads(factory: BrokerFactory, workdir: Path, version: str, mode: Mode,
                                 check: Check) -> None:
    broker = factory(version, mode=mode, data_dir=workdir / "data")
    bs = broker.bootstrap_servers
    ts0 = int(time.time() * 1000) - 3_600_000
    create_topic(bs, "produced", partitions=2)
    create_topic(bs, _LAT, partitions=1, config={"message.timestamp.type": "LogAppendTime"})
    sent: list[Produced] = []
    for codec in CODECS:
        for client in CLIENTS:
            recs = sample_records(f"{codec}-{client}", 24, ts0=ts0, partitions=2,
                                  null_header_values=client == "confluent")
            sent += produce(bs, "produced", recs, client=client, compression=codec, flush_every=8,
                            idempotent=codec in ("lz4", "zstd"))
    sent += produce(bs, "produced", sample_records("txn-commit", 20, ts0=ts0, partitions=2), client="confluent",
                    compression="lz4", flush_every=10, transactional_id="conformance-commit")
    sent += produce(bs, "produced", sample_records("txn-abort", 12, ts0=ts0, partitions=2,
                                                   null_header_values=False),
                    client="kafka-python", compression="gzip", flush_every=6,
                    transactional_id="conformance-abort", transaction="abort")
    sent += produce(bs, _LAT, sample_records("lat-a", 15, ts0=ts0, null_header_values=False),
                    client="kafka-python", compression="snappy", flush_every=5)
    sent += produce(bs, _LAT, sample_records("lat-b", 15, ts0=ts0), client="confluent", flush_every=5)
    broker.stop()

    logs = sorted(p for t in ("produced", _LAT) for p in broker.data_dir.glob(f"{t}-*/*.log"))
    ours = ours_vs_dumplogsegments(version, logs, check)

    want = {(p.topic, p.partition, p.offset): p for p in sent}
    controls = 0
    for path, batches in ours.items():
        topic, _, part = path.parent.name.rpartition("-")
        for d in batches:
            if d.get("isControl"):
                controls += 1
                continue
            for r in d.get("records", []):
                p = want.pop((topic, int(part), r["offset"]), None)
                if p is None:
                    check.fail(f"{path.parent.name} offset {r['offset']}: in the log but never produced")
                    continue
                ts = p.timestamp if topic == _LAT else p.create_timestamp
                check.equal(f"{path.parent.name} offset {r['offset']} vs producer ({p.client}, {p.codec})",
                            (r["key"], r["value"], _headers(r["headers"]), r["timestamp"]),
                            (p.key, p.value, _headers(p.headers), ts))
                check.count("records")
    for (t, partition, off), p in sorted(want.items())[:5]:
        check.fail(f"{t}-{partition} offset {off}: acknowledged to {p.client} but not in the log")
    check.count("control batches", controls)
    if controls < 2:
        check.fail(f"expected a COMMIT and an ABORT marker in the log, found {controls} control batches")


kafka_writes_kafkalog_reads = scenario(
    "kafka-writes-kafkalog-reads",
    "what producers sent = dump_log --deep = DumpLogSegments --deep-iteration",
)(_kafka_writes_kafkalog_reads)


# ================================================================================ kafkalog writes, Kafka serves


@dataclass
class WrittenRecord:
    """A record kafkalog appended, as a consumer must see it."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int
    timestamp_type: str
    aborted: bool = False


@dataclass
class WrittenPartition:
    topic: str
    partition_dir: Path
    records: list[WrittenRecord] = field(default_factory=list)
    log_end_offset: int = 0
    segments: int = 0
    control_batches: int = 0

    def expected(self, isolation: str) -> list[tuple]:
        return [(r.offset, r.key, r.value, r.headers, r.timestamp, r.timestamp_type) for r in self.records
                if isolation == "read_uncommitted" or not r.aborted]


def write_partition(pdir: Path, *, topic: str, topic_config: Mapping[str, str], now_ms: int,
                    leader_epoch: int, topic_id: str | None) -> WrittenPartition:
    """Append a fixed mix of batches to ``pdir`` with :class:`LogWriter` (as the broker's leader appends),
    returning what consumers must read. ``topic_config``: the topic's kafkalog LogConfig overrides."""
    from kafkalog.storage.codec.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
    from kafkalog.storage.config.log_config import LogConfig
    from kafkalog.storage.engine.writer import LogWriter
    from kafkalog.storage.records import build_batch, build_end_txn_marker

    config = LogConfig.from_topic_props(dict(topic_config))
    lat = config.log_append_time
    out = WrittenPartition(topic, pdir)
    ts0 = now_ms - 3_600_000
    n = 0
    pid_idem, pid_commit, pid_abort = 7_000_001, 7_000_002, 7_000_003
    seqs: dict[int, int] = {}
    open_txn: dict[int, list[WrittenRecord]] = {}

    with LogWriter(pdir, config, topic_id=topic_id, leader_epoch=leader_epoch, now_ms=now_ms) as w:

        def data(codec: int, count: int, pid: int = -1, epoch: int = -1, txn: bool = False) -> None:
            nonlocal n
            recs = sample_records(f"{topic}-{n}", count, ts0=ts0 + n * 100)
            n += 1
            seq = -1
            if pid >= 0:
                seq = seqs.get(pid, 0)
                seqs[pid] = seq + count
            batch = build_batch([(None, r.timestamp, r.key, r.value, list(r.headers)) for r in recs], codec=codec,
                                producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn)
            info = w.append(batch)
            written = [WrittenRecord(info.first_offset + i, r.key, r.value, r.headers,
                                     now_ms if lat or r.timestamp is None else r.timestamp,
                                     "LogAppendTime" if lat else "CreateTime") for i, r in enumerate(recs)]
            out.records += written
            if txn:
                open_txn.setdefault(pid, []).extend(written)

        def marker(pid: int, epoch: int, commit: bool) -> None:
            w.append(build_end_txn_marker(offset=0, producer_id=pid, producer_epoch=epoch, coordinator_epoch=3,
                                          commit=commit, timestamp=now_ms - 1000))
            out.control_batches += 1
            for r in open_txn.pop(pid, []):
                r.aborted = not commit

        codecs = (NONE, GZIP, SNAPPY, LZ4, ZSTD)
        for i, codec in enumerate(codecs * 2):
            data(codec, 8 + 3 * i)
        for codec in (LZ4, NONE, ZSTD):  # an idempotent producer
            data(codec, 10, pid_idem, 2)
        data(GZIP, 9, pid_commit, 0, txn=True)  # a committed transaction
        data(NONE, 6, pid_commit, 0, txn=True)
        marker(pid_commit, 0, commit=True)
        data(SNAPPY, 7, pid_abort, 1, txn=True)  # an aborted one, plain records appended while it is open
        data(NONE, 5)
        data(ZSTD, 8, pid_abort, 1, txn=True)
        marker(pid_abort, 1, commit=False)
        for codec in codecs:
            data(codec, 12)
        data(NONE, 4, pid_idem, 2)
        out.log_end_offset = w.log_end_offset
        out.segments = len(w.segments)
    return out


def _leader_epoch(pdir: Path) -> int:
    entries = read_leader_epoch_checkpoint(pdir / "leader-epoch-checkpoint").entries
    return entries[-1].epoch if entries else 0


def check_written_indexes(version: str, pdirs: Sequence[Path], check: Check) -> None:
    """kafkalog-written segments and indexes through DumpLogSegments: ``--verify-index-only`` finds no
    mismatch, ``--index-sanity-check`` passes every index, every batch is valid and no byte is left over."""
    indexes = sorted(p for d in pdirs for p in d.iterdir() if p.suffix in (".index", ".timeindex"))
    logs = sorted(p for d in pdirs for p in d.glob("*.log"))
    verify = dump_log_segments(version, indexes, deep=False, print_data=False, verify_index_only=True)
    check.equal("DumpLogSegments --verify-index-only: indexed offsets not found", verify.timeindex_not_found, [])
    for f in verify.files:
        name = f"{Path(f.path).parent.name}/{Path(f.path).name}"
        for what, got in (("index mismatches", f.index_mismatches), ("timestamp mismatches", f.timestamp_mismatches),
                          ("out-of-order timestamps", f.out_of_order_timestamps), ("unparsed", f.unparsed)):
            check.equal(f"DumpLogSegments --verify-index-only {name}: {what}", got, [])
    sanity = dump_log_segments(version, [*indexes, *logs], deep=False, print_data=False, index_sanity_check=True)
    for f in sanity.files:
        name = f"{Path(f.path).parent.name}/{Path(f.path).name}"
        if f.kind == "log":
            if f.invalid_bytes or not all(b["isValid"] for b in f.batches) or f.unparsed:
                check.fail(f"DumpLogSegments {name}: invalid batches or {f.invalid_bytes} invalid bytes")
            check.count("segments")
        elif not (f.passed_sanity_check or f.empty):
            check.fail(f"DumpLogSegments --index-sanity-check {name}: did not pass")
        else:
            check.count("indexes checked")


def _consumed(bs: str, topic: str, client: str, isolation: str, count: int) -> list[tuple]:
    got = consume(bs, topic, client=client, isolation_level=isolation, count=count, timeout=60)  # type: ignore[arg-type]
    return [(c.offset, c.key, c.value, _headers(c.headers), c.timestamp, c.timestamp_type) for c in got]


def _kafkalog_writes_kafka_serves(factory: BrokerFactory, workdir: Path, version: str, mode: Mode,
                                  check: Check) -> None:
    broker = factory(version, mode=mode, data_dir=workdir / "data")
    prefix = f"kw{int(time.time() * 1000) % 100000}"
    topics = {f"{prefix}-create": {},
              f"{prefix}-appendtime": {"message.timestamp.type": "LogAppendTime"}}
    kconfig = {"segment.bytes": "8192", "index.interval.bytes": "1024"}
    for t, cfg in topics.items():
        create_topic(broker.bootstrap_servers, t, partitions=1,
                     config={**segment_config(version, 8192), "index.interval.bytes": "1024", **cfg})
    deadline = time.monotonic() + 30
    while not all((broker.partition_dir(t) / "leader-epoch-checkpoint").exists() for t in topics):
        if time.monotonic() > deadline:
            raise TimeoutError("the broker created no partition dir for the new topics")
        time.sleep(0.2)
    # the topic id file follows the log (Kafka 2.8 in ZooKeeper mode may write none: then kafkalog writes none)
    deadline = time.monotonic() + 5
    while not all((broker.partition_dir(t) / "partition.metadata").exists() for t in topics):
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    broker.stop()

    now_ms = int(time.time() * 1000)
    written = []
    for t, cfg in topics.items():
        pdir = broker.partition_dir(t)
        meta = pdir / "partition.metadata"
        topic_id = read_partition_metadata(meta).topic_id if meta.exists() else None
        wp = write_partition(pdir, topic=t, topic_config={**kconfig, **cfg}, now_ms=now_ms,
                             leader_epoch=_leader_epoch(pdir), topic_id=topic_id)
        if topic_id is not None:
            check.equal(f"{t}: partition.metadata topic id after kafkalog wrote",
                        read_partition_metadata(meta).topic_id, topic_id)
        if wp.segments < 3:
            check.fail(f"{t}: expected several segments, kafkalog wrote {wp.segments}")
        written.append(wp)
        check.count("records written", len(wp.records))
    check.artifacts["written"] = written
    flush = kafkalog_cli("flush", str(broker.data_dir))
    if flush.returncode != 0:
        check.fail(f"kafkalog flush exited {flush.returncode}: {(flush.stdout + flush.stderr).strip()[-500:]}")
    check_written_indexes(version, [wp.partition_dir for wp in written], check)

    start = broker.log_size()
    broker.start()
    if lines := recovery_lines(broker.log_since(start), list(topics)):
        check.fail(f"the broker recovered kafkalog's segments after `kafkalog flush`: {lines[0]}")
    for wp in written:
        for isolation in ("read_uncommitted", "read_committed"):
            want = wp.expected(isolation)
            for client in CLIENTS:
                got = _consumed(broker.bootstrap_servers, wp.topic, client, isolation, len(want))
                check.equal(f"{wp.topic} {client} {isolation}", got, want)
                check.count("records consumed", len(got))


kafkalog_writes_kafka_serves = scenario(
    "kafkalog-writes-kafka-serves",
    "kafkalog's segments pass DumpLogSegments checks; broker serves them (2 clients x 2 isolations)",
)(_kafkalog_writes_kafka_serves)


# ================================================================================ index rebuild

REBUILD_SEGMENT = 6000
REBUILD_INTERVAL = 512


def delete_closed_segment_indexes(data_dir: Path, topics: Sequence[str]) -> list[Path]:
    """Delete the ``.index``/``.timeindex``/``.txnindex`` of every closed segment of ``topics``' partition 0;
    returns the deleted paths relative to ``data_dir``."""
    deleted = []
    for t in topics:
        for log in sorted((data_dir / f"{t}-0").glob("*.log"))[:-1]:
            for suffix in (".index", ".timeindex", ".txnindex"):
                p = log.with_suffix(suffix)
                if p.exists():
                    p.unlink()
                    deleted.append(p.relative_to(data_dir))
    return deleted


def _first_difference(a: bytes, b: bytes) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def compare_rebuilt_indexes(orig_pdir: Path, rebuilt_pdir: Path, *, index_interval_bytes: int,
                            check_leader_index: bool = True) -> tuple[int, list[str]]:
    """kafkalog's recovery-time rebuild (``PartitionLog.rebuild_segment_indexes``) of the closed segments in
    ``orig_pdir`` against the files the broker rebuilt in ``rebuilt_pdir``: (segments compared, problems).
    ``check_leader_index``: the leader-written ``.index`` in ``orig_pdir`` must equal them too (true when every
    produce request held one batch)."""
    problems: list[str] = []
    compared = 0
    with PartitionLog(orig_pdir) as log:
        for seg in log.segments[:-1]:
            r = log.rebuild_segment_indexes(seg, index_interval_bytes=index_interval_bytes)
            if r.error is not None or r.valid_bytes != seg.size:
                problems.append(f"{seg.path.name}: kafkalog's rebuild stopped at {r.valid_bytes}/{seg.size}: {r.error}")
            kafka_index = (rebuilt_pdir / seg.index_path.name).read_bytes()
            kafka_time = (rebuilt_pdir / seg.time_index_path.name).read_bytes()
            txn = rebuilt_pdir / seg.txn_index_path.name
            kafka_txn = txn.read_bytes() if txn.exists() else b""
            pairs = [(seg.index_path.name, r.offset_index.to_bytes(trim=True), kafka_index),
                     (seg.time_index_path.name, r.time_index.to_bytes(trim=True), kafka_time)]
            if r.txn_index is None:
                problems.append(f"{orig_pdir.name}/{txn.name}: kafkalog did not rebuild the transaction index")
            else:
                pairs.append((txn.name, r.txn_index.to_bytes(), kafka_txn))
            if check_leader_index:
                pairs.append((f"leader-written {seg.index_path.name}", seg.index_path.read_bytes(), kafka_index))
            for name, ours, theirs in pairs:
                if ours != theirs:
                    problems.append(f"{orig_pdir.name}/{name}: {len(ours)} bytes from kafkalog != {len(theirs)} "
                                    f"bytes from Kafka (first difference at byte {_first_difference(ours, theirs)})")
            compared += 1
    return compared, problems


def _index_rebuild(factory: BrokerFactory, workdir: Path, version: str, mode: Mode, check: Check) -> None:
    b = factory(version, mode=mode, data_dir=workdir / "data")
    topics = ("plain", "lz4", "txn")
    cfg = segment_config(version, REBUILD_SEGMENT, index_interval_bytes=str(REBUILD_INTERVAL))
    for t in topics:
        create_topic(b.bootstrap_servers, t, partitions=1, config=cfg)
    recs = [Record(value=b"value-%05d-" % i + b"x" * (i % 120), key=b"k%d" % (i % 17),
                   headers=(("h", b"%d" % i),), partition=0) for i in range(500)]
    produce(b.bootstrap_servers, "plain", recs, flush_every=7)
    produce(b.bootstrap_servers, "lz4", recs, flush_every=11, compression="lz4")
    for i, (tid, outcome) in enumerate((("t1", "commit"), ("t1", "abort"), ("t2", "commit"), ("t2", "abort"))):
        produce(b.bootstrap_servers, "txn", recs[i * 60:(i + 1) * 60], transactional_id=tid, flush_every=9,
                client="confluent", transaction=outcome)  # type: ignore[arg-type]
    b.stop()
    orig = workdir / "orig"
    shutil.copytree(b.data_dir, orig, symlinks=True)
    deleted = delete_closed_segment_indexes(b.data_dir, topics)
    if not any(p.suffix == ".txnindex" for p in deleted):
        check.fail("no closed segment of the txn topic has a .txnindex (aborted transactions expected)")
    start = b.log_size()
    b.start()
    b.stop()
    if "rebuilding index files" not in b.log_since(start):
        check.fail("the broker did not say it rebuilt index files")
    check.count("index files deleted", len(deleted))
    for t in topics:
        compared, problems = compare_rebuilt_indexes(orig / f"{t}-0", b.data_dir / f"{t}-0",
                                                     index_interval_bytes=REBUILD_INTERVAL)
        for p in problems:
            check.fail(p)
        if compared < 2:
            check.fail(f"{t}: only {compared} closed segments")
        check.count("segments compared", compared)


index_rebuild = scenario(
    "index-rebuild",
    "broker's index rebuild at start = kafkalog's, byte for byte",
)(_index_rebuild)


# ================================================================================ recovery

RECOVERY_BROKER_PROPS = {
    "log.initial.task.delay.ms": "0",
    "log.flush.offset.checkpoint.interval.ms": "500",
    "log.flush.start.offset.checkpoint.interval.ms": "500",
    "log.index.interval.bytes": "512",
}
#: files compared by meaning, not bytes (see :func:`compare_recovered_dirs`)
SEMANTIC = {".kafka_cleanshutdown", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
            "leader-epoch-checkpoint", "meta.properties"}
SKIP = {".lock", "replication-offset-checkpoint"}


def _files(root: Path) -> dict[str, Path]:
    out = {}
    for dp, dns, fns in os.walk(root):
        dns[:] = [x for x in dns if not x.startswith("__cluster_metadata")]
        for f in fns:
            # ``.deleted``: logically gone, physically removed file.delete.delay.ms later or at the next load
            # ``X.tmp`` of a skipped file: the broker was killed while writing it (every 5 s), its next write
            # renames a new ``X.tmp`` over ``X``; kafkalog does not write ``X`` (nor a data dir's other ``.tmp``)
            if f in SKIP or f.endswith(".deleted") or f == "bootstrap.checkpoint" or f.removesuffix(".tmp") in SKIP:
                continue
            p = Path(dp) / f
            out[str(p.relative_to(root))] = p
    return out


def _properties(path: Path) -> dict[str, str]:
    lines = (line.strip() for line in path.read_text(errors="replace").splitlines())
    return dict(line.split("=", 1) for line in lines if line and not line.startswith(("#", "!")) and "=" in line)


def log_end_offset(pdir: Path) -> int:
    segs = sorted(pdir.glob("*.log"))
    nxt = int(segs[-1].stem)
    for b in LogScanner(memoryview(segs[-1].read_bytes())):
        nxt = b.next_offset
    return nxt


def compare_recovered_dirs(a: Path, b: Path) -> list[str]:
    """Differences between a broker-recovered data dir ``a`` and a kafkalog-repaired one ``b``: every file byte
    for byte, except what the broker's restart necessarily changes, compared by meaning:

    * ``.kafka_cleanshutdown``: the broker writes its broker epoch (from the controller), kafkalog keeps -1;
      Kafka <= 3.6 writes it empty (only its presence counts);
    * ``recovery-point-offset-checkpoint``/``log-start-offset-checkpoint``: same entries, any order;
    * ``meta.properties``: same properties (Kafka 2.8 rewrites it, with a date comment, at every start);
    * ``leader-epoch-checkpoint``: becoming leader after the restart appends ``(new epoch, log end offset)``;
    * ``replication-offset-checkpoint`` and ``__cluster_metadata-0`` (replica manager, controller) are skipped, and
      the ``.tmp`` of a skipped file (the kill landed while the broker wrote it);
    * ``*.deleted`` files the broker leaves behind count as absent (kafkalog deletes at once).
    """
    fa, fb = _files(a), _files(b)
    problems = [f"only in broker's copy: {k}" for k in sorted(set(fa) - set(fb))]
    problems += [f"only in kafkalog's copy: {k}" for k in sorted(set(fb) - set(fa))]
    for k in sorted(set(fa) & set(fb)):
        name = Path(k).name
        if name not in SEMANTIC:
            if not filecmp.cmp(fa[k], fb[k], shallow=False):
                problems.append(f"{k}: bytes differ ({fa[k].stat().st_size} vs {fb[k].stat().st_size})")
        elif name == ".kafka_cleanshutdown":
            ma = CleanShutdownMarker.from_bytes(fa[k].read_bytes())
            mb = CleanShutdownMarker.from_bytes(fb[k].read_bytes())
            # Kafka <= 3.6 writes an empty marker: only its presence counts
            if ma.is_json and mb.is_json and ma.version != mb.version:
                problems.append(f"{k}: {fa[k].read_bytes()!r} vs {fb[k].read_bytes()!r}")
        elif name == "meta.properties":
            pa, pb = _properties(fa[k]), _properties(fb[k])
            if pa != pb:
                problems.append(f"{k}: {pa} vs {pb}")
        elif name == "leader-epoch-checkpoint":
            ea = read_leader_epoch_checkpoint(fa[k]).entries
            eb = read_leader_epoch_checkpoint(fb[k]).entries
            leo = log_end_offset(fb[k].parent)
            while len(ea) > len(eb) and ea[-1].start_offset == leo:
                ea = ea[:-1]  # the epoch the restarted broker became leader with
            if ea != eb:
                problems.append(f"{k}: {ea} vs {eb}")
        else:
            ca, cb = read_offset_checkpoint(fa[k]), read_offset_checkpoint(fb[k])
            if ca.to_dict() != cb.to_dict() or len(ca.entries) != len(cb.entries):
                problems.append(f"{k}: {sorted(ca.to_dict().items())} vs {sorted(cb.to_dict().items())}")
    return problems


def kill_during_produce(broker: KafkaBroker, topic: str, *, partitions: int = 2, seconds: float = 1.5) -> int:
    """SIGKILL ``broker`` while a confluent idempotent producer (linger 0) sends to ``topic``; returns how
    many sends were attempted."""
    stop = threading.Event()
    sent = [0]

    def background() -> None:
        p: Any = producer(broker.bootstrap_servers, "confluent", idempotent=True, extra={"linger.ms": 0, "log_level": 0})
        try:
            while not stop.is_set():
                p._p.produce(topic, value=b"during-kill-%d" % sent[0], partition=sent[0] % partitions)
                p._p.poll(0)
                sent[0] += 1
                if sent[0] % 20 == 0:
                    time.sleep(0.005)
        except Exception:  # the broker went away (BufferError when the queue fills)
            pass
        finally:
            p.abandon()

    th = threading.Thread(target=background, daemon=True)
    th.start()
    time.sleep(seconds)
    broker.kill()
    stop.set()
    th.join(10)
    return sent[0]


def _recovery(factory: BrokerFactory, workdir: Path, version: str, mode: Mode, check: Check) -> None:
    b = factory(version, mode=mode, data_dir=workdir / "base" / "data", server_properties=RECOVERY_BROKER_PROPS)
    cfg = segment_config(version, REBUILD_SEGMENT)
    create_topic(b.bootstrap_servers, "killed", partitions=2, config=cfg)
    create_topic(b.bootstrap_servers, "txn", partitions=1, config=cfg)
    recs = [Record(value=b"value-%05d-" % i + b"x" * (i % 90), key=b"k%d" % (i % 13),
                   headers=(("h", b"%d" % i),), partition=i % 2) for i in range(400)]
    produce(b.bootstrap_servers, "killed", recs, flush_every=10, idempotent=True)
    one = [Record(r.value, r.key, r.headers, partition=0) for r in recs[:200]]
    produce(b.bootstrap_servers, "txn", one[:100], transactional_id="r1", flush_every=10, client="confluent")
    produce(b.bootstrap_servers, "txn", one[100:], transactional_id="r1", flush_every=10, client="confluent",
            transaction="abort")
    time.sleep(1.5)  # recovery-point checkpoints written (every 500 ms)
    kill_during_produce(b, "killed")
    b.close()
    base = b.data_dir
    (base / ".lock").unlink(missing_ok=True)
    a_dir, b_dir = workdir / "A" / "data", workdir / "B" / "data"
    for d in (a_dir, b_dir):
        shutil.copytree(base, d, symlinks=True)
        last = sorted((d / "killed-0").glob("*.log"))[-1]  # a torn last batch
        batches = [(x.position, x.size) for x in LogScanner(memoryview(last.read_bytes()))]
        if batches:
            pos, size = batches[-1]
            os.truncate(last, pos + size // 2)
    broker_a = factory(version, mode=mode, data_dir=a_dir, server_properties=RECOVERY_BROKER_PROPS, start=False)
    if mode == "zk":
        # ZooKeeper's state goes with copy A; the killed broker's session (and its /brokers/ids node) must
        # expire before the new broker can register: Broker.start waits for that after a kill
        shutil.copytree(base.parent / "zookeeper", a_dir.parent / "zookeeper")
        broker_a._killed_at = time.monotonic()  # type: ignore[attr-defined]
    broker_a.start()
    broker_a.stop()
    if "Recovering unflushed segment" not in broker_a.log_path.read_text(errors="replace"):
        check.fail("the broker on copy A recovered no segment")
    props = b.work_dir / "server.properties"  # the container backend has none: same setting as an override
    config = (["--server-properties", str(props)] if props.is_file()
              else ["--config", f"index.interval.bytes={RECOVERY_BROKER_PROPS['log.index.interval.bytes']}"])
    rep = kafkalog_cli("repair", "--no-backup", "--kafka-exact", *config, str(b_dir))
    if rep.returncode != 1:
        check.fail(f"kafkalog repair exited {rep.returncode} (1 = repaired expected): "
                   f"{(rep.stdout + rep.stderr).strip()[-500:]}")
    flush = kafkalog_cli("flush", str(b_dir))
    if flush.returncode != 0:
        check.fail(f"kafkalog flush exited {flush.returncode}: {(flush.stdout + flush.stderr).strip()[-500:]}")
    for p in compare_recovered_dirs(a_dir, b_dir):
        check.fail(p)
    check.count("files compared", len(_files(b_dir)))


recovery = scenario(
    "recovery",
    "after SIGKILL + torn batch: broker recovery = kafkalog repair + flush, every file",
)(_recovery)
