"""`kafkalog repair DIR...`: the broker's startup recovery, offline, with a plan, a dry run and backups."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from kafkalog.storage.config import BrokerConfig, parse_overrides
from kafkalog.storage.engine.plan import Backup, Plan, apply_plan, data_dir_lock
from kafkalog.storage.engine.recovery import partition_actions, plan_repair
from kafkalog.tools.output import positive_int, progress

HELP = "recover data dirs as the broker's startup would (truncate torn/corrupt tails, rebuild indexes...)"
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

Use --dry-run first: it lists every file touched, bytes truncated and records dropped. Originals are kept
in --backup DIR (default: a timestamped folder beside the data dir; hard links where the file is replaced or
deleted, copies where it is cut in place). A dir whose .lock a live broker holds is refused. Without
--dry-run each segment is read once, while repairing, and what was done is printed afterwards.
Exit 0 when nothing needed repair, 1 when something was (or would be) repaired.

Examples:
  kafkalog repair /var/lib/kafka/data --dry-run
  kafkalog repair /var/lib/kafka/data --server-properties /etc/kafka/server.properties
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("data_dirs", nargs="+", metavar="DIR", help="data directories (entries of log.dirs)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--backup", metavar="DIR", help="where to keep originals (default: beside the data dir)")
    p.add_argument("--no-backup", action="store_true", help="do not keep originals")
    p.add_argument("--server-properties", metavar="FILE", help="broker config (index.interval.bytes ...)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="topic config override for every topic (topic overrides are otherwise read from the "
                   "dir's KRaft __cluster_metadata log)")
    p.add_argument("--topic-id", action="append", default=[], metavar="TOPIC=ID",
                   help="topic id (22-char base64) used to rewrite an unreadable partition.metadata when the dir "
                   "holds no __cluster_metadata log")
    p.add_argument("--kafka-exact", action="store_true",
                   help="only what the broker does: keep indexes that fail sanity checks below the recovery point")
    p.add_argument("--now", type=int, metavar="MS", help="current time in epoch ms (producer expiration)")
    p.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1, help="partitions recovered in parallel")
    p.add_argument("--json", action="store_true", help="JSON Lines output")


def run(args: argparse.Namespace) -> int:
    broker = BrokerConfig.from_file(args.server_properties) if args.server_properties else BrokerConfig()
    overrides = parse_overrides(args.config)
    topic_ids = {}
    for item in args.topic_id:
        topic, sep, tid = item.partition("=")
        if not sep or not topic or not tid:
            print(f"kafkalog repair: --topic-id {item!r}: expected TOPIC=ID", file=sys.stderr)
            return 2
        topic_ids[topic] = tid
    now = args.now if args.now is not None else int(time.time() * 1000)
    status = 0
    for d in args.data_dirs:
        if not os.path.isdir(d):
            print(f"kafkalog repair: {d}: not a directory", file=sys.stderr)
            return 2
        with data_dir_lock(d):
            # a dry run validates every segment up front to list what would change; a real run scans each
            # segment once while applying and reports what it did
            plan = plan_repair(d, now, broker=broker, overrides=overrides, topic_ids=topic_ids,
                               strict_indexes=not args.kafka_exact, workers=max(1, args.workers),
                               preview=args.dry_run)
            if args.dry_run:
                if [a for a in plan.actions if a.kind != "recover"] or plan.notes:
                    status = 1
                _render(plan, args.json)
                continue
            backup = None
            if not args.no_backup:
                backup = Backup(args.backup or Backup.default_root(d, "repair"), d)
            plan.backup = backup
            with progress(plan.partitions, f"repair {os.path.basename(os.path.abspath(d))}",
                          unit_bytes=False) as bar:
                plan.progress = bar.advance
                apply_plan(plan, data_dir=d, backup=backup)
            done = Plan("repair", plan.target, [a for a in plan.actions if a.kind != "recover"], list(plan.notes))
            for r in plan.results:
                done.notes += r.notes
                done.actions += partition_actions(r)
            if done.actions or done.notes:
                status = 1
            _render(done, args.json)
            if backup is not None and backup.saved and not args.json:
                print(f"originals kept in {backup.root}", file=sys.stderr)
    return status


def _render(plan, as_json: bool) -> None:
    if as_json:
        for a in plan.to_dicts():
            print(json.dumps(a))
        for n in plan.notes:
            print(json.dumps({"operation": "repair", "target": plan.target, "note": n}))
        return
    print(f"{plan.target}:")
    for a in plan.actions:
        extra = f" ({a.bytes} bytes" + (f", {a.records} records" if a.records else "") + ")" if a.bytes else ""
        print(f"  {a.kind:9} {a.path}: {a.detail}{extra}")
    for n in plan.notes:
        print(f"  note: {n}")
