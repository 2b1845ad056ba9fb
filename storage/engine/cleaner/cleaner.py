"""Offline log compaction with the broker's exact semantics (docs/semantics.md#log-cleaner; ``LogCleaner``,
``LogCleanerManager``).

Library API (the ``kafkalog compact`` command is a thin shell over it):

* :func:`cleanable_offsets`, :func:`log_to_clean` — the cleanable range, dirty ratio and eligibility;
* :func:`build_offset_map` — the key map over the dirty section, stopping where one broker pass stops;
* :func:`group_segments_by_size` — the groups that become one new segment each;
* :func:`clean_log` — one cleaning round: filters every group into ``.cleaned`` files (or only counts, for a
  dry run), swaps them in with Kafka's protocol and returns the new clean point;
* :func:`compact_partition` — one round on a partition dir (or a dry run), with the
  ``cleaner-offset-checkpoint`` update.

Speed (the results never depend on it; ``tests/storage/test_cleaner_fast.py`` checks byte equality with the
careful per-record path): the map pass reads keys as raw byte spans (:mod:`.cleaner_records`) and hashes each
distinct key once (:mod:`.cleaner_map`), optionally over several segments at once (:mod:`.cleaner_parallel`); the
filter pass skips the records of batches none of whose offsets is in the map (all superseded), copies unchanged
batches verbatim and rebuilds changed uncompressed ones by splicing the kept records' bytes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from kafkalog.storage.config.log_config import CleanerConfig, LogConfig
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.cleaner.offset_map import OffsetMap
from kafkalog.storage.engine.cleaner.parallel import (
    PARALLEL_MIN_BYTES,
    build_offset_map_parallel,
    default_workers,
    dirty_segment_files,
)
from kafkalog.storage.engine.cleaner.record_filter import (
    CleanerFilter,
    FilterStats,
    LastRecord,
    UncleanableError,
)
from kafkalog.storage.engine.cleaner.records import Slow, map_records
from kafkalog.storage.engine.cleaner.txn import CleanedTransactionMetadata
from kafkalog.storage.engine.plan import Loss, PartitionPlan, Plan, PlanError, Runner, default_runner
from kafkalog.storage.engine.swap import replace_segments, replacement_effect
from kafkalog.storage.engine.targets import Target, checkpoint_bytes, group_partitions, plan_partitions
from kafkalog.storage.errors import CorruptRecordError, KafkaLogError
from kafkalog.storage.files.checkpoints import CLEANER_OFFSET_CHECKPOINT
from kafkalog.storage.files.names import offset_file_name
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io import fileops
from kafkalog.storage.io.dirview import DirView, Op
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.segment import SEGMENT_SUFFIXES, SegmentWriter
from kafkalog.storage.records.batch import RecordBatch
from kafkalog.storage.records.reader import iter_batches

INT32_MAX = 2147483647
LONG_MAX = 9223372036854775807


# ------------------------------------------------------------------------------ choosing what to clean
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


def cleanable_offsets(log: PartitionLog, checkpoint: int | None, now: int, cfg: LogConfig,
                      expiration_ms: int) -> tuple[int, int, bool]:
    """``(firstDirtyOffset, firstUncleanableDirtyOffset, forceUpdateCheckpoint)``."""
    start = log.log_start_offset
    dirty = start if checkpoint is None else checkpoint
    force = False
    if dirty < start or dirty > log.log_end_offset:
        dirty, force = start, True
    active = log.active_segment
    assert active is not None
    candidates = [log.last_stable_offset(now, expiration_ms), active.base_offset]
    lag = max(cfg.min_compaction_lag_ms, 0)
    if lag > 0:
        for s in log.non_active_segments_from(dirty):
            if s.largest_timestamp() > now - lag:
                candidates.append(s.base_offset)
                break
    return dirty, max(dirty, min(candidates)), force


def max_compaction_delay(log: PartitionLog, first_dirty: int, now: int, cfg: LogConfig) -> int:
    ts = [s.first_batch_timestamp() for s in log.non_active_segments_from(first_dirty)]
    ts = [t for t in ts if t > 0]
    earliest = min(ts) if ts else LONG_MAX
    clean_until = now - max(cfg.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


def log_to_clean(log: PartitionLog, checkpoint: int | None, now: int, cfg: LogConfig,
                 expiration_ms: int) -> LogToClean:
    dirty, uncleanable, force = cleanable_offsets(log, checkpoint, now, cfg, expiration_ms)
    nas = log.non_active_segments_from(uncleanable)
    first_unc = nas[0].base_offset if nas else log.active_segment.base_offset  # type: ignore[union-attr]
    clean_bytes = sum(s.size for s in log.segments if s.base_offset < dirty)
    cleanable = sum(s.size for s in log.log_segments(min(dirty, first_unc), first_unc))
    delay = max_compaction_delay(log, dirty, now, cfg)
    return LogToClean(dirty, uncleanable, first_unc, clean_bytes, cleanable, delay > 0, force)


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
    protocol; otherwise only measured. ``expect``: the plan's groups (:class:`PlannedGroup`); a group that comes
    out different raises :class:`PlanError` before it is swapped in."""

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


# ------------------------------------------------------------------------------------------- the plan
@dataclass
class PlannedGroup:
    """A group of segments a round replaces by one cleaned segment. ``size``/``txn`` are known when the plan was
    made with a measuring pass (``exact``), else at apply."""

    base_offset: int
    sources: list[int]
    source_files: list[str]
    source_bytes: int
    size: int | None = None
    txn: bool | None = None

    @property
    def suffixes(self) -> tuple[str, ...] | None:
        if self.txn is None:
            return None
        return (".log", ".index", ".timeindex") + ((".txnindex",) if self.txn else ())


@dataclass
class CompactRound(Op):
    """One cleaning round on one partition: rebuild the key map, filter each group into a new segment, swap it in
    (Kafka's ``.cleaned``/``.swap``/``.deleted`` protocol), group by group as the broker does."""

    kind: ClassVar[str] = "compact"
    config: LogConfig = field(default=None, repr=False)  # type: ignore[assignment]
    cleaner: CleanerConfig = field(default=None, repr=False)  # type: ignore[assignment]
    now: int = 0
    log_start_offset: int | None = None
    high_watermark: int | None = None
    expiration_ms: int = 86400000
    legacy_to_v2: bool = True
    per_batch_index: bool = True
    map_workers: int = 1
    keep_deleted: bool = False
    to_clean: LogToClean | None = field(default=None, repr=False)
    end_offset: int = 0
    groups: list[PlannedGroup] = field(default_factory=list)
    snapshots: list[str] = field(default_factory=list)  # producer snapshots of bases that disappear

    def originals(self) -> list[tuple[str, bool]]:
        d = Path(self.path)
        return [(str(d / n), False) for g in self.groups for n in g.source_files] + \
            [(str(d / n), False) for n in self.snapshots]

    def run(self) -> CleanResult:

        assert self.to_clean is not None
        with PartitionLog(self.path, log_start_offset_checkpoint=self.log_start_offset,
                          high_watermark=self.high_watermark) as log:
            offset_map, end, full = map_round(log, self.to_clean, self.cleaner, workers=self.map_workers)
            if end != self.end_offset:
                raise PlanError(f"the key map ends the round at offset {end}, the plan at {self.end_offset}: the "
                                "partition changed since planning; nothing of it was changed", self.path)
            try:
                return filter_round(log, self.to_clean, offset_map, end, self.config, self.cleaner, self.now,
                                    write=True, map_full=full, legacy_to_v2=self.legacy_to_v2,
                                    expiration_ms=self.expiration_ms, keep_deleted=self.keep_deleted,
                                    per_batch_index=self.per_batch_index, expect=self.groups)
            except UncleanableError as e:
                raise KafkaLogError(f"the broker would mark this partition uncleanable: {e.reason}", e.path,
                                    e.position) from None

    def trace(self) -> tuple:
        return (self.kind, self.path, self.end_offset,
                tuple((g.base_offset, tuple(g.sources), g.suffixes) for g in self.groups))

    def done_trace(self, result: CleanResult) -> tuple:
        return (self.kind, self.path, result.end_offset,
                tuple((g.base_offset, tuple(g.sources), g.suffixes) for g in result.groups))

    @property
    def bytes(self) -> int:
        if any(g.size is None for g in self.groups):
            return 0
        return sum(g.source_bytes - (g.size or 0) for g in self.groups)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "endOffset": self.end_offset,
                "groups": [{"baseOffset": g.base_offset, "sources": g.sources, "bytesBefore": g.source_bytes,
                            "bytesAfter": g.size} for g in self.groups]}

    def describe(self) -> str:
        before = sum(g.source_bytes for g in self.groups)
        after = "" if any(g.size is None for g in self.groups) else \
            f" -> {sum(g.size or 0 for g in self.groups):,d} bytes"
        segs = sum(len(g.sources) for g in self.groups)
        return (f"compact {segs} segment(s) ({before:,d} bytes{after}) into {len(self.groups)} new segment(s), "
                f"offsets up to {self.end_offset - 1}: {self.why}")


def _plan_partition(task: tuple) -> PartitionPlan:
    (data_dir, pdir, topic, part, cfg, cleaner, checkpoint, lso, hw, now, force, version, exact, keep_deleted,
     map_workers, expiration, settings) = task
    pp = PartitionPlan(data_dir, pdir, topic, part, settings=settings)
    if not cfg.compact:
        pp.notes.append(f"not compacted: cleanup.policy={','.join(cfg.cleanup_policy)} "
                        f"({cfg.source('cleanup.policy')})")
        return pp
    if not cleaner.enable_cleaner:
        pp.notes.append("not compacted: log.cleaner.enable=false")
        return pp
    with pp.planning(), DirView(pdir) as view:
        log = PartitionLog(view, log_start_offset_checkpoint=lso, high_watermark=hw)
        if not log.segments:
            pp.notes.append("no segments (run repair): nothing to compact")
            return pp
        ltc = log_to_clean(log, checkpoint, now, cfg, expiration)
        pp.facts = {"firstDirtyOffset": ltc.first_dirty_offset,
                    "firstUncleanableOffset": ltc.first_uncleanable_offset,
                    "cleanableRatio": round(ltc.cleanable_ratio, 6), "cleanableBytes": ltc.cleanable_bytes,
                    "cleanBytes": ltc.clean_bytes}
        if ltc.force_update_checkpoint:
            pp.facts["cleanPoint"] = ltc.first_dirty_offset
            pp.notes.append(f"the clean point {checkpoint} is outside the log: reset to {ltc.first_dirty_offset}, "
                            "as the broker does")
        if ltc.total_bytes == 0:
            active = log.active_segment
            assert active is not None
            leo = log.log_end_offset
            if active.size == 0 or leo <= active.base_offset:
                pp.notes.append("empty log: nothing to compact")
                return pp
            pp.facts["activeSegmentBytes"] = active.size
            pp.facts["activeSegmentOffsets"] = [active.base_offset, leo - 1]
            pp.notes.append(f"only the active segment holds data ({active.size} bytes, offsets "
                            f"{active.base_offset}..{leo - 1}), and the cleaner never cleans the active segment: "
                            "nothing to compact until the broker rolls it (segment.bytes, segment.ms)")
            return pp
        if not force and not ltc.eligible(cfg.min_cleanable_dirty_ratio):
            pp.notes.append(f"not eligible: dirty ratio {ltc.cleanable_ratio:.3f} <= min.cleanable.dirty.ratio "
                            f"{cfg.min_cleanable_dirty_ratio} ({cfg.source('min.cleanable.dirty.ratio')}) and no "
                            "segment past max.compaction.lag.ms (--all cleans anyway)")
            return pp
        if ltc.first_uncleanable_offset <= ltc.first_dirty_offset and not ltc.cleanable_bytes:
            pp.notes.append("nothing cleanable")
            return pp
        legacy_to_v2, per_batch = version >= (4, 0), version >= (3, 9)
        result: CleanResult | None = None
        try:
            if exact:
                offset_map, end, full = map_round(log, ltc, cleaner, workers=map_workers)
                result = filter_round(log, ltc, offset_map, end, cfg, cleaner, now, write=False, map_full=full,
                                      legacy_to_v2=legacy_to_v2, expiration_ms=expiration,
                                      per_batch_index=per_batch)
                del offset_map
            elif map_cannot_fill(log, ltc, cleaner):
                dirty = log.log_segments(ltc.first_dirty_offset, ltc.first_uncleanable_offset)
                end = ltc.first_uncleanable_offset if dirty else 0
            else:
                _, end, _ = map_round(log, ltc, cleaner, workers=map_workers)
        except UncleanableError as e:
            pp.error = f"the broker would mark this partition uncleanable: {e}"
            return pp
        groups = group_segments_by_size(log.log_segments(0, end), cfg.segment_size, cfg.segment_index_bytes,
                                        ltc.first_uncleanable_offset)
        planned = []
        for i, g in enumerate(groups):
            files = [n for s in g for n in (offset_file_name(s.base_offset, x) for x in SEGMENT_SUFFIXES)
                     if view.exists(n)]
            pg = PlannedGroup(g[0].base_offset, [s.base_offset for s in g], files, sum(s.size for s in g))
            if result is not None:
                pg.size, pg.txn = result.groups[i].size, bool(result.groups[i].txn_entries)
            planned.append(pg)
        op = CompactRound(pdir, f"one cleaning round from the clean point {ltc.first_dirty_offset}, as the "
                          "broker's log cleaner runs it", config=cfg, cleaner=cleaner, now=now,
                          log_start_offset=lso, high_watermark=hw, expiration_ms=expiration,
                          legacy_to_v2=legacy_to_v2, per_batch_index=per_batch, map_workers=map_workers,
                          keep_deleted=keep_deleted, to_clean=ltc, end_offset=end, groups=planned)
        _record_round(view, op)
        pp.facts["cleanPoint"] = end
        pp.facts["endOffset"] = end
        if result is not None:
            st = result.stats
            pp.facts.update(bytesBefore=result.bytes_before, bytesAfter=result.bytes_after,
                            bytesReclaimed=result.bytes_reclaimed, recordsRead=st.messages_read,
                            recordsRetained=st.messages_retained, mapFull=result.map_full)
        dropped = None if result is None else result.stats.messages_read - result.stats.messages_retained
        pp.losses.append(Loss(
            f"compaction: records superseded by a later record with the same key, tombstones and transaction "
            f"markers older than delete.retention.ms={cfg.delete_retention_ms} "
            f"({cfg.source('delete.retention.ms')}), and records of aborted transactions",
            log.log_start_offset, end - 1, dropped, 0 if result is None else result.bytes_reclaimed))
        pp.seal(view)
        log.close()
    return pp


def _record_round(view: DirView, op: CompactRound) -> None:
    """The round's effect on the listing: each group's source files go, the new segments' files appear, and the
    producer snapshots of base offsets that no longer start a segment go (``replace_segments`` step 4)."""
    removes = [n for g in op.groups for n in g.source_files]
    new_bases = {g.base_offset for g in op.groups}
    for g in op.groups:
        for b in g.sources:
            snap = offset_file_name(b, ".snapshot")
            if b not in new_bases and view.exists(snap):
                op.snapshots.append(snap)
    removes, deleted = replacement_effect(view, removes + op.snapshots, op.keep_deleted)
    creates: list[tuple[str, int | None]] = list(deleted)
    for g in op.groups:
        for suffix in g.suffixes or (".log", ".index", ".timeindex"):
            creates.append((offset_file_name(g.base_offset, suffix), g.size if suffix == ".log" else None))
    view.add(op, removes=removes, creates=creates)


def plan_compact(paths: Iterable[str | os.PathLike], *, now_ms: int, resolver: ConfigResolver | None = None,
                 topics: set[str] | None = None, force: bool = False, kafka_version: tuple[int, int] = (4, 0),
                 exact: bool = False, keep_deleted: bool = False, map_workers: int | None = None,
                 runner: Runner | None = None, workers: int = 1, progress=None) -> Plan:
    """The plan of ``kafkalog compact``: one broker cleaning round per compacted partition under ``paths``, then
    ``cleaner-offset-checkpoint`` with the new clean points. ``exact`` measures each round while planning (new
    segment sizes, records dropped: what ``--dry-run`` shows); otherwise they are known once applied."""
    groups = group_partitions(paths, topics=topics)
    resolver = resolver or ConfigResolver(data_dirs=list(groups))
    mw = default_workers() if map_workers is None else map_workers

    def task(t: Target) -> tuple:
        st = t.state
        return (str(t.data_dir), str(t.path), t.topic, t.partition, t.config, t.broker.cleaner,
                st.clean_points.get(t.key), st.log_start_offsets.get(t.key), st.high_watermarks.get(t.key), now_ms,
                force, kafka_version, exact, keep_deleted, mw, t.broker.producer_id_expiration_ms,
                t.config.describe(["cleanup.policy", "min.cleanable.dirty.ratio", "delete.retention.ms",
                                   "min.compaction.lag.ms", "segment.bytes", "internal.segment.bytes"]))

    plan = Plan("compact", now=now_ms, options={"kafkaVersion": ".".join(map(str, kafka_version))})
    return plan_partitions(plan, groups, resolver, runner or default_runner(workers, progress), _plan_partition, task,
                           finish=_dir_ops)


def _dir_ops(dp, st) -> None:
    """``cleaner-offset-checkpoint`` with every partition's new clean point, written once per data dir (the
    broker serialises it under its cleaner lock); entries of partitions no longer in the dir are dropped."""
    updates = {(p.topic, p.partition): p.facts["cleanPoint"] for p in dp.partitions if "cleanPoint" in p.facts}
    if not updates:
        return
    offsets = dict(st.clean_points)
    offsets.update(updates)
    live = {k: v for k, v in offsets.items() if (Path(st.path) / f"{k[0]}-{k[1]}").is_dir()}
    if live != st.clean_points or CLEANER_OFFSET_CHECKPOINT in st.unreadable:
        view = DirView(st.path)
        view.write(CLEANER_OFFSET_CHECKPOINT, checkpoint_bytes(live), "the new clean points (the first dirty "
                   "offset of each compacted partition)")
        dp.ops = list(view.ops)


__all__ = ["CleanResult", "CompactRound", "LogToClean", "build_offset_map", "cleanable_offsets", "filter_round",
           "group_segments_by_size", "log_to_clean", "map_round", "plan_compact"]
