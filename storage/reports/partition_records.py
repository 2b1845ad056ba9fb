"""A partition's batches and records in offset order, streamed segment by segment (mapped, or under a URL read in
windows through the filesystem seam), over the whole log or a window of offsets ``[lo, hi)`` (an offset spec
resolved in the partition: reading starts at the batch the offset index points to). What ``kafkalog diff`` aligns, and the differential tests' view of a log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkalog.storage.errors import CorruptRecordError
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io.fs import as_path
from kafkalog.storage.log.loss import segment_end_error
from kafkalog.storage.log.offset_spec import OffsetSpec
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.records import Batch

__all__ = ["BatchInfo", "Window", "iter_partition_batches", "iter_partition_records", "offset_window"]


@dataclass(slots=True)
class BatchInfo:
    segment: str
    position: int
    base_offset: int
    last_offset: int
    magic: int
    data: bytes

    def header(self) -> dict:
        return {"segment": self.segment, "position": self.position, "baseOffset": self.base_offset,
                "lastOffset": self.last_offset, "magic": self.magic, "size": len(self.data)}


Window = tuple[int, int]  # offsets [lo, hi)


def offset_window(partition_dir: str | os.PathLike, spec: OffsetSpec) -> Window:
    """``[lo, hi)`` of ``spec`` in one partition (:meth:`OffsetSpec.resolve_in_dir`), or in a lone ``.log``."""
    p = as_path(partition_dir)
    if not p.is_file():
        return spec.resolve_in_dir(p)
    with _lone_segment(p) as seg:  # its log starts at its base offset and ends at its next offset

        def offset_for_time(ms: int) -> int | None:
            found = seg.find_offset_by_timestamp(ms, seg.base_offset) if seg.largest_timestamp() >= ms else None
            return None if found is None else found[1]

        return spec.resolve(seg.base_offset, seg.read_next_offset(), offset_for_time)


def _lone_segment(log_file: Path) -> Segment:
    """A ``.log`` file given alone, as the only segment of a partition (its base offset from its name, else 0)."""
    name = log_file.name
    return Segment(log_file, int(name[:-4]) if name.endswith(".log") and name[:-4].isdigit() else 0)


def _segments_in(log: PartitionLog, window: Window | None) -> list[tuple[Segment, int]]:
    """``(segment, start position)`` of the segments to read: every one from 0, or, for ``[lo, hi)``, from the
    batch the broker would read ``lo`` at (floor segment, offset index) until the segment starting at ``hi``."""
    if window is None:
        return [(s, 0) for s in log.segments]
    lo, hi = window
    if lo >= hi:
        return []
    found = log.lookup(lo)
    if found is None:
        return []
    first, pos = found[0], found[1].position
    out: list[tuple[Segment, int]] = []
    for s in log.segments:
        if out:
            if s.base_offset >= hi:
                break
            out.append((s, 0))
        elif s is first:
            out.append((s, pos))
    return out


def _segment_runs(source: str | os.PathLike, window: Window | None) -> Iterator[tuple[Segment, Iterator[Batch]]]:
    """``(segment, its batches)`` to read, in order: of a partition dir (:func:`_segments_in`, the batches as
    :meth:`PartitionLog.segment_batches` reads them), or of a lone ``.log`` file, read as the only (so the
    active) segment of a partition (its base offset from its name, else 0)."""
    p = as_path(source)
    if not p.is_file():
        with PartitionLog(p) as log:
            for seg, start in _segments_in(log, window):
                yield seg, log.segment_batches(seg, start)
        return
    with _lone_segment(p) as seg:
        found = seg.translate_offset(window[0]) if window is not None and window[0] < window[1] else None
        if window is None or found is not None:
            scanner = seg.scanner(0 if found is None else found.position)
            yield seg, iter(scanner)
            err = segment_end_error(seg.path, scanner, seg.size, active=True, next_base_offset=None)
            if err is not None:
                raise err


def _in_window(b, window: Window | None) -> int:
    """-1 before the window, 0 in it, 1 past it (a v2 batch starting at or after its end; a v0/v1 entry holds
    its last offset only, so it is read, and the reading stops after the entry that reaches the end)."""
    if window is None:
        return 0
    if b.last_offset < window[0]:
        return -1
    if b.magic >= 2 and b.base_offset >= window[1]:
        return 1
    return 0


def _last_in(b, window: Window | None) -> bool:
    """No later batch holds an offset in ``window`` (offsets only grow)."""
    return window is not None and b.last_offset >= window[1] - 1


def _out_of_order(offset: int, previous: int, seg: Path, position: int) -> CorruptRecordError:
    """Offsets that do not increase: the batches and records levels align the two sides by offset, which needs
    them in order (the bytes level compares such logs)."""
    return CorruptRecordError(f"offset {offset} follows offset {previous}: offsets do not increase, so the two "
                              "sides cannot be aligned by offset (--level bytes compares the files)", str(seg),
                              position)


def _window_batches(partition_dir: str | os.PathLike, window: Window | None) -> Iterator[tuple[Path, Batch, bool]]:
    """``(segment, batch, last)`` for every complete batch holding offsets in ``window`` (every batch without
    one), in offset order; ``last``: no later batch holds an offset in it. Raises :class:`CorruptRecordError`
    where a batch's last offset is not above the previous one's, and where a segment ends short of its end
    (:meth:`PartitionLog.segment_batches`: only the active segment may end in a torn batch). The batch is a view of
    the segment's bytes (a URL's: read in windows through the filesystem seam): the caller copies what it keeps
    before the next one."""
    prev = -1
    for seg, batches in _segment_runs(partition_dir, window):
        for b in batches:
            if b.last_offset <= prev:
                raise _out_of_order(b.last_offset, prev, seg.path, b.position)
            prev = b.last_offset
            where = _in_window(b, window)
            if where:
                if where > 0:
                    return
                continue
            last = _last_in(b, window)
            yield seg.path, b, last
            del b
            if last:
                return


def iter_partition_batches(partition_dir: str | os.PathLike, window: Window | None = None) -> Iterator[BatchInfo]:
    """Every complete batch of every segment (copied out of the mmap, so nothing outlives it); with ``window``
    only the batches holding offsets in ``[lo, hi)``. Raises :class:`CorruptRecordError` where a batch's last
    offset is not above the previous one's."""
    for seg, b, _ in _window_batches(partition_dir, window):
        info = BatchInfo(seg.name, b.position, b.base_offset, b.last_offset, b.magic, bytes(b.buf))
        del b
        yield info


RecordKey = tuple  # (offset, timestamp, key, value, headers, segment, position)


def iter_partition_records(partition_dir: str | os.PathLike, window: Window | None = None) -> Iterator[tuple]:
    """``(offset, timestamp, key, value, headers, segment, position)`` for every record (control records too);
    with ``window`` only the records with offsets in ``[lo, hi)``. Raises :class:`CorruptRecordError` where an
    offset is not above the previous record's."""
    lo, hi = window if window is not None else (-1, 1 << 63)
    prev = -1
    for seg, b, _ in _window_batches(partition_dir, window):
        pos = b.position
        recs: list[tuple] = []
        for r in b.records():
            if r.offset <= prev:
                raise _out_of_order(r.offset, prev, seg, pos)
            prev = r.offset
            if lo <= r.offset < hi:
                recs.append((r.offset, r.timestamp, r.key, r.value, tuple(r.headers)))
        del b
        for t in recs:
            yield (*t, seg.name, pos)
