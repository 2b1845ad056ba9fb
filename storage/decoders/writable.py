"""Writing a generated message (Kafka's ``Writable``): the fields of a :class:`~.spec.Struct` at one version,
tagged fields only when they differ from their default."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kafkalog.storage.codec.varint import write_uvarint
from kafkalog.storage.decoders.spec import _FIXED, PRIMITIVES, VARLEN, Struct, Versions, _Ctx, _Entry

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
