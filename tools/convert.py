"""``kafkalog convert DIR...``: rewrite legacy (v0/v1) segments as v2 and/or change the codec, crash-safely."""

from __future__ import annotations

import argparse
import json
import os
import sys

from kafkalog.storage.codec.compression import CODEC_IDS
from kafkalog.storage.engine.convert import ConvertOptions, audit, convert
from kafkalog.tools.output import positive_int

HELP = "rewrite v0/v1 segments as v2 (Kafka 4.0 cleaner rules) and/or recompress; --audit lists legacy segments"
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
    p.add_argument("--level", type=int, default=None, help="compression level for --codec (codec default)")
    p.add_argument("--group-uncompressed", action="store_true",
                   help="group runs of uncompressed v0/v1 messages into one v2 batch (up to --group-bytes)")
    p.add_argument("--group-bytes", type=int, default=1024 * 1024, help="bytes per grouped batch (1 MiB)")
    p.add_argument("--index-interval-bytes", type=int, default=4096,
                   help="index.interval.bytes used to rebuild the offset/time indexes (4096)")
    p.add_argument("--topics", default=None, help="comma-separated topics to convert (default: all)")
    p.add_argument("--audit", action="store_true", help="only list segments still holding v0/v1 batches")
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--backup", default=None, metavar="DIR", help="backup folder (default: beside the data dir)")
    p.add_argument("--no-backup", action="store_true", help="do not keep the original files")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="segments converted at once by N processes (default: the number of CPUs)")
    p.add_argument("--json", action="store_true", help="JSON Lines output")


def _topics(s: str | None) -> set[str] | None:
    return {t for t in s.split(",") if t} if s else None


def _run_audit(args: argparse.Namespace) -> int:
    out = sys.stdout
    rows = list(audit(args.paths, topics=_topics(args.topics)))
    if args.json:
        for a in rows:
            out.write(json.dumps(a.to_dict()) + "\n")
    else:
        if rows:
            out.write(f"{'partition':<32} {'segment':<26} {'size':>12} {'v0':>8} {'v1':>8} {'v2':>8} "
                      f"{'legacy bytes':>14}\n")
        for a in rows:
            out.write(f"{a.partition:<32} {a.segment:<26} {a.size:>12} {a.v0_batches:>8} {a.v1_batches:>8} "
                      f"{a.v2_batches:>8} {a.legacy_bytes:>14}\n")
        parts = len({a.partition for a in rows})
        out.write(f"{len(rows)} segments in {parts} partitions hold v0/v1 batches "
                  f"({sum(a.legacy_bytes for a in rows)} bytes)\n")
    return 0


def _progress(total: int):
    """A rich progress bar on stderr (disabled when stderr is not a terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    prog = Progress(TextColumn("convert"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    transient=True, disable=not sys.stderr.isatty())
    task = prog.add_task("convert", total=total)
    return prog, (lambda _a: prog.advance(task))


def run(args: argparse.Namespace) -> int:
    if args.audit:
        return _run_audit(args)
    opts = ConvertOptions(to_magic=args.to_magic, codec=args.codec, level=args.level,
                          group_uncompressed=args.group_uncompressed, group_bytes=args.group_bytes,
                          index_interval_bytes=args.index_interval_bytes)
    from kafkalog.storage.engine.convert import plan_convert

    out = sys.stdout
    topics = _topics(args.topics)
    if args.dry_run:
        plan = plan_convert(args.paths, opts, topics=topics)
        if args.json:
            for d in plan.to_dicts():
                out.write(json.dumps(d) + "\n")
            out.write(json.dumps({"summary": plan.summary(), "dryRun": True}) + "\n")
        else:
            for a in plan.actions:
                out.write(f"would convert {a.path}: {a.detail}\n")
            out.write(f"{len(plan.actions)} segments would be rewritten ({plan.bytes} bytes to convert); "
                      "nothing changed (--dry-run)\n")
        return 0
    plan = plan_convert(args.paths, opts, topics=topics)
    prog, tick = _progress(len(plan.actions))
    with prog:
        report = convert(args.paths, opts, topics=topics, backup_root=args.backup, backup=not args.no_backup,
                         progress=tick, plan=plan, workers=max(1, args.workers or os.cpu_count() or 1))
    s = report.summary()
    if args.json:
        for r in report.applied:
            out.write(json.dumps({"partition": r.partition, "segment": r.segment, "bases": r.bases,
                                  "bytesIn": r.bytes_in, "bytesOut": r.bytes_out, "batchesIn": r.batches_in,
                                  "batchesOut": r.batches_out, "legacyBatches": r.legacy_batches}) + "\n")
        out.write(json.dumps({"summary": s}) + "\n")
    else:
        for r in report.applied:
            out.write(f"converted {r.partition}/{r.segment}: {r.batches_in} -> {r.batches_out} batches, "
                      f"{r.bytes_in} -> {r.bytes_out} bytes\n")
        out.write(f"{s['segments']} segments converted ({s['legacyBatches']} legacy batches)"
                  + (f"; originals in {s['backup']}" if s["backup"] else "") + "\n")
    return 0
