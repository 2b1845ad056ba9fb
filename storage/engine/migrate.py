"""Copy partitions into another data dir, rewriting what must change (``kafkalog migrate``); topic ids are
:mod:`.topic_id`'s, the data dir's offset checkpoints :mod:`.offset_checkpoints`'.

A migrated partition is first assembled in a staging directory beside the destination data dir (same file
system): segments copied (the last one cut at ``to_offset`` on a batch boundary, its indexes rebuilt by the
broker's recovery rule and its ``.txnindex`` trimmed), producer snapshots up to the new log end offset,
``leader-epoch-checkpoint`` truncated as ``LeaderEpochFileCache`` would (end and start), ``partition.metadata``
with the destination topic id. Everything is fsynced, then the staging directory is renamed into place and the
data dir fsynced. The destination's four offset checkpoints are then merged atomically (tmp, fsync, rename):

* ``recovery-point-offset-checkpoint`` = the new log end offset (the copy is flushed: nothing to recover);
* ``log-start-offset-checkpoint`` = ``max(source log start offset, from_offset)``, listed only when above the
  first segment's base offset (as Kafka writes it);
* ``replication-offset-checkpoint`` (high watermark) = the source's, capped at the new log end offset;
* ``cleaner-offset-checkpoint`` = the source's clean point when it lies inside the copied range.

A new destination data dir gets a ``meta.properties`` (v1, KRaft) for ``cluster_id``/``node_id``.
Existing partitions are refused unless ``overwrite`` (then the old one is kept in the backup folder).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from kafkalog.storage.engine.offset_checkpoints import read_checkpoint, read_checkpoints
from kafkalog.storage.engine.plan import DataDirPlan, PartitionPlan, Plan
from kafkalog.storage.engine.targets import read_data_dir
from kafkalog.storage.engine.topic_id import check_topic_id, new_topic_id
from kafkalog.storage.errors import ConfigError, LogDirError
from kafkalog.storage.files.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    DATA_DIR_CHECKPOINTS,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from kafkalog.storage.files.findings import note
from kafkalog.storage.files.leader_epoch import LEADER_EPOCH_CHECKPOINT
from kafkalog.storage.files.meta_properties import META_PROPERTIES_FILE, MetaProperties, read_meta_properties
from kafkalog.storage.files.names import offset_file_name, offset_from_file_name
from kafkalog.storage.files.partition_metadata import PARTITION_METADATA_FILE, PartitionMetadata
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.files.txn_index import TransactionIndex
from kafkalog.storage.io import fileops
from kafkalog.storage.io.ops import Blob, Op, WriteFile
from kafkalog.storage.log.datadir import resolve_partition_dirs
from kafkalog.storage.log.leader_epoch_cache import LeaderEpochCache
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.segment import recover_segment
from kafkalog.storage.log.topic_partition import parse_topic_partition_name, partition_path, validate_topic


@dataclass
class MigrateOptions:
    topic: str | None = None  # rename the topic (partition dir name and checkpoint entries)
    topic_id: str | None = None  # the destination cluster's topic id (default: keep the source's)
    cluster_id: str | None = None  # for a new destination meta.properties (and checked against an existing one)
    node_id: int | None = None
    partition: int | None = None  # renumber (single partition only)
    from_offset: int | None = None  # new log start offset (segments wholly below it are not copied)
    to_offset: int | None = None  # copy only complete batches below it
    overwrite: bool = False


@dataclass
class PartitionMigration:
    source: str
    dest: str
    topic: str
    partition: int
    topic_id: str | None
    segments: list[str]
    bytes: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    cleaner_offset: int | None
    replaced: bool = False

    def to_dict(self) -> dict:
        return {"source": self.source, "dest": self.dest, "topic": self.topic, "partition": self.partition,
                "topicId": self.topic_id, "segments": len(self.segments), "bytes": self.bytes,
                "logStartOffset": self.log_start_offset, "logEndOffset": self.log_end_offset,
                "highWatermark": self.high_watermark, "cleanerOffset": self.cleaner_offset,
                "replaced": self.replaced}


@dataclass
class StagedFile:
    name: str
    blob: Blob
    mtime_ns: int | None = None


@dataclass
class InstallPartition(Op):
    """Assemble a partition in a staging directory beside the destination data dir (every file written and
    fsynced), then rename it into place (an existing partition is moved aside first and removed after)."""

    kind: ClassVar[str] = "install-partition"
    files: list[StagedFile] = field(default_factory=list)
    replaces: list[str] = field(default_factory=list)  # files of the existing partition dir it replaces

    def originals(self) -> list[tuple[str, bool]]:
        return [(str(Path(self.path) / n), False) for n in self.replaces]

    def run(self) -> None:
        target = Path(self.path)
        dst = target.parent
        token = f"{os.getpid()}-{secrets.token_hex(3)}"
        stage = dst.parent / f".kafkalog-migrate-{dst.name}-{target.name}-{token}"
        fileops.mkdir(stage)
        try:
            for sf in self.files:
                with fileops.NewFile(stage / sf.name) as f:
                    sf.blob.write_to(f)
                if sf.mtime_ns is not None:
                    fileops.set_mtime(stage / sf.name, sf.mtime_ns)
            fileops.fsync_dir(stage)
            if target.exists():
                old = dst.parent / f".kafkalog-migrate-old-{target.name}-{token}"
                fileops.rename(target, old)
                fileops.rename(stage, target)
                fileops.fsync_dir(dst)
                fileops.rmtree(old)
            else:
                fileops.rename(stage, target)
                fileops.fsync_dir(dst)
        finally:
            if stage.exists():
                fileops.rmtree(stage)

    def trace(self) -> tuple:
        return (self.kind, self.path, tuple(sorted(f.name for f in self.files)))

    def to_dict(self) -> dict:
        return {**super().to_dict(), "files": [f.name for f in self.files], "replaces": bool(self.replaces)}



def _cut(seg: Segment, to_offset: int) -> tuple[int, int]:
    """(bytes of the complete batches whose offsets are all below ``to_offset``, next offset after them)."""
    end = 0
    nxt = seg.base_offset
    for b in seg.iter_batches():
        if b.next_offset > to_offset:
            del b
            break
        end = b.position + b.size
        nxt = b.next_offset
        del b
    return end, nxt


def _log_end(seg: Segment) -> tuple[int, int]:
    """(bytes of the complete batches, next offset after them)."""
    sc = seg.scanner()
    nxt = seg.base_offset
    for b in sc:
        nxt = b.next_offset
        del b
    end = sc.stop_position
    del sc
    return end, nxt


def _stage_files(src: Path, topic: str, partition: int, opts: MigrateOptions, cps: dict,
                 src_tp: tuple[str, int]) -> tuple[list[StagedFile], PartitionMigration]:
    """The files of the migrated partition (read-only on the source)."""
    log = PartitionLog(src)
    bases = [s.base_offset for s in log.segments]
    first_base = bases[0] if bases else 0
    src_lso = max(cps[LOG_START_OFFSET_CHECKPOINT].get(src_tp, first_base), first_base)
    lso = max(src_lso, opts.from_offset if opts.from_offset is not None else src_lso)
    files: list[StagedFile] = []
    leo = None
    chosen: list[Segment] = []
    for i, seg in enumerate(log.segments):
        nxt_base = bases[i + 1] if i + 1 < len(bases) else None
        if nxt_base is not None and nxt_base <= lso:
            continue  # wholly below the new log start offset
        if opts.to_offset is not None and seg.base_offset >= opts.to_offset and chosen:
            break
        chosen.append(seg)

    def copy(name: str, limit: int | None = None) -> None:
        p = src / name
        st = p.stat()
        files.append(StagedFile(name, Blob(src=str(p), offset=0, size=st.st_size if limit is None else limit),
                                st.st_mtime_ns))

    nbytes = 0
    for i, seg in enumerate(chosen):
        base = seg.base_offset
        last = i == len(chosen) - 1
        limit = None
        if last and opts.to_offset is not None:
            limit, leo = _cut(seg, opts.to_offset)
        elif last:
            limit, leo = _log_end(seg)
        copy(seg.path.name, limit)
        nbytes += files[-1].blob.size
        if limit is not None and limit < seg.size:
            r = recover_segment(seg.buf[:limit], base, path=str(seg.path), on_overflow="stop")
            files.append(StagedFile(offset_file_name(base, ".index"), Blob(r.offset_index.to_bytes())))
            files.append(StagedFile(offset_file_name(base, ".timeindex"), Blob(r.time_index.to_bytes())))
            if seg.has_txn_index:
                keep = [e for e in seg.txn_index if e.last_offset < (leo or base)]
                files.append(StagedFile(offset_file_name(base, ".txnindex"),
                                        Blob(TransactionIndex.from_entries(base, keep).to_bytes())))
        else:
            for suffix in (".index", ".timeindex", ".txnindex"):
                if (src / offset_file_name(base, suffix)).is_file():
                    copy(offset_file_name(base, suffix))
    if leo is None:
        leo = lso
    lso = min(lso, leo)
    for off, p in log.snapshot_files:  # producer snapshots up to the new log end offset
        if off <= leo and (not chosen or off >= chosen[0].base_offset):
            copy(p.name)
    cache = LeaderEpochCache(None, log.leader_epochs if log.view.exists(LEADER_EPOCH_CHECKPOINT) else [],
                             auto_flush=False)
    cache.truncate_from_end(leo)
    cache.truncate_from_start(lso)
    files.append(StagedFile(LEADER_EPOCH_CHECKPOINT, Blob(cache.to_bytes())))
    topic_id = opts.topic_id
    if topic_id is None and log.view.exists(PARTITION_METADATA_FILE) and log.view.size(PARTITION_METADATA_FILE):
        topic_id = log.topic_id
    if topic_id is not None:
        files.append(StagedFile(PARTITION_METADATA_FILE, Blob(PartitionMetadata(check_topic_id(topic_id)).to_bytes())))
    if not chosen:  # an empty log still needs its active segment file
        files.append(StagedFile(offset_file_name(lso, ".log"), Blob(b"")))
    hw = min(cps[REPLICATION_OFFSET_CHECKPOINT].get(src_tp, leo), leo)
    cleaner = cps[CLEANER_OFFSET_CHECKPOINT].get(src_tp)
    if cleaner is not None and not (lso <= cleaner <= leo):
        cleaner = None
    segs = [f.name for f in files if f.name.endswith(".log")]
    log.close()
    return files, PartitionMigration(str(src), "", topic, partition, topic_id, segs, nbytes, lso, leo, hw, cleaner)


def _meta_properties(dest: Path, opts: MigrateOptions) -> bytes | None:
    """The ``meta.properties`` a new destination gets (None: it has one, checked against the options)."""
    mp = dest / META_PROPERTIES_FILE
    if mp.exists():
        meta = read_meta_properties(mp)
        if opts.cluster_id is not None and meta.cluster_id not in (None, opts.cluster_id):
            raise LogDirError(f"destination belongs to cluster {meta.cluster_id}, not {opts.cluster_id}", str(mp))
        if opts.node_id is not None and meta.node_id not in (None, opts.node_id):
            raise LogDirError(f"destination belongs to node {meta.node_id}, not {opts.node_id}", str(mp))
        return None
    if opts.cluster_id is None or opts.node_id is None:
        raise ConfigError(f"{dest} has no meta.properties: give --cluster-id and --node-id to create one "
                          "(or run `kafka-storage format` there first)")
    return MetaProperties.new(version=1, cluster_id=opts.cluster_id, node_id=opts.node_id,
                              directory_id=new_topic_id()).to_bytes()


@dataclass
class _NewDataDir(Op):
    kind: ClassVar[str] = "create-dir"

    def run(self) -> None:
        fileops.mkdir(self.path, parents=True, exist_ok=True)


def plan_migrate(source: str | os.PathLike, dest: str | os.PathLike, opts: MigrateOptions | None = None) -> Plan:
    """The plan of ``kafkalog migrate``: copy the partition(s) of ``source`` (a partition dir or a data dir) into
    the data dir ``dest``, rewriting what must change; then the destination's checkpoints."""
    opts = opts or MigrateOptions()
    src = Path(source)
    dst = Path(os.path.abspath(dest))
    pdirs = resolve_partition_dirs(src)
    if not pdirs:
        raise LogDirError("no partition directories found", str(src))
    if opts.topic is not None and len({parse_topic_partition_name(p.name).topic for p in pdirs}) > 1:
        raise ConfigError("--topic renames one topic: the source holds several")
    if opts.partition is not None and len(pdirs) > 1:
        raise ConfigError("--partition renumbers one partition: the source holds several")
    if opts.topic_id is not None:
        check_topic_id(opts.topic_id)
    if opts.topic is not None:
        validate_topic(opts.topic)
    for name, off in (("--from-offset", opts.from_offset), ("--to-offset", opts.to_offset)):
        if off is not None and off < 0:
            raise ConfigError(f"{name} {off} is negative: an offset is 0 or more")
    if opts.from_offset is not None and opts.to_offset is not None and opts.to_offset < opts.from_offset:
        raise ConfigError("--to-offset is below --from-offset")
    if dst.exists() and dst.resolve() in {p.parent.resolve() for p in pdirs}:
        raise ConfigError("the destination is the source data dir (use --topic to copy under a new name)"
                          if opts.topic is None else "renaming inside one data dir is not supported: "
                          "migrate into another data dir")
    plan = Plan("migrate", options={"source": str(src), "dest": str(dst)})
    dp = DataDirPlan(str(dst))
    plan.data_dirs.append(dp)
    pre: list[Op] = []
    if not dst.exists():
        pre.append(_NewDataDir(str(dst), note(dst, "op.newDataDir")))
    mp = _meta_properties(dst, opts) if dst.exists() else _meta_properties_new(opts)
    if mp is not None:
        pre.append(WriteFile(str(dst / META_PROPERTIES_FILE), note(dst, "op.newMetaProperties"), Blob(mp)))
    cps_dst = read_checkpoints(dst)
    new = {n: dict(v) for n, v in cps_dst.items()}
    for p in pdirs:
        tp = parse_topic_partition_name(p.name)
        new_topic = opts.topic or tp.topic
        new_part = opts.partition if opts.partition is not None else tp.partition
        target = partition_path(dst, new_topic, new_part)  # a valid name, inside the destination
        existing = sorted(f.name for f in target.iterdir() if f.is_file()) if target.is_dir() else []
        if target.exists() and not opts.overwrite:
            raise LogDirError(f"partition {target.name} already exists in the destination (use --overwrite)",
                              str(target))
        d = p.parent
        cps = read_checkpoints(d)
        files, m = _stage_files(p, new_topic, new_part, opts, cps, (tp.topic, tp.partition))
        m.dest, m.replaced = str(target), target.exists()
        pp = PartitionPlan(str(dst), str(target), new_topic, new_part, facts=m.to_dict())
        pp.ops.append(InstallPartition(str(target), note(target, "op.partitionCopy", source=str(p),
                                                         replaces=bool(existing)), files, existing))
        dp.partitions.append(pp)
        key = (new_topic, new_part)
        first_base = offset_from_file_name(m.segments[0]) if m.segments else m.log_start_offset
        new[RECOVERY_POINT_CHECKPOINT][key] = m.log_end_offset
        if m.log_start_offset > first_base:
            new[LOG_START_OFFSET_CHECKPOINT][key] = m.log_start_offset
        else:
            new[LOG_START_OFFSET_CHECKPOINT].pop(key, None)
        new[REPLICATION_OFFSET_CHECKPOINT][key] = m.high_watermark
        if m.cleaner_offset is None:
            new[CLEANER_OFFSET_CHECKPOINT].pop(key, None)
        else:
            new[CLEANER_OFFSET_CHECKPOINT][key] = m.cleaner_offset
    dp.pre_ops = pre  # the new data dir and its meta.properties come first
    for name in DATA_DIR_CHECKPOINTS:
        if new[name] != cps_dst[name] or not (dst / name).exists():
            cp = read_checkpoint(dst / name)
            cp.set_offsets(new[name])
            dp.ops.append(WriteFile(str(dst / name), note(dst, "op.migratedCheckpoints"), Blob(cp.to_bytes()),
                                    existed=(dst / name).exists()))
    if dst.exists():
        dp.fingerprints = read_data_dir(dst).fingerprints()
    return plan


def _meta_properties_new(opts: MigrateOptions) -> bytes:
    if opts.cluster_id is None or opts.node_id is None:
        raise ConfigError("the destination does not exist: give --cluster-id and --node-id to create its "
                          "meta.properties")
    return MetaProperties.new(version=1, cluster_id=opts.cluster_id, node_id=opts.node_id,
                              directory_id=new_topic_id()).to_bytes()


__all__ = ["InstallPartition", "MigrateOptions", "PartitionMigration", "StagedFile", "plan_migrate"]
