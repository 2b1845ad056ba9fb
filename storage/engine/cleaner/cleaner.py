"""Kafka's ``Cleaner``: offline log compaction with the broker's exact semantics (docs/semantics.md#log-cleaner).

Library API (choosing what to clean and the ``kafkalog compact`` plan are :mod:`.manager`'s, Kafka's
``LogCleanerManager``):

* :class:`LogToClean` — the offsets and sizes one round works with;
* :func:`build_offset_map` — the key map over the dirty section, stopping where one broker pass stops;
* :func:`group_segments_by_size` — the groups that become one new segment each;
* :func:`map_round`, :func:`filter_round` — one cleaning round: the map, then every group filtered into
  ``.cleaned`` files (or only measured, for a dry run) swapped in with Kafka's protocol.

Speed (the results never depend on it; ``tests/storage/test_cleaner_fast.py`` checks byte equality with the
careful per-record path): the map pass reads keys as raw byte spans (:mod:`.records`) and hashes each
distinct key once (:mod:`.offset_map`), optionally over several segments at once (:mod:`.parallel`); the
filter pass skips the records of batches none of whose offsets is in the map (all superseded), copies unchanged
batches verbatim and rebuilds changed uncompressed ones by splicing the kept records' bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkalog.storage.config.log_config import CleanerConfig, LogConfig
from kafkalog.storage.engine.cleaner.offset_map import OffsetMap
from kafkalog.storage.engine.cleaner.parallel import (
    PARALLEL_MIN_BYTES,
    build_offset_map_parallel,
    dirty_segment_files,
)
from kafkalog.storage.engine.cleaner.record_filter import (
    CleanerFilter,
    FilterStats,
    LastRecord,
    UncleanableError,
)
from kafkalog.storage.engine.cleaner.records import map_records
from kafkalog.storage.engine.cleaner.txn import CleanedTransactionMetadata
from kafkalog.storage.engine.plan import PlanError
from kafkalog.storage.engine.swap import replace_segments
from kafkalog.storage.errors import CorruptRecordError
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io import fileops
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.segment import SegmentWriter
from kafkalog.storage.records.batch import RecordBatch
from kafkalog.storage.records.reader import iter_batches
from kafkalog.storage.records.record_grammar import Slow

INT32_MAX = 2147483647


# ----------------------------------------------------------------------------------- one round's range
@dataclass
class LogToClean:
    """``LogToClean`` + ``cleanableOffsets``: the offsets and sizes one round works with."""

    first_dirty_offset: int
    uncleanable_offset: int  # firstUncleanableDirtyOffset (not rounded)
    first_uncleanable_offset: int  # rounded down to a segment base offset
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool
    force_update_checkpoint: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    def eligible(self, min_cleanable_ratio: float) -> bool:
        """``grabFilthiestCompactedLog``'s filter."""
        if self.total_bytes == 0:
            return False
        return (self.need_compaction_now and self.cleanable_bytes > 0) or self.cleanable_ratio > min_cleanable_ratio


# ------------------------------------------------------------------------------------ grouping
def group_segments_by_size(segments: list[Segment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[Segment]]:
    """``Cleaner.groupSegmentsBySize``."""
    groups: list[list[Segment]] = []
    segs = list(segments)
    i = 0
    while i < len(segs):
        head = segs[i]
        group = [head]
        log_size, idx, tidx = head.size, head.file_size(".index"), head.file_size(".timeindex")
        i += 1
        while i < len(segs):
            s = segs[i]
            last_est = segs[i + 1].base_offset - 1 if i + 1 < len(segs) else first_uncleanable_offset - 1
            if not (log_size + s.size <= max_size
                    and idx + s.file_size(".index") <= max_index_size
                    and tidx + s.file_size(".timeindex") <= max_index_size
                    and (s.size == 0 or last_est - group[-1].base_offset <= INT32_MAX)):
                break
            group.append(s)
            log_size += s.size
            idx += s.file_size(".index")
            tidx += s.file_size(".timeindex")
            i += 1
        groups.append(group)
    return groups


# ---------------------------------------------------------------------------------- offset map
def build_offset_map(log: PartitionLog, start: int, end: int, offset_map: OffsetMap, *, workers: int = 1,
                     parallel_min_bytes: int = PARALLEL_MIN_BYTES) -> bool:
    """``Cleaner.buildOffsetMap``; returns True when the map filled up (``endOffset`` then falls inside the
    dirty section). ``offset_map.latest_offset + 1`` is the round's end offset.

    With ``workers > 1``, the dict map (no compiled core) and at least ``parallel_min_bytes`` of dirty segments,
    segments are mapped in worker processes (:mod:`.cleaner_parallel`); the result is the same, and when the map would fill up the sequential
    pass below runs instead (it stops exactly where the broker stops)."""
    offset_map.clear()
    offset_map.start = start
    dirty = log.log_segments(start, end)
    aborted = log.collect_aborted_transactions(start, end)
    # worker processes pay off only for the dict map: the native map's pass is faster than their key exchange
    if workers > 1 and offset_map.native is None and len(dirty) > 1 and sum(s.size for s in dirty) >= parallel_min_bytes:
        if build_offset_map_parallel(dirty_segment_files(dirty), start, end, aborted, offset_map, workers):
            return False
        offset_map.clear()
        offset_map.start = start
    txn = CleanedTransactionMetadata()
    txn.add_aborted_transactions(aborted)
    capacity = offset_map.capacity
    put = offset_map.put
    for i, seg in enumerate(dirty):
        next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
        if seg.size:
            for b in _dirty_batches(seg, start, capacity, txn, offset_map):
                last = b.last_offset
                if last < start:
                    continue  # before the index lookup position in the broker: no effect on the map
                if b.is_control:
                    txn.on_control_batch_read(b)
                elif not txn.on_batch_read(b):
                    if not _map_fast(b, start, offset_map):
                        for t in b.iter_record_tuples():
                            if t[2] is not None and t[0] >= start:
                                if offset_map.size < capacity:
                                    put(t[2], t[0])
                                else:
                                    return True
                offset_map.latest_offset = last
        offset_map.latest_offset = next_start - 1
    return False


def _dirty_batches(seg, start: int, capacity: int, txn: CleanedTransactionMetadata, offset_map: OffsetMap):
    """The batches of a dirty segment for the map pass's per-batch path. With the native map, runs of plain
    batches (uncompressed, not transactional or control, CRC intact, at or above ``start``, not filling the map)
    are mapped natively in between (``OffsetMapCore.map_batches``: the same records put in the same order), and
    only the entries it stops at are yielded."""
    buf, path = seg.buf, str(seg.path)
    native = offset_map.native
    if native is None:
        yield from iter_batches(buf, path=path)
        return
    pos = 0
    while True:
        pos, last = native.map_batches(buf, pos, start, capacity)
        if last is not None:
            txn.consume_up_to(last)  # what on_batch_read did for each of those batches
            offset_map.latest_offset = last
        b = next(iter_batches(buf, pos, path=path), None)
        if b is None:
            return
        pos = b.position + b.size
        yield b
        del b


def _map_fast(b, start: int, offset_map: OffsetMap) -> bool:
    """Map a v2 batch with :func:`map_records` when its CRC is intact and the map cannot fill up inside it;
    False: use the careful per-record path (legacy batch, map nearly full, first batch straddling the map's
    start, CRC mismatch, unusual encoding or corruption)."""
    if b.magic < 2:
        return False
    count = b.records_count
    base = b.base_offset
    if count < 0 or base < start or offset_map.size + count >= offset_map.capacity or not b.is_valid():
        return False
    try:
        data = b.decompressed_payload()
        map_records(data if isinstance(data, bytes) else bytes(data), count, base, offset_map)
    except (Slow, IndexError):
        return False
    return True


# ---------------------------------------------------------------------------------- cleaning
@dataclass
class CleanedSegment:
    """One group of segments cleaned into one new segment."""

    base_offset: int
    sources: list[int]
    size: int = 0
    source_bytes: int = 0
    txn_entries: int = 0  # aborted transactions in the new segment's .txnindex
    last_modified_ns: int = 0

    @property
    def suffixes(self) -> tuple[str, ...]:
        return (".log", ".index", ".timeindex") + ((".txnindex",) if self.txn_entries else ())


@dataclass
class CleanResult:
    partition: str
    first_dirty_offset: int
    end_offset: int
    map_full: bool
    groups: list[CleanedSegment] = field(default_factory=list)
    stats: FilterStats = field(default_factory=FilterStats)
    map_size: int = 0

    @property
    def bytes_before(self) -> int:
        return sum(g.source_bytes for g in self.groups)

    @property
    def bytes_after(self) -> int:
        return sum(g.size for g in self.groups)

    @property
    def bytes_reclaimed(self) -> int:
        return self.bytes_before - self.bytes_after


class _CountingSink:
    """The filter's output measured, not written (a plan)."""

    def __init__(self) -> None:
        self.size = 0
        self.aborted: list = []

    def append(self, data, **_kw) -> None:
        self.size += len(data)


def clean_into(seg: Segment, sink, flt: CleanerFilter, io_buffer: int, max_message_size: int,
               max_io_buffer: int) -> None:
    """``Cleaner.cleanInto``: filter the segment chunk by chunk; one ``LogSegment.append`` per non-empty chunk."""
    buf = seg.buf
    size = seg.size
    cap = io_buffer
    pos = 0
    while pos < size:
        end = min(pos + cap, size)
        res = flt.filter_to(buf, pos, end, capacity=cap, path=str(seg.path))
        pos += res.bytes_read
        if res.output:
            sink.append(res.output, largest_offset=res.max_offset, max_timestamp=res.max_timestamp,
                        shallow_offset=res.shallow_offset_of_max_timestamp)
        if end > pos - res.bytes_read and res.bytes_read == 0:
            cap = _grow(buf, pos, size, cap, max_message_size, max_io_buffer, str(seg.path))


def _grow(buf, pos: int, size: int, cap: int, max_message_size: int, max_io_buffer: int, path: str) -> int:
    """``growBuffersOrFail``."""
    if cap >= max_message_size:
        if size - pos < 12:
            raise CorruptRecordError(f"Log segment may be corrupt, {size - pos} bytes left at the end", path, pos)
        next_size = int.from_bytes(buf[pos + 8:pos + 12], "big", signed=True) + 12
        if next_size <= cap:
            raise UncleanableError(f"Batch size {next_size} < buffer size {cap}, but not processed", path, pos)
        if next_size > size - pos:
            raise CorruptRecordError(
                f"Log segment may be corrupt, batch size {next_size} > {size - pos} bytes left in segment", path, pos)
        want = next_size
    else:
        want = max_message_size
    max_buffer = max(want, max_io_buffer)
    if cap >= max_buffer:
        raise UncleanableError(f"This log contains a message larger than maximum allowable size of {max_buffer}.",
                               path, pos)
    return min(cap * 2, max_buffer)


def map_round(log: PartitionLog, to_clean: LogToClean, cleaner: CleanerConfig, *,
              workers: int = 1) -> tuple[OffsetMap, int, bool]:
    """The key map of one round: ``(map, end offset, map filled up)``; the round cleans ``[0, end offset)``."""
    offset_map = OffsetMap(cleaner.dedupe_buffer_per_thread, cleaner.dedupe_buffer_load_factor)
    full = build_offset_map(log, to_clean.first_dirty_offset, to_clean.first_uncleanable_offset, offset_map,
                            workers=workers)
    offset_map.freeze()
    return offset_map, offset_map.latest_offset + 1, full


def map_cannot_fill(log: PartitionLog, to_clean: LogToClean, cleaner: CleanerConfig) -> bool:
    """True when the dirty section holds fewer keyed records than the map's capacity (counted from v2 batch
    headers): the round then ends at the first uncleanable offset and the map pass can wait for the apply."""
    cap = OffsetMap(cleaner.dedupe_buffer_per_thread, cleaner.dedupe_buffer_load_factor).capacity
    n = 0
    for seg in log.log_segments(to_clean.first_dirty_offset, to_clean.first_uncleanable_offset):
        for b in seg.iter_batches():
            if b.magic < 2:
                del b
                return False
            assert isinstance(b, RecordBatch)  # (magic >= 2)
            if b.last_offset >= to_clean.first_dirty_offset:
                n += max(b.records_count, 0)
            del b
            if n >= cap:
                return False
    return True


def filter_round(log: PartitionLog, to_clean: LogToClean, offset_map: OffsetMap, end_offset: int, cfg: LogConfig,
                 cleaner: CleanerConfig, now: int, *, write: bool, map_full: bool = False,
                 legacy_to_v2: bool = True, expiration_ms: int = 86400000, keep_deleted: bool = False,
                 per_batch_index: bool = True, expect: list | None = None,
                 crash_hook: Callable[[str], None] | None = None,
                 progress: Callable[[int], None] | None = None) -> CleanResult:
    """``Cleaner.doClean`` after the map: every group of segments below ``end_offset`` filtered into one new
    segment. ``write``: into ``.cleaned`` files (:class:`SegmentWriter`) swapped in group by group with Kafka's
    protocol; otherwise only measured. ``expect``: the plan's groups (:class:`.manager.PlannedGroup`); a group
    that comes out different raises :class:`PlanError` before it is swapped in."""

    clean_segs = [s for s in log.segments if s.base_offset < to_clean.first_dirty_offset]
    legacy_horizon = (clean_segs[-1].last_modified - cfg.delete_retention_ms) if clean_segs else 0
    result = CleanResult(log.name, to_clean.first_dirty_offset, end_offset, map_full, map_size=offset_map.size)
    txn = CleanedTransactionMetadata()
    io_buffer = cleaner.io_buffer_size // max(cleaner.num_threads, 1) // 2
    max_msg = cfg.max_message_bytes
    upper = to_clean.first_uncleanable_offset
    groups = group_segments_by_size(log.log_segments(0, end_offset), cfg.segment_size, cfg.segment_index_bytes,
                                    upper)
    if expect is not None and [(g[0].base_offset, [s.base_offset for s in g]) for g in groups] != \
            [(e.base_offset, e.sources) for e in expect]:
        raise PlanError("the cleaning round groups segments differently than the plan: the partition changed "
                        "since planning; nothing of it was changed", str(log.path))
    active = {pid: LastRecord(e.last_data_offset if e.last_data_offset >= 0 else None, e.producer_epoch)
              for pid, e in log.producer_state(now, expiration_ms).active_producers().items()}
    for gi, group in enumerate(groups):
        cs = CleanedSegment(group[0].base_offset, [s.base_offset for s in group])
        cs.source_bytes = sum(s.size for s in group)
        # File.setLastModified(last source's File.lastModified): millisecond precision
        cs.last_modified_ns = group[-1].last_modified * 1_000_000
        sink: Any = SegmentWriter(log.path, cs.base_offset, index_interval_bytes=cfg.index_interval_bytes,
                                  per_batch=per_batch_index) if write else _CountingSink()
        txn.cleaned_index = sink.aborted
        try:
            for i, seg in enumerate(group):
                nxt = group[i + 1].base_offset if i + 1 < len(group) else seg.read_next_offset()
                txn.add_aborted_transactions(log.collect_aborted_transactions(seg.base_offset, nxt))
                flt = CleanerFilter(offset_map, txn, now=now, delete_retention_ms=cfg.delete_retention_ms,
                                    retain_legacy_deletes=seg.last_modified > legacy_horizon,
                                    active_producers=active, upper_bound_offset=upper,
                                    legacy_to_v2=legacy_to_v2, stats=result.stats)
                clean_into(seg, sink, flt, io_buffer, max_msg, cleaner.max_message_size)
                if progress is not None:
                    progress(seg.size)
            cs.size = sink.size
            cs.txn_entries = len(sink.aborted)
            if write:
                sink.finish(cs.last_modified_ns)
                if expect is not None:
                    e = expect[gi]
                    if (e.size is not None and e.size != cs.size) or (e.txn is not None and e.txn != bool(cs.txn_entries)):
                        raise PlanError(f"cleaned segment {cs.base_offset} differs from the plan ({cs.size} bytes, "
                                        f"planned {e.size}): the partition changed since planning", str(log.path))
        except BaseException:
            if write:
                sink.abort()
            raise
        if write:

            fileops.fsync_dir(log.path)
            replace_segments(log.path, [cs.base_offset], cs.sources, keep_deleted=keep_deleted,
                             crash_hook=crash_hook)
        result.groups.append(cs)
    return result


__all__ = ["CleanResult", "CleanedSegment", "LogToClean", "build_offset_map", "clean_into", "filter_round",
           "group_segments_by_size", "map_cannot_fill", "map_round"]
