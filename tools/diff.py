"""``kafkalog diff A B``: what differs between two data dirs, partition dirs or segment files."""

from __future__ import annotations

import argparse
import json
import sys

from kafkalog import facts
from kafkalog.storage.log.offset_spec import parse_offset_specs
from kafkalog.storage.reports.diff import LEVELS, diff_paths
from kafkalog.tools.output import add_epoch_argument, add_time_argument, human_time, render_table

DESCRIPTION = """\
Compare A and B (two data dirs, two partition dirs, or two .log files) and report what differs.

Levels:
  bytes    which files exist on one side only, and the first differing byte of each differing file
  batches  batches aligned by base offset: the first batch whose bytes differ (and which header fields),
           batches present on one side only
  records  records aligned by offset (default): the first record whose timestamp/key/value/headers differ,
           offsets present on one side only (as ranges)

Records level is what matters after a conversion (v0/v1 -> v2, another codec): the bytes change, the records
must not. Exit status: 0 when equal, 1 when different, 2 on usage errors.

-o/--offset SPEC compares only a range of each partition (batches and records levels), in rpk's grammar as
`kafkalog export -o` takes it (start, end, N, N1:N2, :N, +N, -N, @T1:T2, kcat's s@T and e@T): resolved on
each side through its log start and end offsets and its time index, the union of the two ranges compared,
reading from the batch the offset index points to.

Examples:
  kafkalog diff /var/lib/kafka/data /backup/data --level bytes
  kafkalog diff old/orders-0 new/orders-0 --json
  kafkalog diff old/data new/data -o -1000              # the last 1000 offsets of each partition
  kafkalog diff old/orders-0 new/orders-0 -o @2024-05-01:1h
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="A", help="data dir, partition dir or .log file")
    p.add_argument("b", metavar="B", help="the same kind of path to compare with")
    p.add_argument("--level", choices=LEVELS, default="records", help="what to compare (default: records)")
    p.add_argument("--ignore", action="append", default=None, metavar="GLOB",
                   help="file pattern left out of --level bytes (repeatable; default: .lock)")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="one-sided batches/offset ranges listed per partition")
    p.add_argument("-o", "--offset", dest="offset_specs", action="append", default=[], metavar="SPEC",
                   help="compare only this range of each partition, rpk/kcat grammar (see above); may be given "
                        "twice (kcat's s@T and e@T)")
    add_time_argument(p, "of each partition")
    p.add_argument("--json", action="store_true", help="JSON Lines: one object per difference, then a summary "
                   "(differences counted per kind: [{kind, count}])")
    add_epoch_argument(p)


def _side(rec: dict | None, epoch: bool) -> str | None:
    """A differing record's fields for people: its timestamp ISO-8601 UTC (or epoch ms)."""
    if not rec or "timestamp" not in rec:
        return None
    return f"timestamp {human_time(rec['timestamp'], epoch)}"


def difference_json(d) -> dict:
    """A difference for ``--json``: ``kind``, ``path``, ``detail`` (its note in words), ``offset``, ``a``, ``b``."""
    return {"kind": d.kind, "path": d.path, "detail": facts.render(d.note), "offset": d.offset, "a": d.a, "b": d.b}


def _row(d, epoch: bool) -> dict:
    detail = facts.render(d.note)
    a, b = _side(d.a, epoch), _side(d.b, epoch)
    if a and b and a != b:
        detail += f" (A: {a}; B: {b})"
    return {"kind": d.kind, "path": d.path, "detail": detail}


def run(args: argparse.Namespace) -> int:
    ignore = tuple(args.ignore) if args.ignore else (".lock",)
    res = diff_paths(args.a, args.b, level=args.level, ignore=ignore, limit=args.limit,
                     offset_spec=parse_offset_specs(args.offset_specs))
    out = sys.stdout
    if args.json:
        for d in res.differences:
            out.write(json.dumps(difference_json(d)) + "\n")
        out.write(json.dumps({"summary": res.summary()}) + "\n")
    else:
        if res.differences:
            render_table([_row(d, args.epoch) for d in res.differences], ["kind", "path", "detail"], out)
        what = f"{res.partitions_compared} partitions" if args.level != "bytes" else f"{res.files_compared} files"
        if res.equal:
            out.write(f"equal at the {args.level} level ({what} compared)\n")
        else:
            out.write(f"{len(res.differences)} differences at the {args.level} level ({what} compared)\n")
    return 0 if res.equal else 1
