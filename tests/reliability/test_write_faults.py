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
from pathlib import Path

import pytest
from damage import FAULT_DAMAGES, Mutations, fault_campaign, injected, plan_for

from kafkalog.storage.engine.plan import apply
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.io import fileops

SAMPLE = 6  # fault points per command and errno in the default run
COMMANDS = sorted(FAULT_DAMAGES)
ERRNOS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO}


def _fault_at(command: str, d: Path, k: int, code: int) -> Exception | None:
    """Apply ``command``'s plan on ``d`` with ``code`` raised before its k-th file mutation; the error it raised
    (None if the k-th mutation never came)."""
    plan = plan_for(command, d)
    with fileops.observe(Mutations(k, injected(code))):
        try:
            apply(plan, backup=False)
        except (OSError, KafkaLogError) as e:
            return e
    return None


def _campaign(tmp_path: Path, command: str, code: int, sample: int | None) -> tuple[int, int]:
    def fail(d: Path, k: int, steps: int) -> None:
        err = _fault_at(command, d, k, code)
        assert err is not None, f"{command}: step {k}/{steps} never came, or the fault was swallowed"
        if isinstance(err, OSError):
            assert err.errno == code and err.filename, f"{command}: step {k}: {err!r} names no file"
        else:
            assert err.path and errno.errorcode[code] in err.reason, f"{command}: step {k}: {err} is not clear"

    return fault_campaign(tmp_path, "kafka-4.3.1-kraft", command, sample, fail, rerun=True)


@pytest.mark.parametrize("name", sorted(ERRNOS))
@pytest.mark.parametrize("command", COMMANDS)
def test_a_failed_write_leaves_a_loadable_dir(tmp_path, command, name):
    steps, tried = _campaign(tmp_path, command, ERRNOS[name], SAMPLE)
    print(f"{command} {name}: {tried} of {steps} write steps failed, every dir loaded with nothing lost and "
          "the re-run finished")
    assert tried >= min(steps, SAMPLE)


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.parametrize("name", sorted(ERRNOS))
@pytest.mark.parametrize("command", COMMANDS)
def test_every_write_step_fails_safely(tmp_path, command, name):
    steps, tried = _campaign(tmp_path, command, ERRNOS[name], None)
    print(f"{command} {name}: every one of {steps} write steps failed safely")
    assert tried == steps
