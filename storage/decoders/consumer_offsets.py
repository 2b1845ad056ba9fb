"""Decoder for ``__consumer_offsets`` records (spec 60-tools §3.1).

Key = int16 record type + key message; value = int16 version + value message; a null value is a tombstone
(``CoordinatorRecordSerde``). Two layers:

* ``parse_*``: raw fields (Python natives, see :mod:`.schema`) for programs;
* ``decode_*`` / :func:`format_offsets_record`: the JSON DumpLogSegments ``--offsets-decoder`` prints,
  ``{"type":"<record type>","data":{...}}`` for keys and ``{"version":"<v>","data":{...}}`` for values (both
  numbers as JSON *strings*, as Kafka does), with the embedded consumer protocol of classic ``consumer``
  groups decoded in place (falling back to base64 when it does not parse).
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import CorruptRecordError
from .common import b64, jackson_dumps
from .offsets_schemas import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    RECORD_TYPES,
)
from .schema import Message

__all__ = [
    "RECORD_TYPES",
    "decode_consumer_assignment",
    "decode_consumer_subscription",
    "decode_offsets_key",
    "decode_offsets_record",
    "decode_offsets_value",
    "format_offsets_record",
    "offsets_record_type_name",
    "parse_offsets_key",
    "parse_offsets_value",
]

Buf = bytes | bytearray | memoryview
_I16 = struct.Struct(">h")


def offsets_record_type_name(record_type: int) -> str | None:
    """``OffsetCommit``, ``GroupMetadata``, ``ConsumerGroupMemberMetadata``, ... or None if unknown."""
    t = RECORD_TYPES.get(record_type)
    return t[0] if t else None


def _version(buf: Buf, what: str) -> int:
    if len(buf) < 2:
        raise CorruptRecordError(f"Could not read version from {what}'s buffer.", position=0)
    return _I16.unpack_from(buf, 0)[0]


def _wrap(e: CorruptRecordError, version: int, what: str) -> CorruptRecordError:
    return CorruptRecordError(
        f"Could not read record with version {version} from {what}'s buffer due to: {e.reason}.",
        position=e.position,
    )


def parse_offsets_key(key: Buf) -> tuple[int, dict[str, Any] | None]:
    """``(record_type, fields)``; fields is None for a record type this decoder does not know."""
    record_type = _version(key, "key")
    spec = RECORD_TYPES.get(record_type)
    if spec is None:
        return record_type, None
    try:
        data, _ = spec[1].read(key, 0, 2)
    except CorruptRecordError as e:
        raise _wrap(e, record_type, "key") from None
    return record_type, data


def _parse_value(record_type: int, value: Buf) -> tuple[Message, int, dict[str, Any]]:
    spec = RECORD_TYPES.get(record_type)
    if spec is None:
        raise CorruptRecordError(f"Unknown record type {record_type}")
    _, _, msg, older = spec
    version = _version(value, "value")
    data: dict[str, Any] | None = None
    try:
        data, end = msg.read(value, version, 2)
        if end == len(value) or not older:
            return msg, version, data
        error = None
    except CorruptRecordError as e:
        if not older:
            raise _wrap(e, version, "value") from None
        error = e
    for alt in older:  # an older, incompatible layout of the same record type
        try:
            alt_data, end = alt.read(value, version, 2)
        except CorruptRecordError:
            continue
        if end == len(value):
            return alt, version, alt_data
    if data is not None:
        return msg, version, data
    assert error is not None
    raise _wrap(error, version, "value")


def parse_offsets_value(record_type: int, value: Buf | None) -> tuple[int, dict[str, Any]] | None:
    """``(version, fields)`` of a value, or None for a tombstone."""
    if value is None:
        return None
    _, version, data = _parse_value(record_type, value)
    return version, data


def _embedded(msg: Message, data: bytes) -> dict[str, Any]:
    version = _version(data, msg.name)
    fields, _ = msg.read(data, version, 2)
    return msg.to_json(fields, version)


def decode_consumer_subscription(data: Buf) -> dict[str, Any]:
    """JSON of a ``ConsumerProtocolSubscription`` (int16 version + message); raises CorruptRecordError."""
    return _embedded(CONSUMER_PROTOCOL_SUBSCRIPTION, bytes(data))


def decode_consumer_assignment(data: Buf) -> dict[str, Any]:
    """JSON of a ``ConsumerProtocolAssignment`` (int16 version + message); raises CorruptRecordError."""
    return _embedded(CONSUMER_PROTOCOL_ASSIGNMENT, bytes(data))


def _group_metadata_json(fields: dict[str, Any], version: int, msg: Message) -> dict[str, Any]:
    out = msg.to_json(fields, version)
    if out.get("protocolType") != "consumer":
        return out
    raw_members = fields.get("members") or []
    for member_json, raw in zip(out.get("members") or [], raw_members, strict=False):
        for name, embedded in (("subscription", CONSUMER_PROTOCOL_SUBSCRIPTION),
                               ("assignment", CONSUMER_PROTOCOL_ASSIGNMENT)):
            try:
                member_json[name] = _embedded(embedded, raw[name])
            except CorruptRecordError:
                pass  # keep the base64 bytes, as DumpLogSegments does
    return out


def decode_offsets_key(key: Buf) -> dict[str, Any]:
    """``{"type": "<record type>", "data": {...}}``; an unknown record type gives
    ``{"type": "<t>", "data": None, "unknownRecordType": True}``."""
    record_type, fields = parse_offsets_key(key)
    if fields is None:
        return {"type": str(record_type), "data": None, "unknownRecordType": True}
    msg = RECORD_TYPES[record_type][1]
    return {"type": str(record_type), "data": msg.to_json(fields, 0)}


def decode_offsets_value(record_type: int, value: Buf | None) -> dict[str, Any] | None:
    """``{"version": "<v>", "data": {...}}``, or None for a tombstone."""
    if value is None:
        return None
    msg, version, fields = _parse_value(record_type, value)
    if record_type == 2:
        data = _group_metadata_json(fields, version, msg)
    else:
        data = msg.to_json(fields, version)
    return {"version": str(version), "data": data}


def decode_offsets_record(key: Buf, value: Buf | None) -> dict[str, Any]:
    """``{"key": ..., "payload": ... | None}`` (payload None = tombstone). For an unknown record type the key
    carries ``unknownRecordType`` and the payload, if any, is ``{"raw": base64}``."""
    if key is None:
        raise CorruptRecordError("__consumer_offsets record without a key")
    k = decode_offsets_key(key)
    if k.get("unknownRecordType"):
        return {"key": k, "payload": None if value is None else {"raw": b64(value)}}
    return {"key": k, "payload": decode_offsets_value(int(k["type"]), value)}


def format_offsets_record(key: Buf | None, value: Buf | None, offset: int = 0) -> str:
    """DumpLogSegments ``--offsets-decoder`` text for one record: ``key: {...} payload: {...}``, or
    ``payload: <DELETE>`` for a tombstone; unknown record types and decode errors give only a key part with
    Kafka's "skipping" message. A record without a key raises CorruptRecordError (the tool aborts there)."""
    if key is None:
        raise CorruptRecordError(f"Failed to decode message at offset {offset} using offset topic decoder "
                                 "(message had a missing key)")
    try:
        record_type = _version(key, "key")
        if record_type not in RECORD_TYPES:
            return f"key: Unknown record type {record_type} at offset {offset}, skipping."
        k = decode_offsets_key(key)
        v = decode_offsets_value(record_type, value)
    except CorruptRecordError as e:
        return f"key: Error at offset {offset}, skipping. {e.reason}"
    payload = "<DELETE>" if v is None else jackson_dumps(v)
    return f"key: {jackson_dumps(k)} payload: {payload}"
