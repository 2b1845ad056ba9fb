"""``kafkalog rehydrate STORE DATA_DIR``: rebuild local partitions from a tiered-storage remote store."""

from __future__ import annotations

import argparse

from kafkalog.storage.remote import open_remote_store
from kafkalog.storage.remote.rehydrate import RehydrateOptions, plan_rehydrate
from kafkalog.tools.output import human_size, render_table
from kafkalog.tools.plan_output import add_plan_arguments, run_plan

DESCRIPTION = """\
Build local partition dirs in the broker log dir DATA_DIR from the remote segments in STORE (Kafka's
LocalTieredStorage layout: its `dir` or kafka-tiered-storage/, local or s3://...), so a broker with tiered
storage off serves them. Local segments already in DATA_DIR are kept: the remote segments fill the offsets
below them.

It writes, per partition: the remote segments as <offset>.log with their .index/.timeindex (rebuilt if they fail
verification) and .txnindex, the last segment's producer snapshot, leader-epoch-checkpoint (merged from the
segments' epoch checkpoints), partition.metadata (the topic id of the remote segment ids), and DATA_DIR's
log-start-offset, recovery-point and replication-offset checkpoint entries. Everything is assembled aside and
renamed into place; DATA_DIR is locked and a live broker's dir refused.

With __remote_log_metadata in DATA_DIR (or --metadata-dir), only COPY_SEGMENT_FINISHED segments are used;
DELETE_SEGMENT_* segments are reported as lost (retention deleted them). A gap or overlap between segments
(or with the local log) is an error before anything is written.

The broker also needs the topic in its cluster metadata, with the topic id of partition.metadata: rehydrate
writes partition data, not cluster metadata. Into a new cluster: create the topic there (without
remote.storage.enable), stop the broker, rehydrate with --topic-id set to the new topic's id, start it. (A
cluster whose metadata still says remote.storage.enable=true rejects that topic config with tiered storage off,
per Kafka's LogConfig.validateRemoteStorageOnlyIfSystemEnabled.)

Examples:
  kafkalog rehydrate /var/lib/kafka/tiered /var/lib/kafka/data --topic orders --dry-run
  kafkalog rehydrate s3://bucket/tiered /var/lib/kafka/data --topic orders --partition 3
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE", help="LocalTieredStorage dir (or its kafka-tiered-storage/), or a URL")
    p.add_argument("data_dir", metavar="DATA_DIR", help="the broker log dir to write the partitions into")
    p.add_argument("--topic", metavar="TOPIC", help="only this topic")
    p.add_argument("--partition", type=int, metavar="N", help="only this partition")
    p.add_argument("--topic-id", metavar="ID", help="write this topic id into partition.metadata (the topic id of a "
                   "new cluster's topic; default: the one of the remote segment ids)")
    p.add_argument("--metadata-dir", dest="metadata_dirs", action="append", default=[], metavar="DIR",
                   help="log dir(s) holding __remote_log_metadata (default: DATA_DIR)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="filesystem option of a URL store (s3.endpoint, s3.region, ...)")
    add_plan_arguments(p, workers=False)


def run(args: argparse.Namespace) -> int:
    from kafkalog.tools.remote import _options

    opts = RehydrateOptions(topic=args.topic, partition=args.partition, metadata_dirs=args.metadata_dirs,
                            topic_id=args.topic_id)
    with open_remote_store(args.store, options=_options(args.option)) as store:
        plan = plan_rehydrate(store, args.data_dir, opts)

        def report(_result) -> None:
            if args.json:
                return
            rows = [{"partition": p.name, "topicId": p.facts.get("topicId"),
                     "remoteSegments": len(p.facts.get("remoteSegments", [])),
                     "localSegments": p.facts.get("localSegments"), "size": p.facts.get("bytes"),
                     "logStartOffset": p.facts.get("logStartOffset"), "logEndOffset": p.facts.get("logEndOffset")}
                    for p in plan.partitions if not p.error]
            if rows:
                print("rehydrated:")
                render_table(rows, list(rows[0]), formats={"size": human_size})

        return run_plan(args, plan, on_applied=report)
