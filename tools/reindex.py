"""`kafkalog reindex PARTITION_DIR...`: rebuild .index/.timeindex/.txnindex of every segment."""

from __future__ import annotations

import argparse
import json
import os

from kafkalog.storage.config import LogConfig, parse_overrides
from kafkalog.storage.engine.recovery import reindex_partitions
from kafkalog.tools.output import positive_int, progress

HELP = "rebuild the indexes of partition dirs from their .log files (Kafka's recovery rule)"
DESCRIPTION = """\
Rebuild .index, .timeindex and .txnindex of every segment exactly as the broker's segment recovery does
(LogSegment.recover), with producer state replayed from snapshots. The .log files are not changed; a
segment with invalid bytes is reported (exit 1) and left for `kafkalog repair`.

Partitions are rebuilt N at a time (--workers, default: the number of CPUs) while kafkalog holds the
.lock of every data dir involved; a running broker's lock makes it refuse (exit 1, nothing written).

examples:
  kafkalog reindex /var/lib/kafka/data/orders-3
  kafkalog reindex /var/lib/kafka/data/orders-* --dry-run --json
"""




def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("partition_dirs", nargs="+", metavar="PARTITION_DIR")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="topic config (index.interval.bytes)")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="partitions rebuilt at once by N processes (default: the number of CPUs)")
    p.add_argument("--dry-run", action="store_true", help="check every segment, write nothing")
    p.add_argument("--json", action="store_true", help="JSON Lines: one object per segment")


def run(args: argparse.Namespace) -> int:
    cfg = LogConfig.from_topic_props(parse_overrides(args.config))
    status = 0
    workers = max(1, args.workers or os.cpu_count() or 1)
    with progress(len(args.partition_dirs), "reindex", unit_bytes=False) as bar:
        results = reindex_partitions(args.partition_dirs, cfg, dry_run=args.dry_run, workers=workers,
                                     progress=bar.advance)
    for pdir, res in results:
        for base, written, problem in res:
            if problem:
                status = 1
            if args.json:
                print(json.dumps({"dir": pdir, "baseOffset": base, "written": written, "problem": problem,
                                  "dryRun": args.dry_run}))
            elif base < 0:
                print(f"{pdir}: NOT rebuilt: {problem}")
            else:
                print(f"{pdir} {base:020d}: " + (f"NOT rebuilt: {problem}" if problem else
                                                 ("would write " if args.dry_run else "")
                                                 + ", ".join(os.path.basename(w) for w in written)))
    return status
