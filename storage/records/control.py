"""Control records (docs/formats.md#control-records): transaction markers and KRaft control record types."""

from __future__ import annotations

import struct

from kafkalog.storage.errors import CorruptRecordError

ABORT, COMMIT, LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS = range(7)
CONTROL_TYPE_NAMES = {
    ABORT: "ABORT",
    COMMIT: "COMMIT",
    LEADER_CHANGE: "LEADER_CHANGE",
    SNAPSHOT_HEADER: "SNAPSHOT_HEADER",
    SNAPSHOT_FOOTER: "SNAPSHOT_FOOTER",
    KRAFT_VERSION: "KRAFT_VERSION",
    KRAFT_VOTERS: "KRAFT_VOTERS",
}

_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")


def control_key(control_type: int, version: int = 0) -> bytes:
    return _KEY.pack(version, control_type)


def _parse_versioned(data: bytes | None, layout: struct.Struct, what: str, versioned: str) -> tuple[int, int]:
    """``(version, field)`` of a control record's key or value: at least ``layout.size`` bytes (Kafka reads the
    fields it knows and ignores the rest) and a version that is not negative."""
    if data is None or len(data) < layout.size:
        raise CorruptRecordError(
            f"invalid {what}: expected at least {layout.size} bytes, got {0 if data is None else len(data)}"
        )
    version, field = layout.unpack_from(data, 0)
    if version < 0:
        raise CorruptRecordError(f"invalid {versioned} version {version}")
    return version, field


def parse_control_key(key: bytes | None) -> tuple[int, int]:
    """Return ``(version, type)`` of a control record key (``ControlRecordType.parseTypeId``)."""
    return _parse_versioned(key, _KEY, "control record key", "control record key")


def control_type_name(control_type: int) -> str:
    return CONTROL_TYPE_NAMES.get(control_type, "UNKNOWN")


def end_txn_marker_value(coordinator_epoch: int, version: int = 0) -> bytes:
    return _MARKER.pack(version, coordinator_epoch)


def parse_end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """Return ``(version, coordinatorEpoch)`` of an end-transaction marker value."""
    return _parse_versioned(value, _MARKER, "end transaction marker value", "end transaction marker")
