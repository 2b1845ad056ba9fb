"""The test vectors of docs/formats.md#test-vectors, built and parsed byte-exactly."""

import pytest
from builders import hex_bytes as h

from kafkalog.storage.codec import compression
from kafkalog.storage.records import (
    build_batch,
    build_end_txn_marker,
    build_legacy,
    iter_batches,
    rebuild,
)
from kafkalog.storage.records.builder import encode_record
from kafkalog.storage.records.control import COMMIT, parse_control_key, parse_end_txn_marker

V2_ONE = h("0000000000000000 00000039 00000000 02 965a94b1 0000 00000000 0000018bcfe56800 0000018bcfe56800 "
           "ffffffffffffffff ffff ffffffff 00000001 0e 00 00 00 01 02 61 00")
V0_ONE = h("0000000000000000 0000000f 51df3a32 00 00 ffffffff 00000001 61")
V1_ONE = h("0000000000000000 00000017 42b4af02 01 00 0000018bcfe56800 ffffffff 00000001 61")
COMMIT_MARKER = h("000000000000000a 00000042 00000000 02 fc84b034 0030 00000000 0000018bcfe56800 0000018bcfe56800 "
                  "00000000000003e8 0000 ffffffff 00000001 20 00 00 00 08 00000001 0c 000000000005 00")
EMPTY = h("0000000000000014 00000031 00000003 02 fd6bf769 0000 00000004 ffffffffffffffff 0000018bcfe56800 "
          "0000000000000007 0000 00000000 00000000")
TS = 1700000000000


def test_v2_single_record_vector():
    assert build_batch([(0, TS, None, b"a")], partition_leader_epoch=0) == V2_ONE
    (b,) = iter_batches(V2_ONE)
    assert b.is_valid() and b.crc == 0x965A94B1
    (r,) = b.records()
    assert (r.offset, r.timestamp, r.key, r.value, r.headers) == (0, TS, None, b"a", [])
    assert rebuild(b) == V2_ONE


def test_legacy_vectors():
    assert build_legacy([(0, -1, None, b"a")], magic=0) == V0_ONE
    assert build_legacy([(0, TS, None, b"a")], magic=1) == V1_ONE
    for data, magic, crc in ((V0_ONE, 0, 0x51DF3A32), (V1_ONE, 1, 0x42B4AF02)):
        (b,) = iter_batches(data)
        assert b.magic == magic and b.crc == crc and b.is_valid()
        assert rebuild(b) == data


def test_record_vector_with_headers():
    out = bytearray()
    encode_record(out, 0, 5, 1, b"k", b"v", [("h", b"x"), ("n", None)])
    assert bytes(out) == h("1e 00 0a 02 02 6b 02 76 04 02 68 02 78 02 6e 01")


def test_commit_marker_vector():
    m = build_end_txn_marker(offset=10, producer_id=1000, producer_epoch=0, coordinator_epoch=5, commit=True,
                             timestamp=TS, partition_leader_epoch=0)
    assert m == COMMIT_MARKER and len(m) == 78
    (b,) = iter_batches(m)
    assert b.is_control and b.is_transactional and b.is_valid()
    (r,) = b.records()
    assert parse_control_key(r.key) == (0, COMMIT)
    assert parse_end_txn_marker(r.value) == (0, 5)


def test_retained_empty_batch_vector():
    e = build_batch([], base_offset=20, last_offset_delta=4, partition_leader_epoch=3, producer_id=7,
                    producer_epoch=0, base_sequence=0, max_timestamp=TS)
    assert e == EMPTY
    (b,) = iter_batches(EMPTY)
    assert b.records() == [] and b.last_offset == 24 and b.is_valid()


def test_lz4_frame_headers():
    assert compression.compress(compression.LZ4, b"hello")[:7] == h("04 22 4d 18 60 40 82")
    assert compression.compress(compression.LZ4, b"hello", magic=0)[:7] == h("04 22 4d 18 60 40 1a")
    assert compression.compress(compression.LZ4, b"hello") == h("04224d18 60 40 82 05000080 68656c6c6f 00000000")


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_v2_codecs_round_trip(codec):
    recs = [(i, TS + i, b"k%d" % i, b"v" * i, [("h", b"x")]) for i in range(100)]
    data = build_batch(recs, codec=codec)
    (b,) = iter_batches(data)
    assert b.is_valid() and b.codec == codec
    got = b.records()
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [r[:4] for r in recs]
    assert rebuild(b) == data


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_legacy_codecs_round_trip(magic, codec):
    data = build_legacy([(i + 10, TS + i, b"k", b"v%d" % i) for i in range(5)], magic=magic, codec=codec)
    entries = list(iter_batches(data))
    assert all(e.is_valid() for e in entries)
    assert [r.offset for e in entries for r in e.records()] == list(range(10, 15))
    assert entries[0].base_offset == 10
    assert b"".join(rebuild(e) for e in entries) == data
