"""Reading a generated message (Kafka's ``Readable``): the fields of a :class:`~.spec.Struct` at one version,
every length and count checked against the bytes that remain, every failure a
:class:`~kafkalog.storage.errors.CorruptRecordError` with the byte position."""

from __future__ import annotations

import uuid
from typing import Any

from kafkalog.storage.codec.varint import read_uvarint
from kafkalog.storage.decoders.common import to_int32
from kafkalog.storage.decoders.spec import _FIXED, PRIMITIVES, VARLEN, Struct, Versions, _Ctx, _Entry, _Plan
from kafkalog.storage.errors import CorruptRecordError

# ---------------------------------------------------------------------------------------------- reading


class _Reader:
    __slots__ = ("b", "e", "p")

    def __init__(self, b: bytes | bytearray | memoryview, p: int, e: int):
        self.b = b
        self.p = p
        self.e = e

    def need(self, n: int, what: str) -> None:
        if n > self.e - self.p:
            raise _kafka_error(f"{what}: needs {n} byte(s), only {self.e - self.p} remain", self.p, "null")

    def uvarint(self) -> int:
        """``ByteUtils.readUnsignedVarint`` (:func:`~kafkalog.storage.codec.varint.read_uvarint`): at most 5
        bytes, the 5th contributes ``(signed byte) << 28``."""
        b, p, e = self.b, self.p, self.e
        if p < e and b[p] < 0x80:
            self.p = p + 1
            return b[p]
        try:
            v, self.p = read_uvarint(b, p, e)
        except CorruptRecordError:
            raise _uvarint_error(b, p, e) from None
        return v


def _uvarint_error(b: bytes | bytearray | memoryview, start: int, end: int) -> CorruptRecordError:
    """The error for the bad unsigned varint at ``start``, with Kafka's message for the same bytes."""
    if end - start < 5 or any(b[i] < 0x80 for i in range(start, start + 4)):
        return _kafka_error("varint runs past the end", start, "null")
    result = 0
    for i in range(4):
        result |= (b[start + i] & 0x7F) << (7 * i)
    result = (result | ((b[start + 4] - 256) << 28)) & 0xFFFFFFFF
    return _kafka_error("varint is longer than 5 bytes", start, "Varint is too long, the most significant "
                        f"bit in the 5th byte is set, converted value: {result:x}")


def _kafka_error(reason: str, position: int, kafka_reason: str | None = None) -> CorruptRecordError:
    """A CorruptRecordError; ``kafka_reason`` is the message Kafka's reader gives for the same bytes when it
    differs (``null`` for a buffer underflow), which the DumpLogSegments-like formatters print."""
    e = CorruptRecordError(reason, position=position)
    e.kafka_reason = kafka_reason if kafka_reason is not None else reason  # type: ignore[attr-defined]
    return e


def kafka_reason(e: CorruptRecordError) -> str:
    """The message Kafka's generated code would give for the error ``e`` (falls back to ``e.reason``)."""
    return getattr(e, "kafka_reason", e.reason)


def _read_fixed(r: _Reader, kind: str, name: str) -> Any:
    if kind == "bool":
        r.need(1, name)
        v: Any = r.b[r.p] != 0
        r.p += 1
        return v
    if kind == "uuid":
        r.need(16, name)
        v = uuid.UUID(bytes=bytes(r.b[r.p:r.p + 16]))
        r.p += 16
        return v
    s = _FIXED[kind]
    r.need(s.size, name)
    v = s.unpack_from(r.b, r.p)[0]
    r.p += s.size
    return v


def _read_length(r: _Reader, compact: bool, wide: bool) -> int:
    if compact:
        return to_int32(to_int32(r.uvarint()) - 1)
    if wide:
        return _read_fixed(r, "int32", "length")
    return _read_fixed(r, "int16", "length")


def _null(e: _Entry, start: int) -> None:
    if not e.nullable:
        raise CorruptRecordError(f"non-nullable field {e.f.key} was serialized as null", position=start)
    return None


def _take(r: _Reader, n: int, start: int) -> bytes:
    """The next ``n`` bytes (a string's, a byte array's, an unknown tagged field's), with Kafka's error when
    fewer remain (``start``: where the length began)."""
    if n > r.e - r.p:
        raise _kafka_error(f"Error reading byte array of {n} byte(s): only {r.e - r.p} byte(s) available", start)
    v = bytes(r.b[r.p:r.p + n])
    r.p += n
    return v


def _read_string(r: _Reader, name: str, compact: bool) -> str | None:
    start = r.p
    n = _read_length(r, compact, False)
    if n < 0:
        return None
    if n > 0x7FFF:
        raise CorruptRecordError(f"string field {name} had invalid length {n}", position=start)
    return _take(r, n, start).decode("utf-8", "replace")


def _read_bytes(r: _Reader, name: str, compact: bool) -> bytes | None:
    start = r.p
    n = _read_length(r, compact, True)
    return None if n < 0 else _take(r, n, start)


def _read_field(r: _Reader, e: _Entry, ctx: _Ctx, flexible: bool, tagged: bool) -> Any:
    fixed = e.fixed
    if fixed is not None:
        p = r.p
        if p + fixed.size > r.e:
            r.need(fixed.size, e.f.key)
        r.p = p + fixed.size
        return fixed.unpack_from(r.b, p)[0]
    f = e.f
    kind = f.kind
    if kind in PRIMITIVES:
        return _read_fixed(r, kind, f.key)
    compact = flexible or tagged  # tagged fields always use the compact encodings
    start = r.p
    if kind == "string":
        text = _read_string(r, f.key, compact)
        return _null(e, start) if text is None else text
    if kind == "bytes":
        raw = _read_bytes(r, f.key, compact)
        return _null(e, start) if raw is None else raw
    if kind == "struct":
        assert f.struct is not None
        if e.nullable:
            if tagged:
                if to_int32(r.uvarint()) <= 0:
                    return None
            elif _read_fixed(r, "int8", f.key) < 0:
                return None
        return _read_nested(r, e, ctx)
    # array
    n = _read_length(r, compact, True)
    if n < 0:
        return _null(e, start)
    if n > r.e - r.p:
        raise CorruptRecordError(f"Tried to allocate a collection of size {n}, but there are only "
                                 f"{r.e - r.p} bytes remaining.", position=start)
    elem = f.elem
    if elem in PRIMITIVES:
        assert elem is not None
        if elem in _FIXED:
            s = _FIXED[elem]
            r.need(n * s.size, f.key)
            vals = [x[0] for x in s.iter_unpack(bytes(r.b[r.p:r.p + n * s.size]))]
            r.p += n * s.size
            return vals
        return [_read_fixed(r, elem, f.key) for _ in range(n)]
    if elem in VARLEN:
        read = _read_string if elem == "string" else _read_bytes
        out: list[Any] = []
        for _ in range(n):
            s0 = r.p
            item = read(r, f.key + " element", compact)
            if item is None:
                raise CorruptRecordError(f"non-nullable field {f.key} element was serialized as null", position=s0)
            out.append(item)
        return out
    return [_read_nested(r, e, ctx) for _ in range(n)]


def _read_nested(r: _Reader, e: _Entry, ctx: _Ctx) -> dict[str, Any]:
    assert e.f.struct is not None
    if not e.nested_ok:
        raise CorruptRecordError(f"Can't read version {ctx.version} of {e.f.struct.name}", position=r.p)
    return _read_struct(r, e.f.struct, ctx, e.nested)


def _read_struct(r: _Reader, st: Struct, ctx: _Ctx, possible: Versions) -> dict[str, Any]:
    plan = st.plan(ctx, possible)
    out: dict[str, Any] = {}
    for e in plan.fields:
        out[e.f.key] = e.f.default(ctx, e.possible) if e.tagged else _read_field(r, e, ctx, plan.flexible, False)
    if plan.flexible:
        _read_tagged(r, st, plan, ctx, out)
    return out


def _read_tagged(r: _Reader, st: Struct, plan: _Plan, ctx: _Ctx, out: dict[str, Any]) -> None:
    """As Kafka's generated ``read``: known tags are read in place (their size is not checked), unknown ones
    are kept as raw bytes of the given size."""
    count = to_int32(r.uvarint())
    unknown: list[tuple[int, bytes]] = []
    for _ in range(count):  # each pass consumes >= 2 bytes or raises, so this is bounded by the buffer
        tpos = r.p
        tag = to_int32(r.uvarint())
        size = to_int32(r.uvarint())
        e = plan.tagged.get(tag)
        if e is not None:
            out[e.f.key] = _read_field(r, e, ctx, True, True)
            continue
        if tag in st.all_tags:
            raise CorruptRecordError(f"Tag {tag} is not valid for version {ctx.version}", position=tpos)
        if size < 0:
            raise _kafka_error(f"negative size {size} of tagged field {tag}", tpos, str(size))
        unknown.append((tag, _take(r, size, tpos)))
    if unknown:
        out["_unknownTaggedFields"] = unknown
