"""Faults at every write step of the commands whose promise is about files, not only records: ``checkpoints
--set``, ``topic-id --set``, ``migrate``, ``append`` and ``import`` (issue 17), on copies of the real 4.3.1
fixture.

Each is run with ``ENOSPC``, ``EIO`` (raised at the k-th file mutation through the I/O seam,
:func:`kafkalog.storage.io.fileops.observe`) and a kill (``os._exit`` before the k-th mutation in a separate
process, as SIGKILL: no cleanup runs). After each fault, before anything else touches the dir:

* ``checkpoints --set``: the checkpoint file holds exactly its old bytes or exactly its new bytes;
* ``topic-id --set``: each ``partition.metadata`` holds its old or its new bytes;
* ``migrate``: the destination either has no partition of the source or holds exactly the records the plan
  promised, and the source is untouched;
* ``append``: after ``ENOSPC``/``EIO`` the data dir is exactly as it was (``append`` undoes a failed append);
  after a kill (no undo runs) the partition, once loaded, holds its records plus a prefix of the appended
  batches, whole batches in order, as a broker killed mid-produce leaves it;
* ``import`` (an export of ``codec-none-0`` into the dir without it): after ``ENOSPC``/``EIO`` the data dir is
  exactly as it was (all or nothing); after a kill, once loaded, the partition is absent or empty, or holds
  exactly the imported records, never a part of them.

Then the dir loads (``repair`` plans without errors and applies) and running the command again reaches the
promised state. A bounded sample of steps runs with the suite (and in CI); every step is ``pytest -m campaign``
(``make campaign``). Each test prints what it tried.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from damage import (
    FIXTURES,
    count_mutations,
    migrate_dest,
    prepare_for,
    records,
    repair_dir,
    run_for,
    run_with_fault,
    sample_points,
    tree,
)

from kafkalog.storage.files.checkpoints import read_offset_checkpoint

FIXTURE = "kafka-4.3.1-kraft"
COMMANDS = ("checkpoints", "topic-id", "migrate", "append", "import")
FAULTS = ("ENOSPC", "EIO", "kill")
SAMPLE = 4  # fault points per command and fault in the default run


def _files(d: Path, names: Callable[[str], bool]) -> dict[str, bytes]:
    return {k: v for k, v in tree(d).items() if names(k)}


def _check_between(command: str, d: Path, base: Path, after: Path, where: str) -> None:
    """The promise about the files right after a fault (nothing else has touched ``d`` yet)."""
    if command == "checkpoints":
        name = "recovery-point-offset-checkpoint"
        got = (d / name).read_bytes()
        assert got in ((base / name).read_bytes(), (after / name).read_bytes()), f"{where}: {name} is torn"
    elif command == "topic-id":
        def meta(k: str) -> bool:
            return k.endswith("partition.metadata") and k.startswith("multi-segment-")

        got, old, new = _files(d, meta), _files(base, meta), _files(after, meta)
        assert set(got) == set(old) == set(new)
        for k, v in got.items():
            assert v in (old[k], new[k]), f"{where}: {k} holds neither the old nor the new topic id"
    elif command == "migrate":
        assert tree(d) == tree(base), f"{where}: migrate changed its source"
        dest, promised = migrate_dest(d), migrate_dest(after)
        moved = dest / "moved-0"
        if moved.exists():
            repair_dir(dest)
            assert records(dest) == records(promised), f"{where}: the destination holds a partial partition"
    elif command == "import" and not where.startswith("import, kill"):
        assert tree(d) == tree(base), f"{where}: a failed import changed the data dir"
    elif command == "import":
        # killed: no undo ran; once loaded, the partition holds nothing or everything imported
        probe = d.with_name(d.name + "-loaded")
        shutil.copytree(d, probe)
        repair_dir(probe)
        got = records(probe).get("codec-none-0", set())
        shutil.rmtree(probe)
        assert got in (set(), records(after)["codec-none-0"]), f"{where}: {len(got)} records: a partial import"
    elif command == "append" and not where.startswith("append, kill"):
        assert tree(d) == tree(base), f"{where}: a failed append changed the data dir"
    elif command == "append":
        # killed: no undo ran. Like a broker killed mid-produce, the partition then holds its records and a
        # prefix of the appended batches (whole batches, in order), once loaded
        before, promised = records(base)["codec-none-0"], records(after)["codec-none-0"]
        probe = d.with_name(d.name + "-loaded")
        shutil.copytree(d, probe)
        repair_dir(probe)
        got = records(probe)["codec-none-0"]
        shutil.rmtree(probe)
        added = sorted(got - before)
        assert before <= got <= promised, f"{where}: records outside the before/after states"
        assert added == sorted(promised - before)[:len(added)], f"{where}: not a prefix of the appended batches"
        assert len(added) % 3 == 0, f"{where}: a torn batch survived ({len(added)} records added)"


def _check_loads_and_finishes(command: str, d: Path, base: Path, after: Path, where: str) -> None:
    repair_dir(d)
    if command == "migrate":
        dest = migrate_dest(d)
        if (dest / "moved-0").exists():  # the partition arrived whole: the command is done
            return
    if command == "append" and records(d) != records(base):
        return  # a killed append left a prefix: appending again would add the batches twice, as a producer would
    if command == "import" and records(d).get("codec-none-0"):
        assert records(d) == records(after), f"{where}: the import arrived, but not as promised"
        return  # the partition arrived whole: the import is done
    run_for(command, d)  # the same command again reaches the promised state
    if command == "checkpoints":  # the entries it sets (the repair below rewrites recovery points)
        got = read_offset_checkpoint(d / "recovery-point-offset-checkpoint").to_dict()
        assert (got[("compacted", 0)], got[("codec-zstd", 0)]) == (0, 7), f"{where}: re-run: {got}"
    repair_dir(d)
    assert records(d) == records(after), f"{where}: a re-run does not reach the promised records"
    if command == "topic-id":
        for p in sorted(d.glob("multi-segment-*")):
            assert (p / "partition.metadata").read_bytes() == (after / p.name / "partition.metadata").read_bytes()
    if command == "migrate":
        assert records(migrate_dest(d)) == records(migrate_dest(after)), f"{where}: re-run: destination"


def _campaign(tmp_path: Path, command: str, fault: str, sample: int | None) -> tuple[int, int]:
    base = tmp_path / "base"
    shutil.copytree(FIXTURES / FIXTURE / "data", base)
    if command == "import":
        prepare_for(command, base)  # codec-none-0 exported beside the dir, and taken out of it
    after = tmp_path / "after"
    shutil.copytree(base, after)
    steps = count_mutations(lambda: run_for(command, after))
    assert steps > 0, f"{command} changed nothing"
    points = sample_points(steps, sample)
    for k in points:
        d = tmp_path / f"k{k}"
        shutil.copytree(base, d)
        where = f"{command}, {fault} at step {k}/{steps}"
        run_with_fault(command, d, k, fault)
        _check_between(command, d, base, after, where)
        _check_loads_and_finishes(command, d, base, after, where)
        shutil.rmtree(d)
        shutil.rmtree(migrate_dest(d), ignore_errors=True)
    return steps, len(points)


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_fault_leaves_old_or_new_state(tmp_path: Path, command: str, fault: str) -> None:
    steps, tried = _campaign(tmp_path, command, fault, SAMPLE)
    print(f"{command}: {fault} at {tried} of {steps} write steps: all safe")


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_write_step_fails_safely(tmp_path: Path, command: str, fault: str) -> None:
    steps, tried = _campaign(tmp_path, command, fault, None)
    print(f"{command}: {fault} at every one of {steps} write steps ({tried} points): all safe")
