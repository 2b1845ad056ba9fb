"""`kafkalog reindex PATH...`: rebuild wrong or missing .index/.timeindex/.txnindex files (Kafka's recovery rule)."""

from __future__ import annotations

import argparse

from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.reindex import plan_reindex
from kafkalog.tools.plan_output import add_plan_arguments, run_plan

DESCRIPTION = """\
Rebuild .index, .timeindex and .txnindex exactly as the broker's segment recovery does (LogSegment.recover),
with producer state replayed across the segments. By default only the segments whose indexes are missing or
wrong (entries that do not match the log, failing sanity checks: what `kafkalog verify` reports as errors) are
rebuilt; --all rebuilds every segment's indexes. Only files whose bytes change are written: a second run
changes nothing. The .log files are never changed: a segment with invalid bytes makes the run refuse (exit 1,
nothing written anywhere): `kafkalog repair` it first.

PATH is a partition dir or a data dir (every partition in it). index.interval.bytes is each topic's effective
setting (__cluster_metadata, --server-properties, --config). A dir whose .lock a live broker holds is refused.

Examples:
  kafkalog reindex /var/lib/kafka/data/orders-3
  kafkalog reindex /var/lib/kafka/data --dry-run --json
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="partition dirs or data dirs")
    add_plan_arguments(p)
    p.add_argument("--all", action="store_true", help="rebuild every segment's indexes, not only wrong ones")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="topic config (index.interval.bytes) for every topic")
    p.add_argument("--server-properties", metavar="FILE", help="broker config (log.index.interval.bytes)")


def run(args: argparse.Namespace) -> int:
    resolver = ConfigResolver(args.server_properties, None, args.config)
    plan = plan_reindex(args.paths, resolver=resolver, all_segments=args.all, workers=args.workers or 1)
    return run_plan(args, plan)
