"""Planning: find the segments under the inputs and cut them into Spark input partitions by bytes.

* small segments are packed together (each costs its size plus ``openCostInBytes``);
* the segments are storage's (:class:`~kafkalog.storage.log.segment_ref.SegmentRef` s of
  ``PartitionLog.segment_refs``), and so are the rules of their byte ranges (storage's
  :class:`~kafkalog.storage.files.segment.Segment`): large segments are split at batch boundaries
  (``split_positions``: their offset index's, or a local segment's batch ends without one; a remote one without an
  index is not split);
* ``startingOffset``/``endingOffset`` skip whole segments by base offset (``SegmentRef.may_hold``) and cut the
  byte range of the first and last one through the offset index; ``startingTimestamp`` skips the prefix of each
  segment whose batches all have smaller max timestamps, through the time index (``Segment.read_range``; exact
  filtering of records happens in the scan);
* the ``offset`` option (rpk's grammar) is resolved per partition, local or under a URL
  (:func:`partition_windows`: the library's ``OffsetSpec.resolve_in`` on its ``PartitionLog``) and each piece
  carries its partition's ``[lo, hi)``, read as above.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from kafkalog.storage.errors import LogDirError
from kafkalog.storage.files.names import offset_from_file_name
from kafkalog.storage.io.file_stamp import FileStamp
from kafkalog.storage.io.fs import FsSpec, display, info, listdir, split_uri
from kafkalog.storage.log.datadir import check_topics, live_partition_name
from kafkalog.storage.log.dir_checkpoints import open_partition_log
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.segment_ref import OpenSegments, SegmentRef, fs_path

from .filters import columns, keeps
from .options import ReadOptions

SKIPPED_DIRS = ("remote-log-index-cache",)


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
    stamp: FileStamp | None = None  # which file the segment was when planned (a reader checks it: FileStamp.holds)

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


def _refs(spec: FsSpec, pdir: str) -> list[SegmentRef]:
    """The partition's segments by base offset, as storage's partition model lists them (the same segments every
    command reads), for a local dir and a URL alike."""
    with PartitionLog(fs_path(spec, pdir)) as plog:
        problem = plog.unfinished_swap
        if problem:  # reading the listed segments would silently miss records
            raise LogDirError(problem, display(spec, pdir))
        return plog.segment_refs()


def partition_segments(spec: FsSpec, pdir: str) -> list[SegmentRef]:
    """The segments of one partition dir, as they are now: what a stream's executor reads of a partition the
    driver chose (the query's topic and partition options were applied when it was chosen; applying them again to
    the partition's own dir would refuse it). A partition dir that is gone has no segments; a dir that cannot be
    read as a partition (an unfinished swap, a name that is not a partition's) raises :class:`LogDirError`."""
    e = info(spec, pdir)
    if e is None:
        return []
    if not e.is_dir:
        raise LogDirError("not a partition directory", display(spec, pdir))
    if _live_partition(e.name) is None:
        raise LogDirError("not a live partition directory (<topic>-<partition>)", display(spec, pdir))
    try:
        return _refs(spec, pdir)
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


def discover(opts: ReadOptions) -> list[SegmentRef]:
    """Every segment under the input paths, in (topic, partition, base offset) order, filtered by topic and
    partition."""
    if not opts.paths:
        raise LogDirError("no input: give load(path) or option('paths', ...) (data dirs, partition dirs or .log files)")
    found: dict[tuple[FsSpec, str], SegmentRef] = {}
    present: set[str] = set()
    for raw in opts.paths:
        spec, path = split_uri(raw, opts.fs_options())
        e = info(spec, path)
        if e is None:
            raise LogDirError("no such file or directory", raw)
        segs: list[SegmentRef] = []
        if not e.is_dir:
            if not e.name.endswith(".log"):
                raise LogDirError("not a .log segment file, a partition dir or a data dir", raw)
            parent = path.rstrip("/").rsplit("/", 1)[0] if "/" in path else ""
            tp = _live_partition(parent.rsplit("/", 1)[-1])
            topic, part = tp if tp else (None, None)
            segs = [s for s in _refs(spec, parent) if s.path == e.path] if parent and tp else []
            if not segs:
                segs = [SegmentRef(spec, path, topic, part, _base_of(e.name, raw), e.size, None, e.stamp)]
        else:
            tp = _live_partition(e.name)
            entries = listdir(spec, path)
            has_logs = any(not x.is_dir and x.name.endswith(".log") for x in entries)
            if tp is not None and has_logs:
                present.add(tp[0])
                if _wanted(opts, *tp):
                    segs = _refs(spec, path)
            else:
                for sub in sorted(entries, key=lambda x: x.name):
                    if not sub.is_dir or sub.name in SKIPPED_DIRS:
                        continue
                    stp = _live_partition(sub.name)
                    if stp is not None:
                        present.add(stp[0])
                    if stp is None or not _wanted(opts, *stp):
                        continue
                    segs.extend(_refs(spec, sub.path))
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


# --------------------------------------------------------------------------------------------- planning
def partition_windows(segments: list[SegmentRef], opts: ReadOptions) -> dict[tuple[FsSpec, str], tuple[int, int]]:
    """The ``offset`` option resolved for each partition dir of ``segments``, local or under a URL (its log start and
    end offsets and its time index, through the library's
    :meth:`~kafkalog.storage.log.offset_spec.OffsetSpec.resolve_in`)."""
    spec = opts.offset_spec
    if spec is None:
        return {}
    out: dict[tuple[FsSpec, str], tuple[int, int]] = {}
    for seg in segments:
        key = (seg.spec, seg.dir)
        if key in out:
            continue
        with open_partition_log(seg.partition_dir) as plog:  # a local dir or a URL, with its data dir's checkpoints
            out[key] = spec.resolve_in(plog)
    return out


def plan_pieces(segments: list[SegmentRef], opts: ReadOptions) -> list[Piece]:
    """Each segment's byte range under the offset and time options, cut into pieces of about the target size at
    batch boundaries: the segment's own rules (storage's :meth:`~kafkalog.storage.files.segment.Segment.read_range`
    and :meth:`~kafkalog.storage.files.segment.Segment.split_positions`, inside the size discovery saw)."""
    pieces: list[Piece] = []
    total = sum(s.size for s in segments)
    target = _target_bytes(total, len(segments), opts)
    windows = partition_windows(segments, opts)
    base_opts = opts
    with OpenSegments() as opened:
        for ref in segments:
            if ref.size == 0:
                continue
            window = windows.get((ref.spec, ref.dir))
            opts = base_opts.in_window(window)
            if not ref.may_hold(opts.start_offset, opts.end_offset):
                continue
            if (opts.start_offset, opts.end_offset, opts.start_timestamp) != (None, None, None):
                rng = opened.segment(ref).read_range(opts.start_offset, opts.end_offset, opts.start_timestamp,
                                                     ref.size)
            else:
                rng = (0, ref.size)
            if rng is None:
                continue
            start, end = rng
            cuts = opened.segment(ref).cut_positions(start, end, target, ref.size) if end - start > target else []
            bounds = [start, *cuts, end]
            for a, b in zip(bounds, bounds[1:], strict=False):
                pieces.append(Piece(ref.spec, ref.path, ref.topic, ref.partition, ref.base_offset, a, b, ref.size,
                                    window, ref.stamp))
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
