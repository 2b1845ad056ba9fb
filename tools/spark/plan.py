"""Planning: find the segments under the inputs and cut them into Spark input partitions by bytes.

* small segments are packed together (each costs its size plus ``openCostInBytes``);
* large segments are split at batch boundaries taken from their offset index (``.index``); a local segment
  without a usable index is split at boundaries found by hopping over batch headers; a remote one is not split;
* ``startingOffset``/``endingOffset`` skip whole segments by base offset and cut the byte range of the first and
  last one through the offset index; ``startingTimestamp`` skips the prefix of each segment whose batches all
  have smaller max timestamps, through the time index (exact filtering of records happens in the scan);
* the ``offset`` option (rpk's grammar) is resolved per partition, local or under a URL
  (:func:`partition_windows`: the library's ``OffsetSpec.resolve_in`` on its ``PartitionLog``) and each piece
  carries its partition's ``[lo, hi)``, read as above.
"""

from __future__ import annotations

import bisect
import fnmatch
import struct
from dataclasses import dataclass
from pathlib import Path

from kafkalog.storage.errors import KafkaLogError, LogDirError
from kafkalog.storage.files.names import offset_from_file_name
from kafkalog.storage.files.offset_index import OffsetIndex
from kafkalog.storage.files.segment import Segment as LogSegment
from kafkalog.storage.io.closing import Closing
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.io.fs import FsSpec, SegmentFile, UrlPath, display, info, listdir, split_uri
from kafkalog.storage.log.datadir import check_topics, live_partition_name
from kafkalog.storage.log.dir_checkpoints import open_partition_log
from kafkalog.storage.log.partition import PartitionLog

from .filters import columns, keeps
from .options import ReadOptions

_ENTRY_HEAD = struct.Struct(">qi")
SKIPPED_DIRS = ("remote-log-index-cache",)


@dataclass(frozen=True)
class Segment:
    """One segment found by discovery: a picklable record of a segment of storage's partition model
    (:class:`~kafkalog.storage.log.partition.PartitionLog`'s), with no rule of its own."""

    spec: FsSpec
    path: str
    topic: str | None
    partition: int | None
    base_offset: int
    size: int
    next_base_offset: int | None  # base offset of the following segment of the same partition

    @property
    def name(self) -> str:
        return display(self.spec, self.path)


@dataclass(frozen=True)
class Piece:
    """Bytes ``[start, end)`` of one segment; both ends are batch boundaries (``end`` may be the file size)."""

    spec: FsSpec
    path: str
    topic: str | None
    partition: int | None
    base_offset: int
    start: int
    end: int
    file_size: int
    window: tuple[int, int] | None = None  # the partition's resolved ``offset`` option: offsets [lo, hi)

    @property
    def name(self) -> str:
        return display(self.spec, self.path)

    @property
    def length(self) -> int:
        return self.end - self.start


def _live_partition(name: str) -> tuple[str, int] | None:
    """Topic and partition of a live partition dir, by storage's one parser (``-delete``/``-future``/``-stray``
    dirs and names Kafka would reject give None)."""
    tp = live_partition_name(name)
    return None if tp is None else (tp.topic, tp.partition)


def partition_dir(spec: FsSpec, pdir: str) -> str | UrlPath:
    """A partition dir as storage's partition model opens it: a local path, or a URL (read through the seam)."""
    return pdir if spec.is_local else UrlPath(spec, pdir)


def _fspath(path: Path | UrlPath) -> str:
    return path.fspath if isinstance(path, UrlPath) else str(path)


def _segments_of(spec: FsSpec, pdir: str, topic: str, partition: int) -> list[Segment]:
    """The partition's segments by base offset, as storage's partition model lists them
    (:class:`~kafkalog.storage.log.partition.PartitionLog`: the same segments every command reads), for a local dir
    and a URL alike."""
    with PartitionLog(partition_dir(spec, pdir)) as plog:
        problem = plog.unfinished_swap
        if problem:  # reading the listed segments would silently miss records
            raise LogDirError(problem, display(spec, pdir))
        out = []
        for s in plog.segments:
            nxt = plog.higher_segment(s)
            out.append(Segment(spec, _fspath(s.path), topic, partition, s.base_offset, s.size,
                               None if nxt is None else nxt.base_offset))
    return out


def partition_segments(spec: FsSpec, pdir: str) -> list[Segment]:
    """The segments of one partition dir, as they are now: what a stream's executor reads of a partition the
    driver chose (the query's topic and partition options were applied when it was chosen; applying them again to
    the partition's own dir would refuse it). A partition dir that is gone has no segments; a dir that cannot be
    read as a partition (an unfinished swap, a name that is not a partition's) raises :class:`LogDirError`."""
    e = info(spec, pdir)
    if e is None:
        return []
    if not e.is_dir:
        raise LogDirError("not a partition directory", display(spec, pdir))
    tp = _live_partition(e.name)
    if tp is None:
        raise LogDirError("not a live partition directory (<topic>-<partition>)", display(spec, pdir))
    try:
        return _segments_of(spec, pdir, *tp)
    except FileNotFoundError:  # deleted while listing
        return []


_DIR_COLUMNS = {"topic", "partition"}


def _wanted(opts: ReadOptions, topic: str | None, partition: int | None) -> bool:
    if opts.topics is not None and (topic is None or not any(fnmatch.fnmatchcase(topic, p) for p in opts.topics)):
        return False
    if opts.topic_in is not None and topic not in opts.topic_in:
        return False
    if opts.partitions is not None and partition not in opts.partitions:
        return False
    dir_filters = [n for n in opts.filters if columns(n) <= _DIR_COLUMNS]
    return keeps(tuple(dir_filters), {"topic": topic, "partition": partition})


def discover(opts: ReadOptions) -> list[Segment]:
    """Every segment under the input paths, in (topic, partition, base offset) order, filtered by topic and
    partition."""
    if not opts.paths:
        raise LogDirError("no input: give load(path) or option('paths', ...) (data dirs, partition dirs or .log files)")
    found: dict[tuple[FsSpec, str], Segment] = {}
    present: set[str] = set()
    for raw in opts.paths:
        spec, path = split_uri(raw, opts.fs_options())
        e = info(spec, path)
        if e is None:
            raise LogDirError("no such file or directory", raw)
        segs: list[Segment] = []
        if not e.is_dir:
            if not e.name.endswith(".log"):
                raise LogDirError("not a .log segment file, a partition dir or a data dir", raw)
            parent = path.rstrip("/").rsplit("/", 1)[0] if "/" in path else ""
            tp = _live_partition(parent.rsplit("/", 1)[-1])
            topic, part = tp if tp else (None, None)
            segs = [s for s in _segments_of(spec, parent, *tp) if s.path == e.path] if parent and tp else []
            if not segs:
                segs = [Segment(spec, path, topic, part, _base_of(e.name, raw), e.size, None)]
        else:
            tp = _live_partition(e.name)
            entries = listdir(spec, path)
            has_logs = any(not x.is_dir and x.name.endswith(".log") for x in entries)
            if tp is not None and has_logs:
                present.add(tp[0])
                if _wanted(opts, *tp):
                    segs = _segments_of(spec, path, *tp)
            else:
                for sub in sorted(entries, key=lambda x: x.name):
                    if not sub.is_dir or sub.name in SKIPPED_DIRS:
                        continue
                    stp = _live_partition(sub.name)
                    if stp is not None:
                        present.add(stp[0])
                    if stp is None or not _wanted(opts, *stp):
                        continue
                    segs.extend(_segments_of(spec, sub.path, *stp))
        for s in segs:
            if s.topic is not None:
                present.add(s.topic)
            if _wanted(opts, s.topic, s.partition):
                found.setdefault((s.spec, s.path), s)
    check_topics(opts.topics, present, ", ".join(opts.paths), glob=True)  # a WHERE topic = ... may match nothing
    return sorted(found.values(), key=lambda s: (s.topic or "", s.partition or 0, s.base_offset, s.path))


def _base_of(name: str, raw: str) -> int:
    try:
        return offset_from_file_name(name)
    except ValueError:
        raise LogDirError("segment file name does not start with a base offset", raw) from None


# --------------------------------------------------------------------------------------------- indexes
class Opened(Closing):
    """Storage's segments (:class:`~kafkalog.storage.files.segment.Segment`) of discovery's records, their indexes
    read as every command reads them (a URL's partition dir through one read-only view), opened when first asked
    for, open until :meth:`close`."""

    def __init__(self) -> None:
        self._views: dict[tuple[FsSpec, str], DirView] = {}
        self._segments: dict[tuple[FsSpec, str], LogSegment] = {}

    def segment(self, seg: Segment) -> LogSegment:
        s = self._segments.get((seg.spec, seg.path))
        if s is not None:
            return s
        if seg.spec.is_local:  # its files mapped as they are
            s = LogSegment(seg.path, seg.base_offset)
        else:
            key = (seg.spec, _partition_dir(seg))
            view = self._views.get(key)
            if view is None:
                view = self._views[key] = DirView(partition_dir(*key), DirView.READONLY)
            s = LogSegment.in_view(view, seg.base_offset, seg.path.rstrip("/").rsplit("/", 1)[-1])
        self._segments[(seg.spec, seg.path)] = s
        return s

    def close(self) -> None:
        for s in self._segments.values():
            s.close()
        for v in self._views.values():
            v.close()
        self._segments.clear()
        self._views.clear()


def seek_index(seg: Segment, opened: Opened) -> OffsetIndex | None:
    """The entries of the segment's offset index a read can start at (storage's
    :meth:`~kafkalog.storage.files.segment.Segment.seek_index`, inside the ``size`` discovery saw), or None when
    there is no index or it cannot be read (planning then goes without it)."""
    try:
        s = opened.segment(seg)
        return s.seek_index(seg.size) if s.has_offset_index else None
    except (OSError, KafkaLogError):
        return None


def time_index_skip_offset(seg: Segment, start_ts: int, opened: Opened) -> int | None:
    """An offset such that every batch whose last offset is below it has max timestamp < ``start_ts``
    (from the segment's time index: its largest entry with timestamp < start_ts), or None."""
    try:
        s = opened.segment(seg)
        if not s.has_time_index:
            return None
        e = s.time_index.lookup(start_ts - 1)
    except (OSError, KafkaLogError):
        return None
    if e.timestamp < 0 or e.timestamp >= start_ts:
        return None
    return e.offset + 1


def header_boundaries(seg: Segment, start: int, end: int) -> list[int]:
    """Batch start positions in (start, end) by hopping over entry headers (local files only)."""
    out = []
    with SegmentFile(seg.spec, seg.path) as f:
        if not f.is_mapped:
            return []
        buf = f.view(0, f.size)
        try:
            pos = start
            while pos + 17 <= end:
                _, size = _ENTRY_HEAD.unpack_from(buf, pos)
                if size < 14:
                    break
                pos += 12 + size
                if start < pos < end:
                    out.append(pos)
        finally:
            buf.release()
    return out


# --------------------------------------------------------------------------------------------- planning
def segment_range(seg: Segment, opts: ReadOptions, index: OffsetIndex | None, opened: Opened) -> tuple[int, int] | None:
    """The byte range of ``seg`` worth reading under the offset/time options (``index``: its :func:`seek_index`), or
    None to skip it."""
    s_off, e_off = opts.start_offset, opts.end_offset
    if s_off is not None and seg.next_base_offset is not None and seg.next_base_offset <= s_off:
        return None
    if e_off is not None and seg.base_offset >= e_off:
        return None
    start, end = 0, seg.size
    if index is not None and len(index):
        targets = []
        if s_off is not None and s_off > seg.base_offset:
            targets.append(s_off)
        if opts.start_timestamp is not None:
            t = time_index_skip_offset(seg, opts.start_timestamp, opened)
            if t is not None:
                targets.append(t)
        for target in targets:
            start = max(start, index.lookup(target).position)  # Kafka's lookup: the largest entry <= target
        if e_off is not None:
            entries = list(index)
            j = bisect.bisect_left([e.offset for e in entries], e_off)  # first entry with offset >= end offset
            if j + 1 < len(entries):
                end = entries[j + 1].position
    if start >= end:
        return None
    return start, end


def _cuts(candidates: list[int], start: int, end: int, target: int) -> list[int]:
    """Choose cut positions among ``candidates`` so that pieces are about ``target`` bytes."""
    cuts = []
    cur = start
    while end - cur > target:
        i = bisect.bisect_right(candidates, cur + target) - 1
        if i < 0 or candidates[i] <= cur:
            i = bisect.bisect_right(candidates, cur)
            if i >= len(candidates) or candidates[i] >= end:
                break
        cut = candidates[i]
        cuts.append(cut)
        cur = cut
    return cuts


def _partition_dir(seg: Segment) -> str:
    return seg.path.rstrip("/").rsplit("/", 1)[0] if "/" in seg.path else "."


def partition_windows(segments: list[Segment], opts: ReadOptions) -> dict[tuple[FsSpec, str], tuple[int, int]]:
    """The ``offset`` option resolved for each partition dir of ``segments``, local or under a URL (its log start and
    end offsets and its time index, through the library's
    :meth:`~kafkalog.storage.log.offset_spec.OffsetSpec.resolve_in`)."""
    spec = opts.offset_spec
    if spec is None:
        return {}
    out: dict[tuple[FsSpec, str], tuple[int, int]] = {}
    for seg in segments:
        key = (seg.spec, _partition_dir(seg))
        if key in out:
            continue
        with open_partition_log(partition_dir(*key)) as plog:  # a local dir or a URL, with its data dir's checkpoints
            out[key] = spec.resolve_in(plog)
    return out


def plan_pieces(segments: list[Segment], opts: ReadOptions) -> list[Piece]:
    pieces: list[Piece] = []
    total = sum(s.size for s in segments)
    target = _target_bytes(total, len(segments), opts)
    windows = partition_windows(segments, opts)
    base_opts = opts
    with Opened() as opened:
        for seg in segments:
            if seg.size == 0:
                continue
            window = windows.get((seg.spec, _partition_dir(seg)))
            opts = base_opts.in_window(window)
            needs_index = seg.size > target or opts.start_offset is not None or opts.end_offset is not None \
                or opts.start_timestamp is not None
            index = seek_index(seg, opened) if needs_index else None
            rng = segment_range(seg, opts, index, opened)
            if rng is None:
                continue
            start, end = rng
            cuts: list[int] = []
            if end - start > target:
                candidates = [e.position for e in index] if index is not None else []
                if not candidates and seg.spec.is_local:
                    candidates = header_boundaries(seg, start, end)
                cuts = _cuts(sorted(c for c in candidates if start < c < end), start, end, target)
            bounds = [start, *cuts, end]
            for a, b in zip(bounds, bounds[1:], strict=False):
                pieces.append(Piece(seg.spec, seg.path, seg.topic, seg.partition, seg.base_offset, a, b, seg.size,
                                    window))
    return pieces


def _target_bytes(total: int, nfiles: int, opts: ReadOptions) -> int:
    target = opts.max_partition_bytes
    if opts.min_partitions > 1:
        per = (total + nfiles * opts.open_cost) // opts.min_partitions
        target = min(target, max(per, 1))
    return max(target, 1)


def pack(pieces: list[Piece], opts: ReadOptions, total: int | None = None) -> list[list[Piece]]:
    """Group pieces into input partitions of about ``maxPartitionBytes`` (in order, so a partition's pieces stay
    together)."""
    total = sum(p.length for p in pieces) if total is None else total
    target = _target_bytes(total, len(pieces), opts)
    groups: list[list[Piece]] = []
    cur: list[Piece] = []
    cur_cost = 0
    for p in pieces:
        cost = p.length + opts.open_cost
        if cur and cur_cost + cost > target:
            groups.append(cur)
            cur, cur_cost = [], 0
        cur.append(p)
        cur_cost += cost
    if cur:
        groups.append(cur)
    return groups


def plan(opts: ReadOptions) -> list[list[Piece]]:
    """Discover and cut: the input partitions (lists of pieces) for ``opts``."""
    segs = discover(opts)
    return pack(plan_pieces(segs, opts), opts)
