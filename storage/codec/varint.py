"""Kafka's varints: unsigned LEB128 (uvarint) and zig-zag varint/varlong (docs/formats.md#varints-and-primitive-types; Kafka's ``ByteUtils``).

Decoders take a buffer and a position and return ``(value, new_position)``; they never read past ``end`` and
raise :class:`CorruptRecordError` on truncation or an over-long encoding, with the byte position.
"""

from __future__ import annotations

from kafkalog.storage.errors import CorruptRecordError


def read_uvarint(buf, pos: int, end: int | None = None) -> tuple[int, int]:
    """Unsigned varint of at most 5 bytes (an int32), as ``ByteUtils.readUnsignedVarint``."""
    if end is None:
        end = len(buf)
    value = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise CorruptRecordError("varint runs past the end of the buffer", position=start)
        b = buf[pos]
        pos += 1
        if shift == 28:
            if b & 0x80:
                raise CorruptRecordError("varint is too long (more than 5 bytes)", position=start)
            value |= (b & 0x0F) << 28
            return value, pos
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def read_varint(buf, pos: int, end: int | None = None) -> tuple[int, int]:
    """Zig-zag int32 varint."""
    u, pos = read_uvarint(buf, pos, end)
    v = (u >> 1) ^ -(u & 1)
    return v, pos


def read_uvarlong(buf, pos: int, end: int | None = None) -> tuple[int, int]:
    if end is None:
        end = len(buf)
    value = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise CorruptRecordError("varlong runs past the end of the buffer", position=start)
        if shift > 63:
            raise CorruptRecordError("varlong is too long (more than 10 bytes)", position=start)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7


def read_varlong(buf, pos: int, end: int | None = None) -> tuple[int, int]:
    """Zig-zag int64 varlong."""
    u, pos = read_uvarlong(buf, pos, end)
    v = (u >> 1) ^ -(u & 1)
    return v, pos


def write_uvarint(value: int, out: bytearray) -> None:
    value &= 0xFFFFFFFF
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(value: int, out: bytearray) -> None:
    write_uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF, out)


def write_uvarlong(value: int, out: bytearray) -> None:
    value &= 0xFFFFFFFFFFFFFFFF
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varlong(value: int, out: bytearray) -> None:
    write_uvarlong(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF, out)


def varint_size(value: int) -> int:
    u = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


def varlong_size(value: int) -> int:
    u = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n
