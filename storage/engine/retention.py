"""``kafkalog retain``: one run of the broker's retention, offline, as a plan (``UnifiedLog.deleteOldSegments``).

Per partition, oldest segment first, the segments the broker's retention at ``now`` deletes: wholly below the log
start offset (every topic), then, for ``cleanup.policy`` containing ``delete``, while the rest still exceeds
``retention.bytes``, then while ``now - largest timestamp > retention.ms``. A segment goes only when the high
watermark covers it; the last segment goes only when it is not empty, and then a new empty active segment (with a
producer snapshot) is rolled at the log end offset first. Compacted topics get retention only from the cleaner
(``log.cleaner.enable``).

What the broker does with a segment deletion, the plan does too: the segment's files (and its producer snapshot)
are renamed ``.deleted`` and removed; the log start offset moves to the first remaining segment, and with it the
first ``leader-epoch-checkpoint`` entry (``LeaderEpochFileCache.truncateFromStart``) and, in the data dir, the
recovery point (raised to the new start) and ``log-start-offset-checkpoint`` (listing only starts above their
first segment). Every deleted segment is a reported loss: its offsets, records and the setting (with its source)
that deleted it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.plan import Loss, PartitionPlan, Plan, Runner, Setting, default_runner
from kafkalog.storage.engine.targets import Target, checkpoint_bytes, group_partitions, plan_partitions
from kafkalog.storage.files.checkpoints import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
from kafkalog.storage.files.findings import Finding, note
from kafkalog.storage.files.names import offset_file_name
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.log.leader_epoch_cache import LeaderEpochCache
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.segment import SEGMENT_SUFFIXES, tail_loss


@dataclass
class _Deletion:
    segment: Segment
    next_base: int
    note: Finding  # why: the loss's code and facts
    setting: Setting | None = None
    times: dict[str, int] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)


def _deletable(segs: list[Segment], leo: int, hw: int, pred) -> list[Segment]:
    """``UnifiedLog.deletableSegments``: oldest first, stop at the first segment that must stay."""
    out = []
    for i, s in enumerate(segs):
        nxt = segs[i + 1] if i + 1 < len(segs) else None
        upper = nxt.base_offset if nxt is not None else leo
        if hw >= upper and pred(s, nxt) and not (nxt is None and s.size == 0):
            out.append(s)
        else:
            break
    return out


def _plan_partition(task: tuple) -> PartitionPlan:
    data_dir, pdir, topic, part, cfg, lso_ckpt, hw, now, cleaner_enabled, expiration, settings, keep_deleted = task
    pp = PartitionPlan(data_dir, pdir, topic, part, settings=settings)
    with pp.planning(), DirView(pdir) as view:
        log = PartitionLog(view, log_start_offset_checkpoint=lso_ckpt, high_watermark=hw)
        _plan(view, log, pp, cfg, now, cleaner_enabled, expiration, keep_deleted)
        pp.seal(view)
        log.close()
    return pp


def _plan(view: DirView, log: PartitionLog, pp: PartitionPlan, cfg, now: int, cleaner_enabled: bool,
          expiration: int, keep_deleted: bool) -> None:
    if not log.segments:
        pp.notes.append(note(log.path, "retain.noSegments"))
        return
    if cfg.remote_log_enabled:
        # Kafka deletes a tiered partition's local segments only once they are in the remote store
        # (UnifiedLog.deleteOldSegments: local.retention.* up to the highest offset uploaded); that is known to the
        # broker's RemoteLogManager, not from the local files: never delete a segment that may exist nowhere else
        pp.notes.append(note(log.path, "retain.tiered"))
        return
    old_start = log_start = log.log_start_offset
    pp.facts = {"oldLogStartOffset": old_start, "newLogStartOffset": old_start,
                "firstBaseOffset": log.segments[0].base_offset, "segmentsDeleted": 0, "rolledAt": None}
    if cfg.compact and not cleaner_enabled:
        pp.notes.append(note(log.path, "retain.cleanerDisabled"))
        return
    segs = list(log.segments)
    leo, hw = log.log_end_offset, log.high_watermark
    deletions: list[_Deletion] = []
    roll_at: int | None = None

    def run(pred, why: Callable[[Segment], Finding], setting: Setting | None = None, times: tuple[str, ...] = (),
            sizes: tuple[str, ...] = ()) -> None:
        """Delete the segments ``pred`` picks; ``why(segment)``: the loss's note, whose facts named in ``times``
        are timestamps and in ``sizes`` sizes (the loss's ``times``/``sizes``)."""
        nonlocal segs, log_start, roll_at
        dels = _deletable(segs, leo, hw, pred)
        if not dels:
            return
        if len(dels) == len(segs):
            roll_at = leo
            if dels[-1].base_offset == leo:
                dels = dels[:-1]
        for s in dels:
            nxt = segs[segs.index(s) + 1].base_offset if segs.index(s) + 1 < len(segs) else leo
            n = why(s)
            deletions.append(_Deletion(s, nxt, n, setting, {k: n.facts[k] for k in times},
                                       {k: n.facts[k] for k in sizes}))
        segs = segs[len(dels):]
        first = segs[0].base_offset if segs else leo
        log_start = max(log_start, first)

    run(lambda s, nxt: nxt is not None and nxt.base_offset <= log_start,
        lambda s: note(log.path, "loss.belowLogStart", logStartOffset=log_start))  # (read before run moves it)
    if cfg.delete:
        rb = cfg.retention_bytes
        size = sum(s.size for s in segs)
        if rb >= 0 and size >= rb:
            diff = [size - rb]

            def by_size(s, nxt) -> bool:
                if diff[0] - s.size >= 0:
                    diff[0] -= s.size
                    return True
                return False

            run(by_size, lambda s: note(log.path, "loss.retentionBytes", logSize=size),
                Setting("retention.bytes", rb, cfg.source("retention.bytes")), sizes=("logSize",))
        rm = cfg.retention_ms
        if rm >= 0:
            run(lambda s, nxt: now - s.largest_timestamp() > rm,
                lambda s: note(log.path, "loss.retentionMs", largestTimestamp=s.largest_timestamp(), now=now),
                Setting("retention.ms", rm, cfg.source("retention.ms")), times=("largestTimestamp", "now"))
    if not deletions:
        return
    # roll first when every segment goes (UnifiedLog.roll: a new empty segment and a snapshot at the LEO)
    if roll_at is not None:
        if not view.exists(offset_file_name(roll_at, ".snapshot")):
            log.producer_state(now, expiration).write_snapshot(
                view, roll_at, note(view.path, "op.rollSnapshot", offset=roll_at))
        for suffix in (".log", ".index", ".timeindex"):
            view.touch(offset_file_name(roll_at, suffix), note(view.path, "op.rollEmptySegment",
                                                               logEndOffset=roll_at))
    renamed = []
    for d in deletions:
        s = d.segment
        t = tail_loss(s.buf, 0)
        pp.losses.append(Loss("", s.base_offset, d.next_base - 1, t.records, s.size, str(s.path), 0,
                              setting=d.setting, times=d.times, sizes=d.sizes, note=d.note))
        why = (note(view.path, "op.retentionDeleted", baseOffset=s.base_offset, setting=d.setting.to_dict())
               if d.setting else note(view.path, "op.belowLogStartDeleted", baseOffset=s.base_offset,
                                      logStartOffset=d.note.facts["logStartOffset"]))
        for suffix in SEGMENT_SUFFIXES:
            name = offset_file_name(s.base_offset, suffix)
            if view.exists(name):
                view.rename(name, name + ".deleted", why)
                renamed.append(name + ".deleted")
    new_start = log_start
    for d in deletions:
        snap = offset_file_name(d.segment.base_offset, ".snapshot")
        if view.exists(snap) and d.segment.base_offset != new_start:
            view.rename(snap, snap + ".deleted", note(view.path, "op.deletedSegmentSnapshot",
                                                      baseOffset=d.segment.base_offset))
            renamed.append(snap + ".deleted")
    if not keep_deleted:
        for name in renamed:
            view.delete(name, note(view.path, "op.deletedFileRemoved"))
    if new_start > old_start:
        epochs = LeaderEpochCache.load(view, auto_flush=False)
        if epochs.truncate_from_start(new_start):
            epochs.flush(why=note(view.path, "op.epochsFromStart", logStartOffset=new_start))
    pp.facts.update(newLogStartOffset=new_start, segmentsDeleted=len(deletions), rolledAt=roll_at,
                    firstBaseAfter=segs[0].base_offset if segs else leo,
                    bytesDeleted=sum(d.segment.size for d in deletions))


def plan_retention(paths: Iterable[str | os.PathLike], *, now_ms: int, resolver: ConfigResolver | None = None,
                   topics: set[str] | None = None, keep_deleted: bool = False, runner: Runner | None = None,
                   workers: int = 1, progress=None) -> Plan:
    """The plan of ``kafkalog retain`` over data dirs or partition dirs (see the module doc). ``keep_deleted``
    leaves the deleted segments' files renamed ``.deleted`` (the broker removes them later)."""
    groups = group_partitions(paths, topics=topics)
    resolver = resolver or ConfigResolver(data_dirs=list(groups))

    def task(t: Target) -> tuple:
        return (str(t.data_dir), str(t.path), t.topic, t.partition, t.config, t.state.log_start_offsets.get(t.key),
                t.state.high_watermarks.get(t.key), now_ms, t.broker.cleaner.enable_cleaner,
                t.broker.producer_id_expiration_ms,
                t.config.describe(["cleanup.policy", "retention.ms", "retention.bytes"]), keep_deleted)

    return plan_partitions(Plan("retain", now=now_ms), groups, resolver, runner or default_runner(workers, progress),
                           _plan_partition, task, finish=_dir_ops)


def _dir_ops(dp, st) -> None:
    """``log-start-offset-checkpoint`` lists a partition only when its start is above its first segment (which,
    after segment deletion, it is not); the recovery point is raised to the new start when below it."""
    changed = [p for p in dp.partitions if p.facts.get("segmentsDeleted")]
    if not changed:
        return
    view = DirView(st.path)
    lso = dict(st.log_start_offsets)
    rp = dict(st.recovery_points)
    for p in changed:
        key = (p.topic, p.partition)
        if key in lso and lso[key] <= p.facts["firstBaseAfter"]:
            del lso[key]
        if key in rp and rp[key] < p.facts["newLogStartOffset"]:
            rp[key] = p.facts["newLogStartOffset"]
    if lso != st.log_start_offsets:
        view.write(LOG_START_OFFSET_CHECKPOINT, checkpoint_bytes(lso), note(view.path, "op.retainedLogStarts"))
    if rp != st.recovery_points and view.exists(RECOVERY_POINT_CHECKPOINT):
        view.write(RECOVERY_POINT_CHECKPOINT, checkpoint_bytes(rp), note(view.path, "op.recoveryPointsRaised"))
    dp.ops = list(view.ops)


__all__ = ["plan_retention"]
