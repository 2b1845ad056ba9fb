"""Two writers on one data dir (issue 17, concurrency): every mutating command refuses a data dir whose ``.lock``
another process holds, naming the holder, and changes nothing; two kafkalog processes racing on one dir end in
the state one run reaches.

Holders: a POSIX record lock (``lockf``: what the JVM's ``FileChannel.tryLock`` takes, i.e. a running broker;
the JVM itself is tested in ``test_files_snapshot_segment_lock.py``), an ``flock()`` lock (other tools), and a
kafkalog process in the middle of an apply (its own ``DirLock``). Each holder is a separate live process. The
default run takes every command once, the holder kind rotating; ``-m campaign`` takes every command with every
holder kind. The race runs pairs of ``retain`` (and ``repair``) processes started together on the same copy.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from damage import FIXTURES, records, roll_active, tree

NOW = "1900000000000"
HOLDERS = ("posix", "flock", "kafkalog")

HOLD = """
import fcntl, os, sys, time
kind, path = sys.argv[1], sys.argv[2]
if kind == "kafkalog":
    from kafkalog.storage.io.lock import DirLock
    lock = DirLock(os.path.dirname(path)); lock.acquire()
else:
    f = open(path, "a+")
    (fcntl.lockf if kind == "posix" else fcntl.flock)(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
time.sleep(120)
"""

# name -> (fixture, argv); {d}: the data dir, {tmp}: the test's tmp dir
COMMANDS = {
    "repair": ("kafka-4.3.1-kraft-killed", ["repair", "{d}"]),
    "reindex": ("kafka-4.3.1-kraft", ["reindex", "--all", "{d}"]),
    "flush": ("kafka-4.3.1-kraft-killed", ["flush", "{d}"]),
    "retain": ("kafka-4.3.1-kraft", ["retain", "--now", NOW, "{d}"]),
    "compact": ("kafka-4.3.1-kraft", ["compact", "--all", "--now", NOW, "{d}"]),
    "convert": ("kafka-4.3.1-kraft", ["convert", "--codec", "zstd", "{d}"]),
    "topic-id --set": ("kafka-4.3.1-kraft", ["topic-id", "--set", "random", "--topics", "codec-none", "{d}"]),
    "checkpoints --set": ("kafka-4.3.1-kraft", ["checkpoints", "{d}", "--file", "recovery-point", "--set",
                                                "codec-none-0=0"]),
    "append": ("kafka-4.3.1-kraft", ["append", "{d}", "codec-none-0", "--from", "{tmp}/append.jsonl"]),
    "import": ("kafka-4.3.1-kraft", ["import", "{tmp}/export.jsonl", "{d}", "--topic", "imported"]),
    "migrate (into)": ("kafka-4.3.1-kraft", ["migrate", str(FIXTURES / "kafka-4.3.1-kraft" / "data" / "codec-gzip-0"),
                                            "{d}", "--topic", "moved"]),
}


def kafkalog(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def _inputs(tmp: Path) -> None:
    (tmp / "append.jsonl").write_text('{"key": null, "value": "dmFsdWU=", "timestamp": 1750000000000}\n')
    proc = kafkalog("export", str(FIXTURES / "kafka-4.3.1-kraft" / "data"), "--topics", "codec-none", "--out",
                    str(tmp / "export.jsonl"), cwd=tmp)
    assert proc.returncode == 0, proc.stderr


def _refused_while_held(tmp_path: Path, name: str, holder: str) -> None:
    fixture, argv = COMMANDS[name]
    d = tmp_path / "data"
    shutil.copytree(FIXTURES / fixture / "data", d)
    _inputs(tmp_path)
    if name == "compact":
        roll_active(d)  # dirty tails become cleanable: compact has work to do
    (d / ".lock").touch()
    before = tree(d)
    hold = subprocess.Popen([sys.executable, "-c", HOLD, holder, str(d / ".lock")], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert hold.stdout.readline().strip() == "locked"
        proc = kafkalog(*[a.format(d=d, tmp=tmp_path) for a in argv], cwd=tmp_path)
    finally:
        hold.kill()
        hold.wait()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, f"{name} with a {holder} holder: exit {proc.returncode}\n{out[-2000:]}"
    assert "Traceback" not in out and "internal error" not in out
    assert str(hold.pid) in out or "flock" in out.lower(), f"{name}: the holder is not named\n{out[-2000:]}"
    assert tree(d) == before, f"{name} changed a locked data dir"
    assert not list(tmp_path.glob("kafkalog-backup-*")), f"{name} made a backup of a locked data dir"
    # once the holder is gone the same command runs
    again = kafkalog(*[a.format(d=d, tmp=tmp_path) for a in argv], cwd=tmp_path)
    assert again.returncode in (0, 1) and "locked" not in (again.stdout + again.stderr).lower(), again.stderr[-2000:]


@pytest.mark.parametrize("name,holder", [(n, HOLDERS[i % len(HOLDERS)]) for i, n in enumerate(sorted(COMMANDS))])
def test_a_held_lock_is_refused_naming_the_holder(tmp_path: Path, name: str, holder: str) -> None:
    _refused_while_held(tmp_path, name, holder)
    print(f"{name}: {holder} holder: refused, holder named, nothing changed; runs once it is gone")


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.parametrize("name,holder", list(itertools.product(sorted(COMMANDS), HOLDERS)))
def test_every_command_with_every_holder(tmp_path: Path, name: str, holder: str) -> None:
    _refused_while_held(tmp_path, name, holder)
    print(f"{name}: {holder} holder: refused, holder named, nothing changed; runs once it is gone")


@pytest.mark.parametrize("command", ["retain", "repair"])
def test_two_processes_racing_end_as_one_run(tmp_path: Path, command: str) -> None:
    """Pairs of the same command started together on one copy: each exits 0 (it applied, or found nothing left
    to do) or 1 refusing (the lock held, naming the holder; or its plan made stale by the other: "changed since
    the plan was made"); the dir ends exactly where one run leaves it."""
    fixture, argv = COMMANDS[command]
    single = tmp_path / "single"
    shutil.copytree(FIXTURES / fixture / "data", single)
    assert kafkalog(*[a.format(d=single, tmp=tmp_path) for a in argv], "--no-backup", cwd=tmp_path).returncode in (0, 1)
    outcomes: dict[str, int] = {}
    for i in range(3):
        d = tmp_path / f"race{i}"
        shutil.copytree(FIXTURES / fixture / "data", d)
        args = [sys.executable, "-m", "kafkalog.tools.cli", *[a.format(d=d, tmp=tmp_path) for a in argv],
                "--no-backup"]
        procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
                 for _ in range(2)]
        for p in procs:
            out, err = p.communicate(timeout=120)
            text = (out + err).lower()
            assert "traceback" not in text and "internal error" not in text, text[-2000:]
            if p.returncode == 0:
                kind = "applied or nothing to do"
            elif "locked" in text or "holds" in text or "held" in text:
                kind = "refused: lock held"
            elif "changed since the plan was made" in text:
                kind = "refused: stale plan"
            else:
                kind = f"exit {p.returncode}"
                if command != "repair":  # repair exits 1 when it repaired something
                    raise AssertionError(f"unexpected outcome:\n{out[-1500:]}{err[-1500:]}")
            outcomes[kind] = outcomes.get(kind, 0) + 1
        time.sleep(0.05)
        assert records(d) == records(single), f"{command} race {i}: the dir is not where one run leaves it"
        assert {k: v for k, v in tree(d).items() if not k.endswith("-checkpoint")} == \
            {k: v for k, v in tree(single).items() if not k.endswith("-checkpoint")}
    print(f"{command}: 3 races of 2 processes: {outcomes}")


def test_a_plan_made_while_another_writer_holds_the_dir_names_it(tmp_path: Path) -> None:
    """A plan whose partitions another writer changed while they were read fails to plan; the command then says
    who holds the dir (a broker, another kafkalog applying its plan) instead of only the errors it caused; with
    nobody holding it and files changed since they were read, it says the plan is stale."""
    from kafkalog.storage.engine.flush import plan_flush
    from kafkalog.storage.engine.plan import concurrent_writer
    from kafkalog.storage.io.lock import DirLock

    d = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", d)
    plan = plan_flush([d], now_ms=int(time.time() * 1000))
    assert concurrent_writer(plan) is None
    with DirLock(d):  # another open file description: conflicts as another process's lock would
        why = concurrent_writer(plan)
    assert why is not None and ".lock is held by" in why and "plan again" in why, why
    read = [Path(pp.dir) / n for pp in plan.partitions for n in pp.fingerprints]
    read += [Path(dd.path) / n for dd in plan.data_dirs for n in dd.fingerprints]
    victim = next(p for p in sorted(read) if p.is_file())
    with victim.open("ab") as f:  # a file the plan read, changed since
        f.write(b"\n")
    why = concurrent_writer(plan)
    assert why is not None and "changed since the plan was made" in why, why
