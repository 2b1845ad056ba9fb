import os
import struct

import pytest

from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.engine.validator import OffsetOrderError, RecordTooLargeError
from kafkalog.storage.engine.writer import LogWriter
from kafkalog.storage.files.offset_index import read_offset_index
from kafkalog.storage.files.time_index import read_time_index
from kafkalog.storage.files.txn_index import read_txn_index
from kafkalog.storage.records import build_batch, build_end_txn_marker, iter_batches

NOW = 1_700_000_000_000


def _rec(i, ts=None, size=100):
    return build_batch([(None, NOW + i if ts is None else ts, b"k%d" % i, b"v" * size)], base_offset=0)


def _names(d):
    return sorted(os.listdir(d))


def test_offsets_epoch_index_and_roll(tmp_path):
    cfg = LogConfig.from_topic_props({"segment.bytes": "20000", "index.interval.bytes": "1000"})
    d = tmp_path / "t-0"
    with LogWriter(d, cfg, now_ms=NOW, leader_epoch=3, topic_id="l5y0MjLvQdypLcP9XmR7bw") as w:
        for i in range(200):
            info = w.append(_rec(i))
            assert info.first_offset == i
    names = _names(d)
    assert "00000000000000000000.log" in names and "00000000000000000115.log" in names
    assert "00000000000000000115.snapshot" in names and "00000000000000000200.snapshot" in names
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n3 0\n"
    assert (d / "partition.metadata").read_bytes() == b"version: 0\ntopic_id: l5y0MjLvQdypLcP9XmR7bw"
    # every batch is 174 bytes: the append-time rule indexes the append after > 1000 bytes were written
    with read_offset_index(d / "00000000000000000000.index") as idx:
        entries = [(e.offset, e.position) for e in idx]
    with open(d / "00000000000000000000.log", "rb") as f:
        batches = list(iter_batches(f.read()))
    expected, since = [], 0
    for b in batches:  # LogSegment.append: tested before the append's bytes are added
        if since > 1000:
            expected.append((b.last_offset, b.position))
            since = 0
        since += b.size
    assert entries == expected and entries[0][0] == 6
    with read_time_index(d / "00000000000000000000.timeindex") as ti:
        last = list(ti)[-1]
    assert (last.timestamp, last.offset) == (NOW + 114, 114)  # final entry at roll
    assert [b.base_offset for b in batches] == list(range(115))
    assert all(b.partition_leader_epoch == 3 and b.is_valid() for b in batches)


def test_log_append_time_and_recompression(tmp_path):
    cfg = LogConfig.from_topic_props({"message.timestamp.type": "LogAppendTime", "compression.type": "gzip"})
    d = tmp_path / "t-0"
    with LogWriter(d, cfg, now_ms=NOW) as w:
        w.append(build_batch([(0, 5, b"a", b"b"), (1, 6, b"c", None)], base_offset=0))
    data = (d / "00000000000000000000.log").read_bytes()
    (b,) = list(iter_batches(data))
    assert b.codec_name == "gzip" and b.timestamp_type == 1 and b.max_timestamp == NOW and b.is_valid()
    assert [(r.offset, r.key) for r in b.records()] == [(0, b"a"), (1, b"c")]


def test_reopen_continues_and_follower_checks(tmp_path):
    d = tmp_path / "t-0"
    with LogWriter(d, now_ms=NOW) as w:
        w.append(_rec(0))
    with LogWriter(d, now_ms=NOW) as w:
        assert w.log_end_offset == 1
        assert w.append(_rec(1)).first_offset == 1
        with pytest.raises(OffsetOrderError):
            w.append(build_batch([(0, NOW, b"k", b"v")], base_offset=0), assign_offsets=False)
        w.append(build_batch([(10, NOW, b"k", b"v")], base_offset=10), assign_offsets=False)
        assert w.log_end_offset == 11


def test_too_large_and_corrupt(tmp_path):
    cfg = LogConfig.from_topic_props({"max.message.bytes": "100"})
    with LogWriter(tmp_path / "t-0", cfg, now_ms=NOW) as w:
        with pytest.raises(RecordTooLargeError):
            w.append(_rec(0, size=200))
        bad = bytearray(_rec(0, size=10))
        bad[-1] ^= 1
        with pytest.raises(Exception, match="corrupt"):
            w.append(bytes(bad))


def test_duplicates_dropped_and_aborted_txn_indexed(tmp_path):
    d = tmp_path / "t-0"
    with LogWriter(d, now_ms=NOW) as w:
        b = build_batch([(0, NOW, b"k", b"v")], producer_id=4, producer_epoch=0, base_sequence=0,
                        is_transactional=True)
        w.append(b)
        assert w.append(b).duplicate
        w.append(build_end_txn_marker(offset=0, producer_id=4, producer_epoch=0, coordinator_epoch=1,
                                      commit=False, timestamp=NOW))
        assert w.log_end_offset == 2
    with read_txn_index(d / "00000000000000000000.txnindex") as t:
        (e,) = list(t)
    assert (e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) == (4, 0, 1, 2)
    snap = (d / "00000000000000000002.snapshot").read_bytes()
    assert struct.unpack_from(">i", snap, 6)[0] == 1


def test_segment_ms_rolls_by_record_time(tmp_path):
    cfg = LogConfig.from_topic_props({"segment.ms": "1000"})
    d = tmp_path / "t-0"
    with LogWriter(d, cfg, now_ms=NOW) as w:
        w.append(_rec(0, ts=NOW))
        w.append(_rec(1, ts=NOW + 1000))
        w.append(_rec(2, ts=NOW + 1001))
    assert [n for n in _names(d) if n.endswith(".log")] == ["00000000000000000000.log",
                                                            "00000000000000000002.log"]
