"""A failed ``import`` or ``append`` leaves the data dir exactly as it was (issue 13, point 2; issue 17).

Failures tried: a malformed row or line after many good ones (new partitions, and an existing partition
appended in place), bad base64 in ``append`` input, and a full disk (``ENOSPC``) injected at every kind of file
step of a real import through the write seam (:func:`kafkalog.storage.io.fileops.observe`). After each, the tree
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

from kafkalog.storage.engine.import_ import import_files
from kafkalog.storage.io import fileops

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


# ------------------------------------------------------------------------------------------- --dry-run
def test_import_dry_run_says_what_import_does_and_changes_nothing(tmp_path, data, exported):
    """``import --dry-run`` checks every row as the import does and predicts its summary exactly (partitions
    and their log end offsets, batches, records); the data dir is left byte for byte as it was, and a data dir
    that does not exist is not created."""
    comp = [r for r in exported if r["topic"] == "compacted"]
    rows = [{**r, "topic": "fresh-" + r["topic"]} for r in exported] + _appended(comp, "compacted", 1_000_000)
    src = _write(tmp_path / "rows.jsonl", rows)
    before = state(data)
    dry = kafkalog("import", src, data, "--append", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert diff(before, state(data)) == [] and not list(data.glob("*-delete"))
    real = kafkalog("import", src, data, "--append", "--json")
    assert real.returncode == 0, real.stderr
    predicted, done = json.loads(dry.stdout), json.loads(real.stdout)
    assert predicted["dryRun"] is True and done["dryRun"] is False
    assert predicted["summary"] == done["summary"] and done["summary"]["records"] == len(rows)
    target = tmp_path / "new" / "data"
    assert kafkalog("import", src, target, "--dry-run").returncode == 0 and not target.exists()


@pytest.mark.parametrize("bad", ["bad last row", "holds data", "offsets go back"])
def test_import_dry_run_fails_as_the_import_does(tmp_path, data, exported, bad):
    rows = [{**r, "topic": "fresh-" + r["topic"]} for r in exported]
    args = ["--append"]
    tail = ""
    if bad == "bad last row":
        tail = '{"topic": "x"}\n'
    elif bad == "holds data":
        rows, args = [r for r in exported if r["topic"] == "compacted"], []
    else:  # into compacted-0 (holding data) at offsets below its log end offset
        rows = _appended([r for r in exported if r["topic"] == "compacted"], "compacted", 0)
    src = _write(tmp_path / "rows.jsonl", rows, tail)
    before = state(data)
    dry = kafkalog("import", src, data, "--dry-run", *args)
    real = kafkalog("import", src, data, *args)
    assert dry.returncode == real.returncode == 1, (dry.stderr, real.stderr)
    assert dry.stderr == real.stderr and "internal error" not in dry.stderr
    assert diff(before, state(data)) == []


@pytest.mark.parametrize("follower", [False, True], ids=["leader", "follower"])
def test_append_dry_run_predicts_the_append(tmp_path, data, follower):
    lines = [json.dumps({"key": None, "value": "dmFsdWU=", "timestamp": 1700000000000 + i}) for i in range(30)]
    args = []
    if follower:  # one batch object with its offsets kept, after compacted-0's log end offset
        lines = [json.dumps({"baseOffset": 5000, "records": [
            {"offset": 5000 + i, "timestamp": 1700000000000 + i, "key": None, "value": "dg=="} for i in range(7)]})]
        args = ["--keep-offsets"]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    before = state(data)
    dry = kafkalog("append", data, "compacted-0", "--from", src, "--dry-run", *args)
    assert dry.returncode == 0, dry.stderr
    assert diff(before, state(data)) == []
    real = kafkalog("append", data, "compacted-0", "--from", src, *args)
    assert real.returncode == 0, real.stderr
    leo = real.stderr.rsplit("log end offset ", 1)[1].split()[0]
    assert f"log end offset would be {leo} " in dry.stderr, (dry.stderr, real.stderr)
    if follower:  # the same input again: its offsets are now below the log end offset, for both
        before = state(data)
        dry = kafkalog("append", data, "compacted-0", "--from", src, "--dry-run", *args)
        real = kafkalog("append", data, "compacted-0", "--from", src, *args)
        assert dry.returncode == real.returncode == 1 and "unexpected append offset 5000" in dry.stderr
        assert diff(before, state(data)) == []
