"""``kafkalog checkpoints DIR [--set tp=offset]``: list or set a data dir's offset checkpoints."""

from __future__ import annotations

import argparse
import json
import sys

from kafkalog.storage.engine.offset_checkpoints import (
    CHECKPOINT_ALIASES,
    plan_set_checkpoints,
    read_checkpoints,
)
from kafkalog.storage.files.checkpoints import DATA_DIR_CHECKPOINTS
from kafkalog.storage.log.paths import require_data_dir
from kafkalog.tools.output import render_table
from kafkalog.tools.plan_output import add_plan_arguments, run_plan

DESCRIPTION = """\
List the four offset checkpoints of a data dir per partition, or set entries of one of them:

  recovery-point-offset-checkpoint   first offset not known to be flushed (the broker recovers from there)
  log-start-offset-checkpoint        log start offset (only listed when above the first segment's base)
  replication-offset-checkpoint      high watermark
  cleaner-offset-checkpoint          first dirty offset for the log cleaner

--set TOPIC-PARTITION=OFFSET (repeatable; OFFSET 'none' removes the entry) changes the file named by
--file (recovery-point, log-start-offset, high-watermark/replication-offset, cleaner-offset), atomically
(tmp + fsync + rename + dir fsync) and under the data dir's lock.

Examples:
  kafkalog checkpoints /var/lib/kafka/data
  kafkalog checkpoints /var/lib/kafka/data --file cleaner-offset --set orders-0=0
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="DIR", help="data dir")
    p.add_argument("--file", default=None, choices=sorted(set(CHECKPOINT_ALIASES) | set(DATA_DIR_CHECKPOINTS)),
                   help="which checkpoint --set changes")
    p.add_argument("--set", action="append", default=[], metavar="TP=OFFSET",
                   help="entry to set (repeatable; OFFSET 'none' removes it)")
    add_plan_arguments(p, workers=False)


def _parse(s: str) -> tuple[tuple[str, int], int | None]:
    tp, sep, off = s.partition("=")
    topic, dash, part = tp.rpartition("-")
    if not sep or not dash or not topic or not part.isdigit():
        raise ValueError(f"expected TOPIC-PARTITION=OFFSET, got {s!r}")
    if off.strip().lower() == "none":
        return (topic, int(part)), None
    return (topic, int(part)), int(off)


def run(args: argparse.Namespace) -> int:
    out = sys.stdout
    require_data_dir(args.path)  # the one path contract: checkpoints are a data dir's files
    if args.set:
        if args.file is None:
            print("kafkalog checkpoints: error: --set needs --file", file=sys.stderr)
            return 2
        try:
            updates = dict(_parse(s) for s in args.set)
        except ValueError as e:
            print(f"kafkalog checkpoints: error: {e}", file=sys.stderr)
            return 2
        plan = plan_set_checkpoints(args.path, args.file, updates)
        if not args.json:
            render_table([{"file": args.file, "partition": tp, "old": old, "new": new}
                          for tp, (old, new) in plan.options["changes"].items()], ["file", "partition", "old", "new"],
                         out, headers=["CHECKPOINT", "PARTITION", "OLD", "NEW"])
        return run_plan(args, plan)
    cps = read_checkpoints(args.path)
    tps = sorted({tp for m in cps.values() for tp in m})
    short = ["recovery", "logStart", "highWatermark", "cleaner"]
    rows = []
    for tp in tps:
        vals = [cps[n].get(tp) for n in DATA_DIR_CHECKPOINTS]
        if args.json:
            out.write(json.dumps({"topic": tp[0], "partition": tp[1]} | dict(zip(short, vals, strict=True))) + "\n")
        else:
            rows.append({"partition": f"{tp[0]}-{tp[1]}"} | dict(zip(short, vals, strict=True)))
    if not args.json:
        render_table(rows, ["partition", *short], out,
                     headers=["PARTITION", "RECOVERY POINT", "LOG START", "HIGH WATERMARK", "CLEANER"])
    return 0
