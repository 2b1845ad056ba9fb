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


def parse_control_key(key: bytes | None) -> tuple[int, int]:
    """Return ``(version, type)`` of a control record key (``ControlRecordType.parseTypeId``)."""
    if key is None or len(key) < 4:
        raise CorruptRecordError(
            f"invalid control record key: expected at least 4 bytes, got {0 if key is None else len(key)}"
        )
    version, ctype = _KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    return version, ctype


def control_type_name(control_type: int) -> str:
    return CONTROL_TYPE_NAMES.get(control_type, "UNKNOWN")


def end_txn_marker_value(coordinator_epoch: int, version: int = 0) -> bytes:
    return _MARKER.pack(version, coordinator_epoch)


def parse_end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """Return ``(version, coordinatorEpoch)`` of an end-transaction marker value."""
    if value is None or len(value) < 6:
        raise CorruptRecordError(
            f"invalid end transaction marker value: expected at least 6 bytes, got "
            f"{0 if value is None else len(value)}"
        )
    version, epoch = _MARKER.unpack_from(value, 0)
    if version < 0:
        raise CorruptRecordError(f"invalid end transaction marker version {version}")
    return version, epoch
