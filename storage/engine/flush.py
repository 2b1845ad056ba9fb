"""``kafkalog flush``: what a clean broker shutdown does, offline, as a plan (``UnifiedLog.flush`` +
``LogManager.shutdown``).

For every partition the bytes above its checkpointed recovery point are verified batch by batch (CRC and
framing) before anything is declared flushed; the files of those segments are fsynced, the active segment's
indexes trimmed and a producer snapshot taken at the log end offset, as at a clean broker close. Then the data
dir's ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` are rewritten and, when every
partition verified, ``.kafka_cleanshutdown`` is written, so a broker starting on the dir performs no recovery.
A partition with invalid bytes keeps its old recovery point (never advanced past unverified data) and the marker
is not written (an old one is removed): run ``repair`` first.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.plan import PartitionPlan, Plan, Runner, default_runner
from kafkalog.storage.engine.targets import Target, checkpoint_bytes, plan_partitions, whole_data_dirs
from kafkalog.storage.errors import CorruptRecordError, KafkaLogError
from kafkalog.storage.files.checkpoints import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
from kafkalog.storage.files.clean_shutdown import (
    CLEAN_SHUTDOWN_FILE,
    CleanShutdownMarker,
    read_clean_shutdown,
)
from kafkalog.storage.files.findings import note
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.io.ops import Delete, Sync
from kafkalog.storage.log.partition import PartitionLog, log_start_checkpoint
from kafkalog.storage.log.producer_state import ProducerStateManager, rebuild_producer_state
from kafkalog.storage.log.segment import trim_indexes


def verify_from(log: PartitionLog, recovery_point: int) -> tuple[int, str | None]:
    """CRC/framing check of every batch of the segments from the one holding ``recovery_point``. Returns
    ``(log end offset, problem or None)``."""
    segs = log.segments_in_unflushed_range(recovery_point)
    leo = log.segments[0].base_offset if log.segments else 0
    for s in segs:
        scanner = s.scanner()
        nxt = s.base_offset
        try:
            for batch in scanner:
                batch.ensure_valid()
                nxt = batch.next_offset
                del batch
        except CorruptRecordError as e:
            return nxt, str(e)
        if scanner.stop_reason is not None:
            return nxt, f"{s.path}: {scanner.stop_reason} at byte {scanner.stop_position}"
        leo = nxt
    return leo, None


def _plan_partition(task: tuple) -> PartitionPlan:
    data_dir, pdir, topic, part, rp, lso_ckpt, now, expiration, clean, tiered = task
    pp = PartitionPlan(data_dir, pdir, topic, part)
    with pp.planning(), DirView(pdir) as view:
        log = PartitionLog(view, log_start_offset_checkpoint=lso_ckpt, remote_log_enabled=tiered)
        if not log.segments:
            pp.notes.append(note(pdir, "flush.noSegments"))
            pp.facts = {"verified": False, "recoveryPoint": rp, "logEndOffset": rp, "logStartOffset": lso_ckpt,
                        "firstBaseOffset": lso_ckpt, "problem": "no segments: run repair"}
            return pp
        leo, problem = verify_from(log, rp)
        lso = log.log_start_offset
        pp.facts = {"verified": problem is None, "recoveryPoint": leo if problem is None else min(rp, leo),
                    "logEndOffset": leo, "logStartOffset": lso, "firstBaseOffset": log.segments[0].base_offset,
                    "problem": problem}
        if tiered:
            pp.facts["remoteLogEnabled"] = True
        if problem is not None:
            pp.notes.append(note(pdir, "flush.notVerified", problem=problem, recoveryPoint=min(rp, leo)))
            pp.fingerprints = view.fingerprints()
            return pp
        files = [str(p) for s in log.segments_in_unflushed_range(rp) for p in s.files()]
        if files and not clean and rp < leo:
            view.ops.append(Sync(str(view.path), note(view.path, "op.syncAboveRecoveryPoint", recoveryPoint=rp),
                                 files))
        trim_indexes(view, log.segments[-1].base_offset, note(view.path, "op.activeIndexesTrimmed"))
        psm = ProducerStateManager(view, producer_id_expiration_ms=expiration)
        if leo not in psm.snapshots:
            rebuild_producer_state(psm, log.segments, lso, leo, now, False)
        pp.seal(view)
        log.close()
    return pp


def plan_flush(data_dirs: Iterable[str | os.PathLike], *, now_ms: int, resolver: ConfigResolver | None = None,
               write_clean_shutdown_marker: bool = True, broker_epoch: int | None = None,
               runner: Runner | None = None, workers: int = 1, progress=None) -> Plan:
    """The plan of ``kafkalog flush`` (see the module doc)."""
    groups = whole_data_dirs(data_dirs)
    resolver = resolver or ConfigResolver(data_dirs=list(groups))

    def task(t: Target) -> tuple:
        st = t.state
        return (str(t.data_dir), str(t.path), t.topic, t.partition, st.recovery_points.get(t.key, 0),
                st.log_start_offsets.get(t.key, 0), now_ms, t.broker.producer_id_expiration_ms, st.clean_shutdown,
                t.config.remote_log_enabled)

    return plan_partitions(Plan("flush", now=now_ms), groups, resolver, runner or default_runner(workers, progress),
                           _plan_partition, task, notes=False,
                           finish=lambda dp, st: _dir_ops(dp, st, write_clean_shutdown_marker, broker_epoch))


def _dir_ops(dp, st, write_marker: bool, broker_epoch: int | None) -> None:
    view = DirView(st.path)
    rp = {(p.topic, p.partition): p.facts["recoveryPoint"] for p in dp.partitions}
    ls = log_start_checkpoint(dp.partitions)
    if RECOVERY_POINT_CHECKPOINT in st.unreadable or rp != st.recovery_points or \
            not view.exists(RECOVERY_POINT_CHECKPOINT):
        view.write(RECOVERY_POINT_CHECKPOINT, checkpoint_bytes(rp), note(view.path, "op.flushedRecoveryPoints"))
    if LOG_START_OFFSET_CHECKPOINT in st.unreadable or ls != st.log_start_offsets or \
            not view.exists(LOG_START_OFFSET_CHECKPOINT):
        view.write(LOG_START_OFFSET_CHECKPOINT, checkpoint_bytes(ls), note(view.path, "op.cleanShutdownLogStarts"))
    ok = all(p.facts.get("verified") for p in dp.partitions)
    marker = Path(st.path) / CLEAN_SHUTDOWN_FILE
    if ok and write_marker:
        try:
            old = read_clean_shutdown(marker)
        except KafkaLogError:
            old = None
        epoch = broker_epoch if broker_epoch is not None else (
            old.broker_epoch if old is not None and old.broker_epoch is not None else -1)
        data = CleanShutdownMarker.with_epoch(epoch).to_bytes()
        if old is None or old.to_bytes() != data:
            view.write(CLEAN_SHUTDOWN_FILE, data, note(view.path, "op.cleanShutdownMarker"))
    elif not ok and marker.exists():
        view.ops.append(Delete(str(marker), note(view.path, "op.markerRemoved"), marker.stat().st_size))
    dp.ops = list(view.ops)


__all__ = ["plan_flush", "verify_from"]
