"""``kafkalog compact``: one broker cleaning round per compacted partition, offline, as a plan."""

from __future__ import annotations

import argparse
import json
import sys

from kafkalog.storage.engine.cleaner.manager import plan_compact
from kafkalog.tools.config_args import add_config_arguments, config_resolver, now_ms
from kafkalog.tools.output import add_topics_argument, human_size, positive_int, render_table
from kafkalog.tools.plan_output import add_plan_arguments, run_plan

DESCRIPTION = """\
Runs one round of Kafka's log cleaner on every compacted partition under DIR (a data dir or a partition dir):
builds the key map over the dirty section (as far as log.cleaner.dedupe.buffer.size reaches), rewrites the
segments before the first uncleanable offset, grouped by segment.bytes (internal.segment.bytes when set), swaps
them in crash-safely (.cleaned -> .swap -> final) and advances cleaner-offset-checkpoint. Partitions below
min.cleanable.dirty.ratio are skipped unless --all.

--dry-run measures the round too: the new segments' sizes and how many records go. The plan shows the
settings that decided each partition and where each came from.

Refuses a data dir whose .lock a live broker holds. Originals are kept under --backup (default: a new folder
beside the data dir, only when something changes) unless --no-backup.

--now matters for delete horizons (tombstones and aborted-transaction markers get now + delete.retention.ms),
min/max.compaction.lag.ms and producer expiry; pass the broker's clock to reproduce a broker round exactly.
--kafka-version picks whose behaviour to match where versions differ: 4.0+ rewrites v0/v1 batches as v2
(KAFKA-13093); 3.9+ indexes cleaned segments per batch (KAFKA-806).

Memory: the key map holds at most the broker's capacity (dedupe.buffer.size / 24 x load factor keys: 5.03 M
for the default 128 MiB). Keys stay in fast dicts (about 260 bytes each) up to half the available memory; past
that they spill into compact sorted arrays of 24 bytes per key, as Kafka's, at some cost in speed.

Exit status: 0 done (also when nothing was eligible), 1 the plan is invalid (e.g. the broker would mark a
partition uncleanable; nothing changed), 2 usage.

Config precedence: --config > --topic-config FILE > __cluster_metadata (snapshot and log) in the data dir >
dynamic broker configs > --server-properties > Kafka defaults (__consumer_offsets and __transaction_state are
compacted).

Examples:
  kafkalog compact /var/lib/kafka/data --dry-run
  kafkalog compact /var/lib/kafka/data/orders-3 --now 1732200000000 --config delete.retention.ms=0 --all
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dirs", nargs="+", metavar="DIR", help="data dir(s) or partition dir(s)")
    add_plan_arguments(p)
    add_config_arguments(p, "cleaning time")
    p.add_argument("--all", action="store_true", help="clean regardless of min.cleanable.dirty.ratio")
    p.add_argument("--kafka-version", default="4.0", metavar="VERSION",
                   help="broker version to match (< 4.0 keeps v0/v1 batches; default 4.0)")
    p.add_argument("--map-workers", type=positive_int, default=None, metavar="N",
                   help="processes for the key-map pass over large dirty sections (default: usable CPUs; the "
                   "result does not depend on it)")
    p.add_argument("--keep-deleted", action="store_true", help="leave replaced files as *.deleted")
    add_topics_argument(p)


def run(args) -> int:
    try:
        major, minor = (int(x) for x in f"{args.kafka_version}.0".split(".")[:2])  # "4" is 4.0
    except ValueError:
        print(f"kafkalog compact: invalid --kafka-version {args.kafka_version!r}", file=sys.stderr)
        return 2
    plan = plan_compact(args.dirs, now_ms=now_ms(args), resolver=config_resolver(args), topics=args.topics,
                        force=args.all, kafka_version=(major, minor),
                        exact=args.dry_run, keep_deleted=args.keep_deleted, map_workers=args.map_workers,
                        workers=args.workers or 1)
    def report(result) -> None:
        from kafkalog.storage.engine.cleaner.cleaner import CleanResult

        table = []
        for pp in plan.partitions:
            for r in result.results.get(pp.dir, []):
                if not isinstance(r, CleanResult):
                    continue
                row = {"partition": pp.name, "cleaned": True, "firstDirtyOffset": r.first_dirty_offset,
                       "endOffset": r.end_offset, "mapFull": r.map_full,
                       "bytesBefore": r.bytes_before, "bytesAfter": r.bytes_after,
                       "bytesReclaimed": r.bytes_reclaimed, "recordsRead": r.stats.messages_read,
                       "recordsRetained": r.stats.messages_retained, "segmentsIn": sum(len(g.sources) for g in r.groups),
                       "segmentsOut": len(r.groups)}
                if args.json:
                    print(json.dumps(row))
                else:
                    table.append({"partition": pp.name, "sizeBefore": r.bytes_before, "sizeAfter": r.bytes_after,
                                  "reclaimed": r.bytes_reclaimed,
                                  "recordsRemoved": r.stats.messages_read - r.stats.messages_retained,
                                  "cleanPoint": r.end_offset})
        if table:
            render_table(table, ["partition", "sizeBefore", "sizeAfter", "reclaimed", "recordsRemoved", "cleanPoint"],
                         sys.stdout, formats={k: human_size for k in ("sizeBefore", "sizeAfter", "reclaimed")})

    return run_plan(args, plan, on_applied=report)
