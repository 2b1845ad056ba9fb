"""Appending batches to a partition directory as the broker does (docs/semantics.md#appending, docs/semantics.md#rolling, docs/semantics.md#index-interval-rule).

:class:`LogWriter` owns one partition directory while it is open:

* leader appends (``append(batch)``): offsets assigned from the log end offset, the partition leader epoch
  stamped, ``LogAppendTime`` applied when the topic says so, re-compression when ``compression.type`` names a
  codec different from the batch's; follower appends (``append(..., assign_offsets=False)``) keep offsets;
* ``.index`` entries by the append-time rule (per append, or per batch as Kafka >= 4.1 with
  ``index_per_batch=True``), ``.timeindex`` entries only when the max timestamp grows;
* roll on ``segment.bytes``, ``segment.ms`` (record time, jitter 0), full indexes and offset overflow; the
  closed segment gets its final time-index entry and trimmed indexes, a producer snapshot at the new base
  offset, and is fsynced (recovery point = new base offset);
* ``.txnindex`` entries for aborted transactions, producer state, ``leader-epoch-checkpoint``;
* :meth:`close` is the broker's clean close: final time-index entry, trimmed indexes, snapshot at the log end
  offset, fsync. Data dir checkpoints are written by :mod:`.flush`.

The ``.log`` is appended in place (the broker's behaviour; a crash leaves a torn tail that recovery cuts);
index files are written whole, atomically, at roll and close.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kafkalog.storage.codec.crc import crc32c
from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.flush import plan_flush
from kafkalog.storage.engine.plan import apply, data_dir_lock
from kafkalog.storage.engine.staging import PartitionStaging
from kafkalog.storage.engine.validator import (
    analyze_append,
    check_append_identity,
    check_append_size,
    check_follower_offset,
    check_leader_magic,
)
from kafkalog.storage.errors import LogDirError
from kafkalog.storage.files.findings import note
from kafkalog.storage.files.names import (
    index_file_name,
    log_file_name,
    time_index_file_name,
    txn_index_file_name,
)
from kafkalog.storage.files.offset_index import OffsetIndex
from kafkalog.storage.files.partition_metadata import PARTITION_METADATA_FILE, write_partition_metadata
from kafkalog.storage.files.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from kafkalog.storage.files.txn_index import AbortedTxn, TransactionIndex, read_txn_index
from kafkalog.storage.io import fileops
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.io.lock import DirLock
from kafkalog.storage.log.leader_epoch_cache import LeaderEpochCache
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.producer_state import ProducerStateManager, rebuild_producer_state
from kafkalog.storage.log.segment import SegmentIndexer, fits
from kafkalog.storage.log.topic_partition import live_topic_partition, partition_path, partition_path_for
from kafkalog.storage.records import LOG_APPEND_TIME, build_batch, iter_batches
from kafkalog.storage.records.batch import TIMESTAMP_TYPE_MASK

INT32_MAX = 2**31 - 1
UNKNOWN = TimestampOffset(NO_TIMESTAMP, -1)
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


@dataclass
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    valid_bytes: int
    batches: int
    position: int  # where the append starts in the active segment
    segment_base_offset: int
    duplicate: bool = False
    rolled: bool = False


@dataclass
class _Segment:
    """The write-side state of one segment (``LogSegment``): its indexes are built by the one index rule
    (:class:`~kafkalog.storage.log.segment.SegmentIndexer`)."""

    dir: Path
    base_offset: int
    size: int
    indexer: SegmentIndexer
    created_ms: int
    rolling_based_timestamp: int | None = None
    aborted: list[AbortedTxn] = field(default_factory=list)
    txn_index_dirty: bool = False

    @property
    def log_path(self) -> Path:
        return self.dir / log_file_name(self.base_offset)

    @property
    def max_ts(self) -> TimestampOffset:
        return self.indexer.max_timestamp

    def can_convert_to_relative(self, offset: int) -> bool:
        return fits(offset, self.base_offset)

    def time_waited_for_roll(self, now_ms: int, max_ts_in_append: int) -> int:
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            return max_ts_in_append - self.rolling_based_timestamp
        return now_ms - self.created_ms

    def write_indexes(self, *, preallocate: int | None = None, fsync: bool = True) -> None:
        size_o = None if preallocate is None else preallocate
        self.indexer.oi.build(size=size_o).write(self.dir / index_file_name(self.base_offset),
                                                 trim=preallocate is None, size=size_o, fsync=fsync)
        self.indexer.ti.build(size=size_o).write(self.dir / time_index_file_name(self.base_offset),
                                                 trim=preallocate is None, size=size_o, fsync=fsync)
        if self.txn_index_dirty:
            path = self.dir / txn_index_file_name(self.base_offset)
            fileops.atomic_write(path, TransactionIndex.from_entries(self.base_offset, self.aborted).to_bytes(),
                                 fsync=fsync)
            self.txn_index_dirty = False

    def on_become_inactive(self) -> None:
        """Final time-index entry (skipping the full check) + trimmed indexes."""
        self.indexer.seal()
        self.write_indexes()


def _now_ms() -> int:
    return int(time.time() * 1000)


class LogWriter:
    """Append to one partition directory (created if missing) as a broker would.

    ``now_ms`` fixes the clock (LogAppendTime, segment age of empty segments); ``leader_epoch`` is stamped on
    leader appends (``None`` keeps each batch's own epoch).
    """

    def __init__(self, partition_dir: str | os.PathLike, config: LogConfig | None = None, *,
                 topic_id: str | None = None, leader_epoch: int | None = 0, now_ms: int | None = None,
                 index_per_batch: bool = False, producer_id_expiration_ms: int = 86400000,
                 fsync: bool = True):
        self.dir = Path(partition_dir)
        self.config = config or LogConfig()
        self.topic_id = topic_id
        self.leader_epoch = leader_epoch
        self._fixed_now = now_ms
        self.index_per_batch = index_per_batch
        self.fsync = fsync
        check_append_identity(self.dir, topic_id=topic_id, leader_epoch=leader_epoch)
        if not self.dir.is_dir():
            fileops.mkdir(self.dir, parents=True, exist_ok=True)
        view = DirView(self.dir, DirView.DIRECT)
        self.epoch_cache = LeaderEpochCache.load(view)
        if not self.epoch_cache.exists:
            self.epoch_cache.flush(fsync=fsync, why=note(self.dir, "op.newPartitionEpochs"))
        self.producers = ProducerStateManager(view, producer_id_expiration_ms=producer_id_expiration_ms)
        # an existing (recovered or cleanly closed) partition: segments, log start and end offsets, producer
        # state rebuilt from snapshots (taking snapshots where the broker would)
        segs = PartitionLog(view).segments
        bases = [s.base_offset for s in segs]
        if segs:
            self.log_end_offset = segs[-1].read_next_offset()
            self.log_start_offset = bases[0]
            rebuild_producer_state(self.producers, segs, self.log_start_offset, self.log_end_offset, self.now(),
                                   False)
            self.producers.written.clear()
        else:
            self.log_start_offset = self.log_end_offset = 0
        for s in segs:
            s.close()
        self.recovery_point = self.log_end_offset
        self.segments: list[int] = bases
        self.active: _Segment
        if bases:
            self.active = self._open_segment(bases[-1])
        else:
            self.active = self._new_segment(self.log_end_offset)
            self.segments.append(self.active.base_offset)
        self._log_file = fileops.AppendFile(self.active.log_path)
        self.closed = False

    # ------------------------------------------------------------------------------------------ helpers
    def now(self) -> int:
        return self._fixed_now if self._fixed_now is not None else _now_ms()

    def _indexer(self, base_offset: int) -> SegmentIndexer:
        return SegmentIndexer(base_offset, self.config.index_interval_bytes, self.config.segment_index_bytes)

    def _new_segment(self, base_offset: int) -> _Segment:
        path = self.dir / log_file_name(base_offset)
        for suffix_name in (log_file_name, index_file_name, time_index_file_name, txn_index_file_name):
            stale = self.dir / suffix_name(base_offset)
            if stale.exists():  # LocalLog.roll deletes stale files with the new name
                fileops.unlink(stale)
        fileops.touch(path, fsync=self.fsync)
        return _Segment(self.dir, base_offset, 0, self._indexer(base_offset), self.now())

    def _open_segment(self, base_offset: int) -> _Segment:
        """Reopen the last segment: index entries from its files, max timestamp from the time index (as the
        broker's lazy ``readMaxTimestampAndOffsetSoFar``), byte counter 0 (a restart resets it)."""
        seg = _Segment(self.dir, base_offset, os.path.getsize(self.dir / log_file_name(base_offset)),
                       self._indexer(base_offset), self.now())
        ip, tp, xp = (self.dir / f(base_offset) for f in (index_file_name, time_index_file_name,
                                                          txn_index_file_name))
        if ip.exists():
            with OffsetIndex.open(ip, base_offset) as idx:
                for e in idx:
                    seg.indexer.oi.append(e.offset, e.position)
        if tp.exists():
            with TimeIndex.open(tp, base_offset) as tidx:
                for e in tidx:
                    seg.indexer.ti.maybe_append(e.timestamp, e.offset, skip_full_check=True)
                if tidx.valid_entries:
                    last = tidx.last_valid_entry
                    seg.indexer.max_ts, seg.indexer.max_ts_offset = last.timestamp, last.offset
        if xp.exists():
            with read_txn_index(xp, base_offset) as t:
                seg.aborted = list(t)
        if seg.size > 0:
            with open(seg.log_path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                for b in iter_batches(mm, path=str(seg.log_path)):
                    seg.rolling_based_timestamp = b.max_timestamp
                    del b
                    break
        return seg

    # ------------------------------------------------------------------------------------------- append
    def append(self, data: bytes | bytearray | memoryview, *, assign_offsets: bool = True) -> AppendInfo:
        """One append (one produce request's records for this partition, or one fetch response's for a
        follower). ``data`` holds one or more complete batches."""
        if self.closed:
            raise LogDirError("the writer is closed", str(self.dir))
        self._ensure_partition_metadata()
        buf = bytearray(data)
        batches = self._analyze(buf)
        if not batches:
            return AppendInfo(self.log_end_offset, self.log_end_offset - 1, NO_TIMESTAMP, -1, 0, 0,
                              self.active.size, self.active.base_offset)
        if assign_offsets:
            buf, batches = self._assign_offsets(buf, batches)
        else:
            check_follower_offset(batches[0][1], self.log_end_offset, str(self.dir))
        if assign_offsets and len(batches) == 1 and self._is_duplicate(buf, batches[0]):
            return AppendInfo(batches[0][1], batches[0][2], NO_TIMESTAMP, -1, 0, 1, self.active.size,
                              self.active.base_offset, duplicate=True)
        size = len(buf)
        check_append_size(size, self.config, str(self.dir))
        first_offset = batches[0][1]
        last_offset = batches[-1][2]
        max_ts, shallow = NO_TIMESTAMP, -1
        for (_pos, _base, last, mts, _sz) in batches:
            if mts > max_ts:
                max_ts, shallow = mts, last
        rolled = self._maybe_roll(size, max_ts, last_offset, first_offset if
                                  (assign_offsets or buf[16] >= 2) else last_offset - INT32_MAX)
        # leader epoch cache (v2 batches assign; a legacy batch clears it)
        for (pos, base, _last, _mts, _sz) in batches:
            if buf[pos + 16] >= 2:
                ple = _I32.unpack_from(buf, pos + 12)[0]
                if ple >= 0:
                    self.epoch_cache.assign(ple, base)
            else:
                if self.epoch_cache.epochs:
                    self.epoch_cache.clear()
                    self.epoch_cache.flush(fsync=self.fsync)
        seg = self.active
        position = seg.size
        self._segment_append(seg, buf, batches, last_offset, max_ts, shallow)
        self.log_end_offset = last_offset + 1
        # producer state + txn index
        for (pos, _base, _last, _mts, sz) in batches:
            if buf[pos + 16] < 2:
                continue
            b = next(iter_batches(memoryview(buf)[pos:pos + sz]))
            aborted = self.producers.replay(b)
            if aborted is not None:
                seg.aborted.append(aborted)
                seg.txn_index_dirty = True
        self.producers.map_end_offset = self.log_end_offset
        if self.log_end_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()
        return AppendInfo(first_offset, last_offset, max_ts, shallow, size, len(batches), position,
                          seg.base_offset, rolled=rolled)

    def append_records(self, records: Iterable, **batch_args) -> AppendInfo:
        """Build one v2 batch from records (``build_batch`` arguments) and append it as a leader."""
        return self.append(build_batch(list(records), base_offset=0, **batch_args))

    def _analyze(self, buf: bytearray) -> list[tuple[int, int, int, int, int]]:
        return analyze_append(buf, self.config, str(self.dir))

    def _assign_offsets(self, buf: bytearray, batches):
        """``LogValidator``: offsets from the LEO, partition leader epoch, LogAppendTime, re-compression."""
        target_codec = self.config.codec
        out = bytearray()
        new = []
        next_offset = self.log_end_offset
        now = self.now()
        for (pos, _base, _last, _mts, sz) in batches:
            check_leader_magic(buf, pos, str(self.dir))
            raw = bytearray(buf[pos:pos + sz])
            b = next(iter_batches(memoryview(raw)))
            codec = b.codec
            ts_type_append = self.config.log_append_time
            if target_codec is not None and target_codec != codec and not b.is_control:
                recs = b.records()
                del b
                raw = bytearray(build_batch(
                    recs, base_offset=recs[0].offset if recs else 0, codec=target_codec,
                    timestamp_type=LOG_APPEND_TIME if ts_type_append else 0,
                    log_append_time=now if ts_type_append else None,
                    producer_id=_I64.unpack_from(raw, 43)[0], producer_epoch=_I16.unpack_from(raw, 51)[0],
                    base_sequence=_I32.unpack_from(raw, 53)[0], is_transactional=bool(raw[22] & 0x10),
                    partition_leader_epoch=_I32.unpack_from(raw, 12)[0],
                    level=self.config.compression_level))
            else:
                del b
            delta = _I32.unpack_from(raw, 23)[0]
            _I64.pack_into(raw, 0, next_offset)
            if self.leader_epoch is not None:
                _I32.pack_into(raw, 12, self.leader_epoch)
            if ts_type_append:
                raw[22] |= TIMESTAMP_TYPE_MASK
                _I64.pack_into(raw, 35, now)
                struct.pack_into(">I", raw, 17, crc32c(memoryview(raw)[21:]))
            mts = _I64.unpack_from(raw, 35)[0]
            new.append((len(out), next_offset, next_offset + delta, mts, len(raw)))
            out += raw
            next_offset += delta + 1
        return out, new

    def _is_duplicate(self, buf: bytearray, batch) -> bool:
        pos = batch[0]
        pid = _I64.unpack_from(buf, pos + 43)[0]
        if pid < 0:
            return False
        entry = self.producers.producers.get(pid)
        if entry is None:
            return False
        epoch = _I16.unpack_from(buf, pos + 51)[0]
        base_seq = _I32.unpack_from(buf, pos + 53)[0]
        delta = _I32.unpack_from(buf, pos + 23)[0]
        last_seq = base_seq + delta if base_seq + delta <= INT32_MAX else base_seq + delta - INT32_MAX - 1
        return entry.find_duplicate_batch(epoch, base_seq, last_seq) is not None

    def _segment_append(self, seg: _Segment, buf: bytearray, batches, last_offset: int, max_ts: int,
                        shallow: int) -> None:
        """``LogSegment.append``."""
        position = seg.size
        if position == 0:
            seg.rolling_based_timestamp = max_ts
        if not seg.can_convert_to_relative(last_offset):
            raise LogDirError(f"offset {last_offset} overflows segment {seg.base_offset}", str(seg.log_path))
        self._log_file.write(buf)
        if self.index_per_batch:
            for (pos, _base, last, mts, sz) in batches:
                seg.indexer.append(position + pos, last, mts, last, sz)
        else:
            seg.indexer.append(position, last_offset, max_ts, shallow, len(buf))
        seg.size += len(buf)

    # --------------------------------------------------------------------------------------------- roll
    def _maybe_roll(self, size: int, max_ts: int, last_offset: int, first_offset: int) -> bool:
        seg = self.active
        cfg = self.config
        reached_ms = seg.time_waited_for_roll(self.now(), max_ts) > cfg.max_segment_ms  # jitter 0
        if (seg.size > cfg.segment_size - size or (seg.size > 0 and reached_ms)
                or seg.indexer.is_full()
                or not seg.can_convert_to_relative(last_offset)):
            self.roll(max(first_offset, self.log_end_offset))
            return True
        return False

    def roll(self, new_base: int | None = None) -> None:
        """``UnifiedLog.roll``: close the active segment, open one at ``new_base`` (default the LEO), take a
        producer snapshot there and flush everything before it."""
        base = self.log_end_offset if new_base is None else max(new_base, self.log_end_offset)
        old = self.active
        if base == old.base_offset:
            if old.size == 0:
                return  # KAFKA-6388: the empty active segment is reused
            raise LogDirError(f"a segment with base offset {base} already exists", str(self.dir))
        self._log_file.flush(fsync=self.fsync)
        self._log_file.close()
        old.on_become_inactive()
        self.active = self._new_segment(base)
        self.segments.append(base)
        self._log_file = fileops.AppendFile(self.active.log_path)
        self.producers.map_end_offset = base
        self.producers.take_snapshot(sync=self.fsync)
        if self.fsync:
            fileops.fsync_dir(self.dir)
        self.recovery_point = base

    # -------------------------------------------------------------------------------------- flush/close
    def flush(self) -> None:
        """fsync the active segment and write its indexes (preallocated, as a running broker's)."""
        self._log_file.flush(fsync=self.fsync)
        self.recovery_point = self.log_end_offset

    def _ensure_partition_metadata(self) -> None:
        if self.topic_id is not None and not (self.dir / PARTITION_METADATA_FILE).exists():
            write_partition_metadata(self.dir / PARTITION_METADATA_FILE, self.topic_id, fsync=self.fsync)

    def close(self) -> int:
        """The broker's clean close (``UnifiedLog.close``): snapshot at the LEO, final time-index entry,
        trimmed indexes, fsync. Returns the log end offset (the new recovery point)."""
        if self.closed:
            return self.log_end_offset
        self._ensure_partition_metadata()
        self.producers.map_end_offset = self.log_end_offset
        self.producers.take_snapshot(sync=self.fsync)
        self._log_file.flush(fsync=self.fsync)
        self._log_file.close()
        seg = self.active
        if seg.max_ts.timestamp != NO_TIMESTAMP or seg.size > 0:
            seg.indexer.seal()
        seg.write_indexes(fsync=self.fsync)
        if self.epoch_cache.dirty:
            self.epoch_cache.flush(fsync=self.fsync)
        if self.fsync:
            fileops.fsync_dir(self.dir)
        self.recovery_point = self.log_end_offset
        self.closed = True
        return self.log_end_offset

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, exc_type, *_exc) -> None:
        if exc_type is None:
            self.close()
        elif not self.closed:
            self._log_file.close()
            self.closed = True


def append_to_partition(data_dir: str | os.PathLike, partition: str, batches: Iterable[bytes], *,
                        config: LogConfig | None = None, topic_id: str | None = None, leader_epoch: int | None = 0,
                        keep_offsets: bool = False, now_ms: int | None = None) -> tuple[int, int]:
    """Append ``batches`` to the partition dir ``partition`` (``<topic>-<n>``) of ``data_dir`` under the data
    dir's ``.lock`` (refused while a broker holds it), as a leader (offsets assigned) or, with
    ``keep_offsets``, as a follower. Returns ``(appends, log end offset)``. ``config``: the topic's effective
    config (default: :class:`~kafkalog.storage.config.resolver.ConfigResolver` for the data dir). All or nothing:
    a failed append leaves the data dir exactly as it was (:mod:`.staging`)."""

    topic, _ = live_topic_partition(partition)
    pdir = partition_path_for(data_dir, partition)
    if config is None:

        config = ConfigResolver(data_dirs=[data_dir]).log_config(data_dir, topic)

    n = 0
    with data_dir_lock(data_dir), PartitionStaging(data_dir) as staging:
        with LogWriter(staging.path(pdir), config, topic_id=topic_id,
                       leader_epoch=None if keep_offsets else leader_epoch, now_ms=now_ms) as w:
            for data in batches:
                w.append(data, assign_offsets=not keep_offsets)
                n += 1
            leo = w.log_end_offset
    return n, leo


def append_partitions(data_dir: str | os.PathLike, partitions: dict[tuple[str, int], Iterable[bytes]], *,
                      config: LogConfig | None = None, topic_ids: dict[str, str | None] | None = None,
                      leader_epoch: int | None = 0, keep_offsets: bool = False, now_ms: int | None = None,
                      flush: bool = True) -> dict[tuple[str, int], int]:
    """Append batches to several partitions of one data dir (created if missing) under its ``.lock``, then (with
    ``flush``) write the data dir's recovery points and log start offsets as a clean flush does, under the same
    lock. Returns each partition's log end offset. All or nothing, over every partition (:mod:`.staging`)."""

    root = Path(data_dir)
    paths = {tp: partition_path(root, *tp) for tp in partitions}  # every name valid before anything is written
    if not root.is_dir():
        fileops.mkdir(root, parents=True, exist_ok=True)
    ends: dict[tuple[str, int], int] = {}
    with DirLock(root):
        with PartitionStaging(root) as staging:
            for (topic, part), batches in sorted(partitions.items()):
                with LogWriter(staging.path(paths[(topic, part)]), config, topic_id=(topic_ids or {}).get(topic),
                               leader_epoch=leader_epoch, now_ms=now_ms) as w:
                    for data in batches:
                        w.append(data, assign_offsets=not keep_offsets)
                    ends[(topic, part)] = w.log_end_offset
        if flush:
            now = now_ms if now_ms is not None else _now_ms()
            apply(plan_flush([root], now_ms=now, write_clean_shutdown_marker=False), backup=False, locked=True)
    return ends
