"""``kafkalog retain``: apply the broker's retention (time, size, log start offset) offline."""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path

from kafkalog.storage.config import parse_overrides
from kafkalog.storage.engine.cleaner_log import parse_partition_dir_name
from kafkalog.storage.engine.cleaner_manager import ConfigResolver, resolve_partitions
from kafkalog.storage.engine.plan import Backup, data_dir_lock
from kafkalog.storage.engine.retention import apply_retention, retention_plan
from kafkalog.tools.output import progress

HELP = "delete segments exactly as the broker's retention would (retention.ms, retention.bytes, log start)"
DESCRIPTION = """\
Walks every partition under DIR oldest segment first and deletes the segments the broker's retention run at
--now would delete: wholly below the log start offset (all topics), then, for cleanup.policy containing delete,
while the rest still exceeds retention.bytes, then while now - largest timestamp > retention.ms. The active
segment only goes when the high watermark (replication-offset-checkpoint) covers it, and then a new empty
segment is rolled first. Files are renamed *.deleted, then removed (--keep-deleted leaves them).

Like the broker, this never touches cleaner-offset-checkpoint (the next cleaning round resets a clean point
below the new log start offset). When every segment goes, a new empty active segment and a producer snapshot
are written at the log end offset first, as UnifiedLog.roll does. Refuses a data dir whose .lock a live broker
holds; originals are kept under --backup unless --no-backup.

Example:  kafkalog retain /var/lib/kafka/data --now 1732200000000 --dry-run
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dirs", nargs="+", metavar="DIR", help="data dir(s) or partition dir(s)")
    p.add_argument("--now", type=int, default=None, help="retention time in epoch ms (default: wall clock)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config override")
    p.add_argument("--topic-config", metavar="FILE", help="properties file of topic configs")
    p.add_argument("--server-properties", metavar="FILE", help="the broker's server.properties")
    p.add_argument("--dry-run", action="store_true", help="show what would be deleted; change nothing")
    p.add_argument("--backup", metavar="DIR", help="keep originals here (default: timestamped beside the data dir)")
    p.add_argument("--no-backup", action="store_true", help="keep no originals")
    p.add_argument("--keep-deleted", action="store_true", help="leave deleted segments as *.deleted")
    p.add_argument("--json", action="store_true", help="JSON Lines on stdout")


def run(args) -> int:
    now = args.now if args.now is not None else int(time.time() * 1000)
    resolver = ConfigResolver(args.server_properties, args.topic_config, parse_overrides(args.config))
    by_dir: dict[Path, list[Path]] = {}
    for data_dir, pdir in resolve_partitions(args.dirs):
        by_dir.setdefault(data_dir, []).append(pdir)
    total = 0
    expiration = resolver.broker.producer_id_expiration_ms
    with progress(sum(len(p) for p in by_dir.values()), "retain", unit_bytes=False) as bar:
        for data_dir, pdirs in by_dir.items():
            backup = None
            if not args.dry_run and not args.no_backup:
                backup = Backup(args.backup or Backup.default_root(data_dir, "retain"), data_dir)
            with data_dir_lock(data_dir) if not args.dry_run else contextlib.nullcontext():
                for pdir in pdirs:
                    topic, _ = parse_partition_dir_name(pdir.name)
                    cfg = resolver.log_config(data_dir, topic)
                    plan = retention_plan(pdir, cfg, now, cleaner_enabled=resolver.broker.cleaner.enable_cleaner)
                    if not args.dry_run and plan.deletions:
                        if backup is not None:
                            for d in plan.deletions:
                                for f in d.files:
                                    backup.preserve(f, copy=False)
                                snap = pdir / f"{d.base_offset:020d}.snapshot"
                                if snap.exists():
                                    backup.preserve(snap, copy=True)
                            for name in ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint"):
                                backup.preserve(data_dir / name, copy=True)
                        apply_retention(plan, keep_deleted=args.keep_deleted, producer_id_expiration_ms=expiration)
                    total += plan.bytes
                    d = plan.to_dict()
                    d["dry_run"] = args.dry_run
                    if args.json:
                        print(json.dumps(d), flush=True)
                    elif plan.deletions:
                        print(f"{plan.partition:40s} {'would delete' if args.dry_run else 'deleted'} "
                              f"{len(plan.deletions)} segment(s), {plan.bytes:,d} bytes "
                              f"({', '.join(d['reasons'])}); log start offset -> {plan.new_log_start_offset}",
                              flush=True)
                    bar.advance(1)
    if not args.json:
        print(f"total {'deletable' if args.dry_run else 'deleted'}: {total:,d} bytes")
    return 0
