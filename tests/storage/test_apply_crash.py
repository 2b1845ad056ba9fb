"""Crash safety of apply: the process is killed before the N-th file mutation of an apply, for every N (a
bounded sample by default, every step with ``-m slow``), on damaged copies of real-broker fixtures.

A kill is ``os._exit`` from inside the library's I/O seam in a forked child: no cleanup handler runs, as with
SIGKILL. After each kill the directory must load (``repair`` plans without errors and applies), and every
partition must hold the records of the state before the apply, of the state the plan promised, or one in between
that a broker could also be left in (a cleaning round swapped in group by group, retention deleting segments
oldest first): ``after <= crashed <= before`` as sets of ``(offset, key, value)``, never anything else.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from damage import NOW, count_mutations, damaged_copy, killed_at, plan_for, records, roll_active

from kafkalog.storage.engine.plan import apply
from kafkalog.storage.engine.repair import plan_repair

SAMPLE = 12  # kill points per command in the default run


def _repair(d: Path) -> None:
    plan = plan_repair([d], now_ms=NOW)
    assert not plan.errors, plan.errors
    apply(plan, backup=False)


COMMANDS = {  # command -> the damages it meets
    "repair": ("unclean", "torn_tail", "crc_mismatch", "missing_index", "leftovers", "bad_checkpoint"),
    "reindex": ("missing_index", "bad_timeindex"),
    "flush": ("unclean", "bad_checkpoint"),
    "retain": (),
    "compact": (),
    "convert": (),
}


def _campaign(tmp_path: Path, fixture: str, command: str, sample: int | None) -> tuple[int, int]:
    damages = COMMANDS[command]
    base = tmp_path / "base"
    damaged_copy(fixture, base, damages)
    if command == "compact":
        roll_active(base)
    before_dir = tmp_path / "before"
    shutil.copytree(base, before_dir)
    _repair(before_dir)
    before = records(before_dir)
    after_dir = tmp_path / "after"
    shutil.copytree(base, after_dir)
    steps = count_mutations(lambda: apply(plan_for(command, after_dir), backup=False))
    _repair(after_dir)
    after = records(after_dir)
    points = list(range(1, steps + 1))
    if sample is not None and len(points) > sample:
        points = sorted({points[round(i * (len(points) - 1) / (sample - 1))] for i in range(sample)})
    for k in points:
        d = tmp_path / f"k{k}"
        shutil.copytree(base, d)
        assert killed_at(command, d, k) == 137, f"step {k}/{steps} never came"
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
