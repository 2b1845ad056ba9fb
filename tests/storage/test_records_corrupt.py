"""Bad input: truncated, corrupt and hostile bytes raise CorruptRecordError with the byte position and the
reason -- never another exception, never a hang, no allocation beyond the bytes present."""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from kafkalog.storage.codec.compression import GZIP, ZSTD, compress
from kafkalog.storage.errors import CompressionError, CorruptRecordError
from kafkalog.storage.records import (
    PARTIAL_BATCH,
    TORN_TAIL,
    LogScanner,
    batch_at,
    build_batch,
    build_legacy,
    build_legacy_message,
    iter_batches,
)
from kafkalog.storage.records.builder import encode_record

TS = 1_700_000_000_000
GOOD = build_batch([(i, TS + i, b"k%d" % i, b"value %d" % i) for i in range(5)])


def _with_records(raw: bytes, count: int, codec: int = 0) -> bytes:
    """A v2 batch whose records region is ``raw`` (compressed with ``codec``) and whose count is ``count``,
    with a valid CRC."""
    return build_batch([], codec=codec, compressed_payload=compress(codec, raw) if codec else raw,
                       records_count=count, last_offset_delta=max(count - 1, 0))


def _records(n: int) -> bytes:
    out = bytearray()
    for i in range(n):
        encode_record(out, 0, i, i, b"k", b"v", [])
    return bytes(out)


def test_size_field_below_14_stops_with_position():
    bad = GOOD + struct.pack(">qi", 5, 13) + b"\x00" * 20
    s = LogScanner(bad, path="x.log")
    with pytest.raises(CorruptRecordError, match="smaller than minimum record overhead") as e:
        list(s)
    assert e.value.position == len(GOOD) and e.value.path == "x.log"
    assert f"x.log: byte {len(GOOD)}:" in str(e.value)


@pytest.mark.parametrize("cut, reason", [(1, TORN_TAIL), (17, TORN_TAIL), (18, PARTIAL_BATCH), (60, PARTIAL_BATCH)])
def test_torn_tail_and_partial_batch(cut, reason):
    s = LogScanner(GOOD + GOOD[:cut])
    assert len(list(s)) == 1
    assert (s.stop_position, s.stop_reason) == (len(GOOD), reason)


def test_huge_and_negative_sizes():
    s = LogScanner(struct.pack(">qi", 0, 0x7FFFFFFF) + b"\x02" * 100)
    assert list(s) == [] and s.stop_reason == PARTIAL_BATCH
    with pytest.raises(CorruptRecordError, match="-1 smaller"):
        list(iter_batches(struct.pack(">qi", 0, -1) + b"\x02" * 100))
    with pytest.raises(CorruptRecordError, match="exceeds the largest allowable"):
        list(iter_batches(GOOD, max_batch_size=len(GOOD) - 13))
    with pytest.raises(CorruptRecordError, match="runs past"):
        batch_at(GOOD[:-1], 0)


def test_bad_crc():
    bad = bytearray(GOOD)
    bad[70] ^= 0x40
    (b,) = iter_batches(bytes(bad), path="p.log", position_base=1000)
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError, match="stored crc") as e:
        b.ensure_valid()
    assert e.value.position == 1000
    # fields outside the CRC (base offset, leader epoch) do not invalidate it
    moved = bytearray(GOOD)
    struct.pack_into(">qii", moved, 0, 99, len(GOOD) - 12, 7)
    (b,) = iter_batches(bytes(moved))
    assert b.is_valid() and b.base_offset == 99 and b.partition_leader_epoch == 7


def test_v2_batch_shorter_than_header():
    short = struct.pack(">qiib", 0, 40, 0, 2) + b"\x00" * 35
    (b,) = iter_batches(short)
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError, match="61"):
        b.records()


@pytest.mark.parametrize("codec", [0, GZIP, ZSTD])
def test_record_count_mismatch(codec):
    raw = _records(3)
    (b,) = iter_batches(_with_records(raw, 4, codec), position_base=500)
    with pytest.raises(CorruptRecordError, match="premature EOF") as e:
        b.records()
    assert e.value.position is not None and e.value.position >= 500 + 61
    (b,) = iter_batches(_with_records(raw, 2, codec))
    with pytest.raises(CorruptRecordError, match="records still remaining"):
        b.records()
    (b,) = iter_batches(_with_records(raw, -1, codec))
    with pytest.raises(CorruptRecordError, match="invalid record count -1") as e:
        b.records()
    assert e.value.position == 57
    (b,) = iter_batches(_with_records(raw, 0, codec))
    assert b.records() == []  # a zero count never looks at the records region (DefaultRecordBatch)


def test_huge_record_count_does_not_hang_or_allocate():
    (b,) = iter_batches(_with_records(_records(2), 0x7FFFFFFF))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="premature EOF"):
            b.records()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize("raw, match, at", [
    (b"\xff\xff\xff\xff\xff\x01", "record length: varint is too long", 61),
    (b"\x0e\x00" + b"\xff" * 11, "timestampDelta: varlong runs past", 63),
    (bytes.fromhex("14 00 00 00 fe ff ff ff 0f 00 00"), "key of 2147483647 bytes runs past", 70),
    (bytes.fromhex("0c 00 00 00 01 01 02"), "invalid number of record headers 1", 68),
    (bytes.fromhex("0e 00 00 00 01 01 00"), "expected 7 bytes in record payload, but only 6", 61),
    (bytes.fromhex("10 00 00 00 01 01 02 01 00"), "invalid negative header key size", 69),
    (bytes.fromhex("0e 00 00 00 01 01 00 00"), "Invalid record size: expected to read 7", 61),
    (bytes.fromhex("7f"), "negative record length", 61),
])
def test_malformed_records_have_reason_and_position(raw, match, at):
    (b,) = iter_batches(_with_records(raw, 1), path="t.log")
    assert b.is_valid()
    with pytest.raises(CorruptRecordError, match=match) as e:
        b.records()
    assert e.value.position == at and e.value.path == "t.log"
    with pytest.raises(CorruptRecordError, match=match):
        list(b.iter_record_tuples())


def test_hostile_key_length_allocates_nothing_big():
    raw = bytes.fromhex("fe ff ff 0f 00 00 00") + bytes.fromhex("fe ff ff ff 0f") + b"x" * 100
    (b,) = iter_batches(_with_records(raw, 1))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError):
            b.records()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_corrupt_compressed_payload_position_is_the_payload():
    data = bytearray(build_batch([(0, TS, b"k", b"v" * 100)], codec=GZIP))
    data[61:63] = b"xx"
    (b,) = iter_batches(bytes(data), position_base=10_000)
    with pytest.raises(CompressionError, match="gzip") as e:
        b.records()
    assert e.value.position == 10_000 + 61


def test_unknown_codec_in_v2_attributes():
    data = bytearray(build_batch([(0, TS, b"k", b"v")], codec=GZIP))
    data[22] = 0x07
    (b,) = iter_batches(bytes(data))
    with pytest.raises(CorruptRecordError, match="unknown compression type id 7") as e:
        b.records()
    assert e.value.position == 22


def test_legacy_errors():
    inner = build_legacy_message(1, 0, TS, None, b"a")
    cases = [
        (build_legacy_message(1, 5, TS, None, None, GZIP), "null value"),
        (build_legacy_message(1, 5, TS, None, compress(ZSTD, inner), 4), "zstd compression is not allowed"),
        (build_legacy_message(1, 5, TS, None, compress(GZIP, b""), GZIP), "no inner records"),
        (build_legacy_message(1, 5, TS, None, compress(GZIP, build_legacy([(0, TS, None, b"a")], magic=1,
                                                                            codec=GZIP)), GZIP),
         "must not be compressed"),
        (build_legacy_message(1, 5, TS, None, compress(GZIP, struct.pack(">qi", 0, 3) + b"x" * 10), GZIP),
         "smaller than the minimum message overhead"),
        (build_legacy_message(1, 1, TS, None, compress(GZIP, inner + build_legacy_message(1, 7, TS, None, b"b")),
                              GZIP), "below its last inner relative offset"),
        (build_legacy_message(1, 5, TS, None, b"\x00\x01\x02", 6), "unknown compression type id 6"),
    ]
    for data, match in cases:
        (e,) = iter_batches(b"\x00" * 0 + data, path="l.log", position_base=300)
        assert e.is_valid()
        with pytest.raises(CorruptRecordError, match=match) as err:
            e.records()
        assert err.value.position is not None and err.value.position >= 300 and err.value.path == "l.log"


def test_legacy_inner_short_read_ends_silently():
    inner = build_legacy_message(1, 0, TS, None, b"a") + build_legacy_message(1, 1, TS, None, b"bbbb")
    wrapper = build_legacy_message(1, 1, TS, None, compress(GZIP, inner[:-3]), GZIP)
    (e,) = iter_batches(wrapper)
    assert [r.value for r in e.records()] == [b"a"]  # DataLogInputStream: a short read ends the sequence


def test_legacy_message_field_overruns():
    msg = bytearray(build_legacy_message(0, 0, -1, b"key", b"value"))
    struct.pack_into(">i", msg, 18, 1000)  # key length past the end
    (e,) = iter_batches(bytes(msg))
    assert not e.is_valid()
    with pytest.raises(CorruptRecordError, match="key length 1000 runs past"):
        e.records()
    v1 = bytearray(build_legacy_message(1, 0, TS, None, b""))
    struct.pack_into(">i", v1, 8, 18)  # a v1 message smaller than its 22-byte overhead
    (e,) = iter_batches(bytes(v1[:30]))
    with pytest.raises(CorruptRecordError, match="v1 message overhead"):
        e.records()
