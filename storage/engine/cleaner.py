"""Offline log compaction with the broker's exact semantics (spec 50-cleaner; ``LogCleaner``,
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import fsync_dir
from ..config import CleanerConfig, LogConfig
from ..errors import CorruptRecordError, KafkaLogError
from ..files.checkpoints import CLEANER_OFFSET_CHECKPOINT, read_offset_checkpoint, write_offset_checkpoint
from ..files.offset_index import OffsetIndexBuilder
from ..files.time_index import TimeIndexBuilder
from ..files.txn_index import AbortedTxn as TxnIndexEntry
from ..files.txn_index import TransactionIndex
from ..records.batch import NO_TIMESTAMP
from ..records.reader import iter_batches
from .cleaner_filter import CleanerFilter, FilterStats, UncleanableError
from .cleaner_log import PartitionView, SegmentView
from .cleaner_map import OffsetMap
from .cleaner_parallel import (
    PARALLEL_MIN_BYTES,
    build_offset_map_parallel,
    default_workers,
    dirty_segment_files,
)
from .cleaner_records import Slow, map_records
from .cleaner_txn import CleanedTransactionMetadata
from .swap import cleaned_path, replace_segments

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


def cleanable_offsets(log: PartitionView, checkpoint: int | None, now: int, cfg: LogConfig,
                      expiration_ms: int) -> tuple[int, int, bool]:
    """``(firstDirtyOffset, firstUncleanableDirtyOffset, forceUpdateCheckpoint)``."""
    start = log.log_start_offset
    dirty = start if checkpoint is None else checkpoint
    force = False
    if dirty < start or dirty > log.log_end_offset:
        dirty, force = start, True
    candidates = [log.last_stable_offset(now, expiration_ms), log.active_segment.base_offset]
    lag = max(cfg.min_compaction_lag_ms, 0)
    if lag > 0:
        for s in log.non_active_segments_from(dirty):
            if s.largest_timestamp > now - lag:
                candidates.append(s.base_offset)
                break
    return dirty, max(dirty, min(candidates)), force


def max_compaction_delay(log: PartitionView, first_dirty: int, now: int, cfg: LogConfig) -> int:
    ts = [s.first_batch_timestamp for s in log.non_active_segments_from(first_dirty)]
    ts = [t for t in ts if t > 0]
    earliest = min(ts) if ts else LONG_MAX
    clean_until = now - max(cfg.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


def log_to_clean(log: PartitionView, checkpoint: int | None, now: int, cfg: LogConfig,
                 expiration_ms: int) -> LogToClean:
    dirty, uncleanable, force = cleanable_offsets(log, checkpoint, now, cfg, expiration_ms)
    nas = log.non_active_segments_from(uncleanable)
    first_unc = nas[0].base_offset if nas else log.active_segment.base_offset
    clean_bytes = sum(s.size for s in log.segments if s.base_offset < dirty)
    cleanable = sum(s.size for s in log.log_segments(min(dirty, first_unc), first_unc))
    delay = max_compaction_delay(log, dirty, now, cfg)
    return LogToClean(dirty, uncleanable, first_unc, clean_bytes, cleanable, delay > 0, force)


# ------------------------------------------------------------------------------------ grouping
def group_segments_by_size(segments: list[SegmentView], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[SegmentView]]:
    """``Cleaner.groupSegmentsBySize``."""
    groups: list[list[SegmentView]] = []
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
def build_offset_map(log: PartitionView, start: int, end: int, offset_map: OffsetMap, *, workers: int = 1,
                     parallel_min_bytes: int = PARALLEL_MIN_BYTES) -> bool:
    """``Cleaner.buildOffsetMap``; returns True when the map filled up (``endOffset`` then falls inside the
    dirty section). ``offset_map.latest_offset + 1`` is the round's end offset.

    With ``workers > 1`` and at least ``parallel_min_bytes`` of dirty segments, segments are mapped in worker
    processes (:mod:`.cleaner_parallel`); the result is the same, and when the map would fill up the sequential
    pass below runs instead (it stops exactly where the broker stops)."""
    offset_map.clear()
    offset_map.start = start
    dirty = log.log_segments(start, end)
    aborted = log.collect_aborted_transactions(start, end)
    if workers > 1 and len(dirty) > 1 and sum(s.size for s in dirty) >= parallel_min_bytes:
        if build_offset_map_parallel(dirty_segment_files(dirty), start, end, aborted, offset_map, workers):
            return False
        offset_map.clear()
        offset_map.start = start
    txn = CleanedTransactionMetadata()
    txn.add_aborted_transactions(aborted)
    capacity = offset_map.capacity
    cells = offset_map.cells
    put = offset_map.put
    for i, seg in enumerate(dirty):
        next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
        if seg.size:
            for b in iter_batches(seg.buf, path=str(seg.path)):
                last = b.last_offset
                if last < start:
                    continue  # before the index lookup position in the broker: no effect on the map
                if b.is_control:
                    txn.on_control_batch_read(b)
                elif not txn.on_batch_read(b):
                    if not _map_fast(b, start, offset_map):
                        for t in b.iter_record_tuples():
                            if t[2] is not None and t[0] >= start:
                                if len(cells) + offset_map.spilled < capacity:
                                    put(t[2], t[0])
                                else:
                                    return True
                offset_map.latest_offset = last
        offset_map.latest_offset = next_start - 1
    return False


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
class SegmentIndexer:
    """The offset and time index ``LogSegment.append`` builds while the cleaner appends its chunks.

    ``per_batch`` (Kafka 3.9.2 and 4.x, KAFKA-806; verified against both brokers): ``append`` walks the batches
    of each chunk and decides per batch (index entry = the batch's last offset and position, max timestamp and
    its shallow offset = the batch's). Otherwise (older brokers): one decision per chunk with the chunk's
    largest offset and the filter's max timestamp / shallow offset.
    """

    def __init__(self, base_offset: int, index_interval_bytes: int, per_batch: bool = True):
        self.oi = OffsetIndexBuilder(base_offset)
        self.ti = TimeIndexBuilder(base_offset)
        self.interval = index_interval_bytes
        self.per_batch = per_batch
        self.since = 0
        self.max_ts = NO_TIMESTAMP
        self.max_off = -1

    def append(self, chunk, position: int, largest_offset: int, max_timestamp: int, shallow_offset: int) -> None:
        if not self.per_batch:
            if max_timestamp > self.max_ts:
                self.max_ts, self.max_off = max_timestamp, shallow_offset
            if self.since > self.interval:
                self.oi.append(largest_offset, position)
                self.ti.maybe_append(self.max_ts, self.max_off)
                self.since = 0
            self.since += len(chunk)
            return
        for b in iter_batches(chunk):
            ts, last, size = b.max_timestamp, b.last_offset, b.size
            if ts > self.max_ts:
                self.max_ts, self.max_off = ts, last
            if self.since > self.interval:
                self.oi.append(last, position)
                self.ti.maybe_append(self.max_ts, self.max_off)
                self.since = 0
            position += size
            self.since += size
            del b

    def finish(self) -> None:
        """``onBecomeInactiveSegment``: the final time-index entry."""
        self.ti.maybe_append(self.max_ts, self.max_off, skip_full_check=True)


@dataclass
class CleanedSegment:
    base_offset: int
    sources: list[int]
    size: int = 0
    source_bytes: int = 0
    indexer: SegmentIndexer | None = None
    aborted: list = field(default_factory=list)
    last_modified_ns: int = 0


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


class _Sink:
    def __init__(self, path: Path | None):
        self.path = path
        self.f = open(path, "wb") if path is not None else None
        self.size = 0

    def write(self, data) -> None:
        if self.f is not None:
            self.f.write(data)
        self.size += len(data)

    def close(self, fsync: bool) -> None:
        if self.f is not None:
            self.f.flush()
            if fsync:
                os.fsync(self.f.fileno())
            self.f.close()
            self.f = None


def clean_into(seg: SegmentView, sink: _Sink, flt: CleanerFilter, out: CleanedSegment, io_buffer: int,
               max_message_size: int, max_io_buffer: int) -> None:
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
            if out.indexer is not None:
                out.indexer.append(res.output, sink.size, res.max_offset, res.max_timestamp,
                                   res.shallow_offset_of_max_timestamp)
            sink.write(res.output)
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


def clean_log(log: PartitionView, to_clean: LogToClean, cfg: LogConfig, cleaner: CleanerConfig, now: int, *,
              write: bool, legacy_to_v2: bool = True, expiration_ms: int = 86400000,
              keep_deleted: bool = False, crash_hook: Callable[[str], None] | None = None,
              progress: Callable[[int], None] | None = None, per_batch_index: bool = True,
              workers: int = 1) -> CleanResult:
    """One round of ``Cleaner.doClean``. With ``write=False`` nothing is written (dry run: sizes only).
    ``per_batch_index``: index the cleaned segments per batch (Kafka >= 3.9.2), see :class:`SegmentIndexer`."""
    clean_segs = [s for s in log.segments if s.base_offset < to_clean.first_dirty_offset]
    legacy_horizon = (clean_segs[-1].last_modified - cfg.delete_retention_ms) if clean_segs else 0
    offset_map = OffsetMap(cleaner.dedupe_buffer_per_thread, cleaner.dedupe_buffer_load_factor)
    upper = to_clean.first_uncleanable_offset
    full = build_offset_map(log, to_clean.first_dirty_offset, upper, offset_map, workers=workers)
    offset_map.freeze()
    end_offset = offset_map.latest_offset + 1
    result = CleanResult(log.name, to_clean.first_dirty_offset, end_offset, full, map_size=offset_map.size)
    txn = CleanedTransactionMetadata()
    io_buffer = cleaner.io_buffer_size // max(cleaner.num_threads, 1) // 2
    max_msg = cfg.max_message_bytes
    groups = group_segments_by_size(log.log_segments(0, end_offset), cfg.segment_bytes, cfg.segment_index_bytes,
                                    upper)
    for group in groups:
        cs = CleanedSegment(group[0].base_offset, [s.base_offset for s in group])
        cs.source_bytes = sum(s.size for s in group)
        # File.setLastModified(last source's File.lastModified): millisecond precision
        cs.last_modified_ns = group[-1].mtime_ns // 1_000_000 * 1_000_000
        if write:
            cs.indexer = SegmentIndexer(cs.base_offset, cfg.index_interval_bytes, per_batch=per_batch_index)
        target = cleaned_path(log.path, cs.base_offset, ".log") if write else None
        if target is not None:
            for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                cleaned_path(log.path, cs.base_offset, suffix).unlink(missing_ok=True)
        sink = _Sink(target)
        txn.cleaned_index = cs.aborted
        active = log.last_records_of_active_producers(now, expiration_ms)
        try:
            for i, seg in enumerate(group):
                nxt = group[i + 1].base_offset if i + 1 < len(group) else seg.read_next_offset
                txn.add_aborted_transactions(log.collect_aborted_transactions(seg.base_offset, nxt))
                flt = CleanerFilter(offset_map, txn, now=now, delete_retention_ms=cfg.delete_retention_ms,
                                    retain_legacy_deletes=seg.last_modified > legacy_horizon,
                                    active_producers=active, upper_bound_offset=upper,
                                    legacy_to_v2=legacy_to_v2, stats=result.stats)
                clean_into(seg, sink, flt, cs, io_buffer, max_msg, cleaner.max_message_size)
                if progress is not None:
                    progress(seg.size)
            cs.size = sink.size
            sink.close(fsync=write)
            if write:
                _write_indexes(log, cs)
        except BaseException:
            sink.close(fsync=False)
            if write:
                for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                    cleaned_path(log.path, cs.base_offset, suffix).unlink(missing_ok=True)
            raise
        if write:
            log.close()  # release the mmaps of the files about to be renamed
            replace_segments(log.path, [cs.base_offset], cs.sources, keep_deleted=keep_deleted,
                             crash_hook=crash_hook)
        result.groups.append(cs)
    return result


def _write_indexes(log: PartitionView, cs: CleanedSegment) -> None:
    assert cs.indexer is not None
    cs.indexer.finish()
    oi, ti = cs.indexer.oi, cs.indexer.ti
    files = [(".index", oi.build().to_bytes(trim=True)), (".timeindex", ti.build().to_bytes(trim=True))]
    if cs.aborted:
        entries = [TxnIndexEntry(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
                   for t in cs.aborted]
        files.append((".txnindex", bytes(TransactionIndex.from_entries(cs.base_offset, entries)._buf)))
    for suffix, data in files:
        p = cleaned_path(log.path, cs.base_offset, suffix)
        with open(p, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    mtime = cs.last_modified_ns
    for suffix in (".log", ".index", ".timeindex"):
        os.utime(cleaned_path(log.path, cs.base_offset, suffix), ns=(mtime, mtime))
    fsync_dir(log.path)


# --------------------------------------------------------------------------------- checkpoints
def read_cleaner_checkpoint(data_dir: Path) -> dict[tuple[str, int], int]:
    p = data_dir / CLEANER_OFFSET_CHECKPOINT
    if not p.exists():
        return {}
    return read_offset_checkpoint(p).to_dict()


def update_cleaner_checkpoint(data_dir: Path, topic: str, partition: int, offset: int) -> None:
    """``LogCleanerManager.updateCheckpoints``: rewrite the file with this partition's new clean point."""
    update_cleaner_checkpoints(data_dir, {(topic, partition): offset})


def update_cleaner_checkpoints(data_dir: Path, updates: dict[tuple[str, int], int]) -> None:
    """Rewrite ``cleaner-offset-checkpoint`` once with several partitions' new clean points.

    A read-modify-write of a file shared by every partition of the data dir: only one writer per data dir may
    run it at a time (the broker serialises it under its cleaner lock). Parallel jobs therefore compact with
    ``update_checkpoint=False`` and settle the file once, from the outcomes, in one place."""
    if not updates:
        return
    offsets = read_cleaner_checkpoint(data_dir)
    offsets.update(updates)
    live = {k: v for k, v in offsets.items() if (data_dir / f"{k[0]}-{k[1]}").is_dir()}
    write_offset_checkpoint(data_dir / CLEANER_OFFSET_CHECKPOINT, live)


# ------------------------------------------------------------------------------ one partition
@dataclass
class CompactionOutcome:
    partition: str
    eligible: bool
    reason: str
    to_clean: LogToClean | None = None
    result: CleanResult | None = None
    checkpoint_offset: int | None = None  # the clean point to record in cleaner-offset-checkpoint, if any

    def to_dict(self) -> dict:
        d = {"partition": self.partition, "eligible": self.eligible, "reason": self.reason}
        if self.checkpoint_offset is not None:
            d["checkpoint_offset"] = self.checkpoint_offset
        if self.to_clean is not None:
            t = self.to_clean
            d.update(first_dirty_offset=t.first_dirty_offset, first_uncleanable_offset=t.first_uncleanable_offset,
                     cleanable_ratio=round(t.cleanable_ratio, 6), cleanable_bytes=t.cleanable_bytes,
                     clean_bytes=t.clean_bytes)
        if self.result is not None:
            r = self.result
            d.update(end_offset=r.end_offset, map_full=r.map_full, bytes_before=r.bytes_before,
                     bytes_after=r.bytes_after, bytes_reclaimed=r.bytes_reclaimed,
                     segments_in=sum(len(g.sources) for g in r.groups), segments_out=len(r.groups),
                     records_read=r.stats.messages_read, records_retained=r.stats.messages_retained)
        return d


def compact_partition(partition_dir: str | os.PathLike, cfg: LogConfig, cleaner: CleanerConfig, now: int, *,
                      dry_run: bool = False, force: bool = False, kafka_version: tuple[int, int] = (4, 0),
                      log_start_offset: int | None = None, high_watermark: int | None = None,
                      expiration_ms: int = 86400000, keep_deleted: bool = False,
                      crash_hook: Callable[[str], None] | None = None,
                      progress: Callable[[int], None] | None = None,
                      workers: int | None = None, update_checkpoint: bool = True) -> CompactionOutcome:
    """Run one broker cleaning round on one partition (if eligible, or always with ``force``).

    ``update_checkpoint=False`` leaves ``cleaner-offset-checkpoint`` alone and reports the new clean point in
    ``CompactionOutcome.checkpoint_offset`` for the caller to write (see :func:`update_cleaner_checkpoints`):
    partitions of one data dir compacted in parallel must not each rewrite the shared file.

    ``workers``: processes for the offset-map pass over large dirty sections (default: the usable CPUs); the
    result does not depend on it."""
    pdir = Path(partition_dir)
    data_dir = pdir.parent
    if not cfg.compact:
        return CompactionOutcome(pdir.name, False, "cleanup.policy does not contain compact")
    if not cleaner.enable_cleaner:
        return CompactionOutcome(pdir.name, False, "log.cleaner.enable=false")
    with PartitionView(pdir, log_start_offset=log_start_offset, high_watermark=high_watermark) as log:
        checkpoint = read_cleaner_checkpoint(data_dir).get((log.topic, log.partition))
        ltc = log_to_clean(log, checkpoint, now, cfg, expiration_ms)
        forced = ltc.first_dirty_offset if ltc.force_update_checkpoint and not dry_run else None
        if forced is not None and update_checkpoint:
            update_cleaner_checkpoint(data_dir, log.topic, log.partition, forced)
        if ltc.total_bytes == 0:
            return CompactionOutcome(log.name, False, "empty log", ltc, checkpoint_offset=forced)
        if not force and not ltc.eligible(cfg.min_cleanable_dirty_ratio):
            return CompactionOutcome(
                log.name, False, f"dirty ratio {ltc.cleanable_ratio:.3f} <= min.cleanable.dirty.ratio "
                f"{cfg.min_cleanable_dirty_ratio} and no segment past max.compaction.lag.ms", ltc,
                checkpoint_offset=forced)
        if ltc.first_uncleanable_offset <= ltc.first_dirty_offset and not ltc.cleanable_bytes:
            return CompactionOutcome(log.name, False, "nothing cleanable", ltc, checkpoint_offset=forced)
        try:
            res = clean_log(log, ltc, cfg, cleaner, now, write=not dry_run, legacy_to_v2=kafka_version >= (4, 0),
                            per_batch_index=kafka_version >= (3, 9),
                            workers=default_workers() if workers is None else workers,
                            expiration_ms=expiration_ms, keep_deleted=keep_deleted, crash_hook=crash_hook,
                            progress=progress)
        except UncleanableError as e:
            raise KafkaLogError(f"the broker would mark this partition uncleanable: {e.reason}", e.path,
                                e.position) from None
        if dry_run:
            return CompactionOutcome(log.name, True, "would clean", ltc, res)
        if update_checkpoint:
            update_cleaner_checkpoint(data_dir, log.topic, log.partition, res.end_offset)
        return CompactionOutcome(log.name, True, "cleaned", ltc, res, checkpoint_offset=res.end_offset)
