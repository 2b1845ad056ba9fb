"""One partition directory: leftovers, segments, the data dir's checkpoints for it, snapshots, epochs."""

from __future__ import annotations

import os

from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from kafkalog.storage.files.clean_shutdown import CLEAN_SHUTDOWN_FILE
from kafkalog.storage.files.findings import Finding, error, info, warning
from kafkalog.storage.files.names import DELETED_FILE_SUFFIX
from kafkalog.storage.files.producer_snapshot import read_producer_snapshot
from kafkalog.storage.files.quorum_state import QUORUM_STATE_FILE, read_quorum_state
from kafkalog.storage.io.fs import as_path
from kafkalog.storage.log.dir_checkpoints import open_partition_log
from kafkalog.storage.log.loss import remembered_facts
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.segment_check import SegmentSummary, verify_segment
from kafkalog.storage.log.topic_partition import METADATA_TOPIC
from kafkalog.storage.reports.verify.files import verify_kraft_snapshot


def verify_partition(
    path: str | os.PathLike | PartitionLog,
    deep: bool = False,
    *,
    checkpoints: dict[str, int | None] | None = None,
) -> list[Finding]:
    """All findings for one partition directory.

    ``checkpoints`` maps data-dir checkpoint names to this partition's value; by default they are read from
    the parent directory (pass ``{}`` to skip those checks).
    """
    out: list[Finding] = []
    if isinstance(path, PartitionLog):
        log = path
        own = False
    else:
        try:
            log = open_partition_log(as_path(path), checkpoints)
        except KafkaLogError as e:
            return [error(e.path or path, e.position, "layout", e.reason)]
        own = True
    try:
        _verify_log(log, deep, out)
    finally:
        if own:
            log.close()
    return out


def _not_truncated_by_broker(out: list[Finding], first: int, log: PartitionLog, clean: bool) -> None:
    """Invalid bytes in a segment the broker does not recover at startup (after a clean shutdown, or below the
    recovery point): say so, and how to cut them."""
    for i in range(first, len(out)):
        f = out[i]
        if f.severity == "error" and f.kind in ("crc", "batch") and f.facts.get("recoveryTruncates"):
            out[i] = error(f.file, f.position, f.kind, code="verify.notTruncated", reason=f.facts["reason"],
                           cleanShutdown=clean, recoveryPoint=log.recovery_point, dataDir=str(log.path.parent),
                           cutAt=f.position)


def _verify_log(log: PartitionLog, deep: bool, out: list[Finding]) -> None:
    out.extend(log.findings)
    d = str(log.path)
    if not log.segments:
        out.append(warning(d, None, "layout", code="verify.noSegments"))

    # leftovers
    for p, suffix in log.temp_files:
        if suffix == DELETED_FILE_SUFFIX:  # routine: file.delete.delay.ms
            out.append(info(p, None, "leftover", code="verify.leftover", suffix=suffix))
        else:
            out.append(warning(p, None, "leftover", code="verify.leftover", suffix=suffix))

    # segments: which of them a broker starting on this dir would recover (and so truncate at an invalid byte)
    clean = (log.path.parent / CLEAN_SHUTDOWN_FILE).exists()
    recovered = set() if clean else {s.base_offset for s in log.segments_in_unflushed_range(log.recovery_point or 0)}
    prev_next: int | None = None
    summaries: list[SegmentSummary] = []
    for i, seg in enumerate(log.segments):
        if prev_next is not None and seg.base_offset < prev_next:
            out.append(error(seg.path, None, "offsets", code="verify.baseBelowPrevious", baseOffset=seg.base_offset,
                             previousNextOffset=prev_next))
        first = len(out)
        try:
            _, summary = verify_segment(seg, deep=deep, is_active=i == len(log.segments) - 1,
                                        previous_next_offset=prev_next, findings=out)
        except KafkaLogError as e:  # unreadable index files, etc.
            out.append(error(e.path or seg.path, e.position, "layout", e.reason))
            continue
        if seg.base_offset not in recovered:
            _not_truncated_by_broker(out, first, log, clean)
        summaries.append(summary)
        if summary.next_offset is not None:
            prev_next = summary.next_offset
        seg.close()
    leo = prev_next if prev_next is not None else (log.segments[-1].base_offset if log.segments else log.log_start_offset)
    if log.segments and summaries and summaries[-1].next_offset is None:
        leo = max(leo, log.segments[-1].base_offset)
    log_start = log.log_start_offset

    # offsets the partition's files remember past the end of its log: gone (the broker serves the shorter log)
    if log.dir_kind == "live":
        try:
            remembered = log.remembered_beyond_end()
        except KafkaLogError:
            remembered = []  # an unreadable log end: the segment findings say why
        if remembered:
            out.append(error(d, None, "loss", code="loss.remembered", **remembered_facts(remembered)))

    # data-dir checkpoints
    lso_ckpt = log.log_start_offset_checkpoint
    if lso_ckpt is not None:
        if lso_ckpt > leo:
            out.append(error(d, None, "checkpoint", code="verify.logStartAboveEnd",
                             checkpoint=LOG_START_OFFSET_CHECKPOINT, offset=lso_ckpt, logEndOffset=leo))
        elif log.segments and lso_ckpt <= log.segments[0].base_offset:
            out.append(info(d, None, "checkpoint", code="verify.logStartNotAboveBase",
                            checkpoint=LOG_START_OFFSET_CHECKPOINT, offset=lso_ckpt))
    rp = log.recovery_point
    if rp is not None and rp > leo:
        out.append(warning(d, None, "checkpoint", code="verify.recoveryPointAboveEnd",
                           checkpoint=RECOVERY_POINT_CHECKPOINT, offset=rp, logEndOffset=leo))
    hw = log.high_watermark_checkpoint
    if hw is not None and (hw > leo or hw < log_start):
        out.append(warning(d, None, "checkpoint", code="verify.highWatermarkOutside",
                           checkpoint=REPLICATION_OFFSET_CHECKPOINT, offset=hw, logStartOffset=log_start,
                           logEndOffset=leo))
    cp = log.clean_point
    if cp is not None and (cp > leo or cp < log_start):
        out.append(warning(d, None, "checkpoint", code="verify.cleanPointOutside",
                           checkpoint=CLEANER_OFFSET_CHECKPOINT, offset=cp, logStartOffset=log_start, logEndOffset=leo))

    # leader epochs
    epochs_path = log.leader_epoch_checkpoint_path
    if epochs_path.exists():
        try:
            ckpt = log.leader_epoch_checkpoint
        except KafkaLogError as e:
            out.append(error(epochs_path, e.position, "epoch", e.reason))
            ckpt = None
        if ckpt is not None:
            out += [d.finding(epochs_path, "epoch", "error") for d in ckpt.validate()]
            known = {entry.epoch: entry.start_offset for entry in ckpt.entries}
            for entry in ckpt.entries:
                if entry.start_offset > leo:
                    out.append(warning(epochs_path, None, "epoch", code="verify.epochAfterEnd", epoch=entry.epoch,
                                       startOffset=entry.start_offset, logEndOffset=leo))
            seen_max = -1
            for s in summaries:
                for epoch, start in s.epochs:
                    if epoch <= seen_max:
                        continue
                    seen_max = epoch
                    if epoch not in known:
                        if ckpt.entries and epoch > ckpt.entries[0].epoch:
                            out.append(warning(epochs_path, None, "epoch", code="verify.epochMissing", epoch=epoch,
                                               firstBatchOffset=start))
                    elif known[epoch] != start and start >= log_start and known[epoch] > log_start:
                        out.append(warning(epochs_path, None, "epoch", code="verify.epochStartDiffers", epoch=epoch,
                                           startOffset=known[epoch], firstBatchOffset=start))
    elif any(2 in s.magics for s in summaries):
        out.append(info(epochs_path, None, "epoch", code="verify.epochCheckpointMissing"))

    # partition.metadata
    mpath = log.partition_metadata_path
    if mpath.exists():
        try:
            meta = log.partition_metadata
            if meta is not None and not meta.canonical:
                out.append(warning(mpath, None, "metadata", code="verify.metadataNotCanonical"))
            if meta is not None and meta.version != 0:
                out.append(warning(mpath, None, "metadata", code="verify.metadataVersion", version=meta.version))
        except KafkaLogError as e:
            out.append(error(mpath, e.position, "metadata", e.reason))
    elif log.topic != METADATA_TOPIC:
        out.append(warning(mpath, None, "metadata", code="verify.noTopicId"))

    # KRaft quorum-state and snapshots (__cluster_metadata-0)
    if log.topic == METADATA_TOPIC:
        _quorum_state_check(log, summaries, out)
    for kp in log.kraft_snapshots:
        if kp.name.endswith(".checkpoint"):
            out.extend(verify_kraft_snapshot(kp, deep)[0])

    # producer snapshots
    for offset, sp in log.snapshot_files:
        try:
            snap = read_producer_snapshot(sp)
        except KafkaLogError as e:
            out.append(error(sp, e.position, "snapshot", code="verify.snapshotUnreadable", error=e.reason))
            continue
        out += [d.finding(sp, "snapshot", "warning") for d in snap.validate()]
        if offset > leo:
            out.append(warning(sp, None, "snapshot", code="verify.snapshotAboveEnd", offset=offset, logEndOffset=leo))


def _quorum_state_check(log: PartitionLog, summaries: list[SegmentSummary], out: list[Finding]) -> None:
    qpath = log.path / QUORUM_STATE_FILE
    if not qpath.exists():
        out.append(info(qpath, None, "metadata", code="verify.quorumStateMissing"))
        return
    try:
        state = read_quorum_state(qpath)
    except KafkaLogError as e:
        out.append(error(qpath, e.position, "metadata", e.reason))
        return
    epochs = [epoch for s in summaries for epoch, _ in s.epochs]
    fatal = state.fatal_problems()
    out += [d.finding(qpath, "metadata", "error" if d in fatal else "warning")
            for d in state.validate(max(epochs) if epochs else None)]
