"""One partition directory (``UnifiedLog``/``LocalLog`` as loaded, read-only).

``PartitionLog(path)`` lists the segments (ordered by base offset), producer snapshots, the leader-epoch
checkpoint, ``partition.metadata`` and leftover temporary files, without modifying anything. Anomalies found
while listing (names that do not parse, orphaned indexes, symlinks leaving the directory, ...) are collected
in :attr:`PartitionLog.findings` instead of raising.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import KafkaLogError, LogDirError
from .files._java import parse_java_int
from .files.findings import Finding, error, info, warning
from .files.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    LeaderEpochCheckpoint,
    read_leader_epoch_checkpoint,
)
from .files.names import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_SUFFIXES,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TMP_FILE_SUFFIX,
    offset_from_file_name,
    temp_suffix,
)
from .files.partition_metadata import PARTITION_METADATA_FILE, PartitionMetadata, read_partition_metadata
from .files.producer_snapshot import ProducerSnapshot, read_producer_snapshot
from .files.quorum_state import QUORUM_STATE_FILE
from .files.rebuild import RebuiltIndexes, rebuild_indexes_recovery
from .files.segment import LogOffsetPosition, Segment
from .records import Batch

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
_NS = "[^ \t\n\x0b\f\r]+"  # java.util.regex \S+
_SUFFIXED_DIR = {
    s: re.compile(f"^({_NS})-({_NS})\\.({_NS}){re.escape(s)}$", re.DOTALL)
    for s in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)
}
METADATA_TOPIC = "__cluster_metadata"
KRAFT_SNAPSHOT_SUFFIX = ".checkpoint"
KRAFT_SNAPSHOT_PART_SUFFIX = ".checkpoint.part"


@dataclass(frozen=True)
class TopicPartitionDir:
    """A parsed partition directory name."""

    topic: str
    partition: int
    kind: str  # 'live' | 'delete' | 'future' | 'stray'
    unique_id: str | None = None  # the 32-hex uuid of -delete/-future/-stray names

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def parse_topic_partition_name(name: str) -> TopicPartitionDir:
    """``LocalLog.parseTopicPartitionName``; :class:`LogDirError` for a name Kafka would reject."""
    def bad() -> LogDirError:
        return LogDirError(
            f"{name!r} is not in the form of topic-partition or topic-partition.uniqueId-delete "
            "(if marked for deletion)",
            name,
        )

    if not name or "-" not in name:
        raise bad()
    kind, unique = "live", None
    for suffix, pattern in _SUFFIXED_DIR.items():
        if name.endswith(suffix):
            if not pattern.match(name):
                raise bad()
            kind = suffix[1:]
            dot = name.rindex(".")
            unique = name[dot + 1 : -len(suffix)]
            name_part = name[:dot]
            break
    else:
        name_part = name
    i = name_part.rfind("-")
    if i < 0:
        raise bad()
    topic, part = name_part[:i], name_part[i + 1 :]
    if not topic or not part:
        raise bad()
    try:
        partition = parse_java_int(part)
    except ValueError:
        raise bad() from None
    return TopicPartitionDir(topic, partition, kind, unique)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except (ValueError, OSError):
        return False


class PartitionLog:
    """A partition directory, loaded read-only.

    ``log_start_offset_checkpoint`` / ``recovery_point`` / ``high_watermark`` / ``clean_point`` are the
    values the data dir's checkpoints hold for this partition (``DataDir`` passes them); all optional.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        log_start_offset_checkpoint: int | None = None,
        recovery_point: int | None = None,
        high_watermark: int | None = None,
        clean_point: int | None = None,
    ):
        self.path = Path(path)
        if not self.path.is_dir():
            raise LogDirError("not a directory", str(self.path))
        self.tp = parse_topic_partition_name(self.path.name)
        self.log_start_offset_checkpoint = log_start_offset_checkpoint
        self.recovery_point = recovery_point
        self.high_watermark = high_watermark
        self.clean_point = clean_point
        self.findings: list[Finding] = []
        self.segments: list[Segment] = []
        self.snapshot_files: list[tuple[int, Path]] = []
        self.temp_files: list[tuple[Path, str]] = []  # (path, suffix)
        self.kraft_snapshots: list[Path] = []
        self.other_files: list[Path] = []
        self._epochs: LeaderEpochCheckpoint | None | bool = False
        self._metadata: PartitionMetadata | None | bool = False
        self._list()
        self._base_offsets = [s.base_offset for s in self.segments]

    @classmethod
    def open(cls, path: str | os.PathLike, **kw) -> PartitionLog:
        return cls(path, **kw)

    def __repr__(self) -> str:
        return f"PartitionLog({str(self.path)!r}, segments={len(self.segments)})"

    # ---- names -------------------------------------------------------------------------------------------
    @property
    def topic(self) -> str:
        return self.tp.topic

    @property
    def partition(self) -> int:
        return self.tp.partition

    @property
    def dir_kind(self) -> str:
        return self.tp.kind

    @property
    def is_metadata_log(self) -> bool:
        return self.topic == METADATA_TOPIC

    # ---- listing -----------------------------------------------------------------------------------------
    def _list(self) -> None:
        logs: dict[int, Path] = {}
        prefixes_with_log: set[str] = set()
        index_files: list[Path] = []
        entries = sorted(os.scandir(self.path), key=lambda e: e.name)
        for entry in entries:
            p = Path(entry.path)
            name = entry.name
            if entry.is_symlink() and not _inside(p, self.path):
                self.findings.append(warning(p, None, "layout", "symlink leaving the partition directory: not followed"))
                continue
            if entry.is_dir():
                self.findings.append(info(p, None, "layout", "unexpected sub-directory in a partition directory"))
                continue
            if not entry.is_file():
                self.findings.append(warning(p, None, "layout", "not a regular file (or a dangling symlink)"))
                continue
            suffix = temp_suffix(name)
            if suffix is not None and not name.endswith(".checkpoint.deleted"):
                self.temp_files.append((p, suffix))
                continue
            if name.endswith(LOG_FILE_SUFFIX):
                try:
                    base = offset_from_file_name(name)
                except ValueError:
                    self.findings.append(error(p, None, "layout", "log file name does not start with an offset"))
                    continue
                if base < 0:
                    self.findings.append(error(p, None, "layout", f"negative base offset {base}"))
                    continue
                if base in logs:
                    self.findings.append(
                        error(p, None, "layout", f"two log files with base offset {base}: {logs[base].name}, {name}")
                    )
                    continue
                logs[base] = p
                prefixes_with_log.add(name.split(".", 1)[0])
            elif name.endswith(INDEX_SUFFIXES):
                index_files.append(p)
            elif name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX):
                try:
                    self.snapshot_files.append((offset_from_file_name(name), p))
                except ValueError:
                    self.findings.append(warning(p, None, "snapshot", "snapshot file name does not start with an offset"))
            elif name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE, QUORUM_STATE_FILE):
                continue
            elif self.is_metadata_log and (
                name.endswith(KRAFT_SNAPSHOT_SUFFIX) or name.endswith(KRAFT_SNAPSHOT_PART_SUFFIX)
                or name.endswith(".checkpoint.deleted")
            ):
                self.kraft_snapshots.append(p)
            else:
                self.other_files.append(p)
                self.findings.append(info(p, None, "layout", "file Kafka does not use in a partition directory"))
        for p in index_files:
            if p.name.split(".", 1)[0] not in prefixes_with_log:
                self.findings.append(
                    warning(p, None, "index", "orphaned index file without a .log (Kafka deletes it at load)")
                )
        self.segments = [Segment(logs[b], b) for b in sorted(logs)]
        self.snapshot_files.sort()

    # ---- segments ----------------------------------------------------------------------------------------
    @property
    def active_segment(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    def floor_segment(self, offset: int) -> Segment | None:
        """The segment with the largest base offset <= ``offset``."""
        i = bisect.bisect_right(self._base_offsets, offset) - 1
        return self.segments[i] if i >= 0 else None

    def higher_segment(self, segment: Segment) -> Segment | None:
        i = bisect.bisect_right(self._base_offsets, segment.base_offset)
        return self.segments[i] if i < len(self.segments) else None

    @property
    def size(self) -> int:
        """Sum of the ``.log`` sizes (``UnifiedLog.size``)."""
        return sum(s.size for s in self.segments)

    # ---- offsets -----------------------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        """``max(checkpoint, first segment base)``; the checkpoint alone when there is no segment."""
        first = self.segments[0].base_offset if self.segments else None
        ckpt = self.log_start_offset_checkpoint
        if first is None:
            return ckpt or 0
        return first if ckpt is None else max(ckpt, first)

    @property
    def log_end_offset(self) -> int:
        """``readNextOffset`` of the last segment (scan from its last offset-index entry)."""
        seg = self.active_segment
        if seg is None:
            return self.log_start_offset
        return seg.read_next_offset()

    def lookup(self, offset: int) -> tuple[Segment, LogOffsetPosition] | None:
        """Where the broker would start reading ``offset``: floor segment by base offset, its sparse index,
        a short scan; then later segments if the floor one holds nothing at or after ``offset``.
        ``None`` if no batch holds an offset >= ``offset``."""
        seg = self.floor_segment(offset)
        if seg is None:
            seg = self.segments[0] if self.segments else None
        while seg is not None:
            found = seg.translate_offset(offset)
            if found is not None:
                return seg, found
            seg = self.higher_segment(seg)
        return None

    def lookup_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``fetchOffsetByTimestamp`` over local segments: ``(timestamp, offset)`` of the first record with
        timestamp >= ``timestamp`` at or after the log start offset."""
        start = self.log_start_offset
        for seg in self.segments:
            if seg.largest_timestamp() >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, start)
                if found is not None:
                    return found
        return None

    def iter_batches(self, start_offset: int | None = None) -> Iterator[tuple[Segment, Batch]]:
        """Batches of every segment in order, from the batch holding ``start_offset`` when given."""
        if start_offset is None:
            for seg in self.segments:
                for b in seg.iter_batches():
                    yield seg, b
            return
        found = self.lookup(start_offset)
        if found is None:
            return
        seg0, pos = found
        for b in seg0.iter_batches(pos.position):
            yield seg0, b
        s = self.higher_segment(seg0)
        while s is not None:
            for b in s.iter_batches():
                yield s, b
            s = self.higher_segment(s)

    # ---- per-partition files -----------------------------------------------------------------------------
    @property
    def leader_epoch_checkpoint_path(self) -> Path:
        return self.path / LEADER_EPOCH_CHECKPOINT

    @property
    def partition_metadata_path(self) -> Path:
        return self.path / PARTITION_METADATA_FILE

    @property
    def leader_epoch_checkpoint(self) -> LeaderEpochCheckpoint | None:
        """The parsed ``leader-epoch-checkpoint`` (None if absent); raises CorruptCheckpointError."""
        if self._epochs is False:
            p = self.leader_epoch_checkpoint_path
            self._epochs = read_leader_epoch_checkpoint(p) if p.exists() else None
        return self._epochs  # type: ignore[return-value]

    @property
    def leader_epochs(self) -> list[EpochEntry]:
        c = self.leader_epoch_checkpoint
        return [] if c is None else list(c.entries)

    @property
    def partition_metadata(self) -> PartitionMetadata | None:
        if self._metadata is False:
            p = self.partition_metadata_path
            self._metadata = read_partition_metadata(p) if p.exists() else None
        return self._metadata  # type: ignore[return-value]

    @property
    def topic_id(self) -> str | None:
        m = self.partition_metadata
        return None if m is None else m.topic_id

    def snapshot_offsets(self) -> list[int]:
        return [o for o, _ in self.snapshot_files]

    def read_snapshot(self, offset: int) -> ProducerSnapshot:
        for o, p in self.snapshot_files:
            if o == offset:
                return read_producer_snapshot(p)
        raise LogDirError(f"no producer snapshot at offset {offset}", str(self.path))

    def latest_snapshot_at_or_below(self, offset: int) -> tuple[int, ProducerSnapshot] | None:
        """The newest *valid* snapshot with offset <= ``offset`` (corrupt ones are skipped, as Kafka does)."""
        for o, p in reversed(self.snapshot_files):
            if o <= offset:
                try:
                    return o, read_producer_snapshot(p)
                except KafkaLogError:
                    continue
        return None

    def leftover_files(self) -> dict[str, list[Path]]:
        """Temporary files grouped by suffix (``.swap``, ``.cleaned``, ``.deleted``, ``.tmp``)."""
        out: dict[str, list[Path]] = {s: [] for s in (SWAP_FILE_SUFFIX, CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX,
                                                      TMP_FILE_SUFFIX)}
        for p, s in self.temp_files:
            out[s].append(p)
        return out

    # ---- rebuilds ----------------------------------------------------------------------------------------
    def producer_replay_inputs(self, segment: Segment) -> tuple[ProducerSnapshot | None, Iterator[Batch]]:
        """What recovery of ``segment`` starts from: the newest valid snapshot <= its base offset and the
        batches between that snapshot and the segment (as ``rebuildProducerState``)."""
        found = self.latest_snapshot_at_or_below(segment.base_offset)
        snap_offset, snap = (found if found is not None else (self.log_start_offset, None))

        def batches() -> Iterator[Batch]:
            for seg in self.segments:
                if seg.base_offset >= segment.base_offset:
                    break
                nxt = self.higher_segment(seg)
                if nxt is not None and nxt.base_offset <= snap_offset:
                    continue
                for b in seg.iter_batches():
                    if b.last_offset >= snap_offset:
                        yield b

        return snap, batches()

    def rebuild_segment_indexes(self, segment: Segment, *, index_interval_bytes: int = 4096) -> RebuiltIndexes:
        """All three indexes of ``segment`` as Kafka's recovery would write them (``LogSegment.recover`` with
        producer state from the newest valid snapshot at or below the segment and the batches after it)."""
        snap, prior = self.producer_replay_inputs(segment)
        return rebuild_indexes_recovery(segment.buf, segment.base_offset, index_interval_bytes=index_interval_bytes,
                                        path=str(segment.path), prior_batches=prior, snapshot=snap,
                                        with_txn_index=True)

    # ---- lifecycle ---------------------------------------------------------------------------------------
    def close(self) -> None:
        for s in self.segments:
            s.close()

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
