"""A failed ``import`` or ``append`` leaves the data dir exactly as it was (issue 13, point 2; issue 17).

Failures tried: a malformed row or line after many good ones (new partitions, and an existing partition
appended in place), bad base64 in ``append`` input, and a full disk (``ENOSPC``) injected at every kind of file
step of a real import through the write seam (:func:`kafkalog.storage.fileops.observe`). After each, the tree
of files and their bytes is compared with the tree before; no ``-delete`` staging dir survives.
"""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.storage import fileops
from kafkalog.storage.engine.import_ import import_files

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "kafka-4.3.1-kraft" / "data"


def kafkalog(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def state(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` (the data dir's ``.lock`` aside: taking the lock creates it, as Kafka does)
    with its bytes (``None`` for a dir)."""
    out: dict[str, bytes | None] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if rel == ".lock":
            continue
        out[rel] = None if p.is_dir() else p.read_bytes()
    return out


def diff(before: dict, after: dict) -> list[str]:
    return sorted({k for k in before.keys() | after.keys() if before.get(k, 0) != after.get(k, 0)})


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("export") / "rows.jsonl"
    r = kafkalog("export", FIXTURE, "--topics", "compacted,multi-segment", "--out", out)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len({(r["topic"], r["partition"]) for r in rows}) >= 3 and len(rows) > 100
    return rows


def _write(path: Path, rows: list[dict], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)
    return path


@pytest.fixture
def data(tmp_path) -> Path:
    d = tmp_path / "data"
    shutil.copytree(FIXTURE, d)
    return d


def _appended(rows: list[dict], topic: str, shift: int) -> list[dict]:
    """The rows moved to ``topic`` with offsets after ``shift`` and no segment layout (plain appends)."""
    return [{**r, "topic": topic, "offset": r["offset"] + shift, "segment": None, "position": None} for r in rows]


def test_a_bad_last_row_leaves_a_new_data_dir_uncreated(tmp_path, exported):
    src = _write(tmp_path / "rows.jsonl", exported, tail='{"topic": "x"}\n')
    target = tmp_path / "new" / "data"
    r = kafkalog("import", src, target)
    assert r.returncode == 1 and f"line {len(exported) + 1}" in r.stderr, r.stderr
    assert not target.exists(), sorted(p.name for p in target.iterdir())


def test_a_bad_last_row_leaves_new_and_existing_partitions_as_they_were(tmp_path, data, exported):
    comp = [r for r in exported if r["topic"] == "compacted"]
    rows = exported[:] + _appended(comp, "compacted", 1_000_000)  # new topics' partitions, then compacted-0 appended
    rows = [{**r, "topic": "fresh-" + r["topic"]} if r["offset"] < 1_000_000 else r for r in rows]
    src = _write(tmp_path / "rows.jsonl", rows, tail="not json\n")
    before = state(data)
    r = kafkalog("import", src, data, "--append")
    assert r.returncode == 1 and f"line {len(rows) + 1}" in r.stderr, r.stderr
    assert diff(before, state(data)) == []
    # and the same input without the bad line imports everything
    _write(src, rows)
    r = kafkalog("import", src, data, "--append")
    assert r.returncode == 0, r.stderr
    assert (data / "fresh-compacted-0").is_dir() and not list(data.glob("*-delete"))


def test_bad_base64_in_append_input_changes_nothing(tmp_path, data):
    good = json.dumps({"key": None, "value": "dmFsdWU=", "timestamp": 1})
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join([good] * 50 + [json.dumps({"key": None, "value": "***", "timestamp": 1})]) + "\n")
    before = state(data)
    for partition in ("brand-new-0", "compacted-0"):
        r = kafkalog("append", data, partition, "--from", src)
        assert r.returncode == 1 and "internal error" not in r.stderr, r.stderr
        assert "51" in r.stderr, r.stderr  # the line number
        assert diff(before, state(data)) == [], partition


def _count_steps(src: Path, target: Path) -> list[str]:
    steps: list[str] = []
    with fileops.observe(lambda kind, path, _t: steps.append(kind)):
        import_files([src], target, append=True)
    return steps


def test_a_full_disk_at_any_step_of_an_import_changes_nothing(tmp_path, exported):
    """ENOSPC injected at the k-th file mutation of an import (new partitions plus an in-place append), for k
    across the whole run: each attempt fails with the OS error and leaves the data dir byte for byte as before."""
    comp = [r for r in exported if r["topic"] == "compacted"]
    rows = [{**r, "topic": "fresh-" + r["topic"]} for r in exported] + _appended(comp, "compacted", 1_000_000)
    src = _write(tmp_path / "rows.jsonl", rows)
    probe = tmp_path / "probe"
    shutil.copytree(FIXTURE, probe)
    kinds = _count_steps(src, probe)
    mutations = [i for i, k in enumerate(kinds) if k not in ("begin-op",)]
    assert len(mutations) > 20
    picks = sorted(set(mutations[::4]) | set(mutations[-12:]))  # every 4th step, and all of the commit phase
    tried = []
    for k in picks:
        data = tmp_path / f"data-{k}"
        shutil.copytree(FIXTURE, data)
        before = state(data)
        seen = [0]

        def fail_once(kind, path, _target, k=k, seen=seen):
            i = seen[0]
            seen[0] += 1
            if i == k:
                raise OSError(errno.ENOSPC, "No space left on device (injected)", path)

        with fileops.observe(fail_once), pytest.raises(OSError) as e:
            import_files([src], data, append=True)
        assert e.value.errno == errno.ENOSPC
        tried.append((k, kinds[k]))
        assert diff(before, state(data)) == [], f"step {k} ({kinds[k]}) left changes"
        shutil.rmtree(data)
    print(f"\nENOSPC injected at {len(tried)} of {len(mutations)} steps: {tried}")
