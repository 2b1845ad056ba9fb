"""The hostile filesystem matrix for every command (issue 17): special files and hostile names that no broker
writes, placed in a copy of a real 4.3.1 data dir, met by every command.

Probes (each in its own copy):

* ``socket``: AF_UNIX sockets bound where Kafka files are expected (a partition's ``.index``, its
  ``leader-epoch-checkpoint``) and a stray one in the data dir;
* ``chardev``: character devices (``os.mknod``, as root) of ``/dev/zero`` (a read never ends) where an index and
  ``replication-offset-checkpoint`` are expected, and of ``/dev/null`` as a ``.log``;
* ``long``: a partition dir of the longest legal topic (249 characters, dir name 251), one of a 253-character
  topic (not a legal topic, dir name 255) and a 255-character file name in a partition dir;
* ``sparse``: a 3 GiB sparse ``.log`` (past Kafka's 2 GiB segment limit) and a 2 GiB sparse ``.timeindex``;
* ``unicode``: a partition dir with a Unicode topic (``ünïcødé-0``: not a legal Kafka topic), one whose partition
  number is an Arabic-Indic digit (``codec-none-٣``, which Python's ``int`` would read as 3), a segment named with
  full-width digits (``int`` reads them as an offset) and a Unicode file name in a partition dir.

Every command (readers and mutating ones) must either do its job or exit 1 with the path and the reason: exit
0/1, never 3 or a traceback, never a hang (a timeout fails), nothing written outside the data dir (and its
designated output), and the special files stay what they were (never opened for writing, replaced or deleted).
Each test prints what it tried and what survived (``pytest -s``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from damage import FIXTURES, roll_active

FIXTURE = FIXTURES / "kafka-4.3.1-kraft" / "data"
TIMEOUT = 60
NOW = "1900000000000"
CLUSTER_ID = "Aw5EClUXSoGxHhT0nCIykw"
SEG0 = "00000000000000000000"


def _bind(path: Path) -> None:
    """A bound AF_UNIX socket file at ``path`` (bound by its name from its dir: socket paths are short)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        s.bind(path.name)
    finally:
        os.chdir(cwd)
        s.close()  # the socket file stays


def _chardev(path: Path, minor: int) -> None:
    os.mknod(path, stat.S_IFCHR | 0o644, os.makedev(1, minor))  # 1,3 /dev/null; 1,5 /dev/zero


def _replace(path: Path, make) -> None:
    path.unlink(missing_ok=True)
    make(path)


def probe_socket(d: Path) -> list[Path]:
    made = [d / "codec-none-0" / f"{SEG0}.index", d / "codec-gzip-0" / "leader-epoch-checkpoint", d / "stray.sock"]
    for p in made:
        _replace(p, _bind)
    return made


def probe_chardev(d: Path) -> list[Path]:
    zero = [d / "codec-none-0" / f"{SEG0}.timeindex", d / "replication-offset-checkpoint"]
    for p in zero:
        _replace(p, lambda q: _chardev(q, 5))
    null = d / "codec-lz4-0" / f"{SEG0}.log"
    _replace(null, lambda q: _chardev(q, 3))
    return [*zero, null]


def _copy_partition(d: Path, src: str, name: str) -> Path:
    shutil.copytree(d / src, d / name)
    return d / name


def probe_long(d: Path) -> list[Path]:
    made = [_copy_partition(d, "codec-none-0", "l" * 249 + "-0"), _copy_partition(d, "codec-none-0", "m" * 253 + "-0")]
    f = d / "codec-gzip-0" / ("f" * 255)
    f.write_bytes(b"x")
    return made + [f]


def probe_unicode(d: Path) -> list[Path]:
    made = [_copy_partition(d, "codec-none-0", "ünïcødé-0"), _copy_partition(d, "codec-gzip-0", "codec-none-\u0663")]
    wide = "".join(chr(0xFF10 + int(c)) for c in "00000000000000000100")  # full-width digits
    seg = d / "codec-zstd-0" / f"{wide}.log"
    shutil.copy(d / "codec-zstd-0" / f"{SEG0}.log", seg)
    f = d / "codec-snappy-0" / "日本語.txt"
    f.write_text("x")
    return made + [seg, f]


def probe_sparse(d: Path) -> list[Path]:
    """A 3 GiB sparse ``.log`` (zeros past its batches: more than a segment can hold, Kafka's FileRecords refuses
    it) and a 2 GiB sparse ``.timeindex``."""
    log = d / "codec-none-0" / f"{SEG0}.log"
    os.truncate(log, 3 << 30)
    ti = d / "codec-gzip-0" / f"{SEG0}.timeindex"
    os.truncate(ti, 2 << 30)
    return [log, ti]


PROBES = {"sparse": probe_sparse, "socket": probe_socket, "chardev": probe_chardev, "long": probe_long, "unicode": probe_unicode}

#: command -> argv ({d}: the data dir, {tmp}: a scratch dir beside it, {out}: the command's output path)
COMMANDS = {
    "verify": ["verify", "{d}"],
    "verify --deep": ["verify", "--deep", "{d}"],
    "describe": ["describe", "{d}"],
    "describe --json": ["describe", "--json", "{d}"],
    "dump": ["dump", "--deep", "{d}/codec-none-0"],
    "export": ["export", "{d}", "--out", "{out}"],
    "diff": ["diff", "{d}", str(FIXTURE)],
    "doctor": ["doctor", "{d}"],
    "groups": ["groups", "{d}"],
    "transactions": ["transactions", "{d}"],
    "topic-id": ["topic-id", "{d}"],
    "checkpoints": ["checkpoints", "{d}"],
    "repair --dry-run": ["repair", "--dry-run", "{d}"],
    "repair": ["repair", "--no-backup", "{d}"],
    "reindex": ["reindex", "--all", "--no-backup", "{d}"],
    "flush": ["flush", "--no-backup", "{d}"],
    "retain": ["retain", "--now", NOW, "--no-backup", "{d}"],
    "compact": ["compact", "--all", "--now", NOW, "--no-backup", "{d}"],
    "convert": ["convert", "--codec", "zstd", "--no-backup", "{d}"],
    "topic-id --set": ["topic-id", "--set", "random", "--topics", "codec-none", "--no-backup", "{d}"],
    "checkpoints --set": ["checkpoints", "{d}", "--file", "recovery-point", "--set", "codec-none-0=0", "--no-backup"],
    "migrate": ["migrate", "{d}/codec-none-0", "{out}", "--cluster-id", CLUSTER_ID, "--node-id", "1", "--no-backup"],
    "append": ["append", "{d}", "codec-none-0", "--from", "{tmp}/append.jsonl"],
    "import": ["import", "{tmp}/export.jsonl", "{d}", "--topic", "imported"],
}


def _inputs(tmp: Path) -> None:
    (tmp / "append.jsonl").write_text("".join(json.dumps({"key": None, "value": "dmFsdWU=", "timestamp": 1750000000000
                                                          + i}) + "\n" for i in range(5)))
    r = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "export", str(FIXTURE), "--topics", "codec-none",
                        "--out", str(tmp / "export.jsonl")], capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr


def _kind(p: Path) -> str:
    try:
        m = os.lstat(p).st_mode
    except FileNotFoundError:
        return "gone"
    return ("socket" if stat.S_ISSOCK(m) else "chardev" if stat.S_ISCHR(m) else "dir" if stat.S_ISDIR(m)
            else "file" if stat.S_ISREG(m) else "other")


def _outside(root: Path, keep: tuple[Path, ...]) -> set[str]:
    """Every path under ``root`` that is not under one of ``keep``."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            if not any(p == k or k in p.parents for k in keep):
                out.add(str(p.relative_to(root)))
    return out


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("probe", sorted(PROBES))
def test_every_command_survives_hostile_files_and_names(tmp_path: Path, probe: str, command: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    _inputs(work)
    d = tmp_path / "a" / "data"
    shutil.copytree(FIXTURE, d)
    if command == "compact":
        roll_active(d)
    made = PROBES[probe](d)
    kinds = {p: _kind(p) for p in made}
    out = tmp_path / "a" / ("out" if command == "migrate" else "out.jsonl")
    before = _outside(tmp_path, (d, work))
    args = [a.format(d=d, tmp=work, out=out) for a in COMMANDS[command]]
    try:
        r = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", *args], capture_output=True, text=True,
                           errors="replace", timeout=TIMEOUT, cwd=work)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{command} with {probe} probes did not finish within {TIMEOUT}s (a hang)")
    text = r.stdout + r.stderr
    new = _outside(tmp_path, (d, work, out)) - before
    after = {p: _kind(p) for p in made}
    print(f"\n{probe:<8} {command:<18} exit {r.returncode}; special files/names kept: "
          f"{sum(after[p] == kinds[p] for p in made)}/{len(made)}; {(r.stderr.strip().splitlines() or [''])[-1][:90]}")
    assert r.returncode in (0, 1), f"{command} with {probe}: exit {r.returncode}\n{text[-3000:]}"
    assert "Traceback" not in text and "internal error" not in text, text[-3000:]
    assert not new, f"{command} with {probe} wrote outside the data dir: {sorted(new)}"
    if probe in ("socket", "chardev"):
        assert after == kinds, f"{command} with {probe}: a special file was replaced or removed: {after}"
