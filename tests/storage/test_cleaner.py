"""Offline compaction: broker rules on small real directories (docs/semantics.md#log-cleaner)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import write_segment
from engines import clean_points, compact

from kafkalog.storage.config.log_config import CleanerConfig, LogConfig
from kafkalog.storage.engine.cleaner.cleaner import group_segments_by_size
from kafkalog.storage.engine.cleaner.offset_map import OffsetMap
from kafkalog.storage.engine.swap import recover_swap_files
from kafkalog.storage.errors import ConfigError
from kafkalog.storage.io import fileops
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.records import build_batch, build_end_txn_marker, iter_batches

NOW = 1_700_000_000_000
OLD = NOW - 1000  # the segments' mtime
COMPACT = LogConfig.defaults().with_overrides({"cleanup.policy": ["compact"]})


def kv(offset: int, key: bytes | None, value: bytes | None, ts: int = NOW - 5000) -> bytes:
    return build_batch([(offset, ts, key, value)], base_offset=offset)


def records(pdir: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for p in sorted(pdir.glob("*.log")):
        for b in iter_batches(p.read_bytes()):
            for t in b.iter_record_tuples():
                out.append((t[0], t[2], t[3]))
    return out


def batches(pdir: Path) -> list:
    out = []
    for p in sorted(pdir.glob("*.log")):
        out.extend(iter_batches(p.read_bytes()))
    return out


@pytest.fixture
def pdir(tmp_path: Path) -> Path:
    d = tmp_path / "data" / "t-0"
    d.mkdir(parents=True)
    return d


def simple_log(pdir: Path) -> None:
    write_segment(pdir, 0, [kv(0, b"a", b"1"), kv(1, b"b", b"1"), kv(2, None, b"x"), kv(3, b"a", b"2")], mtime_ms=OLD)
    write_segment(pdir, 4, [kv(4, b"b", None), kv(5, b"c", b"1"), kv(6, b"a", b"3")], mtime_ms=OLD)
    write_segment(pdir, 7, [kv(7, b"a", b"4")], mtime_ms=OLD)  # active segment


def test_offset_map_capacity_matches_skimpy_offset_map():
    m = OffsetMap(134217728, 0.9)
    assert m.slots == 5592405
    assert m.capacity == int(5592405 * 0.9)
    with pytest.raises(ConfigError):
        OffsetMap(24, 0.9)
    m.put(b"k", 5)
    m.put(b"k", 7)
    assert (m.size, m.get(b"k"), m.get(b"other"), m.latest_offset) == (1, 7, -1, 7)


def test_round_keeps_latest_per_key_and_never_touches_active_segment(pdir: Path):
    simple_log(pdir)
    active_before = (pdir / f"{7:020d}.log").read_bytes()
    out = compact(pdir, COMPACT, CleanerConfig(), NOW, force=True)
    assert out.eligible and out.result is not None
    assert out.result.end_offset == 7
    assert (pdir / f"{7:020d}.log").read_bytes() == active_before
    # a@0, a@3 superseded; b@1 superseded by the tombstone b@4 (kept, horizon set); keyless 2 dropped
    assert records(pdir) == [(4, b"b", None), (5, b"c", b"1"), (6, b"a", b"3"), (7, b"a", b"4")]
    bs = batches(pdir)
    tomb = [b for b in bs if b.base_offset == 4][0]
    assert tomb.has_delete_horizon and tomb.delete_horizon_ms == NOW + COMPACT.delete_retention_ms
    assert all(b.is_valid() for b in bs)
    # one group -> one segment at base 0, with the last source segment's mtime
    assert sorted(p.name for p in pdir.glob("*.log")) == [f"{0:020d}.log", f"{7:020d}.log"]
    assert (pdir / f"{0:020d}.log").stat().st_mtime_ns == (NOW - 1000) * 1_000_000
    assert clean_points(pdir.parent)[("t", 0)] == 7
    assert not recover_swap_files(DirView(pdir)).changed


def test_second_round_removes_tombstone_after_horizon(pdir: Path):
    simple_log(pdir)
    compact(pdir, COMPACT, CleanerConfig(), NOW, force=True)
    later = NOW + COMPACT.delete_retention_ms + 1
    # new dirty data so that a round happens: roll the active segment
    write_segment(pdir, 8, [kv(8, b"z", b"1")], mtime_ms=OLD)
    compact(pdir, COMPACT, CleanerConfig(), later, force=True)
    recs = records(pdir)
    assert (4, b"b", None) not in recs
    assert (5, b"c", b"1") in recs


def test_dry_run_writes_nothing(pdir: Path):
    simple_log(pdir)
    before = {p.name: p.read_bytes() for p in pdir.iterdir()}
    out = compact(pdir, COMPACT, CleanerConfig(), NOW, dry_run=True, force=True)
    assert out.result is not None and out.result.bytes_reclaimed > 0
    assert {p.name: p.read_bytes() for p in pdir.iterdir()} == before
    assert not (pdir.parent / "cleaner-offset-checkpoint").exists()


def test_dirty_ratio_gate(pdir: Path):
    simple_log(pdir)
    (pdir.parent / "cleaner-offset-checkpoint").write_text("0\n1\nt 0 7\n")
    out = compact(pdir, COMPACT, CleanerConfig(), NOW)
    assert not out.eligible and out.facts["cleanableBytes"] == 0


def test_full_offset_map_stops_inside_the_dirty_section(pdir: Path):
    simple_log(pdir)
    small = CleanerConfig(dedupe_buffer_size=24 * 3, dedupe_buffer_load_factor=0.9)  # capacity 2 keys
    out = compact(pdir, COMPACT, small, NOW, force=True)
    assert out.result is not None and out.result.map_full
    # keys a, b mapped from offsets 0..1; the keyless record 2 is not mapped; a@3 fits (a already there? no:
    # the size check happens before every put), so the pass stops at offset 3 and 3.. are kept verbatim
    assert out.result.end_offset == 3
    assert clean_points(pdir.parent)[("t", 0)] == 3
    assert [r[0] for r in records(pdir)] == [0, 1, 3, 4, 5, 6, 7]


def test_aborted_transaction_data_removed_marker_kept_and_indexed(pdir: Path):
    pid, epoch = 42, 0
    data = build_batch([(0, NOW - 5000, b"k", b"aborted")], base_offset=0, producer_id=pid, producer_epoch=epoch,
                       base_sequence=0, is_transactional=True)
    marker = build_end_txn_marker(offset=1, producer_id=pid, producer_epoch=epoch, coordinator_epoch=0,
                                  commit=False, timestamp=NOW - 4000)
    write_segment(pdir, 0, [data, marker, kv(2, b"k", b"v")], mtime_ms=OLD)
    # the broker's txn index of segment 0: producer 42 aborted [0, 1], LSO 0
    from kafkalog.storage.files.txn_index import AbortedTxn, TransactionIndex
    (pdir / f"{0:020d}.txnindex").write_bytes(bytes(TransactionIndex.from_entries(0, [AbortedTxn(pid, 0, 1, 0)])._buf))
    write_segment(pdir, 3, [kv(3, b"x", b"y")], mtime_ms=OLD)
    compact(pdir, COMPACT, CleanerConfig(), NOW, force=True, expiration_ms=1)
    bs = batches(pdir)
    # the aborted data is removed; its batch stays as an empty header because it holds producer 42's last
    # data offset (producer state rebuilt from the log is not expired until the periodic check)
    assert [(b.base_offset, b.is_control, b.records_count) for b in bs] == [
        (0, False, 0), (1, True, 1), (2, False, 1), (3, False, 1)]
    with TransactionIndex.open(pdir / f"{0:020d}.txnindex", 0) as idx:
        assert [(t.producer_id, t.first_offset, t.last_offset) for t in idx] == [(pid, 0, 1)]


def test_last_batch_of_active_producer_kept_as_empty_header(pdir: Path):
    pid = 7
    b0 = build_batch([(0, NOW - 5000, b"k", b"old")], base_offset=0, producer_id=pid, producer_epoch=0,
                     base_sequence=0)
    write_segment(pdir, 0, [b0, kv(1, b"k", b"new")], mtime_ms=OLD)
    write_segment(pdir, 2, [kv(2, b"x", b"1")], mtime_ms=OLD)
    compact(pdir, COMPACT, CleanerConfig(), NOW, force=True, expiration_ms=10**12)
    bs = batches(pdir)
    assert bs[0].base_offset == 0 and bs[0].size == 61 and bs[0].records_count == 0
    assert bs[0].producer_id == pid and bs[0].base_sequence == 0 and bs[0].is_valid()


def test_group_segments_by_size(pdir: Path):
    for base in (0, 10, 20, 30):
        write_segment(pdir, base, [kv(base + i, b"k%d" % i, b"v" * 100) for i in range(10)], mtime_ms=OLD)
    with PartitionLog(pdir) as log:
        seg_size = log.segments[0].size
        groups = group_segments_by_size(log.segments[:3], seg_size * 2, 10 << 20, 30)
        assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20]]


@pytest.mark.parametrize("crash_at", range(0, 12))
def test_crash_at_every_swap_step_leaves_a_loadable_dir_with_nothing_lost(pdir: Path, crash_at: int):
    simple_log(pdir)
    expected_before = records(pdir)
    steps: list[str] = []

    class Crash(Exception):
        pass

    def hook(kind: str, path: str, _target) -> None:  # every rename and delete of the swap
        if kind in ("rename", "unlink") and ".cleaned" not in path or kind == "rename" and ".cleaned" in path:
            steps.append(f"{kind} {path}")
            if len(steps) - 1 == crash_at:
                raise Crash(path)

    try:
        with fileops.observe(hook):
            compact(pdir, COMPACT, CleanerConfig(), NOW, force=True)
        crashed = False
    except Crash:
        crashed = True
    recover_swap_files(pdir)
    after = records(pdir)
    compacted = [(4, b"b", None), (5, b"c", b"1"), (6, b"a", b"3"), (7, b"a", b"4")]
    assert after in (expected_before, compacted), (crashed, steps)
    if not crashed:
        assert after == compacted


def _legacy_log(pdir: Path) -> None:
    from kafkalog.storage.records import build_legacy

    wrapper = build_legacy([(0, NOW - 9000, b"a", b"1"), (1, NOW - 8000, b"b", b"1"), (2, NOW - 7000, b"a", b"2")],
                           magic=1, codec=1, base_offset=0)
    single = build_legacy([(3, NOW - 6000, b"c", b"1")], magic=1, base_offset=3)
    write_segment(pdir, 0, [wrapper, single], mtime_ms=OLD)
    write_segment(pdir, 4, [kv(4, b"c", b"2")], mtime_ms=OLD)


def test_kafka_4_rewrites_legacy_batches_as_v2(pdir: Path):
    _legacy_log(pdir)
    compact(pdir, COMPACT, CleanerConfig(), NOW, force=True, kafka_version=(4, 0))
    bs = batches(pdir)
    # the gzip wrapper lost a@0: one v2 gzip batch from the first retained offset, no last-offset override
    assert [(b.magic, b.base_offset, b.last_offset, b.codec) for b in bs[:1]] == [(2, 1, 2, 1)]
    assert [(r[0], r[2], r[3]) for r in bs[0].record_tuples()] == [(1, b"b", b"1"), (2, b"a", b"2")]
    assert bs[0].timestamp_type == 0 and bs[0].producer_id == -1 and bs[0].is_valid()


def test_kafka_3_keeps_legacy_format_when_rewriting(pdir: Path):
    _legacy_log(pdir)
    compact(pdir, COMPACT, CleanerConfig(), NOW, force=True, kafka_version=(3, 9))
    bs = batches(pdir)
    assert (bs[0].magic, bs[0].codec, bs[0].last_offset) == (1, 1, 2)
    assert [(r[0], r[2]) for r in bs[0].iter_record_tuples()] == [(1, b"b"), (2, b"a")]


def test_legacy_batch_ending_the_round_cannot_be_kept_empty(pdir: Path):
    from kafkalog.storage.errors import KafkaLogError
    from kafkalog.storage.records import build_legacy

    # the last batch before the uncleanable offset loses its only (keyless) record: Kafka would have to keep it
    # as an empty batch, which v0/v1 cannot be -> IllegalStateException, partition uncleanable (3.x and 4.x)
    write_segment(pdir, 0, [build_legacy([(0, NOW - 9000, b"a", b"1")], magic=1, base_offset=0),
                            build_legacy([(1, NOW - 9000, None, b"x")], magic=1, base_offset=1)], mtime_ms=OLD)
    write_segment(pdir, 2, [kv(2, b"c", b"2")], mtime_ms=OLD)
    before = records(pdir)
    with pytest.raises(KafkaLogError, match="uncleanable"):
        compact(pdir, COMPACT, CleanerConfig(), NOW, force=True, kafka_version=(4, 0))
    assert records(pdir) == before and not list(pdir.glob("*.cleaned"))


def test_cli_compact_dry_run_then_apply_with_backup(pdir: Path, capsys: pytest.CaptureFixture[str]):
    import json

    from kafkalog.tools.cli import main

    simple_log(pdir)
    data_dir = pdir.parent
    assert main(["compact", str(data_dir), "--now", str(NOW), "--all", "--config", "cleanup.policy=compact",
                 "--dry-run", "--json"]) == 0
    line = json.loads(capsys.readouterr().out.splitlines()[0])
    assert line["partition"] == "t-0" and line["dryRun"] and line["bytesReclaimed"] > 0
    assert not (data_dir / "cleaner-offset-checkpoint").exists()
    backup = data_dir.parent / "bk"
    assert main(["compact", str(data_dir), "--now", str(NOW), "--all", "--config", "cleanup.policy=compact",
                 "--backup", str(backup)]) == 0
    assert "compact 2 segment(s)" in capsys.readouterr().out
    assert records(pdir) == [(4, b"b", None), (5, b"c", b"1"), (6, b"a", b"3"), (7, b"a", b"4")]
    saved = {p.name for p in backup.rglob("*.log")}
    assert {f"{0:020d}.log", f"{4:020d}.log"} <= saved  # the originals of the replaced segments
