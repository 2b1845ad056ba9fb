"""Crash safety of apply: the process is killed before the N-th file mutation of an apply, for every N (a
bounded sample on each fixture by default (and in CI), every step with ``-m campaign``), on damaged copies of
real-broker fixtures.

A kill is ``os._exit`` from inside the library's I/O seam in a forked child: no cleanup handler runs, as with
SIGKILL. After each kill the directory must load (``repair`` plans without errors and applies), and every
partition must hold the records of the state before the apply, of the state the plan promised, or one in between
that a broker could also be left in (a cleaning round swapped in group by group, retention deleting segments
oldest first): ``after <= crashed <= before`` as sets of ``(offset, key, value)``, never anything else.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from damage import FAULT_DAMAGES, fault_campaign, killed_at

SAMPLE = 6  # kill points per command and fixture in the default run (CI time: 12 took 210 s); every one under -m campaign
COMMANDS = sorted(FAULT_DAMAGES)


def _campaign(tmp_path: Path, fixture: str, command: str, sample: int | None) -> tuple[int, int]:
    def kill(d: Path, k: int, steps: int) -> None:
        assert killed_at(command, d, k) == 137, f"step {k}/{steps} never came"

    return fault_campaign(tmp_path, fixture, command, sample, kill)


FIXTURES = ["kafka-3.9.2-zk-v1", "kafka-4.3.1-kraft", "kafka-4.3.1-kraft-killed"]


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("command", COMMANDS)
def test_kill_during_apply(tmp_path, fixture, command):
    steps, tried = _campaign(tmp_path, fixture, command, SAMPLE)
    print(f"{fixture} {command}: {tried} of {steps} kill points tried, all loaded with nothing lost")
    assert tried >= min(steps, SAMPLE)


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("command", COMMANDS)
def test_kill_at_every_step(tmp_path, fixture, command):
    steps, tried = _campaign(tmp_path, fixture, command, None)
    print(f"{fixture} {command}: every one of {steps} kill points loaded with nothing lost")
    assert tried == steps
