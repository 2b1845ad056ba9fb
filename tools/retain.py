"""``kafkalog retain``: apply the broker's retention (time, size, log start offset) offline, as a plan."""

from __future__ import annotations

import argparse

from kafkalog.storage.engine.retention import plan_retention
from kafkalog.tools.config_args import add_config_arguments, config_resolver, now_ms
from kafkalog.tools.output import add_topics_argument
from kafkalog.tools.plan_output import add_plan_arguments, run_plan

DESCRIPTION = """\
Walks every partition under DIR oldest segment first and deletes the segments the broker's retention run at
--now would delete: wholly below the log start offset (all topics), then, for cleanup.policy containing delete,
while the rest still exceeds retention.bytes, then while now - largest timestamp > retention.ms. The active
segment only goes when the high watermark (replication-offset-checkpoint) covers it, and then a new empty
segment is rolled first. Files are renamed *.deleted, then removed (--keep-deleted leaves them).

The plan shows, per partition, the settings that decided it and where each came from (Kafka default,
server.properties, __cluster_metadata, --config) and every segment it deletes: offsets, records, bytes, and the
rule. Check it with --dry-run first: on a ZooKeeper-mode dir topic overrides live in ZooKeeper, not on disk.

As the broker does, the log start offset moves to the first remaining segment, and with it the first entry of
leader-epoch-checkpoint, the recovery point and log-start-offset-checkpoint; cleaner-offset-checkpoint is left
alone (the next cleaning round resets a clean point below the new log start). Refuses a data dir whose .lock a
live broker holds; originals are kept under --backup unless --no-backup.

Config precedence: --config > --topic-config FILE > __cluster_metadata (snapshot and log) in the data dir >
dynamic broker configs > --server-properties > Kafka defaults.

Example:  kafkalog retain /var/lib/kafka/data --now 1732200000000 --dry-run
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dirs", nargs="+", metavar="DIR", help="data dir(s) or partition dir(s)")
    add_plan_arguments(p)
    add_config_arguments(p, "retention time")
    p.add_argument("--keep-deleted", action="store_true", help="leave deleted segments as *.deleted")
    add_topics_argument(p)


def run(args) -> int:
    plan = plan_retention(args.dirs, now_ms=now_ms(args), resolver=config_resolver(args), topics=args.topics,
                          keep_deleted=args.keep_deleted, workers=args.workers or 1)
    return run_plan(args, plan)
