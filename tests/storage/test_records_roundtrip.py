"""Property tests: every format x codec builds, parses and rebuilds byte-exactly (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.storage.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    LegacyBatch,
    RecordBatch,
    build_batch,
    build_legacy,
    iter_batches,
    rebuild,
)
from kafkalog.storage.records.batch import increment_sequence

TS = 1_700_000_000_000
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

blobs = st.one_of(st.none(), st.binary(max_size=300))
header_keys = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
headers = st.lists(st.tuples(header_keys, st.one_of(st.none(), st.binary(max_size=20))), max_size=3)


@st.composite
def v2_records(draw, min_size=1):
    n = draw(st.integers(min_size, 25))
    offset = draw(st.integers(0, 2**40))
    out = []
    for _ in range(n):
        ts = TS + draw(st.integers(-10_000, 10_000_000))
        out.append((offset, ts, draw(blobs), draw(blobs), draw(headers)))
        offset += draw(st.sampled_from([1, 1, 1, 2, 1000]))  # gaps as after compaction
    return out


def _fields(records):
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in records]


@SETTINGS
@given(recs=v2_records(), codec=st.sampled_from([0, 1, 2, 3, 4]), log_append=st.booleans(),
       producer=st.sampled_from([(-1, -1, -1), (7, 0, 0), (2**40, 3, 2**31 - 5)]), txn=st.booleans(),
       ple=st.integers(-1, 2**31 - 1), horizon=st.one_of(st.none(), st.integers(0, 2**45)))
def test_v2_build_parse_rebuild(recs, codec, log_append, producer, txn, ple, horizon):
    pid, epoch, seq = producer
    append_time = TS + 99
    data = build_batch(recs, codec=codec, timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME,
                       log_append_time=append_time, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=txn, partition_leader_epoch=ple, delete_horizon_ms=horizon)
    (b,) = iter_batches(data)
    assert isinstance(b, RecordBatch) and b.magic == 2 and b.is_valid()
    b.ensure_valid()
    assert (b.base_offset, b.last_offset, b.records_count) == (recs[0][0], recs[-1][0], len(recs))
    assert (b.codec, b.producer_id, b.producer_epoch, b.base_sequence) == (codec, pid, epoch, seq)
    assert (b.is_transactional, b.is_control, b.partition_leader_epoch) == (txn, False, ple)
    assert b.delete_horizon_ms == (horizon if horizon is not None else -1)
    assert b.last_sequence == (-1 if seq == -1 else increment_sequence(seq, recs[-1][0] - recs[0][0]))
    expected = [(o, append_time if log_append else t, k, v, h) for o, t, k, v, h in recs]
    got = b.records()
    assert _fields(got) == expected
    assert [(o, t, k, v, list(h)) for o, t, k, v, h in b.iter_record_tuples()] == expected
    assert b.max_timestamp == (append_time if log_append else max(r[1] for r in recs))
    for r in got:
        assert r.sequence == (-1 if seq < 0 else increment_sequence(seq, r.offset - recs[0][0]))
    # byte-exact rebuild: records re-encoded (uncompressed) or the compressed payload carried
    assert rebuild(b) == data
    # re-compressed from parsed records: identical records (bytes may differ only in the payload)
    again = rebuild(b, records=got)
    (b2,) = iter_batches(again)
    assert b2.is_valid() and _fields(b2.records()) == _fields(got)
    if codec == 0:
        assert again == data


@SETTINGS
@given(recs=v2_records(), magic=st.sampled_from([0, 1]), codec=st.sampled_from([0, 1, 2, 3]),
       log_append=st.booleans())
def test_legacy_build_parse_rebuild(recs, magic, codec, log_append):
    recs = [(o, max(t, 0), k, v) for o, t, k, v, _ in recs]
    append_time = TS + 5
    data = build_legacy(recs, magic=magic, codec=codec, timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME,
                        log_append_time=append_time)
    entries = list(iter_batches(data))
    assert all(isinstance(e, LegacyBatch) and e.magic == magic and e.is_valid() for e in entries)
    assert len(entries) == (len(recs) if codec == 0 else 1)
    got = [r for e in entries for r in e.records()]
    if magic == 0:
        expected_ts = [-1] * len(recs)
    elif log_append:
        expected_ts = [append_time] * len(recs)
    else:
        expected_ts = [r[1] for r in recs]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [
        (o, ts, k, v) for (o, _, k, v), ts in zip(recs, expected_ts, strict=True)]
    assert entries[0].base_offset == recs[0][0] and entries[-1].last_offset == recs[-1][0]
    assert b"".join(rebuild(e) for e in entries) == data
    if codec:
        assert entries[0].codec == codec and entries[0].max_timestamp == (
            -1 if magic == 0 else append_time if log_append else max(r[1] for r in recs))


@SETTINGS
@given(recs=v2_records())
def test_mixed_formats_in_one_file(recs):
    """v0, v1 and v2 entries can follow each other in one .log (upgrades)."""
    a = build_legacy([(o, 0, k, v) for o, _, k, v, _ in recs[:1]], magic=0)
    b = build_legacy([(o + 1, TS, k, v) for o, _, k, v, _ in recs[:1]], magic=1, codec=1)
    c = build_batch([(o + 2, t, k, v, h) for o, t, k, v, h in recs], codec=3)
    entries = list(iter_batches(a + b + c))
    assert [e.magic for e in entries] == [0, 1, 2]
    assert [e.position for e in entries] == [0, len(a), len(a) + len(b)]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_empty_and_control_batches(codec):
    from kafkalog.storage.records import build_end_txn_marker
    from kafkalog.storage.records.builder import build_empty_batch_header
    from kafkalog.storage.records.control import ABORT, parse_control_key, parse_end_txn_marker
    src = build_batch([(5, TS, b"k", b"v"), (9, TS + 3, None, None)], codec=codec, producer_id=3,
                      producer_epoch=2, base_sequence=10, is_transactional=True, partition_leader_epoch=4,
                      timestamp_type=LOG_APPEND_TIME, log_append_time=TS + 50)
    (b,) = iter_batches(src)
    empty = build_empty_batch_header(b)
    (e,) = iter_batches(empty)
    assert len(empty) == 61 and e.is_valid() and e.records() == [] and e.records_count == 0
    assert (e.base_offset, e.last_offset, e.base_timestamp, e.max_timestamp) == (5, 9, -1, TS + 50)
    assert (e.producer_id, e.producer_epoch, e.base_sequence, e.last_sequence) == (3, 2, 10, 14)
    assert e.is_transactional and e.timestamp_type == LOG_APPEND_TIME and e.codec == 0
    m = build_end_txn_marker(offset=10, producer_id=3, producer_epoch=2, coordinator_epoch=9, commit=False,
                             timestamp=TS)
    (mb,) = iter_batches(m)
    (r,) = mb.records()
    assert parse_control_key(r.key) == (0, ABORT) and parse_end_txn_marker(r.value) == (0, 9)
    assert mb.is_control and mb.is_transactional and mb.base_sequence == -1 and len(m) == 78


def test_kraft_control_types_are_opaque_typed_records():
    from kafkalog.storage.records.control import (
        CONTROL_TYPE_NAMES,
        control_key,
        control_type_name,
        parse_control_key,
    )
    for ctype in range(2, 7):
        data = build_batch([(0, TS, control_key(ctype), b"\x00\x01opaque")], is_control=True)
        (b,) = iter_batches(data)
        (r,) = b.records()
        assert parse_control_key(r.key) == (0, ctype) and r.value == b"\x00\x01opaque"
        assert control_type_name(ctype) == CONTROL_TYPE_NAMES[ctype]
    assert control_type_name(99) == "UNKNOWN"
    assert parse_control_key(b"\x00\x05\x00\x01extra") == (5, 1)  # higher versions parse as v0


def test_v1_wrapper_offset_rules():
    # relative inner offsets 0..2, wrapper offset = last absolute offset 102 -> 100, 101, 102
    data = build_legacy([(100, TS, None, b"a"), (101, TS, None, b"b"), (102, TS, None, b"c")], magic=1, codec=1)
    (e,) = iter_batches(data)
    assert [r.offset for r in e.records()] == [100, 101, 102] and e.base_offset == 100
    # librdkafka quirk: wrapper offset 0 means base 0
    inner = [(5, TS, None, b"a"), (6, TS, None, b"b")]
    z = build_legacy(inner, magic=1, codec=2, wrapper_offset=0)
    (e,) = iter_batches(z)
    assert [r.offset for r in e.records()] == [0, 1] and e.last_offset == 0
    # v0 inner offsets are absolute
    v0 = build_legacy([(7, 0, None, b"a"), (9, 0, None, b"b")], magic=0, codec=3)
    (e,) = iter_batches(v0)
    assert [r.offset for r in e.records()] == [7, 9]


def test_v1_wrapper_log_append_time_overrides_inner_timestamps():
    # the broker rewrites only the wrapper (attributes, timestamp, CRC): inner timestamps stay the producer's
    from kafkalog.storage.codec.compression import GZIP, compress
    from kafkalog.storage.records import build_legacy_message
    inner = build_legacy_message(1, 0, TS, None, b"a") + build_legacy_message(1, 1, TS + 1, None, b"b")
    wrapper = build_legacy_message(1, 41, TS + 777, None, compress(GZIP, inner, magic=1), GZIP | 0x08)
    (e,) = iter_batches(wrapper)
    assert e.timestamp_type == LOG_APPEND_TIME and e.max_timestamp == TS + 777
    assert [(r.offset, r.timestamp) for r in e.records()] == [(40, TS + 777), (41, TS + 777)]
    wrapper_ct = build_legacy_message(1, 41, TS + 1, None, compress(GZIP, inner, magic=1), GZIP)
    (e,) = iter_batches(wrapper_ct)
    assert [(r.offset, r.timestamp) for r in e.records()] == [(40, TS), (41, TS + 1)]


def test_v1_inner_messages_in_a_v0_wrapper_keep_their_timestamps():
    from kafkalog.storage.codec.compression import GZIP, compress
    from kafkalog.storage.records import build_legacy_message
    inner = build_legacy_message(1, 3, TS, None, b"a")
    (e,) = iter_batches(build_legacy_message(0, 3, -1, None, compress(GZIP, inner, magic=0), GZIP))
    (r,) = e.records()
    assert (r.offset, r.timestamp, r.magic) == (3, TS, 1)


def test_delete_horizon_timestamps():
    horizon = TS + 86_400_000
    recs = [(0, TS, b"k", None), (1, TS + 10, b"j", b"v")]
    data = build_batch(recs, delete_horizon_ms=horizon)
    (b,) = iter_batches(data)
    assert b.has_delete_horizon and b.base_timestamp == horizon and b.delete_horizon_ms == horizon
    assert [r.timestamp for r in b.records()] == [TS, TS + 10]
    assert rebuild(b) == data


def test_high_magic_is_v2_and_negative_magic_is_legacy():
    data = bytearray(build_batch([(0, TS, None, b"a")]))
    data[16] = 3
    (b,) = iter_batches(bytes(data))
    assert isinstance(b, RecordBatch) and b.magic == 3
    data[16] = 0xFF
    (b,) = iter_batches(bytes(data))
    assert isinstance(b, LegacyBatch) and b.magic == -1 and not b.is_valid()
