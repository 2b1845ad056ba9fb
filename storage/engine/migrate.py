"""Copy partitions into another data dir, rewriting what must change (``kafkalog migrate``), and edit topic ids
(``kafkalog topic-id``) and data-dir checkpoints (``kafkalog checkpoints``) offline.

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
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import fsync_dir
from ..diff import mapped
from ..errors import ConfigError, LogDirError
from ..files._java import ZERO_UUID, uuid_from_string, uuid_to_string
from ..files.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    DATA_DIR_CHECKPOINTS,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpoint,
    TopicPartitionOffset,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from ..files.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)
from ..files.meta_properties import (
    META_PROPERTIES_FILE,
    MetaProperties,
    read_meta_properties,
    write_meta_properties,
)
from ..files.names import offset_from_file_name, segment_log_files
from ..files.partition_metadata import (
    PARTITION_METADATA_FILE,
    read_partition_metadata,
    write_partition_metadata,
)
from ..files.rebuild import rebuild_indexes_recovery
from ..files.txn_index import TransactionIndex, read_txn_index
from ..log import parse_topic_partition_name
from ..logdir import resolve_partition_dirs
from ..records import LogScanner
from .plan import Backup, data_dir_lock
from .swap import offset_file_name

_COPY_CHUNK = 8 << 20


def new_topic_id() -> str:
    """A random topic id as ``Uuid.randomUuid`` makes it (never the reserved ids, never starting with '-')."""
    while True:
        raw = uuid.uuid4().bytes
        s = uuid_to_string(raw)
        if raw not in (ZERO_UUID, bytes(15) + b"\x01") and not s.startswith("-"):
            return s


def check_topic_id(topic_id: str) -> str:
    try:
        raw = uuid_from_string(topic_id)
    except ValueError as e:
        raise ConfigError(f"invalid topic id {topic_id!r}: {e}") from None
    if raw == ZERO_UUID:
        raise ConfigError("the zero topic id AAAAAAAAAAAAAAAAAAAAAA is not valid")
    return topic_id


# ------------------------------------------------------------------------------------------- checkpoints


def _read_cp(path: Path) -> OffsetCheckpoint:
    return read_offset_checkpoint(path) if path.exists() else OffsetCheckpoint()


def read_checkpoints(data_dir: str | os.PathLike) -> dict[str, dict[tuple[str, int], int]]:
    """The four offset checkpoints of a data dir (missing files read as empty)."""
    d = Path(data_dir)
    return {name: _read_cp(d / name).to_dict() for name in DATA_DIR_CHECKPOINTS}


def merge_checkpoint(path: str | os.PathLike, updates: dict[tuple[str, int], int | None]) -> None:
    """Set (or, for ``None``, remove) entries of one offset checkpoint file, atomically, keeping the others
    (and the file's line separator) as they are."""
    p = Path(path)
    cp = _read_cp(p)
    entries = {(e.topic, e.partition): e.offset for e in cp.entries}
    for k, v in updates.items():
        if v is None:
            entries.pop(k, None)
        else:
            entries[k] = v
    cp.entries = [TopicPartitionOffset(t, part, o) for (t, part), o in entries.items()]
    cp.form = "full"
    write_offset_checkpoint(p, cp)


CHECKPOINT_ALIASES = {
    "recovery-point": RECOVERY_POINT_CHECKPOINT, "recovery": RECOVERY_POINT_CHECKPOINT,
    "log-start-offset": LOG_START_OFFSET_CHECKPOINT, "log-start": LOG_START_OFFSET_CHECKPOINT,
    "replication-offset": REPLICATION_OFFSET_CHECKPOINT, "high-watermark": REPLICATION_OFFSET_CHECKPOINT,
    "replication": REPLICATION_OFFSET_CHECKPOINT,
    "cleaner-offset": CLEANER_OFFSET_CHECKPOINT, "cleaner": CLEANER_OFFSET_CHECKPOINT,
}


def checkpoint_file_name(name: str) -> str:
    if name in DATA_DIR_CHECKPOINTS:
        return name
    if name in CHECKPOINT_ALIASES:
        return CHECKPOINT_ALIASES[name]
    raise ConfigError(f"unknown checkpoint {name!r} (one of {', '.join(sorted(CHECKPOINT_ALIASES))})")


def set_checkpoints(data_dir: str | os.PathLike, name: str, updates: dict[tuple[str, int], int | None], *,
                    dry_run: bool = False) -> dict[tuple[str, int], tuple[int | None, int | None]]:
    """Set entries of one checkpoint of a data dir under its lock. Returns ``{tp: (old, new)}``."""
    fname = checkpoint_file_name(name)
    d = Path(data_dir)
    before = _read_cp(d / fname).to_dict()
    changes = {tp: (before.get(tp), v) for tp, v in updates.items()}
    if not dry_run:
        with data_dir_lock(d):
            merge_checkpoint(d / fname, updates)
    return changes


# ---------------------------------------------------------------------------------------------- topic id


def set_topic_id(partition_dir: str | os.PathLike, topic_id: str, *, dry_run: bool = False) -> str | None:
    """Write ``partition.metadata`` with ``topic_id`` (atomically, under the data dir's lock). Returns the
    previous topic id (None when there was no file)."""
    check_topic_id(topic_id)
    p = Path(partition_dir)
    f = p / PARTITION_METADATA_FILE
    old = read_partition_metadata(f).topic_id if f.exists() and f.stat().st_size else None
    if not dry_run:
        with data_dir_lock(p.parent):
            write_partition_metadata(f, topic_id)
    return old


# ---------------------------------------------------------------------------------------------- migrate


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
    backup: bool = True
    backup_root: str | None = None


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
class MigrateReport:
    dest: str
    partitions: list[PartitionMigration] = field(default_factory=list)
    created_meta_properties: bool = False
    dry_run: bool = False
    backup: str | None = None


def _copy_file(src: Path, dst: Path, limit: int | None = None) -> None:
    with open(src, "rb") as f, open(dst, "wb") as g:
        if limit is None:
            shutil.copyfileobj(f, g, _COPY_CHUNK)
        else:
            left = limit
            while left > 0:
                chunk = f.read(min(_COPY_CHUNK, left))
                if not chunk:
                    break
                g.write(chunk)
                left -= len(chunk)
        g.flush()
        os.fsync(g.fileno())
    st = src.stat()
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


def _cut(log: Path, base: int, to_offset: int) -> tuple[int, int]:
    """(bytes of the complete batches whose offsets are all below ``to_offset``, next offset after them)."""
    end = 0
    nxt = base
    with mapped(log) as mm:
        for b in LogScanner(mm, path=str(log)):
            if b.next_offset > to_offset:
                break
            end = b.position + b.size
            nxt = b.next_offset
    return end, nxt


def _log_end(log: Path, base: int) -> tuple[int, int]:
    with mapped(log) as mm:
        sc = LogScanner(mm, path=str(log))
        nxt = base
        for b in sc:
            nxt = b.next_offset
        end = sc.stop_position
        del sc
    return end, nxt


def _truncate_epochs(entries: list[EpochEntry], start: int, end: int) -> list[EpochEntry]:
    """``truncateFromEnd(end)`` then ``truncateFromStart(start)`` (``LeaderEpochFileCache``)."""
    out = [e for e in entries if e.start_offset < end]
    removed = [e for e in out if e.start_offset <= start]
    if removed:
        out = [e for e in out if e.start_offset > start]
        out.insert(0, EpochEntry(removed[-1].epoch, start))
    return out


def _source_checkpoints(pdir: Path) -> dict[str, dict[tuple[str, int], int]]:
    d = pdir.parent
    if not any((d / n).exists() for n in DATA_DIR_CHECKPOINTS):
        return {n: {} for n in DATA_DIR_CHECKPOINTS}
    return read_checkpoints(d)


def _stage_partition(src: Path, stage: Path, topic: str, partition: int, opts: MigrateOptions,
                     src_tp: tuple[str, int]) -> PartitionMigration:
    """Assemble the migrated partition in ``stage`` (fsynced). Nothing outside ``stage`` is written."""
    cps = _source_checkpoints(src)
    segs = segment_log_files(src)
    bases = [offset_from_file_name(s.name) for s in segs]
    first_base = bases[0] if bases else 0
    src_lso = max(cps[LOG_START_OFFSET_CHECKPOINT].get(src_tp, first_base), first_base)
    lso = max(src_lso, opts.from_offset if opts.from_offset is not None else src_lso)
    stage.mkdir(parents=True)
    copied: list[str] = []
    nbytes = 0
    leo = None
    chosen = []
    for i, (base, seg) in enumerate(zip(bases, segs, strict=True)):
        nxt_base = bases[i + 1] if i + 1 < len(bases) else None
        if nxt_base is not None and nxt_base <= lso:
            continue  # wholly below the new log start offset
        if opts.to_offset is not None and base >= opts.to_offset and chosen:
            break
        chosen.append((base, seg))
    for i, (base, seg) in enumerate(chosen):
        last = i == len(chosen) - 1
        limit = None
        if last and opts.to_offset is not None:
            limit, leo = _cut(seg, base, opts.to_offset)
        elif last:
            limit, leo = _log_end(seg, base)
        _copy_file(seg, stage / seg.name, limit)
        nbytes += (stage / seg.name).stat().st_size
        copied.append(seg.name)
        truncated = limit is not None and limit < seg.stat().st_size
        if truncated:
            with mapped(stage / seg.name) as mm:
                r = rebuild_indexes_recovery(mm, base, path=str(stage / seg.name))
            r.offset_index.write(stage / offset_file_name(base, ".index"))
            r.time_index.write(stage / offset_file_name(base, ".timeindex"))
            txn = src / offset_file_name(base, ".txnindex")
            if txn.exists():
                with read_txn_index(txn, base) as ti:
                    keep = [e for e in ti if e.last_offset < (leo or base)]
                TransactionIndex.from_entries(base, keep).write(stage / offset_file_name(base, ".txnindex"))
        else:
            for suffix in (".index", ".timeindex", ".txnindex"):
                f = src / offset_file_name(base, suffix)
                if f.exists():
                    _copy_file(f, stage / f.name)
    if leo is None:
        leo = lso
    lso = min(lso, leo)
    # producer snapshots up to the new log end offset
    for f in src.glob("*.snapshot"):
        stem = f.name[:-9]
        if stem.isdigit() and int(stem) <= leo and (not chosen or int(stem) >= chosen[0][0]):
            _copy_file(f, stage / f.name)
    # leader epochs
    lec = src / LEADER_EPOCH_CHECKPOINT
    if lec.exists() and lec.stat().st_size:
        entries = _truncate_epochs(read_leader_epoch_checkpoint(lec).entries, lso, leo)
        write_leader_epoch_checkpoint(stage / LEADER_EPOCH_CHECKPOINT, entries)
    else:
        write_leader_epoch_checkpoint(stage / LEADER_EPOCH_CHECKPOINT, [])
    # topic id
    topic_id = opts.topic_id
    pm = src / PARTITION_METADATA_FILE
    if topic_id is None and pm.exists() and pm.stat().st_size:
        topic_id = read_partition_metadata(pm).topic_id
    if topic_id is not None:
        write_partition_metadata(stage / PARTITION_METADATA_FILE, check_topic_id(topic_id))
    if not copied:  # an empty log still needs its active segment file
        open(stage / offset_file_name(lso, ".log"), "wb").close()
        copied.append(offset_file_name(lso, ".log"))
    fsync_dir(stage)
    hw = min(cps[REPLICATION_OFFSET_CHECKPOINT].get(src_tp, leo), leo)
    cleaner = cps[CLEANER_OFFSET_CHECKPOINT].get(src_tp)
    if cleaner is not None and not (lso <= cleaner <= leo):
        cleaner = None
    return PartitionMigration(str(src), "", topic, partition, topic_id, copied, nbytes, lso, leo, hw, cleaner)


def _ensure_meta_properties(dest: Path, opts: MigrateOptions, dry_run: bool) -> bool:
    mp = dest / META_PROPERTIES_FILE
    if mp.exists():
        meta = read_meta_properties(mp)
        if opts.cluster_id is not None and meta.cluster_id not in (None, opts.cluster_id):
            raise LogDirError(f"destination belongs to cluster {meta.cluster_id}, not {opts.cluster_id}", str(mp))
        if opts.node_id is not None and meta.node_id not in (None, opts.node_id):
            raise LogDirError(f"destination belongs to node {meta.node_id}, not {opts.node_id}", str(mp))
        return False
    if opts.cluster_id is None or opts.node_id is None:
        raise ConfigError(f"{dest} has no meta.properties: give --cluster-id and --node-id to create one "
                          "(or run `kafka-storage format` there first)")
    if not dry_run:
        meta = MetaProperties.new(version=1, cluster_id=opts.cluster_id, node_id=opts.node_id,
                                  directory_id=new_topic_id())
        write_meta_properties(mp, meta)
    return True


def migrate(source: str | os.PathLike, dest: str | os.PathLike, opts: MigrateOptions | None = None, *,
            dry_run: bool = False, progress: Callable[[PartitionMigration], None] | None = None) -> MigrateReport:
    """Copy the partition(s) of ``source`` (a partition dir or a data dir) into the data dir ``dest``."""
    opts = opts or MigrateOptions()
    src = Path(source)
    dst = Path(dest)
    pdirs = resolve_partition_dirs(src)
    if not pdirs:
        raise LogDirError("no partition directories found", str(src))
    if opts.topic is not None and len({parse_topic_partition_name(p.name).topic for p in pdirs}) > 1:
        raise ConfigError("--topic renames one topic: the source holds several")
    if opts.partition is not None and len(pdirs) > 1:
        raise ConfigError("--partition renumbers one partition: the source holds several")
    if opts.topic_id is not None:
        check_topic_id(opts.topic_id)
    if opts.from_offset is not None and opts.to_offset is not None and opts.to_offset < opts.from_offset:
        raise ConfigError("--to-offset is below --from-offset")
    report = MigrateReport(str(dst), dry_run=dry_run)
    if not dst.exists():
        if dry_run:
            report.created_meta_properties = True
        else:
            dst.mkdir(parents=True)
    if dst.resolve() in {p.parent.resolve() for p in pdirs}:
        raise ConfigError("the destination is the source data dir (use --topic to copy under a new name)"
                          if opts.topic is None else "renaming inside one data dir is not supported: "
                          "migrate into another data dir")
    report.created_meta_properties = _ensure_meta_properties(dst, opts, dry_run) if dst.exists() else True
    plan = []
    for p in pdirs:
        tp = parse_topic_partition_name(p.name)
        topic, part = tp.topic, tp.partition
        new_topic = opts.topic or topic
        new_part = opts.partition if opts.partition is not None else part
        target = dst / f"{new_topic}-{new_part}"
        exists = target.exists()
        if exists and not opts.overwrite:
            raise LogDirError(f"partition {target.name} already exists in the destination (use --overwrite)",
                              str(target))
        plan.append((p, (topic, part), new_topic, new_part, target, exists))
    if dry_run:
        for p, _tp, t, part, target, exists in plan:
            segs = segment_log_files(p)
            report.partitions.append(PartitionMigration(
                str(p), str(target), t, part, opts.topic_id, [s.name for s in segs],
                sum(s.stat().st_size for s in segs), -1, -1, -1, None, exists))
        return report
    with data_dir_lock(dst):
        backup = None
        for p, src_tp, t, part, target, exists in plan:
            stage = dst.parent / f".kafkalog-migrate-{dst.name}-{target.name}-{os.getpid()}"
            if stage.exists():
                shutil.rmtree(stage)
            try:
                m = _stage_partition(p, stage, t, part, opts, src_tp)
                if exists:
                    if opts.backup:
                        if backup is None:
                            root = Path(opts.backup_root) if opts.backup_root else Backup.default_root(dst, "migrate")
                            backup = Backup(root, dst)
                            report.backup = str(root)
                        for f in sorted(target.iterdir()):
                            if f.is_file():
                                backup.preserve(f, copy=False)
                    old = dst.parent / f".kafkalog-migrate-old-{target.name}-{os.getpid()}"
                    os.replace(target, old)
                    os.replace(stage, target)
                    fsync_dir(dst)
                    shutil.rmtree(old)
                else:
                    os.replace(stage, target)
                    fsync_dir(dst)
            finally:
                if stage.exists():
                    shutil.rmtree(stage, ignore_errors=True)
            m.dest, m.replaced = str(target), exists
            tp = (t, part)
            first_base = int(m.segments[0][:-4])
            merge_checkpoint(dst / RECOVERY_POINT_CHECKPOINT, {tp: m.log_end_offset})
            merge_checkpoint(dst / LOG_START_OFFSET_CHECKPOINT,
                             {tp: m.log_start_offset if m.log_start_offset > first_base else None})
            merge_checkpoint(dst / REPLICATION_OFFSET_CHECKPOINT, {tp: m.high_watermark})
            merge_checkpoint(dst / CLEANER_OFFSET_CHECKPOINT, {tp: m.cleaner_offset})
            report.partitions.append(m)
            if progress is not None:
                progress(m)
    return report


__all__ = [
    "CHECKPOINT_ALIASES", "MigrateOptions", "MigrateReport", "PartitionMigration", "check_topic_id",
    "checkpoint_file_name", "merge_checkpoint", "migrate", "new_topic_id", "read_checkpoints", "set_checkpoints",
    "set_topic_id",
]
