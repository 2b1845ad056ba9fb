"""Kafka's LZ4 frame (docs/formats.md#compression-codecs): FLG 0x60, BD 0x40, 64 KiB independent blocks, no
checksums on write, including the broken header checksum written and tolerated for magic 0 (KAFKA-3160); on read,
any block size, block checksums and the content checksum read (not verified), as Kafka's ``KafkaLZ4BlockInputStream``.
"""

from __future__ import annotations

import struct

import lz4.block

from kafkalog.storage.codec.bounds import too_big
from kafkalog.storage.codec.native import core
from kafkalog.storage.errors import CompressionError

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_HEADER_V1 = _LZ4_MAGIC + b"\x60\x40\x82"  # magic 1 and 2: correct header checksum
_LZ4_HEADER_V0 = _LZ4_MAGIC + b"\x60\x40\x1a"  # magic 0: KAFKA-3160 checksum over magic + FLG + BD
_LZ4_BLOCK = 64 * 1024
_LZ4_HC: dict[bytes, int] = {}  # frame descriptor -> header checksum byte (a handful of distinct values)
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_U32LE = struct.Struct("<I")


def compress_lz4_frame(data, magic: int, level: int | None) -> bytes:
    mv = memoryview(data)
    parts = [_LZ4_HEADER_V0 if magic == 0 else _LZ4_HEADER_V1]
    hc = level is not None and level != 9
    for i in range(0, len(mv), _LZ4_BLOCK):
        raw = mv[i : i + _LZ4_BLOCK]
        if core is not None:
            block = core.lz4_block(raw, 9 if level is None else level)
        elif hc:
            block = lz4.block.compress(raw, mode="high_compression", compression=level, store_size=False)
        else:
            block = lz4.block.compress(raw, mode="default", store_size=False)
        if len(block) >= len(raw):
            parts.append(_U32LE.pack(len(raw) | 0x80000000))
            parts.append(bytes(raw))
        else:
            parts.append(_U32LE.pack(len(block)))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)


def decompress_lz4_frame(data, magic: int, limit: int) -> bytes:
    mv = memoryview(data)
    end = len(mv)
    if end < 7:
        raise CompressionError("lz4: stream ended prematurely (frame header)", position=0)
    if mv[:4] != _LZ4_MAGIC:
        raise CompressionError("lz4: invalid frame magic", position=0)
    flg = mv[4]
    bd = mv[5]
    if flg & 0x03 or (flg >> 6) != 1 or not flg & 0x20:
        raise CompressionError(f"lz4: unsupported frame descriptor FLG=0x{flg:02x}", position=4)
    if bd & 0x8F or (bd >> 4) & 7 not in _LZ4_BLOCK_SIZES:
        raise CompressionError(f"lz4: unsupported block descriptor BD=0x{bd:02x}", position=5)
    block_max = _LZ4_BLOCK_SIZES[(bd >> 4) & 7]
    pos = 6
    desc_end = 6
    if flg & 0x08:
        pos += 8
        desc_end = pos
    if pos >= end:
        raise CompressionError("lz4: stream ended prematurely (frame header)", position=pos)
    hc = mv[pos]
    if magic != 0:
        desc = bytes(mv[4:desc_end])
        expected = _LZ4_HC.get(desc)
        if expected is None:
            expected = (xxh32(desc) >> 8) & 0xFF
            if len(_LZ4_HC) < 64:  # bounded: hostile input cannot grow it
                _LZ4_HC[desc] = expected
        if hc != expected:
            raise CompressionError("lz4: stream frame descriptor corrupted (header checksum)", position=pos)
    pos += 1
    block_checksum = bool(flg & 0x10)
    out = []
    total = 0
    while True:
        if end - pos < 4:
            raise CompressionError("lz4: stream ended prematurely (missing end mark)", position=pos)
        (word,) = _U32LE.unpack_from(mv, pos)
        pos += 4
        raw = bool(word & 0x80000000)
        size = word & 0x7FFFFFFF
        if size == 0:
            break  # end mark (Lz4BlockInputStream: a zero size with or without the raw bit)
        if size > block_max:
            raise CompressionError(f"lz4: block size {size} exceeds the frame's maximum {block_max}",
                                   position=pos - 4)
        if size > end - pos:
            raise CompressionError("lz4: stream ended prematurely (block)", position=pos)
        block = mv[pos : pos + size]
        pos += size
        if raw:
            chunk = bytes(block)
        else:
            try:
                # LZ4 expands at most ~255x: never allocate more than that for a (hostile) small block
                chunk = lz4.block.decompress(block, uncompressed_size=min(block_max, 255 * size + 64))
            except lz4.block.LZ4BlockError as e:
                raise CompressionError(f"lz4: corrupt block: {e}", position=pos - size) from None
        total += len(chunk)
        if total > limit:
            raise too_big("lz4", limit)
        out.append(chunk)
        if block_checksum:
            if end - pos < 4:
                raise CompressionError("lz4: stream ended prematurely (block checksum)", position=pos)
            if _U32LE.unpack_from(mv, pos)[0] != xxh32(bytes(block)):
                raise CompressionError("lz4: block checksum mismatch", position=pos)
            pos += 4
    if flg & 0x04:  # content checksum: read but not verified, as Kafka
        if end - pos < 4:
            raise CompressionError("lz4: stream ended prematurely (content checksum)", position=pos)
    return b"".join(out)


# xxHash32 for the LZ4 frame header checksum (only ever over a few bytes).
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i + 16 <= n:
            lanes = struct.unpack_from("<4I", data, i)
            v1 = (_rotl((v1 + lanes[0] * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + lanes[1] * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + lanes[2] * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + lanes[3] * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
