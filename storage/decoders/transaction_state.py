"""Decoder for ``__transaction_state`` records (docs/formats.md#internal-topics).

Key = int16 version (0) + ``TransactionLogKey``; value = int16 version (0, or 1 = flexible with tagged fields,
KIP-890) + ``TransactionLogValue``; a null value is a tombstone. :func:`format_transaction_record` gives the
DumpLogSegments ``--transaction-log-decoder`` text: Kafka 4.3 prints the same JSON as the offsets decoder
(dialect ``"4.3"``); Kafka 3.9 printed ``transaction_metadata::transactionalId=...`` / ``producerId:...``
text (dialect ``"3.9"``), with the partitions in Scala ``mutable.HashSet`` order (:func:`scala_hashset_order`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

from kafkalog.storage.decoders.common import java_string_hash, to_int32
from kafkalog.storage.decoders.coordinator import Dialect, RecordType, format_record
from kafkalog.storage.decoders.schema import Message
from kafkalog.storage.decoders.spec import Field as F
from kafkalog.storage.errors import CorruptRecordError

__all__ = [
    "TRANSACTION_LOG_KEY",
    "TRANSACTION_LOG_VALUE",
    "TRANSACTION_RECORD_TYPES",
    "TRANSACTION_STATES",
    "decode_transaction_key",
    "decode_transaction_record",
    "decode_transaction_value",
    "format_transaction_record",
    "parse_transaction_key",
    "parse_transaction_value",
    "scala_hashset_order",
]

Buf = bytes | bytearray | memoryview
_I16 = struct.Struct(">h")

TRANSACTION_LOG_KEY = Message("TransactionLogKey", "0", "none", [F("TransactionalId", "string", "0")])

TRANSACTION_LOG_VALUE = Message("TransactionLogValue", "0-1", "1+", [
    F("ProducerId", "int64", "0+"),
    F("PreviousProducerId", "int64", "1+", tagged="1+", tag=0, default=-1),
    F("NextProducerId", "int64", "1+", tagged="1+", tag=1, default=-1),
    F("ProducerEpoch", "int16", "0+"),
    F("NextProducerEpoch", "int16", "1+", tagged="1+", tag=3, default=-1),  # 4.1+
    F("TransactionTimeoutMs", "int32", "0+"),
    F("TransactionStatus", "int8", "0+"),
    F("TransactionPartitions", "[]PartitionsSchema", "0+", nullable="0+", fields=[
        F("Topic", "string", "0+"),
        F("PartitionIds", "[]int32", "0+"),
    ]),
    F("TransactionLastUpdateTimestampMs", "int64", "0+"),
    F("TransactionStartTimestampMs", "int64", "0+"),
    F("ClientTransactionVersion", "int16", "1+", tagged="1+", tag=2, default=0),
])

TRANSACTION_RECORD_TYPES = {0: RecordType("TransactionLog", TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)}

# TransactionState ids (kafka.coordinator.transaction.TransactionState)
TRANSACTION_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
                      "Dead", "PrepareEpochFence")


def _version(buf: Buf, what: str) -> int:
    if len(buf) < 2:
        raise CorruptRecordError(f"cannot read the version of the {what}: {len(buf)} byte(s)", position=0)
    return _I16.unpack_from(buf, 0)[0]


def parse_transaction_key(key: Buf) -> tuple[int, str | None]:
    """``(version, transactionalId)``; the id is None for an unknown key version (Kafka's ``UnknownKey``)."""
    version = _version(key, "key")
    if version not in TRANSACTION_LOG_KEY.valid:
        return version, None
    data, _ = TRANSACTION_LOG_KEY.read(key, version, 2)
    return version, data["transactionalId"]


def parse_transaction_value(value: Buf | None) -> tuple[int, dict[str, Any]] | None:
    """``(version, fields)`` or None for a tombstone. Unknown versions raise (Kafka throws too)."""
    if value is None:
        return None
    version = _version(value, "value")
    if version not in TRANSACTION_LOG_VALUE.valid:
        raise CorruptRecordError(f"Unknown version {version} from the transaction log message value", position=0)
    data, _ = TRANSACTION_LOG_VALUE.read(value, version, 2)
    return version, data


def state_name(status: int) -> str:
    if 0 <= status < len(TRANSACTION_STATES):
        return TRANSACTION_STATES[status]
    raise CorruptRecordError(f"Unknown transaction state id {status} from the transaction status message")


def decode_transaction_key(key: Buf) -> dict[str, Any]:
    """``{"type": "0", "data": {"transactionalId": ...}}`` (as DumpLogSegments 4.3); an unknown key version
    gives ``"data": None`` and ``"unknownRecordType": True``."""
    version, tid = parse_transaction_key(key)
    if tid is None:
        return {"type": str(version), "data": None, "unknownRecordType": True}
    return {"type": str(version), "data": {"transactionalId": tid}}


def decode_transaction_value(value: Buf | None) -> dict[str, Any] | None:
    """``{"version": "<v>", "data": {...}, "state": "<name>"}`` or None for a tombstone. ``data`` is what
    DumpLogSegments 4.3 prints; ``state`` is the ``TransactionStatus`` name (None if unknown)."""
    parsed = parse_transaction_value(value)
    if parsed is None:
        return None
    version, data = parsed
    status = data["transactionStatus"]
    name = TRANSACTION_STATES[status] if 0 <= status < len(TRANSACTION_STATES) else None
    return {"version": str(version), "data": TRANSACTION_LOG_VALUE.to_json(data, version), "state": name}


def decode_transaction_record(key: Buf, value: Buf | None) -> dict[str, Any]:
    """``{"key": ..., "payload": ... | None}``; payload None is a tombstone (or a key of unknown version)."""
    if key is None:
        raise CorruptRecordError("__transaction_state record without a key")
    k = decode_transaction_key(key)
    if k["data"] is None:
        return {"key": k, "payload": None}
    return {"key": k, "payload": decode_transaction_value(value)}


def scala_hashset_order(groups: Iterable[Sequence[tuple[str, int]]]) -> list[tuple[str, int]]:
    """Iteration order of a Scala 2.13 ``mutable.HashSet[TopicPartition]`` built as ``TransactionLog``
    does: ``set ++= group.toSet`` for each group in order (duplicates dropped).

    Model: table of 2^k buckets (initially 16, load factor 0.75), improved hash ``h ^ (h >>> 16)`` of
    ``TopicPartition.hashCode``, buckets sorted by hash, ``addAll`` of an immutable set first calls
    ``sizeHint(n)``; sets of at most 4 elements are added one by one (``add`` grows the table at
    ``size + 1 >= threshold``), larger ones (immutable ``HashSet``) without growth checks. Ties between equal
    hashes keep insertion order (the real order of a large immutable set may differ for such ties)."""
    table: list[list[tuple[int, tuple[str, int]]]] = [[] for _ in range(16)]
    size = 0

    def threshold() -> int:
        return int(len(table) * 0.75)

    def grow(newlen: int) -> None:
        nonlocal table
        new: list[list[tuple[int, tuple[str, int]]]] = [[] for _ in range(newlen)]
        for bucket in table:  # splitting preserves the relative order inside each bucket
            for node in bucket:
                new[node[0] & (newlen - 1)].append(node)
        table = new

    def add_elem(tp: tuple[str, int]) -> None:
        nonlocal size
        h0 = to_int32(31 * (31 + tp[1]) + java_string_hash(tp[0]))
        h = to_int32(h0 ^ ((h0 & 0xFFFFFFFF) >> 16))
        bucket = table[h & (len(table) - 1)]
        i = 0
        while i < len(bucket) and bucket[i][0] <= h:
            if bucket[i][0] == h and bucket[i][1] == tp:
                return
            i += 1
        bucket.insert(i, (h, tp))
        size += 1

    def table_size_for(capacity: int) -> int:
        c = max(capacity - 1, 4)
        return min((1 << (c.bit_length() - 1)) * 2, 1 << 30)

    for group in groups:
        elems = list(dict.fromkeys(group))
        n = len(elems)
        target = table_size_for(int((n + 1) / 0.75))
        if target > len(table):
            grow(target)
        for tp in elems:
            if n <= 4 and size + 1 >= threshold():
                grow(len(table) * 2)
            add_elem(tp)
    return [node[1] for bucket in table for node in bucket]


def _payload_text(data: dict[str, Any]) -> str:
    state = state_name(data["transactionStatus"])
    groups: list[list[tuple[str, int]]] = []
    if state != "Empty":
        for p in data["transactionPartitions"] or []:
            groups.append([(p["topic"], pid) for pid in p["partitionIds"]])
    parts = ",".join(f"{t}-{p}" for t, p in scala_hashset_order(groups))
    return (f"producerId:{data['producerId']},producerEpoch:{data['producerEpoch']},state={state},"
            f"partitions=[{parts}],txnLastUpdateTimestamp={data['transactionLastUpdateTimestampMs']},"
            f"txnTimeoutMs={data['transactionTimeoutMs']}")


def format_transaction_record(key: Buf | None, value: Buf | None, offset: int = 0,
                              dialect: Dialect = "4.3") -> str:
    """DumpLogSegments ``--transaction-log-decoder`` text for one record.

    ``"4.3"``: ``key: {"type":"0","data":{...}} payload: {"version":"1","data":{...}}`` / ``payload: <DELETE>``
    and Kafka's "skipping" messages. ``"3.9"``: ``key: transaction_metadata::transactionalId=<id> payload:
    producerId:...`` / ``payload: <DELETE>``, ``key: unknown::version=<v>`` for other key versions; undecodable
    records raise CorruptRecordError there (that tool aborts)."""
    if dialect != "3.9":
        return format_record(TRANSACTION_RECORD_TYPES, key, value, offset, dialect=dialect, known=(0,),
                             what="transaction log")
    if key is None:
        raise CorruptRecordError("__transaction_state record without a key")
    version, tid = parse_transaction_key(key)
    if tid is None:
        return f"key: unknown::version={version}"
    parsed = parse_transaction_value(value)
    payload = "<DELETE>" if parsed is None else _payload_text(parsed[1])
    return f"key: transaction_metadata::transactionalId={tid} payload: {payload}"
