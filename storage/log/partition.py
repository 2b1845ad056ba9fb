"""One partition directory: the single partition model every engine and reader uses (``UnifiedLog`` /
``LocalLog`` as loaded).

``PartitionLog(path)`` lists the segments (ordered by base offset), producer snapshots, the leader-epoch
checkpoint, ``partition.metadata`` and leftover temporary files, without modifying anything
(:func:`~kafkalog.storage.log.partition_files.list_partition_files`). Anomalies found while listing are collected in
:attr:`PartitionLog.findings` instead of raising.

Built on a :class:`~kafkalog.storage.io.dirview.DirView`, a partition can also be read *as a plan has it so far*
(``PartitionLog(view)``): the loader re-reads the partition after it has completed a swap or split a segment.

What the broker derives from the files is here once: log start and end offsets, the high watermark as the log
sees it, the segments covering an offset range, aborted transactions in a range
(``collectAbortedTransactions``), producer state at the log end (``lastRecordsOfActiveProducers``,
``lastStableOffset``). Partition-directory names are parsed in :mod:`~kafkalog.storage.log.topic_partition`;
what a partition has lost is in :mod:`~kafkalog.storage.log.loss`.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from pathlib import Path

from kafkalog.storage.errors import CorruptCheckpointError, CorruptRecordError, KafkaLogError, LogDirError
from kafkalog.storage.files.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from kafkalog.storage.files.findings import Finding
from kafkalog.storage.files.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    LeaderEpochCheckpoint,
)
from kafkalog.storage.files.names import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TMP_FILE_SUFFIX,
)
from kafkalog.storage.files.partition_metadata import MAX_BYTES as MAX_METADATA_BYTES
from kafkalog.storage.files.partition_metadata import (
    PARTITION_METADATA_FILE,
    PartitionMetadata,
    read_partition_metadata,
)
from kafkalog.storage.files.producer_snapshot import ProducerSnapshot
from kafkalog.storage.files.segment import LogOffsetPosition, Segment
from kafkalog.storage.files.txn_index import AbortedTxn
from kafkalog.storage.io.closing import Closing
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.io.forward import Forward
from kafkalog.storage.io.fs import UrlPath
from kafkalog.storage.log.loss import PRODUCER_SNAPSHOT, RememberedOffset, segment_end_error
from kafkalog.storage.log.partition_files import list_partition_files, unfinished_swap
from kafkalog.storage.log.producer_state import ProducerStateManager
from kafkalog.storage.log.segment import recover_segment
from kafkalog.storage.log.segment_ref import SegmentRef, segment_refs
from kafkalog.storage.log.topic_partition import METADATA_TOPIC, parse_topic_partition_name
from kafkalog.storage.records import Batch, LogScanner


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


class PartitionLog(Closing):
    """A partition directory, loaded read-only (from a path, or as a :class:`DirView` has it).

    ``log_start_offset_checkpoint`` / ``recovery_point`` / ``high_watermark`` / ``clean_point`` are the
    values the data dir's checkpoints hold for this partition (``DataDir`` passes them); all optional.
    """

    def __init__(
        self,
        path: str | os.PathLike | UrlPath | DirView,
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
        # (a URL's view has a UrlPath: name, parent, / and str() as a Path's)
        self.path = self.view.path if isinstance(path, (DirView, UrlPath)) or self.view.url is not None \
            else Path(path)
        self.tp = parse_topic_partition_name(self.path.name)
        self.log_start_offset_checkpoint = log_start_offset_checkpoint
        self.recovery_point = recovery_point
        self._high_watermark = high_watermark
        self.clean_point = clean_point
        self.remote_log_enabled = remote_log_enabled
        files = list_partition_files(self.view, self.path, self.is_metadata_log)
        self.findings: list[Finding] = files.findings
        self.segments: list[Segment] = files.segments
        self.snapshot_files: list[tuple[int, Path]] = files.snapshot_files
        self.temp_files: list[tuple[Path, str]] = files.temp_files  # (path, suffix)
        self.kraft_snapshots: list[Path] = files.kraft_snapshots
        self.other_files: list[Path] = files.other_files
        self._epochs: LeaderEpochCheckpoint | None | bool = False
        self._metadata: PartitionMetadata | None | bool = False
        self._producers: dict[tuple[int, int], object] = {}
        self._base_offsets = [s.base_offset for s in self.segments]

    @classmethod
    def open(cls, path: str | os.PathLike | UrlPath, **kw) -> PartitionLog:
        return cls(path, **kw)

    def __repr__(self) -> str:
        return f"PartitionLog({str(self.path)!r}, segments={len(self.segments)})"

    # ---- names -------------------------------------------------------------------------------------------
    topic = Forward[str]("tp.topic")
    partition = Forward[int]("tp.partition")
    name = Forward[str]("path.name")
    dir_kind = Forward[str]("tp.kind")

    @property
    def is_metadata_log(self) -> bool:
        return self.topic == METADATA_TOPIC

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

    def segments_unchecked_at_load(self, had_clean_shutdown: bool) -> list[Segment]:
        """The segments the broker's start-up serves without reading them: ``LogLoader.recoverLog`` recovers
        nothing after a clean shutdown (every segment, the active one too), and otherwise only
        :meth:`segments_in_unflushed_range` of the checkpointed recovery point (none below it: all are checked
        when the checkpoint has no entry). A torn batch or a CRC failure in one of these is served as it is
        (consumers and followers meet it); anywhere else the recovery truncates the log there. A segment whose
        ``.index`` is missing or whose ``.txnindex`` fails its check is recovered whatever the shutdown
        (``loadSegmentFiles``): the repair plan predicts that recovery, and its losses name the file."""
        if had_clean_shutdown:
            return list(self.segments)
        checked = self.segments_in_unflushed_range(self.recovery_point or 0)
        return self.segments[:len(self.segments) - len(checked)]

    def segment_refs(self) -> list[SegmentRef]:
        """The segments as picklable refs, to be opened elsewhere (:func:`~.segment_ref.segment_refs`)."""
        return segment_refs(self.segments, self.topic, self.partition)

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
    def local_log_start_offset(self) -> int:
        """``UnifiedLog.localLogStartOffset``: the first offset the local segments can serve, the log start offset
        or, for a tiered topic whose log starts in the remote store, the first local segment's base offset."""
        start = self.log_start_offset
        return max(start, self.segments[0].base_offset) if self.segments else start

    def readable_start(self, end: int) -> int:
        """Where a reader of the local segments that has seen them up to ``end`` (the offset after the last
        complete batch it found) starts: :attr:`local_log_start_offset`, never above ``end`` (a live broker may
        checkpoint a log start offset past what the reader saw of its appends)."""
        return min(self.local_log_start_offset, end)

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

    def segment_batches(self, segment: Segment, start_position: int = 0, until: int | None = None) -> Iterator[Batch]:
        """The shallow batches of one of this log's segments from ``start_position``, as every reader sees them:
        a torn or partial batch ends the log at the end of the active segment and raises
        :class:`CorruptRecordError` anywhere else (:func:`segment_end_error`). ``until``: where the reader stops
        (at the first batch from there; a segment under a URL is read in windows that end about there)."""
        scanner = segment.scanner(start_position, until=until)
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
                self._metadata = (read_partition_metadata(self.partition_metadata_path) if self.view.url is None
                                  else PartitionMetadata.from_bytes(self._small(PARTITION_METADATA_FILE, MAX_METADATA_BYTES),
                                                                    self.partition_metadata_path))
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
        return recover_segment(segment, segment.base_offset, index_interval_bytes=index_interval_bytes,
                               path=str(segment.path), producers=psm, on_overflow="stop")

    # ---- lifecycle ---------------------------------------------------------------------------------------
    def close(self) -> None:
        for s in self.segments:
            s.close()
        if self._owns_view:
            self.view.close()
