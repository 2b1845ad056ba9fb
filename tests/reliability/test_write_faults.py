"""Faults at every write step of the plan/apply engines: ``ENOSPC`` and ``EIO`` raised at the k-th file
mutation (write, append, rename, truncate, unlink, mkdir, utime) of ``repair``, ``reindex``, ``flush``,
``retain``, ``compact`` and ``convert``, through the library's I/O seam (``fileops.observe``), on damaged copies
of a real-broker fixture.

After each fault: the command failed with a clear error naming the file and the OS error (the engine's
``KafkaLogError``, or the ``OSError`` itself; never another exception, never a success); the directory loads (``repair`` plans without errors and applies); every partition holds the records of
the state before the apply, of the state its plan promised, or one in between that a broker could also be left
in (``after <= faulted <= before``, as the SIGKILL tests of ``test_apply_crash.py``); and running the command
again on the repaired dir reaches the promised state. A bounded sample of steps runs with the suite (and in
CI); every step is the full campaign, ``pytest -m campaign`` (``make campaign``; about 9 minutes here); each test
prints what it tried.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest
from damage import MUTATIONS, NOW, count_mutations, damaged_copy, plan_for, records, roll_active

from kafkalog.storage import fileops
from kafkalog.storage.engine.plan import apply
from kafkalog.storage.engine.repair import plan_repair
from kafkalog.storage.errors import KafkaLogError

SAMPLE = 6  # fault points per command and errno in the default run
COMMANDS = {  # command -> the damages it meets (as test_apply_crash)
    "repair": ("unclean", "torn_tail", "crc_mismatch", "missing_index", "leftovers", "bad_checkpoint"),
    "reindex": ("missing_index", "bad_timeindex"),
    "flush": ("unclean", "bad_checkpoint"),
    "retain": (),
    "compact": (),
    "convert": (),
}
ERRNOS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO}


def _repair(d: Path) -> None:
    plan = plan_repair([d], now_ms=NOW)
    assert not plan.errors, plan.errors
    apply(plan, backup=False)


def _fault_at(command: str, d: Path, k: int, code: int) -> Exception | None:
    """Apply ``command``'s plan on ``d`` with ``code`` raised before its k-th file mutation; the error it raised
    (None if the k-th mutation never came)."""
    n = [0]

    def inject(kind, path, _target):
        if kind in MUTATIONS:
            n[0] += 1
            if n[0] == k:
                raise OSError(code, f"{errno.errorcode[code]} (injected)", path)

    plan = plan_for(command, d)
    with fileops.observe(inject):
        try:
            apply(plan, backup=False)
        except (OSError, KafkaLogError) as e:
            return e
    return None


def _campaign(tmp_path: Path, command: str, code: int, sample: int | None) -> tuple[int, int]:
    base = tmp_path / "base"
    damaged_copy("kafka-4.3.1-kraft", base, COMMANDS[command])
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
        err = _fault_at(command, d, k, code)
        assert err is not None, f"{command}: step {k}/{steps} never came, or the fault was swallowed"
        if isinstance(err, OSError):
            assert err.errno == code and err.filename, f"{command}: step {k}: {err!r} names no file"
        else:
            assert err.path and errno.errorcode[code] in err.reason, f"{command}: step {k}: {err} is not clear"
        _repair(d)
        got = records(d)
        assert set(got) == set(before), f"{command}: fault at step {k}/{steps}: partitions differ"
        for name, recs in got.items():
            assert after[name] <= recs <= before[name], \
                f"{command}: fault at step {k}/{steps}: {name} holds records outside the before/after states"
        apply(plan_for(command, d), backup=False)  # the same command again, on the repaired dir
        _repair(d)
        assert records(d) == after, f"{command}: after a fault at step {k}/{steps}, a re-run does not finish"
        shutil.rmtree(d)
    return steps, len(points)


@pytest.mark.parametrize("name", sorted(ERRNOS))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_failed_write_leaves_a_loadable_dir(tmp_path, command, name):
    steps, tried = _campaign(tmp_path, command, ERRNOS[name], SAMPLE)
    print(f"{command} {name}: {tried} of {steps} write steps failed, every dir loaded with nothing lost and "
          "the re-run finished")
    assert tried >= min(steps, SAMPLE)


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.parametrize("name", sorted(ERRNOS))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_write_step_fails_safely(tmp_path, command, name):
    steps, tried = _campaign(tmp_path, command, ERRNOS[name], None)
    print(f"{command} {name}: every one of {steps} write steps failed safely")
    assert tried == steps
