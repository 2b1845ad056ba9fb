"""A log segment: ``<base>.log`` plus its ``.index``, ``.timeindex`` and ``.txnindex`` (``LogSegment``).

The ``.log`` is memory-mapped read-only on first use (an empty file is ``b""``: mmap of 0 bytes fails); batches
are zero-copy views. Index files are opened lazily, like Kafka's ``LazyIndex``. Nothing reads a whole file.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CorruptRecordError, LogDirError
from ..records import Batch, LogScanner, batch_at
from ._index import map_file
from .names import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    offset_from_file_name,
)
from .offset_index import OffsetIndex
from .time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from .txn_index import TransactionIndex


@dataclass(frozen=True)
class LogOffsetPosition:
    """Where an offset lives: the batch holding it (first batch with last offset >= target)."""

    offset: int  # the target offset
    position: int  # byte position of the batch in the .log
    size: int  # the batch's size in bytes


class Segment:
    """One segment. ``Segment(path)`` takes the ``.log`` path (or any path whose name starts with the base)."""

    def __init__(self, log_path: str | os.PathLike, base_offset: int | None = None):
        self.path = Path(log_path)
        if base_offset is None:
            try:
                base_offset = offset_from_file_name(self.path.name)
            except ValueError:
                raise LogDirError(f"cannot derive a base offset from {self.path.name!r}", str(self.path)) from None
        self.base_offset = base_offset
        prefix = self.path.name.split(".", 1)[0]
        d = self.path.parent
        self.index_path = d / (prefix + INDEX_FILE_SUFFIX)
        self.time_index_path = d / (prefix + TIME_INDEX_FILE_SUFFIX)
        self.txn_index_path = d / (prefix + TXN_INDEX_FILE_SUFFIX)
        self._map: Any = None
        self._buf: memoryview | None = None
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._txn_index: TransactionIndex | None = None

    @classmethod
    def open(cls, log_path: str | os.PathLike, base_offset: int | None = None) -> Segment:
        return cls(log_path, base_offset)

    @classmethod
    def for_base_offset(cls, directory: str | os.PathLike, base_offset: int) -> Segment:
        return cls(Path(directory) / f"{base_offset:020d}{LOG_FILE_SUFFIX}", base_offset)

    def __repr__(self) -> str:
        return f"Segment({str(self.path)!r}, base_offset={self.base_offset})"

    # ---- the .log ----------------------------------------------------------------------------------------
    @property
    def buf(self) -> memoryview:
        """The ``.log`` bytes (read-only mmap; empty for an empty file)."""
        if self._buf is None:
            self._map, _ = map_file(self.path, LogDirError)
            self._buf = memoryview(self._map)
        return self._buf

    @property
    def size(self) -> int:
        """Size of the ``.log`` in bytes (``LogSegment.size``)."""
        if self._buf is not None:
            return len(self._buf)
        return self.path.stat().st_size

    def scanner(self, start_position: int = 0, end: int | None = None) -> LogScanner:
        return LogScanner(self.buf, start_position, end, path=str(self.path))

    def iter_batches(self, start_position: int = 0, end: int | None = None) -> Iterator[Batch]:
        """Shallow batches from ``start_position`` (stops silently at a torn tail / partial batch; raises
        :class:`CorruptRecordError` for a size field < 14)."""
        return iter(self.scanner(start_position, end))

    def __iter__(self) -> Iterator[Batch]:
        return self.iter_batches()

    def read_at(self, position: int) -> Batch:
        """The batch starting at ``position``; :class:`CorruptRecordError` if there is none."""
        if not 0 <= position < self.size:
            raise CorruptRecordError(f"position {position} is outside the log ({self.size} bytes)",
                                     str(self.path), position)
        return batch_at(self.buf, position, path=str(self.path))

    def first_batch(self) -> Batch | None:
        return next(self.iter_batches(), None)

    # ---- indexes (lazy) ----------------------------------------------------------------------------------
    @property
    def has_offset_index(self) -> bool:
        return self.index_path.exists()

    @property
    def has_time_index(self) -> bool:
        return self.time_index_path.exists()

    @property
    def has_txn_index(self) -> bool:
        return self.txn_index_path.exists()

    @property
    def offset_index(self) -> OffsetIndex:
        """The ``.index`` (an empty in-memory index when the file is missing)."""
        if self._offset_index is None:
            if self.has_offset_index:
                self._offset_index = OffsetIndex.open(self.index_path, self.base_offset)
            else:
                self._offset_index = OffsetIndex(b"", self.base_offset, str(self.index_path))
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            if self.has_time_index:
                self._time_index = TimeIndex.open(self.time_index_path, self.base_offset)
            else:
                self._time_index = TimeIndex(b"", self.base_offset, str(self.time_index_path))
        return self._time_index

    @property
    def txn_index(self) -> TransactionIndex:
        if self._txn_index is None:
            if self.has_txn_index:
                self._txn_index = TransactionIndex.open(self.txn_index_path, self.base_offset)
            else:
                self._txn_index = TransactionIndex(b"", self.base_offset, str(self.txn_index_path))
        return self._txn_index

    # ---- offsets and timestamps --------------------------------------------------------------------------
    def _index_start(self, target_offset: int) -> int:
        """Position from the offset index for ``target_offset``; 0 if the index points outside the log."""
        pos = self.offset_index.lookup(target_offset).position
        return pos if 0 <= pos < self.size else 0

    def translate_offset(self, target_offset: int, start_position: int | None = None) -> LogOffsetPosition | None:
        """``LogSegment.translateOffset``: index lookup, then scan for the first batch with last offset >=
        target. ``None`` if this segment holds no such batch."""
        start = self._index_start(target_offset) if start_position is None else start_position
        for batch in self.iter_batches(start):
            if batch.last_offset >= target_offset:
                return LogOffsetPosition(target_offset, batch.position, batch.size)
        return None

    def read_next_offset(self) -> int:
        """``LogSegment.readNextOffset``: next offset after the last batch, scanning from the last index entry;
        the base offset when the segment is empty."""
        idx = self.offset_index
        start = 0
        if idx.valid_entries:
            last = idx.entry(idx.valid_entries - 1)
            start = last.position if 0 <= last.position < self.size else 0
        nxt = self.base_offset
        try:
            for batch in self.iter_batches(start):
                nxt = batch.next_offset
        except CorruptRecordError:
            if start == 0:
                raise
            for batch in self.iter_batches(0):  # the index pointed at garbage: scan the whole segment
                nxt = batch.next_offset
        return nxt

    def max_timestamp_so_far(self) -> TimestampOffset:
        """What a loaded segment knows of its max timestamp: the last time-index entry."""
        return self.time_index.last_valid_entry

    def largest_timestamp(self) -> int:
        """``LogSegment.largestTimestamp``: max timestamp if >= 0, else the ``.log`` mtime (ms)."""
        ts = self.max_timestamp_so_far().timestamp
        return ts if ts >= 0 else int(self.path.stat().st_mtime * 1000)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None) -> tuple[int, int] | None:
        """``LogSegment.findOffsetByTimestamp``: ``(timestamp, offset)`` of the first record with timestamp >=
        ``timestamp`` and offset >= ``starting_offset``; ``None`` if none in this segment."""
        start_off = self.base_offset if starting_offset is None else starting_offset
        entry = self.time_index.lookup(timestamp)
        pos = self._index_start(max(entry.offset, start_off))
        for batch in self.iter_batches(pos):
            if batch.max_timestamp >= timestamp:
                for r in batch.records():
                    if r.timestamp >= timestamp and r.offset >= start_off:
                        return r.timestamp, r.offset
        return None

    # ---- lifecycle ---------------------------------------------------------------------------------------
    def files(self) -> list[Path]:
        return [p for p in (self.path, self.index_path, self.time_index_path, self.txn_index_path) if p.exists()]

    def close(self) -> None:
        for idx in (self._offset_index, self._time_index, self._txn_index):
            if idx is not None:
                try:
                    idx.close()
                except BufferError:
                    pass
        self._offset_index = self._time_index = self._txn_index = None
        if self._buf is not None:
            try:
                self._buf.release()
            except BufferError:
                pass  # batch views still alive; the mapping goes when they do
            self._buf = None
        if isinstance(self._map, mmap.mmap):
            try:
                self._map.close()
            except BufferError:
                pass
        self._map = None

    def __enter__(self) -> Segment:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["LogOffsetPosition", "NO_TIMESTAMP", "Segment"]
