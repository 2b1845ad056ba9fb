"""Permissions, as an unprivileged process meets them (issue 17, hostile filesystem matrix).

kafkalog usually runs as root, which reads and writes whatever the mode bits say. Here every command runs with
the file-permission capabilities dropped (``setpriv --bounding-set=-dac_override,-dac_read_search``: the process
keeps uid 0, but root-owned files with mode 000 and dirs with mode 555 refuse it as they refuse any other user),
on copies of the real 4.3.1 fixtures with an unreadable segment and an unreadable partition dir (every reading
command), or with unwritable partition dirs or an unwritable data dir (every mutating command).

Each must exit 1 with a message naming the path and the permission error, never a traceback or exit 3, and
change nothing: a mutating command checks, before its first write, that it can write every dir and file its
plan touches and its backup folder (``plan.apply``), so a refused write in one partition cannot leave others
changed. Each test prints what it tried.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from damage import FIXTURES, roll_active, tree

pytestmark = pytest.mark.skipif(shutil.which("setpriv") is None and os.environ.get("CI") != "true",
                                reason="setpriv (util-linux) is not installed")

NOW = "1900000000000"
CLUSTER_ID = "Aw5EClUXSoGxHhT0nCIykw"


def unprivileged(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``kafkalog ARGS`` without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH (as root only if already root)."""
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, sys.executable, "-m", "kafkalog.tools.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def _check_refused(proc: subprocess.CompletedProcess[str], what: str) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, f"{what}: exit {proc.returncode}\n{out[-3000:]}"
    assert "Traceback" not in out and "internal error" not in out, f"{what}:\n{out[-3000:]}"
    assert "permission denied" in out.lower(), f"{what}: the permission error is not named\n{out[-3000:]}"
    return out


@pytest.fixture
def unreadable(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", d)
    (d / "multi-segment-0" / "00000000000000000044.log").chmod(0)
    (d / "codec-gzip-0").chmod(0)
    yield d
    (d / "codec-gzip-0").chmod(0o755)


READERS = {
    "verify": ["verify", "{d}"],
    "verify --deep": ["verify", "--deep", "{d}"],
    "describe": ["describe", "{d}"],
    "dump": ["dump", "{d}/multi-segment-0/00000000000000000044.log"],
    "export": ["export", "{d}", "--out", "{tmp}/out.jsonl"],
    "diff": ["diff", "{d}", str(FIXTURES / "kafka-4.3.1-kraft" / "data")],
    "doctor": ["doctor", "{d}"],
    "groups": ["groups", "{d}"],
    "transactions": ["transactions", "{d}"],
    "topic-id": ["topic-id", "{d}"],
    "repair --dry-run": ["repair", "--dry-run", "{d}"],
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_unreadable_files_and_dirs_are_named_errors(unreadable: Path, tmp_path: Path, name: str) -> None:
    before = {k: v for k, v in tree(unreadable).items() if not k.startswith(("codec-gzip-0", "multi-segment-0"))}
    args = [a.format(d=unreadable, tmp=tmp_path) for a in READERS[name]]
    out = _check_refused(unprivileged(*args, cwd=tmp_path), name)
    assert "codec-gzip-0" in out or "00000000000000000044.log" in out, f"{name}: which path?\n{out[-2000:]}"
    (unreadable / "codec-gzip-0").chmod(0o755)
    (unreadable / "multi-segment-0" / "00000000000000000044.log").chmod(0o644)
    after = {k: v for k, v in tree(unreadable).items() if not k.startswith(("codec-gzip-0", "multi-segment-0"))}
    assert after == before, f"{name} changed the data dir"
    print(f"{name}: unreadable segment and dir: exit 1, named, nothing changed")


def _export_file(tmp: Path) -> Path:
    out = tmp / "export.jsonl"
    proc = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "export",
                           str(FIXTURES / "kafka-4.3.1-kraft" / "data"), "--topics", "codec-none", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def _append_file(tmp: Path) -> Path:
    f = tmp / "append.jsonl"
    f.write_text("".join(json.dumps({"key": None, "value": "dmFsdWU=", "timestamp": 1750000000000 + i}) + "\n"
                         for i in range(5)))
    return f


# name -> (fixture, what is made unwritable: "partitions" | "data dir" | "dest", argv)
WRITERS = {
    "repair": ("kafka-4.3.1-kraft-killed", "partitions", ["repair", "{d}"]),
    "reindex": ("kafka-4.3.1-kraft", "partitions", ["reindex", "--all", "{d}"]),
    "flush": ("kafka-4.3.1-kraft-killed", "partitions", ["flush", "{d}"]),
    "retain": ("kafka-4.3.1-kraft", "partitions", ["retain", "--now", NOW, "{d}"]),
    "compact": ("kafka-4.3.1-kraft", "partitions", ["compact", "--all", "--now", NOW, "{d}"]),
    "convert": ("kafka-4.3.1-kraft", "partitions", ["convert", "--codec", "zstd", "{d}"]),
    "topic-id --set": ("kafka-4.3.1-kraft", "partitions", ["topic-id", "--set", "random", "--topics", "codec-none",
                                                           "{d}"]),
    "checkpoints --set": ("kafka-4.3.1-kraft", "data dir", ["checkpoints", "{d}", "--file", "recovery-point",
                                                            "--set", "codec-none-0=0"]),
    "migrate": ("kafka-4.3.1-kraft", "dest", ["migrate", "{d}/codec-none-0", "{dest}", "--cluster-id", CLUSTER_ID,
                                              "--node-id", "1"]),
    "append": ("kafka-4.3.1-kraft", "partitions", ["append", "{d}", "codec-none-0", "--from", "{append}"]),
    "import": ("kafka-4.3.1-kraft", "data dir", ["import", "{export}", "{d}", "--topic", "imported"]),
}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_write_that_would_be_refused_changes_nothing(tmp_path: Path, name: str) -> None:
    fixture, locked, argv = WRITERS[name]
    d = tmp_path / "data"
    shutil.copytree(FIXTURES / fixture / "data", d)
    dest_parent = tmp_path / "dest-parent"
    dest_parent.mkdir()
    (d / ".lock").touch()  # taking the lock creates it: made beforehand, the data dir itself can be read-only
    if name == "compact":
        roll_active(d)  # dirty tails become cleanable: compact has work in every compacted partition
    args = [a.format(d=d, dest=dest_parent / "dest", append=_append_file(tmp_path) if "{append}" in a else "",
                     export=_export_file(tmp_path) if "{export}" in a else "") for a in argv]
    before = tree(d)
    chmodded = ([p for p in d.iterdir() if p.is_dir()] if locked == "partitions" else
                [d] if locked == "data dir" else [dest_parent])
    for p in chmodded:
        p.chmod(0o555)
    # the backup folder goes beside the data dir: keep that writable, so the refusal is the data's own
    try:
        out = _check_refused(unprivileged(*args, cwd=tmp_path), name)
    finally:
        for p in chmodded:
            p.chmod(0o755)
    assert tree(d) == before, f"{name}: a refused write changed the data dir\n{out[-2000:]}"
    assert not list(tmp_path.glob("kafkalog-backup-*")), f"{name}: left a backup folder behind"
    assert not (dest_parent / "dest").exists()
    print(f"{name}: {locked} read-only: exit 1, named, nothing changed")
