"""The broker's loading and recovery of one partition (``LogLoader.load``), written once and run on a
:class:`~kafkalog.storage.io.dirview.DirView`: on a planned view it *is* ``repair --dry-run`` and the plan ``repair``
applies; there is no second implementation.

Per partition, as ``LogLoader`` does:

1. leftover ``.deleted``/``.cleaned``/``.swap`` files removed or swapped in (:func:`~.swap.recover_swap_files`);
2. orphaned index files deleted, a missing ``.timeindex`` created empty; a missing ``.index`` or a ``.txnindex``
   failing its sanity check makes the segment recovered (with ``strict_indexes`` also an ``.index``/``.timeindex``
   that fails its sanity check: the broker would keep it and serve wrong reads);
3. without a clean shutdown, every segment from the one holding the recovery point on is recovered batch by
   batch (:func:`~kafkalog.storage.log.segment.recover_segment`): the ``.log`` is truncated at the first invalid
   byte, its indexes, ``.txnindex``, leader epochs and producer snapshots rebuilt, and after a truncated segment
   every later segment is deleted; a segment whose offsets overflow is split (:mod:`.split`) and the partition
   loaded again;
4. the leader-epoch cache truncated to ``[log start, log end)``; stray snapshots removed; producer state rebuilt
   with the snapshots the broker takes;
5. then, as a clean close: the active segment's indexes trimmed.

Every record removed is reported as a :class:`~.plan.Loss` with its offsets and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.engine.plan import Loss
from kafkalog.storage.engine.split import split_overflowed_segment
from kafkalog.storage.engine.swap import recover_swap_files
from kafkalog.storage.errors import CorruptCheckpointError, KafkaLogError, OffsetOverflowError
from kafkalog.storage.files.findings import Defect, Finding, defect, note
from kafkalog.storage.files.names import (
    index_file_name,
    is_index_file,
    log_file_name,
    offset_from_file_name,
    time_index_file_name,
    txn_index_file_name,
)
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.io.ops import Op, Reason
from kafkalog.storage.log import partition as partition_log
from kafkalog.storage.log.leader_epoch_cache import LeaderEpochCache
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.producer_state import ProducerStateManager, rebuild_producer_state
from kafkalog.storage.log.segment import RecoveredSegment, recover_segment, tail_loss, trim_indexes
from kafkalog.storage.log.segment_check import MAX_SEGMENT_BYTES

MAX_SPLITS = 10_000  # LogLoader.retryOnOffsetOverflow


@dataclass
class LoadedPartition:
    """What loading did (or, on a planned view, will do) to one partition."""

    log_start_offset: int = 0
    log_end_offset: int = 0
    recovered: list[RecoveredSegment] = field(default_factory=list)
    losses: list[Loss] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    #: files the broker fails on at startup (:func:`startup_error`; the plan rebuilds them, the broker does not)
    startup_errors: list[dict[str, Any]] = field(default_factory=list)

    @staticmethod
    def mark_routine(ops: list[Op] | list[Op | None] | Op | None) -> None:
        """Mark what the broker itself does at every start, damage or not (see :attr:`Op.routine`)."""
        for op in ops if isinstance(ops, list) else [ops]:
            if op is not None:
                op.routine = True


class _Loader:
    def __init__(self, view: DirView, config: LogConfig, recovery_point: int, log_start_offset: int,
                 had_clean_shutdown: bool, now_ms: int, strict_indexes: bool, expiration_ms: int):
        self.view = view
        self.cfg = config
        self.recovery_point = recovery_point
        self.log_start = log_start_offset
        self.clean = had_clean_shutdown
        self.now = now_ms
        self.strict = strict_indexes
        self.expiration = expiration_ms
        self.out = LoadedPartition()
        self.name = view.path.name
        self.epochs: LeaderEpochCache | None = None
        self.next_offsets: dict[int, int] = {}
        self.last_truncation: Op | None = None

    # ------------------------------------------------------------------------------------------ helpers
    def segments(self) -> list[Segment]:
        return PartitionLog(self.view).segments

    def recovered_bases(self) -> set[int]:
        """The base offsets of the segments ``recoverLog`` recovers: every one that is not
        :meth:`PartitionLog.segments_unchecked_at_load` (none after a clean shutdown; otherwise the floor segment
        of the recovery point and all later ones)."""
        log = PartitionLog(self.view, recovery_point=self.recovery_point)
        unchecked = {s.base_offset for s in log.segments_unchecked_at_load(self.clean)}
        return {s.base_offset for s in log.segments} - unchecked

    def write_if_changed(self, name: str, data: bytes, why: str | Reason) -> Op | None:
        v = self.view
        if v.exists(name) and v.size(name) == len(data) and v.read(name) == data:
            return None
        return v.write(name, data, why)

    # ------------------------------------------------------------------------------------------ loading
    def load(self) -> LoadedPartition:
        out = self.out
        tmp = recover_swap_files(self.view)
        out.mark_routine([op for op in self.view.ops if op.kind == "delete" and op.path.endswith(".deleted")
                          and getattr(op.why, "kind", None) == "op.deletedFile"])
        if tmp.renamed:
            out.notes.append(note(self.view.path, "loader.swapCompleted"))
        for _attempt in range(MAX_SPLITS):
            try:
                self.load_segments()
                break
            except OffsetOverflowError as e:
                new = split_overflowed_segment(self.view, e.base_offset,
                                               index_interval_bytes=self.cfg.index_interval_bytes)
                out.notes.append(note(self.view.path, "loader.split", baseOffset=e.base_offset, reason=e.reason,
                                      newSegments=list(new)))
                self.next_offsets.clear()
        else:  # pragma: no cover - a broker gives up too
            raise KafkaLogError("too many offset-overflow splits", str(self.view.path))
        self.finish()
        return out

    def load_segments(self) -> None:
        """``loadSegmentFiles`` + ``recoverLog``; raises :class:`OffsetOverflowError` for a segment to split."""
        view, out = self.view, self.out
        segs = self.segments()
        bases = {s.base_offset for s in segs}
        for name in view.names():
            if is_index_file(name):
                try:
                    b = offset_from_file_name(name)
                except ValueError:
                    continue
                if b not in bases:
                    view.delete(name, note(view.path, "op.orphanIndex"))
        unflushed = self.recovered_bases()
        must_recover: list[Segment] = []
        for s in segs:
            b = s.base_offset
            if not view.exists(time_index_file_name(b)):
                view.touch(time_index_file_name(b), note(view.path, "op.missingTimeIndex"))
            if b in unflushed:
                continue  # recovered below, whatever its indexes hold
            problem: Defect | None = None
            if not view.exists(index_file_name(b)):
                problem = defect("segment.indexMissing")
            else:
                problem = s.txn_index_problem()
                if problem is None and self.strict:
                    problem = s.index_problem()
            if problem is not None:  # the segment's index defect, its code and facts
                out.notes.append(note(self.view.path, "loader.indexRebuilt", baseOffset=b,
                                      defect={"code": problem.code, "facts": dict(problem.facts)}))
                must_recover.append(s)
        if self.epochs is None:
            self.epochs = self.load_epochs(segs)
        for s in must_recover:
            self.recover(s.base_offset)
        if self.clean:
            return
        todo = sorted(unflushed)
        for i, b in enumerate(todo):
            rec = self.recover(b)
            self.next_offsets[b] = rec.next_offset
            if rec.valid_bytes < rec.log_size:
                for later in todo[i + 1:]:
                    self.delete_segment(later, note(view.path, "loss.afterInvalidByte", baseOffset=b))
                # the cut comes after the later segments are gone: a crash in between leaves the invalid bytes,
                # which the next recovery finds again, never valid later segments behind a cut log (a gap)
                cut = self.last_truncation
                if cut is not None and cut in view.ops and todo[i + 1:]:
                    view.ops.remove(cut)
                    view.ops.append(cut)
                break

    def load_epochs(self, segs: list[Segment]) -> LeaderEpochCache:
        try:
            return LeaderEpochCache.load(self.view, auto_flush=False)
        except CorruptCheckpointError as e:
            self.out.notes.append(note(self.view.path, "loader.epochCheckpointUnreadable", error=e.reason))
            path = self.view.file("leader-epoch-checkpoint")
            self.out.startup_errors.append(startup_error(path, f"Error while reading checkpoint file {path}",
                                                         offline=True))
            cache = LeaderEpochCache(self.view, auto_flush=False)
            cache.dirty = True
            for s in segs:
                try:
                    for b in s.iter_batches():
                        if b.magic >= 2:
                            cache.assign_from_batch(b.partition_leader_epoch, b.base_offset)
                        del b
                except KafkaLogError:
                    pass
            return cache

    def recover(self, base: int) -> RecoveredSegment:
        """``LogLoader.recoverSegment``: scratch producer state rebuilt up to the base, ``LogSegment.recover``,
        the indexes written, a snapshot taken."""
        view, out = self.view, self.out
        segs = self.segments()
        seg = next(s for s in segs if s.base_offset == base)
        if seg.size > MAX_SEGMENT_BYTES:  # FileRecords.open throws before anything is read
            raise KafkaLogError(f"log file of {seg.size} bytes exceeds {MAX_SEGMENT_BYTES} bytes: Kafka cannot "
                                "open it (FileRecords), so the broker cannot load this partition; nothing to recover "
                                "in place (`kafkalog dump` and `export` read it)", str(seg.path))
        psm = ProducerStateManager(view, producer_id_expiration_ms=self.expiration)
        rebuild_producer_state(psm, segs, self.log_start, base, self.now, False)
        rec = recover_segment(seg, base, index_interval_bytes=self.cfg.index_interval_bytes,
                              producers=psm, epochs=self.epochs, path=str(seg.path), on_overflow="raise")
        name = log_file_name(base)
        if rec.valid_bytes < rec.log_size:
            cause = rec.cause()
            t = rec.tail
            self.last_truncation = view.truncate(name, rec.valid_bytes, note(
                view.path, "op.invalidBytes", validBytes=rec.valid_bytes, stop=cause["stop"], error=cause["error"]))
            out.losses.append(Loss("", rec.next_offset, t.last_offset if t else None, t.records if t else None,
                                   rec.truncated_bytes, str(seg.path), rec.valid_bytes, damage=True,
                                   note=note(seg.path, "loss.truncatedAt", position=rec.valid_bytes,
                                             stop=cause["stop"], error=cause["error"])))
            out.notes.append(note(self.view.path, "loader.truncated", baseOffset=base, validBytes=rec.valid_bytes,
                                  stop=cause["stop"], error=cause["error"]))
        why = note(view.path, "op.recoveredIndex", baseOffset=base)
        self.write_if_changed(index_file_name(base), rec.offset_index.to_bytes(), why)
        self.write_if_changed(time_index_file_name(base), rec.time_index.to_bytes(), why)
        txn = txn_index_file_name(base)
        if rec.aborted or view.exists(txn):
            self.write_if_changed(txn, rec.txn_index.to_bytes(), why)
        psm.take_snapshot(why=note(view.path, "op.recoveredSnapshot", baseOffset=base))
        out.recovered.append(rec)
        return rec

    def delete_segment(self, base: int, why: Finding) -> None:
        """Delete segment ``base`` (a loss): ``why`` is the loss's note and its files' operations' why."""
        view, out = self.view, self.out
        name = log_file_name(base)
        if view.exists(name):
            with Segment.in_view(view, base) as seg:  # (its scanner: a URL's .log in windows)
                t = tail_loss(seg, 0)
            out.losses.append(Loss("", t.first_offset, t.last_offset, t.records, view.size(name),
                                   view.file(name), 0, damage=True, note=why))
        for f in (log_file_name, index_file_name, time_index_file_name, txn_index_file_name):
            view.delete(f(base), why)

    # ------------------------------------------------------------------------------------------ finishing
    def finish(self) -> None:
        view, out = self.view, self.out
        assert self.epochs is not None
        segs = self.segments()
        if not segs:
            leo = self.log_start
        elif segs[-1].base_offset in self.next_offsets:
            leo = self.next_offsets[segs[-1].base_offset]  # the last segment was just recovered: no second scan
        else:
            leo = segs[-1].read_next_offset()
        if segs and leo < self.log_start:
            out.notes.append(note(self.view.path, "loader.endBelowStart", logEndOffset=leo,
                                  logStartOffset=self.log_start))
            for s in segs:
                self.delete_segment(s.base_offset, note(view.path, "loss.endBelowStart", logEndOffset=leo,
                                                        logStartOffset=self.log_start))
            self.epochs.clear()
            segs = []
        if not segs:
            view.touch(log_file_name(self.log_start), note(view.path, "op.emptyActiveSegment"))
            segs = self.segments()
            leo = self.log_start
        lso = partition_log.log_start_offset(self.log_start, segs[0].base_offset, self.cfg.remote_log_enabled)
        out.log_end_offset, out.log_start_offset = leo, lso
        epochs = self.epochs
        epochs.truncate_from_end(leo)
        epochs.truncate_from_start(self.log_start)
        if epochs.dirty or not epochs.exists:
            before = len(view.ops)
            epochs.flush(why=note(view.path, "op.epochsTruncated", logStartOffset=lso, logEndOffset=leo))
            out.mark_routine(view.ops[before:])
        before = len(view.ops)
        psm = ProducerStateManager(view, producer_id_expiration_ms=self.expiration)
        psm.remove_stray_snapshots([s.base_offset for s in segs])
        rebuild_producer_state(psm, segs, lso, leo, self.now, self.clean)
        out.mark_routine(view.ops[before:])
        out.mark_routine(trim_indexes(view, segs[-1].base_offset, note(view.path, "op.activeIndexesTrimmed")))


def startup_error(path: str, cause: str, *, offline: bool = False) -> dict[str, Any]:
    """A file the broker fails on while it loads the logs (Kafka 3.9 and 4.x). ``offline``: a
    ``KafkaStorageException`` (``cause`` is its message, logged by ``LogDirFailureChannel``): the file's log dir goes
    offline, and when every log dir is offline the broker shuts down; otherwise any other exception, which ends in
    ``BrokerMetadataPublisher``'s fatal fault "Error starting LogManager" (``cause``: the exception it logs first,
    "There was an error in one of the threads during logs loading: ...")."""
    return {"file": path, "offline": offline, "cause": cause,
            "brokerMessage": None if offline else "Error starting LogManager"}


def load_partition(view: DirView, *, config: LogConfig | None = None, recovery_point: int = 0,
                   log_start_offset: int = 0, had_clean_shutdown: bool = False, now_ms: int = 0,
                   strict_indexes: bool = True, producer_id_expiration_ms: int = 86400000) -> LoadedPartition:
    """Load and recover the partition of ``view`` as ``LogLoader.load`` does, then close it cleanly (see the
    module doc). The operations are on ``view.ops`` (a planned view) or done (a direct one)."""
    return _Loader(view, config or LogConfig(), recovery_point, log_start_offset, had_clean_shutdown, now_ms,
                   strict_indexes, producer_id_expiration_ms).load()


__all__ = ["LoadedPartition", "load_partition", "startup_error"]
