"""kafkalog reindex: the recovery rule, partitions in parallel, only what is wrong, lock, bad segments, CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from engines import resolver

from kafkalog.facts import render
from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.engine.plan import PlanError, apply
from kafkalog.storage.engine.reindex import plan_reindex
from kafkalog.storage.engine.writer import LogWriter
from kafkalog.storage.io.lock import DirLock
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
    apply(plan_reindex(dirs, resolver=resolver(CFG), all_segments=True))
    expected = _indexes(dirs)
    for d in dirs:
        for f in d.iterdir():
            if f.suffix == ".index":
                f.unlink()
            elif f.suffix == ".timeindex":
                f.write_bytes(b"\x00" * 7)  # torn
    seen: list[int] = []
    plan = plan_reindex(dirs, resolver=resolver(CFG), workers=2)
    assert not plan.errors and all(p.ops for p in plan.partitions)
    apply(plan, workers=2, progress=seen.append)
    assert sum(seen) == len(dirs)
    assert _indexes(dirs) == expected
    assert not plan_reindex(dirs, resolver=resolver(CFG)).changes  # a second run finds nothing to do


def test_healthy_indexes_are_left_as_the_broker_wrote_them(tmp_path: Path):
    _, dirs = _data(tmp_path, 2)
    before = _indexes(dirs)
    plan = plan_reindex(dirs, resolver=resolver(CFG))
    assert not plan.changes
    apply(plan)
    assert _indexes(dirs) == before


def test_dry_run_writes_nothing(tmp_path: Path):
    _, dirs = _data(tmp_path, 2)
    victim = next(dirs[0].glob("*.index"))
    victim.unlink()
    plan = plan_reindex(dirs, resolver=resolver(CFG), workers=2)
    assert any(op.path == str(victim) for op in plan.ops())
    assert not victim.exists()


def test_live_lock_refused_before_anything_is_written(tmp_path: Path, capsys):
    data, dirs = _data(tmp_path, 2)
    victim = next(dirs[1].glob("*.index"))
    victim.unlink()
    with DirLock(data):
        assert main(["reindex", *map(str, dirs)]) == 1
    assert ".lock" in capsys.readouterr().err
    assert not victim.exists()


def test_bad_segment_refuses_the_whole_plan_and_cli_json(tmp_path: Path, capsys):
    _, dirs = _data(tmp_path, 2)
    removed = [next(d.glob("*.index")) for d in dirs]
    for f in removed:
        f.unlink()
    log = sorted(dirs[1].glob("*.log"))[0]
    data = bytearray(log.read_bytes())
    pos = list(iter_batches(bytes(data)))[10].position
    data[pos + 70] ^= 0xFF
    log.write_bytes(bytes(data))
    plan = plan_reindex(dirs, resolver=resolver(CFG))
    (err,) = plan.errors
    assert err.kind == "reindex.invalidBytes" and err.file == str(dirs[1]) and err.facts["validBytes"] == pos
    assert err.facts["segment"] == str(log) and err.facts["bytes"] == len(data) - pos
    assert f"invalid bytes from position {pos}" in render(err) and "repair" in render(err)
    with pytest.raises(PlanError, match="nothing was changed"):
        apply(plan)
    assert main(["reindex", *map(str, dirs), "--json", "--workers", "2"]) == 1
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert any(r.get("partition") == dirs[1].name and "invalid bytes" in r.get("error", "") for r in rows)
    assert os.path.getsize(log) == len(data)
    assert not any(f.exists() for f in removed), "a partition was reindexed although the plan was invalid"


def test_missing_path_is_a_clear_error(tmp_path: Path, capsys):
    assert main(["reindex", str(tmp_path / "nope-0")]) == 1
    assert f"{tmp_path / 'nope-0'}: no such file or directory" in capsys.readouterr().err


def test_workers_must_be_positive(tmp_path: Path):
    with pytest.raises(SystemExit) as e:
        main(["reindex", str(tmp_path), "--workers", "0"])
    assert e.value.code == 2
