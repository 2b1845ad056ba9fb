"""Cross-checks with an independent implementation, kafka-python 3.0.12 (``kafka.record``):
what kafka-python builds kafkalog reads identically, and what kafkalog builds kafka-python reads identically."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords, MemoryRecordsBuilder
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkalog.storage.records import LOG_APPEND_TIME, build_batch, build_legacy, iter_batches

TS = 1_700_000_000_000
V0_LZ4 = (0, 3)
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

blobs = st.one_of(st.none(), st.binary(max_size=200))
header = st.tuples(st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
                   st.one_of(st.none(), st.binary(max_size=10)))
records = st.lists(st.tuples(st.integers(0, 5_000_000), blobs, blobs, st.lists(header, max_size=3)),
                   min_size=1, max_size=30)


def kp_batches(data: bytes) -> list:
    mr = MemoryRecords(data)
    out = []
    while True:
        b = mr.next_batch()
        if b is None:
            return out
        out.append(b)


def kp_records(data: bytes) -> list[tuple]:
    # kafka-python reports v0 timestamps as None where Kafka (and kafkalog) say -1 (NO_TIMESTAMP)
    return [(r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value,
             [tuple(h) for h in (r.headers or [])])
            for b in kp_batches(data) for r in b]


def our_records(data: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
            for b in iter_batches(data) for r in b.records()]


# ------------------------------------------------------------------ kafka-python writes, kafkalog reads


@SETTINGS
@given(recs=records, codec=st.sampled_from([0, 1, 2, 3, 4]), first=st.integers(0, 2**31 - 100),
       producer=st.sampled_from([None, (1000, 2, 0, False), (77, 0, 2**31 - 3, True)]))
def test_v2_kafka_python_builder_read_identically(recs, codec, first, producer):
    kw = {}
    if producer:
        pid, epoch, seq, txn = producer
        kw = dict(transactional=txn, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    b = MemoryRecordsBuilder(2, codec, 10_000_000, offset=first, **kw)
    for dt, k, v, h in recs:
        b.append(TS + dt, k, v, h)
    b.close()
    data = bytes(b.buffer())
    assert our_records(data) == kp_records(data)
    (ours,) = iter_batches(data)
    (theirs,) = kp_batches(data)
    assert ours.is_valid() and theirs.validate_crc()
    assert (ours.base_offset, ours.last_offset_delta, ours.records_count, ours.codec) == (
        theirs.base_offset, theirs.last_offset_delta, theirs.records_count, theirs.compression_type)
    assert (ours.producer_id, ours.producer_epoch, ours.base_sequence, ours.last_sequence) == (
        theirs.producer_id, theirs.producer_epoch, theirs.base_sequence, theirs.last_sequence)
    assert (ours.is_transactional, ours.is_control, ours.max_timestamp, ours.base_timestamp) == (
        theirs.is_transactional, theirs.is_control_batch, theirs.max_timestamp, theirs.first_timestamp)
    assert ours.crc == theirs.crc and ours.timestamp_type == theirs.timestamp_type


@SETTINGS
@given(recs=records, magic=st.sampled_from([0, 1]), codec=st.sampled_from([0, 1, 2, 3]),
       first=st.integers(0, 2**40))
def test_legacy_kafka_python_builder_read_identically(recs, magic, codec, first):
    if (magic, codec) == V0_LZ4:
        return  # kafka-python needs the optional xxhash package for the KAFKA-3160 v0 lz4 framing
    b = MemoryRecordsBuilder(magic, codec, 10_000_000, offset=first)
    for dt, k, v, _ in recs:
        b.append(TS + dt, k, v)
    b.close()
    data = bytes(b.buffer())
    assert our_records(data) == kp_records(data)
    ours = list(iter_batches(data))
    theirs = kp_batches(data)
    # (kafka-python's base_offset of a wrapper is the wrapper's offset field; Kafka's, the first inner offset)
    assert [(e.magic, e.codec, e.is_valid(), e.last_offset) for e in ours] == [
        (t.magic, t.compression_type, t.validate_crc(), t.base_offset) for t in theirs]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_v2_batch_builder_with_control_flags(codec):
    bb = DefaultRecordBatchBuilder(2, codec, True, 12, 3, 0, 1_000_000)
    bb.append(0, TS, b"k", b"v", [("a", b"1"), ("b", None)])
    bb.append(1, TS + 5, None, None, [])
    data = bytes(bb.build())
    assert our_records(data) == kp_records(data)
    (b,) = iter_batches(data)
    assert b.is_transactional and b.producer_id == 12 and b.producer_epoch == 3 and b.is_valid()


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_legacy_batch_builder(magic, codec):
    if (magic, codec) == V0_LZ4:
        codec = 1  # kafka-python cannot write v0 lz4 without xxhash
    bb = LegacyRecordBatchBuilder(magic, codec, 1_000_000)
    for i in range(5):
        bb.append(i, TS + i, None if i == 2 else b"k%d" % i, None if i == 3 else b"v" * i)
    data = bytes(bb.build())
    assert our_records(data) == kp_records(data)


def test_uncompressed_bytes_identical_to_kafka_python():
    """Same inputs, same bytes: v2 (with headers/null fields, idempotent, transactional), v0, v1."""
    recs = [(TS + 3 * i, b"k%d" % i if i % 3 else None, b"value-%d" % i if i % 4 else None,
             [(f"h{i}", b"x")] if i % 2 else []) for i in range(20)]
    b = MemoryRecordsBuilder(2, 0, 10_000_000, offset=0, transactional=True, producer_id=9, producer_epoch=1,
                             base_sequence=100)
    for t, k, v, h in recs:
        b.append(t, k, v, h)
    b.close()
    ours = build_batch([(i, t, k, v, h) for i, (t, k, v, h) in enumerate(recs)], producer_id=9,
                       producer_epoch=1, base_sequence=100, is_transactional=True,
                       partition_leader_epoch=0)  # kafka-python writes 0 where Java producers write -1
    assert ours == bytes(b.buffer())
    for magic in (0, 1):
        b = MemoryRecordsBuilder(magic, 0, 10_000_000, offset=0)
        for t, k, v, _ in recs:
            b.append(t, k, v)
        b.close()
        assert build_legacy([(i, t, k, v) for i, (t, k, v, _) in enumerate(recs)], magic=magic) == bytes(b.buffer())


# ------------------------------------------------------------------ kafkalog writes, kafka-python reads


@SETTINGS
@given(recs=records, codec=st.sampled_from([0, 1, 2, 3, 4]), base=st.integers(0, 2**40),
       producer=st.sampled_from([(-1, -1, -1, False), (5, 1, 0, False), (2**50, 32767, 2**31 - 2, True)]),
       log_append=st.booleans(), ple=st.integers(-1, 1000))
def test_kafkalog_v2_read_by_kafka_python(recs, codec, base, producer, log_append, ple):
    pid, epoch, seq, txn = producer
    data = build_batch([(base + i, TS + dt, k, v, h) for i, (dt, k, v, h) in enumerate(recs)], codec=codec,
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn,
                       timestamp_type=LOG_APPEND_TIME if log_append else 0, log_append_time=TS + 1,
                       partition_leader_epoch=ple)
    (t,) = kp_batches(data)
    assert t.validate_crc()
    assert (t.base_offset, t.producer_id, t.producer_epoch, t.base_sequence, t.is_transactional) == (
        base, pid, epoch, seq, txn)
    assert (t.compression_type, t.timestamp_type, t.leader_epoch, t.records_count) == (
        codec, 1 if log_append else 0, ple, len(recs))
    assert kp_records(data) == our_records(data)
    if log_append:
        assert {r[1] for r in kp_records(data)} == {TS + 1}


@SETTINGS
@given(recs=records, magic=st.sampled_from([0, 1]), codec=st.sampled_from([0, 1, 2, 3]),
       base=st.integers(0, 2**40))
def test_kafkalog_legacy_read_by_kafka_python(recs, magic, codec, base):
    if (magic, codec) == V0_LZ4:
        return  # see test_legacy_kafka_python_builder_read_identically; covered by the spec vector instead
    data = build_legacy([(base + i, TS + dt, k, v) for i, (dt, k, v, _) in enumerate(recs)], magic=magic,
                        codec=codec)
    theirs = kp_batches(data)
    assert all(t.validate_crc() for t in theirs)
    assert kp_records(data) == our_records(data)
    assert [r[0] for r in kp_records(data)] == [base + i for i in range(len(recs))]
