"""`kafkalog flush DIR...`: fsync, checkpoint recovery points and mark a clean shutdown."""

from __future__ import annotations

import argparse
import time

from kafkalog.storage.engine.flush import plan_flush
from kafkalog.tools.output import NOW_GRAMMAR, timestamp_ms
from kafkalog.tools.plan_output import add_plan_arguments, run_plan

DESCRIPTION = """\
What a broker does at a clean shutdown, offline: every partition's data above its recovery point is verified
(CRC, framing), fsynced, the active segment's indexes trimmed and a producer snapshot taken at the log end
offset; recovery-point-offset-checkpoint and log-start-offset-checkpoint are rewritten and
.kafka_cleanshutdown is written. A partition whose data does not verify keeps its recovery point and the
marker is not written (exit 1): run `kafkalog repair` first. A dir already flushed changes nothing.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("data_dirs", nargs="+", metavar="DIR", help="data directories (entries of log.dirs)")
    add_plan_arguments(p)
    p.add_argument("--no-clean-shutdown-marker", action="store_true", help="do not write .kafka_cleanshutdown")
    p.add_argument("--broker-epoch", type=int, metavar="N", help="brokerEpoch in the marker (default: kept, else -1)")
    p.add_argument("--now", type=timestamp_ms, metavar="TIME", help=f"current time (producer expiration): {NOW_GRAMMAR}")


def run(args: argparse.Namespace) -> int:
    now = args.now if args.now is not None else int(time.time() * 1000)
    plan = plan_flush(args.data_dirs, now_ms=now, write_clean_shutdown_marker=not args.no_clean_shutdown_marker,
                      broker_epoch=args.broker_epoch, workers=args.workers or 1)
    return run_plan(args, plan, exit_code=lambda p: 0 if all(x.facts.get("verified") for x in p.partitions) else 1)
