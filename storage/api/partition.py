"""A partition of the public API (:class:`Partition`), the offset ranges it takes, and its Arrow output."""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kafkalog.storage.codec.compression import DEFAULT_DECOMPRESS_LIMIT, native_codec
from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.export import (
    DEFAULT_ROW_GROUP_BYTES,
    ExportFilter,
    ExportStats,
    PartitionRead,
    Span,
    SpanEnd,
    _native_runs,
    _record_chunks,
    _record_window,
    iter_partition_batches,
    rows_of,
    segment_start,
)
from kafkalog.storage.errors import KafkaLogError, require
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io.forward import Forward
from kafkalog.storage.io.fs import is_url
from kafkalog.storage.log.datadir import DataDir
from kafkalog.storage.log.offset_spec import OffsetSpec, parse_offset_spec, parse_offset_specs
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.parallel import iter_thread_streams
from kafkalog.storage.records import Batch
from kafkalog.storage.records.batch import RECORD_CHUNK
from kafkalog.storage.records.columns import BYTES_PER_CHUNK, RECORD_COLUMNS, RecordColumns, arrow_schema
from kafkalog.storage.reports.describe import describe_partition

if TYPE_CHECKING:
    import pyarrow

PathLike = str | os.PathLike
Offsets = str | OffsetSpec | Iterable[str] | None
"""An offset range: ``rpk topic consume -o``'s grammar (``"10:20"``, ``"@2024-05-01:1h"``, ``"-5"``; kcat's
``s@``/``e@`` as two texts), or a parsed :class:`~kafkalog.storage.log.offset_spec.OffsetSpec`; None: everything."""

DEFAULT_ARROW_ROWS = 64 * 1024
"""Rows per ``pyarrow.RecordBatch`` of :meth:`LogDirs.to_arrow`: a batch is cut at the first log batch that
reaches it (so it may hold a few more; the last of each piece of a partition's read fewer)."""


@dataclass(frozen=True)
class Window:
    """Offsets ``[from_offset, to_offset)`` and record timestamps ``[from_time, to_time)`` (epoch ms) the reader
    keeps (None: unbounded). The offsets go through the offset indexes (whole segments skipped); ``from_time``
    through the time indexes: the read starts where ``ListOffsets`` by that timestamp starts (every batch before
    has a smaller max timestamp: whole segments skipped), and a later batch whose max timestamp (CreateTime) is
    before it is skipped without decoding. ``to_time`` is a filter (timestamps need not increase with offsets)."""

    from_offset: int | None = None
    to_offset: int | None = None
    from_time: int | None = None
    to_time: int | None = None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _spec(offsets: Offsets) -> OffsetSpec | None:
    if offsets is None or isinstance(offsets, OffsetSpec):
        return offsets
    if isinstance(offsets, str):
        return parse_offset_spec(offsets)
    return parse_offset_specs(list(offsets))


def _topic_set(topics: str | Iterable[str] | None) -> set[str] | None:
    if topics is None:
        return None
    return {topics} if isinstance(topics, str) else set(topics)


class _Owner(Protocol):
    """What a :class:`Partition` asks the :class:`~kafkalog.storage.api.LogDirs` that opened it."""

    @property
    def resolver(self) -> ConfigResolver: ...


class Partition:
    """One partition log of a :class:`LogDirs` (``<topic>-<partition>`` in one of its data dirs).

    >>> dirs = kafkalog.open("fixtures/kafka-4.3.1-kraft/data")
    >>> p = dirs.partition("multi-segment", 0)
    >>> p.log_start_offset, p.log_end_offset, p.high_watermark, p.last_stable_offset
    (0, 150, 150, 150)
    >>> [s.base_offset for s in p.segments]
    [0, 44, 120]
    >>> [r["offset"] for r in p.records("3:5")]
    [3, 4]
    >>> p.config["cleanup.policy"], p.config.source("cleanup.policy")
    (['delete'], 'Kafka default')
    >>> dirs.close()
    """

    def __init__(self, log: PartitionLog, data_dir: DataDir, owner: _Owner):
        self.log = log
        """The library's :class:`~kafkalog.storage.log.partition.PartitionLog` this wraps (every offset rule is its)."""
        self.data_dir = data_dir
        """The :class:`~kafkalog.storage.log.datadir.DataDir` holding it."""
        self._owner = owner

    def __repr__(self) -> str:
        return f"Partition({self.name!r}, {str(self.path)!r})"

    # ---- names ------------------------------------------------------------------------------------------
    topic = Forward[str]("log.topic")
    partition = Forward[int]("log.partition")
    name = Forward[str]("log.name", "``<topic>-<partition>``.")
    path = Forward[Path]("log.path", "The partition dir.")
    topic_id = Forward[str | None]("log.topic_id", "The topic id ``partition.metadata`` holds (None without one).")

    # ---- offsets ----------------------------------------------------------------------------------------
    log_start_offset = Forward[int](
        "log.log_start_offset",
        "The log start offset the broker loads (``log-start-offset-checkpoint`` and the first segment).")
    log_end_offset = Forward[int](
        "log.log_end_offset", "The next offset the broker would assign (``readNextOffset`` of the active segment).")
    high_watermark = Forward[int](
        "log.high_watermark", "The checkpointed high watermark capped at the log end offset.")

    @property
    def last_stable_offset(self) -> int:
        """The last stable offset of a read_committed consumer offline (no producer expires): the first offset of
        the earliest open transaction, else the high watermark."""
        return self.log.last_stable_offset(0, 1 << 62)

    def offset_for_time(self, timestamp_ms: int) -> int | None:
        """``ListOffsets`` by timestamp: the first offset whose record has a timestamp >= ``timestamp_ms`` (the
        time indexes, as ``fetchOffsetByTimestamp``); None if every record is older."""
        found = self.log.lookup_timestamp(timestamp_ms)
        return None if found is None else found[1]

    def offsets(self, offsets: Offsets) -> tuple[int, int]:
        """``[from, to)``: ``offsets`` (rpk's grammar) resolved against this partition's offsets and time
        indexes."""
        spec = _spec(offsets)
        if spec is None:
            return self.log_start_offset, self.log_end_offset
        return spec.resolve_in(self.log)

    size = Forward[int]("log.size", "Bytes of the ``.log`` files.")

    # ---- configuration ----------------------------------------------------------------------------------
    @property
    def config(self) -> LogConfig:
        """The topic's effective configuration (``values``; ``source(name)`` says where each came from:
        Kafka's default, server.properties, dynamic broker config, topic config in ``__cluster_metadata``)."""
        return self._owner.resolver.log_config(self.data_dir.path, self.topic)

    # ---- contents ---------------------------------------------------------------------------------------
    segments = Forward[list[Segment]](
        "log.segments", "The segments, by base offset (:class:`~kafkalog.storage.files.segment.Segment`).")

    def batches(self, offsets: Offsets = None) -> Iterator[tuple[Segment, Batch]]:
        """``(segment, batch)`` of every batch whose offsets reach into the range, in offset order (a v0/v1
        wrapper is placed by its last offset); shallow: records are decoded only when asked
        (``batch.records()``). A batch is a view over the segment's mmap: do not keep it past
        :meth:`LogDirs.close`."""
        lo, hi = self.offsets(offsets)
        if lo >= hi:
            return
        for seg, b in self.log.iter_batches(lo):
            if b.magic >= 2 and b.base_offset >= hi:
                return
            if b.last_offset >= lo:
                yield seg, b
            if b.last_offset >= hi - 1:
                return

    def _filter(self, offsets: Offsets, include_control: bool, read_committed: bool,
                window: Window | None = None) -> ExportFilter:
        flt = ExportFilter(offset_spec=_spec(offsets), include_control=include_control, read_committed=read_committed)
        if window is not None:
            flt = replace(flt, from_offset=window.from_offset, to_offset=window.to_offset,
                          from_time=window.from_time, to_time=window.to_time)
        return flt.for_partition(self.log)

    def records(self, offsets: Offsets = None, *, include_control: bool = False,
                read_committed: bool = False) -> Iterator[dict[str, Any]]:
        """Every record of the range as a row (``export``'s and the Spark source's columns: ``offset``,
        ``timestamp`` (epoch ms), ``key``, ``value``, ``headers``, batch fields ...), in offset order. Control
        records (transaction markers) only with ``include_control``; ``read_committed`` reads as a consumer with
        ``isolation.level=read_committed`` (up to the last stable offset, aborted transactions left out)."""
        for head, recs in iter_partition_batches(self.path, self._filter(offsets, include_control, read_committed)):
            yield from rows_of(head, recs)

    def to_arrow(self, offsets: Offsets = None, *, include_control: bool = False, read_committed: bool = False,
                 batch_rows: int = DEFAULT_ARROW_ROWS) -> pyarrow.RecordBatchReader:
        """The records of the range as a ``pyarrow.RecordBatchReader`` (see :meth:`LogDirs.to_arrow`)."""
        return _reader([self], offsets, include_control, read_committed, batch_rows)

    def describe(self, *, scan: bool = True) -> dict[str, Any]:
        """What ``kafkalog describe`` prints for this partition (a JSON-ready dict)."""
        return describe_partition(self.log, scan=scan)



@dataclass
class Piece:
    """What one reader thread decodes at a time: a span of a partition's read (:data:`~kafkalog.storage.engine.
    export.Span`: whole segments, or the batches between two of a segment's batch boundaries) of the partition
    ``read`` opened once for all its pieces (:func:`_pieces`). A piece starting inside a segment takes over where
    the piece before it ended (``after``; it ends where the piece after it starts, ``before``): it decodes from its
    own start at once, and starts again from where that one actually ended should it differ (an offset index
    entry that is no batch's start, the log ended before: the pieces give what the whole read gives)."""

    read: PartitionRead
    span: Span | None  # (None: the whole partition)
    bases: tuple[int, ...] = ()  # the base offsets of its segments
    after: _Handoff | None = None
    before: _Handoff | None = None


class _Handoff:
    """Where the piece before a cut inside a segment ended: the byte its last batch ended at, or None (the
    segment ended there, or it failed)."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._position: int | None = None

    def set(self, position: int | None) -> None:
        if not self._done.is_set():
            self._position = position
            self._done.set()

    def wait(self) -> int | None:
        self._done.wait()
        return self._position


PIECE_BYTES = 64 << 20
"""The most ``.log`` bytes a piece of a partition's read holds (:func:`_pieces`)."""

MIN_PIECE_BYTES = 1 << 20
"""The fewest ``.log`` bytes a piece of a partition's read holds, but the last of a partition (:func:`_pieces`)."""


def _piece_bytes(part: Partition, batch_rows: int) -> int:
    """The ``.log`` bytes of about one Arrow batch of ``batch_rows`` rows of ``part`` (its bytes per offset), within
    :data:`MIN_PIECE_BYTES` and :data:`PIECE_BYTES`."""
    segs = part.segments
    try:
        offsets = part.log_end_offset - segs[0].base_offset if segs else 0
    except KafkaLogError:  # (a damaged log: its read says what is wrong, where the whole read would)
        offsets = 0
    per = part.size / offsets if offsets > 0 else PIECE_BYTES
    return int(max(MIN_PIECE_BYTES, min(PIECE_BYTES, batch_rows * per)))


def _pieces(part: Partition, flt: ExportFilter, batch_rows: int = DEFAULT_ARROW_ROWS) -> list[Piece]:
    """``part``'s read as the :class:`Piece` s it is cut into, in offset order, each of about one Arrow batch
    (:func:`_piece_bytes`): consecutive small segments together, a big one cut at its batch boundaries
    (:meth:`~kafkalog.storage.files.segment.Segment.cut_positions`, the offset index's searched in place: each
    piece checks its start, :class:`Piece`; under a URL the index's entries the segment can hold, read through the
    filesystem seam; without an index, the segment is one piece). They depend on the segments alone, never on the
    threads: the batches are the same with any number of threads."""
    read = PartitionRead(part.path, flt)
    segs = part.segments
    target = _piece_bytes(part, batch_rows)
    lo, hi = flt.from_offset, flt.to_offset
    spans: list[tuple[Span, list[int]]] = []
    first: tuple[int, int | None] | None = None  # (segment, byte) where the piece being planned starts
    bases: list[int] = []
    held = 0
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
        if (lo is not None and nxt is not None and nxt <= lo) or (hi is not None and seg.base_offset >= hi):
            continue
        start, size = segment_start(seg, lo), seg.size
        if first is not None and held + size - start > target:
            spans.append(((first[0], first[1], bases[-1], None), bases))
            first, bases, held = None, [], 0
        if first is None:
            first = (seg.base_offset, None)
        bases.append(seg.base_offset)
        cuts = seg.cut_positions(start, size, target, in_place=True) if size - start > target else []
        for cut in cuts:
            spans.append(((first[0], first[1], seg.base_offset, cut), bases))
            first, bases = (seg.base_offset, cut), [seg.base_offset]
        held += size - (cuts[-1] if cuts else start)
    if first is not None:
        spans.append(((first[0], first[1], bases[-1], None), bases))
    if len(spans) <= 1:
        read.hold(())
        return [Piece(read, None)]
    pieces = []
    for span, held_bases in spans:
        read.hold(held_bases)
        pieces.append(Piece(read, span, tuple(held_bases)))
    for a, b in zip(pieces, pieces[1:], strict=False):
        if b.span is not None and b.span[1] is not None:  # (a cut inside a segment)
            a.before = b.after = _Handoff()
    return pieces


def _arrow_batches(selected: list[Piece], batch_rows: int, columns: list[str] | None = None,
                   threads: int = 1, views: bool = False, ordered: bool = True) -> Iterator[Any]:
    """The Arrow batches of the pieces ``selected`` (:func:`_pieces`), piece after piece in order: each decoded by
    :func:`_partition_batches` on one of ``threads`` threads (the compiled core decodes without the GIL), each
    thread at most one batch ahead of the reader (:func:`~kafkalog.storage.parallel.iter_thread_streams`): the
    pieces are about one batch each, so every thread keeps decoding. ``ordered=False``: each batch as soon as it
    is made (each piece's batches in offset order, the pieces' interleaved)."""
    return iter_thread_streams(lambda task: _partition_batches(task, batch_rows, columns, views), selected,
                               threads=threads, ordered=ordered, drop=_dropped)


def _dropped(task: Piece) -> None:
    """A piece no thread started, the reader stopped before it (closed, failed, dropped): its segments and its
    partition are let go of as when it is read (:meth:`PartitionRead.done`), and the piece after it waits for
    nothing."""
    if task.before is not None:
        task.before.set(None)
    task.read.done(task.bases)


_NOTHING = object()


class _PieceEnd(SpanEnd):
    """Where a piece's span ended, handed to the piece after it (``before``) as soon as the scan has ended and the
    piece's own start is known to be right (its last batch need not be taken yet)."""

    def __init__(self, task: Piece, verified: bool) -> None:
        self._task, self.verified, self.final = task, verified, False

    def ended(self) -> None:
        """The scan of the span has ended (``position`` is final)."""
        self.final = True
        self.publish()

    def publish(self) -> None:
        if self.final and self.verified and self._task.before is not None:
            self._task.before.set(self.position)


def _partition_batches(task: Piece, batch_rows: int, columns: list[str] | None,
                       views: bool = False) -> Iterator[Any]:
    """The Arrow batches of one piece (:func:`_piece_batches`); a piece starting inside a segment holds its first
    batch until the piece before has ended, and reads again from where that one ended should it not be its
    start (:class:`Piece`)."""
    ended = _PieceEnd(task, task.after is None)
    finished = False
    try:
        if task.after is None:
            yield from _piece_batches(task, task.span, ended, batch_rows, columns, views)
        else:
            batches = _piece_batches(task, task.span, ended, batch_rows, columns, views)
            failed: BaseException | None = None
            try:
                head = next(batches, _NOTHING)
            except Exception as e:  # (raised only if this piece does start there: not past an index that lies)
                failed = e
            start = task.after.wait()
            assert task.span is not None
            if start != task.span[1]:  # (None: the segment ended before this piece)
                batches.close()
                ended, failed = _PieceEnd(task, True), None
                first, _, last, stop = task.span
                batches = _piece_batches(task, (first, -1 if start is None else start, last, stop), ended,
                                         batch_rows, columns, views)
                head = next(batches, _NOTHING)
            else:
                ended.verified = True
                ended.publish()  # (when its scan has ended already)
            if failed is not None:
                raise failed
            if head is not _NOTHING:
                yield head
                yield from batches
        finished = True
    except BaseException as e:
        # (the frames it comes through, done, hold views of the segments in their locals: a segment with views
        # stays mapped, and the read's segments close next, kept or not by whoever takes the error)
        traceback.clear_frames(e.__traceback__)
        raise
    finally:
        if task.before is not None:  # (unless told already)
            task.before.set(ended.position if finished else None)
        task.read.done(task.bases)


def _piece_batches(task: Piece, span: Span | None, ended: _PieceEnd, batch_rows: int, columns: list[str] | None,
                   views: bool) -> Generator[Any, None, None]:
    """``export --format parquet``'s loop over one partition, or one span of it (records straight into Arrow
    columns, the records layer for wrappers and batches past a chunk), yielding the row groups instead of writing
    them, with only ``columns`` built (key and value as views with ``views``: :class:`RecordColumns`). The
    partition is opened by the first piece read, once for all (the reader outlives the :class:`LogDirs` it came
    from)."""
    read = task.read
    flt = read.flt
    window = _record_window(flt)
    # (buffers sized once per batch: growing them from nothing reallocates and copies, and faults pages in)
    cols = RecordColumns(columns=columns, capacity=min(BYTES_PER_CHUNK, batch_rows * 128), views=views)
    full = _Batches()
    run = None
    # runs of batches (plain, and compressed when the core decompresses) go into the core in one call each, over
    # a local segment's mmap, without the GIL (a segment under a URL is read batch by batch, in bounded windows,
    # never whole); a run stops at each full batch, so that one batch at a time is held
    if cols._core is not None and window is None and not is_url(read.path):
        limit = DEFAULT_DECOMPRESS_LIMIT if native_codec() is not None else 0
        run = _native_runs(cols, full, ExportStats(), flt.include_control, batch_rows, DEFAULT_ROW_GROUP_BYTES,
                           decompress_limit=limit, one_group=True)
    for topic, partition, name, b in read.batches(None, run, span, ended):
        yield from full.take()
        whole = b.records_count <= RECORD_CHUNK if b.records_count is not None else not b.is_compressed
        if whole:
            cols.add_batch(b, topic, partition, name, window)
        else:
            for recs in _record_chunks(b, window, flt):
                cols.add_records(b, recs, topic, partition, name)
        if len(cols) >= batch_rows:
            yield cols.to_arrow()
    ended.ended()
    yield from full.take()
    if len(cols):
        yield cols.to_arrow()


class _Batches:
    """Where :func:`~kafkalog.storage.engine.export._native_runs` puts the full Arrow batches it cuts (its
    ``write_batch``), for the reader to yield."""

    def __init__(self) -> None:
        self._out: list[Any] = []

    def write_batch(self, batch: Any, **_: Any) -> None:
        self._out.append(batch)

    def take(self) -> list[Any]:
        out, self._out = self._out, []
        return out


BYTES_PER_THREAD = 16 << 20
"""The reader's default threads: one per this many bytes of ``.log`` files read (a thread costs about what decoding
a few MB does: a small read stays on the caller's thread), at most one per CPU."""


def default_threads(log_bytes: int) -> int:
    """The reader's threads when none are asked for, for ``log_bytes`` of segments: one per
    :data:`BYTES_PER_THREAD`, at least one, at most the CPUs this process may run on."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # (not on every platform)
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, log_bytes // BYTES_PER_THREAD))


def _reader(parts: list[Partition], offsets: Offsets, include_control: bool, read_committed: bool,
            batch_rows: int, *, window: Window | None = None, columns: Sequence[str] | None = None,
            threads: int | None = None, views: bool = False, ordered: bool = True) -> pyarrow.RecordBatchReader:
    pa = require("pyarrow", feature="Arrow output")  # optional dependency: only Arrow output needs it

    # the ranges are resolved now, against the partitions as opened (a bad offset spec fails here, not mid-read)
    # (and each partition cut into the pieces its segments make: the threads decode the pieces of one at once)
    selected = [piece for p in parts for piece in _pieces(p, p._filter(offsets, include_control, read_committed,
                                                                      window), batch_rows)]
    schema = arrow_schema(RECORD_COLUMNS, views=views)
    names = None if columns is None else list(columns)
    unknown = [c for c in names or () if c not in schema.names]
    if unknown:
        raise KafkaLogError(f"no column {', '.join(map(repr, unknown))} in the records (columns: "
                            f"{', '.join(schema.names)})")
    if threads is not None and threads < 1:
        raise KafkaLogError(f"threads must be at least 1 (got {threads})")
    if names is not None:
        schema = pa.schema([schema.field(c) for c in names])
    if threads is None:
        threads = default_threads(sum(p.size for p in parts)) if len(selected) > 1 else 1
    batches = _arrow_batches(selected, batch_rows, names, threads, views, ordered)
    return pa.RecordBatchReader.from_batches(schema, batches)


__all__ = ["DEFAULT_ARROW_ROWS", "Offsets", "Partition", "PathLike", "Window"]
