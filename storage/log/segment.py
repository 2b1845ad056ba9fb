"""Kafka's per-segment write rules, each written once (``LogSegment``): every engine that writes a segment or
its indexes calls these.

* :class:`SegmentIndexer` — *when an index entry is written*: ``LogSegment.append``'s rule (an offset-index
  entry and a time-index entry once more than ``index.interval.bytes`` were appended since the last entry; the
  time index only when the max timestamp grew), and :meth:`SegmentIndexer.close`, the final time-index entry of
  ``onBecomeInactiveSegment``. ``LogSegment.recover`` is the same rule applied batch by batch.
* :func:`recover_segment` — ``LogSegment.recover``: validate every batch (CRC, framing, offsets within the
  segment), rebuild the offset, time and transaction indexes, assign leader epochs, replay producer state, and
  say where the valid bytes end and what lies after them.
* :class:`SegmentWriter` — a new segment written under a temporary suffix (``.cleaned``) by the cleaner,
  ``convert`` and the offset-overflow split, indexes by the same rule, closed, fsynced, ready to be swapped in.
* :func:`trim_indexes` — what closing a segment does to its preallocated indexes.
* :func:`replay_appends` — the indexes a broker wrote while appending (leader, follower, restarts), for tests
  and checks that compare with broker-written files.

The read-side rules (``readNextOffset``, ``translateOffset``, largest timestamp, index sanity) are on
:class:`~kafkalog.storage.files.segment.Segment`.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from kafkalog.storage.errors import CorruptIndexError, CorruptRecordError, KafkaLogError, OffsetOverflowError
from kafkalog.storage.files.names import CLEANED_FILE_SUFFIX
from kafkalog.storage.files.offset_index import OffsetIndex, OffsetIndexBuilder
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.files.time_index import NO_TIMESTAMP, TimeIndex, TimeIndexBuilder, TimestampOffset
from kafkalog.storage.files.txn_index import AbortedTxn, TransactionIndex
from kafkalog.storage.io import fileops
from kafkalog.storage.io.ops import Reason
from kafkalog.storage.records import LogScanner, iter_batches
from kafkalog.storage.records.batch import HEADER as BATCH_HEADER
from kafkalog.storage.records.batch import RecordBatch

INT32_MAX = 2**31 - 1
DEFAULT_INDEX_INTERVAL_BYTES = 4096
UNKNOWN = TimestampOffset(NO_TIMESTAMP, -1)  # TimestampOffset.UNKNOWN
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")

STOP_TORN_TAIL = "torn tail"
STOP_PARTIAL_BATCH = "partial batch"
STOP_CORRUPT = "corrupt batch"
STOP_OFFSET_OVERFLOW = "offset overflow"
STOP_INVALID_OFFSET = "invalid offset"

_CRC = struct.Struct(">I")


def fits(offset: int, base_offset: int) -> bool:
    """``LogSegment.canConvertToRelativeOffset``: ``offset`` is storable relative to ``base_offset``."""
    return 0 <= offset - base_offset <= INT32_MAX


# ------------------------------------------------------------------------------------------- the index rule
class SegmentIndexer:
    """The offset and time index of one segment as ``LogSegment.append`` builds them.

    :meth:`append` is one decision: ``position`` is where the appended bytes start, ``largest_offset`` and
    ``max_timestamp``/``shallow_offset`` describe them, ``size`` is their length. A broker decides once per
    batch (``LogSegment.recover``; appends since KAFKA-806) or once per append (older brokers, the offset-overflow
    split): the caller passes a batch or a whole append. :meth:`append_batches` decides per batch inside one
    appended chunk."""

    __slots__ = ("oi", "ti", "interval", "bytes_since", "max_ts", "max_ts_offset")

    def __init__(self, base_offset: int, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                 max_index_size: int | None = None):
        self.oi = OffsetIndexBuilder(base_offset, max_index_size)
        self.ti = TimeIndexBuilder(base_offset, max_index_size)
        self.interval = index_interval_bytes
        self.bytes_since = 0
        self.max_ts = NO_TIMESTAMP
        self.max_ts_offset = -1

    @property
    def base_offset(self) -> int:
        return self.oi.base_offset

    def append(self, position: int, largest_offset: int, max_timestamp: int, shallow_offset: int,
               size: int) -> None:
        if max_timestamp > self.max_ts:
            self.max_ts, self.max_ts_offset = max_timestamp, shallow_offset
        if self.bytes_since > self.interval:
            self.oi.append(largest_offset, position)
            self.ti.maybe_append(self.max_ts, self.max_ts_offset)
            self.bytes_since = 0
        self.bytes_since += size

    def append_batches(self, chunk, position: int) -> None:
        """One decision per batch of ``chunk`` (bytes of whole batches appended at ``position``)."""
        for b in iter_batches(chunk):
            size = b.size
            self.append(position, b.last_offset, b.max_timestamp, b.last_offset, size)
            position += size
            del b

    def restart(self) -> None:
        """A broker restart with this segment active: the byte counter starts again from 0."""
        self.bytes_since = 0

    @property
    def max_timestamp(self) -> TimestampOffset:
        return TimestampOffset(self.max_ts, self.max_ts_offset)

    def is_full(self) -> bool:
        return self.oi.is_full() or self.ti.is_full()

    def seal(self) -> None:
        """The final time-index entry of a closed segment (``onBecomeInactiveSegment``, ``LogSegment.close``)."""
        self.ti.maybe_append(self.max_ts, self.max_ts_offset, skip_full_check=True)

    def close(self) -> tuple[OffsetIndex, TimeIndex]:
        """Seal and build the two indexes."""
        self.seal()
        return self.oi.build(), self.ti.build()


# ------------------------------------------------------------------------------------------ LogSegment.recover
@dataclass
class TailLoss:
    """What lies after the valid bytes of a segment: what recovery removes."""

    position: int  # first invalid byte
    size: int  # bytes from there to the end of the file
    batches: int  # complete batches (by their size fields) in that region
    records: int | None  # records in them, when countable (v2 headers)
    first_offset: int | None  # offsets their headers claim (unreliable in a corrupt region)
    last_offset: int | None


@dataclass
class RecoveredSegment:
    """The result of :func:`recover_segment`."""

    base_offset: int
    offset_index: OffsetIndex
    time_index: TimeIndex
    log_size: int
    valid_bytes: int  # the valid prefix: recovery truncates the .log here
    batches: int
    max_timestamp: TimestampOffset
    next_offset: int  # last offset + 1 of the last valid batch (the base offset when there is none)
    stop_reason: str | None = None  # why the valid region ended early (None: the whole file is valid)
    error: KafkaLogError | None = None
    aborted: list[AbortedTxn] = field(default_factory=list)  # the .txnindex entries, when producers were given
    leader_epochs: list[tuple[int, int]] = field(default_factory=list)  # (epoch, start offset) assigned
    tail: TailLoss | None = None  # what lies after the valid bytes

    @property
    def truncated_bytes(self) -> int:
        return self.log_size - self.valid_bytes

    @property
    def txn_index(self) -> TransactionIndex:
        return TransactionIndex.from_entries(self.base_offset, self.aborted)

    def cause(self) -> dict[str, str | None]:
        """Why the bytes after ``valid_bytes`` are dropped, as facts: ``stop`` (``torn tail``, ``partial batch``...;
        None: the whole file is valid) and ``error``, the error of the corrupt batch that stopped it."""
        return {"stop": self.stop_reason, "error": self.error.reason if self.stop_reason and self.error else None}

    def reason(self) -> str | None:
        """In words: why the bytes after ``valid_bytes`` are dropped."""
        c = self.cause()
        return None if c["stop"] is None else c["error"] if c["error"] is not None else f"{c['stop']} at byte {self.valid_bytes}"


def recover_segment(buf, base_offset: int, *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                    max_index_size: int | None = None, producers=None, epochs=None, path: str | None = None,
                    on_overflow: str = "raise") -> RecoveredSegment:
    """``LogSegment.recover`` over the bytes of a ``.log``: one pass, batch by batch (the v2 header and the C
    CRC32C over the mapped bytes; a record is decoded only in control batches, for producer state). ``buf``: the
    bytes, or a :class:`~kafkalog.storage.files.segment.Segment`, read through its scanner (a local ``.log``
    mapped, one under a URL in bounded windows: :func:`_scan`).

    ``producers`` (a :class:`~kafkalog.storage.log.producer_state.ProducerStateManager` at the segment's base
    offset) is replayed and yields the ``.txnindex`` entries; ``epochs`` (a
    :class:`~kafkalog.storage.log.leader_epoch_cache.LeaderEpochCache`) gets ``assign`` for each new partition
    leader epoch. A batch whose offsets do not fit the segment raises :class:`OffsetOverflowError`
    (``on_overflow="raise"``, the loader then splits the segment) or ends the valid region (``"stop"``). An
    index append Kafka refuses (``InvalidOffsetException``) empties the whole segment, as ``LogLoader`` does."""
    indexer = SegmentIndexer(base_offset, index_interval_bytes, max_index_size)
    aborted: list[AbortedTxn] = []
    assigned: list[tuple[int, int]] = []
    valid = 0
    count = 0
    stop = None
    error: KafkaLogError | None = None
    next_offset = base_offset
    latest_epoch = epochs.latest_epoch if epochs is not None else None
    crc_at = _CRC.unpack_from
    unpack = BATCH_HEADER.unpack_from
    scanner = _scan(buf, 0, path)
    h: tuple | None
    try:
        for b in scanner:
            size = b.size
            if b.magic >= 2:
                assert isinstance(b, RecordBatch)  # (LogScanner: magic >= 2 is a RecordBatch)
                if size < 61:
                    b.ensure_valid()  # raises: smaller than the v2 header
                view = b.buf
                if crc_at(view, 17)[0] != crc32c(view[21:]):
                    b.ensure_valid()  # raises with both CRCs
                h = b._h = unpack(view, 0)
                last = h[0] + h[6]
                mts = h[8]
            else:
                b.ensure_valid()
                h = view = None
                last = b.last_offset
                mts = b.max_timestamp
            if not fits(last, base_offset):
                err = OffsetOverflowError(
                    f"offset {last} cannot be stored relative to the segment base offset {base_offset}",
                    path, b.position, base_offset=base_offset)
                if on_overflow == "raise":
                    raise err
                stop, error = STOP_OFFSET_OVERFLOW, err
                break
            indexer.append(valid, last, mts, last, size)
            if h is not None:
                ple = h[2]
                if ple >= 0 and (latest_epoch is None or ple > latest_epoch):
                    if epochs is not None:
                        epochs.assign(ple, h[0])
                    assigned.append((ple, h[0]))
                    latest_epoch = ple
                if producers is not None:
                    if h[9] != -1 or h[5] & 0x20:
                        a = producers.replay(b)
                        if a is not None:
                            aborted.append(a)
                    else:
                        producers.map_end_offset = last + 1
            valid += size
            count += 1
            next_offset = last + 1
            del b, view
        else:
            stop = scanner.stop_reason
    except CorruptRecordError as e:
        stop, error = STOP_CORRUPT, e.at(path)
    except CorruptIndexError as e:  # InvalidOffsetException: LogLoader.recoverLog empties the segment
        stop = STOP_INVALID_OFFSET
        error = CorruptIndexError(f"{e.reason}: the broker empties the segment", path, e.position)
        indexer = SegmentIndexer(base_offset, index_interval_bytes, max_index_size)
        aborted, valid, count, next_offset = [], 0, 0, base_offset
    del scanner
    oi, ti = indexer.close()
    size = _size(buf)
    return RecoveredSegment(base_offset, oi, ti, size, valid, count, indexer.max_timestamp, next_offset, stop,
                            error, aborted, assigned, tail_loss(buf, valid) if valid < size else None)


def _scan(buf, start: int, path: str | None = None) -> LogScanner:
    """The batches of ``buf`` (bytes, or a :class:`~kafkalog.storage.files.segment.Segment`: its own scanner) from
    ``start``: the one read of a ``.log`` the recovery rules make."""
    return buf.scanner(start) if isinstance(buf, Segment) else LogScanner(buf, start, path=path)


def _size(buf) -> int:
    return buf.size if isinstance(buf, Segment) else len(buf)


def tail_loss(buf, start: int) -> TailLoss:
    """What the bytes (or the :class:`~kafkalog.storage.files.segment.Segment`) from ``start`` to the end hold, as
    far as batch framing can tell (CRCs not checked)."""
    n = records = 0
    first = last = None
    countable = True
    try:
        for b in _scan(buf, start):
            n += 1
            if b.magic >= 2 and b.size >= 61:
                assert isinstance(b, RecordBatch)  # (LogScanner: magic >= 2 is a RecordBatch)
                records += max(b.records_count, 0)
            else:
                countable = False
            if first is None:
                first = b.base_offset
            last = b.last_offset
            del b
    except (CorruptRecordError, KafkaLogError):
        pass
    return TailLoss(start, _size(buf) - start, n, records if countable else None, first, last)


# ---------------------------------------------------------------------------------------- replaying appends
def replay_appends(buf, base_offset: int, *, appends: Iterable[int] | None = None,
                   index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES, per_batch: bool = False,
                   restarts: Iterable[int] = (), close: bool = True, deep_time_offsets: bool = False,
                   path: str | None = None) -> RecoveredSegment:
    """The indexes a broker wrote while appending the batches of ``buf``.

    * ``appends``: byte positions where appends started (batch boundaries; 0 is implied). ``None`` = one append
      per batch (a leader writing v2 batches).
    * ``per_batch``: one decision per batch inside an append (KAFKA-806).
    * ``restarts``: append boundaries where the broker restarted cleanly: the segment was closed (final
      time-index entry) and reloaded (byte counter back to 0).
    * ``close``: finish as a closed segment (final time-index entry).
    * ``deep_time_offsets``: time-index offsets as leaders before KAFKA-16310 wrote them (the offset of the
      first record carrying the batch's max timestamp instead of the batch's last offset).

    Batches are not validated (the broker validated them when it appended); the replay stops where framing
    ends."""
    starts = None if appends is None else set(appends) | {0}
    restart_set = set(restarts)
    ix = SegmentIndexer(base_offset, index_interval_bytes)
    count = 0
    next_offset = base_offset
    valid = 0
    stop: str | None = None
    error: KafkaLogError | None = None
    scanner = LogScanner(buf, path=path)
    pending: list[int] | None = None  # one append: [position, size, largest offset, max ts, shallow offset]

    def shallow(b) -> int:
        if not deep_time_offsets:
            return b.last_offset
        if b.timestamp_type == 1:  # LogAppendTime: every record has the max; the first offset was recorded
            return b.base_offset
        best_ts, best_off = NO_TIMESTAMP, b.last_offset
        for r in b.records():
            if r.timestamp > best_ts:
                best_ts, best_off = r.timestamp, r.offset
        return best_off

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            ix.append(pending[0], pending[2], pending[3], pending[4], pending[1])
            pending = None

    try:
        for b in scanner:
            pos = b.position
            if pos in restart_set or starts is None or pos in starts:
                flush()
                if pos in restart_set and pos > 0:
                    if ix.max_ts_offset >= 0:
                        ix.seal()
                    ix.restart()
            last = b.last_offset
            if not fits(last, base_offset):
                raise CorruptIndexError(
                    f"offset {last} cannot be stored relative to the segment base offset {base_offset}", path, pos)
            mts = b.max_timestamp
            if per_batch:
                ix.append(pos, last, mts, shallow(b), b.size)
            elif pending is None:
                pending = [pos, b.size, last, mts, shallow(b)]
            else:
                pending[1] += b.size
                pending[2] = last
                if mts > pending[3]:
                    pending[3], pending[4] = mts, shallow(b)
            count += 1
            next_offset = last + 1
            valid = pos + b.size
            del b
        stop = scanner.stop_reason
        flush()
    except (CorruptRecordError, CorruptIndexError) as e:
        error = e.at(path)
        stop = STOP_CORRUPT if isinstance(e, CorruptRecordError) else STOP_INVALID_OFFSET
    del scanner
    if close and ix.max_ts_offset >= 0:
        ix.seal()
    return RecoveredSegment(base_offset, ix.oi.build(), ix.ti.build(), len(buf), valid, count, ix.max_timestamp,
                            next_offset, stop, error)


# ------------------------------------------------------------------------------------------- new segments
def cleaned_name(base_offset: int, suffix: str) -> str:
    """``<base><suffix>.cleaned``: where a new segment's file is written before the swap."""
    return f"{base_offset:020d}{suffix}{CLEANED_FILE_SUFFIX}"


class SegmentWriter:
    """A new segment ``base_offset`` in ``directory``, written as ``.log.cleaned`` with its ``.index.cleaned``,
    ``.timeindex.cleaned`` and, when it holds aborted transactions, ``.txnindex.cleaned``, ready for
    :func:`~kafkalog.storage.engine.swap.replace_segments`.

    ``per_batch``: index decisions per batch inside each :meth:`append` (``LogSegment.append`` since
    KAFKA-806), else one per append with the values the caller gives."""

    def __init__(self, directory: str | os.PathLike, base_offset: int, *,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES, max_index_size: int | None = None,
                 per_batch: bool = True):
        self.dir = Path(directory)
        self.base_offset = base_offset
        self.per_batch = per_batch
        self.indexer = SegmentIndexer(base_offset, index_interval_bytes, max_index_size)
        self.aborted: list[AbortedTxn] = []
        for suffix in SEGMENT_SUFFIXES:  # a leftover of an earlier, interrupted attempt
            p = self.dir / cleaned_name(base_offset, suffix)
            if p.exists():
                fileops.unlink(p)
        self._log = fileops.NewFile(self.dir / cleaned_name(base_offset, ".log"))
        self.batches = 0

    @property
    def size(self) -> int:
        return self._log.size

    def append(self, data, *, largest_offset: int | None = None, max_timestamp: int | None = None,
               shallow_offset: int | None = None) -> None:
        """Append whole batches. Per-append indexing needs ``largest_offset`` and the max timestamp (and its
        offset) of the appended bytes."""
        pos = self._log.size
        if self.per_batch:
            self.indexer.append_batches(data, pos)
        else:
            assert largest_offset is not None and max_timestamp is not None
            self.indexer.append(pos, largest_offset, max_timestamp,
                                largest_offset if shallow_offset is None else shallow_offset, len(data))
        self._log.write(data)
        self.batches += 1

    def append_run(self, data, metas) -> None:
        """Append whole batches, indexed as one :meth:`append` each (``per_batch=False``): ``metas`` holds
        ``(size, largest offset, max timestamp)`` per batch of ``data``, in order; one write for all of them."""
        assert not self.per_batch
        pos = self._log.size
        append = self.indexer.append
        for size, last, max_ts in metas:
            append(pos, last, max_ts, last, size)
            pos += size
        self._log.write(data)
        self.batches += len(metas)

    def finish(self, mtime_ns: int | None = None) -> list[str]:
        """Close the segment: the ``.log`` fsynced, the indexes written trimmed and fsynced, the files' mtime set
        (the cleaner keeps the last source segment's). Returns the file names written. The caller fsyncs the
        directory before swapping them in."""
        self._log.close()
        oi, ti = self.indexer.close()
        files = [(".index", oi.to_bytes(trim=True)), (".timeindex", ti.to_bytes(trim=True))]
        if self.aborted:
            files.append((".txnindex", TransactionIndex.from_entries(self.base_offset, self.aborted).to_bytes()))
        written = [cleaned_name(self.base_offset, ".log")]
        for suffix, data in files:
            name = cleaned_name(self.base_offset, suffix)
            with fileops.NewFile(self.dir / name) as f:
                f.write(data)
            written.append(name)
        if mtime_ns is not None:  # LogSegment.setLastModified: the .log and its two indexes
            for name in written:
                if not name.startswith(f"{self.base_offset:020d}.txnindex"):
                    fileops.set_mtime(self.dir / name, mtime_ns)
        return written

    def abort(self) -> None:
        self._log.abort()
        for suffix in SEGMENT_SUFFIXES:
            p = self.dir / cleaned_name(self.base_offset, suffix)
            if p.exists():
                fileops.unlink(p)


# ------------------------------------------------------------------------------------------------ closing
def trimmed_index(view, name: str, cls, base_offset: int) -> bytes | None:
    """The trimmed bytes of an index the broker preallocated and has not trimmed yet (an active segment after a
    crash); None when it is trimmed already (or its padding is not zero: then it is rebuilt, not trimmed)."""
    if not view.exists(name):
        return None
    idx = cls(view.map(name), base_offset, view.file(name))
    if idx.is_trimmed or not idx.padding_is_zero():
        return None
    return idx.to_bytes(trim=True)


def trim_indexes(view, base_offset: int, why: str | Reason) -> list:
    """Closing a segment trims its preallocated ``.index`` and ``.timeindex`` to their entries (``LogSegment``'s
    ``onBecomeInactiveSegment``, ``UnifiedLog.close``). Returns the ops."""
    ops = []
    for suffix, cls in ((".index", OffsetIndex), (".timeindex", TimeIndex)):
        name = f"{base_offset:020d}{suffix}"
        data = trimmed_index(view, name, cls, base_offset)
        if data is not None:
            ops.append(view.write(name, data, why))
    return ops


__all__ = [
    "DEFAULT_INDEX_INTERVAL_BYTES", "INT32_MAX", "RecoveredSegment", "STOP_CORRUPT", "STOP_INVALID_OFFSET",
    "STOP_OFFSET_OVERFLOW", "STOP_PARTIAL_BATCH", "STOP_TORN_TAIL", "SegmentIndexer", "SegmentWriter", "TailLoss",
    "cleaned_name", "fits", "recover_segment", "replay_appends", "tail_loss", "trim_indexes",
]
