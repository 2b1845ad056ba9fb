"""`kafkalog flush DIR...`: fsync, checkpoint recovery points and mark a clean shutdown."""

from __future__ import annotations

import argparse
import json
import os
import time

from kafkalog.storage.engine.flush import flush_data_dir, partition_dirs
from kafkalog.storage.engine.plan import data_dir_lock
from kafkalog.tools.output import positive_int, progress

HELP = "fsync a data dir and write its checkpoints so a broker starts without recovery"
DESCRIPTION = """\
What a broker does at a clean shutdown, offline: every partition's data above its recovery point is verified
(CRC, framing), fsynced, the active segment's indexes trimmed and a producer snapshot taken at the log end
offset; recovery-point-offset-checkpoint and log-start-offset-checkpoint are rewritten and
.kafka_cleanshutdown is written. A partition whose data does not verify keeps its recovery point and the
marker is not written (exit 1): run `kafkalog repair` first.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("data_dirs", nargs="+", metavar="DIR")
    p.add_argument("--dry-run", action="store_true", help="verify and report, write nothing")
    p.add_argument("--no-clean-shutdown-marker", action="store_true", help="do not write .kafka_cleanshutdown")
    p.add_argument("--broker-epoch", type=int, help="brokerEpoch in the marker (default: kept, else -1)")
    p.add_argument("--now", type=int, metavar="MS", help="current time in epoch ms (producer expiration)")
    p.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1, help="processes flushing partitions")
    p.add_argument("--json", action="store_true", help="JSON Lines output")


def run(args: argparse.Namespace) -> int:
    now = args.now if args.now is not None else int(time.time() * 1000)
    status = 0
    for d in args.data_dirs:
        with data_dir_lock(d), progress(len(partition_dirs(d)), f"flush {os.path.basename(os.path.abspath(d))}",
                                        unit_bytes=False) as bar:
            res = flush_data_dir(d, now_ms=now, dry_run=args.dry_run,
                                 write_clean_shutdown_marker=not args.no_clean_shutdown_marker,
                                 broker_epoch=args.broker_epoch, progress=bar.advance,
                                 workers=max(1, args.workers))
        for p in res.partitions:
            if args.json:
                print(json.dumps({"dataDir": d, "topic": p.topic, "partition": p.partition,
                                  "recoveryPoint": p.recovery_point, "logEndOffset": p.log_end_offset,
                                  "logStartOffset": p.log_start_offset, "verified": p.verified,
                                  "problem": p.problem}))
            elif not p.verified:
                print(f"{p.topic}-{p.partition}: NOT flushed: {p.problem}")
        if not args.json:
            ok = sum(p.verified for p in res.partitions)
            print(f"{d}: {ok}/{len(res.partitions)} partitions flushed"
                  + ("; clean shutdown marker written" if res.clean_shutdown_written else ""))
            for n in res.notes:
                print(f"  note: {n}")
        if not res.ok:
            status = 1
    return status
