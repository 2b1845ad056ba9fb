"""Offline flush of a data dir (``UnifiedLog.flush`` + ``LogManager.shutdown``, 40-log-engine §4,
30-checkpoints §2/§6).

For every partition: the bytes above its checkpointed recovery point are verified batch by batch (CRC and
framing) before anything is declared flushed; segments and indexes are fsynced, the active segment's
indexes trimmed and a producer snapshot taken at the log end offset, as at a clean broker close. Then the
data dir's ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` are rewritten and, when
every partition verified, ``.kafka_cleanshutdown`` is written, so a broker starting on the dir performs no
recovery. A partition with invalid bytes keeps its old recovery point (never advanced past unverified data)
and the marker is not written: run ``repair`` first.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import fsync_dir
from ..config import LogConfig
from ..errors import CorruptCheckpointError, CorruptRecordError
from ..files.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpoint,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from ..files.clean_shutdown import (
    CLEAN_SHUTDOWN_FILE,
    CleanShutdownMarker,
    read_clean_shutdown,
    write_clean_shutdown,
)
from ..files.names import index_file_name, log_file_name, time_index_file_name, txn_index_file_name
from ..logdir import list_partition_dirs
from ..producer_state import ProducerStateManager
from ..records import LogScanner
from .recovery import _Log, _trim_active_indexes, rebuild_producer_state, segment_bases

METADATA_TOPIC = "__cluster_metadata"


@dataclass
class PartitionFlush:
    topic: str
    partition: int
    dir: str
    recovery_point: int
    log_end_offset: int
    log_start_offset: int
    first_base: int
    verified: bool
    problem: str | None = None
    written: list[str] = field(default_factory=list)


@dataclass
class DataDirFlush:
    data_dir: str
    partitions: list[PartitionFlush] = field(default_factory=list)
    clean_shutdown_written: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(p.verified for p in self.partitions)


def partition_dirs(data_dir: str | os.PathLike) -> list[tuple[Path, str, int]]:
    """Live partition dirs of a data dir (``-delete``/``-stray`` dirs and the KRaft metadata log are not
    listed in the dir's checkpoints). ``-future`` logs are included, as in ``LogManager``."""
    return [(p, tp.topic, tp.partition)
            for p, tp in list_partition_dirs(data_dir, kinds=("live", "future"), include_metadata=False)]


def read_checkpoint_or_empty(path: Path, notes: list[str] | None = None) -> dict[tuple[str, int], int]:
    """As ``LogManager.loadLogs``: a missing or malformed checkpoint reads as empty."""
    if not path.exists():
        return {}
    try:
        return read_offset_checkpoint(path).to_dict()
    except CorruptCheckpointError as e:
        if notes is not None:
            notes.append(f"{path}: {e.reason} (the broker reads it as empty and recovers every segment)")
        return {}


def verify_from(pdir: Path, bases: list[int], recovery_point: int) -> tuple[int, str | None]:
    """CRC/framing check of every batch at or above the segment holding ``recovery_point``. Returns
    (log end offset, problem or None)."""
    floor = max((b for b in bases if b <= recovery_point), default=bases[0] if bases else 0)
    leo = bases[-1] if bases else 0
    for b in bases:
        if b < floor:
            continue
        path = pdir / log_file_name(b)
        with _Log(path) as lg:
            scanner = LogScanner(lg.buf, path=str(path))
            nxt = b
            try:
                for batch in scanner:
                    batch.ensure_valid()
                    nxt = batch.next_offset
                    del batch
            except CorruptRecordError as e:
                batch = scanner = None  # noqa: F841 - drop views of the mapping before it is closed
                return nxt, str(e)
            if scanner.stop_reason is not None:
                return nxt, f"{path}: {scanner.stop_reason} at byte {scanner.stop_position}"
        leo = nxt
    return leo, None


def _fsync(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def flush_partition(pdir: Path, topic: str, partition: int, recovery_point: int, log_start_checkpoint: int,
                    *, now_ms: int, producer_id_expiration_ms: int = 86400000,
                    dry_run: bool = False, verified_to: int | None = None,
                    synced: set[str] | None = None) -> PartitionFlush:
    """Flush one partition (see the module doc).

    ``verified_to``: the log end offset up to which recovery has just validated the partition: nothing is
    scanned again. ``synced``: files already written durably (fsynced) by the caller; not fsynced twice."""
    bases = segment_bases(pdir)
    if not bases:
        return PartitionFlush(topic, partition, str(pdir), recovery_point, recovery_point, log_start_checkpoint,
                              log_start_checkpoint, False, "no segments: run repair")
    if verified_to is not None:
        leo, problem = verified_to, None
    else:
        leo, problem = verify_from(pdir, bases, recovery_point)
    lso = max(log_start_checkpoint, bases[0])
    if problem is not None:
        return PartitionFlush(topic, partition, str(pdir), min(recovery_point, leo), leo, lso, bases[0], False,
                              problem)
    res = PartitionFlush(topic, partition, str(pdir), leo, leo, lso, bases[0], True)
    if dry_run:
        return res
    done = synced or set()
    floor = max((b for b in bases if b <= recovery_point), default=bases[0])
    for b in bases:
        if b >= floor:
            for f in (log_file_name, index_file_name, time_index_file_name, txn_index_file_name):
                p = pdir / f(b)
                if str(p) not in done:
                    _fsync(p)
    _trim_active_indexes(pdir, bases[-1], res.written)
    psm = ProducerStateManager(pdir, producer_id_expiration_ms=producer_id_expiration_ms)
    if leo not in psm.snapshots:
        rebuild_producer_state(psm, pdir, bases, lso, leo, now_ms, False)
        res.written += [str(p) for p in psm.written]
    fsync_dir(pdir)
    return res


def flush_data_dir(data_dir: str | os.PathLike, *, now_ms: int, dry_run: bool = False,
                   write_clean_shutdown_marker: bool = True, broker_epoch: int | None = None,
                   config_for: Callable[[str], LogConfig] | None = None,
                   progress: Callable[[int], None] | None = None,
                   verified: dict[tuple[str, int], int] | None = None,
                   flushed: list[PartitionFlush] | None = None, workers: int = 1) -> DataDirFlush:
    """Flush every partition of one data dir and rewrite its checkpoints (see the module doc).

    ``verified``: per partition, the log end offset recovery has just validated (not scanned again).
    ``flushed``: the partitions were already flushed by the caller (e.g. repair, right after recovering
    each); only the checkpoints and the marker are written. Partitions are flushed in ``workers`` processes,
    several at once in each (their fsyncs are committed together); ``progress(n)`` is called as ``n`` more
    partitions are done.

    The caller holds the dir's lock (``engine.plan.data_dir_lock``)."""
    from .recovery import run_partition_tasks

    d = Path(data_dir)
    out = DataDirFlush(str(d))
    rp_map = read_checkpoint_or_empty(d / RECOVERY_POINT_CHECKPOINT, out.notes)
    ls_map = read_checkpoint_or_empty(d / LOG_START_OFFSET_CHECKPOINT, out.notes)
    if flushed is not None:
        out.partitions = list(flushed)
    else:
        tasks = []
        for pdir, topic, part in partition_dirs(d):
            key = (topic, part)
            tasks.append((pdir, topic, part, rp_map.get(key, 0), ls_map.get(key, 0),
                          dict(now_ms=now_ms, dry_run=dry_run, verified_to=(verified or {}).get(key))))
        out.partitions = run_partition_tasks(_flush_task, tasks, workers=workers, progress=progress)
    if dry_run:
        return out
    rp_new = {(p.topic, p.partition): p.recovery_point for p in out.partitions}
    ls_new = {(p.topic, p.partition): p.log_start_offset for p in out.partitions
              if p.log_start_offset > p.first_base}
    write_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT, OffsetCheckpoint.from_mapping(rp_new))
    write_offset_checkpoint(d / LOG_START_OFFSET_CHECKPOINT, OffsetCheckpoint.from_mapping(ls_new))
    marker_path = d / CLEAN_SHUTDOWN_FILE
    if write_clean_shutdown_marker and out.ok:
        old = read_clean_shutdown(marker_path)
        epoch = broker_epoch if broker_epoch is not None else (
            old.broker_epoch if old is not None and old.broker_epoch is not None else -1)
        write_clean_shutdown(marker_path, CleanShutdownMarker.with_epoch(epoch))
        out.clean_shutdown_written = True
    elif not out.ok and marker_path.exists():
        # a marker would make the broker skip recovery of data that did not verify
        marker_path.unlink()
        fsync_dir(d)
        out.notes.append(f"{marker_path}: removed, because some partitions did not verify")
    return out


def _flush_task(args: tuple) -> PartitionFlush:
    pdir, topic, part, rp, ls, kw = args
    return flush_partition(pdir, topic, part, rp, ls, **kw)
