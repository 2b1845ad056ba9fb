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
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from ..atomic import atomic_write, fsync_dir
from ..config import LogConfig
from ..errors import CorruptCheckpointError, CorruptIndexError, CorruptRecordError, KafkaLogError
from ..files.names import (
    index_file_name,
    is_index_file,
    is_snapshot_file,
    log_file_name,
    offset_from_file_name,
    time_index_file_name,
    txn_index_file_name,
)
from ..files.names import segment_base_offsets as segment_bases
from ..files.offset_index import OffsetIndex, OffsetIndexBuilder
from ..files.partition_metadata import PARTITION_METADATA_FILE, read_partition_metadata
from ..files.time_index import NO_TIMESTAMP, TimeIndex, TimeIndexBuilder, TimestampOffset
from ..files.txn_index import ENTRY as TXN_ENTRY
from ..files.txn_index import TransactionIndex
from ..leader_epoch_cache import LeaderEpochCache
from ..producer_state import ProducerStateManager
from ..records import LogScanner
from ..records.batch import HEADER as BATCH_HEADER
from .swap import recover_swap_files

INT32_MAX = 2**31 - 1
UNKNOWN = TimestampOffset(NO_TIMESTAMP, -1)
_CRC = struct.Struct(">I")


class OffsetOverflowError(KafkaLogError):
    """A batch whose offsets do not fit its segment (``LogSegmentOffsetOverflowException``, KAFKA-6264):
    the broker splits the segment (:func:`split_overflowed_segment`) and loads the partition again."""

    def __init__(self, reason: str, path: str | None = None, position: int | None = None, *,
                 base_offset: int = 0):
        super().__init__(reason, path, position)
        self.base_offset = base_offset


@dataclass
class SegmentRecovery:
    base_offset: int
    log_size: int
    valid_bytes: int
    batches: int
    records_dropped: int | None  # records in the truncated tail (complete batches only), when countable
    reason: str | None = None  # why the valid region ended early
    next_offset: int = 0  # last offset + 1 of the last valid batch (the base offset when there is none)

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
    backed_up: list[str] = field(default_factory=list)  # originals kept in the backup (relative paths)

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


# ------------------------------------------------------------------------------------------ backups


class PartitionBackup:
    """The originals of one partition dir's files, kept under ``root`` (at their path relative to ``base``)
    while recovery changes the dir.

    :meth:`start` hard-links every file (instant, no space; recovery replaces or deletes files, it never
    rewrites a linked inode) and copies producer snapshots (Kafka writes them in place); :meth:`before_modify`
    turns the link of a file about to be changed in place (a ``.log`` being truncated) into a durable copy;
    :meth:`finish` drops what was left unchanged, so the backup holds (and pins on disk) only originals of
    files that were changed or deleted, and returns their relative paths."""

    def __init__(self, partition_dir: str | os.PathLike, root: str | os.PathLike, base: str | os.PathLike):
        self.pdir = Path(partition_dir)
        try:
            self.rel = self.pdir.resolve().relative_to(Path(base).resolve())
        except ValueError:
            self.rel = Path(self.pdir.name)
        self.dst = Path(root) / self.rel
        self.kept: dict[str, tuple[int, int, int]] = {}  # name -> (inode, size, mtime_ns) of the original

    def start(self) -> None:
        import shutil

        self.dst.mkdir(parents=True, exist_ok=True)
        for entry in os.scandir(self.pdir):
            if not entry.is_file(follow_symlinks=False):
                continue
            target = self.dst / entry.name
            if target.exists():
                continue  # the first original wins
            st = entry.stat(follow_symlinks=False)
            if is_snapshot_file(entry.name):
                shutil.copy2(entry.path, target)
            else:
                try:
                    os.link(entry.path, target)
                except OSError:
                    shutil.copy2(entry.path, target)
            self.kept[entry.name] = (st.st_ino, st.st_size, st.st_mtime_ns)
        fsync_dir(self.dst)

    def before_modify(self, path: Path) -> None:
        """``path`` is about to be changed in place: replace its hard link in the backup by a durable copy."""
        import shutil

        target = self.dst / path.name
        if path.name not in self.kept or not target.exists() or not os.path.samefile(target, path):
            return
        tmp = target.with_name(target.name + ".copy")
        shutil.copyfile(path, tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        fsync_dir(self.dst)

    def finish(self) -> list[str]:
        saved = []
        for name, (ino, size, mtime) in self.kept.items():
            try:
                st = os.stat(self.pdir / name)
                unchanged = (st.st_ino, st.st_size, st.st_mtime_ns) == (ino, size, mtime)
            except FileNotFoundError:
                unchanged = False
            if unchanged:
                (self.dst / name).unlink(missing_ok=True)
            else:
                saved.append(str(self.rel / name))
        if not saved:
            try:
                self.dst.rmdir()
            except OSError:
                pass
        return saved


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
    next_offset: int


def _recover_bytes(lg: _Log, base: int, interval: int, psm: ProducerStateManager,
                   epochs: LeaderEpochCache) -> _RecoveredIndexes:
    """``LogSegment.recover`` over the mapped ``.log``: one pass, per batch (header fields, the C CRC32C over
    the mapped bytes; only control batches have a record decoded, for producer state).

    Raises :class:`OffsetOverflowError` when a batch's offsets do not fit the segment (KAFKA-6264: the broker
    splits the segment and loads again, see :func:`split_overflowed_segment`)."""
    oi = OffsetIndexBuilder(base)
    ti = TimeIndexBuilder(base)
    aborted = []
    valid = 0
    last_index_entry = 0
    max_ts, max_ts_offset = NO_TIMESTAMP, -1
    count = 0
    reason = None
    next_offset = base
    latest_epoch = epochs.latest_epoch
    buf = lg.buf
    crc_at = _CRC.unpack_from
    unpack = BATCH_HEADER.unpack_from
    scanner = LogScanner(buf, path=str(lg.path))
    try:
        for b in scanner:
            size = b.size
            if b.magic >= 2:
                if size < 61:
                    b.ensure_valid()  # raises: smaller than the v2 header
                view = b.buf
                if crc_at(view, 17)[0] != crc32c(view[21:]):
                    b.ensure_valid()  # raises with both CRCs
                h = b._h = unpack(view, 0)
                last = h[0] + h[6]
                mts = h[8]
            else:
                b.ensure_valid()
                h = view = None
                last = b.last_offset
                mts = b.max_timestamp
            if not 0 <= last - base <= INT32_MAX:
                raise OffsetOverflowError(
                    f"offset {last} cannot be stored relative to the segment base offset {base}",
                    str(lg.path), b.position, base_offset=base)
            if mts > max_ts:
                max_ts, max_ts_offset = mts, last
            if valid - last_index_entry > interval:
                oi.append(last, valid)
                ti.maybe_append(max_ts, max_ts_offset)
                last_index_entry = valid
            if h is not None:
                ple = h[2]
                if ple >= 0 and (latest_epoch is None or ple > latest_epoch):
                    epochs.assign(ple, h[0])
                    latest_epoch = ple
                if h[9] != -1 or h[5] & 0x20:
                    a = psm.replay(b)
                    if a is not None:
                        aborted.append(a)
                else:
                    psm.map_end_offset = last + 1
            valid += size
            count += 1
            next_offset = last + 1
            del b, view
        else:
            reason = scanner.stop_reason
    except CorruptRecordError as e:
        reason = e.reason
    except CorruptIndexError as e:  # InvalidOffsetException: LogLoader.recoverLog empties the segment
        reason = f"{e.reason}: the segment is emptied (as the broker does)"
        oi, ti, aborted, valid, count, next_offset = OffsetIndexBuilder(base), TimeIndexBuilder(base), [], 0, 0, base
        max_ts, max_ts_offset = NO_TIMESTAMP, -1
    dropped = _count_records(buf, valid) if valid < lg.size else 0
    ti.maybe_append(max_ts, max_ts_offset, skip_full_check=True)
    return _RecoveredIndexes(oi, ti, aborted, valid, count, dropped, reason, next_offset)


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


# ------------------------------------------------------------------------------- offset overflow split


SPLIT_CHUNK_BYTES = 1024 * 1024  # appendChunkFromFile's read buffer


@dataclass
class SplitSegment:
    """One segment :func:`split_overflowed_segment` creates: ``buf[start:end]`` of the original ``.log``,
    appended in chunks starting at ``appends`` (positions relative to ``start``)."""

    base_offset: int
    start: int
    end: int
    appends: list[int]


def plan_overflow_split(buf, base_offset: int) -> list[SplitSegment]:
    """How ``LocalLog.splitOverflowedSegment`` cuts a ``.log`` whose offsets overflow ``base_offset``: a new
    segment at each batch that no longer fits the current one (named by that batch's base offset), filled by
    ``LogSegment.appendFromFile`` in chunks of up to 1 MiB (a larger single batch is its own chunk, and the
    buffer then stays that large). Batches are not validated (the broker copies bytes; recovery follows)."""
    size = len(buf)
    out: list[SplitSegment] = []
    pos = 0
    cap = SPLIT_CHUNK_BYTES
    while pos < size:
        scanner = LogScanner(buf, pos)
        first = next(iter(scanner), None)
        if first is None:
            raise KafkaLogError(f"no complete batch at byte {pos} ({scanner.stop_reason or 'end'}): the broker "
                                "cannot split this segment either (IllegalStateException); repair truncates "
                                "it only once it is split", None, pos)
        new_base = first.base_offset
        del first
        seg = SplitSegment(new_base, pos, pos, [])
        while True:  # appendFromFile: one appendChunkFromFile per iteration
            n = 0
            for b in LogScanner(buf, pos):
                fits = 0 <= b.last_offset - new_base <= INT32_MAX
                if fits and (n == 0 or n + b.size < cap):
                    n += b.size
                    del b
                else:
                    del b
                    break
            if n == 0:
                break
            cap = max(cap, n)
            seg.appends.append(pos - seg.start)
            pos += n
        if pos == seg.start:
            raise KafkaLogError(f"failed to append records from position {pos} into a segment at {new_base}",
                                None, pos)
        seg.end = pos
        out.append(seg)
    return out


def split_overflowed_segment(partition_dir: str | os.PathLike, base_offset: int, *,
                             index_interval_bytes: int = 4096, crash_hook=None) -> list[int]:
    """``LocalLog.splitOverflowedSegment`` (KAFKA-6264, spec 40-log-engine §5.4): copy the batches of segment
    ``base_offset`` into new segments that each fit the int32 relative-offset range, written as ``.cleaned``
    files (``.log`` bytes unchanged, indexes by the append rule per chunk, closed and trimmed, fsynced, the
    original's mtime), then swapped in crash-safely (``engine.swap.replace_segments``). Returns the new base
    offsets."""
    from ..files.rebuild import rebuild_indexes_append
    from .swap import cleaned_path, fsync_file, replace_segments

    pdir = Path(partition_dir)
    log_path = pdir / log_file_name(base_offset)
    mtime = os.stat(log_path).st_mtime_ns
    with _Log(log_path) as lg:
        parts = plan_overflow_split(lg.buf, base_offset)
        if sum(p.end - p.start for p in parts) != lg.size:
            raise KafkaLogError("inconsistent segment sizes after split", str(log_path))
        for p in parts:
            data = lg.buf[p.start:p.end]
            idx = rebuild_indexes_append(data, p.base_offset, appends=p.appends,
                                         index_interval_bytes=index_interval_bytes, close=True)
            del data
            targets = []
            for suffix, payload in ((".log", None), (".index", idx.offset_index.to_bytes(trim=True)),
                                    (".timeindex", idx.time_index.to_bytes(trim=True))):
                dst = cleaned_path(pdir, p.base_offset, suffix)
                with open(dst, "wb") as f:
                    f.write(lg.buf[p.start:p.end] if payload is None else payload)
                targets.append(dst)
            for dst in targets:
                os.utime(dst, ns=(mtime, mtime))
                fsync_file(dst)
    fsync_dir(pdir)
    new = [p.base_offset for p in parts]
    replace_segments(pdir, new, [base_offset], crash_hook=crash_hook)
    return new


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
                      producer_id_expiration_ms: int = 86400000,
                      backup: tuple[str, str] | None = None) -> PartitionRecovery:
    """Load and recover one partition directory as ``LogLoader.load`` does, then close it cleanly.

    ``strict_indexes`` also rebuilds indexes that fail Kafka's sanity checks (the broker would keep them and
    serve wrong reads); set False to do exactly what the broker does. ``backup=(root, data dir)``: the
    original of every file changed or deleted is kept under ``root`` (see :class:`PartitionBackup`).
    """
    cfg = config or LogConfig()
    pdir = Path(partition_dir)
    out = PartitionRecovery(str(pdir))
    if dry_run:
        return _plan_partition(pdir, cfg, recovery_point, log_start_offset, had_clean_shutdown, strict_indexes, out)
    bk = PartitionBackup(pdir, *backup) if backup is not None else None
    try:
        _recover(pdir, cfg, recovery_point, log_start_offset, had_clean_shutdown, now_ms, strict_indexes,
                 producer_id_expiration_ms, out, bk)
    finally:
        if bk is not None:
            out.backed_up = bk.finish()
    return out


def _recover(pdir: Path, cfg: LogConfig, recovery_point: int, log_start_offset: int, had_clean_shutdown: bool,
             now_ms: int, strict_indexes: bool, producer_id_expiration_ms: int, out: PartitionRecovery,
             bk: PartitionBackup | None) -> None:
    if bk is not None:
        bk.start()

    # 1-2: temp files
    tmp = recover_swap_files(pdir)
    out.deleted += [str(pdir / n) for n in tmp.deleted]
    out.renamed += [(str(pdir / a), str(pdir / b)) for a, b in tmp.renamed]
    next_offsets: dict[int, int] = {}  # base -> next offset, for segments recovered last
    epochs_box: list[LeaderEpochCache] = []
    for _attempt in range(10_000):  # LogLoader.retryOnOffsetOverflow
        try:
            _load_and_recover(pdir, cfg, recovery_point, log_start_offset, had_clean_shutdown, now_ms,
                              strict_indexes, producer_id_expiration_ms, out, bk, epochs_box, next_offsets)
            break
        except OffsetOverflowError as e:
            new = split_overflowed_segment(pdir, e.base_offset, index_interval_bytes=cfg.index_interval_bytes)
            out.notes.append(f"{pdir.name}: segment {e.base_offset}: {e.reason} (KAFKA-6264): split into "
                             f"segments {', '.join(map(str, new))} as the broker does, then loaded again")
            out.deleted.append(str(pdir / log_file_name(e.base_offset)))
            out.written += [str(pdir / log_file_name(b)) for b in new if b != e.base_offset]
            next_offsets.clear()
    epochs = epochs_box[0]
    bases = segment_bases(pdir)
    # 5-6
    if not bases:
        leo = log_start_offset
    elif bases[-1] in next_offsets:
        leo = next_offsets[bases[-1]]  # the last segment was just recovered: no second scan
    else:
        leo = read_next_offset(pdir, bases[-1])
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
    if (epochs.dirty or not epochs.path.exists()) and _differs(epochs.path, epochs.to_bytes()):
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


def _load_and_recover(pdir: Path, cfg: LogConfig, recovery_point: int, log_start_offset: int,
                      had_clean_shutdown: bool, now_ms: int, strict_indexes: bool, producer_id_expiration_ms: int,
                      out: PartitionRecovery, bk: PartitionBackup | None, epochs_box: list,
                      next_offsets: dict[int, int]) -> None:
    """Steps 3-4 of ``LogLoader.load``; raises :class:`OffsetOverflowError` for a segment to split."""
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
    names = set(os.listdir(pdir))
    for b in bases:
        if time_index_file_name(b) not in names:
            (pdir / time_index_file_name(b)).touch()
            out.written.append(str(pdir / time_index_file_name(b)))
        if not had_clean_shutdown and _in_unflushed(bases, b, recovery_point):
            continue  # recovered below whatever its indexes hold: they are not read
        if index_file_name(b) not in names:
            must_recover.add(b)
        elif _txn_index_insane(pdir, b):
            must_recover.add(b)
        elif strict_indexes:
            why = _index_insane(pdir, b)
            if why is not None:
                out.notes.append(f"{pdir.name}: {why}; rebuilt")
                must_recover.add(b)
    if not epochs_box:
        epochs_box.append(_load_epochs(pdir, out))
    epochs = epochs_box[0]
    for b in sorted(must_recover):
        if had_clean_shutdown or b < recovery_point and not _in_unflushed(bases, b, recovery_point):
            _recover_one(pdir, bases, b, cfg, log_start_offset, now_ms, epochs, out, producer_id_expiration_ms, bk)
    # 4: recoverLog
    if not had_clean_shutdown:
        unflushed = [b for b in bases if _in_unflushed(bases, b, recovery_point)]
        for i, b in enumerate(unflushed):
            seg = _recover_one(pdir, bases, b, cfg, log_start_offset, now_ms, epochs, out,
                               producer_id_expiration_ms, bk)
            next_offsets[b] = seg.next_offset
            if seg.truncated_bytes > 0:
                for later in unflushed[i + 1:]:
                    _delete_segment(pdir, later, out)
                break


def _differs(path: Path, data: bytes) -> bool:
    """Whether ``path`` does not already hold exactly ``data`` (a rewrite would change nothing)."""
    try:
        if os.path.getsize(path) != len(data):
            return True
        with open(path, "rb") as f:
            return f.read() != data
    except FileNotFoundError:
        return True


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
                 epochs: LeaderEpochCache, out: PartitionRecovery, expiration_ms: int,
                 bk: PartitionBackup | None = None) -> SegmentRecovery:
    """``LogLoader.recoverSegment``: scratch producer state rebuilt up to the base, recover, snapshot."""
    psm = ProducerStateManager(pdir, producer_id_expiration_ms=expiration_ms)
    before = dict(psm.snapshots)
    rebuild_producer_state(psm, pdir, bases, log_start, base, now_ms, False)
    log_path = pdir / log_file_name(base)
    with _Log(log_path) as lg:
        r = _recover_bytes(lg, base, cfg.index_interval_bytes, psm, epochs)
        size = lg.size
    if r.valid_bytes < size:
        if bk is not None:
            bk.before_modify(log_path)
        with open(log_path, "r+b") as f:
            f.truncate(r.valid_bytes)
            os.fsync(f.fileno())
        out.truncated.append((str(log_path), size, r.valid_bytes))
        out.records_dropped += r.dropped_records or 0
        out.notes.append(f"{pdir.name}: segment {base}: valid region ends at byte {r.valid_bytes}: {r.reason}")
    r.offset_index.build().write(pdir / index_file_name(base))
    r.time_index.build().write(pdir / time_index_file_name(base))
    out.written += [str(pdir / index_file_name(base)), str(pdir / time_index_file_name(base))]
    txn_path = pdir / txn_index_file_name(base)
    if _write_txn_index(txn_path, [a for a in r.aborted], txn_path.exists()):
        out.written.append(str(txn_path))
    psm.take_snapshot()
    out.deleted += [str(p) for off, p in before.items() if off not in psm.snapshots]
    out.written += [str(p) for p in psm.written]
    seg = SegmentRecovery(base, size, r.valid_bytes, r.batches, r.dropped_records, r.reason, r.next_offset)
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
            try:
                r = _recover_bytes(lg, b, cfg.index_interval_bytes, scratch, LeaderEpochCache(None))
            except OffsetOverflowError as e:
                try:
                    parts = plan_overflow_split(lg.buf, b)
                except KafkaLogError as e2:
                    out.notes.append(f"{pdir.name}: segment {b}: {e.reason}; it cannot be split: {e2.reason}")
                    break
                out.notes.append(f"{pdir.name}: segment {b}: {e.reason} (KAFKA-6264): split into segments "
                                 f"{', '.join(str(p.base_offset) for p in parts)}, then recovered")
                out.deleted.append(str(log_path))
                out.written += [str(pdir / log_file_name(p.base_offset)) for p in parts]
                continue
            size = lg.size
        out.recovered.append(SegmentRecovery(b, size, r.valid_bytes, r.batches, r.dropped_records, r.reason))
        out.written += [str(pdir / index_file_name(b)), str(pdir / time_index_file_name(b))]
        if r.valid_bytes < size:
            out.truncated.append((str(log_path), size, r.valid_bytes))
            out.records_dropped += r.dropped_records or 0
            out.notes.append(f"{pdir.name}: segment {b}: valid region ends at byte {r.valid_bytes}: {r.reason}")
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


def _recover_partition_task(args: tuple) -> tuple[PartitionRecovery, object]:
    """Recover one partition, then flush it (fsync what lies above its old recovery point, snapshot at the
    log end offset) without scanning it again: the data dir's checkpoints are written by the caller."""
    from .flush import flush_partition

    pdir, kw, flush_kw = args
    rec = recover_partition(pdir, **kw)
    if flush_kw is None:
        return rec, None
    verified = None if kw.get("had_clean_shutdown") else rec.log_end_offset
    fl = flush_partition(Path(pdir), now_ms=kw["now_ms"], verified_to=verified, synced=set(rec.written),
                         producer_id_expiration_ms=kw.get("producer_id_expiration_ms", 86400000), **flush_kw)
    return rec, fl


IO_THREADS = 16  # partitions handled at once per process: their fsyncs are committed together (jbd2 group commit)


def run_partition_tasks(fn, tasks: list, *, workers: int = 1, threads: int = IO_THREADS, progress=None) -> list:
    """``[fn(t) for t in tasks]`` across ``workers`` processes, each running ``threads`` threads.

    Partition work is dominated by waiting for fsync, which a thread releases the GIL for: many partitions in
    flight let the filesystem commit their fsyncs together. Tasks travel to the processes in chunks (paths, not
    data), so the inter-process cost is per chunk. ``progress(n)`` is called as tasks finish."""
    if not tasks:
        return []
    workers = max(1, min(workers, len(tasks)))
    if workers == 1:
        return _thread_map(fn, tasks, threads, progress)
    from concurrent.futures import ProcessPoolExecutor

    nchunks = min(len(tasks), workers * 8)
    chunks = [tasks[i::nchunks] for i in range(nchunks)]  # interleaved: big and small partitions mixed
    out: list = [None] * len(tasks)
    with ProcessPoolExecutor(workers) as ex:
        futures = {ex.submit(_thread_map, fn, c, threads, None): i for i, c in enumerate(chunks)}
        from concurrent.futures import as_completed

        for fut in as_completed(futures):
            i = futures[fut]
            for j, r in enumerate(fut.result()):
                out[i + j * nchunks] = r
            if progress is not None:
                progress(len(chunks[i]))
    return out


def _thread_map(fn, tasks: list, threads: int, progress) -> list:
    if threads <= 1 or len(tasks) == 1:
        out = []
        for t in tasks:
            out.append(fn(t))
            if progress is not None:
                progress(1)
        return out
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(threads, len(tasks))) as ex:
        out = []
        for r in ex.map(fn, tasks):
            out.append(r)
            if progress is not None:
                progress(1)
        return out


def plan_repair(data_dir: str | os.PathLike, now_ms: int, *, config_for=None, broker=None,
                overrides: dict | None = None, strict_indexes: bool = True,
                topic_ids: dict[str, str] | None = None, workers: int = 1, progress=None,
                preview: bool = True):
    """What the broker's startup would do to ``data_dir`` (plus the repairs it cannot do itself), as a
    :class:`~kafkalog.storage.engine.plan.Plan`. Applying it recovers every partition (in ``workers``
    processes), then flushes: checkpoints rewritten with recovery point = log end offset and the clean-shutdown
    marker written, so the broker performs no recovery of its own.

    Topic configs: ``config_for(topic)`` if given, else :func:`data_dir_config_resolver` (``broker`` defaults,
    the dir's KRaft metadata log, ``overrides``). Topic ids for an unreadable ``partition.metadata``:
    ``topic_ids`` (e.g. ``--topic-id``), else the metadata log. ``progress(n)`` is called as partitions
    finish.

    ``preview=True`` validates every segment that would be recovered (in ``workers`` processes) so the plan
    lists every truncation, deletion and rebuilt file (``--dry-run``). ``preview=False`` gives a plan without
    that scan: applying it scans each segment once, and keeps the original of each file it changes or deletes
    in ``plan.backup`` (a :class:`~kafkalog.storage.engine.plan.Backup`, set before applying) at the moment it
    changes it; what was done is in ``plan.results`` afterwards (:func:`partition_actions` renders it)."""
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
    parts = partition_dirs(d)
    for pdir, topic, part in parts:
        cfg = config_for(topic) if config_for else LogConfig()
        kw = dict(config=cfg, recovery_point=rp_map.get((topic, part), 0),
                  log_start_offset=ls_map.get((topic, part), 0), had_clean_shutdown=clean, now_ms=now_ms,
                  strict_indexes=strict_indexes)
        tasks.append((str(pdir), kw, dict(topic=topic, partition=part, recovery_point=kw["recovery_point"],
                                          log_start_checkpoint=kw["log_start_offset"])))
    if preview:
        previews = run_partition_tasks(_preview_task, tasks, workers=workers)
        for pv in previews:
            plan.notes += pv.notes
            for a in partition_actions(pv):
                plan.add(a)
    for pdir, topic, _ in parts:
        _plan_partition_metadata(plan, pdir, topic, known_ids, topic_ids or {})

    results: list[PartitionRecovery] = []

    def run_all() -> None:
        backup = getattr(plan, "backup", None)
        todo = tasks if backup is None else [(p, {**kw, "backup": (str(backup.root), str(backup.base))}, f)
                                            for p, kw, f in tasks]
        done = run_partition_tasks(_recover_partition_task, todo, workers=workers, progress=plan.progress)
        results.extend(r for r, _ in done)
        if backup is not None:
            backup.saved += [f for r in results for f in r.backed_up]
        # each partition was flushed right after its recovery (validated up to its log end offset): only the
        # data dir's checkpoints and the clean shutdown marker remain
        flush_data_dir(d, now_ms=now_ms, flushed=[f for _, f in done])

    dir_files = [str(d / cp) for cp in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, CLEAN_SHUTDOWN_FILE)
                 if (d / cp).exists()]
    plan.add(Action("recover", str(d), f"recover {len(tasks)} partitions as the broker's startup does, then "
                    "write recovery-point/log-start-offset checkpoints and the clean shutdown marker",
                    dir_files, apply=run_all))
    plan.results = results  # type: ignore[attr-defined]
    plan.partitions = len(tasks)  # type: ignore[attr-defined]
    plan.progress = progress  # type: ignore[attr-defined]
    plan.backup = None  # type: ignore[attr-defined]
    return plan


def _preview_task(args: tuple) -> PartitionRecovery:
    pdir, kw, _ = args
    return recover_partition(pdir, dry_run=True, **kw)


def partition_actions(r: PartitionRecovery) -> list:
    """The actions recovery of one partition takes (or took): truncations, deletions, renames, rebuilt files."""
    from .plan import Action

    pdir = Path(r.dir)
    out = []
    for path, old, new in r.truncated:
        out.append(Action("truncate", path, f"cut the .log from {old} to {new} bytes (first invalid byte at {new})",
                          [path], old - new))
    for path in r.deleted:
        out.append(Action("delete", path, "leftover or invalidated file", [path], _size(path)))
    for a, b in r.renamed:
        out.append(Action("rename", a, f"complete an interrupted swap: -> {Path(b).name}", [a]))
    rebuilt = sorted(set(r.written))
    if rebuilt:
        out.append(Action("rebuild", str(pdir), "rebuild " + ", ".join(Path(p).name for p in rebuilt),
                          [p for p in rebuilt if Path(p).exists()]))
    if r.records_dropped and out:
        out[-1].records = r.records_dropped
    return out


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


def _reindex_task(task: tuple[str, LogConfig, bool]) -> tuple[str, list[tuple[int, list[str], str | None]]]:
    pdir, cfg, dry_run = task
    try:
        return pdir, rebuild_partition_indexes(pdir, cfg, dry_run=dry_run)
    except KafkaLogError as e:
        return pdir, [(-1, [], str(e))]
    except OSError as e:
        return pdir, [(-1, [], f"{e.filename or pdir}: {e.strerror or e}")]


def reindex_partitions(partition_dirs: list[str | os.PathLike], config: LogConfig | None = None, *,
                       dry_run: bool = False, workers: int = 1, progress=None
                       ) -> list[tuple[str, list[tuple[int, list[str], str | None]]]]:
    """``kafkalog reindex``: :func:`rebuild_partition_indexes` of each partition dir, ``workers`` partitions at
    once, under the ``.lock`` of every data dir involved (taken before anything is written, released after).
    Returns ``(partition dir, per-segment results)`` in the order given; a partition that cannot be opened
    gets one result with base offset -1 and the problem."""
    import contextlib

    from .plan import data_dir_lock

    cfg = config or LogConfig()
    dirs = [str(p) for p in partition_dirs]
    with contextlib.ExitStack() as stack:
        if not dry_run:
            for d in dict.fromkeys(os.path.dirname(os.path.abspath(p)) for p in dirs):
                stack.enter_context(data_dir_lock(d))
        return run_partition_tasks(_reindex_task, [(p, cfg, dry_run) for p in dirs], workers=workers,
                                   threads=1, progress=progress)


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
            try:
                r = _recover_bytes(lg, base, cfg.index_interval_bytes, psm, epochs)
            except OffsetOverflowError as e:
                out.append((base, [], f"{e.reason}: the segment must be split (KAFKA-6264); run repair"))
                break
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
