"""Decoder for ``__remote_log_metadata`` records (tiered storage, KIP-405; docs/formats.md#internal-topics).

``TopicBasedRemoteLogMetadataManager`` writes records with a null key and a value serialized by
``RemoteLogMetadataSerde`` through ``BytesApiMessageSerde``: the same frame as KRaft metadata records
(``uvarint frameVersion`` = 1, ``uvarint apiKey``, ``uvarint version``, then the generated message; nothing may
follow it). The api keys are those of ``storage/src/main/resources/message/*.json`` (Kafka 4.3.1):

* 0 ``RemoteLogSegmentMetadataRecord`` -> ``RemoteLogSegmentMetadata``
* 1 ``RemoteLogSegmentMetadataUpdateRecord`` -> ``RemoteLogSegmentMetadataUpdate``
* 2 ``RemotePartitionDeleteMetadataRecord`` -> ``RemotePartitionDeleteMetadata``
* 3 ``RemoteLogSegmentMetadataSnapshotRecord`` -> ``RemoteLogSegmentMetadataSnapshot`` (only in the RLMM's
  local snapshot files, never in the topic)

:func:`decode_remote_log_metadata` gives every field under its camelCase schema name (UUIDs as Kafka's
``Uuid.toString()``, bytes as base64, states by name); :func:`format_remote_log_metadata` gives DumpLogSegments
``--remote-log-metadata-decoder``'s text (the ``toString()`` of the Java objects ``RemoteLogMetadataSerde`` makes);
:func:`kafkalog.storage.remote.metadata.iter_remote_log_metadata` walks every ``__remote_log_metadata-N``
partition of some data dirs.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafkalog.storage.codec.varint import write_uvarint
from kafkalog.storage.decoders.cluster_metadata import parse_metadata_header
from kafkalog.storage.decoders.common import b64, uuid_to_kafka_str
from kafkalog.storage.decoders.schema import Message
from kafkalog.storage.decoders.spec import Field as F
from kafkalog.storage.errors import CorruptRecordError

__all__ = [
    "REMOTE_LOG_METADATA_RECORDS",
    "REMOTE_LOG_METADATA_TOPIC",
    "REMOTE_LOG_SEGMENT_STATES",
    "REMOTE_PARTITION_DELETE_STATES",
    "decode_remote_log_metadata",
    "encode_remote_log_metadata",
    "format_remote_log_metadata",
    "parse_remote_log_metadata",
]

Buf = bytes | bytearray | memoryview

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"

#: ``RemoteLogSegmentState`` by id
REMOTE_LOG_SEGMENT_STATES = ("COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED",
                             "DELETE_SEGMENT_FINISHED")
#: ``RemotePartitionDeleteState`` by id
REMOTE_PARTITION_DELETE_STATES = ("DELETE_PARTITION_MARKED", "DELETE_PARTITION_STARTED", "DELETE_PARTITION_FINISHED")


def _topic_id_partition() -> F:
    return F("TopicIdPartition", "TopicIdPartitionEntry", "0+", fields=[
        F("Name", "string", "0+"),
        F("Id", "uuid", "0+"),
        F("Partition", "int32", "0+"),
    ])


def _segment_id() -> F:
    return F("RemoteLogSegmentId", "RemoteLogSegmentIdEntry", "0+", fields=[_topic_id_partition(), F("Id", "uuid", "0+")])


def _leader_epochs() -> F:
    return F("SegmentLeaderEpochs", "[]SegmentLeaderEpochEntry", "0+", fields=[
        F("LeaderEpoch", "int32", "0+"),
        F("Offset", "int64", "0+"),
    ])


def _custom_metadata() -> F:
    return F("CustomMetadata", "bytes", "0+", nullable="0+", default=None)


def _segment_metadata() -> list[F]:
    """A segment's metadata after its id, the same in the record and in the snapshot's."""
    return [
        F("StartOffset", "int64", "0+"),
        F("EndOffset", "int64", "0+"),
        F("BrokerId", "int32", "0+"),
        F("MaxTimestampMs", "int64", "0+"),
        F("EventTimestampMs", "int64", "0+"),
        _leader_epochs(),
        F("SegmentSizeInBytes", "int32", "0+"),
        _custom_metadata(),
        F("RemoteLogSegmentState", "int8", "0+"),
        F("TxnIndexEmpty", "bool", "0+", tagged="0+", tag=0),
    ]


REMOTE_LOG_SEGMENT_METADATA = Message("RemoteLogSegmentMetadataRecord", "0", "0+", [
    _segment_id(), *_segment_metadata()
], api_key=0)

REMOTE_LOG_SEGMENT_METADATA_UPDATE = Message("RemoteLogSegmentMetadataUpdateRecord", "0", "0+", [
    _segment_id(),
    F("BrokerId", "int32", "0+"),
    F("EventTimestampMs", "int64", "0+"),
    _custom_metadata(),
    F("RemoteLogSegmentState", "int8", "0+"),
], api_key=1)

REMOTE_PARTITION_DELETE_METADATA = Message("RemotePartitionDeleteMetadataRecord", "0", "0+", [
    _topic_id_partition(),
    F("BrokerId", "int32", "0+"),
    F("EventTimestampMs", "int64", "0+"),
    F("RemotePartitionDeleteState", "int8", "0+"),
], api_key=2)

REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT = Message("RemoteLogSegmentMetadataSnapshotRecord", "0", "0+", [
    F("SegmentId", "uuid", "0+"), *_segment_metadata()
], api_key=3)

#: api key -> (message spec, the ``RemoteLogMetadata`` class it becomes)
REMOTE_LOG_METADATA_RECORDS: dict[int, tuple[Message, str]] = {
    0: (REMOTE_LOG_SEGMENT_METADATA, "RemoteLogSegmentMetadata"),
    1: (REMOTE_LOG_SEGMENT_METADATA_UPDATE, "RemoteLogSegmentMetadataUpdate"),
    2: (REMOTE_PARTITION_DELETE_METADATA, "RemotePartitionDeleteMetadata"),
    3: (REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT, "RemoteLogSegmentMetadataSnapshot"),
}


def parse_remote_log_metadata(value: Buf | None) -> tuple[int, int, dict[str, Any]]:
    """``(api_key, version, raw fields)`` of one record value (see :mod:`.schema` for raw values).

    Raises CorruptRecordError with Kafka's messages (``AbstractApiMessageSerde.read``) and the byte position."""
    if value is None:
        raise CorruptRecordError("__remote_log_metadata record without a value")
    frame, api_key, version, pos = parse_metadata_header(value)
    if frame == 0:
        raise CorruptRecordError(
            "Could not deserialize metadata record with frame version 0. Note that upgrades from the preview "
            "release of KRaft in 2.8 to newer versions are not supported.", position=0)
    spec = REMOTE_LOG_METADATA_RECORDS.get(api_key)
    if spec is None:
        raise CorruptRecordError(f"Unknown metadata id {api_key}", position=0)
    try:
        data, end = spec[0].read(value, version, pos)
    except CorruptRecordError as e:
        raise CorruptRecordError(f"Failed to deserialize record with type {api_key}: {e.reason}",
                                 position=e.position) from None
    if end != len(value):
        raise CorruptRecordError(f"Found {len(value) - end} byte(s) of garbage after {api_key}", position=end)
    return api_key, version, data


def encode_remote_log_metadata(api_key: int, data: dict[str, Any], version: int = 0) -> bytes:
    """The record value ``RemoteLogMetadataSerde.serialize`` writes for raw fields ``data`` (as
    :func:`parse_remote_log_metadata` returns them; missing fields get their defaults)."""

    out = bytearray()
    for v in (1, api_key, version):
        write_uvarint(v, out)
    return bytes(out) + REMOTE_LOG_METADATA_RECORDS[api_key][0].write(data, version)


def _plain(v: Any) -> Any:
    if isinstance(v, uuid.UUID):
        return uuid_to_kafka_str(v)
    if isinstance(v, bytes | bytearray | memoryview):
        return b64(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if not k.startswith("_")}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def _state(names: tuple[str, ...], i: int) -> str:
    return names[i] if 0 <= i < len(names) else f"UNKNOWN({i})"


def decode_remote_log_metadata(key: Buf | None, value: Buf | None) -> dict[str, Any]:
    """One ``__remote_log_metadata`` record as ``{"type": <RemoteLogMetadata class>, "version": v, ...fields}``.

    ``type`` is ``RemoteLogSegmentMetadata``, ``RemoteLogSegmentMetadataUpdate``, ``RemotePartitionDeleteMetadata``
    or ``RemoteLogSegmentMetadataSnapshot``; the other keys are the message's fields in schema order under their
    camelCase names (``remoteLogSegmentId: {topicIdPartition: {name, id, partition}, id}``, ``startOffset``,
    ...), every field present (``txnIndexEmpty`` too), UUIDs as Kafka's ``Uuid.toString()``, ``customMetadata``
    as base64 or None, ``remoteLogSegmentState`` / ``remotePartitionDeleteState`` as the state's name
    (``COPY_SEGMENT_FINISHED``, ``DELETE_PARTITION_MARKED``, ...; ``UNKNOWN(n)`` for an id Kafka does not have).
    The key is ignored (Kafka writes none). Raises CorruptRecordError."""
    del key
    api_key, version, data = parse_remote_log_metadata(value)
    out: dict[str, Any] = {"type": REMOTE_LOG_METADATA_RECORDS[api_key][1], "version": version}
    out.update(_plain(data))
    if "remoteLogSegmentState" in out:
        out["remoteLogSegmentState"] = _state(REMOTE_LOG_SEGMENT_STATES, out["remoteLogSegmentState"])
    if "remotePartitionDeleteState" in out:
        out["remotePartitionDeleteState"] = _state(REMOTE_PARTITION_DELETE_STATES, out["remotePartitionDeleteState"])
    return out


def _tip(t: dict[str, Any]) -> str:
    """``TopicIdPartition.toString()``: ``<topicId>:<topic>-<partition>``."""
    return f"{uuid_to_kafka_str(t['id'])}:{t['name']}-{t['partition']}"


def _segment_id_text(sid: dict[str, Any]) -> str:
    return f"RemoteLogSegmentId{{topicIdPartition={_tip(sid['topicIdPartition'])}, id={uuid_to_kafka_str(sid['id'])}}}"


def _custom(v: bytes | None) -> str:
    return "Optional.empty" if v is None else f"Optional[CustomMetadata{{{len(v)} bytes}}]"


def _epochs(entries: list[dict[str, Any]]) -> str:
    """A ``TreeMap<Integer, Long>`` built by ``put`` in record order (a later duplicate epoch wins)."""
    m: dict[int, int] = {}
    for e in entries:
        m[e["leaderEpoch"]] = e["offset"]
    return "{" + ", ".join(f"{k}={m[k]}" for k in sorted(m)) + "}"


def _java_state(names: tuple[str, ...], i: int) -> str:
    if 0 <= i < len(names):
        return names[i]
    raise CorruptRecordError("state can not be null")


def _bool(b: bool) -> str:
    return "true" if b else "false"


def _text(api_key: int, d: dict[str, Any]) -> str:
    if api_key == 1:
        state = _java_state(REMOTE_LOG_SEGMENT_STATES, d["remoteLogSegmentState"])
        return (f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={_segment_id_text(d['remoteLogSegmentId'])}, "
                f"customMetadata={_custom(d['customMetadata'])}, state={state}, "
                f"eventTimestampMs={d['eventTimestampMs']}, brokerId={d['brokerId']}}}")
    if api_key == 2:
        state = _java_state(REMOTE_PARTITION_DELETE_STATES, d["remotePartitionDeleteState"])
        return (f"RemotePartitionDeleteMetadata{{topicPartition={_tip(d['topicIdPartition'])}, state={state}, "
                f"eventTimestampMs={d['eventTimestampMs']}, brokerId={d['brokerId']}}}")
    state = _java_state(REMOTE_LOG_SEGMENT_STATES, d["remoteLogSegmentState"])
    if d["startOffset"] < 0:
        raise CorruptRecordError(f"Unexpected start offset = {d['startOffset']}. StartOffset for a remote segment "
                                 "cannot be negative")
    if d["endOffset"] < d["startOffset"]:
        raise CorruptRecordError(f"Unexpected end offset = {d['endOffset']}. EndOffset for a remote segment cannot "
                                 f"be less than start offset = {d['startOffset']}")
    if not d["segmentLeaderEpochs"]:
        raise CorruptRecordError("segmentLeaderEpochs can not be null or empty")
    if api_key == 3:
        return (f"RemoteLogSegmentMetadataSnapshot{{segmentId={uuid_to_kafka_str(d['segmentId'])}, "
                f"startOffset={d['startOffset']}, endOffset={d['endOffset']}, maxTimestampMs={d['maxTimestampMs']}, "
                f"segmentLeaderEpochs={_epochs(d['segmentLeaderEpochs'])}, "
                f"segmentSizeInBytes={d['segmentSizeInBytes']}, customMetadata={_custom(d['customMetadata'])}, "
                f"state={state}, txnIdxEmpty={_bool(d['txnIndexEmpty'])}}}")
    return (f"RemoteLogSegmentMetadata{{remoteLogSegmentId={_segment_id_text(d['remoteLogSegmentId'])}, "
            f"startOffset={d['startOffset']}, endOffset={d['endOffset']}, brokerId={d['brokerId']}, "
            f"maxTimestampMs={d['maxTimestampMs']}, eventTimestampMs={d['eventTimestampMs']}, "
            f"segmentLeaderEpochs={_epochs(d['segmentLeaderEpochs'])}, segmentSizeInBytes={d['segmentSizeInBytes']}, "
            f"customMetadata={_custom(d['customMetadata'])}, state={state}, txnIdxEmpty={_bool(d['txnIndexEmpty'])}}}")


def format_remote_log_metadata(value: Buf | None, offset: int = 0) -> str:
    """DumpLogSegments ``--remote-log-metadata-decoder`` text for one record: ``payload: <toString()>`` of the
    ``RemoteLogMetadata`` object (``RemoteLogSegmentMetadata{remoteLogSegmentId=RemoteLogSegmentId{...}, ...}``),
    or ``payload: Error at offset <offset>, skipping. <message>`` with Kafka's message."""
    try:
        if value is None:
            raise CorruptRecordError("null")
        api_key, _, data = parse_remote_log_metadata(value)
        text = _text(api_key, data)
    except CorruptRecordError as e:
        reason = e.reason
        if reason.startswith(("Failed to deserialize", "Error while reading")):
            reason = reason.split(": ", 1)[0]  # Kafka's message omits the cause
        elif reason.startswith("Unknown metadata id"):
            reason = "org.apache.kafka.common.errors.UnsupportedVersionException: " + reason
        return f"payload: Error at offset {offset}, skipping. {reason}"
    return f"payload: {text}"
