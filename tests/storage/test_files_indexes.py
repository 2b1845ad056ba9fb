""".index / .timeindex / .txnindex: formats, zero padding, lookups, sanity checks and both rebuild rules.

Expected index contents below are computed by hand from docs/semantics.md#index-interval-rule and docs/formats.md#time-index with 100-byte batches.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog import facts
from kafkalog.storage.errors import CorruptIndexError
from kafkalog.storage.files.offset_index import (
    OffsetIndex,
    OffsetIndexBuilder,
    OffsetPosition,
    read_offset_index,
)
from kafkalog.storage.files.producer_snapshot import ProducerSnapshot, ProducerSnapshotEntry
from kafkalog.storage.files.time_index import TimeIndex, TimeIndexBuilder, TimestampOffset, read_time_index
from kafkalog.storage.files.txn_index import AbortedTxn, TransactionIndex, read_txn_index
from kafkalog.storage.log.producer_state import ProducerStateManager
from kafkalog.storage.log.segment import (
    STOP_CORRUPT,
    STOP_OFFSET_OVERFLOW,
    STOP_PARTIAL_BATCH,
    STOP_TORN_TAIL,
    recover_segment,
    replay_appends,
)
from kafkalog.storage.records import build_batch, build_end_txn_marker, build_legacy, iter_batches

OP = OffsetPosition
TO = TimestampOffset


def batch100(offset: int, ts: int, **kw) -> bytes:
    """A one-record v2 batch of exactly 100 bytes."""
    b = build_batch([(offset, ts, b"k", b"v" * 31)], base_offset=offset, **kw)
    assert len(b) == 100
    return b


def log_of(timestamps: list[int], base: int = 0) -> bytes:
    return b"".join(batch100(base + i, ts) for i, ts in enumerate(timestamps))


# ------------------------------------------------------------------------------------------- offset index


def test_offset_index_read_lookup_round_trip(tmp_path):
    data = struct.pack(">iiiiii", 3, 300, 6, 600, 9, 900)
    p = tmp_path / "00000000000000000100.index"
    p.write_bytes(data)
    with read_offset_index(p) as idx:
        assert idx.base_offset == 100 and idx.entries == 3 and idx.valid_entries == 3
        assert list(idx) == [OP(103, 300), OP(106, 600), OP(109, 900)]
        assert idx.lookup(99) == OP(100, 0)  # below the first entry: (base, 0)
        assert idx.lookup(103) == OP(103, 300)
        assert idx.lookup(108) == OP(106, 600)
        assert idx.lookup(10**12) == OP(109, 900)
        assert idx.fetch_upper_bound_offset(300, 250) == OP(106, 600)
        idx.sanity_check()
        assert idx.problems() == []
        assert idx.to_bytes() == data and idx.is_trimmed


def test_offset_index_zero_padding_recognised(tmp_path):
    idx = OffsetIndex.from_entries(0, [(3, 300), (6, 600)], size=80)  # preallocated to 10 slots
    raw = idx.to_bytes()
    assert len(raw) == 80
    p = tmp_path / "00000000000000000000.index"
    p.write_bytes(raw)
    with read_offset_index(p) as back:
        assert back.entries == 10  # Kafka's count includes the zero slots
        assert back.valid_entries == 2 and back.padding_entries == 8 and back.padding_is_zero()
        assert list(back) == [OP(3, 300), OP(6, 600)]
        assert back.lookup(10**9) == OP(6, 600)  # zeros never mistaken for entries
        back.sanity_check()  # Kafka's check does not notice zero padding (docs/formats.md#offset-index)
        assert back.problems() == []
        assert back.to_bytes() == raw  # untrimmed round trip
        assert back.to_bytes(trim=True) == raw[:16]
        assert not back.is_trimmed


def test_offset_index_first_slot_rules():
    # slot 0 may have relative offset 0 (Kafka's rule only stops at i > 0)...
    idx = OffsetIndex.from_bytes(struct.pack(">iiii", 0, 77, 0, 0), 5)
    assert idx.valid_entries == 1 and list(idx) == [OP(5, 77)]
    # ...but an all-zero slot 0 is the padding of a preallocated index with no entries yet: no real entry has
    # position 0, because the first batch of a segment is never indexed (seen in real killed-broker dirs)
    empty = OffsetIndex.from_bytes(bytes(4096), 5)
    assert empty.entries == 512 and empty.valid_entries == 0 and empty.padding_is_zero()
    assert empty.lookup(100) == OP(5, 0)
    assert TimeIndex.from_bytes(bytes(4092), 5).valid_entries == 0


def test_offset_index_sanity_check_kafka_rules():
    with pytest.raises(CorruptIndexError) as ei:
        OffsetIndex.from_bytes(struct.pack(">ii", -1, 0), 10, "x.index").sanity_check()
    assert ei.value.path == "x.index" and ei.value.position == 0
    with pytest.raises(CorruptIndexError):
        OffsetIndex.from_bytes(b"\0" * 12, 0).sanity_check()  # not a multiple of 8
    OffsetIndex.from_bytes(b"", 0).sanity_check()


def test_offset_index_problems_strict():
    idx = OffsetIndex.from_bytes(struct.pack(">iiiiii", 5, 500, 4, 600, 7, 100) + b"\0\0\0\0\0\0\0\0" + b"\1" * 8, 0)
    found = idx.problems()
    assert [(d.code, d.position) for d in found] == [("index.notIncreasing", 8), ("index.decreases", 16),
                                                     ("index.nonZeroPadding", 24)]
    assert found[1].facts == {"entry": 2, "field": "position", "value": 100, "previous": 600}
    assert [facts.render(d.finding("x.index", "index", "error")) for d in found] == [
        "entry 1: offset 4 does not increase (previous 5)", "entry 2: position 100 decreases (previous 600)",
        "non-zero bytes after the last valid entry"]


def test_offset_index_builder_rules():
    b = OffsetIndexBuilder(10, max_index_size=16)
    b.append(11, 0)
    with pytest.raises(CorruptIndexError):
        b.append(11, 100)  # InvalidOffsetException: not larger than the last offset
    b.append(12, 100)
    with pytest.raises(CorruptIndexError):
        b.append(13, 200)  # full
    with pytest.raises(CorruptIndexError):
        OffsetIndexBuilder(10).append(9, 0)  # relative offset overflow


# ------------------------------------------------------------------------------------------- time index


def test_time_index_read_lookup_round_trip(tmp_path):
    data = struct.pack(">qiqi", 1030, 3, 1090, 9)
    p = tmp_path / "00000000000000000000.timeindex"
    p.write_bytes(data)
    with read_time_index(p) as idx:
        assert list(idx) == [TO(1030, 3), TO(1090, 9)]
        assert idx.lookup(1029) == TO(-1, 0)
        assert idx.lookup(1030) == TO(1030, 3)
        assert idx.lookup(2000) == TO(1090, 9)
        assert idx.last_entry == TO(1090, 9) and idx.max_timestamp_so_far == TO(1090, 9)
        idx.sanity_check()
        assert idx.problems() == [] and idx.to_bytes() == data


def test_time_index_zero_padding_and_kafka_sanity_check():
    idx = TimeIndex.from_entries(0, [(1030, 3), (1090, 9)], size=10485760)
    assert idx.length == 10485756  # rounded down to a multiple of 12 (docs/formats.md#offset-index)
    assert idx.valid_entries == 2 and idx.entries == 873813
    assert idx.last_valid_entry == TO(1090, 9)
    assert idx.padding_is_zero()
    # Kafka's TimeIndex.sanityCheck does catch zero padding: last timestamp 0 < first timestamp
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    assert TimeIndex.from_bytes(idx.to_bytes(), 0).to_bytes() == idx.to_bytes()


def test_time_index_builder_rules():
    b = TimeIndexBuilder(0, max_index_size=36)  # 3 slots, the last one reserved
    assert b.maybe_append(-1, 0) is False  # NO_TIMESTAMP is never written
    assert b.maybe_append(100, 1) is True
    assert b.maybe_append(100, 2) is False  # equal timestamp skipped
    assert b.maybe_append(200, 2) is True
    with pytest.raises(CorruptIndexError):
        b.maybe_append(300, 3)  # isFull = entries >= maxEntries - 1
    assert b.maybe_append(300, 3, skip_full_check=True) is True
    b2 = TimeIndexBuilder(0)
    b2.maybe_append(100, 5)
    with pytest.raises(CorruptIndexError):
        b2.maybe_append(200, 4)  # offset going back
    with pytest.raises(CorruptIndexError):
        b2.maybe_append(50, 6)  # timestamp going back


# ------------------------------------------------------------------------------------------- txn index


def test_txn_index_round_trip_and_queries(tmp_path):
    entries = [AbortedTxn(7, 0, 3, 2), AbortedTxn(8, 2, 4, 5), AbortedTxn(9, 10, 20, 21)]
    idx = TransactionIndex.from_entries(0, entries)
    raw = idx.to_bytes()
    assert len(raw) == 3 * 34 and raw[:2] == b"\0\0"
    p = tmp_path / "00000000000000000000.txnindex"
    p.write_bytes(raw + b"\1\2\3")  # a partial trailing entry is ignored, kept for the round trip
    with read_txn_index(p) as back:
        assert back.all_aborted_txns() == entries
        assert back.trailing == b"\1\2\3"
        assert back.to_bytes() == raw + b"\1\2\3"
        back.sanity_check()
        [partial] = back.problems()
        assert (partial.code, dict(partial.facts), partial.position) == ("txnIndex.partialEntry", {"bytes": 3},
                                                                         len(raw))
        assert facts.render(partial.finding("x.txnindex", "txnindex", "error")) == "3 trailing bytes (partial entry)"
        assert back.collect_aborted_txns(4, 10) == ([entries[1]], True)  # (9, 10, ...) has LSO 21 >= 10
        assert back.collect_aborted_txns(4, 100) == ([entries[1], entries[2]], False)
        assert back.collect_aborted_txns(0, 5) == (entries[:2], True)


def test_txn_index_sanity_and_version():
    idx = TransactionIndex.from_entries(100, [AbortedTxn(1, 10, 50, 51)])
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()  # lastOffset below the segment base
    bad = bytearray(TransactionIndex.from_entries(0, [AbortedTxn(1, 0, 1, 2)]).to_bytes())
    bad[0] = 1  # AbortedTxn.version() reads only the first byte
    with pytest.raises(CorruptIndexError):
        list(TransactionIndex.from_bytes(bytes(bad), 0))
    bad[0], bad[1] = 0, 5  # second byte is not checked by Kafka; reported by problems()
    t = TransactionIndex.from_bytes(bytes(bad), 0)
    assert list(t)[0].version == 5 and t.problems()
    with pytest.raises(CorruptIndexError):
        TransactionIndex.from_entries(0, [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 0, 5, 6)])


# ------------------------------------------------------------------------------------------- hostile input


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 2**40))
def test_indexes_hostile_bytes(data, base):
    for cls in (OffsetIndex, TimeIndex):
        idx = cls.from_bytes(data, base, "f")
        try:
            idx.sanity_check()
        except CorruptIndexError as e:
            assert e.path == "f"
        idx.problems()
        list(idx)
        idx.lookup(base + 5)
        assert idx.valid_entries <= idx.entries
        if idx.padding_is_zero() and len(data) % idx.entry_size == 0:
            assert idx.to_bytes() == data
    t = TransactionIndex.from_bytes(data, base, "f")
    t.problems()
    try:
        t.sanity_check()
        assert t.to_bytes() == data
    except CorruptIndexError as e:
        assert e.path == "f"


# ------------------------------------------------------------------------------------------- rebuild rules


def test_recovery_rule_hand_computed():
    # 10 batches of 100 bytes, interval 250: entries where validBytes - lastIndexEntry > 250
    log = log_of([1000 + 10 * i for i in range(10)])
    r = rebuild_indexes_recovery(log, 0, index_interval_bytes=250)
    assert r.stop_reason is None and r.valid_bytes == 1000 and r.batches == 10 and r.next_offset == 10
    assert list(r.offset_index) == [OP(3, 300), OP(6, 600), OP(9, 900)]
    # time entries accompany offset entries; the final entry (1090, 9) equals the last one: skipped
    assert list(r.time_index) == [TO(1030, 3), TO(1060, 6), TO(1090, 9)]
    assert r.offset_index.to_bytes() == struct.pack(">6i", 3, 300, 6, 600, 9, 900)


def test_recovery_rule_final_time_entry_and_shallow_max():
    # max timestamp reached by batch 1 and 5 only; batch 10 adds the final entry
    ts = [1000, 1050, 1020, 1040, 1030, 1070, 1010, 1000, 1000, 1000, 1200]
    r = rebuild_indexes_recovery(log_of(ts), 0, index_interval_bytes=250)
    assert list(r.offset_index) == [OP(3, 300), OP(6, 600), OP(9, 900)]
    assert list(r.time_index) == [TO(1050, 1), TO(1070, 5), TO(1200, 10)]
    assert r.max_timestamp == TO(1200, 10)


def test_append_rule_leader_equals_recovery_and_follower_differs():
    log = log_of([1000 + 10 * i for i in range(10)])
    leader = replay_appends(log, 0, index_interval_bytes=250)
    assert list(leader.offset_index) == [OP(3, 300), OP(6, 600), OP(9, 900)]
    assert list(leader.time_index) == [TO(1030, 3), TO(1060, 6), TO(1090, 9)]
    # follower appends of 3, 2, 3, 2 batches: counter tested before each append is added
    follower = replay_appends(log, 0, appends=[0, 300, 500, 800], index_interval_bytes=250)
    assert list(follower.offset_index) == [OP(4, 300), OP(9, 800)]
    assert list(follower.time_index) == [TO(1040, 4), TO(1090, 9)]
    # KAFKA-806 (Kafka >= 4.1): decided per batch inside appends
    per_batch = replay_appends(log, 0, appends=[0, 300, 500, 800], index_interval_bytes=250, per_batch=True)
    assert list(per_batch.offset_index) == [OP(3, 300), OP(6, 600), OP(9, 900)]


def test_append_rule_first_append_never_indexed_and_restart_resets_counter():
    log = log_of([1000 + 10 * i for i in range(8)])
    r = replay_appends(log, 0, index_interval_bytes=0)
    assert list(r.offset_index)[0] == OP(1, 100)  # 0 > 0 is false for the first append
    assert len(r.offset_index) == 7
    r2 = replay_appends(log, 0, index_interval_bytes=250, restarts=[400])
    # counter: 0,100,200,300 -> entry at batch 3; restart at 400 resets to 0 -> next entry at batch 7
    assert list(r2.offset_index) == [OP(3, 300), OP(7, 700)]
    # the clean close at the restart adds the then-max time entry (1030 was already there)
    assert list(r2.time_index) == [TO(1030, 3), TO(1070, 7)]


def test_append_rule_deep_time_offsets():
    b0 = build_batch([(0, 5000, b"a", b"x"), (1, 9000, b"b", b"x"), (2, 7000, b"c", b"x")], base_offset=0)
    log = b0 + build_batch([(3, 8000, b"d", b"x")], base_offset=3)
    shallow = replay_appends(log, 0)
    deep = replay_appends(log, 0, deep_time_offsets=True)
    assert list(shallow.time_index) == [TO(9000, 2)]
    assert list(deep.time_index) == [TO(9000, 1)]


def test_recovery_stops_at_corruption_and_tails():
    log = log_of([1, 2, 3, 4])
    bad = bytearray(log)
    bad[250] ^= 0xFF  # inside batch 2's CRC-covered bytes
    r = rebuild_indexes_recovery(bytes(bad), 0, index_interval_bytes=0)
    assert r.stop_reason == STOP_CORRUPT and r.valid_bytes == 200 and r.truncated_bytes == 200
    assert r.error is not None and r.error.position == 200
    assert rebuild_indexes_recovery(log + b"\0" * 17, 0).stop_reason == STOP_TORN_TAIL
    assert rebuild_indexes_recovery(log + log[:50], 0).stop_reason == STOP_PARTIAL_BATCH
    r = rebuild_indexes_recovery(log + b"\0" * 40, 0)  # size field 0 < 14
    assert r.stop_reason == STOP_CORRUPT and r.valid_bytes == 400
    r = rebuild_indexes_recovery(log, 5)  # offsets below the base offset do not fit
    assert r.stop_reason == STOP_OFFSET_OVERFLOW and r.valid_bytes == 0


def test_recovery_legacy_v0_has_empty_time_index():
    log = b"".join(build_legacy([(i, -1, b"k", b"v" * 20)], magic=0) for i in range(20))
    r = rebuild_indexes_recovery(log, 0, index_interval_bytes=100)
    assert len(r.offset_index) > 0 and len(r.time_index) == 0


def test_rebuild_txn_index_last_stable_offsets():
    log = b"".join(
        [
            build_batch([(0, 1, b"a", b"x"), (1, 1, b"a", b"x")], base_offset=0, producer_id=7, producer_epoch=0,
                        base_sequence=0, is_transactional=True),
            build_batch([(2, 1, b"b", b"x")], base_offset=2, producer_id=8, producer_epoch=0, base_sequence=0,
                        is_transactional=True),
            build_end_txn_marker(offset=3, producer_id=7, producer_epoch=0, coordinator_epoch=0, commit=False,
                                 timestamp=2),
            build_end_txn_marker(offset=4, producer_id=8, producer_epoch=0, coordinator_epoch=0, commit=False,
                                 timestamp=2),
            build_batch([(5, 1, b"c", b"x")], base_offset=5, producer_id=7, producer_epoch=0, base_sequence=2,
                        is_transactional=True),
            build_end_txn_marker(offset=6, producer_id=7, producer_epoch=0, coordinator_epoch=0, commit=True,
                                 timestamp=2),
            build_end_txn_marker(offset=7, producer_id=9, producer_epoch=0, coordinator_epoch=0, commit=False,
                                 timestamp=2),  # empty transaction: no entry
        ]
    )
    t = rebuild_txn_index(log, 0)
    # producer 7 aborted while 8's transaction (from 2) was open: LSO 2; then 8 aborted with none open: 4 + 1
    assert t.all_aborted_txns() == [AbortedTxn(7, 0, 3, 2), AbortedTxn(8, 2, 4, 5)]


def test_rebuild_txn_index_from_snapshot_state():
    snap = ProducerSnapshot([ProducerSnapshotEntry(9, 0, 3, 60, 0, 1, 0, 50)])
    seg = build_end_txn_marker(offset=100, producer_id=9, producer_epoch=0, coordinator_epoch=0, commit=False,
                               timestamp=1)
    assert rebuild_txn_index(seg, 100, snapshot=snap).all_aborted_txns() == [AbortedTxn(9, 50, 100, 101)]
    prior = list(iter_batches(build_batch([(90, 1, b"a", b"x")], base_offset=90, producer_id=9, producer_epoch=0,
                                          base_sequence=0, is_transactional=True)))
    assert rebuild_txn_index(seg, 100, prior_batches=prior).all_aborted_txns() == [AbortedTxn(9, 90, 100, 101)]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600))
def test_rebuild_hostile_log_bytes(data):
    for r in (rebuild_indexes_recovery(data, 0, with_txn_index=True), replay_appends(data, 0)):
        assert 0 <= r.valid_bytes <= len(data)
        r.offset_index.sanity_check()
        r.time_index.sanity_check()


def rebuild_indexes_recovery(buf, base: int, **kw):
    """``LogSegment.recover`` of one segment from scratch (the valid region ends at an overflowing offset)."""
    with_txn = kw.pop("with_txn_index", False)
    return recover_segment(buf, base, on_overflow="stop", producers=ProducerStateManager() if with_txn else None,
                           **kw)


def rebuild_txn_index(buf, base: int, *, snapshot=None, prior_batches=()):
    psm = ProducerStateManager.from_snapshot(snapshot)
    for b in prior_batches:
        if b.magic >= 2:
            psm.replay(b)
    return recover_segment(buf, base, producers=psm, on_overflow="stop").txn_index
