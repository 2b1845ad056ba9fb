"""An offline, read-only view of one partition directory with what the cleaner and retention need
(``UnifiedLog``'s segment map, ``collectAbortedTransactions``, ``lastRecordsOfActiveProducers``,
``lastStableOffset``). Until ``storage/log.py`` (PartitionLog) exists this is the engines' own loader; it only
reads.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import KafkaLogError, LogDirError
from ..files.names import offset_from_file_name, segment_log_files
from ..files.time_index import TimeIndex
from ..files.txn_index import TransactionIndex
from ..log import parse_topic_partition_name
from ..producer_state import ProducerStateManager
from ..records.batch import NO_TIMESTAMP
from ..records.reader import iter_batches
from .cleaner_filter import LastRecord
from .cleaner_txn import AbortedTxn


def parse_partition_dir_name(name: str) -> tuple[str, int]:
    """``<topic>-<partition>`` of a live partition dir -> (topic, partition); LogDirError otherwise
    (:func:`~kafkalog.storage.log.parse_topic_partition_name`; ``-delete``/``-future``/``-stray`` are refused)."""
    tp = parse_topic_partition_name(name)
    if tp.kind != "live":
        raise LogDirError(f"not a live partition directory (a -{tp.kind} dir): {name!r}", name)
    return tp.topic, tp.partition


@dataclass
class SegmentView:
    """One segment of a partition: its files and lazily computed facts (all reads, no writes)."""

    base_offset: int
    path: Path  # the .log file
    size: int
    mtime_ns: int
    _mm: mmap.mmap | None = field(default=None, repr=False)
    _next_offset: int | None = field(default=None, repr=False)
    _max_ts: int | None = field(default=None, repr=False)
    _first_batch_ts: int | None = field(default=None, repr=False)

    @property
    def last_modified(self) -> int:
        """``File.lastModified`` in ms."""
        return self.mtime_ns // 1_000_000

    def file(self, suffix: str) -> Path:
        return self.path.with_name(self.path.name[: -len(".log")] + suffix)

    def file_size(self, suffix: str) -> int:
        try:
            return os.path.getsize(self.file(suffix))
        except FileNotFoundError:
            return 0

    @property
    def buf(self):
        if self.size == 0:
            return b""
        if self._mm is None:
            with open(self.path, "rb") as f:
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return self._mm

    def close(self) -> None:
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # a view is still alive; the mapping goes with the object
                pass
            self._mm = None

    def _scan(self) -> None:
        nxt, max_ts, first_ts = self.base_offset, NO_TIMESTAMP, None
        if self.size:
            for b in iter_batches(self.buf, path=str(self.path)):
                nxt = b.next_offset
                ts = b.max_timestamp
                if first_ts is None:
                    first_ts = ts
                if ts > max_ts:
                    max_ts = ts
                del b
        self._next_offset, self._max_ts = nxt, max_ts
        self._first_batch_ts = first_ts if first_ts is not None else 9223372036854775807

    @property
    def read_next_offset(self) -> int:
        if self._next_offset is None:
            self._scan()
        return self._next_offset  # type: ignore[return-value]

    @property
    def max_timestamp_so_far(self) -> int:
        """What the broker believes: the time index's last entry (``readMaxTimestampAndOffsetSoFar``); for a
        segment without one, the largest batch max timestamp."""
        ti = self.file(".timeindex")
        if ti.exists() and ti.stat().st_size >= 12:
            with TimeIndex.open(ti, self.base_offset) as idx:
                return idx.max_timestamp_so_far.timestamp
        if self._max_ts is None:
            self._scan()
        return self._max_ts  # type: ignore[return-value]

    @property
    def largest_timestamp(self) -> int:
        """``LogSegment.largestTimestamp``: max timestamp if >= 0, else the file's mtime."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified

    @property
    def first_batch_timestamp(self) -> int:
        """``getFirstBatchTimestamp``: the first batch's max timestamp, Long.MaxValue when empty."""
        if self._first_batch_ts is None:
            self._scan()
        return self._first_batch_ts  # type: ignore[return-value]

    def aborted_txns(self) -> list[AbortedTxn]:
        p = self.file(".txnindex")
        if not p.exists() or p.stat().st_size == 0:
            return []
        with TransactionIndex.open(p, self.base_offset) as idx:
            return [AbortedTxn(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) for t in idx]


class PartitionView:
    """Segments of one partition directory in base-offset order; the last is the active segment."""

    def __init__(self, path: str | os.PathLike, *, log_start_offset: int | None = None,
                 high_watermark: int | None = None):
        self.path = Path(path)
        self.topic, self.partition = parse_partition_dir_name(self.path.name)
        segs = []
        for p in segment_log_files(self.path):
            st = p.stat()
            segs.append(SegmentView(offset_from_file_name(p.name), p, st.st_size, st.st_mtime_ns))
        if not segs:
            raise LogDirError("partition directory has no .log segment", str(self.path))
        self.segments: list[SegmentView] = segs
        first = segs[0].base_offset
        self.log_start_offset = max(first, log_start_offset if log_start_offset is not None else first)
        self.log_end_offset = segs[-1].read_next_offset
        self.high_watermark = self.log_end_offset if high_watermark is None else min(high_watermark,
                                                                                      self.log_end_offset)
        self._psm: ProducerStateManager | None = None

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def active_segment(self) -> SegmentView:
        return self.segments[-1]

    def close(self) -> None:
        for s in self.segments:
            s.close()

    def __enter__(self) -> PartitionView:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def log_segments(self, start: int, end: int) -> list[SegmentView]:
        """Segments overlapping ``[start, end)``: the floor segment of ``start`` and those with base < end."""
        out = []
        for i, s in enumerate(self.segments):
            nxt = self.segments[i + 1].base_offset if i + 1 < len(self.segments) else None
            if s.base_offset >= end:
                break
            if nxt is not None and nxt <= start:
                continue
            out.append(s)
        return out

    def non_active_segments_from(self, offset: int) -> list[SegmentView]:
        return [s for s in self.log_segments(offset, self.active_segment.base_offset)
                if s is not self.active_segment]

    def segment_after(self, seg: SegmentView) -> SegmentView | None:
        i = self.segments.index(seg)
        return self.segments[i + 1] if i + 1 < len(self.segments) else None

    def collect_aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """``UnifiedLog.collectAbortedTransactions(start, end)``: from the floor segment of ``start`` on, the
        entries with lastOffset >= logStartOffset and firstOffset < end, until one has LSO >= end."""
        out: list[AbortedTxn] = []
        started = False
        for i, s in enumerate(self.segments):
            nxt = self.segments[i + 1].base_offset if i + 1 < len(self.segments) else None
            if not started:
                if nxt is not None and nxt <= start:
                    continue
                started = True
            for t in s.aborted_txns():
                if t.last_offset >= self.log_start_offset and t.first_offset < end:
                    out.append(t)
                if t.last_stable_offset >= end:
                    return out
        return out

    # ------------------------------------------------------------------ producer state
    def producer_state(self, now: int, expiration_ms: int) -> ProducerStateManager:
        """Producer state at the log end: latest snapshot (expired producers dropped as at load) + replay."""
        if self._psm is not None:
            return self._psm
        psm = ProducerStateManager(self.path, producer_id_expiration_ms=expiration_ms)
        psm._delete_snapshot = lambda off: psm.snapshots.pop(off, None)  # type: ignore[method-assign]
        for off in [o for o in psm.snapshots if o > self.log_end_offset]:
            psm.snapshots.pop(off)
        psm.load_from_snapshot(self.log_start_offset, now)
        start = psm.map_end_offset
        for s in self.segments:
            if s.read_next_offset <= start:
                continue
            try:
                for b in iter_batches(s.buf, path=str(s.path)):
                    if b.last_offset >= start and b.magic >= 2:
                        psm.replay(b)
                    del b
            except KafkaLogError:
                raise
        self._psm = psm
        return psm

    def last_records_of_active_producers(self, now: int, expiration_ms: int) -> dict[int, LastRecord]:
        psm = self.producer_state(now, expiration_ms)
        out = {}
        for pid, e in psm.active_producers().items():
            ldo = e.last_data_offset
            out[pid] = LastRecord(ldo if ldo >= 0 else None, e.producer_epoch)
        return out

    def last_stable_offset(self, now: int, expiration_ms: int) -> int:
        fuo = self.producer_state(now, expiration_ms).first_unstable_offset
        return self.high_watermark if fuo is None else min(fuo, self.high_watermark)
