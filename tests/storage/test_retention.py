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
