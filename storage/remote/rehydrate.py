"""``kafkalog rehydrate``: a local partition dir built from a remote store (plus the partition's local segments,
if any), so a broker with tiered storage off serves it.

What it writes, per partition ``<topic>-<partition>`` of the data dir (one :class:`InstallPartition` op: every
file written and fsynced in a staging dir beside the data dir, then renamed into place; the data dir is locked
and a dir a live broker holds is refused, as for every plan):

* each remote segment below the local log's first segment, as ``<startOffset:020d>.log`` with its
  ``.index``/``.timeindex`` (the remote ones when ``kafkalog verify``'s checks pass on them, else rebuilt with
  the broker's recovery rule, :func:`~kafkalog.storage.log.segment.recover_segment`) and ``.txnindex``;
* the local segments and files unchanged;
* the producer snapshot the last remote segment carries (the producer state at its end offset + 1, as
  ``RemoteLogManager.copyLogSegment`` uploads it) as ``<endOffset+1>.snapshot`` when no local segment follows;
* ``leader-epoch-checkpoint``: the remote segments' epoch checkpoints and the local one merged with
  ``LeaderEpochFileCache.assign`` (Kafka's rule: an entry replaces the later entries it contradicts), truncated
  to the new log's offsets;
* ``partition.metadata`` with the topic id of the ``RemoteLogSegmentId``;
* the data dir's ``log-start-offset-checkpoint`` (the first remote segment's start), and, for a partition rebuilt
  from the store alone, ``recovery-point-offset-checkpoint`` and ``replication-offset-checkpoint`` at the log end
  (remote segments hold only offsets below the high watermark: ``RemoteLogManager`` uploads segments below the
  last stable offset).

What it cannot recover: segments whose metadata is ``DELETE_SEGMENT_*`` (retention or a topic deletion removed
them), segments missing from the store, and records that were only in a lost local log beyond the remote end.
A gap or an overlap between the chosen segments is an error before anything is written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from kafkalog.storage.engine.migrate import InstallPartition, StagedFile
from kafkalog.storage.engine.offset_checkpoints import read_checkpoints
from kafkalog.storage.engine.plan import DataDirPlan, Loss, PartitionPlan, Plan, apply
from kafkalog.storage.engine.targets import read_data_dir
from kafkalog.storage.engine.topic_id import check_topic_id
from kafkalog.storage.errors import ConfigError, LogDirError
from kafkalog.storage.files.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpoint,
)
from kafkalog.storage.files.findings import note
from kafkalog.storage.files.leader_epoch import LEADER_EPOCH_CHECKPOINT, read_leader_epoch_checkpoint
from kafkalog.storage.files.names import offset_file_name, snapshot_file_name
from kafkalog.storage.files.partition_metadata import PARTITION_METADATA_FILE, PartitionMetadata
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io.ops import Blob, WriteFile
from kafkalog.storage.log.leader_epoch_cache import LeaderEpochCache
from kafkalog.storage.log.segment import recover_segment
from kafkalog.storage.log.topic_partition import partition_path
from kafkalog.storage.remote.inspect import read_remote_metadata, verify_remote_segment
from kafkalog.storage.remote.layout import LocalTieredStorageLayout, RemoteSegment


@dataclass
class RehydrateOptions:
    topic: str | None = None
    partition: int | None = None
    metadata_dirs: list[str] = field(default_factory=list)  # data dirs holding __remote_log_metadata
    overwrite: bool = False
    topic_id: str | None = None  # the destination cluster's topic id (default: the RemoteLogSegmentId's)


def _index_ok(store: LocalTieredStorageLayout, seg: RemoteSegment) -> bool:
    return ("index" in seg.files and "timeindex" in seg.files and not any(
        f.severity == "error" and f.kind in ("index", "timeindex", "batch", "crc", "offsets")
        for f in verify_remote_segment(store, seg)))


def plan_rehydrate(store: LocalTieredStorageLayout, data_dir: str | os.PathLike,
                   opts: RehydrateOptions | None = None) -> Plan:
    """The plan of ``kafkalog rehydrate`` (module docstring)."""
    opts = opts or RehydrateOptions()
    dst = Path(os.path.abspath(data_dir))
    if not dst.is_dir():
        raise LogDirError("not a directory (a broker's log dir: run `kafka-storage format` first for a new one)",
                          str(dst))
    meta_dirs = opts.metadata_dirs or [str(dst)]
    md = read_remote_metadata(meta_dirs)
    parts = [tp for tp in store.partitions() if (opts.topic is None or tp[0] == opts.topic)
             and (opts.partition is None or tp[1] == opts.partition)]
    if not parts:
        raise LogDirError("no remote partition matches" + (f" topic {opts.topic}" if opts.topic else "")
                          + (f" partition {opts.partition}" if opts.partition is not None else ""), store.root)
    plan = Plan("rehydrate", options={"store": store.root, "dataDir": str(dst)})
    dp = DataDirPlan(str(dst))
    plan.data_dirs.append(dp)
    cps = read_checkpoints(dst)
    new = {n: dict(v) for n, v in cps.items()}
    for topic, partition, topic_id in parts:
        target = partition_path(dst, topic, partition)
        pp = PartitionPlan(str(dst), str(target), topic, partition)
        dp.partitions.append(pp)
        with pp.planning():
            facts = _plan_partition(store, pp, target, topic, partition, topic_id, md, opts)
            pp.facts = facts
            key = (topic, partition)
            new[LOG_START_OFFSET_CHECKPOINT][key] = facts["logStartOffset"]
            if not facts["localSegments"]:
                new[RECOVERY_POINT_CHECKPOINT][key] = facts["logEndOffset"]
                new[REPLICATION_OFFSET_CHECKPOINT][key] = facts["logEndOffset"]
    for name in (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
        if new[name] != cps[name] or not (dst / name).exists():
            cp = OffsetCheckpoint.from_mapping(dict(sorted(new[name].items())))
            dp.ops.append(WriteFile(str(dst / name), note(dst, "op.rehydratedCheckpoint"), Blob(cp.to_bytes()),
                                    existed=(dst / name).exists()))
    dp.fingerprints = read_data_dir(dst).fingerprints()
    return plan


def _plan_partition(store: LocalTieredStorageLayout, pp: PartitionPlan, target: Path, topic: str, partition: int,
                    topic_id: str, md, opts: RehydrateOptions) -> dict:
    segs = store.segments(topic, partition, topic_id)
    if md.found:  # only what the metadata says the broker serves
        kept = []
        for s in segs:
            m = md.segments.get(s.segment_id)
            state = m.state if m is not None else None
            if state == "COPY_SEGMENT_FINISHED":
                kept.append(s)
            else:
                pp.notes.append(note(pp.dir, "rehydrate.skipped", startOffset=s.start_offset,
                                     segmentId=s.segment_id, state=state))
        segs = kept
        for sid, m in md.segments.items():
            if m.topic == topic and m.partition == partition and m.topic_id == topic_id and m.state and \
                    m.state.startswith("DELETE_SEGMENT"):
                pp.losses.append(Loss("", m.start_offset, m.end_offset, bytes=m.size or 0, note=note(
                    pp.dir, "loss.remoteDeleted", segmentId=sid, state=m.state)))
    segs = [s for s in segs if "log" in s.files]
    local_files: list[Path] = []
    local_bases: list[int] = []
    if target.is_dir():
        # files the broker was deleting (``.deleted``, left by a stop before its async delete) are not carried over
        local_files = sorted(p for p in target.iterdir() if p.is_file() and not p.name.endswith(".deleted"))
        local_bases = sorted(int(p.name[:-4]) for p in local_files if p.name.endswith(".log")
                             and p.name[:-4].isdigit())
    local_base = local_bases[0] if local_bases else None
    chosen: list[tuple[RemoteSegment, int]] = []
    nxt: int | None = None
    for s in segs:
        p = store.local_path(s, "log")
        assert p is not None
        with Segment(p, s.start_offset) as sg:
            end = sg.read_next_offset() - 1
        if local_base is not None and end >= local_base:
            continue  # the local log holds these offsets
        if nxt is not None and s.start_offset != nxt:
            what = "gap" if s.start_offset > nxt else "overlap"
            raise ConfigError(f"{what} in the remote log of {topic}-{partition}: the segment {s.start_offset}-"
                              f"{s.segment_id} starts at {s.start_offset}, the previous one ends at {nxt - 1}")
        chosen.append((s, end))
        nxt = end + 1
    if not chosen and local_base is None:
        raise LogDirError(f"no remote segment to rehydrate {topic}-{partition} from", store.root)
    if local_base is not None and nxt is not None and nxt != local_base:
        raise ConfigError(f"gap between the remote log of {topic}-{partition} (ends at {nxt - 1}) and its local "
                          f"log (first segment at {local_base})")
    files: list[StagedFile] = []
    cache = LeaderEpochCache(None, [], auto_flush=False)
    rebuilt = []
    nbytes = 0
    for s, _end in chosen:
        base = s.start_offset
        lp = store.local_path(s, "log")
        assert lp is not None
        size = lp.stat().st_size
        nbytes += size
        files.append(StagedFile(offset_file_name(base, ".log"), Blob(src=str(lp), offset=0, size=size)))
        if _index_ok(store, s):
            for kind, suffix in (("index", ".index"), ("timeindex", ".timeindex")):
                ip = store.local_path(s, kind)
                assert ip is not None
                files.append(StagedFile(offset_file_name(base, suffix), Blob(ip.read_bytes())))
        else:
            r = recover_segment(lp.read_bytes(), base, path=str(lp), on_overflow="stop")
            files.append(StagedFile(offset_file_name(base, ".index"), Blob(r.offset_index.to_bytes())))
            files.append(StagedFile(offset_file_name(base, ".timeindex"), Blob(r.time_index.to_bytes())))
            rebuilt.append(base)
        tp_ = store.local_path(s, "txnindex")
        if tp_ is not None:
            files.append(StagedFile(offset_file_name(base, ".txnindex"), Blob(tp_.read_bytes())))
        ep = store.local_path(s, "leader_epoch_checkpoint")
        if ep is not None:
            for e in read_leader_epoch_checkpoint(ep).entries:
                cache.assign(e.epoch, e.start_offset)
    if rebuilt:
        pp.notes.append(note(pp.dir, "rehydrate.indexesRebuilt", baseOffsets=list(rebuilt)))
    local_names = {p.name for p in local_files}
    if chosen and not local_bases:
        last, end = chosen[-1]
        sp = store.local_path(last, "snapshot")
        if sp is not None:
            files.append(StagedFile(snapshot_file_name(end + 1), Blob(sp.read_bytes())))
    for p in local_files:
        if p.name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE):
            continue
        files.append(StagedFile(p.name, Blob(src=str(p), offset=0, size=p.stat().st_size), p.stat().st_mtime_ns))
    if LEADER_EPOCH_CHECKPOINT in local_names:
        for e in read_leader_epoch_checkpoint(target / LEADER_EPOCH_CHECKPOINT).entries:
            cache.assign(e.epoch, e.start_offset)
    lso = chosen[0][0].start_offset if chosen else local_base
    leo = nxt if not local_bases else None
    if leo is not None:
        cache.truncate_from_end(leo)
    cache.truncate_from_start(lso)  # type: ignore[arg-type]
    files.append(StagedFile(LEADER_EPOCH_CHECKPOINT, Blob(cache.to_bytes())))
    new_id = check_topic_id(opts.topic_id) if opts.topic_id else topic_id
    files.append(StagedFile(PARTITION_METADATA_FILE, Blob(PartitionMetadata(new_id).to_bytes())))
    why = note(pp.dir, "op.rehydratedPartition", remoteSegments=len(chosen), store=str(store.root),
               localSegments=len(local_bases))
    pp.ops.append(InstallPartition(str(target), why, files, sorted(local_names)))
    return {"topicId": new_id, "remoteTopicId": topic_id, "remoteSegments": [f"{s.start_offset}-{s.segment_id}" for s, _ in chosen],
            "localSegments": len(local_bases), "bytes": nbytes, "logStartOffset": lso,
            "logEndOffset": leo, "rebuiltIndexes": rebuilt}


def rehydrate(store: LocalTieredStorageLayout, data_dir: str | os.PathLike, opts: RehydrateOptions | None = None,
              *, dry_run: bool = False):
    """Plan and (unless ``dry_run``) apply; returns ``(plan, ApplyResult | None)``."""

    plan = plan_rehydrate(store, data_dir, opts)
    if dry_run:
        return plan, None
    return plan, apply(plan, backup=False)


__all__ = ["RehydrateOptions", "plan_rehydrate", "rehydrate"]
