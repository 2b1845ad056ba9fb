"""What ``__consumer_offsets`` and ``__transaction_state`` share: Kafka's ``CoordinatorRecordSerde`` framing
(key = int16 record type + key message, value = int16 version + value message, null value = tombstone) and
DumpLogSegments' coordinator-record output (``key: {"type":"<t>","data":{...}} payload: {"version":"<v>",
"data":{...}}`` or ``payload: <DELETE>``, with Kafka's "skipping" messages for bad records).

DumpLogSegments' output differs between releases; ``dialect`` picks the behaviour verified against a release:

* ``"4.3"`` (Kafka 4.3.1): value versions outside a record's ``validVersions`` are errors ("Found an unknown
  record version ...");
* ``"3.9"`` (Kafka 3.9.2): any value version is read, as Kafka's generated code does.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal, NamedTuple

from kafkalog.storage.decoders.common import jackson_dumps
from kafkalog.storage.decoders.readable import kafka_reason
from kafkalog.storage.decoders.schema import Message
from kafkalog.storage.decoders.spec import Versions
from kafkalog.storage.errors import CorruptRecordError

__all__ = ["DIALECTS", "Dialect", "RecordType", "format_record", "parse_key", "parse_value", "read_version"]

Buf = bytes | bytearray | memoryview
Dialect = Literal["3.9", "4.3"]
DIALECTS: tuple[Dialect, ...] = ("3.9", "4.3")
_I16 = struct.Struct(">h")


class RecordType(NamedTuple):
    name: str
    key: Message
    value: Message
    older: tuple[Message, ...] = ()  # older incompatible layouts, tried when ``value`` does not fit exactly
    value_versions: Versions | None = None  # versions a 4.3 reader accepts (default ``value.valid``)


def read_version(buf: Buf, what: str) -> int:
    if len(buf) < 2:
        raise CorruptRecordError(f"Could not read version from {what}'s buffer.", position=0)
    return _I16.unpack_from(buf, 0)[0]


def _wrap(e: CorruptRecordError, version: int, what: str) -> CorruptRecordError:
    return CorruptRecordError(
        f"Could not read record with version {version} from {what}'s buffer due to: {kafka_reason(e)}.",
        position=e.position,
    )


def parse_key(types: Mapping[int, RecordType], key: Buf) -> tuple[int, dict[str, Any] | None]:
    """``(record_type, fields)``; fields is None for an unknown record type."""
    record_type = read_version(key, "key")
    spec = types.get(record_type)
    if spec is None:
        return record_type, None
    try:
        data, _ = spec.key.read(key, 0, 2)
    except CorruptRecordError as e:
        raise _wrap(e, record_type, "key") from None
    return record_type, data


def parse_value(types: Mapping[int, RecordType], record_type: int, value: Buf,
                check_version: bool = False) -> tuple[Message, int, dict[str, Any]]:
    """``(spec used, version, fields)`` of a non-null value."""
    spec = types.get(record_type)
    if spec is None:
        raise CorruptRecordError(f"Unknown record type {record_type}")
    version = read_version(value, "value")
    if check_version and version not in (spec.value_versions or spec.value.valid):
        raise CorruptRecordError(f"Found an unknown record version {version} for {record_type} type", position=0)
    data: dict[str, Any] | None = None
    error: CorruptRecordError | None = None
    try:
        data, end = spec.value.read(value, version, 2)
        if end == len(value) or not spec.older:
            return spec.value, version, data
    except CorruptRecordError as e:
        if not spec.older:
            raise _wrap(e, version, "value") from None
        error = e
    for alt in spec.older:
        try:
            alt_data, end = alt.read(value, version, 2)
        except CorruptRecordError:
            continue
        if end == len(value):
            return alt, version, alt_data
    if data is not None:
        return spec.value, version, data
    assert error is not None
    raise _wrap(error, version, "value")


ValueJson = Callable[[int, Message, int, dict[str, Any]], dict[str, Any]]


def _plain_json(record_type: int, msg: Message, version: int, fields: dict[str, Any]) -> dict[str, Any]:
    return msg.to_json(fields, version)


def format_record(types: Mapping[int, RecordType], key: Buf | None, value: Buf | None, offset: int, *,
                  dialect: Dialect, known: Collection[int], what: str,
                  value_json: ValueJson = _plain_json) -> str:
    """One record as DumpLogSegments' coordinator-record parsers print it (see module docstring)."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r} (one of {', '.join(DIALECTS)})")
    if key is None:
        raise CorruptRecordError(f"Failed to decode message at offset {offset} using {what} decoder "
                                 "(message had a missing key)")
    try:
        record_type = read_version(key, "key")
        if record_type not in known or record_type not in types:
            return f"key: Unknown record type {record_type} at offset {offset}, skipping."
        _, fields = parse_key(types, key)
        assert fields is not None
        key_json = {"type": str(record_type), "data": types[record_type].key.to_json(fields, 0)}
        if value is None:
            return f"key: {jackson_dumps(key_json)} payload: <DELETE>"
        msg, version, vfields = parse_value(types, record_type, value, check_version=dialect == "4.3")
        payload = {"version": str(version), "data": value_json(record_type, msg, version, vfields)}
    except CorruptRecordError as e:
        return f"key: Error at offset {offset}, skipping. {e.reason}"
    return f"key: {jackson_dumps(key_json)} payload: {jackson_dumps(payload)}"
