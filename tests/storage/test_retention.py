"""Offline retention (docs/semantics.md#retention): time, size and log-start-offset predicates."""

from __future__ import annotations

from pathlib import Path

from builders import aged_partition
from engines import retain

from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.engine.plan import Setting
from kafkalog.storage.records import build_batch

NOW = 1_700_000_000_000


def deleted(plan) -> list[int]:
    """Base offsets of the segments a retention plan deletes (one loss per segment)."""
    return [loss.first_offset for loss in plan.partitions[0].losses]


def test_time_retention_deletes_old_segments_not_the_active_one_unless_hw_allows(tmp_path: Path):
    pdir = aged_partition(tmp_path, NOW)
    cfg = LogConfig.defaults().with_overrides({"retention.ms": 4_000})
    plan = retain(pdir, cfg, NOW)
    assert deleted(plan) == [0, 5]
    assert plan.partitions[0].facts["newLogStartOffset"] == 10 and plan.partitions[0].facts["rolledAt"] is None
    assert sorted(p.name for p in pdir.iterdir()) == [f"{10:020d}.log"]


def test_everything_expired_rolls_a_new_active_segment(tmp_path: Path):
    pdir = aged_partition(tmp_path, NOW)
    cfg = LogConfig.defaults().with_overrides({"retention.ms": 10})
    plan = retain(pdir, cfg, NOW, keep_deleted=True)
    assert deleted(plan) == [0, 5, 10] and plan.partitions[0].facts["rolledAt"] == 15
    names = sorted(p.name for p in pdir.iterdir())
    assert f"{15:020d}.log" in names and f"{0:020d}.log.deleted" in names and f"{0:020d}.log" not in names


def test_high_watermark_protects_unreplicated_segments(tmp_path: Path):
    pdir = aged_partition(tmp_path, NOW)
    (pdir.parent / "replication-offset-checkpoint").write_text("0\n1\nt 0 7\n")
    cfg = LogConfig.defaults().with_overrides({"retention.ms": 10})
    assert deleted(retain(pdir, cfg, NOW, dry_run=True)) == [0]


def test_size_retention_oldest_first_while_the_rest_exceeds(tmp_path: Path):
    pdir = aged_partition(tmp_path, NOW)
    one = (pdir / f"{0:020d}.log").stat().st_size
    cfg = LogConfig.defaults().with_overrides({"retention.bytes": one * 2 - 1})
    assert deleted(retain(pdir, cfg, NOW, dry_run=True)) == [0]


def test_log_start_offset_breach_applies_to_compacted_topics(tmp_path: Path):
    pdir = aged_partition(tmp_path, NOW)
    (pdir.parent / "log-start-offset-checkpoint").write_text("0\n1\nt 0 6\n")
    cfg = LogConfig.defaults().with_overrides({"cleanup.policy": ["compact"]})
    plan = retain(pdir, cfg, NOW)
    note = plan.partitions[0].losses[0].note
    assert deleted(plan) == [0] and note is not None and (note.kind, dict(note.facts)) == ("loss.belowLogStart",
                                                                                            {"logStartOffset": 6})
    # start offset 6 is still above the first segment base 5: the checkpoint keeps it
    assert "t 0 6" in (pdir.parent / "log-start-offset-checkpoint").read_text()


def test_roll_before_deleting_everything_takes_a_producer_snapshot(tmp_path: Path):
    from kafkalog.storage.files.producer_snapshot import ProducerSnapshot

    pdir = aged_partition(tmp_path, NOW)
    idem = build_batch([(15, NOW - 1_000, b"k", b"v")], base_offset=15, producer_id=77, producer_epoch=3,
                       base_sequence=0)
    with open(pdir / f"{10:020d}.log", "ab") as f:
        f.write(idem)
    cfg = LogConfig.defaults().with_overrides({"retention.ms": 10})
    plan = retain(pdir, cfg, NOW)
    assert plan.partitions[0].facts["rolledAt"] == 16
    snap = pdir / f"{16:020d}.snapshot"
    entries = list(ProducerSnapshot.from_bytes(snap.read_bytes()))
    assert [(e.producer_id, e.producer_epoch) for e in entries] == [(77, 3)]
    assert sorted(p.name for p in pdir.iterdir()) == [f"{16:020d}{s}" for s in (".index", ".log", ".snapshot",
                                                                                 ".timeindex")]


def test_cli_retain_json_and_backup(tmp_path: Path, capsys):
    import json

    from kafkalog.tools.cli import main

    pdir = aged_partition(tmp_path, NOW)
    backup = tmp_path / "bk"
    assert main(["retain", str(pdir.parent), "--now", str(NOW), "--config", "retention.ms=4000", "--json",
                 "--backup", str(backup)]) == 0
    out = json.loads(capsys.readouterr().out.splitlines()[0])
    assert [loss["firstOffset"] for loss in out["losses"]] == [0, 5]
    assert all(loss["setting"] == {"name": "retention.ms", "value": 4000, "source": "--config"}
               and loss["times"] == {"largestTimestamp": loss["times"]["largestTimestamp"], "now": NOW}
               and str(loss["times"]["largestTimestamp"]) in loss["reason"] for loss in out["losses"])
    assert out["newLogStartOffset"] == 10
    assert sorted(p.name for p in pdir.glob("*.log")) == [f"{10:020d}.log"]
    assert {p.name for p in backup.rglob("*.log")} == {f"{0:020d}.log", f"{5:020d}.log"}


def test_leader_epochs_move_with_the_log_start_offset(tmp_path: Path):
    """UnifiedLog.maybeIncrementLogStartOffset -> LeaderEpochFileCache.truncateFromStart: the first entry that
    starts at or below the new log start moves to it; entries wholly below it go."""
    pdir = aged_partition(tmp_path, NOW)
    (pdir / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n1 3\n2 12\n")
    cfg = LogConfig.defaults().with_overrides({"retention.ms": 4_000})
    plan = retain(pdir, cfg, NOW)
    assert deleted(plan) == [0, 5]
    assert (pdir / "leader-epoch-checkpoint").read_text() == "0\n2\n1 10\n2 12\n"


def test_settings_and_their_sources_decide_and_explain_the_plan(tmp_path: Path):
    pdir = aged_partition(tmp_path, NOW)
    plan = retain(pdir, LogConfig.defaults(), NOW + 30 * 86_400_000, dry_run=True)
    pp = plan.partitions[0]
    assert {"name": "retention.ms", "value": 604800000, "source": "Kafka default"} in pp.settings
    assert all(loss.setting == Setting("retention.ms", 604800000, "Kafka default") for loss in pp.losses)
    assert [(loss.first_offset, loss.last_offset, loss.records) for loss in pp.losses] == [
        (0, 4, 5), (5, 9, 5), (10, 14, 5)]
