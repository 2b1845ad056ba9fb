"""Building record batches (v2) and message sets (v0/v1) byte-exactly (``MemoryRecordsBuilder`` rules).

Records may be :class:`Record` objects or tuples ``(offset, timestamp, key, value[, headers])``; an offset of
``None`` means "assign the next one". Every header field is settable, including those the broker sets (base
offset, partition leader epoch, LogAppendTime, control, delete horizon).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from kafkalog.storage.codec.compression import compress
from kafkalog.storage.codec.crc import crc32, crc32c
from kafkalog.storage.codec.varint import write_varint, write_varlong
from kafkalog.storage.errors import CorruptRecordError
from kafkalog.storage.records.batch import (
    CONTROL_MASK,
    CREATE_TIME,
    DELETE_HORIZON_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    RecordBatch,
)
from kafkalog.storage.records.control import ABORT, COMMIT, control_key, end_txn_marker_value
from kafkalog.storage.records.legacy import LegacyBatch
from kafkalog.storage.records.record import Record

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


def _as_record(r, i: int, base_offset: int | None) -> Record:
    if isinstance(r, Record):
        return r
    offset, timestamp, key, value = r[0], r[1], r[2], r[3]
    headers = list(r[4]) if len(r) > 4 and r[4] is not None else []
    if offset is None:
        offset = (base_offset or 0) + i
    return Record(offset, timestamp, key, value, headers)


def _write_nullable_bytes(data, out: bytearray) -> None:
    """A record's key, value or header value: its length as a varint (-1 for null) then its bytes."""
    if data is None:
        out.append(0x01)
    else:
        write_varint(len(data), out)
        out += data


def encode_record(out: bytearray, attributes: int, timestamp_delta: int, offset_delta: int, key, value,
                  headers) -> None:
    """Append one v2 record (length-prefixed) to ``out``."""
    body = bytearray()
    body.append(attributes & 0xFF)
    write_varlong(timestamp_delta, body)
    write_varint(offset_delta, body)
    _write_nullable_bytes(key, body)
    _write_nullable_bytes(value, body)
    write_varint(len(headers), body)
    for hk, hv in headers:
        _write_nullable_bytes(hk.encode("utf-8", "surrogateescape") if isinstance(hk, str) else bytes(hk), body)
        _write_nullable_bytes(hv, body)
    write_varint(len(body), out)
    out += body


def build_batch(
    records: Iterable = (),
    *,
    base_offset: int | None = None,
    codec: int = 0,
    timestamp_type: int = CREATE_TIME,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    log_append_time: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
    keep_deltas: bool = False,
    compressed_payload=None,
    records_count: int | None = None,
    level: int | None = None,
    attributes_high_byte: int = 0,
    strict: bool = False,
) -> bytes:
    """Build one v2 record batch.

    * A record whose offset is more than a 32-bit delta from ``base_offset`` is a ``ValueError``
      (``MemoryRecordsBuilder``: "Maximum offset delta exceeded"). ``strict`` (records from user input, which must
      read back as given) also refuses an offset past 64 bits and a timestamp more than a 64-bit delta from the
      first; a rebuild of parsed records does not (Kafka's long arithmetic wraps there).

    * ``base_offset`` defaults to the first record's offset (0 for an empty batch).
    * ``base_timestamp`` defaults to the delete horizon when one is given, else the first record's timestamp
      (``-1`` for an empty batch); ``max_timestamp`` to ``log_append_time`` for LogAppendTime batches, else the
      largest record timestamp.
    * ``keep_deltas``: use each Record's stored ``attributes``/``timestamp_delta``/``offset_delta`` (exact
      rebuild of a parsed batch) instead of deriving them.
    * ``compressed_payload``: the records region exactly as stored (carried through unchanged); then
      ``records`` is only used for the count when ``records_count`` is not given.
    """
    recs: Sequence[Record] = [_as_record(r, i, base_offset) for i, r in enumerate(records)]
    if base_offset is None:
        base_offset = recs[0].offset if recs else 0
    if delete_horizon_ms is not None and delete_horizon_ms >= 0:
        has_horizon = True
        if base_timestamp is None:
            base_timestamp = delete_horizon_ms
    else:
        has_horizon = False
    if base_timestamp is None:
        base_timestamp = recs[0].timestamp if recs else NO_TIMESTAMP
    if timestamp_type == LOG_APPEND_TIME and max_timestamp is None:
        max_timestamp = log_append_time if log_append_time is not None else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in recs), default=NO_TIMESTAMP)
    if last_offset_delta is None:
        last_offset_delta = (recs[-1].offset - base_offset) if recs else 0
    attributes = codec & 0x07
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if has_horizon:
        attributes |= DELETE_HORIZON_MASK
    attributes |= (attributes_high_byte & 0xFF) << 8

    if compressed_payload is not None:
        payload = bytes(compressed_payload)
        count = records_count if records_count is not None else len(recs)
    else:
        raw = bytearray()
        for i, r in enumerate(recs):
            if keep_deltas and r.timestamp_delta is not None and r.offset_delta is not None:
                encode_record(raw, r.attributes, r.timestamp_delta, r.offset_delta, r.key, r.value, r.headers)
            else:
                od, td = r.offset - base_offset, r.timestamp - base_timestamp
                if not -_SPAN32 <= od < _SPAN32 or (strict and not (-_SPAN64 <= td < _SPAN64 and r.offset < _SPAN64)):
                    raise ValueError(_width_error(i, r, base_offset, base_timestamp))
                encode_record(raw, r.attributes if keep_deltas else 0, td, od, r.key, r.value, r.headers)
        count = records_count if records_count is not None else len(recs)
        payload = compress(codec, raw, magic=2, level=level) if (codec and recs) else bytes(raw)
    if not (-_SPAN64 <= base_offset < _SPAN64 and -_SPAN32 <= last_offset_delta < _SPAN32):
        raise ValueError(f"base offset {base_offset} with last offset delta {last_offset_delta} does not fit a "
                         "batch header (64-bit offset, 32-bit delta)")
    batch_length = HEADER_SIZE - 12 + len(payload)
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(out, 0, base_offset, batch_length, partition_leader_epoch, 2, 0,
                     _signed16(attributes), last_offset_delta, base_timestamp, max_timestamp, producer_id,
                     producer_epoch, base_sequence, count)
    out += payload
    _U32.pack_into(out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


# The widths a batch writes offsets and timestamps in: offsets int64, a record's offset delta int32, timestamp
# deltas int64 (``build_batch``'s ``strict``). Checked where each delta is computed.
_SPAN64 = 1 << 63
_SPAN32 = 1 << 31


def _width_error(i: int, r: Record, base_offset: int, base_timestamp: int) -> str:
    if not -_SPAN64 <= r.timestamp - base_timestamp < _SPAN64:
        return (f"record {i}: timestamp {r.timestamp} is more than a 64-bit delta from the batch's first timestamp "
                f"{base_timestamp}")
    return (f"record {i}: offset {r.offset} is not within a batch's 32-bit offset delta of its base offset "
            f"{base_offset} (or does not fit 64 bits)")


def _signed16(v: int) -> int:
    v &= 0xFFFF
    return v - 0x10000 if v >= 0x8000 else v


def _kept_header(batch: RecordBatch) -> dict:
    """The header fields a rebuilt batch keeps from ``batch`` (the cleaner's empty batch, a rebuild)."""
    return {"base_offset": batch.base_offset, "timestamp_type": batch.timestamp_type,
            "max_timestamp": batch.max_timestamp, "producer_id": batch.producer_id,
            "producer_epoch": batch.producer_epoch, "base_sequence": batch.base_sequence,
            "partition_leader_epoch": batch.partition_leader_epoch, "is_transactional": batch.is_transactional,
            "is_control": batch.is_control, "last_offset_delta": batch.last_offset_delta}


def build_empty_batch_header(batch: RecordBatch) -> bytes:
    """The 61-byte retained empty batch the cleaner writes (``DefaultRecordBatch.writeEmptyHeader``)."""
    return build_batch((), base_timestamp=NO_TIMESTAMP, **_kept_header(batch))


def build_end_txn_marker(
    *,
    offset: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    timestamp: int,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A COMMIT/ABORT marker batch as the broker writes it (78 bytes, uncompressed, CreateTime)."""
    rec = Record(offset, timestamp, control_key(COMMIT if commit else ABORT), end_txn_marker_value(coordinator_epoch))
    return build_batch(
        [rec],
        base_offset=offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )


# ------------------------------------------------------------------------------------------ legacy


def build_legacy_message(magic: int, offset: int, timestamp: int, key, value, attributes: int = 0) -> bytes:
    """One v0/v1 log entry (offset, size, message) with a correct CRC32."""
    if magic not in (0, 1):
        raise CorruptRecordError(f"legacy messages have magic 0 or 1, not {magic}")
    body = bytearray()
    body.append(magic)
    body.append(attributes & 0xFF)
    if magic == 1:
        body += _I64.pack(timestamp)
    for field in (key, value):
        if field is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(field))
            body += field
    crc = crc32(body)
    return _I64.pack(offset) + _I32.pack(4 + len(body)) + _U32.pack(crc) + bytes(body)


def build_legacy(
    records: Iterable,
    *,
    magic: int,
    codec: int = 0,
    timestamp_type: int = CREATE_TIME,
    log_append_time: int | None = None,
    base_offset: int | None = None,
    wrapper_offset: int | None = None,
    wrapper_timestamp: int | None = None,
    compressed_payload=None,
    level: int | None = None,
) -> bytes:
    """A v0/v1 message set: one entry per record when ``codec`` is 0, else one compressed wrapper.

    Inner offsets of a compressed set are absolute for v0 and relative (0..n-1) for v1; the wrapper offset is
    the last absolute offset and (v1) the wrapper timestamp the max inner timestamp, or the append time.
    """
    recs = [_as_record(r, i, base_offset) for i, r in enumerate(records)]
    if not recs and compressed_payload is None:
        raise CorruptRecordError("a legacy message set cannot be empty")
    if codec == 4:
        raise CorruptRecordError("zstd compression is not allowed with message format v0/v1")
    ts_bit = TIMESTAMP_TYPE_MASK if (magic == 1 and timestamp_type == LOG_APPEND_TIME) else 0

    def ts_of(r: Record) -> int:
        if magic == 0:
            return NO_TIMESTAMP
        if ts_bit and log_append_time is not None:
            return log_append_time
        return r.timestamp

    if codec == 0:
        return b"".join(build_legacy_message(magic, r.offset, ts_of(r), r.key, r.value, ts_bit) for r in recs)
    if compressed_payload is None:
        first = recs[0].offset
        inner = bytearray()
        for i, r in enumerate(recs):
            inner_off = r.offset if magic == 0 else r.offset - first
            del i
            inner += build_legacy_message(magic, inner_off, ts_of(r), r.key, r.value, ts_bit)
        compressed_payload = compress(codec, inner, magic=magic, level=level)
    if wrapper_offset is None:
        wrapper_offset = recs[-1].offset
    if wrapper_timestamp is None:
        if magic == 0:
            wrapper_timestamp = NO_TIMESTAMP
        elif ts_bit and log_append_time is not None:
            wrapper_timestamp = log_append_time
        else:
            wrapper_timestamp = max(r.timestamp for r in recs)
    return build_legacy_message(magic, wrapper_offset, wrapper_timestamp, None, bytes(compressed_payload),
                                (codec & 0x07) | ts_bit)


# ---------------------------------------------------------------------------------------- rebuild


def _reencoded_section(batch: RecordBatch) -> bytearray:
    """The records section of ``batch`` re-encoded from its decoded records (stored deltas and attributes kept),
    decoded and encoded a bounded chunk at a time; raises CorruptRecordError as ``records()`` would."""
    raw = bytearray()
    for chunk in batch.record_chunks(full=True):
        for r in chunk:
            encode_record(raw, r.attributes, r.timestamp_delta, r.offset_delta, r.key, r.value, r.headers)
    return raw


def rebuild(batch: RecordBatch | LegacyBatch, records: list[Record] | None = None, *,
            codec: int | None = None, level: int | None = None) -> bytes:
    """Rebuild a parsed batch from its fields.

    For uncompressed batches the records are re-encoded from their parsed fields; for compressed batches the
    compressed payload is carried through unchanged (unless ``records`` is given, then it is re-compressed
    with the same codec). The result equals the original bytes for every valid batch Kafka writes.

    ``codec``/``level`` (v2 only) re-compress the batch with another codec, every other field kept.
    """
    if isinstance(batch, RecordBatch):
        recompress = codec is not None and codec != batch.codec
        carry = batch.codec != 0 and records is None and not recompress
        payload: bytes | memoryview | None = None
        if carry:
            payload = batch.records_payload()
        elif records is None:  # re-encoded a chunk of records at a time: no list of every record
            new_codec = batch.codec if codec is None else codec
            section = _reencoded_section(batch)
            payload = compress(new_codec, section, magic=2, level=level) if (new_codec and batch.records_count) \
                else bytes(section)
        return build_batch(
            records or [],
            codec=batch.codec if codec is None else codec,
            base_timestamp=batch.base_timestamp,
            delete_horizon_ms=batch.delete_horizon_ms if batch.has_delete_horizon else None,
            keep_deltas=True,
            compressed_payload=payload,
            records_count=batch.records_count if payload is not None else None,
            attributes_high_byte=batch.buf[21] if codec is None else 0,  # a re-compression is a fresh build
            level=level,
            **_kept_header(batch),
        )
    msg = batch.message()
    return build_legacy_message(msg.magic, msg.offset, msg.timestamp, msg.key, msg.value, msg.attributes)
