"""A generated message as JSON, as Kafka's generated ``*JsonConverter.write`` produces it (tagged fields only when
non-default, bytes as base64, UUIDs in Kafka's base64url form)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalog.storage.decoders.common import b64, to_int16, uuid_to_kafka_str
from kafkalog.storage.decoders.spec import Struct, Versions, _Ctx, _Entry

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
