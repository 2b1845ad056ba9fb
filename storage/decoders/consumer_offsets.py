"""Decoder for ``__consumer_offsets`` records (docs/formats.md#internal-topics).

Key = int16 record type + key message; value = int16 version + value message; a null value is a tombstone
(``CoordinatorRecordSerde``). Two layers:

* ``parse_*``: raw fields (Python natives, see :mod:`.schema`) for programs;
* ``decode_*`` / :func:`format_offsets_record`: the JSON DumpLogSegments ``--offsets-decoder`` prints,
  ``{"type":"<record type>","data":{...}}`` for keys and ``{"version":"<v>","data":{...}}`` for values (both
  numbers as JSON *strings*, as Kafka does), with the embedded consumer protocol of classic ``consumer``
  groups decoded in place (falling back to base64 when it does not parse).

The decoders know every record type up to Kafka 4.3 (classic, consumer, share and streams groups), a superset
of what any one release's DumpLogSegments prints; :func:`format_offsets_record` restricts itself to what the
chosen ``dialect`` knows (see :mod:`.coordinator`).
"""

from __future__ import annotations

from typing import Any

from kafkalog.storage.decoders.common import b64
from kafkalog.storage.decoders.coordinator import Dialect, format_record, parse_key, parse_value, read_version
from kafkalog.storage.decoders.offsets_schemas import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    RECORD_TYPES,
)
from kafkalog.storage.decoders.schema import Message
from kafkalog.storage.errors import CorruptRecordError

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

# Record types each DumpLogSegments release decodes (others: "Unknown record type").
KNOWN_TYPES: dict[str, frozenset[int]] = {
    "3.9": frozenset(range(9)),
    "4.3": frozenset(RECORD_TYPES) - {9},  # 4.1 dropped ShareGroupPartitionMetadata
}


def offsets_record_type_name(record_type: int) -> str | None:
    """``OffsetCommit``, ``GroupMetadata``, ``ConsumerGroupMemberMetadata``, ... or None if unknown."""
    t = RECORD_TYPES.get(record_type)
    return t.name if t else None


def parse_offsets_key(key: Buf) -> tuple[int, dict[str, Any] | None]:
    """``(record_type, fields)``; fields is None for a record type this decoder does not know."""
    return parse_key(RECORD_TYPES, key)


def parse_offsets_value(record_type: int, value: Buf | None) -> tuple[int, dict[str, Any]] | None:
    """``(version, fields)`` of a value, or None for a tombstone."""
    if value is None:
        return None
    _, version, data = parse_value(RECORD_TYPES, record_type, value)
    return version, data


def _embedded(msg: Message, data: bytes) -> dict[str, Any]:
    version = read_version(data, msg.name)
    fields, _ = msg.read(data, version, 2)
    return msg.to_json(fields, version)


def decode_consumer_subscription(data: Buf) -> dict[str, Any]:
    """JSON of a ``ConsumerProtocolSubscription`` (int16 version + message); raises CorruptRecordError."""
    return _embedded(CONSUMER_PROTOCOL_SUBSCRIPTION, bytes(data))


def decode_consumer_assignment(data: Buf) -> dict[str, Any]:
    """JSON of a ``ConsumerProtocolAssignment`` (int16 version + message); raises CorruptRecordError."""
    return _embedded(CONSUMER_PROTOCOL_ASSIGNMENT, bytes(data))


def _value_json(record_type: int, msg: Message, version: int, fields: dict[str, Any]) -> dict[str, Any]:
    out = msg.to_json(fields, version)
    if record_type != 2 or out.get("protocolType") != "consumer":
        return out
    for member_json, raw in zip(out.get("members") or [], fields.get("members") or [], strict=False):
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
    return {"type": str(record_type), "data": RECORD_TYPES[record_type].key.to_json(fields, 0)}


def decode_offsets_value(record_type: int, value: Buf | None) -> dict[str, Any] | None:
    """``{"version": "<v>", "data": {...}}``, or None for a tombstone."""
    if value is None:
        return None
    msg, version, fields = parse_value(RECORD_TYPES, record_type, value)
    return {"version": str(version), "data": _value_json(record_type, msg, version, fields)}


def decode_offsets_record(key: Buf, value: Buf | None) -> dict[str, Any]:
    """``{"key": ..., "payload": ... | None}`` (payload None = tombstone). For an unknown record type the key
    carries ``unknownRecordType`` and the payload, if any, is ``{"raw": base64}``."""
    if key is None:
        raise CorruptRecordError("__consumer_offsets record without a key")
    k = decode_offsets_key(key)
    if k.get("unknownRecordType"):
        return {"key": k, "payload": None if value is None else {"raw": b64(value)}}
    return {"key": k, "payload": decode_offsets_value(int(k["type"]), value)}


def format_offsets_record(key: Buf | None, value: Buf | None, offset: int = 0, dialect: Dialect = "4.3") -> str:
    """DumpLogSegments ``--offsets-decoder`` text for one record: ``key: {...} payload: {...}``, or
    ``payload: <DELETE>`` for a tombstone; unknown record types and decode errors give only a key part with
    Kafka's "skipping" message. A record without a key raises CorruptRecordError (the tool aborts there)."""
    return format_record(RECORD_TYPES, key, value, offset, dialect=dialect, known=KNOWN_TYPES.get(dialect, ()),
                         what="offset topic", value_json=_value_json)
