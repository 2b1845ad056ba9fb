"""Offline retention (spec 40-log-engine §7): time, size and log-start-offset predicates."""

from __future__ import annotations

from pathlib import Path

from kafkalog.storage.config import LogConfig
from kafkalog.storage.engine.retention import apply_retention, retention_plan
from kafkalog.storage.records import build_batch

NOW = 1_700_000_000_000


def seg(pdir: Path, base: int, n: int, ts: int) -> None:
    data = b"".join(build_batch([(base + i, ts, b"k", b"v" * 50)], base_offset=base + i) for i in range(n))
    (pdir / f"{base:020d}.log").write_bytes(data)


def make(tmp_path: Path) -> Path:
    pdir = tmp_path / "d" / "t-0"
    pdir.mkdir(parents=True)
    seg(pdir, 0, 5, NOW - 10_000)
    seg(pdir, 5, 5, NOW - 5_000)
    seg(pdir, 10, 5, NOW - 1_000)
    return pdir


def test_time_retention_deletes_old_segments_not_the_active_one_unless_hw_allows(tmp_path: Path):
    pdir = make(tmp_path)
    cfg = LogConfig.defaults().with_overrides({"retention.ms": 4_000})
    plan = retention_plan(pdir, cfg, NOW)
    assert [d.base_offset for d in plan.deletions] == [0, 5]
    assert plan.new_log_start_offset == 10 and plan.roll_at is None
    apply_retention(plan)
    assert sorted(p.name for p in pdir.iterdir()) == [f"{10:020d}.log"]


def test_everything_expired_rolls_a_new_active_segment(tmp_path: Path):
    pdir = make(tmp_path)
    cfg = LogConfig.defaults().with_overrides({"retention.ms": 10})
    plan = retention_plan(pdir, cfg, NOW)
    assert [d.base_offset for d in plan.deletions] == [0, 5, 10] and plan.roll_at == 15
    apply_retention(plan, keep_deleted=True)
    names = sorted(p.name for p in pdir.iterdir())
    assert f"{15:020d}.log" in names and f"{0:020d}.log.deleted" in names and f"{0:020d}.log" not in names


def test_high_watermark_protects_unreplicated_segments(tmp_path: Path):
    pdir = make(tmp_path)
    (pdir.parent / "replication-offset-checkpoint").write_text("0\n1\nt 0 7\n")
    cfg = LogConfig.defaults().with_overrides({"retention.ms": 10})
    assert [d.base_offset for d in retention_plan(pdir, cfg, NOW).deletions] == [0]


def test_size_retention_oldest_first_while_the_rest_exceeds(tmp_path: Path):
    pdir = make(tmp_path)
    one = (pdir / f"{0:020d}.log").stat().st_size
    cfg = LogConfig.defaults().with_overrides({"retention.bytes": one * 2 - 1})
    assert [d.base_offset for d in retention_plan(pdir, cfg, NOW).deletions] == [0]


def test_log_start_offset_breach_applies_to_compacted_topics(tmp_path: Path):
    pdir = make(tmp_path)
    (pdir.parent / "log-start-offset-checkpoint").write_text("0\n1\nt 0 6\n")
    cfg = LogConfig.defaults().with_overrides({"cleanup.policy": ["compact"]})
    plan = retention_plan(pdir, cfg, NOW)
    assert [(d.base_offset, d.reason) for d in plan.deletions] == [(0, "log start offset")]
    apply_retention(plan)
    # start offset 6 is still above the first segment base 5: the checkpoint keeps it
    assert "t 0 6" in (pdir.parent / "log-start-offset-checkpoint").read_text()


def test_roll_before_deleting_everything_takes_a_producer_snapshot(tmp_path: Path):
    from kafkalog.storage.files.producer_snapshot import ProducerSnapshot

    pdir = make(tmp_path)
    idem = build_batch([(15, NOW - 1_000, b"k", b"v")], base_offset=15, producer_id=77, producer_epoch=3,
                       base_sequence=0)
    with open(pdir / f"{10:020d}.log", "ab") as f:
        f.write(idem)
    cfg = LogConfig.defaults().with_overrides({"retention.ms": 10})
    plan = retention_plan(pdir, cfg, NOW)
    assert plan.roll_at == 16
    apply_retention(plan)
    snap = pdir / f"{16:020d}.snapshot"
    entries = list(ProducerSnapshot.from_bytes(snap.read_bytes()))
    assert [(e.producer_id, e.producer_epoch) for e in entries] == [(77, 3)]
    assert sorted(p.name for p in pdir.iterdir()) == [f"{16:020d}{s}" for s in (".index", ".log", ".snapshot",
                                                                                 ".timeindex")]


def test_cli_retain_json_and_backup(tmp_path: Path, capsys):
    import json

    from kafkalog.tools.cli import main

    pdir = make(tmp_path)
    backup = tmp_path / "bk"
    assert main(["retain", str(pdir.parent), "--now", str(NOW), "--config", "retention.ms=4000", "--json",
                 "--backup", str(backup)]) == 0
    out = json.loads(capsys.readouterr().out.splitlines()[0])
    assert out["segments"] == [0, 5] and out["reasons"] == ["retention.ms"] and out["log_start_offset"] == 10
    assert sorted(p.name for p in pdir.glob("*.log")) == [f"{10:020d}.log"]
    assert {p.name for p in backup.rglob("*.log")} == {f"{0:020d}.log", f"{5:020d}.log"}
