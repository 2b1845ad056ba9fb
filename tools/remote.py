"""``kafkalog remote ls|verify|dump STORE``: a tiered-storage (KIP-405) remote store, offline."""

from __future__ import annotations

import argparse
import sys

from kafkalog.facts import finding_json
from kafkalog.storage.remote import open_remote_store
from kafkalog.storage.remote.inspect import iter_remote_segments, list_remote, verify_remote
from kafkalog.tools.output import JsonLines, add_output_arguments, human_size, progress, render_table

DESCRIPTION = """\
Read the remote segments a broker uploaded with tiered storage (KIP-405) in the layout of Kafka's
LocalTieredStorage: STORE is its `dir` (holding kafka-tiered-storage/) or that kafka-tiered-storage directory,
local or a URL (s3://bucket/prefix, memory://...; --option s3.endpoint=... etc. as for `kafkalog spark`).

  ls      one row per remote segment: topic, partition, segment id, offsets, size, and with --data-dir the
          state __remote_log_metadata gives it and its status (present, missing, deleted, undeleted,
          unreferenced; `unchecked` without --data-dir)
  verify  every remote segment: files present, batches and CRCs, indexes against the .log, producer snapshot and
          leader-epoch checkpoint readable; with --data-dir, the cross-check with __remote_log_metadata (a
          COPY_SEGMENT_FINISHED segment must be there, a DELETE_SEGMENT_FINISHED one gone, no unreferenced files)
          and the remote offsets contiguous up to the local log. Exit 1 on an error
  dump    the batches (--deep: records) of the remote segments, as `kafkalog dump` prints them

--data-dir is a broker's log dir holding __remote_log_metadata-N partitions (give every log dir of the broker).

Examples:
  kafkalog remote ls /var/lib/kafka/tiered --data-dir /var/lib/kafka/data
  kafkalog remote verify s3://bucket/tiered --option s3.region=eu-west-1 --json
  kafkalog remote dump /var/lib/kafka/tiered --topic orders --partition 3 --deep --print-data-log
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["ls", "verify", "dump"], help="what to do")
    p.add_argument("store", metavar="STORE", help="LocalTieredStorage dir (or its kafka-tiered-storage/), or a URL")
    p.add_argument("--data-dir", dest="data_dirs", action="append", default=[], metavar="DIR",
                   help="a broker log dir with __remote_log_metadata (repeatable)")
    p.add_argument("--topic", metavar="TOPIC", help="only this topic")
    p.add_argument("--partition", type=int, metavar="N", help="only this partition")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="filesystem option of a URL store (s3.endpoint, s3.region, s3.accessKey, ...)")
    p.add_argument("--deep", action="store_true", help="verify/dump: also decode every record")
    p.add_argument("--print-data-log", action="store_true", help="dump: print keys and values (implies --deep)")
    p.add_argument("--skip-record-metadata", action="store_true", help="dump: no per-record metadata")
    add_output_arguments(p, payload=True)


def _options(items: list[str]) -> dict[str, str]:
    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep:
            raise SystemExit(f"kafkalog remote: error: --option {it!r} is not KEY=VALUE")
        out[k] = v
    return out


def run(args: argparse.Namespace) -> int:
    with open_remote_store(args.store, options=_options(args.option)) as store:
        if args.action == "ls":
            return _ls(store, args)
        if args.action == "verify":
            return _verify(store, args)
        return _dump(store, args)


def _ls(store, args) -> int:
    rows = list_remote(store, args.data_dirs, topic=args.topic, partition=args.partition)
    if args.json:
        out = JsonLines()
        for r in rows:
            out.write(r.to_dict())
        return 0
    render_table([r.to_dict() for r in rows], ["topic", "partition", "segmentId", "startOffset", "endOffset", "size",
                                               "state", "status"], formats={"size": human_size})
    return 0


def _verify(store, args) -> int:
    total = sum(s.size for s in store.all_segments())
    with progress(total, "verify remote") as bar:
        rep = verify_remote(store, args.data_dirs, deep=args.deep, topic=args.topic, partition=args.partition,
                            progress=bar.advance)
    errors = len(rep.errors)
    warnings = sum(1 for f in rep.findings if f.severity == "warning")
    if args.json:
        out = JsonLines()
        for f in rep.findings:
            out.write(finding_json(f))
        out.write({"summary": {"store": args.store, "segments": rep.segments, "bytes": rep.bytes,
                               "errors": errors, "warnings": warnings}})
    else:
        if rep.findings:
            render_table([finding_json(f) for f in rep.findings], ["severity", "kind", "file", "position", "message"])
        print(f"{rep.segments} remote segment(s), {human_size(rep.bytes)}: {errors} error(s), {warnings} warning(s)")
    return 1 if errors else 0


def _dump(store, args) -> int:
    from kafkalog.tools import dump

    files = [str(p) for _seg, p in iter_remote_segments(store, topic=args.topic, partition=args.partition)]
    if not files:
        print("kafkalog remote: no remote segment matches", file=sys.stderr)
        return 1
    p = argparse.ArgumentParser(add_help=False)
    dump.add_arguments(p)
    flags = [f for f, on in (("--deep", args.deep), ("--print-data-log", args.print_data_log),
                             ("--skip-record-metadata", args.skip_record_metadata), ("--json", args.json)) if on]
    if args.payload:
        flags += ["--payload", args.payload]
    return dump.run(p.parse_args([*files, *flags]))
