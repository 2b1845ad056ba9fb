"""Kafka's varints: unsigned LEB128 (uvarint) and zig-zag varint/varlong (docs/formats.md#varints-and-primitive-types; Kafka's ``ByteUtils``).

Decoders take a buffer and a position and return ``(value, new_position)``; they never read past ``end`` and
raise :class:`CorruptRecordError` on truncation or an over-long encoding, with the byte position.
"""

from __future__ import annotations

from kafkalog.storage.errors import CorruptRecordError


def _read_unsigned(buf, pos: int, end: int | None, max_bytes: int, mask: int, name: str) -> tuple[int, int]:
    """An unsigned LEB128 of at most ``max_bytes`` bytes, as ``ByteUtils.readUnsignedVarint``/``Varlong`` read it:
    a continuation bit on the last allowed byte is an over-long encoding; the value is cut to ``mask``."""
    if end is None:
        end = len(buf)
    value = 0
    shift = 0
    start = pos
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError(f"{name} runs past the end of the buffer", position=start)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value & mask, pos
        shift += 7
    raise CorruptRecordError(f"{name} is too long (more than {max_bytes} bytes)", position=start)


def read_uvarint(buf, pos: int, end: int | None = None) -> tuple[int, int]:
    """Unsigned varint of at most 5 bytes (an int32), as ``ByteUtils.readUnsignedVarint``."""
    return _read_unsigned(buf, pos, end, 5, 0xFFFFFFFF, "varint")


def read_varint(buf, pos: int, end: int | None = None) -> tuple[int, int]:
    """Zig-zag int32 varint."""
    u, pos = read_uvarint(buf, pos, end)
    v = (u >> 1) ^ -(u & 1)
    return v, pos


def read_uvarlong(buf, pos: int, end: int | None = None) -> tuple[int, int]:
    """Unsigned varlong of at most 10 bytes (an int64), as ``ByteUtils.readUnsignedVarlong``."""
    return _read_unsigned(buf, pos, end, 10, 0xFFFFFFFFFFFFFFFF, "varlong")


def read_varlong(buf, pos: int, end: int | None = None) -> tuple[int, int]:
    """Zig-zag int64 varlong."""
    u, pos = read_uvarlong(buf, pos, end)
    v = (u >> 1) ^ -(u & 1)
    return v, pos


def _write_unsigned(value: int, out: bytearray) -> None:
    """``value`` (already cut to its width) as an unsigned LEB128."""
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_uvarint(value: int, out: bytearray) -> None:
    _write_unsigned(value & 0xFFFFFFFF, out)


def write_varint(value: int, out: bytearray) -> None:
    _write_unsigned(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF, out)


def write_uvarlong(value: int, out: bytearray) -> None:
    _write_unsigned(value & 0xFFFFFFFFFFFFFFFF, out)


def write_varlong(value: int, out: bytearray) -> None:
    _write_unsigned(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF, out)


def _unsigned_size(u: int) -> int:
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


def varint_size(value: int) -> int:
    return _unsigned_size(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def varlong_size(value: int) -> int:
    return _unsigned_size(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)
