"""The broker's startup loading and recovery, offline (``LogManager.loadLogs`` + ``LogLoader.load``,
40-log-engine §5, 20-indexes §4.3).

Per data dir: the clean-shutdown marker decides whether unflushed segments are recovered; recovery points and
log start offsets come from the dir's checkpoints (a malformed checkpoint counts as empty, as in Kafka).
Per partition (:func:`recover_partition`):

1. leftover ``.deleted``/``.cleaned``/``.swap`` files (``engine/swap.recover_swap_files``);
2. orphaned index files deleted; missing ``.timeindex`` created empty; a missing ``.index`` or a ``.txnindex``
   failing its sanity check makes the segment recovered;
3. without a clean shutdown, every segment from the one holding the recovery point is recovered batch by batch
   (CRC, framing, offsets in range, transaction markers); the ``.log`` is truncated at the first invalid byte,
   indexes, ``.txnindex``, leader epochs and producer snapshots rebuilt; after a truncated segment all later
   segments are deleted;
4. leader-epoch cache truncated to [log start, LEO); stray snapshots removed; producer state rebuilt with
   snapshots where the broker takes them;
5. then, as a clean broker shutdown would: indexes trimmed, snapshot at the LEO.

``dry_run=True`` computes what would change without writing (the result lists every file touched, the bytes
truncated and the records dropped).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import atomic_write, fsync_dir
from ..config import LogConfig
from ..errors import CorruptCheckpointError, CorruptIndexError, CorruptRecordError, KafkaLogError
from ..files.names import (
    index_file_name,
    is_index_file,
    is_log_file,
    log_file_name,
    offset_from_file_name,
    time_index_file_name,
    txn_index_file_name,
)
from ..files.offset_index import OffsetIndex, OffsetIndexBuilder
from ..files.partition_metadata import PARTITION_METADATA_FILE, read_partition_metadata
from ..files.time_index import NO_TIMESTAMP, TimeIndex, TimeIndexBuilder, TimestampOffset
from ..files.txn_index import ENTRY as TXN_ENTRY
from ..files.txn_index import TransactionIndex
from ..leader_epoch_cache import LeaderEpochCache
from ..producer_state import ProducerStateManager
from ..records import LogScanner
from .swap import recover_swap_files

INT32_MAX = 2**31 - 1
UNKNOWN = TimestampOffset(NO_TIMESTAMP, -1)


@dataclass
class SegmentRecovery:
    base_offset: int
    log_size: int
    valid_bytes: int
    batches: int
    records_dropped: int | None  # records in the truncated tail (complete batches only), when countable
    reason: str | None = None  # why the valid region ended early

    @property
    def truncated_bytes(self) -> int:
        return self.log_size - self.valid_bytes


@dataclass
class PartitionRecovery:
    """What recovery did (or would do) to one partition directory."""

    dir: str
    log_end_offset: int = 0
    log_start_offset: int = 0
    recovered: list[SegmentRecovery] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # files removed
    written: list[str] = field(default_factory=list)  # files created or rewritten
    truncated: list[tuple[str, int, int]] = field(default_factory=list)  # (.log, old size, new size)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    records_dropped: int = 0

    @property
    def bytes_truncated(self) -> int:
        return sum(old - new for _, old, new in self.truncated)

    @property
    def changed(self) -> bool:
        return bool(self.deleted or self.written or self.truncated or self.renamed)

    def touched(self) -> list[str]:
        seen: dict[str, None] = {}
        for f in self.deleted + self.written + [t[0] for t in self.truncated] + [r[0] for r in self.renamed]:
            seen.setdefault(f, None)
        return list(seen)


# ------------------------------------------------------------------------------------------ .log access


class _Log:
    """A read-only mmap of one ``.log`` that can be closed before the file is truncated."""

    def __init__(self, path: Path):
        self.path = path
        self.f = open(path, "rb")
        self.size = os.fstat(self.f.fileno()).st_size
        self.mm = mmap.mmap(self.f.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        self.buf = memoryview(self.mm) if self.mm is not None else memoryview(b"")

    def close(self) -> None:
        try:
            self.buf.release()
            if self.mm is not None:
                self.mm.close()
        except BufferError:  # a batch view is still referenced (e.g. by a traceback); the GC unmaps it
            pass
        self.f.close()

    def __enter__(self) -> _Log:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def segment_bases(pdir: Path) -> list[int]:
    out = []
    for name in os.listdir(pdir):
        if is_log_file(name):
            try:
                out.append(offset_from_file_name(name))
            except ValueError:
                continue
    return sorted(out)


def read_next_offset(pdir: Path, base: int) -> int:
    """Next offset after the last complete batch of the segment (full scan; corrupt bytes end it)."""
    with _Log(pdir / log_file_name(base)) as lg:
        nxt = base
        try:
            for b in LogScanner(lg.buf):
                nxt = b.next_offset
                del b
        except CorruptRecordError:
            pass
        return nxt


def _batches_between(pdir: Path, base: int, start_offset: int, end_offset: int) -> Iterator:
    """Batches of one segment with last offset >= ``start_offset`` that lie before the first batch whose last
    offset >= ``end_offset`` (``segment.read(start, maxPosition=translateOffset(end))``)."""
    with _Log(pdir / log_file_name(base)) as lg:
        try:
            for b in LogScanner(lg.buf, path=str(lg.path)):
                if b.last_offset >= end_offset:
                    del b
                    break
                if b.last_offset >= start_offset:
                    yield b
                del b
        except CorruptRecordError:
            return


# ------------------------------------------------------------------------------------ producer state


def rebuild_producer_state(psm: ProducerStateManager, pdir: Path, bases: list[int], log_start_offset: int,
                           last_offset: int, now_ms: int, reload_from_clean_shutdown: bool) -> None:
    """``UnifiedLog.rebuildProducerState`` (v2 record version)."""
    ordered = ([bases[-2]] if len(bases) > 1 else []) + ([bases[-1]] if bases else []) + [last_offset]
    to_snapshot = set(ordered)
    if psm.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        for off in ordered:
            psm.map_end_offset = off
            psm.take_snapshot()
        return
    empty_before = psm.is_empty and psm.map_end_offset >= last_offset
    psm.truncate_and_reload(log_start_offset, last_offset, now_ms)
    if last_offset > psm.map_end_offset and not empty_before:
        start_from = psm.map_end_offset
        floor = max((b for b in bases if b <= start_from), default=None)
        for base in bases:
            if base < (floor if floor is not None else start_from) or base >= last_offset:
                continue
            start = max(base, psm.map_end_offset, log_start_offset)
            psm.map_end_offset = start
            if base in to_snapshot:
                psm.take_snapshot()
            try:
                psm.load_from_batches(_batches_between(pdir, base, start, last_offset))
            except CorruptRecordError:
                pass
    psm.map_end_offset = last_offset
    psm.take_snapshot()


# ------------------------------------------------------------------------------------ segment recovery


@dataclass
class _RecoveredIndexes:
    offset_index: OffsetIndexBuilder
    time_index: TimeIndexBuilder
    aborted: list
    valid_bytes: int
    batches: int
    dropped_records: int | None
    reason: str | None


def _recover_bytes(lg: _Log, base: int, interval: int, psm: ProducerStateManager,
                   epochs: LeaderEpochCache) -> _RecoveredIndexes:
    """``LogSegment.recover`` over the mapped ``.log``."""
    oi = OffsetIndexBuilder(base)
    ti = TimeIndexBuilder(base)
    aborted = []
    valid = 0
    last_index_entry = 0
    max_ts = UNKNOWN
    count = 0
    reason = None
    scanner = LogScanner(lg.buf, path=str(lg.path))
    try:
        for b in scanner:
            b.ensure_valid()
            last = b.last_offset
            if not 0 <= last - base <= INT32_MAX:
                reason = f"offset {last} out of range for segment base {base}"
                del b
                break
            if b.max_timestamp > max_ts.timestamp:
                max_ts = TimestampOffset(b.max_timestamp, last)
            if valid - last_index_entry > interval:
                oi.append(last, valid)
                ti.maybe_append(max_ts.timestamp, max_ts.offset)
                last_index_entry = valid
            size = b.size
            if b.magic >= 2:
                epochs.assign_from_batch(b.partition_leader_epoch, b.base_offset)
                a = psm.replay(b)
                if a is not None:
                    aborted.append(a)
            valid += size
            count += 1
            del b
        else:
            reason = scanner.stop_reason
    except CorruptRecordError as e:
        reason = e.reason
    except CorruptIndexError as e:
        reason = e.reason
    dropped = _count_records(lg.buf, valid) if valid < lg.size else 0
    ti.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
    return _RecoveredIndexes(oi, ti, aborted, valid, count, dropped, reason)


def _count_records(buf: memoryview, start: int) -> int | None:
    """Records in the complete (even if corrupt) v2 batches after ``start``; None when not countable."""
    n = 0
    try:
        for b in LogScanner(buf, start):
            if b.magic < 2:
                del b
                return None
            n += b.records_count if b.size >= 61 else 0
            del b
    except (CorruptRecordError, KafkaLogError):
        return n
    return n


def _write_txn_index(path: Path, aborted: list, existed: bool) -> bool:
    if not aborted and not existed:
        return False
    data = b"".join(TXN_ENTRY.pack(0, a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset)
                    for a in aborted)
    atomic_write(path, data)
    return True


# ---------------------------------------------------------------------------------------- partition


def _txn_index_insane(pdir: Path, base: int) -> bool:
    p = pdir / txn_index_file_name(base)
    if not p.exists():
        return False
    try:
        with TransactionIndex.open(p, base) as t:
            t.sanity_check()
    except CorruptIndexError:
        return True
    return False


def _index_insane(pdir: Path, base: int) -> str | None:
    """Beyond Kafka's load-time checks: an ``.index``/``.timeindex`` that fails Kafka's sanity checks or whose
    entries are not strictly increasing (so reads would go wrong). Returns why, or None."""
    for name, cls in ((index_file_name(base), OffsetIndex), (time_index_file_name(base), TimeIndex)):
        p = pdir / name
        if not p.exists():
            continue
        try:
            with cls.open(p, base) as idx:
                idx.sanity_check()
                if not idx.padding_is_zero():
                    return f"{name}: non-zero bytes after the last entry"
        except CorruptIndexError as e:
            return f"{name}: {e.reason}"
    return None


def recover_partition(partition_dir: str | os.PathLike, *, config: LogConfig | None = None,
                      recovery_point: int = 0, log_start_offset: int = 0, had_clean_shutdown: bool = False,
                      now_ms: int = 0, dry_run: bool = False, strict_indexes: bool = True,
                      producer_id_expiration_ms: int = 86400000) -> PartitionRecovery:
    """Load and recover one partition directory as ``LogLoader.load`` does, then close it cleanly.

    ``strict_indexes`` also rebuilds indexes that fail Kafka's sanity checks (the broker would keep them and
    serve wrong reads); set False to do exactly what the broker does.
    """
    cfg = config or LogConfig()
    pdir = Path(partition_dir)
    out = PartitionRecovery(str(pdir))
    if dry_run:
        return _plan_partition(pdir, cfg, recovery_point, log_start_offset, had_clean_shutdown, strict_indexes, out)

    # 1-2: temp files
    tmp = recover_swap_files(pdir)
    out.deleted += [str(pdir / n) for n in tmp.deleted]
    out.renamed += [(str(pdir / a), str(pdir / b)) for a, b in tmp.renamed]
    # 3: orphans, missing indexes
    names = set(os.listdir(pdir))
    bases = segment_bases(pdir)
    base_set = set(bases)
    for name in sorted(names):
        if is_index_file(name):
            try:
                b = offset_from_file_name(name)
            except ValueError:
                continue
            if b not in base_set:
                (pdir / name).unlink()
                out.deleted.append(str(pdir / name))
    must_recover: set[int] = set()
    for b in bases:
        if not (pdir / time_index_file_name(b)).exists():
            (pdir / time_index_file_name(b)).touch()
            out.written.append(str(pdir / time_index_file_name(b)))
        if not (pdir / index_file_name(b)).exists():
            must_recover.add(b)
        elif _txn_index_insane(pdir, b):
            must_recover.add(b)
        elif strict_indexes and _index_insane(pdir, b) is not None:
            out.notes.append(f"{pdir.name}: {_index_insane(pdir, b)}; rebuilt")
            must_recover.add(b)
    epochs = _load_epochs(pdir, out)
    for b in sorted(must_recover):
        if had_clean_shutdown or b < recovery_point and not _in_unflushed(bases, b, recovery_point):
            _recover_one(pdir, bases, b, cfg, log_start_offset, now_ms, epochs, out, producer_id_expiration_ms)
    # 4: recoverLog
    if not had_clean_shutdown:
        unflushed = [b for b in bases if _in_unflushed(bases, b, recovery_point)]
        for i, b in enumerate(unflushed):
            seg = _recover_one(pdir, bases, b, cfg, log_start_offset, now_ms, epochs, out,
                               producer_id_expiration_ms)
            if seg.truncated_bytes > 0:
                for later in unflushed[i + 1:]:
                    _delete_segment(pdir, later, out)
                bases = [x for x in bases if x <= b]
                break
    bases = segment_bases(pdir)
    # 5-6
    leo = read_next_offset(pdir, bases[-1]) if bases else log_start_offset
    if bases and leo < log_start_offset:
        out.notes.append(f"{pdir.name}: log end offset {leo} is below the checkpointed log start offset "
                         f"{log_start_offset}: all segments deleted (as the broker does)")
        for b in bases:
            _delete_segment(pdir, b, out)
        epochs.clear()
        bases = []
    if not bases:
        (pdir / log_file_name(log_start_offset)).touch()
        out.written.append(str(pdir / log_file_name(log_start_offset)))
        bases = [log_start_offset]
        leo = log_start_offset
    lso = max(log_start_offset, bases[0])
    out.log_end_offset, out.log_start_offset = leo, lso
    # 9: epochs
    epochs.truncate_from_end(leo)
    epochs.truncate_from_start(log_start_offset)
    if epochs.dirty or not epochs.path.exists():
        epochs.flush()
        out.written.append(str(epochs.path))
    # 11: producer state
    psm = ProducerStateManager(pdir, producer_id_expiration_ms=producer_id_expiration_ms)
    out.deleted += [str(p) for p in psm.remove_stray_snapshots(bases)]
    before = dict(psm.snapshots)
    rebuild_producer_state(psm, pdir, bases, lso, leo, now_ms, had_clean_shutdown)
    out.deleted += [str(p) for off, p in before.items() if off not in psm.snapshots]
    out.written += [str(p) for p in psm.written]
    # clean close: the active segment's indexes trimmed (they are after recovery or a clean shutdown);
    # an untrimmed active index left by a crash below the recovery point is trimmed here.
    _trim_active_indexes(pdir, bases[-1], out.written)
    fsync_dir(pdir)
    return out


def _in_unflushed(bases: list[int], base: int, recovery_point: int) -> bool:
    """``segments.values(recoveryPoint, MAX)``: the floor segment of the recovery point and all later."""
    floor = max((b for b in bases if b <= recovery_point), default=None)
    return base >= (floor if floor is not None else recovery_point)


def _load_epochs(pdir: Path, out: PartitionRecovery) -> LeaderEpochCache:
    try:
        return LeaderEpochCache.load(pdir, auto_flush=False)
    except CorruptCheckpointError as e:
        out.notes.append(f"{pdir.name}: leader-epoch-checkpoint is unreadable ({e.reason}); rebuilt from the "
                         "batches (the broker would fail to load this partition)")
        cache = LeaderEpochCache(pdir / "leader-epoch-checkpoint", auto_flush=False)
        cache.dirty = True
        _rebuild_epochs_from_log(pdir, cache)
        return cache


def _rebuild_epochs_from_log(pdir: Path, cache: LeaderEpochCache) -> None:
    for base in segment_bases(pdir):
        with _Log(pdir / log_file_name(base)) as lg:
            try:
                for b in LogScanner(lg.buf):
                    if b.magic >= 2:
                        cache.assign_from_batch(b.partition_leader_epoch, b.base_offset)
                    del b
            except CorruptRecordError:
                pass


def _recover_one(pdir: Path, bases: list[int], base: int, cfg: LogConfig, log_start: int, now_ms: int,
                 epochs: LeaderEpochCache, out: PartitionRecovery, expiration_ms: int) -> SegmentRecovery:
    """``LogLoader.recoverSegment``: scratch producer state rebuilt up to the base, recover, snapshot."""
    psm = ProducerStateManager(pdir, producer_id_expiration_ms=expiration_ms)
    before = dict(psm.snapshots)
    rebuild_producer_state(psm, pdir, bases, log_start, base, now_ms, False)
    log_path = pdir / log_file_name(base)
    with _Log(log_path) as lg:
        r = _recover_bytes(lg, base, cfg.index_interval_bytes, psm, epochs)
        size = lg.size
    if r.valid_bytes < size:
        with open(log_path, "r+b") as f:
            f.truncate(r.valid_bytes)
            os.fsync(f.fileno())
        out.truncated.append((str(log_path), size, r.valid_bytes))
        out.records_dropped += r.dropped_records or 0
    r.offset_index.build().write(pdir / index_file_name(base))
    r.time_index.build().write(pdir / time_index_file_name(base))
    out.written += [str(pdir / index_file_name(base)), str(pdir / time_index_file_name(base))]
    txn_path = pdir / txn_index_file_name(base)
    if _write_txn_index(txn_path, [a for a in r.aborted], txn_path.exists()):
        out.written.append(str(txn_path))
    psm.take_snapshot()
    out.deleted += [str(p) for off, p in before.items() if off not in psm.snapshots]
    out.written += [str(p) for p in psm.written]
    seg = SegmentRecovery(base, size, r.valid_bytes, r.batches, r.dropped_records, r.reason)
    out.recovered.append(seg)
    return seg


def _delete_segment(pdir: Path, base: int, out: PartitionRecovery) -> None:
    for f in (log_file_name, index_file_name, time_index_file_name, txn_index_file_name):
        p = pdir / f(base)
        if p.exists():
            if p.name.endswith(".log"):
                out.records_dropped += _count_log_records(p) or 0
            p.unlink()
            out.deleted.append(str(p))


def _count_log_records(p: Path) -> int | None:
    with _Log(p) as lg:
        return _count_records(lg.buf, 0)


def _trim_active_indexes(pdir: Path, base: int, written: list[str]) -> None:
    for name, cls in ((index_file_name(base), OffsetIndex), (time_index_file_name(base), TimeIndex)):
        p = pdir / name
        if not p.exists():
            continue
        with cls.open(p, base) as idx:
            if idx.is_trimmed or not idx.padding_is_zero():
                continue
            data = idx.to_bytes(trim=True)
        atomic_write(p, data)
        written.append(str(p))


# ------------------------------------------------------------------------------------------ dry run


def _plan_partition(pdir: Path, cfg: LogConfig, recovery_point: int, log_start: int, clean: bool,
                    strict: bool, out: PartitionRecovery) -> PartitionRecovery:
    """What :func:`recover_partition` would touch, computed read-only (CRC scan of the segments that would be
    recovered; no producer-state replay)."""
    tmp = recover_swap_files(pdir, dry_run=True)
    out.deleted += [str(pdir / n) for n in tmp.deleted]
    out.renamed += [(str(pdir / a), str(pdir / b)) for a, b in tmp.renamed]
    bases = segment_bases(pdir)
    base_set = set(bases)
    for name in sorted(os.listdir(pdir)):
        if is_index_file(name):
            try:
                if offset_from_file_name(name) not in base_set:
                    out.deleted.append(str(pdir / name))
            except ValueError:
                pass
    to_check = []
    for b in bases:
        if not (pdir / time_index_file_name(b)).exists():
            out.written.append(str(pdir / time_index_file_name(b)))
        reason = None
        if not (pdir / index_file_name(b)).exists():
            reason = "missing .index"
        elif _txn_index_insane(pdir, b):
            reason = ".txnindex fails its sanity check"
        elif strict:
            reason = _index_insane(pdir, b)
        if reason:
            out.notes.append(f"{pdir.name}: segment {b}: {reason}; rebuilt")
            to_check.append(b)
    if not clean:
        unflushed = [b for b in bases if _in_unflushed(bases, b, recovery_point)]
        to_check = sorted(set(to_check) | set(unflushed))
    else:
        unflushed = []
    for b in to_check:
        log_path = pdir / log_file_name(b)
        with _Log(log_path) as lg:
            scratch = ProducerStateManager(None)
            r = _recover_bytes(lg, b, cfg.index_interval_bytes, scratch, LeaderEpochCache(None))
            size = lg.size
        out.recovered.append(SegmentRecovery(b, size, r.valid_bytes, r.batches, r.dropped_records, r.reason))
        out.written += [str(pdir / index_file_name(b)), str(pdir / time_index_file_name(b))]
        if r.valid_bytes < size:
            out.truncated.append((str(log_path), size, r.valid_bytes))
            out.records_dropped += r.dropped_records or 0
            if b in unflushed:
                for later in unflushed[unflushed.index(b) + 1:]:
                    for f in (log_file_name, index_file_name, time_index_file_name, txn_index_file_name):
                        if (pdir / f(later)).exists():
                            out.deleted.append(str(pdir / f(later)))
                    out.records_dropped += _count_log_records(pdir / log_file_name(later)) or 0
                break
    return out  # partition.metadata: plan_repair (_plan_partition_metadata)


# ------------------------------------------------------------------------------------------ for append


@dataclass
class AppendState:
    segment_bases: list[int]
    log_start_offset: int
    log_end_offset: int


def load_partition_for_append(pdir: Path, psm: ProducerStateManager, *, now_ms: int,
                              log_start_offset: int | None = None) -> AppendState:
    """State a writer needs from an existing (recovered or cleanly closed) partition: segments, log start and
    end offsets, and producer state rebuilt from snapshots (taking snapshots where the broker would)."""
    bases = segment_bases(pdir)
    if not bases:
        start = log_start_offset or 0
        return AppendState([], start, start)
    leo = read_next_offset(pdir, bases[-1])
    lso = max(log_start_offset or 0, bases[0])
    rebuild_producer_state(psm, pdir, bases, lso, leo, now_ms, False)
    psm.written.clear()
    return AppendState(bases, lso, leo)


# ------------------------------------------------------------------------------ cluster metadata


METADATA_DIR = "__cluster_metadata-0"


def _metadata_batches(path: Path, min_offset: int) -> Iterator:
    with _Log(path) as lg:
        try:
            for b in LogScanner(lg.buf, path=str(path)):
                if b.magic >= 2 and not b.is_control and b.last_offset >= min_offset:
                    yield b
                del b
        except CorruptRecordError:
            return


def cluster_metadata_state(data_dir: str | os.PathLike):
    """Topic ids and config overrides replayed from the KRaft metadata log in ``data_dir`` (the latest
    ``<end offset>-<epoch>.checkpoint`` snapshot, then the log records at or after its end offset), as a
    :class:`~kafkalog.storage.decoders.cluster_metadata.MetadataState`; None when the dir holds no metadata
    log. Undecodable records are skipped (``.errors`` counts them)."""
    from ..decoders.cluster_metadata import MetadataState

    mdir = Path(data_dir) / METADATA_DIR
    if not mdir.is_dir():
        return None
    state = MetadataState(strict=False)
    snaps = []
    for p in mdir.glob("*.checkpoint"):
        head = p.name.split("-", 1)[0]
        if head.isdigit():
            snaps.append((int(head), p))
    start = 0
    if snaps:
        start, snap = max(snaps)
        for b in _metadata_batches(snap, 0):
            state.replay_all(r.value for r in b.records())
            del b
    for base in segment_bases(mdir):
        for b in _metadata_batches(mdir / log_file_name(base), start):
            state.replay_all(r.value for r in b.records() if r.offset >= start)
            del b
    return state


def data_dir_config_resolver(data_dir: str | os.PathLike, broker=None, overrides: dict | None = None,
                             metadata=None):
    """``topic -> LogConfig`` for a data dir: Kafka defaults <- ``broker`` (server.properties) <- the topic's
    overrides in the KRaft metadata log of the dir (``metadata``, see :func:`cluster_metadata_state`) <-
    ``overrides`` (``--config``)."""
    from ..config import TOPIC_CONFIG_KEYS, BrokerConfig

    broker = broker or BrokerConfig()
    # names this version does not model (e.g. 4.1's internal.segment.bytes) were accepted by the broker: skip
    meta = {t: {k: v for k, v in c.items() if k in TOPIC_CONFIG_KEYS}
            for t, c in (metadata.topic_configs() if metadata is not None else {}).items()}
    cache: dict[str, LogConfig] = {}

    def config_for(topic: str) -> LogConfig:
        if topic not in cache:
            cfg = broker.log_config(topic)
            if meta.get(topic):
                cfg = cfg.with_overrides(meta[topic], f"{METADATA_DIR} ({topic})")
            if overrides:
                cfg = cfg.with_overrides(overrides, "--config")
            cache[topic] = cfg
        return cache[topic]

    return config_for


# ---------------------------------------------------------------------------------------- data dir


def _recover_partition_task(args: tuple) -> PartitionRecovery:
    pdir, kw = args
    return recover_partition(pdir, **kw)


def plan_repair(data_dir: str | os.PathLike, now_ms: int, *, config_for=None, broker=None,
                overrides: dict | None = None, strict_indexes: bool = True,
                topic_ids: dict[str, str] | None = None, workers: int = 1, progress=None):
    """What the broker's startup would do to ``data_dir`` (plus the repairs it cannot do itself), as a
    :class:`~kafkalog.storage.engine.plan.Plan`. Applying it recovers every partition (in ``workers``
    processes), then flushes: checkpoints rewritten with recovery point = log end offset and the clean-shutdown
    marker written, so the broker performs no recovery of its own.

    Topic configs: ``config_for(topic)`` if given, else :func:`data_dir_config_resolver` (``broker`` defaults,
    the dir's KRaft metadata log, ``overrides``). Topic ids for an unreadable ``partition.metadata``:
    ``topic_ids`` (e.g. ``--topic-id``), else the metadata log. ``progress(n)`` is called as partitions
    finish."""
    from ..files.checkpoints import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
    from ..files.clean_shutdown import CLEAN_SHUTDOWN_FILE
    from .flush import flush_data_dir, partition_dirs, read_checkpoint_or_empty
    from .plan import Action, Plan

    d = Path(data_dir)
    plan = Plan("repair", str(d))
    clean = (d / CLEAN_SHUTDOWN_FILE).exists()
    notes: list[str] = []
    rp_map = read_checkpoint_or_empty(d / RECOVERY_POINT_CHECKPOINT, notes)
    ls_map = read_checkpoint_or_empty(d / LOG_START_OFFSET_CHECKPOINT, notes)
    plan.notes += notes
    metadata = cluster_metadata_state(d)
    if config_for is None:
        config_for = data_dir_config_resolver(d, broker, overrides, metadata)
    known_ids = dict(metadata.topic_ids) if metadata is not None else {}
    known_ids.update(topic_ids or {})
    if not clean:
        plan.notes.append(f"{d}: no clean shutdown marker: segments above each recovery point are recovered")
    for name in sorted(os.listdir(d)):
        if name.endswith(("-delete", "-stray")) and (d / name).is_dir():
            what = ("queued for deletion: the broker loads it without recovery (LogLoader skips recoverLog for "
                    "-delete dirs) and deletes it" if name.endswith("-delete") else
                    "a stray replica: the broker loads it aside and never deletes it")
            plan.notes.append(f"{d / name}: {what}; left as is")
    tasks = []
    all_files: list[str] = []
    parts = partition_dirs(d)
    for pdir, topic, part in parts:
        cfg = config_for(topic) if config_for else LogConfig()
        kw = dict(config=cfg, recovery_point=rp_map.get((topic, part), 0),
                  log_start_offset=ls_map.get((topic, part), 0), had_clean_shutdown=clean, now_ms=now_ms,
                  strict_indexes=strict_indexes)
        preview = recover_partition(pdir, dry_run=True, **kw)
        plan.notes += preview.notes
        for path, old, new in preview.truncated:
            plan.add(Action("truncate", path, f"cut the .log from {old} to {new} bytes "
                            f"(first invalid byte at {new})", [path], old - new))
        for seg in preview.recovered:
            if seg.reason and seg.truncated_bytes:
                plan.notes.append(f"{pdir.name}: segment {seg.base_offset}: valid region ends at byte "
                                  f"{seg.valid_bytes}: {seg.reason}")
        for path in preview.deleted:
            plan.add(Action("delete", path, "leftover or invalidated file", [path], _size(path)))
        for a, b in preview.renamed:
            plan.add(Action("rename", a, f"complete an interrupted swap: -> {Path(b).name}", [a]))
        rebuilt = sorted(set(preview.written))
        if rebuilt:
            plan.add(Action("rebuild", str(pdir), "rebuild " + ", ".join(Path(p).name for p in rebuilt),
                            [p for p in rebuilt if Path(p).exists()]))
        if preview.records_dropped:
            plan.actions[-1].records = preview.records_dropped
        _plan_partition_metadata(plan, pdir, topic, known_ids, topic_ids or {})
        tasks.append((str(pdir), kw))
        all_files += [str(p) for p in pdir.iterdir() if p.is_file() and not p.name.endswith(".log")]
        all_files += [p for p, _, _ in preview.truncated]
        all_files += [p for p in preview.deleted if Path(p).suffix == ".log"]

    results: list[PartitionRecovery] = []

    def run_all() -> None:
        if workers > 1 and len(tasks) > 1:
            from concurrent.futures import ProcessPoolExecutor
            with ProcessPoolExecutor(workers) as ex:
                for r in ex.map(_recover_partition_task, tasks, chunksize=max(1, min(16, len(tasks) // 64))):
                    results.append(r)
                    if plan.progress is not None:
                        plan.progress(1)
        else:
            for t in tasks:
                results.append(_recover_partition_task(t))
                if plan.progress is not None:
                    plan.progress(1)
        # the recovered partitions were validated up to their log end offset: flush fsyncs without re-scanning
        verified = None if clean else {(t, p): r.log_end_offset
                                       for r, (_, t, p) in zip(results, parts, strict=True)}
        flush_data_dir(d, now_ms=now_ms, verified=verified)

    for cp in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, CLEAN_SHUTDOWN_FILE):
        if (d / cp).exists():
            all_files.append(str(d / cp))
    plan.add(Action("recover", str(d), f"recover {len(tasks)} partitions as the broker's startup does, then "
                    "write recovery-point/log-start-offset checkpoints and the clean shutdown marker",
                    all_files, apply=run_all))
    plan.results = results  # type: ignore[attr-defined]
    plan.partitions = len(tasks)  # type: ignore[attr-defined]
    plan.progress = progress  # type: ignore[attr-defined]
    return plan


def _plan_partition_metadata(plan, pdir: Path, topic: str, known_ids: dict[str, str],
                             given_ids: dict[str, str]) -> None:
    """An unreadable (e.g. zero-length) ``partition.metadata`` stops the broker at startup (Kafka 4.3/3.9:
    "Encountered fatal fault: Error starting LogManager"). Rewritten from ``--topic-id`` or the dir's KRaft metadata log; with no source
    it is left alone and the plan says what the broker would do."""
    from ..files.partition_metadata import write_partition_metadata
    from .plan import Action

    pm = pdir / PARTITION_METADATA_FILE
    if not pm.exists():
        return
    try:
        cur = read_partition_metadata(pm)
    except CorruptCheckpointError as e:
        tid = known_ids.get(topic)
        if tid:
            src = "--topic-id" if topic in given_ids else f"the topic id in {METADATA_DIR}"
            plan.add(Action("write", str(pm), f"unreadable ({e.reason}): rewritten with topic id {tid} from "
                            f"{src}; the broker would stop at startup (fatal: Error starting LogManager)",
                            [str(pm)],
                            apply=lambda pm=pm, tid=tid: write_partition_metadata(pm, tid)))
        else:
            plan.notes.append(
                f"{pm}: unreadable ({e.reason}) and no topic id is known (no {METADATA_DIR} in this dir, no "
                "--topic-id): left as is. The broker stops at startup on it (fatal: Error starting LogManager); with the "
                "file removed, a KRaft broker would treat the partition as a stray replica unless the "
                "metadata still lists it. Pass --topic-id TOPIC=ID to rewrite it.")
        return
    tid = given_ids.get(topic)
    if tid and tid != cur.topic_id:
        plan.notes.append(f"{pm}: holds topic id {cur.topic_id}, --topic-id says {tid}: left as is (the broker "
                          "would treat the replica as stray if the cluster metadata disagrees)")


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def rebuild_partition_indexes(partition_dir: str | os.PathLike, config: LogConfig | None = None, *,
                              dry_run: bool = False) -> list[tuple[int, list[str], str | None]]:
    """Rebuild every segment's indexes with the recovery rule without touching ``.log`` files. Returns
    ``(base offset, files written, problem)`` per segment; a segment with invalid bytes is not rebuilt."""
    cfg = config or LogConfig()
    pdir = Path(partition_dir)
    bases = segment_bases(pdir)
    out = []
    psm = ProducerStateManager(None)
    epochs = LeaderEpochCache(None)
    for base in bases:
        with _Log(pdir / log_file_name(base)) as lg:
            r = _recover_bytes(lg, base, cfg.index_interval_bytes, psm, epochs)
            size = lg.size
        if r.valid_bytes < size:
            out.append((base, [], f"invalid bytes from position {r.valid_bytes}: {r.reason}; run repair"))
            break
        written = [str(pdir / index_file_name(base)), str(pdir / time_index_file_name(base))]
        if not dry_run:
            r.offset_index.build().write(written[0])
            r.time_index.build().write(written[1])
            txn = pdir / txn_index_file_name(base)
            if _write_txn_index(txn, r.aborted, txn.exists()):
                written.append(str(txn))
        out.append((base, written, None))
    return out
