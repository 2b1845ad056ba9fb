"""Decoder for control records (docs/formats.md#control-records): transaction markers and the KRaft control records of
``__cluster_metadata`` and snapshots (schemas from ``clients/src/main/resources/common/message/``).

Key: int16 version (>= 0; higher versions are parsed as 0) + int16 type, at least 4 bytes. Values of the KRaft
types are generated messages read at version 0 with no version prefix (``ControlRecordUtils``); each starts
with its own int16 ``Version`` field, which DumpLogSegments uses as the JSON version. ABORT/COMMIT values are
int16 version + int32 coordinator epoch (``EndTransactionMarker``). Trailing bytes are ignored, as in Kafka.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kafkalog.storage.decoders.common import jackson_dumps
from kafkalog.storage.decoders.coordinator import Dialect
from kafkalog.storage.decoders.schema import Message
from kafkalog.storage.decoders.spec import Field as F
from kafkalog.storage.errors import CorruptRecordError

__all__ = [
    "CONTROL_TYPES",
    "ControlRecord",
    "decode_control_record",
    "format_control_record",
    "parse_control_key",
    "parse_control_record",
]

Buf = bytes | bytearray | memoryview
_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")

CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}

_VOTER = [F("VoterId", "int32", "0+"), F("VoterDirectoryId", "uuid", "1+")]

LEADER_CHANGE_MESSAGE = Message("LeaderChangeMessage", "0-1", "0+", [
    F("Version", "int16", "0+"),
    F("LeaderId", "int32", "0+"),
    F("Voters", "[]Voter", "0+", common="0+", fields=_VOTER),
    F("GrantingVoters", "[]Voter", "0+", common="0+", fields=_VOTER),
])

SNAPSHOT_HEADER_RECORD = Message("SnapshotHeaderRecord", "0", "0+", [
    F("Version", "int16", "0+"),
    F("LastContainedLogTimestamp", "int64", "0+"),
])

SNAPSHOT_FOOTER_RECORD = Message("SnapshotFooterRecord", "0", "0+", [F("Version", "int16", "0+")])

KRAFT_VERSION_RECORD = Message("KRaftVersionRecord", "0", "0+", [
    F("Version", "int16", "0+"),
    F("KRaftVersion", "int16", "0+"),
])

VOTERS_RECORD = Message("VotersRecord", "0", "0+", [
    F("Version", "int16", "0+"),
    F("Voters", "[]Voter", "0+", fields=[
        F("VoterId", "int32", "0+"),
        F("VoterDirectoryId", "uuid", "0+"),
        F("Endpoints", "[]Endpoint", "0+", fields=[
            F("Name", "string", "0+"),
            F("Host", "string", "0+"),
            F("Port", "uint16", "0+"),
        ]),
        F("KRaftVersionFeature", "KRaftVersionFeature", "0+", fields=[
            F("MinSupportedVersion", "int16", "0+"),
            F("MaxSupportedVersion", "int16", "0+"),
        ]),
    ]),
])

# type id -> (message, DumpLogSegments label); labels only for the types DumpLogSegments prints as JSON
_MESSAGES: dict[int, tuple[Message, str | None]] = {
    2: (LEADER_CHANGE_MESSAGE, None),
    3: (SNAPSHOT_HEADER_RECORD, "SnapshotHeader"),
    4: (SNAPSHOT_FOOTER_RECORD, "SnapshotFooter"),
    5: (KRAFT_VERSION_RECORD, "KRaftVersion"),
    6: (VOTERS_RECORD, "KRaftVoters"),
}


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """A decoded control record: ``type_name`` is ``UNKNOWN`` for type ids Kafka does not know (``data`` is
    then None); ABORT/COMMIT data is ``{"version": v, "coordinatorEpoch": e}``; KRaft types hold raw fields."""

    key_version: int
    type_id: int
    type_name: str
    data: dict[str, Any] | None


def _versioned(data: Buf | None, fmt: struct.Struct, sized: str, versioned: str) -> tuple[int, int]:
    """The version and the field after it, with Kafka's checks on the size (``sized``: what Kafka calls the
    bytes) and on the version (``versioned``)."""
    n = 0 if data is None else len(data)
    if data is None or n < fmt.size:
        raise CorruptRecordError(f"Invalid value size found for {sized}. Must have at least {fmt.size} "
                                 f"bytes, but found only {n}", position=0)
    version, field = fmt.unpack_from(data, 0)
    if version < 0:
        raise CorruptRecordError(f"Invalid version found for {versioned}: {version}. "
                                 "May indicate data corruption", position=0)
    return version, field


def parse_control_key(key: Buf | None) -> tuple[int, int]:
    """``(key_version, type_id)`` with ``ControlRecordType.parseTypeId``'s checks."""
    return _versioned(key, _KEY, "end control record key", "control record")


def _marker(value: Buf | None) -> dict[str, Any]:
    version, epoch = _versioned(value, _MARKER, "end transaction marker", "end transaction marker")
    return {"version": version, "coordinatorEpoch": epoch}


def parse_control_record(key: Buf | None, value: Buf | None) -> ControlRecord:
    """Decode a control record's key and value (raw fields). Raises CorruptRecordError."""
    key_version, type_id = parse_control_key(key)
    name = CONTROL_TYPES.get(type_id, "UNKNOWN")
    if type_id in (0, 1):
        return ControlRecord(key_version, type_id, name, _marker(value))
    spec = _MESSAGES.get(type_id)
    if spec is None:
        return ControlRecord(key_version, type_id, name, None)
    if value is None:
        raise CorruptRecordError(f"{name} control record without a value")
    data, _ = spec[0].read(value, 0)
    return ControlRecord(key_version, type_id, name, data)


def _json(rec: ControlRecord) -> dict[str, Any] | None:
    if rec.data is None or rec.type_id in (0, 1):
        return rec.data
    msg = _MESSAGES[rec.type_id][0]
    return msg.to_json(rec.data, rec.data["version"])


def decode_control_record(key: Buf | None, value: Buf | None) -> dict[str, Any]:
    """``{"type": "SNAPSHOT_HEADER", "typeId": 3, "data": {...}}``; the JSON of the KRaft types is what
    Kafka's generated JSON converters write at the record's own ``Version`` field, as DumpLogSegments does."""
    rec = parse_control_record(key, value)
    return {"type": rec.type_name, "typeId": rec.type_id, "data": _json(rec)}


def format_control_record(key: Buf | None, value: Buf | None, dialect: Dialect = "4.3") -> str:
    """DumpLogSegments' control part of a record line (without the leading space):
    ``endTxnMarker: COMMIT coordinatorEpoch: 5``, ``SnapshotHeader {...}``, ``KRaftVersion {...}``,
    ``KRaftVoters {...}``, ``controlType: UNKNOWN(9)``; LEADER_CHANGE is ``LeaderChange: {...}`` in Kafka 4.3
    and ``controlType: LEADER_CHANGE(2)`` in 3.9 (``dialect``). Raises CorruptRecordError where the tool
    would abort."""
    _, type_id = parse_control_key(key)
    spec = _MESSAGES.get(type_id)
    if type_id == 2 and dialect != "3.9":
        rec = parse_control_record(key, value)
        assert rec.data is not None
        return f"LeaderChange: {jackson_dumps(LEADER_CHANGE_MESSAGE.to_json(rec.data, rec.data['version']))}"
    if type_id not in (0, 1) and (spec is None or spec[1] is None):
        return f"controlType: {CONTROL_TYPES.get(type_id, 'UNKNOWN')}({type_id})"
    rec = parse_control_record(key, value)
    if spec is None:
        assert rec.data is not None
        return f"endTxnMarker: {rec.type_name} coordinatorEpoch: {rec.data['coordinatorEpoch']}"
    return f"{spec[1]} {jackson_dumps(_json(rec))}"
