"""One partition directory: the single partition model every engine and reader uses (``UnifiedLog`` /
``LocalLog`` as loaded).

``PartitionLog(path)`` lists the segments (ordered by base offset), producer snapshots, the leader-epoch
checkpoint, ``partition.metadata`` and leftover temporary files, without modifying anything. Anomalies found
while listing (names that do not parse, orphaned indexes, symlinks leaving the directory, special files, ...)
are collected in :attr:`PartitionLog.findings` instead of raising.

Built on a :class:`~kafkalog.storage.io.dirview.DirView`, a partition can also be read *as a plan has it so far*
(``PartitionLog(view)``): the loader re-reads the partition after it has completed a swap or split a segment.

What the broker derives from the files is here once: log start and end offsets, the high watermark as the log
sees it, the segments covering an offset range, aborted transactions in a range
(``collectAbortedTransactions``), producer state at the log end (``lastRecordsOfActiveProducers``,
``lastStableOffset``). Partition-directory names are parsed here once (:func:`parse_topic_partition_name`).
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkalog.storage.errors import CorruptCheckpointError, CorruptRecordError, KafkaLogError, LogDirError
from kafkalog.storage.files.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from kafkalog.storage.files.findings import Finding, error, info, warning
from kafkalog.storage.files.java import parse_java_int
from kafkalog.storage.files.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    LeaderEpochCheckpoint,
)
from kafkalog.storage.files.names import (
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
from kafkalog.storage.files.partition_metadata import (
    PARTITION_METADATA_FILE,
    PartitionMetadata,
    read_partition_metadata,
)
from kafkalog.storage.files.producer_snapshot import ProducerSnapshot
from kafkalog.storage.files.quorum_state import QUORUM_STATE_FILE
from kafkalog.storage.files.segment import LogOffsetPosition, Segment
from kafkalog.storage.files.txn_index import AbortedTxn
from kafkalog.storage.io.dirview import DANGLING, DIR, FILE, SPECIAL, SYMLINK_OUT, DirView
from kafkalog.storage.log.producer_state import ProducerStateManager
from kafkalog.storage.log.segment import recover_segment
from kafkalog.storage.records import Batch, LogScanner, batch_at, scan_crc

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
    if not topic or not part or not _writable_name(topic):
        raise bad()
    try:
        partition = parse_java_int(part)
    except ValueError:
        raise bad() from None
    return TopicPartitionDir(topic, partition, kind, unique)


_KAFKA_FILE_SUFFIXES = (LOG_FILE_SUFFIX, *INDEX_SUFFIXES, PRODUCER_SNAPSHOT_FILE_SUFFIX, KRAFT_SNAPSHOT_SUFFIX)


def _kafka_file_name(name: str) -> bool:
    """A name the broker reads or writes in a partition dir (segment files, snapshots, its metadata files)."""
    return name.endswith(_KAFKA_FILE_SUFFIXES) or name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE,
                                                          QUORUM_STATE_FILE)


def unfinished_swap(partition_dir: str | os.PathLike, names: list[str]) -> str | None:
    """Why the ``.log`` files of a partition dir holding ``names`` are not the log the broker will load, or None:
    ``.swap`` files are a segment replacement (cleaning, conversion, a split) that a crash interrupted; the broker
    completes it at load (``LogLoader``), so until then the ``.log`` files alone miss or duplicate records."""
    swaps = sorted(n for n in names if n.endswith(SWAP_FILE_SUFFIX))
    if not swaps:
        return None
    parent = os.path.dirname(os.path.normpath(os.fspath(partition_dir))) or "."
    return (f"an unfinished segment replacement ({len(swaps)} .swap file(s): {', '.join(swaps[:3])}"
            f"{', ...' if len(swaps) > 3 else ''}): the broker completes it at load; until then the segments "
            f"listed are not the partition's log. Run `kafkalog repair {parent}` first")


def _writable_name(topic: str) -> bool:
    """A topic a checkpoint line can hold: no whitespace (the field separator) and valid UTF-8. The broker creates
    no other directory (topics are validated at creation); a dir named otherwise is not a partition."""
    if any(c.isspace() for c in topic):
        return False
    try:
        topic.encode("utf-8")
    except UnicodeEncodeError:  # a name that was not UTF-8 on disk (surrogate-escaped by os.listdir)
        return False
    return True


def live_topic_partition(name: str) -> tuple[str, int]:
    """``<topic>-<partition>`` of a live partition dir -> (topic, partition); :class:`LogDirError` for any other
    name (``-delete``/``-future``/``-stray`` dirs included)."""
    tp = parse_topic_partition_name(name)
    if tp.kind != "live":
        raise LogDirError(f"not a live partition directory (a -{tp.kind} dir): {name!r}", name)
    return tp.topic, tp.partition


TOPIC_MAX_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic(topic: str) -> str:
    """Kafka's ``Topic.validate``: a topic name kafkalog may create a directory for (characters
    ``[a-zA-Z0-9._-]``, at most 249, not ``.`` or ``..``). :class:`LogDirError` otherwise: a name from input or
    arguments never becomes a path outside the data dir."""
    if not isinstance(topic, str) or not topic:
        raise LogDirError("Topic name is illegal, it can't be empty", repr(topic))
    if topic in (".", ".."):
        raise LogDirError('Topic name cannot be "." or ".."', topic)
    if len(topic) > TOPIC_MAX_LENGTH:
        raise LogDirError(f"Topic name is illegal, it can't be longer than {TOPIC_MAX_LENGTH} characters, topic "
                          f"name: {topic[:60]!r}...", topic[:60])
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise LogDirError(f"Topic name {topic!r} is illegal, it contains a character other than ASCII "
                          "alphanumerics, '.', '_' and '-'", repr(topic))
    return topic


def partition_dir_name(topic: str, partition: int) -> str:
    """``LocalLog.logDirName``: ``<topic>-<partition>``, for a valid topic (:func:`validate_topic`) and a
    partition number in ``[0, 2^31)``."""
    validate_topic(topic)
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < 1 << 31:
        raise LogDirError(f"partition of {topic!r} must be an integer in [0, 2147483647], got {partition!r}",
                          topic)
    return f"{topic}-{partition}"


def partition_path(data_dir: str | os.PathLike, topic: str, partition: int) -> Path:
    """The directory of partition ``topic-partition`` in ``data_dir``, for writing: the name is validated
    (:func:`partition_dir_name`) and the path must stay inside the data dir: an existing partition dir that is a
    symlink, or anything that resolves outside ``data_dir``, is refused (:class:`LogDirError`)."""
    root = Path(data_dir)
    path = root / partition_dir_name(topic, partition)
    if path.is_symlink():
        raise LogDirError(f"{path}: the partition directory is a symlink; kafkalog does not write through it",
                          str(path))
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root or real == real_root:
        raise LogDirError(f"{path}: resolves to {real}, outside the data dir {real_root}", str(path))
    if path.exists() and not path.is_dir():
        raise LogDirError(f"{path}: exists and is not a directory", str(path))
    return path


def partition_path_for(data_dir: str | os.PathLike, name: str) -> Path:
    """:func:`partition_path` for a ``<topic>-<partition>`` name given by a user (``kafkalog append DIR T-P``)."""
    topic, part = live_topic_partition(name)
    return partition_path(data_dir, topic, part)


def log_start_offset(checkpoint: int | None, first_base_offset: int | None, remote_log_enabled: bool = False) -> int:
    """The log start offset the broker loads (``LogLoader.load``): ``max(checkpoint, first segment base)``; for a
    topic with tiered storage (``remote.storage.enable``) the checkpoint alone, even below the first local segment
    (the log starts in the remote store); the checkpoint alone when there is no segment."""
    if first_base_offset is None:
        return checkpoint or 0
    if checkpoint is None:
        return first_base_offset
    return checkpoint if remote_log_enabled else max(checkpoint, first_base_offset)


def checkpoints_log_start(log_start: int, first_base_offset: int, remote_log_enabled: bool = False) -> bool:
    """Whether a clean shutdown writes the partition into ``log-start-offset-checkpoint``
    (``LogManager.checkpointLogStartOffsetsInDir``): a tiered partition always, others when the log start offset is
    above the first segment's base offset."""
    return remote_log_enabled or log_start > first_base_offset


def log_start_checkpoint(partitions) -> dict[tuple[str, int], int]:
    """The ``log-start-offset-checkpoint`` entries of a data dir's planned partitions (their facts
    ``logStartOffset``, ``firstBaseOffset`` and ``remoteLogEnabled``), by :func:`checkpoints_log_start`."""
    return {(p.topic, p.partition): p.facts["logStartOffset"] for p in partitions
            if checkpoints_log_start(p.facts["logStartOffset"], p.facts["firstBaseOffset"],
                                     p.facts.get("remoteLogEnabled", False))}


def segment_end_error(path: str | os.PathLike, scanner: LogScanner, size: int, *, active: bool,
                      next_base_offset: int | None = None) -> CorruptRecordError | None:
    """Where a partition's batches may end short of a segment's end: the one rule every reader follows.

    A scan stops early at a torn tail (fewer than 17 bytes left) or a partial batch (an entry running past the
    file's end). At the end of the *active* (last) segment that is a write the broker had not finished, and the
    log simply ends there (``FileLogInputStream.nextBatch`` returns null). Anywhere else it is a hole: the
    offsets after the last complete batch of that segment, up to the next segment's base offset, are gone, and
    a reader that went on to the next segment would skip them silently. So it is corruption: the error names
    the file and the byte where the complete batches end. ``None`` when the scan ended cleanly or at the end of
    the active segment."""
    reason = scanner.stop_reason
    if reason is None or active:
        return None
    stop = scanner.stop_position
    upto = "" if next_base_offset is None else f" up to offset {next_base_offset - 1}"
    return CorruptRecordError(
        f"{reason}: the last {size - stop} bytes of a segment that is not the active one are not a complete "
        f"batch; the records from here{upto} are lost (`kafkalog export --salvage` reads around it)",
        os.fspath(path), stop)


@dataclass(frozen=True)
class SegmentHole:
    """Records of a closed segment that no reader can read: its batches end before its file does (offsets
    ``first_offset..last_offset``, from the one after its last complete batch to the one before the next
    segment's base offset; the ``bytes`` from ``position`` on are a torn or partial batch, :func:`segment_end_error`),
    or the batch at ``position`` (``bytes`` long) fails its CRC; ``reason`` in words."""

    file: str
    position: int
    bytes: int
    first_offset: int | None  # (None: not known, the entry's header cannot be read)
    last_offset: int | None
    reason: str


PRODUCER_SNAPSHOT = "producer snapshot"
CONSUMER_GROUP = "consumer group"


@dataclass(frozen=True)
class RememberedOffset:
    """An offset that a partition's checkpoints, snapshots or leader epochs (or a consumer group's commit)
    remember beyond the end of its log: offsets ``[first_missing, offset)`` were in the log once and are gone.

    ``source``: :data:`REPLICATION_OFFSET_CHECKPOINT` (the high watermark), :data:`RECOVERY_POINT_CHECKPOINT`,
    :data:`LOG_START_OFFSET_CHECKPOINT`, :data:`PRODUCER_SNAPSHOT`, :data:`LEADER_EPOCH_CHECKPOINT` (an epoch's
    start offset) or :data:`CONSUMER_GROUP` (a committed offset, ``group`` set); ``file``: where it is remembered."""

    source: str
    file: str
    offset: int
    log_end_offset: int
    group: str | None = None
    epoch: int | None = None

    @property
    def first_missing(self) -> int:
        return self.log_end_offset

    @property
    def last_missing(self) -> int:
        return self.offset - 1

    @property
    def missing(self) -> int:
        """How many offsets are gone."""
        return self.offset - self.log_end_offset

    def describe(self) -> str:
        """What remembers the offset, in words (for findings)."""
        name = Path(self.file).name
        if self.source == REPLICATION_OFFSET_CHECKPOINT:
            return f"{name} holds the high watermark {self.offset}"
        if self.source == LEADER_EPOCH_CHECKPOINT:
            return f"{name} starts epoch {self.epoch} at offset {self.offset}"
        if self.source == PRODUCER_SNAPSHOT:
            return f"the producer snapshot {name} was taken at offset {self.offset}"
        if self.source == CONSUMER_GROUP:
            return f"consumer group {self.group} committed offset {self.offset}"
        return f"{name} holds {self.offset}"


def remembered_loss(found: list[RememberedOffset]) -> str:
    """One sentence for a partition's :meth:`PartitionLog.remembered_beyond_end` (and groups' commits): which
    offsets are gone and what remembers them."""
    leo = found[0].log_end_offset
    last = max(r.last_missing for r in found)
    return (f"offsets {leo}..{last} are gone: the log ends at offset {leo}, but "
            + "; ".join(r.describe() for r in found))


class PartitionLog:
    """A partition directory, loaded read-only (from a path, or as a :class:`DirView` has it).

    ``log_start_offset_checkpoint`` / ``recovery_point`` / ``high_watermark`` / ``clean_point`` are the
    values the data dir's checkpoints hold for this partition (``DataDir`` passes them); all optional.
    """

    def __init__(
        self,
        path: str | os.PathLike | DirView,
        *,
        log_start_offset_checkpoint: int | None = None,
        recovery_point: int | None = None,
        high_watermark: int | None = None,
        clean_point: int | None = None,
        remote_log_enabled: bool = False,
    ):
        if isinstance(path, DirView):
            self.view = path
            self._owns_view = False
        else:
            self.view = DirView(path, DirView.READONLY)
            self._owns_view = True
        self.path = self.view.path if isinstance(path, DirView) else Path(path)
        self.tp = parse_topic_partition_name(self.path.name)
        self.log_start_offset_checkpoint = log_start_offset_checkpoint
        self.recovery_point = recovery_point
        self._high_watermark = high_watermark
        self.clean_point = clean_point
        self.remote_log_enabled = remote_log_enabled
        self.findings: list[Finding] = []
        self.segments: list[Segment] = []
        self.snapshot_files: list[tuple[int, Path]] = []
        self.temp_files: list[tuple[Path, str]] = []  # (path, suffix)
        self.kraft_snapshots: list[Path] = []
        self.other_files: list[Path] = []
        self._epochs: LeaderEpochCheckpoint | None | bool = False
        self._metadata: PartitionMetadata | None | bool = False
        self._producers: dict[tuple[int, int], object] = {}
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
    def name(self) -> str:
        return self.path.name

    @property
    def dir_kind(self) -> str:
        return self.tp.kind

    @property
    def is_metadata_log(self) -> bool:
        return self.topic == METADATA_TOPIC

    # ---- listing -----------------------------------------------------------------------------------------
    def _list(self) -> None:
        logs: dict[int, str] = {}
        prefixes_with_log: set[str] = set()
        index_files: list[Path] = []
        view = self.view
        for name in view.names(None):
            e = view.entry(name)
            assert e is not None
            p = self.path / name
            if e.kind == SYMLINK_OUT:
                self.findings.append(warning(p, None, "layout", "symlink leaving the partition directory: not followed"))
                continue
            if e.kind in (DIR, SPECIAL) and _kafka_file_name(name):
                what = "a directory" if e.kind == DIR else "not a regular file (a FIFO, socket or device)"
                self.findings.append(error(p, None, "layout", f"{what} with the name of a Kafka file: not read; the "
                                           "broker cannot load or write it (move it away)"))
                continue
            if e.kind == DIR:
                self.findings.append(info(p, None, "layout", "unexpected sub-directory in a partition directory"))
                continue
            if e.kind == SPECIAL:
                self.findings.append(warning(p, None, "layout", "not a regular file (a FIFO, socket or device): "
                                             "not read"))
                continue
            if e.kind == DANGLING:
                self.findings.append(warning(p, None, "layout", "dangling or looping symlink: not read"))
                continue
            assert e.kind == FILE
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
                        error(p, None, "layout", f"two log files with base offset {base}: {logs[base]}, {name}")
                    )
                    continue
                logs[base] = name
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
        self.segments = [Segment.in_view(view, b, logs[b]) for b in sorted(logs)]
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

    def log_segments(self, start: int, end: int) -> list[Segment]:
        """``LocalLog.segments(from, to)``: the floor segment of ``start`` (or the first) and every later segment
        with a base offset below ``end``."""
        i = max(bisect.bisect_right(self._base_offsets, start) - 1, 0)
        j = bisect.bisect_left(self._base_offsets, end)
        return self.segments[i:j] if i < j else []

    def non_active_segments_from(self, offset: int) -> list[Segment]:
        """``nonActiveLogSegmentsFrom``: :meth:`log_segments` from ``offset`` up to the active segment."""
        if not self.segments:
            return []
        return self.log_segments(offset, self.segments[-1].base_offset)

    def segments_in_unflushed_range(self, recovery_point: int) -> list[Segment]:
        """``segments.values(recoveryPoint, Long.MAX_VALUE)``: the floor segment of the recovery point and all
        later ones (every segment when none lies at or below it)."""
        i = max(bisect.bisect_right(self._base_offsets, recovery_point) - 1, 0)
        return self.segments[i:]

    @property
    def size(self) -> int:
        """Sum of the ``.log`` sizes (``UnifiedLog.size``)."""
        return sum(s.size for s in self.segments)

    # ---- offsets -----------------------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        """The log start offset the broker loads (:func:`log_start_offset`)."""
        return log_start_offset(self.log_start_offset_checkpoint,
                                self.segments[0].base_offset if self.segments else None, self.remote_log_enabled)

    @property
    def log_end_offset(self) -> int:
        """``readNextOffset`` of the last segment."""
        seg = self.active_segment
        if seg is None:
            return self.log_start_offset
        return seg.read_next_offset()

    @property
    def high_watermark_checkpoint(self) -> int | None:
        """The value ``replication-offset-checkpoint`` holds for this partition (None: no entry)."""
        return self._high_watermark

    @property
    def high_watermark(self) -> int:
        """The checkpointed high watermark capped at the log end offset (the log end offset without one, as a
        broker that is the only replica)."""
        leo = self.log_end_offset
        return leo if self._high_watermark is None else min(self._high_watermark, leo)

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
        """Batches of every segment in order, from the batch holding ``start_offset`` when given. A segment
        other than the active one that ends in a torn or partial batch raises (:meth:`segment_batches`)."""
        if start_offset is None:
            for seg in self.segments:
                for b in self.segment_batches(seg):
                    yield seg, b
            return
        found = self.lookup(start_offset)
        if found is None:
            return
        seg0, pos = found
        for b in self.segment_batches(seg0, pos.position):
            yield seg0, b
        s = self.higher_segment(seg0)
        while s is not None:
            for b in self.segment_batches(s):
                yield s, b
            s = self.higher_segment(s)

    def is_active(self, segment: Segment) -> bool:
        """``segment`` is the active (last) segment of this log."""
        return bool(self.segments) and segment.base_offset == self.segments[-1].base_offset

    def segment_end_error(self, segment: Segment, scanner: LogScanner) -> CorruptRecordError | None:
        """:func:`segment_end_error` for a scan of one of this log's segments that has ended."""
        nxt = self.higher_segment(segment)
        return segment_end_error(segment.path, scanner, segment.size, active=self.is_active(segment),
                                 next_base_offset=None if nxt is None else nxt.base_offset)

    def closed_segment_holes(self) -> list[SegmentHole]:
        """The segments other than the active one whose batches end before their file does (a torn or partial
        batch: :func:`segment_end_error`): every reader stops there, and a broker that does not recover the
        segment at load serves the log with the hole. Each segment is scanned from its last offset-index entry
        (from its start when that scan ends early, so that a wrong index never makes a hole)."""
        out: list[SegmentHole] = []
        for seg in self.segments[:-1]:
            idx = seg.offset_index if seg.has_offset_index else None
            start = 0
            if idx is not None and idx.valid_entries:
                last = idx.entry(idx.valid_entries - 1).position
                start = last if 0 <= last < seg.size else 0
            found = self._scan_end(seg, start)
            if found is not None and start:
                found = self._scan_end(seg, 0)
            if found is not None:
                scanner, nxt = found
                err = self.segment_end_error(seg, scanner)
                assert err is not None
                following = self.higher_segment(seg)
                assert following is not None
                out.append(SegmentHole(str(seg.path), scanner.stop_position, seg.size - scanner.stop_position,
                                       seg.base_offset if nxt is None else nxt, following.base_offset - 1,
                                       err.reason))
        return out

    def closed_segment_crc_failures(self) -> list[SegmentHole]:
        """The first entry that fails its CRC (or its framing) in each segment other than the active one, every
        byte of them scanned (:func:`~kafkalog.storage.records.scan_crc`, the compiled core's pass): a broker
        that does not recover such a segment at load serves it, and its consumers fail on that batch."""
        out: list[SegmentHole] = []
        for seg in self.segments[:-1]:
            path = str(seg.path)
            try:
                scan = scan_crc(seg.buf, path=path)
            except CorruptRecordError as e:
                pos = e.position or 0
                out.append(SegmentHole(path, pos, seg.size - pos, None, None, e.reason))
                continue
            if not scan.invalid:
                continue
            pos = scan.positions[scan.valid.index(0)]
            b = batch_at(seg.buf, pos, path=path)
            first = b.base_offset if b.magic >= 2 else None
            out.append(SegmentHole(path, pos, b.size, first, b.last_offset,
                                   f"the batch at byte {pos} fails its CRC (stored {b.crc}, computed "
                                   f"{b.compute_crc()})"))
            del b
        return out

    @staticmethod
    def _scan_end(seg: Segment, start: int) -> tuple[LogScanner, int | None] | None:
        """``(scanner, next offset after the last complete batch)`` when a scan from ``start`` ends early."""
        scanner = seg.scanner(start)
        nxt = None
        try:
            for b in scanner:
                nxt = b.next_offset
        except CorruptRecordError:
            return None  # not a torn end: a corrupt entry (verify and the readers report it)
        return None if scanner.stop_reason is None else (scanner, nxt)

    def segment_batches(self, segment: Segment, start_position: int = 0) -> Iterator[Batch]:
        """The shallow batches of one of this log's segments from ``start_position``, as every reader sees them:
        a torn or partial batch ends the log at the end of the active segment and raises
        :class:`CorruptRecordError` anywhere else (:func:`segment_end_error`)."""
        scanner = segment.scanner(start_position)
        yield from scanner
        err = self.segment_end_error(segment, scanner)
        if err is not None:
            raise err

    def remembered_beyond_end(self) -> list[RememberedOffset]:
        """What the partition's own files remember past its log end offset (:class:`RememberedOffset`): the
        high watermark, recovery point and log start offset the data dir's checkpoints hold for it, its newest
        producer snapshot's offset and its latest leader epoch's start offset. An offset equal to the log end offset is not
        past it (a log emptied by retention, an epoch begun with nothing written yet). Raises
        :class:`KafkaLogError` when the log end offset cannot be read."""
        leo = self.log_end_offset
        ddir = self.path.parent
        out = [RememberedOffset(name, str(ddir / name), v, leo) for name, v in (
            (REPLICATION_OFFSET_CHECKPOINT, self._high_watermark), (RECOVERY_POINT_CHECKPOINT, self.recovery_point),
            (LOG_START_OFFSET_CHECKPOINT, self.log_start_offset_checkpoint)) if v is not None and v > leo]
        snaps = [(o, p) for o, p in self.snapshot_files if o > leo]
        if snaps:  # (the newest one says it all)
            o, p = max(snaps)
            out.append(RememberedOffset(PRODUCER_SNAPSHOT, str(p), o, leo))
        try:
            epochs = [e for e in self.leader_epochs if e.start_offset > leo]
        except KafkaLogError:
            epochs = []  # unreadable: verify and the loader report the file itself
        if epochs:
            e = max(epochs, key=lambda e: e.start_offset)
            out.append(RememberedOffset(LEADER_EPOCH_CHECKPOINT, str(self.leader_epoch_checkpoint_path),
                                        e.start_offset, leo, epoch=e.epoch))
        return out

    # ---- transactions and producers ----------------------------------------------------------------------
    def collect_aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """``UnifiedLog.collectAbortedTransactions(start, end)``: from the floor segment of ``start`` on, the
        ``.txnindex`` entries with last offset >= the log start offset and first offset < ``end``, until one
        has a last stable offset >= ``end``."""
        out: list[AbortedTxn] = []
        lso = self.log_start_offset
        i = max(bisect.bisect_right(self._base_offsets, start) - 1, 0)
        for s in self.segments[i:]:
            for t in s.aborted_txns():
                if t.last_offset >= lso and t.first_offset < end:
                    out.append(t)
                if t.last_stable_offset >= end:
                    return out
        return out

    def producer_state(self, now_ms: int, expiration_ms: int):
        """Producer state at the log end offset, as a loaded broker has it: the latest valid snapshot (expired
        producers dropped) and the batches after it replayed. Read-only: nothing is written or deleted."""

        key = (now_ms, expiration_ms)
        cached = self._producers.get(key)
        if cached is not None:
            return cached
        leo = self.log_end_offset
        psm = ProducerStateManager(self.view, producer_id_expiration_ms=expiration_ms, read_only=True)
        psm.forget_snapshots_above(leo)
        psm.load_from_snapshot(self.log_start_offset, now_ms)
        start = psm.map_end_offset
        for s in self.segments:
            if s.read_next_offset() <= start:
                continue
            for b in self.segment_batches(s):  # (a hole in a closed segment raises: the state would miss it)
                if b.last_offset >= start and b.magic >= 2:
                    psm.replay(b)
                del b
        self._producers[key] = psm
        return psm

    def last_stable_offset(self, now_ms: int, expiration_ms: int) -> int:
        fuo = self.producer_state(now_ms, expiration_ms).first_unstable_offset
        return self.high_watermark if fuo is None else min(fuo, self.high_watermark)

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
            self._epochs = None
            if self.view.exists(LEADER_EPOCH_CHECKPOINT):
                self._epochs = LeaderEpochCheckpoint.from_bytes(
                    self._small(LEADER_EPOCH_CHECKPOINT), self.leader_epoch_checkpoint_path)
        return self._epochs  # type: ignore[return-value]

    @property
    def leader_epochs(self) -> list[EpochEntry]:
        c = self.leader_epoch_checkpoint
        return [] if c is None else list(c.entries)

    @property
    def partition_metadata(self) -> PartitionMetadata | None:
        if self._metadata is False:
            self._metadata = None
            if self.view.exists(PARTITION_METADATA_FILE):
                self._metadata = read_partition_metadata(self.partition_metadata_path)
        return self._metadata  # type: ignore[return-value]

    @property
    def topic_id(self) -> str | None:
        m = self.partition_metadata
        return None if m is None else m.topic_id

    def _small(self, name: str, limit: int = 1 << 24) -> bytes:
        try:
            return self.view.read(name, limit)
        except LogDirError as e:
            raise CorruptCheckpointError(e.reason, str(self.path / name)) from None

    @property
    def unfinished_swap(self) -> str | None:
        """:func:`unfinished_swap` for this partition's files."""
        return unfinished_swap(self.path, [p.name for p, _ in self.temp_files])

    def snapshot_offsets(self) -> list[int]:
        return [o for o, _ in self.snapshot_files]

    def read_snapshot(self, offset: int) -> ProducerSnapshot:
        for o, p in self.snapshot_files:
            if o == offset:
                return ProducerSnapshot.from_bytes(self._small(p.name), p)
        raise LogDirError(f"no producer snapshot at offset {offset}", str(self.path))

    def latest_snapshot_at_or_below(self, offset: int) -> tuple[int, ProducerSnapshot] | None:
        """The newest *valid* snapshot with offset <= ``offset`` (corrupt ones are skipped, as Kafka does)."""
        for o, p in reversed(self.snapshot_files):
            if o <= offset:
                try:
                    return o, ProducerSnapshot.from_bytes(self._small(p.name), p)
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

    def rebuild_segment_indexes(self, segment: Segment, *, index_interval_bytes: int = 4096):
        """All three indexes of ``segment`` as Kafka's recovery would write them (``LogSegment.recover`` with
        producer state from the newest valid snapshot at or below the segment and the batches after it)."""

        snap, prior = self.producer_replay_inputs(segment)
        psm = ProducerStateManager.from_snapshot(snap)
        for b in prior:
            if b.magic >= 2:
                try:
                    psm.replay(b)
                except KafkaLogError:
                    break
        return recover_segment(segment.buf, segment.base_offset, index_interval_bytes=index_interval_bytes,
                               path=str(segment.path), producers=psm, on_overflow="stop")

    # ---- lifecycle ---------------------------------------------------------------------------------------
    def close(self) -> None:
        for s in self.segments:
            s.close()
        if self._owns_view:
            self.view.close()

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
