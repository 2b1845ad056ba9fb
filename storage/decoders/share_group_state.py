"""Decoder for ``__share_group_state`` records (share groups, KIP-932; docs/formats.md#internal-topics).

The share coordinator writes its records with Kafka's ``CoordinatorRecordSerde`` framing, as the group and
transaction coordinators do (:mod:`.coordinator`): key = int16 record type + key message, value = int16 version
+ value message, a null value is a tombstone. Record types (Kafka 4.3.1, ``share-coordinator/src/main/resources/
common/message/Share*.json``): 0 ``ShareSnapshot`` (the whole state of one share-partition), 1 ``ShareUpdate``
(a delta applied on top of the last snapshot).

:func:`decode_share_group_state_record` gives the JSON DumpLogSegments ``--share-group-state-decoder`` prints
(``{"key": {"type": "0", "data": {...}}, "payload": {"version": "0", "data": {...}}}``), plus the name of each
state batch's delivery state; :func:`format_share_group_state_record` its exact text.
"""

from __future__ import annotations

from typing import Any

from kafkalog.storage.decoders.common import b64
from kafkalog.storage.decoders.coordinator import Dialect, RecordType, format_record, parse_key, parse_value
from kafkalog.storage.decoders.schema import Message
from kafkalog.storage.decoders.spec import Field as F
from kafkalog.storage.errors import CorruptRecordError

__all__ = [
    "DELIVERY_STATES",
    "SHARE_GROUP_STATE_TOPIC",
    "SHARE_RECORD_TYPES",
    "decode_share_group_state_record",
    "format_share_group_state_record",
]

Buf = bytes | bytearray | memoryview
SHARE_GROUP_STATE_TOPIC = "__share_group_state"

#: ``RecordState`` ids of a share-partition's in-flight records (``DeliveryState`` of a state batch)
DELIVERY_STATES = {0: "AVAILABLE", 1: "ACQUIRED", 2: "ACKNOWLEDGED", 4: "ARCHIVED"}


def _key(name: str) -> Message:
    return Message(name, "0", "none", [
        F("GroupId", "string", "0"),
        F("TopicId", "uuid", "0"),
        F("Partition", "int32", "0"),
    ])


def _state_batches() -> F:
    return F("StateBatches", "[]StateBatch", "0+", fields=[
        F("FirstOffset", "int64", "0+"),
        F("LastOffset", "int64", "0+"),
        F("DeliveryState", "int8", "0+"),
        F("DeliveryCount", "int16", "0+"),
    ])


SHARE_SNAPSHOT_KEY = _key("ShareSnapshotKey")
SHARE_UPDATE_KEY = _key("ShareUpdateKey")

SHARE_SNAPSHOT_VALUE = Message("ShareSnapshotValue", "0", "0+", [
    F("SnapshotEpoch", "int32", "0+"),
    F("StateEpoch", "int32", "0+"),
    F("LeaderEpoch", "int32", "0+"),
    F("StartOffset", "int64", "0+"),
    F("DeliveryCompleteCount", "int32", "0+", tagged="0+", tag=0, default=-1),  # 4.2+ (KIP-1226)
    F("CreateTimestamp", "int64", "0+"),
    F("WriteTimestamp", "int64", "0+"),
    _state_batches(),
])

SHARE_UPDATE_VALUE = Message("ShareUpdateValue", "0", "0+", [
    F("SnapshotEpoch", "int32", "0+"),
    F("LeaderEpoch", "int32", "0+"),
    F("StartOffset", "int64", "0+"),
    F("DeliveryCompleteCount", "int32", "0+", tagged="0+", tag=0, default=-1),  # 4.2+ (KIP-1226)
    _state_batches(),
])

SHARE_RECORD_TYPES = {
    0: RecordType("ShareSnapshot", SHARE_SNAPSHOT_KEY, SHARE_SNAPSHOT_VALUE),
    1: RecordType("ShareUpdate", SHARE_UPDATE_KEY, SHARE_UPDATE_VALUE),
}


def decode_share_group_state_record(key: Buf | None, value: Buf | None) -> dict[str, Any]:
    """``{"key": {"type": "<t>", "data": {...}}, "payload": {"version": "<v>", "data": {...}} | None}`` as
    DumpLogSegments 4.3 prints it (payload None = tombstone); ``key.recordType`` is ``ShareSnapshot`` or
    ``ShareUpdate`` and each state batch of the payload's data gets ``deliveryStateName``. An unknown record type
    gives ``unknownRecordType`` and ``{"raw": base64}``. Raises CorruptRecordError."""
    if key is None:
        raise CorruptRecordError("__share_group_state record without a key")
    record_type, fields = parse_key(SHARE_RECORD_TYPES, key)
    if fields is None:
        k: dict[str, Any] = {"type": str(record_type), "data": None, "unknownRecordType": True}
        return {"key": k, "payload": None if value is None else {"raw": b64(value)}}
    spec = SHARE_RECORD_TYPES[record_type]
    k = {"type": str(record_type), "data": spec.key.to_json(fields, 0), "recordType": spec.name}
    if value is None:
        return {"key": k, "payload": None}
    msg, version, vfields = parse_value(SHARE_RECORD_TYPES, record_type, value, check_version=True)
    data = msg.to_json(vfields, version)
    for b in data.get("stateBatches") or ():
        b["deliveryStateName"] = DELIVERY_STATES.get(b["deliveryState"], f"UNKNOWN({b['deliveryState']})")
    return {"key": k, "payload": {"version": str(version), "data": data}}


def format_share_group_state_record(key: Buf | None, value: Buf | None, offset: int = 0,
                                    dialect: Dialect = "4.3") -> str:
    """DumpLogSegments ``--share-group-state-decoder`` text for one record (Kafka 4.3.1): ``key: {...} payload:
    {...}`` / ``payload: <DELETE>``, or Kafka's "skipping" messages. A record without a key raises
    CorruptRecordError (the tool aborts there)."""
    return format_record(SHARE_RECORD_TYPES, key, value, offset, dialect=dialect, known=(0, 1),
                         what="the specified")
