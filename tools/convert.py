"""``kafkalog convert DIR...``: rewrite legacy (v0/v1) segments as v2 and/or change the codec, crash-safely."""

from __future__ import annotations

import argparse
import json
import sys

from kafkalog.storage.codec.compression import CODEC_IDS
from kafkalog.storage.engine.convert import ConvertOptions, SegmentResult
from kafkalog.storage.engine.message_format import audit, plan_convert
from kafkalog.tools.output import add_topics_argument, human_size, render_table
from kafkalog.tools.plan_output import add_plan_arguments, run_plan

DESCRIPTION = """\
Rewrite the segments of every partition under DIR (data dirs or partition dirs) so that every batch is
message format v2 and/or uses another codec. Every record keeps its offset, timestamp, key and value.

Rules (Kafka 4.0's cleaner, KAFKA-13093):
  * a compressed v0/v1 wrapper becomes one v2 batch (same codec unless --codec says otherwise);
  * an uncompressed v0/v1 message becomes a single-record v2 batch (--group-uncompressed groups runs of them);
  * v0 records get CreateTime and timestamp -1; v1 keeps its timestamps and timestamp type;
  * v2 batches are copied verbatim unless --codec asks for another codec (control batches always verbatim).

Each segment is written as <base>.log.cleaned with rebuilt .index/.timeindex, then swapped in with Kafka's own
.cleaned -> .swap -> replace protocol: a crash at any point leaves a directory the broker (or `kafkalog
repair`) completes or rolls back. Segment base offsets, producer snapshots and checkpoints are unchanged.
The broker must be stopped: a data dir whose .lock a live process holds is refused.

Originals are kept (hard links) in a backup folder beside the data dir unless --no-backup.

Examples:
  kafkalog convert /var/lib/kafka/data --audit          # which segments still hold v0/v1 batches
  kafkalog convert /var/lib/kafka/data --dry-run        # what would be rewritten
  kafkalog convert /var/lib/kafka/data/orders-3 --codec zstd --level 3
"""




def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="DIR", help="data dir(s) or partition dir(s)")
    p.add_argument("--to-magic", type=int, default=2, choices=[2], help="target message format (only 2)")
    p.add_argument("--codec", choices=sorted(CODEC_IDS), default=None,
                   help="recompress every data batch with this codec (default: keep each batch's codec)")
    p.add_argument("--level", type=int, default=None, metavar="N", help="compression level for --codec (codec default)")
    p.add_argument("--group-uncompressed", action="store_true",
                   help="group runs of uncompressed v0/v1 messages into one v2 batch (up to --group-bytes)")
    p.add_argument("--group-bytes", type=int, default=1024 * 1024, metavar="N", help="bytes per grouped batch (1 MiB)")
    p.add_argument("--index-interval-bytes", type=int, default=None, metavar="N",
                   help="index.interval.bytes used to rebuild the offset/time indexes (default: each topic's "
                   "effective setting)")
    add_topics_argument(p, " (to convert or audit)")
    p.add_argument("--audit", action="store_true", help="only list segments still holding v0/v1 batches")
    add_plan_arguments(p)


def _run_audit(args: argparse.Namespace) -> int:
    out = sys.stdout
    rows = list(audit(args.paths, topics=args.topics))
    if args.json:
        for a in rows:
            out.write(json.dumps(a.to_dict()) + "\n")
    else:
        if rows:
            render_table([{"partition": a.partition, "segment": a.segment, "size": a.size, "v0": a.v0_batches,
                           "v1": a.v1_batches, "v2": a.v2_batches, "legacy": a.legacy_bytes} for a in rows],
                         ["partition", "segment", "size", "v0", "v1", "v2", "legacy"], out,
                         headers=["PARTITION", "SEGMENT", "SIZE", "V0 BATCHES", "V1 BATCHES", "V2 BATCHES",
                                  "LEGACY SIZE"], formats={"size": human_size, "legacy": human_size})
        parts = len({a.partition for a in rows})
        out.write(f"{len(rows)} segments in {parts} partitions hold v0/v1 batches "
                  f"({human_size(sum(a.legacy_bytes for a in rows))})\n")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.audit:
        return _run_audit(args)
    opts = ConvertOptions(to_magic=args.to_magic, codec=args.codec, level=args.level,
                          group_uncompressed=args.group_uncompressed, group_bytes=args.group_bytes,
                          index_interval_bytes=args.index_interval_bytes)
    plan = plan_convert(args.paths, opts, topics=args.topics, workers=args.workers or 1)

    def report(result) -> None:
        done = [r for rs in result.results.values() for r in rs if isinstance(r, SegmentResult)]
        if args.json:
            for r in done:
                print(json.dumps(r.to_dict()))
        elif done:
            render_table([{"partition": r.partition, "segment": r.segment, "batchesIn": r.batches_in,
                           "batchesOut": r.batches_out, "sizeIn": r.bytes_in, "sizeOut": r.bytes_out} for r in done],
                         ["partition", "segment", "batchesIn", "batchesOut", "sizeIn", "sizeOut"], sys.stdout,
                         formats={"sizeIn": human_size, "sizeOut": human_size})
        if not args.json:
            print(f"{len(done)} segment(s) converted ({sum(r.legacy_batches for r in done)} legacy batches)")

    return run_plan(args, plan, on_applied=report)
