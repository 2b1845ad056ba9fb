"""Codec layer: varints, CRCs and Kafka's compression framings, including the quirks and hostile input."""

from __future__ import annotations

import gzip
import struct
import tracemalloc

import cramjam
import lz4.frame
import pytest
import zstandard

from kafkalog.storage.codec import compression as C
from kafkalog.storage.codec.crc import crc32, crc32c
from kafkalog.storage.codec.varint import (
    read_uvarint,
    read_varint,
    read_varlong,
    varint_size,
    varlong_size,
    write_varint,
    write_varlong,
)
from kafkalog.storage.errors import CompressionError, CorruptRecordError

DATA = b"".join(b"kafka record %d " % i for i in range(5000))


def test_crc_check_values():
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32(b"123456789") == 0xCBF43926
    assert crc32c(memoryview(b"xx123456789")[2:]) == 0xE3069283


@pytest.mark.parametrize("value, encoded", [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (64, "8001"),
                                            (-65, "8101"), (7, "0e"), (2**31 - 1, "feffffff0f"),
                                            (-(2**31), "ffffffff0f")])
def test_varint_vectors(value, encoded):
    out = bytearray()
    write_varint(value, out)
    assert out.hex() == encoded and varint_size(value) == len(out)
    assert read_varint(bytes(out), 0) == (value, len(out))


@pytest.mark.parametrize("value", [0, -1, 2**63 - 1, -(2**63), 1_700_000_000_000])
def test_varlong_round_trip(value):
    out = bytearray()
    write_varlong(value, out)
    assert read_varlong(bytes(out), 0) == (value, len(out)) and varlong_size(value) == len(out)


def test_varint_errors_carry_positions():
    with pytest.raises(CorruptRecordError, match="too long") as e:
        read_uvarint(b"\x00\xff\xff\xff\xff\xff", 1)
    assert e.value.position == 1
    with pytest.raises(CorruptRecordError, match="past the end"):
        read_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptRecordError, match="too long"):
        read_varlong(b"\xff" * 11, 0)
    # the 5th byte keeps only its low 4 bits (ByteUtils.readUnsignedVarint)
    assert read_uvarint(b"\xff\xff\xff\xff\x7f", 0) == (0xFFFFFFFF, 5)


@pytest.mark.parametrize("codec", [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD])
@pytest.mark.parametrize("size", [0, 1, 5, 70_000, 300_000])
def test_round_trip(codec, size):
    data = (DATA * 5)[:size]
    for magic in ((0, 1, 2) if codec != C.ZSTD else (2,)):
        assert C.decompress(codec, C.compress(codec, data, magic=magic), magic=magic) == data


def test_gzip_framing_and_multi_member():
    z = C.compress(C.GZIP, DATA)
    assert z[:10] == bytes.fromhex("1f8b08000000000000ff")  # JDK >= 16 GZIPOutputStream header
    assert gzip.decompress(z) == DATA
    two = gzip.compress(b"abc") + gzip.compress(b"def", mtime=0)
    assert C.decompress(C.GZIP, two) == b"abcdef"
    assert C.decompress(C.GZIP, gzip.compress(b"abc") + b"garbage!") == b"abc"  # GZIPInputStream ignores it
    with pytest.raises(CompressionError, match="prematurely"):
        C.decompress(C.GZIP, z[:-12])
    with pytest.raises(CompressionError, match="magic"):
        C.decompress(C.GZIP, b"not gzip")


def test_xerial_snappy_framing_and_raw_fallback():
    x = C.compress(C.SNAPPY, DATA)
    assert x[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    n = struct.unpack_from(">i", x, 16)[0]
    assert cramjam.snappy.decompress_raw(x[20:20 + n]).read() == DATA[:32768]  # 32 KiB input chunks
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert C.decompress(C.SNAPPY, raw) == DATA  # plain block (non-Java producers)
    assert C.decompress(C.SNAPPY, x + x[:16] + x[16:]) == DATA + DATA  # concatenated stream header
    assert C.decompress(C.SNAPPY, x + b"\x00\x01") == DATA  # 1..3 trailing bytes are ignored
    with pytest.raises(CompressionError, match="empty"):
        C.decompress(C.SNAPPY, b"")
    with pytest.raises(CompressionError, match="negative"):
        C.decompress(C.SNAPPY, x[:16] + struct.pack(">i", -5) + b"\x00" * 8)
    with pytest.raises(CompressionError, match="version"):
        C.decompress(C.SNAPPY, b"\x82SNAPPY\x00" + struct.pack(">ii", 0, 1) + x[16:])


def test_lz4_kafka_frame():
    f = C.compress(C.LZ4, DATA)
    assert f[:7] == bytes.fromhex("04224d18604082")
    assert lz4.frame.decompress(f) == DATA  # a standard LZ4 frame for magic 1/2
    v0 = C.compress(C.LZ4, DATA, magic=0)
    assert v0[:7] == bytes.fromhex("04224d1860401a")  # KAFKA-3160 checksum
    assert C.decompress(C.LZ4, v0, magic=0) == DATA  # ignored on read for magic 0
    with pytest.raises(CompressionError, match="descriptor corrupted") as e:
        C.decompress(C.LZ4, v0, magic=1)
    assert e.value.position == 6
    # standard lz4 frames with block checksums / content checksum are read (checksums verified / skipped)
    std = lz4.frame.compress(DATA, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                             block_checksum=True, content_checksum=True)
    assert C.decompress(C.LZ4, std) == DATA
    bad = bytearray(std)
    bad[-12] ^= 1  # inside the last block or its checksum
    with pytest.raises(CompressionError):
        C.decompress(C.LZ4, bytes(bad))
    # an end mark with the "uncompressed" bit set is still an end mark (Lz4BlockInputStream)
    assert C.decompress(C.LZ4, f[:-4] + b"\x00\x00\x00\x80") == DATA
    with pytest.raises(CompressionError, match="end mark"):
        C.decompress(C.LZ4, f[:-4])
    with pytest.raises(CompressionError, match="exceeds"):
        C.decompress(C.LZ4, f[:7] + struct.pack("<I", 70_000) + b"\x00" * 70_000 + b"\x00" * 4)
    with pytest.raises(CompressionError, match="FLG"):
        C.decompress(C.LZ4, f[:4] + b"\x40" + f[5:])  # dependent blocks are unsupported


def test_zstd_frames():
    z = C.compress(C.ZSTD, DATA)
    assert zstandard.ZstdDecompressor().decompress(z, max_output_size=len(DATA)) == DATA
    assert C.decompress(C.ZSTD, z + z) == DATA + DATA  # concatenated frames
    with pytest.raises(CompressionError, match="v0/v1"):
        C.decompress(C.ZSTD, z, magic=1)
    with pytest.raises(CompressionError, match="v0/v1"):
        C.compress(C.ZSTD, DATA, magic=0)
    with pytest.raises(CompressionError):
        C.decompress(C.ZSTD, z[:-3])


@pytest.mark.parametrize("codec", [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD])
def test_decompression_bombs_are_bounded(codec):
    bomb = C.compress(codec, bytes(64 << 20))  # 64 MiB of zeros in a few KiB
    assert len(bomb) < 4 << 20
    tracemalloc.start()
    try:
        with pytest.raises(CompressionError, match="more than") as e:
            C.decompress(codec, bomb, limit=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert e.value.position == 0
    assert peak < 16 << 20, f"{C.CODEC_NAMES[codec]} allocated {peak} bytes for a 1 MiB limit"


def _zstd_frame_declaring(content_size: int, payload: bytes = b"hello") -> bytes:
    """One zstd frame (single segment, 8-byte content size) declaring ``content_size`` bytes, with one raw
    block holding ``payload``."""
    return (b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + content_size.to_bytes(8, "little")
            + ((len(payload) << 3) | 1).to_bytes(3, "little") + payload)


@pytest.mark.parametrize("declared", [
    200 << 20,   # within the default 256 MiB limit, but more than one 128 KiB block can hold
    300 << 20,   # past the default limit
    1 << 49,     # python-zstandard raised MemoryError (atheris, tests/fuzz: decompress)
])
def test_zstd_declared_content_size_is_not_trusted(declared):
    """python-zstandard allocates a frame's declared content size before decoding, ignoring max_output_size:
    a tiny frame declaring a huge size is refused before that allocation (CompressionError, no MemoryError)."""
    frame = _zstd_frame_declaring(declared)
    tracemalloc.start()
    try:
        with pytest.raises(CompressionError):
            C.decompress(C.ZSTD, frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"allocated {peak} bytes for a {len(frame)}-byte frame"
    # the input atheris found: two frame magics, the first declaring ~5.6e14 bytes
    fuzzed = bytes.fromhex("28b52ffdd40bdc28b52ffd0000025b4855ffffffff00")
    with pytest.raises(CompressionError):
        C.decompress(C.ZSTD, fuzzed, limit=1 << 20)
    assert C.decompress(C.ZSTD, _zstd_frame_declaring(5)) == b"hello"  # an honest size still decodes


def test_unknown_codec():
    with pytest.raises(CompressionError, match="unknown compression type id 6"):
        C.decompress(6, b"x")
    with pytest.raises(CompressionError):
        C.codec_name(7)


def test_zstd_decompression_is_safe_from_many_threads():
    """The engines decode partitions in worker threads; a python-zstandard decompressor must not be shared
    between threads (a shared one corrupted the heap: ``munmap_chunk(): invalid pointer`` under ``convert``).
    Each thread gets its own, and concurrent decoding gives every payload back intact (in a child process, so
    a crash fails this test rather than the run)."""
    import subprocess
    import sys
    import threading

    from kafkalog.storage.codec import zstd_frame

    seen = []
    t = threading.Thread(target=lambda: seen.append(zstd_frame.decompressor()))
    t.start()
    t.join()
    assert seen[0] is not zstd_frame.decompressor()
    code = """
import os, threading
from kafkalog.storage.codec.compression import compress, decompress
payloads = [os.urandom(50) * (i % 97 + 1) + bytes(i) for i in range(400)]
frames = [compress(4, p) for p in payloads]
bad = []
def work(k):
    for _ in range(20):
        for i in range(k, len(frames), 8):
            if decompress(4, frames[i]) != payloads[i]:
                bad.append(i)
ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
print(len(bad))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "0", (r.returncode, r.stderr[-2000:])
