"""`kafkalog reindex PARTITION_DIR...`: rebuild .index/.timeindex/.txnindex of every segment."""

from __future__ import annotations

import argparse
import json
import os

from kafkalog.storage.config import LogConfig, parse_overrides
from kafkalog.storage.engine.plan import data_dir_lock
from kafkalog.storage.engine.recovery import rebuild_partition_indexes
from kafkalog.tools.output import progress

HELP = "rebuild the indexes of partition dirs from their .log files (Kafka's recovery rule)"
DESCRIPTION = """\
Rebuild .index, .timeindex and .txnindex of every segment exactly as the broker's segment recovery does
(LogSegment.recover), with producer state replayed from snapshots. The .log files are not changed; a
segment with invalid bytes is reported (exit 1) and left for `kafkalog repair`.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("partition_dirs", nargs="+", metavar="PARTITION_DIR")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="topic config (index.interval.bytes)")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    cfg = LogConfig.from_topic_props(parse_overrides(args.config))
    status = 0
    results = []
    with progress(len(args.partition_dirs), "reindex", unit_bytes=False) as bar:
        for pdir in args.partition_dirs:
            with data_dir_lock(os.path.dirname(os.path.abspath(pdir))):
                results.append((pdir, rebuild_partition_indexes(pdir, cfg, dry_run=args.dry_run)))
            bar.advance(1)
    for pdir, res in results:
        for base, written, problem in res:
            if problem:
                status = 1
            if args.json:
                print(json.dumps({"dir": pdir, "baseOffset": base, "written": written, "problem": problem}))
            else:
                print(f"{pdir} {base:020d}: " + (f"NOT rebuilt: {problem}" if problem else
                                                 ", ".join(os.path.basename(w) for w in written)))
    return status
