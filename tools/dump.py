"""``kafkalog dump``: print the contents of Kafka log files, like ``kafka-dump-log.sh`` (DumpLogSegments).

A thin shell over :func:`kafkalog.storage.records.dump.dump_log`. Files are dispatched on their suffix
(:data:`DUMPERS`, one function per file kind); other kinds (.index, .timeindex, .txnindex, .snapshot) plug in
there.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path

from kafkalog.facts import describe_remembered, render
from kafkalog.storage.errors import KafkaLogError, LogDirError
from kafkalog.storage.files.findings import Finding
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io.fs import absolute, as_path, is_url
from kafkalog.storage.log.datadir import require_readable, resolve_partition_dirs
from kafkalog.storage.log.dir_checkpoints import open_partition_log
from kafkalog.storage.log.offset_spec import parse_offset_specs
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.paths import DATA_DIR, FILE, PARTITION_DIR, PathError, classify
from kafkalog.storage.records.dump import RecordStream, dump_log
from kafkalog.storage.reports import dump as dumpers

from .output import (
    JsonLines,
    add_output_arguments,
    add_time_argument,
    non_negative_int,
    progress,
    render_bytes,
    render_headers,
)

DESCRIPTION = """\
Print every batch of one or more Kafka .log segment files (also KRaft .checkpoint snapshots),
one line per batch in kafka-dump-log.sh's format, or one JSON object per batch with --json.
Index (.index, .timeindex, .txnindex), producer snapshot (.snapshot) and checkpoint files are
dumped too, with kafka-dump-log.sh's checks (--verify-index-only, --index-sanity-check).

  kafkalog dump /var/lib/kafka/data/orders-0/00000000000000000000.log
  kafkalog dump --deep --print-data-log FILE.log       # records with their keys and values
  kafkalog dump --json --deep FILE.log | jq .           # JSON Lines, keys/values base64 (see --payload)
  kafkalog dump --offsets-decoder __consumer_offsets-7/00000000000000000000.log
  kafkalog dump --deep -o 1000:1010 FILE.log           # offsets 1000-1009 only, found through the .index
  kafkalog dump -o @2024-05-01T12:00:00Z:1m FILE.log   # one minute of batches, found through the .timeindex

Every batch is checked: "isvalid: false" means its CRC does not match. The dump keeps going after a
corrupt batch and reports every problem with its byte position; a torn tail or partial batch at the end
of the file is reported as "Found N invalid bytes at the end of FILE".

A file, a partition dir or a data dir may be a URL (s3://, gs://, hdfs://, fsspec), read through the
filesystem seam with the same output as the same files on a local disk (a .log in windows, never whole).

A partition dir dumps its .log segments in offset order as one log, a data dir each of its partitions:
there a torn or partial batch at the end of a segment that is not the last one is lost records (an error
naming the file and byte, exit 1), at the end of the last (active) one a write the broker had not finished
(printed, not an error); a partition dir without .log files is an error, with the offsets its checkpoints
and snapshots remember. A path that does not exist or a directory that is not Kafka's is an error.

JSON keys per batch: file, baseOffset, lastOffset, count, position, size, magic, codec, crc, isValid,
timestampType, maxTimestamp, producerId, producerEpoch, baseSequence, lastSequence, partitionLeaderEpoch,
isTransactional, isControl, deleteHorizonMs; with --deep a "records" array of {offset, timestamp, key,
value, headers, ...}; control records add controlType (COMMIT, ABORT, ...) and coordinatorEpoch. Objects
with an "event" key report what is not a batch ("invalidBytes", "corrupt", "error"). Every record type
and its JSON Schema: docs/json.md.

--salvage (.log files, also loose copies and files of -delete dirs): print only the batches that are valid
(structure, CRC, records) and a line "Skipped bytes A-B (N bytes) of FILE: reason" per damaged region; the
scan resynchronises on the next valid batch instead of stopping. See also `kafkalog export --salvage`.

Exit codes: 0 everything valid, 1 something corrupt or unreadable, 2 usage error."""

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="files to dump, in order (.log, .checkpoint, .index, ...), partition dirs or data dirs; "
                        "local paths or URLs (s3://...)")
    parser.add_argument("--deep", "--deep-iteration", dest="deep", action="store_true",
                        help="also decode the records inside every batch (decompressing them)")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print record keys and values (implies --deep)")
    parser.add_argument("--skip-record-metadata", action="store_true",
                        help="human output: do not print per-record metadata (with --print-data-log)")
    parser.add_argument("--max-bytes", type=non_negative_int, default=None, metavar="N",
                        help="scan only the first N bytes of each .log (a partial batch at the cut is "
                        "not reported)")
    parser.add_argument("--max-message-size", type=non_negative_int, default=None, metavar="N",
                        help="report a batch whose size field exceeds N bytes as corrupt (default: no limit; "
                        f"index dumps read {DEFAULT_MAX_MESSAGE_SIZE} bytes per entry)")
    parser.add_argument("-o", "--offset", dest="offset_specs", action="append", default=[], metavar="SPEC",
                        help=".log: only the batches (and with --deep the records) in this range of the file, in "
                             "rpk's grammar: N, N1:N2, :N, +N, -N, @T, @T1:T2, s@T, e@T (see `kafkalog export "
                             "--help`); start and end are the file's first and next offsets; found through its "
                             ".index and .timeindex")
    add_time_argument(parser, "of the file")
    parser.add_argument("--verify-index-only", action="store_true",
                        help=".index/.timeindex: check the entries against the .log, do not print them")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help=".index/.timeindex: only run Kafka's sanity check")
    parser.add_argument("--salvage", action="store_true",
                        help=".log: only the valid batches (structure, CRC, records), resynchronising after each "
                             "damaged region, and a line per skipped byte range (JSON: \"event\": \"skipped\")")
    dec = parser.add_mutually_exclusive_group()
    dec.add_argument("--offsets-decoder", dest="decoder", action="store_const", const="offsets",
                     help="decode records as __consumer_offsets (implies --print-data-log)")
    dec.add_argument("--transaction-log-decoder", dest="decoder", action="store_const", const="transaction",
                     help="decode records as __transaction_state (implies --print-data-log)")
    dec.add_argument("--cluster-metadata-decoder", dest="decoder", action="store_const",
                     const="cluster-metadata", help="decode records as __cluster_metadata (implies --print-data-log)")
    dec.add_argument("--remote-log-metadata-decoder", dest="decoder", action="store_const",
                     const="remote-log-metadata",
                     help="decode records as __remote_log_metadata (tiered storage; implies --print-data-log)")
    dec.add_argument("--share-group-state-decoder", dest="decoder", action="store_const",
                     const="share-group-state",
                     help="decode records as __share_group_state (share groups; implies --print-data-log)")
    add_output_arguments(parser, payload=True)


class _Sink:
    """Where a dumper's output goes: JSON Lines or DumpLogSegments-style text, plus the verdict."""

    def __init__(self, args: argparse.Namespace):
        self.json = args.json
        decoder = getattr(args, "decoder", None)
        self.deep = args.deep or args.print_data_log or decoder is not None
        self.print_data = args.print_data_log or decoder is not None or (args.json and self.deep)
        self.skip_meta = args.skip_record_metadata
        self.payload = args.payload or ("base64" if args.json else "utf8")
        self.out = JsonLines(sys.stdout)  # written to only with --json
        self.ok = True

    def problem(self, file: str, position: int | None, reason: str) -> None:
        self.ok = False
        where = f"{file}: byte {position}: " if position is not None else f"{file}: "
        print(f"kafkalog dump: {where}{reason}", file=sys.stderr)


Dumper = Callable[[str, argparse.Namespace, _Sink], None]


def run(args: argparse.Namespace) -> int:
    if getattr(args, "salvage", False) and args.offset_specs:
        print("kafkalog dump: error: --salvage reads every byte: not with -o/--offset", file=sys.stderr)
        return 2
    sink = _Sink(args)
    for path in args.files:
        try:  # the one path contract (a URL read through the filesystem seam: a file, a partition or data dir)
            k = require_readable(path, (DATA_DIR, PARTITION_DIR, FILE)) if is_url(path) else classify(path)
        except (PathError, LogDirError) as e:
            _error(sink, path, e)
            continue
        if k.kind != FILE:
            for pdir in [k.path] if k.kind == PARTITION_DIR else resolve_partition_dirs(k.path, read_only=True):
                _dump_partition(pdir, args, sink)
            continue
        dumper = _dumper_for(path)
        if dumper is None:
            print(f"Ignoring unknown file {path}", file=sys.stderr)
            continue
        _dump_one(path, dumper, args, sink)
    sys.stdout.flush()
    return 0 if sink.ok else 1


def _error(sink: _Sink, path: str, e: OSError | KafkaLogError) -> None:
    if isinstance(e, OSError):
        sink.problem(path, None, e.strerror or str(e))
        if sink.json:
            sink.out.write({"file": path, "event": "error", "reason": e.strerror or str(e)})
        return
    sink.problem(path, e.position, e.reason)
    if sink.json:
        sink.out.write({"file": path, "event": "error", "position": e.position, "reason": e.reason})


def _dump_one(path: str, dumper: Dumper, args: argparse.Namespace, sink: _Sink, **kw) -> None:
    if not sink.json:
        print(f"Dumping {path}")
    try:
        dumper(path, args, sink, **kw)
    except BrokenPipeError:
        raise
    except (OSError, KafkaLogError) as e:
        _error(sink, path, e)


def _dump_partition(pdir: Path, args: argparse.Namespace, sink: _Sink) -> None:
    """A partition dir's segments in offset order, as one log: where a segment's batches may end short of its
    file is the log's rule (:meth:`PartitionLog.segment_end_error`), and a partition without .log files is lost
    records, with the offsets its files remember (:meth:`PartitionLog.remembered_beyond_end`)."""
    try:
        log = open_partition_log(pdir)
    except (OSError, KafkaLogError) as e:
        _error(sink, str(pdir), e)
        return
    with log:
        if not log.segments:
            try:
                remembered = log.remembered_beyond_end()
            except KafkaLogError:
                remembered = []
            said = (f": offsets {remembered[0].first_missing}..{max(r.last_missing for r in remembered)} are gone "
                    f"({'; '.join(describe_remembered(r.to_dict()) for r in remembered)})" if remembered else "")
            _error(sink, str(pdir), KafkaLogError(f"no .log segment file: the partition's records are not there{said}"))
            return
        for seg in log.segments:
            _dump_one(str(seg.path), dump_log_file, args, sink, log=log)


def _dumper_for(path: str) -> Dumper | None:
    name = os.path.basename(path)
    if "." in name and name[name.rindex("."):] in DUMPERS:
        return DUMPERS[name[name.rindex("."):]]
    return dump_other_file if dumpers.dump_kind(path) is not None else None


# ------------------------------------------------------------------------------------------- .log


def dump_log_file(path: str, args: argparse.Namespace, sink: _Sink, log: PartitionLog | None = None) -> None:
    """One .log (or KRaft .checkpoint) file; ``log``: the partition log it is a segment of (a partition dir's
    dump), whose rule says whether invalid bytes at the end of the file are lost records."""
    name = os.path.basename(path)
    if not sink.json:
        print(_log_header_line(name))
    size = as_path(path).stat().st_size  # (a local file, or one under a URL)
    prev_offset: int | None = None
    gaps: list[tuple[int, int]] = []
    with progress(size if args.max_bytes is None else min(size, args.max_bytes), f"dump {name}") as bar:
        done = 0
        for d in _log_dicts(path, args, sink):
            event = d.get("event")
            if event == "invalidBytes":
                found = KafkaLogError(f"{d['reason']}: {d['bytes']} invalid bytes at the end", path, d["position"])
                err = found if log is None else _end_error(log, path, d["position"], found)
                if err is not None:
                    sink.problem(path, err.position, err.reason)
                if sink.json:
                    sink.out.write(d)
                else:
                    print(f"Found {d['bytes']} invalid bytes at the end of {name}")
                continue
            if event == "skipped":
                sink.problem(path, d["position"], f"skipped {d['bytes']} bytes: {d['reason']}")
                if sink.json:
                    sink.out.write(d)
                else:
                    print(f"Skipped bytes {d['position']}-{d['position'] + d['bytes']} ({d['bytes']} bytes) of "
                          f"{name}: {d['reason']}")
                bar.advance(d["position"] + d["bytes"] - done)
                done = d["position"] + d["bytes"]
                continue
            if event is not None:
                sink.problem(path, d.get("position"), d.get("reason", event))
                if sink.json:
                    sink.out.write(d)
                continue
            if d.get("isControl") and d.get("records") and "controlText" not in d["records"][0]:
                dumpers.decode_control_records(d)  # KRaft control records (LeaderChange, voters, ...) as Kafka
            if not d["isValid"] and d["crc"] is not None:
                sink.problem(path, d["position"], f"batch at offset {d['lastOffset']} has an invalid CRC "
                             f"(stored crc {d['crc']})")
            streamed = isinstance(d.get("records"), RecordStream)  # a record-count bomb: iterated once
            if "error" in d and not streamed:
                sink.problem(path, d["errorPosition"], d["error"])
            tracker = records = _gap_tracked(d.get("records", ()), gaps, prev_offset)
            if not streamed:
                for _ in records:  # gaps noted before the batch is printed
                    pass
                records = d.get("records", ())
            if sink.json and streamed:
                head = {k: v for k, v in d.items() if k != "records"}
                sink.out.write_streamed(head, "records", (_json_record(r, sink) for r in records),
                                        functools.partial(_batch_error, d))
            elif sink.json:
                for r in records:
                    _json_record(r, sink)
                sink.out.write(d)
            else:
                _print_batch(d, sink, records)
            if streamed and "error" in d:
                sink.problem(path, d["errorPosition"], d["error"])
            prev_offset = tracker.last
            bar.advance(d["position"] + d["size"] - done)
            done = d["position"] + d["size"]
    if gaps:
        print(f"Non-consecutive offsets in {absolute(path)}", file=sys.stderr)
        for a, b in reversed(gaps):
            print(f"  {a} is followed by {b}", file=sys.stderr)


def _end_error(log: PartitionLog, path: str, position: int, found: KafkaLogError) -> KafkaLogError | None:
    """The log's verdict on a segment whose batches end at ``position`` before its file does: None at the end
    of the active segment (a write the broker had not finished), else the error naming the lost offsets
    (``found``, the dump's own, when the log's scan does not end there)."""
    seg = next(s for s in log.segments if str(s.path) == path)
    scanner = seg.scanner(position)
    if next(iter(scanner), None) is not None or scanner.stop_reason is None:
        return found
    return log.segment_end_error(seg, scanner)


def _log_dicts(path: str, args: argparse.Namespace, sink: _Sink):
    decoder_name = getattr(args, "decoder", None)
    if path.endswith(".checkpoint"):
        # KRaft snapshot: metadata records and control records (header/footer, voters) decoded
        return dumpers.dump_kraft_snapshot(path, deep=sink.deep, max_bytes=args.max_bytes, decode=True)
    decoder = dumpers.record_decoder(decoder_name) if decoder_name else None
    if decoder is None and decoder_name:
        raise KafkaLogError(f"the {decoder_name} decoder is not available")
    start, offsets = _offset_window(path, args)
    return dump_log(path, deep=sink.deep, max_bytes=args.max_bytes, max_message_size=args.max_message_size,
                    record_decoder=decoder, stream=True, start_position=start, offsets=offsets,
                    salvage=getattr(args, "salvage", False))


def _offset_window(path: str, args: argparse.Namespace) -> tuple[int, tuple[int, int] | None]:
    """``(start position, [lo, hi))`` of a ``.log`` for ``-o``: the spec resolved against the segment's base and
    next offsets and its time index, the start found through its offset index."""
    spec = parse_offset_specs(getattr(args, "offset_specs", None) or [])
    if spec is None:
        return 0, None
    with Segment(path) as seg:  # (a name that is not a base offset is a clear error, as a special file is)
        base = seg.base_offset

        def offset_for_time(ms: int) -> int | None:
            found = seg.find_offset_by_timestamp(ms)
            return None if found is None else found[1]

        lo, hi = spec.resolve(base, seg.read_next_offset(), offset_for_time)
        start = 0
        if seg.has_offset_index and lo > base:
            try:
                start = seg.offset_index.lookup(lo).position
            except KafkaLogError:
                start = 0
    return start, (lo, hi)


def dump_other_file(path: str, args: argparse.Namespace, sink: _Sink) -> None:
    """.index, .timeindex, .txnindex, .snapshot and the checkpoint/metadata files (storage/reports/dump/)."""
    fd = dumpers.dump_file(path, verify_index_only=args.verify_index_only,
                           index_sanity_check=args.index_sanity_check,
                           max_message_size=args.max_message_size or dumpers.DEFAULT_MAX_MESSAGE_SIZE)
    if sink.json:
        sink.out.write_all(_worded(fd, o) for o in fd.json_objects())
    else:
        for line in fd.text():
            print(line)
        for line in fd.report_lines():
            print(line, file=sys.stderr)
    for p in fd.problems:
        sink.problem(path, p.get("position"), _reason(fd, p))
    if not fd.ok:
        sink.ok = False


def _reason(fd, p: dict) -> str:
    """A dump problem's words: its ``reason``, or its code's template over its facts (``kafkalog.facts``)."""
    return p["reason"] if "code" not in p else render(Finding(fd.file, p["position"], fd.kind, "error", "", p["facts"],
                                                              p["code"]))


def _worded(fd, o: dict) -> dict:
    """A ``--json`` object of a dump: a problem given as a code gets its words as ``reason`` (then ``code`` and
    ``facts``)."""
    if o.get("event") != "error" or "code" not in o:
        return o
    rest = {k: v for k, v in o.items() if k not in ("code", "facts")}
    return rest | {"reason": _reason(fd, o), "code": o["code"], "facts": o["facts"]}


def _log_header_line(name: str) -> str:
    stem = name[: name.index(".")] if "." in name else name
    if name == "bootstrap.checkpoint":
        return "KRaft bootstrap snapshot"
    if name.endswith(".checkpoint"):
        offset, _, epoch = stem.partition("-")
        if offset.isdigit() and epoch.isdigit():
            return f"Snapshot end offset: {int(offset)}, epoch: {int(epoch)}"
        return f"Snapshot {name}"
    return f"Log starting offset: {int(stem)}" if stem.isdigit() else f"Log {name}"


def _batch_error(d: dict) -> dict:
    """A streamed batch's error keys, known once its records are read."""
    return {k: d[k] for k in ("error", "errorPosition") if k in d}


def _json_record(r: dict, sink: _Sink) -> dict:
    r["key"] = render_bytes(r["key"], sink.payload, exact=True)
    r["value"] = render_bytes(r["value"], sink.payload, exact=True)
    r["headers"] = render_headers(r["headers"], sink.payload, exact=True)
    for k in ("controlText", "decodedText"):  # the human text; JSON carries the decoded structures
        r.pop(k, None)
    return r


class _gap_tracked:  # noqa: N801 - used like a generator function
    """Iterate ``records`` once, noting offset gaps (as the list path does); ``last`` is the last offset seen."""

    def __init__(self, records, gaps: list, last: int | None):
        self.records, self.gaps, self.last = records, gaps, last

    def __iter__(self):
        for r in self.records:
            if self.last is not None and r["offset"] != self.last + 1:
                self.gaps.append((self.last, r["offset"]))
            self.last = r["offset"]
            yield r


def _b(v) -> str:
    return "true" if v else "false"


def _print_batch(d: dict, sink: _Sink, records) -> None:
    ts_type = d["timestampType"] or "NoTimestampType"
    codec = d["codec"] or "none"
    crc = d["crc"] if d["crc"] is not None else -1
    if d["magic"] >= 2:
        horizon = "OptionalLong.empty" if d["deleteHorizonMs"] is None else f"OptionalLong[{d['deleteHorizonMs']}]"
        line = (f"baseOffset: {d['baseOffset']} lastOffset: {d['lastOffset']} count: {d['count']} "
                f"baseSequence: {d['baseSequence']} lastSequence: {d['lastSequence']} "
                f"producerId: {d['producerId']} producerEpoch: {d['producerEpoch']} "
                f"partitionLeaderEpoch: {d['partitionLeaderEpoch']} isTransactional: {_b(d['isTransactional'])} "
                f"isControl: {_b(d['isControl'])} deleteHorizonMs: {horizon} position: {d['position']} "
                f"{ts_type}: {d['maxTimestamp']} size: {d['size']} magic: {d['magic']} "
                f"compresscodec: {codec} crc: {crc} isvalid: {_b(d['isValid'])}")
    else:
        line = (f"offset: {d['lastOffset']} position: {d['position']} {ts_type}: {d['maxTimestamp']} "
                f"size: {d['size']} magic: {d['magic']} compresscodec: {codec} crc: {crc} "
                f"isvalid: {_b(d['isValid'])}")
    print(line)
    v2 = d["magic"] >= 2
    for r in records:
        print(_record_line(r, ts_type, v2, d["isControl"], sink))


def _record_line(r: dict, ts_type: str, v2: bool, control: bool, sink: _Sink) -> str:
    parts = []
    if not sink.skip_meta:
        meta = f"| offset: {r['offset']} {ts_type}: {r['timestamp']} keySize: {r['keySize']} valueSize: {r['valueSize']}"
        if v2:
            meta += f" sequence: {r['sequence']} headerKeys: [{','.join(k for k, _ in r['headers'])}]"
        else:
            meta += f" isValid: {_b(r['isValid'])} crc: {r['crc']}"  # Kafka <= 3.9 printed a stray "}" here
        if control and "controlText" in r:
            meta += r["controlText"] if r["controlText"].startswith(" ") else " " + r["controlText"]
        elif control:
            ctype = r.get("controlType")
            if ctype in ("COMMIT", "ABORT") and "coordinatorEpoch" in r:
                meta += f" endTxnMarker: {ctype} coordinatorEpoch: {r['coordinatorEpoch']}"
            else:
                meta += f" controlType: {ctype}({r.get('controlTypeId', -1)})"
        parts.append(meta)
    if sink.print_data and not control and "decodedText" in r:
        text = r["decodedText"]
        parts.append(text if parts or text.startswith(("|", " ")) else "| " + text)
    elif sink.print_data and not control:
        if r["key"] is not None:
            parts.append(("" if parts else "| ") + f"key: {render_bytes(r['key'], sink.payload)}")
        if r["value"] is not None:
            parts.append(f"payload: {render_bytes(r['value'], sink.payload)}")
    return " ".join(parts) if not parts or parts[0].startswith("|") else " " + " ".join(parts)


#: file suffix -> dumper for the record-batch files; every other kind kafkalog.storage.reports.dump knows (.index,
#: .timeindex, .txnindex, .snapshot, checkpoints, partition.metadata, meta.properties, ...) goes to
#: dump_other_file.
DUMPERS: dict[str, Dumper] = {
    ".log": dump_log_file,
    ".checkpoint": dump_log_file,
}
