"""``kafkalog import FILE... DIR``: write exported records back into a data dir through the write path."""

from __future__ import annotations

import argparse
import json
import sys

from kafkalog.storage.engine.import_ import import_files, preview_import
from kafkalog.tools.output import render_table

DESCRIPTION = """\
Read records exported by `kafkalog export` (JSON Lines, or Parquet files ending in .parquet; - is stdin) and
append them to DIR/<topic>-<partition> with their offsets, timestamps, keys, values, headers and producer
fields kept, through the broker's write path (indexes, time indexes, producer snapshots, leader-epoch
checkpoint, segment rolls where the export says a new segment began). DIR's recovery-point and
replication-offset checkpoints are updated so a broker starting on DIR serves the records without recovery.

Uncompressed v2 data comes back byte-identical (export -> import -> export gives the same rows, segments and
positions); compressed batches are re-compressed with the same codec (same records, other bytes); v0/v1 rows
are written as v2. A partition that already holds data is refused unless --append.

Examples:
  kafkalog export /old/data --topics orders --print-control-records --out orders.jsonl
  kafkalog import orders.jsonl /new/data --topic-id 3rWq9ZbmQqW8DX6PNjy4uA
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="exported .jsonl/.parquet files (- for stdin)")
    p.add_argument("dir", metavar="DIR", help="destination data dir")
    p.add_argument("--topic", default=None, metavar="TOPIC", help="import under another topic name")
    p.add_argument("--topic-id", default=None, metavar="ID", help="topic id for new partitions' partition.metadata")
    p.add_argument("--append", action="store_true", help="append to partitions that already hold data")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--dry-run", action="store_true",
                   help="read and check every row and say what would be imported; change nothing")


def run(args: argparse.Namespace) -> int:
    if args.dry_run:
        stats = preview_import(args.files, args.dir, topic=args.topic, append=args.append)
    else:
        stats = import_files(args.files, args.dir, topic=args.topic, topic_id=args.topic_id, append=args.append)
    would = "would be " if args.dry_run else ""
    if args.json:
        sys.stdout.write(json.dumps({"summary": stats.to_dict(), "dryRun": args.dry_run}) + "\n")
    else:
        if stats.partitions:
            render_table([{"partition": name, "logEndOffset": leo} for name, leo in sorted(stats.partitions.items())],
                         ["partition", "logEndOffset"], sys.stdout,
                         headers=["PARTITION", f"LOG END OFFSET{' (WOULD BE)' if would else ''}"])
        sys.stdout.write(f"{'would import' if args.dry_run else 'imported'} {stats.records} records in "
                         f"{stats.batches} batches into {len(stats.partitions)} partitions of {args.dir}"
                         f"{' (dry run: nothing changed)' if args.dry_run else ''}\n")
    return 0
