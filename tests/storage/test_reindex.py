"""kafkalog reindex: the recovery rule, partitions in parallel, dry run, lock, bad segments, CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kafkalog.storage.config import LogConfig
from kafkalog.storage.engine.recovery import rebuild_partition_indexes, reindex_partitions
from kafkalog.storage.engine.writer import LogWriter
from kafkalog.storage.lock import DirLock
from kafkalog.storage.records import build_batch, iter_batches
from kafkalog.tools.cli import main

NOW = 1_700_000_000_000
CFG = LogConfig.from_topic_props({"segment.bytes": "20000", "index.interval.bytes": "1000"})


def _data(tmp_path: Path, parts: int = 4) -> tuple[Path, list[Path]]:
    data = tmp_path / "data"
    dirs = []
    for p in range(parts):
        d = data / f"t-{p}"
        with LogWriter(d, CFG, now_ms=NOW) as w:
            for i in range(150 + 20 * p):
                w.append(build_batch([(None, NOW + i, b"k%d" % i, b"v" * 100)], base_offset=0))
        dirs.append(d)
    return data, dirs


def _indexes(dirs: list[Path]) -> dict[str, bytes]:
    return {f"{d.name}/{f.name}": f.read_bytes() for d in dirs for f in sorted(d.iterdir())
            if f.suffix in (".index", ".timeindex", ".txnindex")}


def test_parallel_equals_serial_and_restores_deleted_indexes(tmp_path: Path):
    _, dirs = _data(tmp_path)
    for d in dirs:
        rebuild_partition_indexes(d, CFG)
    expected = _indexes(dirs)
    for d in dirs:
        for f in d.iterdir():
            if f.suffix == ".index":
                f.unlink()
            elif f.suffix == ".timeindex":
                f.write_bytes(b"\x00" * 7)  # torn
    seen: list[int] = []
    out = reindex_partitions(dirs, CFG, workers=2, progress=seen.append)
    assert [p for p, _ in out] == [str(d) for d in dirs] and sum(seen) == len(dirs)
    assert all(problem is None for _, res in out for _, _, problem in res)
    assert _indexes(dirs) == expected


def test_dry_run_writes_nothing(tmp_path: Path):
    _, dirs = _data(tmp_path, 2)
    victim = next(dirs[0].glob("*.index"))
    victim.unlink()
    out = reindex_partitions(dirs, CFG, dry_run=True, workers=2)
    assert not victim.exists() and all(written for _, res in out for _, written, _ in res)


def test_live_lock_refused_before_anything_is_written(tmp_path: Path, capsys):
    data, dirs = _data(tmp_path, 2)
    victim = next(dirs[1].glob("*.index"))
    victim.unlink()
    with DirLock(data):
        assert main(["reindex", *map(str, dirs)]) == 1
    assert ".lock" in capsys.readouterr().err
    assert not victim.exists()


def test_bad_segment_reported_and_cli_json(tmp_path: Path, capsys):
    _, dirs = _data(tmp_path, 2)
    log = sorted(dirs[1].glob("*.log"))[0]
    data = bytearray(log.read_bytes())
    pos = list(iter_batches(bytes(data)))[10].position
    data[pos + 70] ^= 0xFF
    log.write_bytes(bytes(data))
    missing = str(tmp_path / "data" / "nope-0")
    assert main(["reindex", *map(str, dirs), missing, "--json", "--workers", "2"]) == 1
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    bad = [r for r in rows if r["problem"]]
    assert any(r["dir"] == str(dirs[1]) and f"invalid bytes from position {pos}" in r["problem"] for r in bad)
    assert any(r["dir"] == missing and r["baseOffset"] == -1 for r in bad)
    assert all(r["written"] for r in rows if r["dir"] == str(dirs[0]))
    assert os.path.getsize(log) == len(data)


def test_workers_must_be_positive(tmp_path: Path):
    with pytest.raises(SystemExit) as e:
        main(["reindex", str(tmp_path), "--workers", "0"])
    assert e.value.code == 2
