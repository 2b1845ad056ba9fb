"""Crash safety of apply: the process is killed before the N-th file mutation of an apply, for every N (a
bounded sample by default, every step with ``-m slow``), on damaged copies of real-broker fixtures.

A kill is ``os._exit`` from inside the library's I/O seam in a forked child: no cleanup handler runs, as with
SIGKILL. After each kill the directory must load (``repair`` plans without errors and applies), and every
partition must hold the records of the state before the apply, of the state the plan promised, or one in between
that a broker could also be left in (a cleaning round swapped in group by group, retention deleting segments
oldest first): ``after <= crashed <= before`` as sets of ``(offset, key, value)``, never anything else.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from damage import damaged_copy

from kafkalog.storage import fileops
from kafkalog.storage.engine.cleaner import plan_compact
from kafkalog.storage.engine.convert import ConvertOptions, plan_convert
from kafkalog.storage.engine.flush import plan_flush
from kafkalog.storage.engine.plan import apply
from kafkalog.storage.engine.reindex import plan_reindex
from kafkalog.storage.engine.repair import plan_repair
from kafkalog.storage.engine.retention import plan_retention
from kafkalog.storage.log import PartitionLog
from kafkalog.storage.logdir import partition_dirs, read_checkpoint_or_empty

NOW = 1_900_000_000_000
MUTATIONS = {"write", "append", "rename", "truncate", "unlink", "mkdir", "rmdir", "utime"}
SAMPLE = 12  # kill points per command in the default run


def records(d: Path) -> dict[str, set[tuple]]:
    """Per partition: the records a consumer can read, from the log start offset."""
    lso = read_checkpoint_or_empty(d / "log-start-offset-checkpoint")
    out = {}
    for p, topic, part in partition_dirs(d):
        with PartitionLog(p, log_start_offset_checkpoint=lso.get((topic, part))) as log:
            start = log.log_start_offset
            recs = set()
            for _seg, b in log.iter_batches():
                if b.is_control:
                    continue
                for r in b.records():
                    if r.offset >= start:
                        recs.add((r.offset, bytes(r.key) if r.key is not None else None,
                                  bytes(r.value) if r.value is not None else None))
                del b
            out[p.name] = recs
    return out


def _repair(d: Path) -> None:
    plan = plan_repair([d], now_ms=NOW)
    assert not plan.errors, plan.errors
    apply(plan, backup=False)


def _count_steps(make_plan, d: Path) -> int:
    n = [0]

    def count(kind, _p, _t):
        if kind in MUTATIONS:
            n[0] += 1

    with fileops.observe(count):
        apply(make_plan(d), backup=False)
    return n[0]


def _killed_at(make_plan, d: Path, k: int) -> int:
    """Run the apply in a forked child killed before its k-th mutation; returns the child's exit status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        n = [0]

        def kill(kind, _p, _t):
            if kind in MUTATIONS:
                n[0] += 1
                if n[0] == k:
                    os._exit(137)

        try:
            with fileops.observe(kill):
                apply(make_plan(d), backup=False)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


COMMANDS = {
    "repair": (("unclean", "torn_tail", "crc_mismatch", "missing_index", "leftovers", "bad_checkpoint"),
               lambda d: plan_repair([d], now_ms=NOW)),
    "reindex": (("missing_index", "bad_timeindex"), lambda d: plan_reindex([d])),
    "flush": (("unclean", "bad_checkpoint"), lambda d: plan_flush([d], now_ms=NOW)),
    "retain": ((), lambda d: plan_retention([d], now_ms=NOW)),
    "compact": ((), lambda d: plan_compact([d], now_ms=NOW, force=True)),
    "convert": ((), lambda d: plan_convert([d], ConvertOptions(codec="lz4"))),
}


def _roll_active(d: Path) -> None:
    for p, _t, _n in partition_dirs(d):
        with PartitionLog(p) as log:
            leo = log.log_end_offset
            if log.active_segment is not None and log.active_segment.size and leo > log.active_segment.base_offset:
                (p / f"{leo:020d}.log").touch()


def _campaign(tmp_path: Path, fixture: str, command: str, sample: int | None) -> tuple[int, int]:
    damages, make_plan = COMMANDS[command]
    base = tmp_path / "base"
    damaged_copy(fixture, base, damages)
    if command == "compact":
        _roll_active(base)
    before_dir = tmp_path / "before"
    shutil.copytree(base, before_dir)
    _repair(before_dir)
    before = records(before_dir)
    after_dir = tmp_path / "after"
    shutil.copytree(base, after_dir)
    steps = _count_steps(make_plan, after_dir)
    _repair(after_dir)
    after = records(after_dir)
    points = list(range(1, steps + 1))
    if sample is not None and len(points) > sample:
        points = sorted({points[round(i * (len(points) - 1) / (sample - 1))] for i in range(sample)})
    for k in points:
        d = tmp_path / f"k{k}"
        shutil.copytree(base, d)
        assert _killed_at(make_plan, d, k) == 137, f"step {k} of {steps} was never reached"
        _repair(d)
        got = records(d)
        assert set(got) == set(before), f"kill at step {k}/{steps}: partitions differ"
        for name, recs in got.items():
            assert after[name] <= recs <= before[name], \
                f"{command}: kill at step {k}/{steps}: {name} holds records outside the before/after states"
        shutil.rmtree(d)
    return steps, len(points)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_kill_during_apply(tmp_path, command):
    steps, tried = _campaign(tmp_path, "kafka-4.3.1-kraft", command, SAMPLE)
    print(f"{command}: {tried} of {steps} kill points tried, all loaded with nothing lost")
    assert tried >= min(steps, SAMPLE)


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["kafka-3.9.2-zk-v1", "kafka-4.3.1-kraft", "kafka-4.3.1-kraft-killed"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_kill_at_every_step(tmp_path, fixture, command):
    steps, tried = _campaign(tmp_path, fixture, command, None)
    print(f"{fixture} {command}: every one of {steps} kill points loaded with nothing lost")
    assert tried == steps
