"""A tiny schema-driven reader/writer for Kafka's generated message format (``*.json`` message specs).

Record payloads of Kafka's internal topics are "generated messages": a struct of fields, each present in a
range of versions. Non-flexible versions use int16-length strings, int32-length bytes and int32-count arrays
(-1 = null); flexible versions use compact forms (uvarint length+1, 0 = null) and end every struct with a
tagged-field section (uvarint count, then per field uvarint tag, uvarint size, data). Tagged fields are
written only when they differ from their default.

Schemas are *data*: :class:`Message` / :class:`Field` trees transcribed from the JSON specs (see
``offsets_schemas.py``, ``metadata_schemas.py``, ...). One generic reader, writer and JSON converter walk them:

* :meth:`Message.read` -> ``(dict, end_position)``; values are Python natives (``int``, ``bool``, ``float``,
  ``str``, ``bytes``, ``uuid.UUID``, ``None``, lists, nested dicts). Keys are Kafka's camelCase field names in
  schema order; tagged fields absent from the bytes get their default; unknown tagged fields are kept as
  ``"_unknownTaggedFields": [(tag, bytes), ...]``.
* :meth:`Message.write` -> bytes (for tests and tools that build payloads).
* :meth:`Message.to_json` -> what Kafka's generated ``*JsonConverter.write`` produces (tagged fields only when
  non-default, bytes as base64, UUIDs in Kafka's base64url form).

Like Kafka's generated code, reading never checks the version against ``validVersions`` (a version above the
highest known reads with the "N+" fields of the highest one); callers decide. Every length and count is
checked against the bytes that remain before anything is allocated, and every failure is a
:class:`CorruptRecordError` with the byte position.
"""

from __future__ import annotations

import struct as _st
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

from kafkalog.storage.codec.varint import read_uvarint, write_uvarint
from kafkalog.storage.decoders.common import ZERO_UUID, b64, to_int16, to_int32, uuid_to_kafka_str
from kafkalog.storage.errors import CorruptRecordError

__all__ = ["NO_VERSIONS", "Field", "Message", "Struct", "Versions"]

MAX_VERSION = 0x7FFF
_UNSET: Any = object()

_FIXED: dict[str, _st.Struct] = {
    "int8": _st.Struct(">b"),
    "int16": _st.Struct(">h"),
    "uint16": _st.Struct(">H"),
    "int32": _st.Struct(">i"),
    "uint32": _st.Struct(">I"),
    "int64": _st.Struct(">q"),
    "float64": _st.Struct(">d"),
}
PRIMITIVES = frozenset(_FIXED) | {"bool", "uuid"}
VARLEN = frozenset({"string", "bytes"})


class Versions:
    """An inclusive version range; ``Versions.parse("3+")``, ``"0-4"``, ``"1"``, ``"none"``."""

    __slots__ = ("hi", "lo")

    def __init__(self, lo: int, hi: int):
        self.lo = lo
        self.hi = hi

    @staticmethod
    def parse(spec: str | None) -> Versions:
        if spec is None or spec == "none" or spec == "":
            return NO_VERSIONS
        if spec.endswith("+"):
            return Versions(int(spec[:-1]), MAX_VERSION)
        if "-" in spec:
            lo, hi = spec.split("-", 1)
            return Versions(int(lo), int(hi))
        return Versions(int(spec), int(spec))

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    def intersect(self, other: Versions) -> Versions:
        return Versions(max(self.lo, other.lo), min(self.hi, other.hi))

    def member(self, v: int, possible: Versions) -> bool:
        """Whether generated code treats version ``v`` as in this range when it was generated for the
        ``possible`` versions (``VersionConditional``): inside ``possible`` this is plain membership; outside
        it (versions a reader does not know), bounds that cover all of ``possible`` are not checked."""
        c, p = self, possible
        if c.lo > c.hi or p.lo > p.hi:
            return False
        if p.lo < c.lo:
            if p.hi > c.hi:
                return c.lo <= v <= c.hi
            if p.hi >= c.lo:
                return v >= c.lo
            return False
        if p.hi >= c.lo and p.lo <= c.hi:
            return v <= c.hi if p.hi > c.hi else True
        return False

    def __repr__(self) -> str:
        if self.lo > self.hi:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return f"{self.lo}" if self.lo == self.hi else f"{self.lo}-{self.hi}"


NO_VERSIONS = Versions(1, 0)


def _lower_first(name: str) -> str:
    return name[:1].lower() + name[1:]


class Field:
    """One field of a message spec. ``type`` is as in the JSON: ``int32``, ``string``, ``[]int32``,
    ``[]SomeStruct`` or ``SomeStruct`` (struct types need ``fields``). ``default=None`` means ``"null"``."""

    __slots__ = ("_default", "common", "elem", "fields", "key", "kind", "name", "nullable", "struct", "tag",
                 "tagged", "versions")

    def __init__(self, name: str, type: str, versions: str, *, nullable: str | None = None,
                 tagged: str | None = None, tag: int | None = None, default: Any = _UNSET,
                 fields: Sequence[Field] | None = None, common: str | None = None):
        """``common``: the struct is one of the spec's ``commonStructs`` with these versions (Kafka generates
        those classes for their own versions, so they never reject a version; inline structs do)."""
        self.name = name
        self.key = _lower_first(name)
        self.versions = Versions.parse(versions)
        self.nullable = Versions.parse(nullable)
        self.tagged = Versions.parse(tagged)
        self.tag = tag
        if (tag is None) != (tagged is None):
            raise ValueError(f"field {name}: tag and tagged versions go together")
        self.elem: str | None = None
        base = type[2:] if type.startswith("[]") else type
        is_struct = base not in PRIMITIVES and base not in VARLEN
        if type.startswith("[]"):
            self.kind = "array"
            self.elem = "struct" if is_struct else base
        else:
            self.kind = "struct" if is_struct else base
        if is_struct and fields is None:
            raise ValueError(f"field {name}: struct type {base} needs fields")
        self.struct = Struct(base, fields) if is_struct and fields is not None else None
        self.common = Versions.parse(common) if common is not None else None
        self.fields = self.struct.fields if self.struct else ()
        self._default = self._compute_default(default)

    def _compute_default(self, default: Any) -> Any:
        if default is not _UNSET:
            return default
        k = self.kind
        if k == "bool":
            return False
        if k == "uuid":
            return ZERO_UUID
        if k == "float64":
            return 0.0
        if k in _FIXED:
            return 0
        if k == "string":
            return ""
        if k == "bytes":
            return b""
        if k == "array":
            return ()
        return _UNSET  # struct: a default-constructed struct, computed per version

    def default(self, ctx: _Ctx, possible: Versions) -> Any:
        d = self._default
        if d is _UNSET:
            assert self.struct is not None
            return self.struct.defaults(ctx, self.common or possible.intersect(self.versions))
        return list(d) if isinstance(d, tuple) else d

    def is_default(self, value: Any, ctx: _Ctx, possible: Versions) -> bool:
        d = self.default(ctx, possible)
        if isinstance(d, list):
            return isinstance(value, tuple | list) and list(value) == d
        if d is None or value is None or isinstance(d, bool) or isinstance(value, bool):
            return value is d
        return bool(value == d)


class _Ctx:
    """What a read/write/JSON walk needs besides the data: the version and the message's flexible versions."""

    __slots__ = ("flex", "version")

    def __init__(self, version: int, flex: Versions):
        self.version = version
        self.flex = flex


class _Entry:
    __slots__ = ("f", "fixed", "nested", "nested_ok", "nullable", "possible", "tagged")

    def __init__(self, f: Field, tagged: bool, nullable: bool, possible: Versions, version: int,
                 enclosing: Versions):
        self.f = f
        self.tagged = tagged
        self.nullable = nullable
        self.possible = possible  # versions the field's generated code was made for
        self.fixed = _FIXED.get(f.kind)  # fast path for int/float fields
        # a nested struct's class: the versions it was generated for, and whether its read() accepts ``version``
        self.nested = f.common if f.common is not None else possible
        self.nested_ok = f.common is not None or enclosing.member(version, f.versions)


class _Plan:
    __slots__ = ("fields", "flexible", "tagged", "tagged_sorted")

    def __init__(self, fields: list[_Entry], flexible: bool):
        self.fields = fields
        self.flexible = flexible
        self.tagged = {e.f.tag: e for e in fields if e.tagged}
        self.tagged_sorted = sorted(self.tagged.values(), key=lambda e: cast(int, e.f.tag))  # tagged: tag set


class Struct:
    __slots__ = ("_plans", "all_tags", "fields", "name")

    def __init__(self, name: str, fields: Sequence[Field]):
        self.name = name
        self.fields = tuple(fields)
        self._plans: dict[tuple[int, int, int, int, int], _Plan] = {}
        seen: set[int] = set()
        for f in self.fields:
            if f.tag is not None:
                if f.tag in seen:
                    raise ValueError(f"struct {name}: duplicate tag {f.tag}")
                seen.add(f.tag)
        self.all_tags = frozenset(seen)

    def plan(self, ctx: _Ctx, possible: Versions) -> _Plan:
        """Fields present at ``ctx.version`` for code generated for the ``possible`` versions."""
        v = ctx.version
        key = (v, ctx.flex.lo, ctx.flex.hi, possible.lo, possible.hi)
        p = self._plans.get(key)
        if p is None:
            flexible = ctx.flex.member(v, possible)
            chosen = []
            for f in self.fields:
                if not f.versions.member(v, possible):
                    continue
                present = possible.intersect(f.versions)
                tagged = f.tagged.member(v, present)
                if tagged and not flexible:
                    continue
                chosen.append(_Entry(f, tagged, f.nullable.member(v, present), present, v, possible))
            p = _Plan(chosen, flexible)
            if possible.lo <= v <= possible.hi:  # unknown versions (rare, or fuzz) are not cached
                self._plans[key] = p
        return p

    def defaults(self, ctx: _Ctx, possible: Versions) -> dict[str, Any]:
        return {e.f.key: e.f.default(ctx, e.possible) for e in self.plan(ctx, possible).fields}


class Message:
    """A top-level message spec (one JSON file)."""

    __slots__ = ("api_key", "flexible", "name", "struct", "valid")

    def __init__(self, name: str, valid: str, flexible: str, fields: Sequence[Field], api_key: int | None = None):
        self.name = name
        self.valid = Versions.parse(valid)
        self.flexible = Versions.parse(flexible)
        self.struct = Struct(name, fields)
        self.api_key = api_key

    def __repr__(self) -> str:
        return f"Message({self.name}, valid={self.valid!r}, flexible={self.flexible!r})"

    def read(self, buf: bytes | bytearray | memoryview, version: int, pos: int = 0,
             end: int | None = None) -> tuple[dict[str, Any], int]:
        """Decode one message at ``buf[pos:end]``; returns the fields and the position after them."""
        if end is None:
            end = len(buf)
        r = _Reader(buf, pos, end)
        out = _read_struct(r, self.struct, _Ctx(version, self.flexible), self.valid)
        return out, r.p

    def write(self, data: Mapping[str, Any], version: int) -> bytes:
        out = bytearray()
        _write_struct(out, self.struct, data, _Ctx(version, self.flexible), self.valid)
        return bytes(out)

    def to_json(self, data: Mapping[str, Any], version: int) -> dict[str, Any]:
        return _json_struct(self.struct, data, _Ctx(version, self.flexible), self.valid)

    def defaults(self, version: int) -> dict[str, Any]:
        return self.struct.defaults(_Ctx(version, self.flexible), self.valid)

    def context(self, version: int) -> _Ctx:
        """The walk context for ``version`` (use with ``self.struct.plan(ctx, self.valid)``)."""
        return _Ctx(version, self.flexible)

    def is_flexible(self, version: int) -> bool:
        return self.flexible.member(version, self.valid)


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


# ---------------------------------------------------------------------------------------------- writing


def _write_length(out: bytearray, n: int, compact: bool, wide: bool) -> None:
    if compact:
        write_uvarint(n + 1, out)
    else:
        out += _FIXED["int32" if wide else "int16"].pack(n)


def _write_fixed(out: bytearray, kind: str, v: Any) -> None:
    if kind == "bool":
        out.append(1 if v else 0)
    elif kind == "uuid":
        out += (v if isinstance(v, uuid.UUID) else uuid.UUID(bytes=bytes(v))).bytes
    else:
        out += _FIXED[kind].pack(v)


def _write_varlen(out: bytearray, kind: str, v: Any, compact: bool) -> None:
    if v is None:
        _write_length(out, -1, compact, kind != "string")
        return
    raw = v.encode("utf-8") if kind == "string" else bytes(v)
    if kind == "string" and len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes is too long")
    _write_length(out, len(raw), compact, kind != "string")
    out += raw


def _not_nullable(e: _Entry, ctx: _Ctx) -> ValueError:
    return ValueError(f"field {e.f.key} is not nullable in version {ctx.version}")


def _write_field(out: bytearray, e: _Entry, v: Any, ctx: _Ctx, flexible: bool, tagged: bool) -> None:
    f = e.f
    kind = f.kind
    compact = flexible or tagged
    if kind in PRIMITIVES:
        _write_fixed(out, kind, v)
    elif kind in VARLEN:
        if v is None and not e.nullable:
            raise _not_nullable(e, ctx)
        _write_varlen(out, kind, v, compact)
    elif kind == "struct":
        assert f.struct is not None
        if e.nullable:
            if tagged:
                write_uvarint(0 if v is None else 1, out)
            else:
                out.append(0xFF if v is None else 1)
            if v is None:
                return
        elif v is None:
            raise _not_nullable(e, ctx)
        _write_struct(out, f.struct, v, ctx, e.nested)
    else:
        if v is None:
            if not e.nullable:
                raise _not_nullable(e, ctx)
            _write_length(out, -1, compact, True)
            return
        _write_length(out, len(v), compact, True)
        elem = f.elem
        for x in v:
            if elem in PRIMITIVES:
                assert elem is not None
                _write_fixed(out, elem, x)
            elif elem in VARLEN:
                assert elem is not None
                _write_varlen(out, elem, x, compact)
            else:
                assert f.struct is not None
                _write_struct(out, f.struct, x, ctx, e.nested)


def _write_struct(out: bytearray, st: Struct, data: Mapping[str, Any], ctx: _Ctx, possible: Versions) -> None:
    plan = st.plan(ctx, possible)
    for e in plan.fields:
        if not e.tagged:
            v = data[e.f.key] if e.f.key in data else e.f.default(ctx, e.possible)
            _write_field(out, e, v, ctx, plan.flexible, False)
    if not plan.flexible:
        return
    items: list[tuple[int, bytes]] = []
    for e in plan.tagged_sorted:
        if e.f.key not in data:
            continue
        v = data[e.f.key]
        if e.f.is_default(v, ctx, e.possible):
            continue
        payload = bytearray()
        _write_field(payload, e, v, ctx, True, True)
        assert e.f.tag is not None
        items.append((e.f.tag, bytes(payload)))
    items.extend((int(t), bytes(b)) for t, b in data.get("_unknownTaggedFields", ()))
    items.sort(key=lambda it: it[0])
    write_uvarint(len(items), out)
    for tag, tag_payload in items:
        write_uvarint(tag, out)
        write_uvarint(len(tag_payload), out)
        out += tag_payload


# ---------------------------------------------------------------------------------------------- JSON


def _json_scalar(kind: str, v: Any) -> Any:
    if v is None:
        return None
    if kind == "uuid":
        return uuid_to_kafka_str(v)
    if kind == "bytes":
        return b64(v)
    if kind == "int16":
        return to_int16(v)
    return v


def _json_value(e: _Entry, v: Any, ctx: _Ctx) -> Any:
    f = e.f
    if v is None:
        return None
    if f.kind == "struct":
        assert f.struct is not None
        return _json_struct(f.struct, v, ctx, e.nested)
    if f.kind == "array":
        if f.elem == "struct":
            assert f.struct is not None
            return [_json_struct(f.struct, x, ctx, e.nested) for x in v]
        assert f.elem is not None
        return [_json_scalar(f.elem, x) for x in v]
    return _json_scalar(f.kind, v)


def _json_struct(st: Struct, data: Mapping[str, Any], ctx: _Ctx, possible: Versions) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for e in st.plan(ctx, possible).fields:
        v = data[e.f.key] if e.f.key in data else e.f.default(ctx, e.possible)
        if e.tagged and e.f.is_default(v, ctx, e.possible):
            continue
        out[e.f.key] = _json_value(e, v, ctx)
    return out
