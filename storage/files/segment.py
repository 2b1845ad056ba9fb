"""A log segment: ``<base>.log`` plus its ``.index``, ``.timeindex`` and ``.txnindex`` (``LogSegment``).

The ``.log`` is memory-mapped read-only on first use (an empty file is ``b""``: mmap of 0 bytes fails); batches
are zero-copy views. Index files are opened lazily, like Kafka's ``LazyIndex``. Nothing reads a whole file.

A segment read through a :class:`~kafkalog.storage.io.dirview.DirView` (:meth:`Segment.in_view`) sees the files as a
plan has them so far (a ``.log`` truncated by the plan reads shorter, an index the plan rewrote reads new). A view of
a URL (``s3://...``) reads the indexes whole and the ``.log`` in bounded windows (:class:`WindowedScanner`), through
the filesystem seam (:mod:`kafkalog.storage.io.fs`).

The read-side rules of ``LogSegment`` live here once: :meth:`Segment.read_next_offset`,
:meth:`~Segment.translate_offset`, :meth:`~Segment.find_offset_by_timestamp`, the largest timestamp and the
index sanity checks. The write-side rules (recover, the index-interval rule, roll and close) are in
:mod:`kafkalog.storage.log.segment`.
"""

from __future__ import annotations

import bisect
import mmap
import os
from collections.abc import Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from kafkalog.storage.errors import CorruptIndexError, CorruptRecordError, KafkaLogError, LogDirError
from kafkalog.storage.files.findings import Defect, defect
from kafkalog.storage.files.index import map_file
from kafkalog.storage.files.names import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    offset_from_file_name,
)
from kafkalog.storage.files.offset_index import OffsetIndex, OffsetPosition
from kafkalog.storage.files.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from kafkalog.storage.files.txn_index import TransactionIndex
from kafkalog.storage.io.closing import Closing, unmap
from kafkalog.storage.io.file_stamp import FileStamp, local_stamp
from kafkalog.storage.io.fs import SegmentFile, UrlPath, as_path
from kafkalog.storage.records import Batch, LogScanner, batch_at
from kafkalog.storage.records.batch import HEADER_SIZE as V2_HEADER_SIZE
from kafkalog.storage.records.reader import WindowedScanner


@dataclass(frozen=True)
class LogOffsetPosition:
    """Where an offset lives: the batch holding it (first batch with last offset >= target)."""

    offset: int  # the target offset
    position: int  # byte position of the batch in the .log
    size: int  # the batch's size in bytes


class Segment(Closing):
    """One segment. ``Segment(path)`` takes the ``.log`` path (or any path whose name starts with the base)."""

    def __init__(self, log_path: str | os.PathLike, base_offset: int | None = None, *, view: Any = None):
        # (a segment under a URL has a UrlPath: name, parent, / and str() as a Path's)
        self.path = as_path(log_path)
        self._view = view
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
        self._next_offset: int | None = None
        self._file: SegmentFile | None = None  # the .log under a URL (read in windows)
        self._read_index: tuple[int | None, OffsetIndex | None] | None = None  # (size, read_index(size)), once

    @property
    def _url_file(self) -> SegmentFile | None:
        """The ``.log`` of a segment under a URL (named by its URL, or in a view of a URL), opened once: the file the
        view's entry reads (a planned rename reads the old name); None for a local segment, or one whose content a
        plan wrote (read from the view)."""
        if self._file is not None:
            return self._file
        if self._view is None and isinstance(self.path, UrlPath):  # a segment named by its URL
            url, name = self.path.parent, self.path.name
        else:
            url = getattr(self._view, "url", None)
            if url is None:
                return None
            e = self._view.entry(self.path.name)
            if e is not None and e.blob is not None:
                return None
            name = e.disk if e is not None and e.disk else self.path.name
        try:
            self._file = SegmentFile(url.spec, (url / name).fspath)
        except OSError as err:  # as a local segment that cannot be mapped: the file and why, on one line
            raise LogDirError(f"cannot open: {err}", str(self.path)) from None
        return self._file

    def open_log(self) -> None:
        """Open the ``.log`` now (mapped; under a URL opened for reads in windows, not read), so that a file that
        cannot be read is reported here (:class:`LogDirError`) rather than by a later read."""
        if self._url_file is None:
            self.buf  # noqa: B018 (maps the file)

    @classmethod
    def open(cls, log_path: str | os.PathLike, base_offset: int | None = None) -> Segment:
        return cls(log_path, base_offset)

    @classmethod
    def in_view(cls, view: Any, base_offset: int, log_name: str | None = None) -> Segment:
        """The segment ``base_offset`` of the directory ``view`` (a :class:`~kafkalog.storage.io.dirview.DirView`),
        read as the view has it; ``log_name`` for a ``.log`` under another name (a ``.swap`` file)."""
        return cls(view.path / (log_name or f"{base_offset:020d}{LOG_FILE_SUFFIX}"), base_offset, view=view)

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
            remote = self._url_file
            if remote is not None:  # read whole only when asked for the buffer (a scan reads in windows)
                self._buf = remote.view(0, remote.size)
            elif self._view is not None:
                self._buf = self._view.map(self.path.name)
            else:
                self._map, _ = map_file(self.path, LogDirError)
                self._buf = memoryview(self._map)
        return self._buf

    @property
    def size(self) -> int:
        """Size of the ``.log`` in bytes (``LogSegment.size``)."""
        if self._buf is not None:
            return len(self._buf)
        if self._view is not None:
            return self._view.size(self.path.name)
        if isinstance(self.path, UrlPath):  # (the size of the file opened, asked once)
            return cast(SegmentFile, self._url_file).size
        return self.path.stat().st_size

    @property
    def last_modified(self) -> int:
        """``File.lastModified`` of the ``.log`` in ms."""
        return self.stamp.mtime_ms

    @property
    def stamp(self) -> FileStamp:
        """Which file the ``.log`` is now (:class:`~kafkalog.storage.io.file_stamp.FileStamp`), as the directory view
        listed it (no second listing), else its ``stat``: a plan carries it, for a reader to tell the planned file
        from one swapped in under the same name."""
        return self._view.stamp(self.path.name) if self._view is not None else local_stamp(self.path.stat())

    def file_size(self, suffix: str) -> int:
        """Size of this segment's file ``suffix`` (``.index``...), 0 when it does not exist."""
        p = self.path.with_name(self.prefix + suffix)
        if self._view is not None:
            return self._view.size(p.name) if self._view.exists(p.name) else 0
        try:
            return p.stat().st_size
        except FileNotFoundError:
            return 0

    @property
    def prefix(self) -> str:
        return f"{self.base_offset:020d}"

    def scanner(self, start_position: int = 0, end: int | None = None, *, until: int | None = None) -> LogScanner:
        remote = self._url_file if self._buf is None else None
        if remote is not None:  # (inside the size the view gives it: a planned truncation reads shorter)
            end = self.size if end is None else min(end, self.size)
            return WindowedScanner(remote, start_position, end, path=str(self.path), until=until)
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
    def _has(self, path: Path) -> bool:
        return self._view.exists(path.name) if self._view is not None else path.is_file()

    @property
    def has_offset_index(self) -> bool:
        return self._has(self.index_path)

    @property
    def has_time_index(self) -> bool:
        return self._has(self.time_index_path)

    @property
    def has_txn_index(self) -> bool:
        return self._has(self.txn_index_path)

    def _open_index(self, cls, path: Path):
        """The index file at ``path`` (an empty in-memory index when it is missing)."""
        if not self._has(path):
            return cls(b"", self.base_offset, str(path))
        if self._view is not None:
            return cls(self._view.map(path.name), self.base_offset, str(path))
        return cls.open(path, self.base_offset)

    @property
    def offset_index(self) -> OffsetIndex:
        """The ``.index`` (an empty in-memory index when the file is missing)."""
        if self._offset_index is None:
            self._offset_index = self._open_index(OffsetIndex, self.index_path)
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._time_index = self._open_index(TimeIndex, self.time_index_path)
        return self._time_index

    @property
    def txn_index(self) -> TransactionIndex:
        if self._txn_index is None:
            self._txn_index = self._open_index(TransactionIndex, self.txn_index_path)
        return self._txn_index

    def index_problem(self) -> Defect | None:
        """Why the ``.index``/``.timeindex`` cannot be trusted (Kafka's sanity checks, plus entries that are not
        strictly increasing or non-zero bytes after the last entry, which would make reads go wrong), as a
        defect with the file's name as its ``index`` fact; None when they are sound or missing."""
        for idx, path in ((self.offset_index, self.index_path), (self.time_index, self.time_index_path)):
            if not self._has(path):
                continue
            try:
                idx.sanity_check()
            except CorruptIndexError as e:
                return defect("segment.indexSanityCheck", e.position, index=path.name, error=e.reason)
            if not idx.padding_is_zero():
                return defect("segment.indexPadding", index=path.name)
        return None

    def seek_index(self, size: int | None = None) -> OffsetIndex:
        """The offset index's entries a reader can seek by: positions inside the ``.log`` (below ``size``, the log's
        size by default) past its first batch, offsets from the base, both strictly increasing; the zero tail of a
        preallocated index and a damaged index's stray entries are left out. Empty without an ``.index``."""
        end = self.size if size is None else size
        index = self.offset_index
        out: list[OffsetPosition] = []
        for e in index:
            if 0 < e.position < end and e.offset >= self.base_offset \
                    and (not out or (e.offset > out[-1].offset and e.position > out[-1].position)):
                out.append(e)
        return index if len(out) == len(index) else OffsetIndex.from_entries(self.base_offset, out)

    def txn_index_excess(self) -> tuple[int, int] | None:
        """Too many entries for the ``.txnindex`` to belong to this segment by its size alone: ``(entries, the most
        this segment can need)``, or None when plausible or missing. It holds one entry per abort marker, a control
        batch of at least 61 bytes, so more entries than ``size // 61`` are garbage (a sparse 4 GiB file would
        otherwise be read entry by entry)."""
        if not self.has_txn_index:
            return None
        bound = self.size // V2_HEADER_SIZE
        n = self.txn_index.entries
        return (n, bound) if n > bound else None

    def txn_index_problem(self) -> Defect | None:
        """Why the ``.txnindex`` fails ``TransactionIndex.sanityCheck`` (the broker then recovers the segment),
        or is larger than its segment can need, as a defect (its ``index`` fact the file's name)."""
        if not self.has_txn_index:
            return None
        name = self.txn_index_path.name
        excess = self.txn_index_excess()
        if excess:
            return defect("segment.txnIndexOversized", index=name, entries=excess[0], bound=excess[1], bytes=self.size)
        try:
            self.txn_index.sanity_check()
        except CorruptIndexError as e:
            return defect("segment.indexSanityCheck", e.position, index=name, error=e.reason)
        return None

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
        """``LogSegment.readNextOffset``: next offset after the last complete batch, scanning from the last
        offset-index entry (the whole segment when the index points outside it or at garbage); the base offset
        when the segment is empty. Cached: the segment does not change under a reader."""
        if self._next_offset is None:
            self._next_offset = self._read_next_offset()
        return self._next_offset

    def _read_next_offset(self) -> int:
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
        """``LogSegment.maxTimestampSoFar`` as a loaded broker knows it: the last time-index entry. A segment
        without time-index entries (a missing or empty ``.timeindex``, e.g. after a crash) is one the broker
        recovers at load, which finds the max from the batches: so does this."""
        idx = self.time_index
        if idx.valid_entries or self.size == 0:
            return idx.last_valid_entry
        best = TimestampOffset(NO_TIMESTAMP, -1)
        try:
            for b in self.iter_batches():
                if b.max_timestamp > best.timestamp:
                    best = TimestampOffset(b.max_timestamp, b.last_offset)
                del b
        except CorruptRecordError:
            pass
        return best

    def largest_timestamp(self) -> int:
        """``LogSegment.largestTimestamp``: max timestamp if >= 0, else the ``.log`` mtime (ms)."""
        ts = self.max_timestamp_so_far().timestamp
        return ts if ts >= 0 else self.last_modified

    def first_batch_timestamp(self) -> int:
        """``LogSegment.getFirstBatchTimestamp``: the first batch's max timestamp; ``Long.MAX_VALUE`` when empty."""
        b = self.first_batch()
        if b is None:
            return 9223372036854775807
        ts = b.max_timestamp
        del b
        return ts

    def aborted_txns(self) -> list:
        """The ``.txnindex`` entries (empty when the file is missing)."""
        return list(self.txn_index) if self.has_txn_index else []

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

    # ---- byte ranges: what a reader of offsets or times reads of the .log (``LogSegment.read``), where it may split
    def read_index(self, size: int | None = None) -> OffsetIndex | None:
        """:meth:`seek_index`, or None without an ``.index`` or when it cannot be read (a reader goes without it);
        computed once per ``size`` (a planner asks for the byte range, then the split points)."""
        if self._read_index is None or self._read_index[0] != size:
            try:
                index = self.seek_index(size) if self.has_offset_index else None
            except (OSError, KafkaLogError):
                index = None
            self._read_index = (size, index)
        return self._read_index[1]

    def timestamp_skip_offset(self, timestamp: int) -> int | None:
        """An offset such that every batch whose last offset is below it has a max timestamp < ``timestamp`` (the
        time index's largest entry below ``timestamp``, plus one); None without such an entry or a usable index."""
        try:
            e = self.time_index.lookup(timestamp - 1) if self.has_time_index else None
        except (OSError, KafkaLogError):
            return None
        return None if e is None or e.timestamp < 0 or e.timestamp >= timestamp else e.offset + 1

    def start_position(self, index: OffsetIndex, start_offset: int | None, start_timestamp: int | None) -> int:
        """Where a read of the offsets from ``start_offset`` with max timestamps from ``start_timestamp`` starts:
        ``translateOffset``'s lookup in ``index`` (:meth:`read_index`) of the offset and :meth:`timestamp_skip_offset`."""
        offset = start_offset if start_offset is not None and start_offset > self.base_offset else None
        skip = None if start_timestamp is None else self.timestamp_skip_offset(start_timestamp)
        return max([0, *(index.lookup(t).position for t in (offset, skip) if t is not None)])

    def end_position(self, index: OffsetIndex, end_offset: int, size: int) -> int:
        """Where a read of the offsets below ``end_offset`` may stop: the entry of ``index`` after its first one at or
        above ``end_offset`` (whose batch, ending there, may hold offsets below it); else ``size``."""
        offsets = [e.offset for e in index]
        j = bisect.bisect_left(offsets, end_offset)
        return index.entry(j + 1).position if j + 1 < len(offsets) else size

    def read_range(self, start_offset: int | None = None, end_offset: int | None = None,
                   start_timestamp: int | None = None, size: int | None = None) -> tuple[int, int] | None:
        """The bytes ``[start, end)`` of the ``.log`` (inside ``size``) holding the batches with offsets in
        ``[start_offset, end_offset)`` and max timestamps from ``start_timestamp``, as far as the offset index tells
        (:meth:`start_position`, :meth:`end_position`; the whole log without one); None when that is nothing."""
        start, end = 0, self.size if size is None else size
        index = self.read_index(end) if (start_offset, end_offset, start_timestamp) != (None, None, None) else None
        if index is not None and len(index):
            start = self.start_position(index, start_offset, start_timestamp)
            end = end if end_offset is None else self.end_position(index, end_offset, end)
        return (start, end) if start < end else None

    def split_positions(self, start: int, end: int, size: int | None = None) -> list[int]:
        """The batch boundaries inside ``(start, end)`` a read may be split at, in order: the offset index's
        (:meth:`read_index`), or else a local segment's whole batches' ends (a URL's is not read for them)."""
        index = self.read_index(size)
        positions = [e.position for e in index] if index is not None else []
        if not positions and getattr(self._view, "url", None) is None:
            with suppress(CorruptRecordError):  # (a size field below 14: no boundary after it)
                positions.extend(b.position + b.size for b in self.scanner(start, end))
        return sorted(p for p in positions if start < p < end)

    def cut_positions(self, start: int, end: int, target: int, size: int | None = None, *,
                      in_place: bool = False) -> list[int]:
        """Cuts of ``[start, end)`` into pieces of about ``target`` bytes at most: each the last boundary of
        :meth:`split_positions` within ``target`` of the cut before (else the next one). ``in_place``: the offset
        index's entries as they are, for a reader that checks each piece starts where the one before ended
        (``api.partition._pieces``); under a URL those a log this size holds (:meth:`OffsetIndex.head`), or none."""
        if end - start <= target:
            return []
        url = getattr(self._view, "url", None)
        candidates: Sequence[int] = []
        if in_place and self.has_offset_index:
            with suppress(OSError, KafkaLogError):
                index = OffsetIndex.head(self._view, self.index_path, self.size) if url else self.offset_index
                candidates = index.positions()
        if not candidates and not (in_place and url):
            candidates = self.split_positions(start, end, size)
        cuts: list[int] = []
        cur = start
        while end - cur > target:
            i = bisect.bisect_right(candidates, cur + target) - 1
            if i < 0 or candidates[i] <= cur:
                i = bisect.bisect_right(candidates, cur)
                if i >= len(candidates) or not cur < candidates[i] < end:
                    break
            cur = candidates[i]
            cuts.append(cur)
        return cuts

    # ---- lifecycle ---------------------------------------------------------------------------------------
    def files(self) -> list[Path]:
        return [p for p in (self.path, self.index_path, self.time_index_path, self.txn_index_path) if self._has(p)]

    def close(self) -> None:
        for idx in (self._offset_index, self._time_index, self._txn_index):
            if idx is not None:
                unmap(idx.close)
        self._offset_index = self._time_index = self._txn_index = None
        self._read_index = None
        if self._buf is not None:
            if self._view is None:  # a view's mappings belong to the view
                unmap(self._buf.release)
            self._buf = None
        if isinstance(self._map, mmap.mmap):
            unmap(self._map.close)
        self._map = None
        if self._file is not None:
            self._file.close()
            self._file = None


__all__ = ["LogOffsetPosition", "NO_TIMESTAMP", "Segment", "WindowedScanner"]
