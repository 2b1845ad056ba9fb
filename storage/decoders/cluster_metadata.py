"""Decoder for KRaft metadata records (``__cluster_metadata`` and snapshots; docs/formats.md#internal-topics).

A record value is ``uvarint frameVersion`` (1; 0 was the 2.8 preview and is decoded too), ``uvarint apiKey``
(the ``MetadataRecordType`` id), ``uvarint version``, then the generated message; nothing may follow it.
Keys are null. Control records of the same log are decoded by :mod:`.kraft_control`.

Besides decoding, :class:`MetadataState` replays ``TopicRecord`` / ``ConfigRecord`` / ``RemoveTopicRecord``
so the retention and compaction engines can learn topic ids and per-topic config overrides from a data dir's
metadata log (:func:`topic_configs`, :func:`topic_ids`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kafkalog.storage.codec.varint import read_uvarint, write_uvarint
from kafkalog.storage.decoders.common import b64, jackson_dumps, uuid_to_kafka_str
from kafkalog.storage.decoders.metadata_schemas import BROKER_RESOURCE, METADATA_RECORDS, TOPIC_RESOURCE
from kafkalog.storage.decoders.schema import Message
from kafkalog.storage.errors import CorruptRecordError

__all__ = [
    "METADATA_RECORDS",
    "MetadataRecord",
    "MetadataState",
    "broker_configs",
    "decode_metadata_record",
    "encode_metadata_record",
    "format_metadata_record",
    "metadata_type_name",
    "parse_metadata_header",
    "parse_metadata_record",
    "topic_configs",
    "topic_ids",
]

Buf = bytes | bytearray | memoryview


def _snake_upper(name: str) -> str:
    """``MessageGenerator.toSnakeCase(name).toUpperCase()``: TopicRecord -> TOPIC_RECORD."""
    out = []
    prev_cap = True
    for ch in name:
        if ch.isupper():
            if not prev_cap:
                out.append("_")
            out.append(ch.lower())
            prev_cap = True
        else:
            out.append(ch)
            prev_cap = False
    return "".join(out).upper()


_TYPE_NAMES = {k: _snake_upper(m.name) for k, m in METADATA_RECORDS.items()}


def metadata_type_name(api_key: int) -> str | None:
    """``MetadataRecordType`` constant name (``TOPIC_RECORD``) or None for an unknown api key."""
    return _TYPE_NAMES.get(api_key)


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """One decoded metadata record. ``data`` holds raw field values (see :mod:`.schema`) and is None for an
    api key this decoder does not know, in which case ``body`` holds the undecoded message bytes."""

    frame_version: int
    api_key: int
    version: int
    name: str | None
    data: dict[str, Any] | None
    body: bytes = b""

    @property
    def message(self) -> Message | None:
        return METADATA_RECORDS.get(self.api_key)


def _short(buf: Buf, pos: int, end: int, entity: str) -> tuple[int, int]:
    try:
        v, pos = read_uvarint(buf, pos, end)
    except CorruptRecordError as e:
        raise CorruptRecordError(f"Error while reading {entity}: {e.reason}", position=e.position) from None
    if v > 0x7FFF:
        raise CorruptRecordError(f"Value for {entity} was too large.", position=pos)
    return v, pos


def parse_metadata_header(value: Buf) -> tuple[int, int, int, int]:
    """``(frame_version, api_key, version, body_position)`` of a metadata record value."""
    end = len(value)
    frame, pos = _short(value, 0, end, "frame version")
    if frame not in (0, 1):
        raise CorruptRecordError(f"Could not deserialize metadata record due to unknown frame version {frame}"
                                 "(only frame version 1 is supported)", position=0)
    api_key, pos = _short(value, pos, end, "type")
    version, pos = _short(value, pos, end, "version")
    return frame, api_key, version, pos


def parse_metadata_record(value: Buf) -> MetadataRecord:
    """Decode a metadata record value (raw fields). Raises CorruptRecordError."""
    if value is None:
        raise CorruptRecordError("metadata record without a value")
    frame, api_key, version, pos = parse_metadata_header(value)
    msg = METADATA_RECORDS.get(api_key)
    if msg is None:
        return MetadataRecord(frame, api_key, version, None, None, bytes(value[pos:]))
    try:
        data, end = msg.read(value, version, pos)
    except CorruptRecordError as e:
        raise CorruptRecordError(f"Failed to deserialize record with type {api_key}: {e.reason}",
                                 position=e.position) from None
    if end != len(value):
        raise CorruptRecordError(f"Found {len(value) - end} byte(s) of garbage after {api_key}", position=end)
    return MetadataRecord(frame, api_key, version, msg.name, data)


def encode_metadata_record(api_key: int, data: dict[str, Any], version: int = 0) -> bytes:
    """The record value ``MetadataRecordSerde.serialize`` writes (frame version 1, ``apiKey``, ``version``, the
    message) for raw fields ``data`` as :func:`parse_metadata_record` returns them (missing fields get their
    defaults); the inverse of :func:`parse_metadata_record` for a known ``api_key``."""

    out = bytearray()
    for v in (1, api_key, version):
        write_uvarint(v, out)
    return bytes(out) + METADATA_RECORDS[api_key].write(data, version)


def _to_json(rec: MetadataRecord) -> dict[str, Any]:
    msg = rec.message
    if msg is None or rec.data is None:
        return {"type": "UnknownRecord", "apiKey": rec.api_key, "version": rec.version, "data": b64(rec.body)}
    return {"type": _TYPE_NAMES[rec.api_key], "version": rec.version, "data": msg.to_json(rec.data, rec.version)}


def decode_metadata_record(value: Buf) -> dict[str, Any]:
    """``{"type": "TOPIC_RECORD", "version": 0, "data": {...}}`` as DumpLogSegments
    ``--cluster-metadata-decoder`` prints it, or ``{"type": "UnknownRecord", "apiKey": n, "version": v,
    "data": <base64 of the message bytes>}`` for an unknown api key. Raises CorruptRecordError."""
    return _to_json(parse_metadata_record(value))


def format_metadata_record(value: Buf | None, offset: int = 0) -> str:
    """DumpLogSegments ``--cluster-metadata-decoder`` text for one record: ``payload: {json}`` or
    ``payload: Error at <offset>, skipping. <message>`` (Kafka's messages, including unknown api keys and
    frame version 0, which Kafka rejects)."""
    try:
        if value is None:
            raise CorruptRecordError("null")
        if parse_metadata_header(value)[0] == 0:
            raise CorruptRecordError(
                "Could not deserialize metadata record with frame version 0. Note that upgrades from the "
                "preview release of KRaft in 2.8 to newer versions are not supported.")
        rec = parse_metadata_record(value)
        if rec.data is None:
            raise CorruptRecordError("org.apache.kafka.common.errors.UnsupportedVersionException: "
                                     f"Unknown metadata id {rec.api_key}")
    except CorruptRecordError as e:
        reason = e.reason
        if reason.startswith(("Failed to deserialize", "Error while reading")):
            reason = reason.split(": ", 1)[0]  # Kafka's message omits the cause
        return f"payload: Error at {offset}, skipping. {reason}"
    return f"payload: {jackson_dumps(_to_json(rec))}"


# ---------------------------------------------------------------------------------------------- replay

_REPLAYED = frozenset({2, 4, 9})  # TopicRecord, ConfigRecord, RemoveTopicRecord


def _values(records: Iterable[Any]) -> Iterator[Any]:
    for item in records:
        if item is None or isinstance(item, MetadataRecord | bytes | bytearray | memoryview):
            yield item
        else:
            yield getattr(item, "value", None)


class MetadataState:
    """Replays metadata records to track topic ids and config overrides (what ``ReplicationControlManager``
    and ``ConfigurationControlManager`` do for these records): ``TopicRecord`` creates a topic,
    ``RemoveTopicRecord`` deletes it *and its configs*, ``ConfigRecord`` sets a config (null value deletes).

    Feed records in log order: a snapshot first, then the log records after it. Records of other types are
    skipped without decoding; control records and records without a value are ignored. With ``strict=False``
    undecodable records are skipped too (``self.errors`` counts them)."""

    def __init__(self, strict: bool = True):
        self.strict = strict
        self.topic_ids: dict[str, str] = {}
        self._names_by_id: dict[str, str] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.sources: dict[tuple[int, str, str], str] = {}  # (resource type, name, config) -> label
        self.label = ""  # where the records being replayed come from (set by the caller)
        self.errors = 0

    def replay_all(self, records: Iterable[Any]) -> MetadataState:
        """Replay record values (bytes), objects with a ``.value`` or :class:`MetadataRecord`s."""
        for v in _values(records):
            self.replay(v)
        return self

    def replay(self, value: MetadataRecord | Buf | None) -> None:
        if value is None:
            return
        try:
            if isinstance(value, MetadataRecord):
                rec = value
            else:
                _, api_key, _, _ = parse_metadata_header(value)
                if api_key not in _REPLAYED:
                    return
                rec = parse_metadata_record(value)
        except CorruptRecordError:
            if self.strict:
                raise
            self.errors += 1
            return
        if rec.data is None:
            return
        d = rec.data
        if rec.api_key == 2:
            tid = uuid_to_kafka_str(d["topicId"])
            self.topic_ids[d["name"]] = tid
            self._names_by_id[tid] = d["name"]
        elif rec.api_key == 9:
            name = self._names_by_id.pop(uuid_to_kafka_str(d["topicId"]), None)
            if name is not None:
                self.topic_ids.pop(name, None)
                self.configs.pop((TOPIC_RESOURCE, name), None)
        elif rec.api_key == 4:
            key = (d["resourceType"], d["resourceName"])
            if d["value"] is None:
                cfg = self.configs.get(key)
                if cfg is not None:
                    cfg.pop(d["name"], None)
                    if not cfg:
                        del self.configs[key]
            else:
                self.configs.setdefault(key, {})[d["name"]] = d["value"]
                self.sources[(*key, d["name"])] = self.label

    def topic_configs(self) -> dict[str, dict[str, str]]:
        out = {name: dict(self.configs.get((TOPIC_RESOURCE, name), {})) for name in self.topic_ids}
        for (rtype, name), cfg in self.configs.items():
            if rtype == TOPIC_RESOURCE and name not in out:
                out[name] = dict(cfg)
        return out

    def broker_configs(self) -> dict[str, dict[str, str]]:
        """Dynamic broker configs by broker id string; ``""`` holds the cluster-wide defaults."""
        return {name: dict(cfg) for (rtype, name), cfg in self.configs.items() if rtype == BROKER_RESOURCE}


def topic_configs(records: Iterable[Any], strict: bool = True) -> dict[str, dict[str, str]]:
    """Per-topic config overrides after replaying ``records`` (values, records with ``.value``, or
    :class:`MetadataRecord`): every live topic (``{}`` if it has no overrides), plus topics that have
    configs but whose ``TopicRecord`` was not seen."""
    return MetadataState(strict).replay_all(records).topic_configs()


def topic_ids(records: Iterable[Any], strict: bool = True) -> dict[str, str]:
    """Live topic name -> topic id in Kafka's string form (22-char base64url, as ``partition.metadata``)."""
    return dict(MetadataState(strict).replay_all(records).topic_ids)


def broker_configs(records: Iterable[Any], strict: bool = True) -> dict[str, dict[str, str]]:
    """Dynamic broker config overrides (``""`` = cluster default) after replaying ``records``."""
    return MetadataState(strict).replay_all(records).broker_configs()
