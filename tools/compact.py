"""``kafkalog compact``: one broker cleaning round per compacted partition, offline."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from kafkalog.storage.config import parse_overrides
from kafkalog.storage.engine.cleaner import compact_partition
from kafkalog.storage.engine.cleaner_log import parse_partition_dir_name
from kafkalog.storage.engine.cleaner_manager import ConfigResolver, resolve_partitions
from kafkalog.storage.engine.plan import Backup, data_dir_lock
from kafkalog.tools.output import positive_int, progress

HELP = "compact partitions exactly as the broker's log cleaner would (one cleaning round each)"
DESCRIPTION = """\
Runs one round of Kafka's log cleaner on every compacted partition under DIR (a data dir or a partition dir):
builds the key map over the dirty section (as far as log.cleaner.dedupe.buffer.size reaches), rewrites the
segments before the first uncleanable offset, swaps them in crash-safely (.cleaned -> .swap -> final) and
advances cleaner-offset-checkpoint. Partitions below min.cleanable.dirty.ratio are skipped unless --all.
Refuses a data dir whose .lock a live broker holds. Originals are kept under --backup (default: a timestamped
dir beside the data dir) unless --no-backup. A progress bar is shown on stderr when it is a terminal.

--now matters for delete horizons (tombstones and aborted-transaction markers get now + delete.retention.ms),
min/max.compaction.lag.ms and producer expiry; pass the broker's clock to reproduce a broker round exactly.
--kafka-version picks whose behaviour to match where versions differ: 4.0+ rewrites v0/v1 batches as v2
(KAFKA-13093); 3.9+ indexes cleaned segments per batch (KAFKA-806).

Memory: the key map holds at most the broker's capacity (dedupe.buffer.size / 24 x load factor keys: 5.03 M
for the default 128 MiB). Keys stay in fast dicts (about 260 bytes each) up to half the available memory; past
that they spill into compact sorted arrays of 24 bytes per key, as Kafka's, at some cost in speed.

Exit status: 0 done (also when nothing was eligible), 1 a partition failed (e.g. the broker would mark it
uncleanable), 2 usage.

Config precedence: --config > --topic-config FILE > __cluster_metadata in the data dir > --server-properties
> Kafka defaults (__consumer_offsets and __transaction_state are compacted).

Examples:
  kafkalog compact /var/lib/kafka/data --dry-run
  kafkalog compact /var/lib/kafka/data/orders-3 --now 1732200000000 --config delete.retention.ms=0 --all
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dirs", nargs="+", metavar="DIR", help="data dir(s) or partition dir(s)")
    p.add_argument("--now", type=int, default=None, help="cleaning time in epoch ms (default: wall clock)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config override")
    p.add_argument("--topic-config", metavar="FILE", help="properties file of topic configs")
    p.add_argument("--server-properties", metavar="FILE", help="the broker's server.properties")
    p.add_argument("--all", action="store_true", help="clean regardless of min.cleanable.dirty.ratio")
    p.add_argument("--kafka-version", default="4.0",
                   help="broker version to match (< 4.0 keeps v0/v1 batches; default 4.0)")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="processes for the key-map pass over large dirty sections (default: usable CPUs; the "
                   "result does not depend on it)")
    p.add_argument("--dry-run", action="store_true", help="show what would be reclaimed; write nothing")
    p.add_argument("--backup", metavar="DIR", help="keep originals here (default: timestamped beside the data dir)")
    p.add_argument("--no-backup", action="store_true", help="keep no originals")
    p.add_argument("--keep-deleted", action="store_true", help="leave replaced files as *.deleted")
    p.add_argument("--json", action="store_true", help="JSON Lines on stdout")


def run(args) -> int:
    now = args.now if args.now is not None else int(time.time() * 1000)
    try:
        version = tuple(int(x) for x in args.kafka_version.split(".")[:2])
    except ValueError:
        print(f"kafkalog compact: invalid --kafka-version {args.kafka_version!r}", file=sys.stderr)
        return 2
    resolver = ConfigResolver(args.server_properties, args.topic_config, parse_overrides(args.config))
    cleaner = resolver.broker.cleaner
    expiration = resolver.broker.producer_id_expiration_ms
    by_dir: dict[Path, list[Path]] = {}
    for data_dir, pdir in resolve_partitions(args.dirs):
        by_dir.setdefault(data_dir, []).append(pdir)
    total = 0
    todo = sum(f.stat().st_size for pdirs in by_dir.values() for p in pdirs for f in p.glob("*.log"))
    with progress(todo, "compact") as bar:
        for data_dir, pdirs in by_dir.items():
            backup = None
            if not args.dry_run and not args.no_backup:
                backup = Backup(args.backup or Backup.default_root(data_dir, "compact"), data_dir)
            ctx = data_dir_lock(data_dir) if not args.dry_run else _null()
            with ctx:
                for pdir in pdirs:
                    bar.update(description=f"compact {pdir.name}")
                    topic, _ = parse_partition_dir_name(pdir.name)
                    cfg = resolver.log_config(data_dir, topic)
                    if backup is not None and cfg.compact:
                        for f in sorted(pdir.iterdir()):
                            if f.is_file() and f.suffix in (".log", ".index", ".timeindex", ".txnindex",
                                                            ".snapshot"):
                                backup.preserve(f, copy=False)
                        backup.preserve(data_dir / "cleaner-offset-checkpoint", copy=True)
                    out = compact_partition(pdir, cfg, cleaner, now, dry_run=args.dry_run, force=args.all,
                                            kafka_version=version, expiration_ms=expiration,  # type: ignore[arg-type]
                                            keep_deleted=args.keep_deleted, progress=bar.advance,
                                            workers=args.workers)
                    d = out.to_dict()
                    d["dry_run"] = args.dry_run
                    total += d.get("bytes_reclaimed", 0)
                    if args.json:
                        print(json.dumps(d), flush=True)
                    elif out.result is not None:
                        print(f"{out.partition:40s} {out.reason:12s} {d['bytes_before']:>14,d} -> "
                              f"{d['bytes_after']:>14,d} bytes  (reclaimed {d['bytes_reclaimed']:,d}; clean "
                              f"point {d['first_dirty_offset']} -> {d['end_offset']})", flush=True)
                    else:
                        print(f"{out.partition:40s} skipped: {out.reason}", flush=True)
    if not args.json:
        print(f"total {'reclaimable' if args.dry_run else 'reclaimed'}: {total:,d} bytes")
    return 0


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
