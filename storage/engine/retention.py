"""Offline retention with the broker's semantics (``UnifiedLog.deleteOldSegments``, spec 40-log-engine §7, §8).

:func:`retention_plan` decides, :func:`apply_retention` does it through the broker's protocol (rename the
segment's files to ``.deleted``, then delete them unless ``keep_deleted``), and updates the data dir's
``log-start-offset-checkpoint`` and ``recovery-point-offset-checkpoint`` as ``LogManager`` would write them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import fsync_dir
from ..config import LogConfig
from ..files.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from .cleaner_log import PartitionView, SegmentView, parse_partition_dir_name

SEGMENT_FILE_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")


@dataclass
class SegmentDeletion:
    base_offset: int
    size: int
    reason: str  # "log start offset", "retention.bytes", "retention.ms"
    files: list[str] = field(default_factory=list)


@dataclass
class RetentionPlan:
    partition: str
    path: Path
    deletions: list[SegmentDeletion] = field(default_factory=list)
    roll_at: int | None = None  # every segment goes: a new empty active segment at this offset first
    new_log_start_offset: int | None = None
    old_log_start_offset: int = 0
    first_base_after: int | None = None  # base offset of the first segment left
    now: int = 0

    @property
    def bytes(self) -> int:
        return sum(d.size for d in self.deletions)

    def to_dict(self) -> dict:
        return {"partition": self.partition, "segments": [d.base_offset for d in self.deletions],
                "reasons": sorted({d.reason for d in self.deletions}), "bytes": self.bytes,
                "roll_at": self.roll_at, "log_start_offset": self.new_log_start_offset}


def _checkpoint(data_dir: Path, name: str) -> dict[tuple[str, int], int]:
    p = data_dir / name
    return read_offset_checkpoint(p).to_dict() if p.exists() else {}


def _deletable(segs: list[SegmentView], leo: int, hw: int, pred) -> list[SegmentView]:
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


def retention_plan(partition_dir: str | os.PathLike, cfg: LogConfig, now: int, *,
                   cleaner_enabled: bool = True) -> RetentionPlan:
    """What one retention run at ``now`` deletes from this partition."""
    pdir = Path(partition_dir)
    data_dir = pdir.parent
    topic, part = parse_partition_dir_name(pdir.name)
    lso = _checkpoint(data_dir, LOG_START_OFFSET_CHECKPOINT).get((topic, part))
    hw = _checkpoint(data_dir, REPLICATION_OFFSET_CHECKPOINT).get((topic, part))
    plan = RetentionPlan(pdir.name, pdir, now=now)
    if cfg.compact and not cleaner_enabled:
        return plan  # compacted logs get retention only from the cleaner threads
    with PartitionView(pdir, log_start_offset=lso, high_watermark=hw) as log:
        plan.old_log_start_offset = log_start = log.log_start_offset
        segs = list(log.segments)
        leo, hw_ = log.log_end_offset, log.high_watermark

        def run(pred, reason: str) -> None:
            nonlocal segs, log_start
            dels = _deletable(segs, leo, hw_, pred)
            if not dels:
                return
            if len(dels) == len(segs):
                plan.roll_at = leo
                if dels[-1].base_offset == leo:
                    dels = dels[:-1]
            for s in dels:
                plan.deletions.append(SegmentDeletion(s.base_offset, s.size, reason,
                                                      [str(s.file(x)) for x in SEGMENT_FILE_SUFFIXES
                                                       if s.file(x).exists()]))
            segs = segs[len(dels):]
            first = segs[0].base_offset if segs else leo
            log_start = max(log_start, first)

        run(lambda s, nxt: nxt is not None and nxt.base_offset <= log_start, "log start offset")
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

                run(by_size, "retention.bytes")
            rm = cfg.retention_ms
            if rm >= 0:
                run(lambda s, nxt: now - s.largest_timestamp > rm, "retention.ms")
        if plan.deletions:
            plan.new_log_start_offset = log_start
            plan.first_base_after = segs[0].base_offset if segs else leo
    return plan


def apply_retention(plan: RetentionPlan, *, keep_deleted: bool = False,
                    producer_id_expiration_ms: int = 86400000) -> None:
    """Delete the planned segments the broker's way and update the data dir checkpoints.

    When every segment goes, the broker first rolls a new empty active segment at the log end offset and takes a
    producer snapshot there (``UnifiedLog.roll``: ``updateMapEndOffset`` + ``takeSnapshot``, a no-op when the
    snapshot already exists, e.g. written at the last clean shutdown); so does this."""
    if not plan.deletions:
        return
    pdir = plan.path
    data_dir = pdir.parent
    topic, part = parse_partition_dir_name(pdir.name)
    if plan.roll_at is not None:
        base = f"{plan.roll_at:020d}"
        if not (pdir / f"{base}.snapshot").exists():
            with PartitionView(pdir) as log:
                psm = log.producer_state(plan.now, producer_id_expiration_ms)
                psm.map_end_offset = plan.roll_at
                psm.last_snap_offset = -1
                psm.take_snapshot()
        for suffix in (".log", ".index", ".timeindex"):
            p = pdir / (base + suffix)
            if not p.exists():
                with open(p, "wb") as f:
                    os.fsync(f.fileno())
        fsync_dir(pdir)
    new_start = plan.new_log_start_offset if plan.new_log_start_offset is not None else plan.old_log_start_offset
    # 1. the log start offset first, so a crash after it never exposes deleted data
    _update_start_and_recovery(data_dir, topic, part, new_start,
                               plan.first_base_after if plan.first_base_after is not None else new_start)
    renamed = []
    for d in plan.deletions:
        for f in d.files:
            src = Path(f)
            if src.exists():
                dst = src.with_name(src.name + ".deleted")
                os.replace(src, dst)
                renamed.append(dst)
        snap = pdir / f"{d.base_offset:020d}.snapshot"
        if snap.exists() and d.base_offset != new_start:
            dst = snap.with_name(snap.name + ".deleted")
            os.replace(snap, dst)
            renamed.append(dst)
    fsync_dir(pdir)
    if not keep_deleted:
        for p in renamed:
            p.unlink(missing_ok=True)
        fsync_dir(pdir)


def _update_start_and_recovery(data_dir: Path, topic: str, part: int, new_start: int, first_base: int) -> None:
    """``log-start-offset-checkpoint`` lists a partition only when its start is above its first segment base
    (which, after segment deletion, it is not); the recovery point is raised to the new start if below it."""
    lso = _checkpoint(data_dir, LOG_START_OFFSET_CHECKPOINT)
    key = (topic, part)
    if key in lso and lso[key] <= first_base:
        del lso[key]
        write_offset_checkpoint(data_dir / LOG_START_OFFSET_CHECKPOINT, lso)
    rp_path = data_dir / RECOVERY_POINT_CHECKPOINT
    if rp_path.exists():
        rp = read_offset_checkpoint(rp_path).to_dict()
        if key in rp and rp[key] < new_start:
            rp[key] = new_start
            write_offset_checkpoint(rp_path, rp)
