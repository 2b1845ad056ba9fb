"""``kafkalog topic-id DIR [--set ID]``: show or set the topic id of partitions (``partition.metadata``)."""

from __future__ import annotations

import argparse
import json
import sys

from kafkalog.storage.engine.plan import Plan
from kafkalog.storage.engine.topic_id import new_topic_id, plan_topic_id
from kafkalog.storage.files.findings import Finding
from kafkalog.storage.files.partition_metadata import PARTITION_METADATA_FILE, read_partition_metadata
from kafkalog.storage.log.datadir import resolve_partition_dirs
from kafkalog.storage.log.topic_partition import parse_topic_partition_name
from kafkalog.tools.output import add_topics_argument, render_table
from kafkalog.tools.plan_output import add_plan_arguments, run_plan

DESCRIPTION = """\
List the topic id of every partition under DIR (a data dir or a partition dir), or set it with --set.

A KRaft broker compares partition.metadata with the topic id in the cluster metadata: a partition copied from
another cluster must carry the destination's topic id (see `kafka-topics --describe`) or it is treated as a
stray replica. The file is written as Kafka writes it (version: 0, tmp + fsync + rename + dir fsync).

Examples:
  kafkalog topic-id /var/lib/kafka/data --topics orders
  kafkalog topic-id /var/lib/kafka/data --topics orders --set 3rWq9ZbmQqW8DX6PNjy4uA
  kafkalog topic-id /var/lib/kafka/data/orders-0 --set random
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="DIR", help="data dir or partition dir")
    add_topics_argument(p)
    p.add_argument("--set", default=None, metavar="ID", help="new topic id (22-char base64) or 'random'")
    add_plan_arguments(p, workers=False)


def worded(plan: Plan) -> Plan:
    """The plan with the ``oldTopicId`` of a partition whose ``partition.metadata`` is unreadable in words, as
    --json has it: ``unreadable (<error>)`` (the error is the ``unreadable`` fact of its write's note)."""
    for pp in plan.partitions:
        for op in pp.ops:
            if isinstance(op.why, Finding) and op.why.kind == "op.topicIdSet" and op.why.facts["unreadable"]:
                pp.facts["oldTopicId"] = f"unreadable ({op.why.facts['unreadable']})"
    return plan


def run(args: argparse.Namespace) -> int:
    topics = args.topics
    pdirs = resolve_partition_dirs(args.path, topics)
    if args.set is not None and len({parse_topic_partition_name(p.name).topic for p in pdirs}) > 1:
        print("kafkalog topic-id: error: --set applies to one topic; select it with --topics", file=sys.stderr)
        return 2
    if args.set is not None:
        new = new_topic_id() if args.set == "random" else args.set
        return run_plan(args, worded(plan_topic_id(pdirs, new)))
    out = sys.stdout
    rows = []
    for p in pdirs:
        f = p / PARTITION_METADATA_FILE
        tid = read_partition_metadata(f).topic_id if f.exists() and f.stat().st_size else None
        row = {"partition": p.name, "topicId": tid}
        if args.json:
            out.write(json.dumps(row) + "\n")
        else:
            rows.append(row)
    if not args.json:
        render_table(rows, ["partition", "topicId"], out, headers=["PARTITION", "TOPIC ID"])
    return 0
