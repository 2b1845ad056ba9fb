"""``kafkalog migrate SRC DEST_DIR``: copy partitions into another broker's data dir, rewriting what must change."""

from __future__ import annotations

import argparse

from kafkalog.storage.engine.migrate import MigrateOptions, plan_migrate
from kafkalog.tools.output import human_size, render_table
from kafkalog.tools.plan_output import add_plan_arguments, run_plan

DESCRIPTION = """\
Copy one partition (SRC is a partition dir) or every partition of a data dir (SRC is a data dir) into the data
dir DEST_DIR of another broker, with everything a broker checks rewritten:

  * partition dir name when --topic/--partition renames it;
  * partition.metadata with the destination cluster's topic id (--topic-id; default: keep the source's);
  * meta.properties when DEST_DIR is new (--cluster-id and --node-id; checked against an existing one);
  * DEST_DIR's recovery-point, log-start-offset, replication-offset (high watermark) and cleaner-offset
    checkpoints, merged atomically with the entries already there;
  * leader-epoch-checkpoint truncated to the copied range; producer snapshots up to the new log end.

--from-offset becomes the log start offset (segments wholly below it are not copied; records below it in the
first copied segment stay on disk but are invisible, as after DeleteRecords). --to-offset copies only complete
batches below it (the last segment is cut on a batch boundary and its indexes rebuilt).

The partition is assembled beside DEST_DIR and renamed into place only when complete and fsynced. An existing
partition is refused unless --overwrite (its files are then kept in a backup folder). The destination broker
must be stopped (a live .lock is refused).

Examples:
  kafkalog migrate /old/data/orders-3 /new/data --topic-id 3rWq9ZbmQqW8DX6PNjy4uA
  kafkalog migrate /old/data/orders-3 /new/data --topic orders-archive --from-offset 120000 --dry-run
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="SRC", help="a partition dir or a data dir")
    p.add_argument("dest", metavar="DEST_DIR", help="destination data dir (created if missing)")
    p.add_argument("--topic", default=None, metavar="TOPIC", help="new topic name")
    p.add_argument("--partition", type=int, default=None, metavar="N", help="new partition number (single partition)")
    p.add_argument("--topic-id", default=None, metavar="ID", help="destination topic id (22-char base64 Uuid)")
    p.add_argument("--cluster-id", default=None, metavar="ID", help="cluster id for a new meta.properties")
    p.add_argument("--node-id", type=int, default=None, metavar="ID", help="node id for a new meta.properties")
    p.add_argument("--from-offset", type=int, default=None, metavar="OFFSET", help="new log start offset")
    p.add_argument("--to-offset", type=int, default=None, metavar="OFFSET", help="copy only batches below this offset")
    p.add_argument("--overwrite", action="store_true", help="replace an existing partition in DEST_DIR")
    add_plan_arguments(p)


def run(args: argparse.Namespace) -> int:
    opts = MigrateOptions(topic=args.topic, topic_id=args.topic_id, cluster_id=args.cluster_id,
                          node_id=args.node_id, partition=args.partition, from_offset=args.from_offset,
                          to_offset=args.to_offset, overwrite=args.overwrite)
    plan = plan_migrate(args.source, args.dest, opts)

    def report(_result) -> None:
        if args.json:
            return
        rows = [{"source": f["source"], "dest": f["dest"], "segments": f["segments"], "size": f["bytes"],
                 "offsets": f"{f['logStartOffset']}..{f['logEndOffset']}", "topicId": f["topicId"]}
                for f in (p.facts for p in plan.partitions)]
        if rows:
            print("copied:")
            render_table(rows, ["source", "dest", "segments", "size", "offsets", "topicId"],
                         formats={"size": human_size})

    return run_plan(args, plan, on_applied=report)
