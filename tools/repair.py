"""`kafkalog repair DIR...`: the broker's startup recovery, offline, as one plan (dry run, backups)."""

from __future__ import annotations

import argparse
import sys
import time

from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.repair import plan_repair
from kafkalog.storage.log.paths import require_data_dir
from kafkalog.tools.output import NOW_GRAMMAR, progress, timestamp_ms
from kafkalog.tools.plan_output import add_plan_arguments, run_plan

DESCRIPTION = """\
Do offline what a Kafka broker does when it starts after a crash (LogLoader), so that it starts quickly and
cleanly afterwards:

  * leftover .deleted/.cleaned/.swap files are removed or swapped in exactly as the broker would;
  * without a clean shutdown marker, every segment above the partition's recovery point is validated batch
    by batch (CRC, framing, offsets); the .log is cut at the first invalid byte and later segments deleted;
  * missing/corrupt indexes, untrimmed preallocated indexes, producer snapshots, leader-epoch-checkpoint,
    unreadable checkpoint files and partition.metadata are rebuilt or rewritten;
  * finally recovery-point-offset-checkpoint, log-start-offset-checkpoint and .kafka_cleanshutdown are
    written: the broker then performs no recovery of its own.

The plan lists every file operation and, per partition, every record removed (offsets, count, bytes) and why.
--dry-run prints it and changes nothing; without it the same plan is applied. A dir that shut down cleanly and
needs only what the broker does at every start is healthy: nothing changes (exit 0).

The broker never looks below a partition's recovery point: corruption there survives its recovery. --full
recovers every segment, as the broker would without a recovery point.

Originals are kept under --backup DIR (default: a new folder beside the data dir, only when something changes;
hard links where a file is replaced or deleted, copies where it is cut in place). A dir whose .lock a live broker
holds is refused. Topic configs (index.interval.bytes) come from the dir's __cluster_metadata, server.properties
and --config.

Exit status: 0 healthy (nothing to repair), 1 something was (or, with --dry-run, would be) repaired or the plan
is invalid, 2 usage.

Examples:
  kafkalog repair /var/lib/kafka/data --dry-run
  kafkalog repair /var/lib/kafka/data --server-properties /etc/kafka/server.properties
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("data_dirs", nargs="+", metavar="DIR", help="data directories (entries of log.dirs)")
    add_plan_arguments(p)
    p.add_argument("--server-properties", metavar="FILE", help="broker config (index.interval.bytes ...)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="topic config override for every topic (topic overrides are otherwise read from the "
                   "dir's KRaft __cluster_metadata)")
    p.add_argument("--topic-config", metavar="FILE", help="properties file of topic configs")
    p.add_argument("--topic-id", action="append", default=[], metavar="TOPIC=ID",
                   help="topic id (22-char base64) used to rewrite an unreadable partition.metadata when the dir "
                   "holds no __cluster_metadata log")
    p.add_argument("--kafka-exact", action="store_true",
                   help="only what the broker does: keep indexes that fail sanity checks below the recovery point")
    p.add_argument("--full", action="store_true",
                   help="recover every segment, not only those above the recovery point")
    p.add_argument("--now", type=timestamp_ms, metavar="TIME", help=f"current time (producer expiration): {NOW_GRAMMAR}")


def run(args: argparse.Namespace) -> int:
    topic_ids = {}
    for item in args.topic_id:
        topic, sep, tid = item.partition("=")
        if not sep or not topic or not tid:
            print(f"kafkalog repair: --topic-id {item!r}: expected TOPIC=ID", file=sys.stderr)
            return 2
        topic_ids[topic] = tid
    for d in args.data_dirs:  # the one path contract: repair writes only into recognised data dirs
        require_data_dir(d)
    now = args.now if args.now is not None else int(time.time() * 1000)
    resolver = ConfigResolver(args.server_properties, args.topic_config, args.config, data_dirs=args.data_dirs)
    with progress(None, "repair: planning", unit_bytes=False) as bar:  # partitions planned (a terminal only)
        plan = plan_repair(args.data_dirs, now_ms=now, resolver=resolver, strict_indexes=not args.kafka_exact,
                           topic_ids=topic_ids, full=args.full, workers=args.workers or 1, progress=bar.advance)
    return run_plan(args, plan, exit_code=lambda p: 1 if p.changes or p.losses else 0)
