"""``kafkalog repair``: the broker's startup recovery, offline, as one plan over whole data dirs.

Per data dir: the clean-shutdown marker decides whether unflushed segments are recovered; recovery points and
log start offsets come from the dir's checkpoints (a malformed checkpoint reads as empty, as the broker reads
it). Every partition is loaded by :mod:`.loader` on a planned view; an unreadable ``partition.metadata`` (which
stops a broker at startup) is rewritten from ``--topic-id`` or the KRaft metadata. Then, as a clean broker
shutdown would, what lies above each old recovery point is fsynced and the data dir's
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and ``.kafka_cleanshutdown`` are written,
so the broker performs no recovery of its own.

A data dir that shut down cleanly and needs nothing but what the broker does at every start (deleting
``.deleted`` files left by asynchronous deletions, normalising ``leader-epoch-checkpoint``, producer snapshots)
is healthy: the plan changes nothing and says what the broker will do itself.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from kafkalog.storage.config.resolver import METADATA_DIR, ConfigResolver
from kafkalog.storage.engine.loader import load_partition, startup_error
from kafkalog.storage.engine.plan import DataDirPlan, PartitionPlan, Plan, Runner, default_runner
from kafkalog.storage.engine.targets import (
    DataDirState,
    Target,
    checkpoint_bytes,
    plan_partitions,
    whole_data_dirs,
)
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files.checkpoints import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
from kafkalog.storage.files.clean_shutdown import (
    CLEAN_SHUTDOWN_FILE,
    CleanShutdownMarker,
    read_clean_shutdown,
)
from kafkalog.storage.files.findings import note
from kafkalog.storage.files.partition_metadata import PARTITION_METADATA_FILE, PartitionMetadata
from kafkalog.storage.io.dirview import DIR, DirView
from kafkalog.storage.io.fs import task_path
from kafkalog.storage.io.ops import Sync
from kafkalog.storage.log.partition import PartitionLog, log_start_checkpoint


def _plan_partition(task: tuple) -> PartitionPlan:
    (data_dir, pdir, topic, part, cfg, rp, lso_ckpt, clean, now, strict, expiration, known_tid, given_tid,
     settings, flushed) = task
    pp = PartitionPlan(data_dir, str(pdir), topic, part, settings=settings)
    with pp.planning(), DirView(pdir) as view:
        loaded = load_partition(view, config=cfg, recovery_point=rp, log_start_offset=lso_ckpt,
                                had_clean_shutdown=clean, now_ms=now, strict_indexes=strict,
                                producer_id_expiration_ms=expiration)
        _partition_metadata(view, pp, known_tid, given_tid)
        startup = loaded.startup_errors + pp.facts.pop("startupErrors", [])
        if not flushed:
            _sync_unflushed(view, rp)
        pp.losses = loaded.losses
        pp.notes += loaded.notes
        pp.seal(view)
        segs = PartitionLog(view).segments
        pp.facts = {"logStartOffset": loaded.log_start_offset, "logEndOffset": loaded.log_end_offset,
                    "firstBaseOffset": segs[0].base_offset if segs else loaded.log_start_offset,
                    "segmentsRecovered": len(loaded.recovered),
                    "bytesTruncated": sum(r.truncated_bytes for r in loaded.recovered),
                    "bytesScanned": sum(r.log_size for r in loaded.recovered)}
        if cfg.remote_log_enabled:
            pp.facts["remoteLogEnabled"] = True
        if startup:
            pp.facts["startupErrors"] = startup
    return pp


def _partition_metadata(view: DirView, pp: PartitionPlan, known: str | None, given: str | None) -> None:
    """An unreadable (e.g. zero-length) ``partition.metadata`` stops the broker at startup (Kafka 4.3/3.9:
    "Error starting LogManager"). It is rewritten from ``--topic-id`` or the dir's KRaft metadata; with no source
    it is left alone and the plan says what the broker would do."""
    if not view.exists(PARTITION_METADATA_FILE):
        return
    try:
        cur = PartitionMetadata.from_bytes(view.read(PARTITION_METADATA_FILE, 1 << 16), view.file(PARTITION_METADATA_FILE))
    except KafkaLogError as e:
        # PartitionMetadataReadBuffer.read: a missing line is a NullPointerException, a bad topic id an
        # IllegalArgumentException (the broker stops), anything else a KafkaStorageException (the dir goes offline)
        path = view.file(PARTITION_METADATA_FILE)
        cause, offline = PartitionMetadata.broker_read_failure(view.read(PARTITION_METADATA_FILE, 1 << 16), path)
        pp.facts.setdefault("startupErrors", []).append(startup_error(path, cause, offline=offline))
        tid = given or known
        if tid:
            view.write(PARTITION_METADATA_FILE, PartitionMetadata(tid).to_bytes(), note(
                view.path, "op.partitionMetadataRewritten", error=e.reason, topicId=tid, fromOption=bool(given),
                metadataDir=METADATA_DIR))
        else:
            pp.notes.append(note(view.file(PARTITION_METADATA_FILE), "repair.topicIdUnknown", error=e.reason,
                                 metadataDir=METADATA_DIR))
        return
    if given and given != cur.topic_id:
        pp.notes.append(note(view.file(PARTITION_METADATA_FILE), "repair.topicIdDiffers", topicId=cur.topic_id,
                             given=given))


def _sync_unflushed(view: DirView, recovery_point: int) -> None:
    """A clean shutdown's flush: the files of segments at and above the old recovery point that the plan does
    not rewrite are fsynced (the broker may have left them in the page cache)."""

    log = PartitionLog(view)
    rewritten = {Path(op.path).name for op in view.ops if op.kind in ("write", "create")}
    files = [str(p) for s in log.segments_in_unflushed_range(recovery_point) for p in s.files()
             if p.name not in rewritten]
    if files:
        view.ops.append(Sync(str(view.path), note(view.path, "op.syncUnflushed"), files))


def plan_repair(data_dirs: Iterable[str | os.PathLike], *, now_ms: int, resolver: ConfigResolver | None = None,
                strict_indexes: bool = True, topic_ids: dict[str, str] | None = None, full: bool = False,
                runner: Runner | None = None, workers: int = 1, progress=None) -> Plan:
    """The plan of ``kafkalog repair`` (see the module doc). ``full``: recover every segment, as the broker does
    when it has no recovery point (finds corruption below the recovery point, which the broker never looks at).
    ``topic_ids``: ``--topic-id`` values for unreadable ``partition.metadata`` files."""
    groups = whole_data_dirs(data_dirs)
    resolver = resolver or ConfigResolver(data_dirs=list(groups))

    def prepare(dp: DataDirPlan, st: DataDirState) -> None:
        d = st.path
        if not st.clean_shutdown:
            dp.notes.append(note(d, "repair.noCleanShutdown"))
        elif full:
            dp.notes.append(note(d, "repair.full"))
        for entry in DirView(d, DirView.READONLY).names(DIR):
            if entry.endswith(("-delete", "-stray")):
                dp.notes.append(note(d / entry, "repair.deleteDir" if entry.endswith("-delete") else "repair.strayDir"))

    def task(t: Target) -> tuple:
        st = t.state
        return (str(t.data_dir), task_path(t.path), t.topic, t.partition, t.config,
                0 if full else st.recovery_points.get(t.key, 0), st.log_start_offsets.get(t.key, 0),
                st.clean_shutdown and not full, now_ms, strict_indexes, t.broker.producer_id_expiration_ms,
                resolver.topic_id(t.data_dir, t.topic), (topic_ids or {}).get(t.topic),
                t.config.describe(["index.interval.bytes"]), st.clean_shutdown)

    def finish(dp: DataDirPlan, st: DataDirState) -> None:
        _dir_ops(dp, st)
        if st.clean_shutdown and not full and not dp.ops and all(op.routine for p in dp.partitions for op in p.ops):
            _defer_routine(dp)

    plan = Plan("repair", now=now_ms, options={"full": full, "strictIndexes": strict_indexes})
    return plan_partitions(plan, groups, resolver, runner or default_runner(workers, progress), _plan_partition,
                           task, prepare=prepare, finish=finish)


def _dir_ops(dp, st) -> None:
    """The data dir's checkpoints and marker, as a clean shutdown leaves them (only where they change)."""
    if any(p.error for p in dp.partitions):
        return
    view = DirView(st.path)
    rp = {(p.topic, p.partition): p.facts["logEndOffset"] for p in dp.partitions}
    ls = log_start_checkpoint(dp.partitions)
    current = {RECOVERY_POINT_CHECKPOINT: st.recovery_points, LOG_START_OFFSET_CHECKPOINT: st.log_start_offsets}
    for name, offsets in ((RECOVERY_POINT_CHECKPOINT, rp), (LOG_START_OFFSET_CHECKPOINT, ls)):
        if name in st.unreadable or not view.exists(name) or current[name] != offsets:
            view.write(name, checkpoint_bytes(offsets), note(view.path, "op.cleanShutdownRecoveryPoints"
                                                             if name == RECOVERY_POINT_CHECKPOINT else
                                                             "op.cleanShutdownLogStarts"))
    marker = st.path / CLEAN_SHUTDOWN_FILE
    if not st.clean_shutdown:
        try:
            old = read_clean_shutdown(marker)
        except KafkaLogError:
            old = None
        epoch = old.broker_epoch if old is not None and old.broker_epoch is not None else -1
        view.write(CLEAN_SHUTDOWN_FILE, CleanShutdownMarker.with_epoch(epoch).to_bytes(),
                   note(view.path, "op.cleanShutdownMarker"))
    dp.ops = list(view.ops)


def _defer_routine(dp) -> None:
    """A healthy dir: leave what the broker does at every start to the broker, and say what that is."""
    counts: Counter[tuple[str, str]] = Counter()
    for p in dp.partitions:
        for op in p.ops:
            counts[_routine_kind(op)] += 1
        p.ops = []
    routine = [{"action": action, **({"file": name} if name else {}), "count": n}
               for (action, name), n in sorted(counts.items())]
    dp.notes.append(note(dp.path, "repair.healthy", routine=routine))


def _routine_kind(op) -> tuple[str, str]:
    """What the broker does by itself with ``op``'s file: an action code (and the file for any other op)."""
    name = Path(op.path).name
    if op.kind == "delete" and name.endswith(".deleted"):
        return "deletedFiles", ""
    if name == "leader-epoch-checkpoint":
        return "epochCheckpoint", ""
    if name.endswith(".snapshot"):
        return "producerSnapshots", ""
    if name.endswith((".index", ".timeindex")):
        return "activeIndexes", ""
    return op.kind, name


__all__ = ["plan_repair"]
