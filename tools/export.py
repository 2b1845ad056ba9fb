"""``kafkalog export DIR... --format jsonl|parquet --out PATH``: stream every record out with every field."""

from __future__ import annotations

import argparse
import json
import os
import sys

from kafkalog.storage.engine.export import (
    KEY_FORMATS,
    ExportFilter,
    export_bytes,
    export_jsonl,
    key_bytes,
)
from kafkalog.storage.engine.parquet import export_parquet
from kafkalog.storage.log.offset_spec import parse_offset_specs
from kafkalog.tools.output import (
    PAYLOAD_FORMATS,
    OutputDir,
    OutputDirRefused,
    add_time_argument,
    add_topics_argument,
    human_size,
    positive_int,
    progress,
    render_bytes,
    timestamp_ms,
)

DESCRIPTION = """\
Export every record of the partitions under DIR (data dirs or partition dirs) with every field:

  topic, partition, offset, timestamp, timestampType (-1 none/v0, 0 CreateTime, 1 LogAppendTime), key, value,
  headers, leaderEpoch, producerId, producerEpoch, sequence, isTransactional, isControl, magic, codec,
  segment (.log file), position (byte position of the record's batch)

(the same schema as `spark.read.format("kafkalog")`). As kcat and kafka-console-consumer do, only data
records are exported; --print-control-records adds the control records (transaction markers: isControl true,
and in JSON Lines "controlType": "COMMIT" or "ABORT"). Give it when the export is for `kafkalog import`, so a
transactional partition is rebuilt with its markers.

Filters: --key K (only records whose key is K: UTF-8 text, or --key-format hex|base64), --producer-id,
--transactional-only, --read-committed.

  --format jsonl     one JSON object per line (key/value/header values base64, null stays null); --out - is stdout
  --format parquet   one file per partition, OUT/<topic>-<partition>.parquet, bounded row groups

Ranges, per partition, in rpk's grammar (-o/--offset, as `rpk topic consume -o`; kcat's s@T and e@T too),
resolved through each partition's log start and end offsets and its offset and time indexes, end exclusive:

  start | end | :end        from the log start / from the log end (nothing) / until the log end (everything)
  N  N:  :N  N1:N2          from offset N, until offset N, from N1 until N2
  +N  -N                    N after the log start offset / N before the log end offset
  @T  @T:  @:T  @T1:T2      by timestamp: the first record with a timestamp >= T (Kafka's ListOffsets rule)
  s@T  e@T                  kcat's start and end timestamps; give -o twice to combine them

T is epoch ms (13 digits) or seconds (10), YYYY-MM-DD, RFC 3339 (2024-05-01T12:00:00Z), or a duration: as T1
relative to now (@-48h:-24h is yesterday), as T2 after a timestamp relative to it (@2024-02-14:1h), or `end`.
Also --from-offset / --to-offset (the same offsets in every partition) and --from-time / --to-time (a filter on
each record's timestamp, [from, to)). Segments are streamed through mmap one batch at a time: memory does not
grow with the data.

Examples:
  kafkalog export /var/lib/kafka/data --topics orders --format parquet --out /tmp/orders-parquet
  kafkalog export /var/lib/kafka/data/orders-0 -o 1000:2000 --out - | jq .value
  kafkalog export /var/lib/kafka/data --topics orders -o -100 --out last-100-per-partition.jsonl
  kafkalog export /var/lib/kafka/data --topics orders -o @-48h:-24h --out yesterday.jsonl
  kafkalog export /var/lib/kafka/data --topics orders --key customer-42 --out - | jq .offset
  kafkalog export /var/lib/kafka/data --topics payments --print-control-records --out payments.jsonl

Salvage (--salvage): read what can still be read from damaged files, JSON Lines only. DIR may then also be a
-delete/-future/-stray partition dir or a loose file (a .log copied out of a broker). Only the .log bytes are
read (no index, no checkpoint): a corrupt region is skipped and the scan resynchronises on the next batch that
is structurally valid and has a valid CRC. Every record gets its provenance: dataDir, file, position (of its
batch) and crcValid. Each skipped byte range is reported on stderr (with --json as a JSON object,
"event": "skipped", docs/schemas/salvageSkipped.schema.json, next to the summary). Exit 1 if anything was
skipped, 0 if every byte was read. (-o and --read-committed need the indexes: not with --salvage.)
--include-invalid also exports the records of a batch failing its CRC when its framing is provably intact (a
valid batch follows right after it, none starts inside it) and its records decode: crcValid false, unchecked.
--workers N scans N files at once (each file's lines go to a spool file next to --out, or in $TMPDIR with
--out -, and are copied out in file order: the same output as with one worker).

  kafkalog export --salvage /var/lib/kafka/data/orders-0.4c7d...-delete broken-00000000000000001234.log --out -
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="DIR", help="data dir(s) or partition dir(s)")
    p.add_argument("--remote", action="append", default=[], metavar="STORE",
                   help="also export the remote segments of a tiered-storage store (LocalTieredStorage layout: its "
                        "dir or kafka-tiered-storage/, local or s3://...), as `kafkalog remote` reads them; "
                        "without DIR, only them")
    p.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl", help="output format (jsonl)")
    p.add_argument("--out", required=True, metavar="PATH", help="output file (jsonl; - for stdout) or directory (parquet)")
    p.add_argument("--compression", choices=["snappy", "zstd", "lz4", "gzip", "none"], default="snappy",
                   help="Parquet page compression (snappy, Spark's default; zstd writes ~half the size, slower)")
    add_topics_argument(p)
    p.add_argument("-o", "--offset", dest="offset_specs", action="append", default=[], metavar="SPEC",
                   help="where to start and stop in each partition, rpk/kcat grammar (see above); may be given "
                        "twice (kcat's s@T and e@T)")
    add_time_argument(p, "of each partition")
    p.add_argument("--from-offset", type=int, default=None, metavar="OFFSET", help="first offset (inclusive)")
    p.add_argument("--to-offset", type=int, default=None, metavar="OFFSET", help="end offset (exclusive)")
    p.add_argument("--from-time", type=timestamp_ms, default=None, metavar="TIME",
                   help="first timestamp (inclusive), as -o @T: epoch ms or s, ISO-8601, or a duration "
                        "(--from-time=-1h)")
    p.add_argument("--to-time", type=timestamp_ms, default=None, metavar="TIME",
                   help="end timestamp (exclusive), as -o @T: epoch ms or s, ISO-8601, or a duration")
    p.add_argument("--print-control-records", action="store_true",
                   help="also export control records (transaction markers; JSON Lines: controlType COMMIT/ABORT)"
                        "; by default only data records, as kcat and the console consumer")
    p.add_argument("--no-control", action="store_true", help=argparse.SUPPRESS)  # (the default now)
    p.add_argument("--key", default=None, metavar="K",
                   help="only records whose key is exactly K (UTF-8 text; see --key-format)")
    p.add_argument("--key-format", choices=KEY_FORMATS, default="utf8",
                   help="how --key is written: utf8 (default), hex or base64")
    p.add_argument("--read-committed", action="store_true",
                   help="what a consumer with isolation.level=read_committed reads: records of aborted "
                        "transactions (found through the .txnindex) and control records left out, nothing at or "
                        "after the last stable offset (an open transaction)")
    p.add_argument("--producer-id", type=int, action="append", default=None, metavar="ID",
                   help="only batches of this producer id (may be repeated)")
    p.add_argument("--transactional-only", action="store_true", help="only transactional batches")
    p.add_argument("--row-group-rows", type=int, default=65536, metavar="N", help="Parquet rows per row group (65536)")
    p.add_argument("--payload", choices=PAYLOAD_FORMATS, default="base64",
                   help="JSON Lines: how keys, values and header values are written, as `dump --payload`: base64 "
                        "(default; what `kafkalog import` reads), utf8 (undecodable bytes as \\udcNN escapes, "
                        "which `append --payload utf8` turns back into the same bytes) or hex")
    p.add_argument("--overwrite", action="store_true",
                   help="Parquet: replace a non-empty --out directory (the new export is written beside it and "
                        "renamed into place once complete); without it a non-empty directory is refused")
    p.add_argument("--salvage", action="store_true",
                   help="damaged files: skip corrupt regions, resynchronise on the next valid batch, report every "
                        "skipped byte range, give every record its provenance (dataDir, file, position, crcValid); "
                        "also takes -delete/-future dirs and loose .log files; exit 1 if anything was skipped")
    p.add_argument("--include-invalid", action="store_true",
                   help="with --salvage: also export the records of a batch whose CRC does not match when its "
                        "framing is provably intact (a valid batch follows right after it, none starts inside) and "
                        "its records decode, with crcValid false (its range is still reported)")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="with --salvage: files scanned by N processes at once, written out in the same order "
                        "(the same bytes as with 1; default: 1)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress bar on stderr (it is shown only when stderr is a terminal)")


def run(args: argparse.Namespace) -> int:
    if not args.remote:
        if not args.paths:
            print("kafkalog export: error: give DIR(s) or --remote STORE", file=sys.stderr)
            return 2
        return _run(args)
    import shutil
    import tempfile

    from kafkalog.storage.remote import open_remote_store
    from kafkalog.storage.remote.layout import remote_partition_view

    views = tempfile.mkdtemp(prefix="kafkalog-export-remote-")
    stores = [open_remote_store(s) for s in args.remote]
    try:
        # a view of each store: partition dirs of hard links to (or copies of) the remote segments
        extra = [str(remote_partition_view(st, os.path.join(views, str(i)))) for i, st in enumerate(stores)]
        args.paths = [*args.paths, *extra]
        return _run(args)
    finally:
        for st in stores:
            st.close()
        shutil.rmtree(views, ignore_errors=True)


def _empty_range(args: argparse.Namespace, spec) -> str | None:
    """The option that asks for an empty range whatever the partition (an end at or before its start), or None."""
    if args.from_offset is not None and args.to_offset is not None and args.to_offset <= args.from_offset:
        return f"--to-offset {args.to_offset} is not after --from-offset {args.from_offset}"
    if args.from_time is not None and args.to_time is not None and args.to_time <= args.from_time:
        return f"--to-time {args.to_time} is not after --from-time {args.from_time}"
    if spec is not None and spec.start.kind == spec.end.kind and spec.start.kind in ("offset", "time") \
            and spec.end.value <= spec.start.value:
        what = "offsets" if spec.start.kind == "offset" else "times"
        return f"-o {spec.text!r}: the end is not after the start ({what} [{spec.start.value}, {spec.end.value}))"
    return None


def _run(args: argparse.Namespace) -> int:
    if getattr(args, "salvage", False):
        return _run_salvage(args)
    for flag, given in (("--include-invalid", getattr(args, "include_invalid", False)),
                        ("--workers", getattr(args, "workers", None) is not None)):
        if given:
            print(f"kafkalog export: error: {flag} needs --salvage", file=sys.stderr)
            return 2
    spec = parse_offset_specs(args.offset_specs)
    empty = _empty_range(args, spec)
    if empty is not None:
        print(f"kafkalog export: error: {empty}: an empty range, nothing to export", file=sys.stderr)
        return 2
    flt = ExportFilter(topics=args.topics,
                       from_offset=args.from_offset, to_offset=args.to_offset, from_time=args.from_time,
                       to_time=args.to_time,
                       include_control=args.print_control_records and not args.no_control,
                       offset_spec=spec, read_committed=args.read_committed,
                       producer_ids=set(args.producer_id) if args.producer_id else None,
                       transactional_only=args.transactional_only,
                       key=None if args.key is None else key_bytes(args.key, args.key_format))
    out_dir = None
    if args.format == "parquet":
        if args.payload != "base64":
            print("kafkalog export: error: --payload is for JSON Lines (Parquet keeps the bytes as binary)",
                  file=sys.stderr)
            return 2
        try:
            out_dir = OutputDir(args.out, overwrite=args.overwrite, what="Parquet export")
        except OutputDirRefused as e:
            print(f"kafkalog export: error: {e}", file=sys.stderr)
            return 2
    with progress(export_bytes(args.paths, flt.topics), "export", enabled=None if args.progress else False) as bar:
        if out_dir is None:
            stats = export_jsonl(args.paths, args.out, flt, progress=bar.advance,
                                 render=lambda b: render_bytes(b, args.payload, exact=True))
        else:
            with out_dir:
                stats = export_parquet(args.paths, out_dir.path, flt, row_group_rows=args.row_group_rows,
                                       compression=args.compression, progress=bar.advance)
            stats.files = [out_dir.final(f) for f in stats.files]
    msg = stats.to_dict()
    if out_dir is not None:
        msg["out"] = out_dir.target
        msg["replaced"] = out_dir.replaced
    stream = sys.stderr if args.out == "-" else sys.stdout
    if args.json:
        stream.write(json.dumps({"summary": msg}) + "\n")
    else:
        size = sum(os.path.getsize(f) for f in stats.files if os.path.isfile(f)) if args.out != "-" else 0
        stream.write(f"exported {stats.records} records ({stats.batches} batches) from {stats.partitions} "
                     f"partitions to {args.out}" + (f" ({human_size(size)})" if size else "")
                     + (f"; {out_dir.note}" if out_dir is not None else "") + "\n")
    return 0


def _run_salvage(args: argparse.Namespace) -> int:
    from kafkalog.storage.engine.salvage import describe_skipped, salvage_bytes, salvage_jsonl

    bad = [o for o, given in (("--format parquet", args.format != "jsonl"), ("-o/--offset", args.offset_specs),
                              ("--read-committed", args.read_committed),
                              ("--payload", args.payload != "base64"), ("--overwrite", args.overwrite)) if given]
    if bad:
        print(f"kafkalog export: error: --salvage reads only the .log bytes: not with {', '.join(bad)}",
              file=sys.stderr)
        return 2
    flt = ExportFilter(topics=args.topics, from_offset=args.from_offset, to_offset=args.to_offset,
                       from_time=args.from_time, to_time=args.to_time,
                       include_control=args.print_control_records and not args.no_control,
                       producer_ids=set(args.producer_id) if args.producer_id else None,
                       transactional_only=args.transactional_only,
                       key=None if args.key is None else key_bytes(args.key, args.key_format))
    stream = sys.stderr if args.out == "-" else sys.stdout
    if args.json:
        from kafkalog.tools.output import JsonLines

        out = JsonLines(stream)

        def on_skipped(s, src) -> None:
            out.write(describe_skipped(s, src))
    else:
        def on_skipped(s, src) -> None:
            note = " (records exported with crcValid false)" if s.batch is not None else ""
            print(f"kafkalog export: {s.path}: skipped bytes {s.start}-{s.end} ({human_size(s.size)}): {s.reason}"
                  f"{note}", file=sys.stderr)
    with progress(salvage_bytes(args.paths, flt.topics), "salvage",
                  enabled=None if args.progress else False) as bar:
        rep = salvage_jsonl(args.paths, args.out, flt, on_skipped=on_skipped, progress=bar.advance,
                            include_invalid=args.include_invalid, workers=args.workers or 1)
    if args.json:
        stream.write(json.dumps({"summary": rep.to_dict()}) + "\n")
    else:
        note = (f"; skipped {len(rep.skipped)} damaged ranges ({human_size(rep.skipped_bytes)})" if rep.skipped
                else "; nothing skipped")
        stream.write(f"salvaged {rep.records} records ({rep.batches} batches) from {rep.files} files to "
                     f"{args.out}{note}\n")
    stream.flush()
    return 0 if rep.clean else 1
