"""Filtering one chunk of a segment (``MemoryRecords.filterTo`` with the cleaner's ``RecordFilter``,
docs/semantics.md#batch-and-record-filtering).

Works per batch on zero-copy views: an unchanged batch is copied verbatim (old CRC, epoch and compressed bytes),
a changed one is rebuilt with ``MemoryRecordsBuilder``'s rules, a batch that must stay for producer state or the
round's upper bound is kept as the 61-byte empty header.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kafkalog.storage.codec.compression import compress
from kafkalog.storage.engine.cleaner.offset_map import OffsetMap
from kafkalog.storage.engine.cleaner.records import scan_retained, splice_records
from kafkalog.storage.engine.cleaner.txn import CleanedTransactionMetadata
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.records.batch import (
    CREATE_TIME,
    DELETE_HORIZON_MASK,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    RecordBatch,
)
from kafkalog.storage.records.builder import build_batch, build_empty_batch_header, build_legacy
from kafkalog.storage.records.reader import iter_batches
from kafkalog.storage.records.record import Record
from kafkalog.storage.records.record_grammar import Slow

DELETE, RETAIN_EMPTY, DELETE_EMPTY = "DELETE", "RETAIN_EMPTY", "DELETE_EMPTY"


class UncleanableError(KafkaLogError):
    """The broker would throw here and mark the partition uncleanable (``IllegalStateException``)."""


@dataclass
class LastRecord:
    """``UnifiedLog.lastRecordsOfActiveProducers`` value: the producer's last data offset (None after a marker
    that bumped the epoch) and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass
class FilterStats:
    messages_read: int = 0
    bytes_read: int = 0
    messages_retained: int = 0
    bytes_retained: int = 0
    invalid_messages: int = 0
    batches_rebuilt: int = 0
    batches_copied: int = 0
    batches_emptied: int = 0


@dataclass
class ChunkResult:
    """What ``filterTo`` returns for one read-buffer chunk, and what ``LogSegment.append`` is called with."""

    output: bytearray = field(default_factory=bytearray)
    bytes_read: int = 0
    max_offset: int = -1
    max_timestamp: int = NO_TIMESTAMP
    shallow_offset_of_max_timestamp: int = -1

    def _update(self, max_timestamp: int, shallow_offset: int, max_offset: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.shallow_offset_of_max_timestamp = shallow_offset
        if max_offset > self.max_offset:
            self.max_offset = max_offset


def _retain_empty(b: RecordBatch, out: bytearray, res: ChunkResult, stats: FilterStats) -> None:
    """``BatchRetention.RETAIN_EMPTY``: the batch's header with no records in its place (it keeps the producer's
    last sequence and epoch)."""
    data = build_empty_batch_header(b)
    out += data
    stats.batches_emptied += 1
    stats.bytes_retained += len(data)
    res._update(b.max_timestamp, b.last_offset, b.last_offset)


class CleanerFilter:
    """The cleaner's ``RecordFilter`` (``Cleaner.cleanInto``'s anonymous class) plus the rebuild rules.

    ``legacy_to_v2``: rewrite v0/v1 entries as v2 batches (Kafka >= 4.0, KAFKA-13093).
    """

    def __init__(self, offset_map: OffsetMap, txn: CleanedTransactionMetadata, *, now: int,
                 delete_retention_ms: int, retain_legacy_deletes: bool,
                 active_producers: dict[int, LastRecord], upper_bound_offset: int,
                 legacy_to_v2: bool = False, stats: FilterStats | None = None):
        self.map = offset_map
        self.txn = txn
        self.now = now
        self.delete_retention_ms = delete_retention_ms
        self.retain_legacy_deletes = retain_legacy_deletes
        self.active_producers = active_producers
        self.upper_bound_offset = upper_bound_offset
        self.legacy_to_v2 = legacy_to_v2
        self.stats = stats if stats is not None else FilterStats()
        self._payload = b""
        self._invalid = 0

    # ----------------------------------------------------------------- decisions
    def check_batch_retention(self, b) -> tuple[str, bool, bool]:
        """``(retention, discard_records, contains_marker_for_empty_txn)``; has side effects on ``txn``."""
        is_control = b.is_control
        if is_control:
            can_discard = self.txn.on_control_batch_read(b)
            discard_records = can_discard and b.has_delete_horizon and b.delete_horizon_ms <= self.now
        else:
            can_discard = self.txn.on_batch_read(b)
            discard_records = can_discard
        pid = b.producer_id
        last = self.active_producers.get(pid) if pid >= 0 else None
        if last is not None:
            if last.last_data_offset is not None:
                is_last = b.last_offset == last.last_data_offset
            else:
                is_last = is_control and b.producer_epoch == last.producer_epoch
        else:
            is_last = False
        if pid >= 0 and is_last:
            retention = RETAIN_EMPTY
        elif b.next_offset == self.upper_bound_offset:
            retention = RETAIN_EMPTY
        elif discard_records:
            retention = DELETE
        else:
            retention = DELETE_EMPTY
        return retention, discard_records, can_discard and is_control

    # -------------------------------------------------------------------- filter
    def filter_to(self, buf, start: int, end: int, *, capacity: int | None = None, path: str | None = None,
                  position_base: int = 0) -> ChunkResult:
        """Filter the complete batches of ``buf[start:end]``. Stops early (as Kafka) when the output outgrew
        ``capacity`` (the write buffer had to be reallocated, KAFKA-5316)."""
        res = ChunkResult()
        out = res.output
        stats = self.stats
        latest = self.map.latest_offset
        get = self.map.get
        maps_none_of = self.map.maps_none_of
        now = self.now
        for b in iter_batches(buf, start, end, path=path, position_base=position_base):
            retention, discard_records, marker_for_empty_txn = self.check_batch_retention(b)
            res.bytes_read += b.size
            stats.bytes_read += b.size
            if retention == DELETE:
                continue
            magic = b.magic
            is_control = b.is_control
            legacy = magic < 2
            kept = None
            if not legacy and not is_control and not discard_records:
                assert isinstance(b, RecordBatch)  # magic >= 2
                if maps_none_of(b.base_offset, b.last_offset):
                    # every record superseded (or keyless): the batch's records need not be read
                    n = b.records_count
                    stats.messages_read += n if n > 0 else 0
                    if retention == RETAIN_EMPTY:
                        _retain_empty(b, out, res, stats)
                        if capacity is not None and len(out) > capacity:
                            break
                    continue
                kept = self._scan_fast(b, latest)
            if kept is not None:
                assert isinstance(b, RecordBatch)  # kept: only from the v2 fast path
                n = b.records_count
                retained = kept
                write_original = len(kept) == n
                tombstones = False
                max_offset = -1
                for k in kept:
                    if k[6]:
                        tombstones = True
                    if k[4] > max_offset:
                        max_offset = k[4]
                if kept:
                    max_offset += b.base_offset
                stats.invalid_messages += self._invalid
            else:
                tuples: Iterable[tuple]
                if legacy:
                    recs = b.records()
                    tuples = [(r.offset, r.timestamp, r.key, r.value, ()) for r in recs]
                    write_original = not self.legacy_to_v2
                    for r in recs:
                        if r.magic != magic:  # KAFKA-4298: rewrite wrappers whose inner magic differs
                            write_original = False
                            break
                else:
                    tuples = b.iter_record_tuples()
                    write_original = True
                retained = []
                tombstones = False
                max_offset = -1
                n = 0
                for t in tuples:
                    n += 1
                    if discard_records:
                        keep = False
                    elif is_control:
                        keep = True
                    elif t[0] > latest:
                        keep = True
                    elif t[2] is None:
                        stats.invalid_messages += 1
                        keep = False
                    elif t[0] >= get(t[2]):
                        if t[3] is not None:
                            keep = True
                        elif legacy:
                            keep = self.retain_legacy_deletes
                        else:
                            keep = (not b.has_delete_horizon) or now < b.delete_horizon_ms
                    else:
                        keep = False
                    if keep:
                        retained.append(t)
                        if t[0] > max_offset:
                            max_offset = t[0]
                        if t[3] is None:
                            tombstones = True
                    else:
                        write_original = False
            stats.messages_read += n
            if retained:
                stats.messages_retained += len(retained)
                need_horizon = ((magic >= 2 or self.legacy_to_v2) and (tombstones or marker_for_empty_txn)
                                and not b.has_delete_horizon)
                if write_original and not need_horizon:
                    out += b.buf
                    stats.batches_copied += 1
                    stats.bytes_retained += b.size
                    res._update(b.max_timestamp, b.last_offset, b.last_offset)
                else:
                    if need_horizon:
                        horizon = now + self.delete_retention_ms
                    else:
                        horizon = b.delete_horizon_ms if b.has_delete_horizon else NO_TIMESTAMP
                    if kept is not None:
                        assert isinstance(b, RecordBatch)  # kept: only from the v2 fast path
                        data, max_ts, shallow = self._splice(b, kept, horizon)
                    else:
                        data, max_ts, shallow = self._rebuild(b, retained, horizon)
                    out += data
                    stats.batches_rebuilt += 1
                    stats.bytes_retained += len(data)
                    res._update(max_ts, shallow, max_offset)
            elif retention == RETAIN_EMPTY:
                if legacy:
                    # Kafka 3.x and 4.x alike (verified in 4.3.1's MemoryRecords.filterTo): the round fails and
                    # the partition is marked uncleanable
                    raise UncleanableError("Empty batches are only supported for magic v2 and above",
                                           path, b.position)
                assert isinstance(b, RecordBatch)  # not legacy: magic >= 2
                _retain_empty(b, out, res, stats)
            if capacity is not None and len(out) > capacity:
                break
        return res

    # ------------------------------------------------------------------ fast path
    def _scan_fast(self, b: RecordBatch, latest: int) -> list | None:
        """The kept records of a CreateTime v2 data batch as spans (``cleaner_records.scan_retained``), or None
        when the batch needs the careful decoder (unusual encodings, corruption, LogAppendTime)."""
        h = b._header()
        if h[5] & TIMESTAMP_TYPE_MASK or h[12] < 0:
            return None
        try:
            data = self._payload = _payload(b)
            keep_tombstones = not (h[5] & DELETE_HORIZON_MASK) or self.now < h[7]
            kept, _, self._invalid = scan_retained(data, h[12], h[0], h[7], latest, self.map, keep_tombstones)
        except (Slow, IndexError):
            return None
        return kept

    def _splice(self, b: RecordBatch, kept: list, horizon: int) -> tuple[bytes, int, int]:
        """``buildRetainedRecordsInto`` for a batch scanned by :meth:`_scan_fast`: records spliced, not decoded."""
        new_base = horizon if horizon >= 0 else kept[0][3]
        raw = bytearray()
        splice_records(self._payload, kept, b.base_timestamp, new_base, raw)
        codec = b.codec
        payload = compress(codec, raw, magic=2) if codec else raw
        max_ts = NO_TIMESTAMP
        for k in kept:
            if k[3] > max_ts:
                max_ts = k[3]
        data = build_batch(
            (), base_offset=b.base_offset, codec=codec, timestamp_type=CREATE_TIME, base_timestamp=new_base,
            max_timestamp=max_ts, producer_id=b.producer_id, producer_epoch=b.producer_epoch,
            base_sequence=b.base_sequence, partition_leader_epoch=b.partition_leader_epoch,
            is_transactional=b.is_transactional, delete_horizon_ms=horizon if horizon >= 0 else None,
            last_offset_delta=b.last_offset_delta, compressed_payload=payload, records_count=len(kept))
        return data, max_ts, (b.last_offset if max_ts != NO_TIMESTAMP else -1)

    # ------------------------------------------------------------------- rebuild
    def _rebuild(self, b, retained: list, horizon: int) -> tuple[bytes, int, int]:
        """``buildRetainedRecordsInto``; returns the bytes and ``builder.info()``."""
        if isinstance(b, RecordBatch):
            lat = b.timestamp_type == LOG_APPEND_TIME
            data = build_batch(
                retained, base_offset=b.base_offset, codec=b.codec, timestamp_type=b.timestamp_type,
                log_append_time=b.max_timestamp if lat else None, producer_id=b.producer_id,
                producer_epoch=b.producer_epoch, base_sequence=b.base_sequence,
                partition_leader_epoch=b.partition_leader_epoch, is_transactional=b.is_transactional,
                is_control=b.is_control, delete_horizon_ms=horizon if horizon >= 0 else None,
                last_offset_delta=b.last_offset_delta)
            return _info_v2(data, b.last_offset)
        lat = b.timestamp_type == LOG_APPEND_TIME
        if self.legacy_to_v2:
            # KAFKA-13093 (Kafka 4.0): v0/v1 entries become v2 batches; v0 records get CreateTime, timestamp -1.
            ts_type = _v2_timestamp_type(b)
            data = build_batch(
                retained, base_offset=retained[0][0], codec=b.codec, timestamp_type=ts_type,
                log_append_time=b.max_timestamp if lat else None,
                delete_horizon_ms=horizon if horizon >= 0 else None)
            return _info_v2(data, retained[-1][0])
        recs = [Record(t[0], t[1], t[2], t[3]) for t in retained]
        data = build_legacy(recs, magic=b.magic, codec=b.codec, timestamp_type=b.timestamp_type,
                            log_append_time=b.max_timestamp if lat else None)
        # MemoryRecordsBuilder.info() for magic < 2
        if lat:
            return data, b.max_timestamp, (retained[-1][0] if b.codec else retained[0][0])
        if b.magic == 0:
            return data, NO_TIMESTAMP, -1
        max_ts, off = NO_TIMESTAMP, -1
        for t in retained:
            if t[1] > max_ts:
                max_ts, off = t[1], t[0]
        if max_ts == NO_TIMESTAMP:
            return data, NO_TIMESTAMP, -1
        return data, max_ts, (retained[-1][0] if b.codec else off)


def _payload(b: RecordBatch) -> bytes:
    """The records region of a v2 batch, uncompressed, as ``bytes`` (one copy per batch: bytes indexing and
    slicing are the fastest primitives)."""
    data = b.decompressed_payload()
    return data if isinstance(data, bytes) else bytes(data)


def _v2_timestamp_type(b) -> int:
    return LOG_APPEND_TIME if b.timestamp_type == LOG_APPEND_TIME else CREATE_TIME


def _info_v2(data: bytes, last_offset: int) -> tuple[bytes, int, int]:
    rb = RecordBatch(memoryview(data))
    max_ts = rb.max_timestamp
    return data, max_ts, (last_offset if max_ts != NO_TIMESTAMP else -1)
