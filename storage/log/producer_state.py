"""Producer state as the broker keeps it (``ProducerStateManager``, ``ProducerStateEntry``,
``ProducerAppendInfo``; docs/semantics.md#producer-state, docs/formats.md#producer-snapshots).

Built by replaying v2 batches that carry a producer id, exactly as ``LogSegment.recover`` /
``UnifiedLog.rebuildProducerState`` do (origin REPLICATION: epochs and sequences are not enforced).
Transactions are tracked to know the last stable offset and to produce the ``AbortedTxn`` entries of a
``.txnindex``. Snapshots (``<offset>.snapshot``) are encoded by ``files/producer_snapshot.py``; entries are
written in Java ``HashMap`` iteration order so a snapshot equals the broker's byte for byte.

Snapshot files are read, written and deleted through a :class:`~kafkalog.storage.io.dirview.DirView`: a planned
view turns them into plan operations, a direct one writes them at once (a live writer).
:func:`rebuild_producer_state` is ``UnifiedLog.rebuildProducerState``, the one place the loader, flush, the
writer and retention rebuild producer state from snapshots and segments.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kafkalog.storage.errors import CorruptRecordError, KafkaLogError
from kafkalog.storage.files.findings import note
from kafkalog.storage.files.names import is_snapshot_file, offset_from_file_name, snapshot_file_name
from kafkalog.storage.files.producer_snapshot import ProducerSnapshot, ProducerSnapshotEntry
from kafkalog.storage.files.txn_index import AbortedTxn
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.io.ops import Reason
from kafkalog.storage.records.batch import CONTROL_MASK, TRANSACTIONAL_MASK, increment_sequence
from kafkalog.storage.records.control import ABORT, COMMIT, parse_control_key, parse_end_txn_marker

MAX_SNAPSHOT_BYTES = 1 << 30  # larger than any real snapshot (tens of bytes per producer)
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NUM_BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86400000


# ------------------------------------------------------------------------------------ Java HashMap order


def _java_long_hash(k: int) -> int:
    k &= 0xFFFFFFFFFFFFFFFF
    h = (k ^ (k >> 32)) & 0xFFFFFFFF
    return h ^ (h >> 16)


def java_hashmap_order(keys: Iterable[int], capacity: int | None = None) -> list[int]:
    """Iteration order of a ``java.util.HashMap<Long, ?>`` whose keys were inserted in ``keys`` order
    (buckets ascending, insertion order within a bucket; the table grows at 0.75 load)."""
    ks = list(keys)
    cap = capacity or 16
    while len(ks) > cap * 0.75:
        cap *= 2
    mask = cap - 1
    return [k for _, _, k in sorted((_java_long_hash(k) & mask, i, k) for i, k in enumerate(ks))]


# ------------------------------------------------------------------------------------------------ model


@dataclass(slots=True)
class BatchMetadata:
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return _decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


def _decrement_sequence(seq: int, dec: int) -> int:
    return seq - dec if seq >= dec else 2**31 - 1 - (dec - seq) + 1


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batch_metadata: list[BatchMetadata] = field(default_factory=list)

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        if self.producer_epoch != epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch
            return True
        return False

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        meta = self.batch_metadata
        if self.producer_epoch != epoch:
            meta.clear()
            self.producer_epoch = epoch
        elif len(meta) == NUM_BATCHES_TO_RETAIN:
            del meta[0]
        meta.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def find_duplicate_batch(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for m in self.batch_metadata:
            if m.first_seq == first_seq and m.last_seq == last_seq:
                return m
        return None

    def to_snapshot_entry(self) -> ProducerSnapshotEntry:
        return ProducerSnapshotEntry(
            self.producer_id, self.producer_epoch, self.last_seq, self.last_data_offset, self.last_offset_delta,
            self.last_timestamp, self.coordinator_epoch,
            -1 if self.current_txn_first_offset is None else self.current_txn_first_offset)

    @classmethod
    def from_snapshot_entry(cls, e: ProducerSnapshotEntry) -> ProducerStateEntry:
        meta = [BatchMetadata(e.last_sequence, e.last_offset, e.offset_delta, e.timestamp)] \
            if e.last_offset >= 0 else []
        return cls(e.producer_id, e.producer_epoch, e.coordinator_epoch, e.timestamp,
                   e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None, meta)


@dataclass(frozen=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # offset of the marker
    is_aborted: bool




# -------------------------------------------------------------------------------------------- manager


class ProducerStateManager:
    """Offline ``ProducerStateManager`` for one partition directory.

    ``log_dir``: a :class:`DirView` (snapshot writes and deletions go through it), a path (a direct view: they
    happen at once), or None (in memory, no snapshot files). ``read_only``: snapshots are read but never
    written or deleted (a reader asking for the state at the log end)."""

    def __init__(self, log_dir: DirView | str | os.PathLike | None = None, *,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS, read_only: bool = False):
        if log_dir is None or isinstance(log_dir, DirView):
            self.view = log_dir
        else:
            self.view = DirView(log_dir, DirView.DIRECT, missing_ok=True)
        self.read_only = read_only
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self._capacity = 16
        self.ongoing_txns: dict[int, int] = {}  # first offset -> producer id (kept sorted on use)
        self.map_end_offset = 0
        self.last_snap_offset = 0
        self.snapshots: dict[int, Path] = self._load_snapshot_files()
        self.written: list[Path] = []  # snapshot files written by this object

    @property
    def log_dir(self) -> Path | None:
        return None if self.view is None else self.view.path

    @classmethod
    def from_snapshot(cls, snapshot: ProducerSnapshot | None) -> ProducerStateManager:
        """In-memory state holding ``snapshot``'s producers (no expiration), e.g. to replay a segment."""
        psm = cls(None)
        for e in snapshot.entries if snapshot is not None else ():
            entry = ProducerStateEntry.from_snapshot_entry(e)
            psm._add_producer(entry)
            if entry.current_txn_first_offset is not None:
                psm.ongoing_txns[entry.current_txn_first_offset] = entry.producer_id
        return psm

    # ---------------------------------------------------------------------------------- snapshots on disk
    def _load_snapshot_files(self) -> dict[int, Path]:
        if self.view is None:
            return {}
        out = {}
        for name in self.view.names():
            if is_snapshot_file(name):
                try:
                    out[offset_from_file_name(name)] = self.view.path / name
                except ValueError:
                    continue
        return dict(sorted(out.items()))

    def latest_snapshot_offset(self) -> int | None:
        return max(self.snapshots) if self.snapshots else None

    def forget_snapshots_above(self, offset: int) -> None:
        """Ignore snapshots above ``offset`` (a reader of a log whose end is ``offset``)."""
        for off in [o for o in self.snapshots if o > offset]:
            self.snapshots.pop(off)

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> list[Path]:
        """``removeStraySnapshots``: keep snapshots at segment base offsets plus the largest stray one when it
        is above the largest base offset. Returns the files deleted."""
        bases = set(segment_base_offsets)
        max_base = max(bases) if bases else None
        removed = []
        latest_stray: int | None = None
        for off in sorted(self.snapshots):
            if off not in bases:
                if latest_stray is not None:
                    removed.append(self._delete_snapshot(latest_stray, note(self.log_dir or "", "op.straySnapshot")))
                latest_stray = off
        if latest_stray is not None and max_base is not None and latest_stray < max_base:
            removed.append(self._delete_snapshot(latest_stray, note(self.log_dir or "", "op.snapshotBelowLastSegment")))
        return [p for p in removed if p is not None]

    def _delete_snapshot(self, offset: int, why: str | Reason) -> Path | None:
        p = self.snapshots.pop(offset, None)
        if p is not None and not self.read_only and self.view is not None:
            self.view.delete(p.name, why)
        return p

    def take_snapshot(self, *, sync: bool = True, why: str | Reason | None = None) -> Path | None:
        """Write ``<mapEndOffset>.snapshot`` if the map moved past the last snapshot (``takeSnapshot``)."""
        if self.map_end_offset <= self.last_snap_offset:
            return None
        path = None
        if self.view is not None and not self.read_only:
            data = self.snapshot_bytes()
            path = self.view.path / snapshot_file_name(self.map_end_offset)
            # Kafka writes in place (CREATE, WRITE, no truncation); an existing longer file keeps its tail.
            self.view.write(path.name, data, why or note(self.log_dir or "", "op.producerSnapshot",
                                                         offset=self.map_end_offset), in_place=True)
            self.snapshots[self.map_end_offset] = path
            self.written.append(path)
        self.last_snap_offset = self.map_end_offset
        return path

    def write_snapshot(self, view: DirView, offset: int, why: str | Reason) -> None:
        """Write this state as ``<offset>.snapshot`` through ``view`` (``takeSnapshot`` at a given offset)."""
        view.write(snapshot_file_name(offset), self.snapshot_bytes(), why, in_place=True)

    def snapshot(self) -> ProducerSnapshot:
        order = java_hashmap_order(self.producers, self._capacity)
        return ProducerSnapshot([self.producers[pid].to_snapshot_entry() for pid in order])

    def snapshot_bytes(self) -> bytes:
        return self.snapshot().to_bytes()

    def load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        """``loadFromSnapshot``: latest valid snapshot wins; corrupt ones are deleted."""
        while self.snapshots:
            off = max(self.snapshots)
            path = self.snapshots[off]
            try:
                assert self.view is not None
                snap = ProducerSnapshot.from_bytes(self.view.read(path.name, MAX_SNAPSHOT_BYTES), path)
            except (KafkaLogError, OSError) as e:
                self._delete_snapshot(off, note(self.log_dir or "", "op.snapshotUnreadable",
                                                error=str(getattr(e, "reason", e))))
                continue
            for se in snap.entries:
                entry = ProducerStateEntry.from_snapshot_entry(se)
                if not self._is_expired(now_ms, entry):
                    self._add_producer(entry)
                    if entry.current_txn_first_offset is not None:
                        self.ongoing_txns[entry.current_txn_first_offset] = entry.producer_id
            self.last_snap_offset = self.map_end_offset = off
            return
        self.last_snap_offset = self.map_end_offset = log_start_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        for off in list(self.snapshots):
            if off > log_end_offset:
                self._delete_snapshot(off, note(self.log_dir or "", "op.snapshotAboveEnd", logEndOffset=log_end_offset))
            elif off <= log_start_offset:
                self._delete_snapshot(off, note(self.log_dir or "", "op.snapshotAtOrBelowStart",
                                                logStartOffset=log_start_offset))
        if log_end_offset != self.map_end_offset:
            self.producers.clear()
            self.ongoing_txns.clear()
            self.load_from_snapshot(log_start_offset, now_ms)

    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return entry.current_txn_first_offset is None and \
            now_ms - entry.last_timestamp >= self.producer_id_expiration_ms

    def _add_producer(self, entry: ProducerStateEntry) -> None:
        self.producers[entry.producer_id] = entry
        while len(self.producers) > self._capacity * 0.75:
            self._capacity *= 2

    @property
    def is_empty(self) -> bool:
        return not self.producers

    # ---------------------------------------------------------------------------------------- replay
    def append_batch(self, batch) -> CompletedTxn | None:
        """Replay one v2 batch (``prepareUpdate`` + ``ProducerAppendInfo.append`` + ``update``), as the
        recovery path does. Batches without a producer id only move the map end offset. Control batches whose
        marker cannot be parsed raise :class:`CorruptRecordError` (Kafka's InvalidRecordException).

        Data batches are replayed from their header alone; only a control batch has its record decoded."""
        h = batch._header()
        pid = h[9]
        last_offset = h[0] + h[6]
        completed = None
        if pid != NO_PRODUCER_ID:
            entry = self.producers.get(pid)
            is_new = entry is None
            if entry is None:
                entry = ProducerStateEntry(pid)
            attrs = h[5]
            if attrs & CONTROL_MASK:
                completed = self._apply(entry, batch)
            else:  # _apply's data-batch branch, from the header tuple
                delta = h[6]
                bs = h[11]
                entry.add_batch(h[10], -1 if bs == -1 else increment_sequence(bs, delta), last_offset, delta, h[8])
                if entry.current_txn_first_offset is None and attrs & TRANSACTIONAL_MASK:
                    entry.current_txn_first_offset = h[0]
                    self.ongoing_txns[h[0]] = pid
            if is_new:
                self._add_producer(entry)
        self.map_end_offset = last_offset + 1
        return completed

    def _apply(self, entry: ProducerStateEntry, batch) -> CompletedTxn | None:
        if batch.is_control:
            if batch.records_count == 0 and batch.size == 61:
                return None  # empty control batch (retained by the cleaner): ignored
            recs = batch.records()
            if not recs:
                return None
            rec = recs[0]
            try:
                _, ctype = parse_control_key(rec.key)
                _, coordinator_epoch = parse_end_txn_marker(rec.value)
            except CorruptRecordError as e:
                raise e.at(batch.path, batch.position) from None
            if ctype not in (ABORT, COMMIT):
                raise CorruptRecordError(f"control record type {ctype} is not a transaction marker",
                                         batch.path, batch.position)
            completed = None
            if entry.current_txn_first_offset is not None:
                completed = CompletedTxn(entry.producer_id, entry.current_txn_first_offset, batch.base_offset,
                                         ctype == ABORT)
            entry.maybe_update_producer_epoch(batch.producer_epoch)
            entry.coordinator_epoch = coordinator_epoch
            entry.current_txn_first_offset = None
            entry.last_timestamp = rec.timestamp
            return completed
        first_offset = batch.base_offset
        last_offset = batch.last_offset
        entry.add_batch(batch.producer_epoch, batch.last_sequence, last_offset, last_offset - first_offset,
                        batch.max_timestamp)
        if entry.current_txn_first_offset is None and batch.is_transactional:
            entry.current_txn_first_offset = first_offset
            self.ongoing_txns[first_offset] = entry.producer_id
        return None

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """First offset of the earliest ongoing transaction of another producer, else marker offset + 1."""
        for first in sorted(self.ongoing_txns):
            if self.ongoing_txns[first] != completed.producer_id:
                return first
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> AbortedTxn | None:
        """Close a transaction; returns the ``.txnindex`` entry when it was aborted."""
        lso = self.last_stable_offset(completed)
        self.ongoing_txns.pop(completed.first_offset, None)
        if completed.is_aborted:
            return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso)
        return None

    def replay(self, batch) -> AbortedTxn | None:
        """``LogSegment.updateProducerState`` for one batch: replay, complete, return an aborted entry."""
        completed = self.append_batch(batch)
        if completed is not None:
            return self.complete_txn(completed)
        return None

    def load_from_batches(self, batches: Iterable) -> None:
        """``UnifiedLog.loadProducersFromRecords`` over one segment read: all appends of the read are
        collected per producer first, then applied (Java HashMap order for new producers), then completed."""
        pending: dict[int, ProducerStateEntry] = {}
        completed: list[CompletedTxn] = []
        new_ids: list[int] = []
        for batch in batches:
            if batch.magic < 2:
                continue
            pid = batch.producer_id
            if pid == NO_PRODUCER_ID:
                continue
            entry = pending.get(pid)
            if entry is None:
                entry = self.producers.get(pid)
                if entry is None:
                    entry = ProducerStateEntry(pid)
                    new_ids.append(pid)
                pending[pid] = entry
            c = self._apply(entry, batch)
            if c is not None:
                completed.append(c)
        for pid in java_hashmap_order(new_ids):
            self._add_producer(pending[pid])
        for c in completed:
            self.ongoing_txns.pop(c.first_offset, None)

    @property
    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing_txns) if self.ongoing_txns else None

    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return dict(self.producers)


# ------------------------------------------------------------------------------------ rebuilding from a log
def _batches_between(segment, start_offset: int, end_offset: int):
    """Batches of ``segment`` with last offset >= ``start_offset`` that lie before the first batch whose last
    offset >= ``end_offset`` (``segment.read(start, maxPosition=translateOffset(end))``); corrupt bytes end it."""
    try:
        for b in segment.iter_batches():
            if b.last_offset >= end_offset:
                del b
                break
            if b.last_offset >= start_offset:
                yield b
            del b
    except CorruptRecordError:
        return


def rebuild_producer_state(psm: ProducerStateManager, segments: list, log_start_offset: int, last_offset: int,
                           now_ms: int, reload_from_clean_shutdown: bool) -> None:
    """``UnifiedLog.rebuildProducerState`` (record version v2): reload from the latest snapshot, replay the
    segments after it up to ``last_offset`` and take the snapshots the broker takes (at the last two segment
    base offsets and at ``last_offset``). ``segments`` are the partition's segments (base offset order) as the
    caller sees them (:class:`~kafkalog.storage.files.segment.Segment`)."""
    bases = [s.base_offset for s in segments]
    ordered = ([bases[-2]] if len(bases) > 1 else []) + ([bases[-1]] if bases else []) + [last_offset]
    to_snapshot = set(ordered)
    if psm.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        for off in ordered:
            psm.map_end_offset = off
            psm.take_snapshot(why=note(psm.log_dir or "", "op.cleanShutdownSnapshot"))
        return
    empty_before = psm.is_empty and psm.map_end_offset >= last_offset
    psm.truncate_and_reload(log_start_offset, last_offset, now_ms)
    if last_offset > psm.map_end_offset and not empty_before:
        start_from = psm.map_end_offset
        floor = max((b for b in bases if b <= start_from), default=None)
        for seg in segments:
            base = seg.base_offset
            if base < (floor if floor is not None else start_from) or base >= last_offset:
                continue
            start = max(base, psm.map_end_offset, log_start_offset)
            psm.map_end_offset = start
            if base in to_snapshot:
                psm.take_snapshot(why=note(psm.log_dir or "", "op.rebuildSnapshot"))
            try:
                psm.load_from_batches(_batches_between(seg, start, last_offset))
            except CorruptRecordError:
                pass
    psm.map_end_offset = last_offset
    psm.take_snapshot(why=note(psm.log_dir or "", "op.endSnapshot", offset=last_offset))
