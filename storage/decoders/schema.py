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
from typing import Any

from ..codec.varint import read_uvarint, write_uvarint
from ..errors import CorruptRecordError
from .common import ZERO_UUID, b64, to_int16, to_int32, uuid_to_kafka_str

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

    __slots__ = ("_default", "elem", "fields", "key", "kind", "name", "nullable", "struct", "tag", "tagged",
                 "versions")

    def __init__(self, name: str, type: str, versions: str, *, nullable: str | None = None,
                 tagged: str | None = None, tag: int | None = None, default: Any = _UNSET,
                 fields: Sequence[Field] | None = None):
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

    def default(self, version: int, flexible: bool) -> Any:
        d = self._default
        if d is _UNSET:
            assert self.struct is not None
            return self.struct.defaults(version, flexible)
        return list(d) if isinstance(d, tuple) else d

    def is_default(self, value: Any, version: int, flexible: bool) -> bool:
        d = self.default(version, flexible)
        if isinstance(d, list):
            return isinstance(value, tuple | list) and list(value) == d
        if d is None or value is None or isinstance(d, bool) or isinstance(value, bool):
            return value is d
        return bool(value == d)


class _Plan:
    __slots__ = ("fields", "tagged", "tagged_sorted")

    def __init__(self, fields: list[tuple[Field, bool]]):
        self.fields = fields
        self.tagged = {f.tag: f for f, t in fields if t}
        self.tagged_sorted = sorted(self.tagged.values(), key=lambda f: f.tag)


class Struct:
    __slots__ = ("_plans", "all_tags", "fields", "name")

    def __init__(self, name: str, fields: Sequence[Field]):
        self.name = name
        self.fields = tuple(fields)
        self._plans: dict[tuple[int, bool], _Plan] = {}
        seen: set[int] = set()
        for f in self.fields:
            if f.tag is not None:
                if f.tag in seen:
                    raise ValueError(f"struct {name}: duplicate tag {f.tag}")
                seen.add(f.tag)
        self.all_tags = frozenset(seen)

    def plan(self, version: int, flexible: bool) -> _Plan:
        p = self._plans.get((version, flexible))
        if p is None:
            chosen = []
            for f in self.fields:
                if version not in f.versions:
                    continue
                is_tagged = version in f.tagged
                if is_tagged and not flexible:
                    continue
                chosen.append((f, is_tagged))
            p = self._plans[(version, flexible)] = _Plan(chosen)
        return p

    def defaults(self, version: int, flexible: bool) -> dict[str, Any]:
        return {f.key: f.default(version, flexible) for f, _ in self.plan(version, flexible).fields}


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
        out = _read_struct(r, self.struct, version, version in self.flexible)
        return out, r.p

    def write(self, data: Mapping[str, Any], version: int) -> bytes:
        out = bytearray()
        _write_struct(out, self.struct, data, version, version in self.flexible)
        return bytes(out)

    def to_json(self, data: Mapping[str, Any], version: int) -> dict[str, Any]:
        return _json_struct(self.struct, data, version, version in self.flexible)

    def defaults(self, version: int) -> dict[str, Any]:
        return self.struct.defaults(version, version in self.flexible)


# ---------------------------------------------------------------------------------------------- reading


class _Reader:
    __slots__ = ("b", "e", "p")

    def __init__(self, b: bytes | bytearray | memoryview, p: int, e: int):
        self.b = b
        self.p = p
        self.e = e

    def need(self, n: int, what: str) -> None:
        if n > self.e - self.p:
            raise CorruptRecordError(f"{what}: needs {n} byte(s), only {self.e - self.p} remain", position=self.p)

    def uvarint(self) -> int:
        v, self.p = read_uvarint(self.b, self.p, self.e)
        return v


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


def _null(r: _Reader, f: Field, version: int, start: int) -> None:
    if version not in f.nullable:
        raise CorruptRecordError(f"non-nullable field {f.key} was serialized as null", position=start)
    return None


def _read_string(r: _Reader, name: str, compact: bool) -> str | None:
    start = r.p
    n = _read_length(r, compact, False)
    if n < 0:
        return None
    if n > 0x7FFF:
        raise CorruptRecordError(f"string field {name} had invalid length {n}", position=start)
    r.need(n, f"string field {name}")
    s = bytes(r.b[r.p:r.p + n]).decode("utf-8", "replace")
    r.p += n
    return s


def _read_bytes(r: _Reader, name: str, compact: bool) -> bytes | None:
    start = r.p
    n = _read_length(r, compact, True)
    if n < 0:
        return None
    if n > r.e - r.p:
        raise CorruptRecordError(f"Error reading byte array of {n} byte(s): only {r.e - r.p} byte(s) available",
                                 position=start)
    v = bytes(r.b[r.p:r.p + n])
    r.p += n
    return v


def _read_field(r: _Reader, f: Field, version: int, flexible: bool, tagged: bool) -> Any:
    kind = f.kind
    if kind in PRIMITIVES:
        return _read_fixed(r, kind, f.key)
    compact = flexible or tagged
    start = r.p
    if kind == "string":
        v = _read_string(r, f.key, compact)
        return _null(r, f, version, start) if v is None else v
    if kind == "bytes":
        v = _read_bytes(r, f.key, compact)
        return _null(r, f, version, start) if v is None else v
    if kind == "struct":
        assert f.struct is not None
        if version in f.nullable:
            if tagged:
                if to_int32(r.uvarint()) <= 0:
                    return None
            elif _read_fixed(r, "int8", f.key) < 0:
                return None
        return _read_struct(r, f.struct, version, flexible)
    # array
    n = _read_length(r, compact, True)
    if n < 0:
        return _null(r, f, version, start)
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
    if elem == "string":
        out: list[Any] = []
        for _ in range(n):
            s0 = r.p
            v = _read_string(r, f.key + " element", compact)
            if v is None:
                raise CorruptRecordError(f"non-nullable field {f.key} element was serialized as null", position=s0)
            out.append(v)
        return out
    if elem == "bytes":
        out = []
        for _ in range(n):
            s0 = r.p
            v = _read_bytes(r, f.key + " element", compact)
            if v is None:
                raise CorruptRecordError(f"non-nullable field {f.key} element was serialized as null", position=s0)
            out.append(v)
        return out
    assert f.struct is not None
    return [_read_struct(r, f.struct, version, flexible) for _ in range(n)]


def _read_struct(r: _Reader, st: Struct, version: int, flexible: bool) -> dict[str, Any]:
    plan = st.plan(version, flexible)
    out: dict[str, Any] = {}
    for f, tagged in plan.fields:
        out[f.key] = f.default(version, flexible) if tagged else _read_field(r, f, version, flexible, False)
    if flexible:
        _read_tagged(r, st, plan, version, out)
    return out


def _read_tagged(r: _Reader, st: Struct, plan: _Plan, version: int, out: dict[str, Any]) -> None:
    start = r.p
    count = to_int32(r.uvarint())
    if count > r.e - r.p:
        raise CorruptRecordError(f"{count} tagged fields cannot fit in {r.e - r.p} byte(s)", position=start)
    unknown: list[tuple[int, bytes]] = []
    for _ in range(count):
        tpos = r.p
        tag = to_int32(r.uvarint())
        size = to_int32(r.uvarint())
        if size < 0 or size > r.e - r.p:
            raise CorruptRecordError(f"Error reading byte array of {size} byte(s): only {r.e - r.p} byte(s) "
                                     f"available", position=tpos)
        f = plan.tagged.get(tag)
        if f is None and tag in st.all_tags:
            raise CorruptRecordError(f"Tag {tag} is not valid for version {version}", position=tpos)
        if f is None:
            unknown.append((tag, bytes(r.b[r.p:r.p + size])))
        else:
            sub = _Reader(r.b, r.p, r.p + size)
            out[f.key] = _read_field(sub, f, version, True, True)
        r.p += size
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


def _write_field(out: bytearray, f: Field, v: Any, version: int, flexible: bool, tagged: bool) -> None:
    kind = f.kind
    compact = flexible or tagged
    if kind in PRIMITIVES:
        _write_fixed(out, kind, v)
    elif kind in VARLEN:
        if v is None and version not in f.nullable:
            raise ValueError(f"field {f.key} is not nullable in version {version}")
        _write_varlen(out, kind, v, compact)
    elif kind == "struct":
        assert f.struct is not None
        if version in f.nullable:
            if tagged:
                write_uvarint(0 if v is None else 1, out)
            else:
                out.append(0xFF if v is None else 1)
            if v is None:
                return
        elif v is None:
            raise ValueError(f"field {f.key} is not nullable in version {version}")
        _write_struct(out, f.struct, v, version, flexible)
    else:
        if v is None:
            if version not in f.nullable:
                raise ValueError(f"field {f.key} is not nullable in version {version}")
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
                _write_struct(out, f.struct, x, version, flexible)


def _write_struct(out: bytearray, st: Struct, data: Mapping[str, Any], version: int, flexible: bool) -> None:
    plan = st.plan(version, flexible)
    for f, tagged in plan.fields:
        if not tagged:
            v = data[f.key] if f.key in data else f.default(version, flexible)
            _write_field(out, f, v, version, flexible, False)
    if not flexible:
        return
    items: list[tuple[int, bytes]] = []
    for f in plan.tagged_sorted:
        if f.key not in data:
            continue
        v = data[f.key]
        if f.is_default(v, version, flexible):
            continue
        payload = bytearray()
        _write_field(payload, f, v, version, True, True)
        assert f.tag is not None
        items.append((f.tag, bytes(payload)))
    items.extend((int(t), bytes(b)) for t, b in data.get("_unknownTaggedFields", ()))
    items.sort(key=lambda it: it[0])
    write_uvarint(len(items), out)
    for tag, payload in items:
        write_uvarint(tag, out)
        write_uvarint(len(payload), out)
        out += payload


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


def _json_value(f: Field, v: Any, version: int, flexible: bool) -> Any:
    if v is None:
        return None
    if f.kind == "struct":
        assert f.struct is not None
        return _json_struct(f.struct, v, version, flexible)
    if f.kind == "array":
        if f.elem == "struct":
            assert f.struct is not None
            return [_json_struct(f.struct, x, version, flexible) for x in v]
        assert f.elem is not None
        return [_json_scalar(f.elem, x) for x in v]
    return _json_scalar(f.kind, v)


def _json_struct(st: Struct, data: Mapping[str, Any], version: int, flexible: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f, tagged in st.plan(version, flexible).fields:
        v = data[f.key] if f.key in data else f.default(version, flexible)
        if tagged and f.is_default(v, version, flexible):
            continue
        out[f.key] = _json_value(f, v, version, flexible)
    return out
