"""Verification of partition logs and data dirs as pure functions returning :class:`Finding` lists.

Nothing here prints, writes or raises for bad data: every problem becomes a finding with the file, the byte
position, a ``kind`` and a severity. Shallow checks (always): batch framing, CRCs, offsets increasing and not
below the segment base, offset-index entries pointing at batch starts with matching offsets (Kafka's
``sanityCheck`` plus the stricter ``DumpLogSegments --verify-index-only`` rule), time-index entries matching
batch max timestamps, transaction-index sanity, checkpoints pointing inside the logs, ``partition.metadata``
present and consistent, leftover temporary files. ``deep=True`` also decodes every record (decompressing),
checks record offsets/timestamps against the batch headers and the control records against ``.txnindex``.

Kinds: ``crc``, ``batch``, ``offsets``, ``index``, ``timeindex``, ``txnindex``, ``checkpoint``, ``snapshot``,
``epoch``, ``metadata``, ``leftover``, ``layout``, ``lock``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import CorruptRecordError, KafkaLogError
from .files._index import INT32_MAX
from .files.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from .files.clean_shutdown import CLEAN_SHUTDOWN_FILE
from .files.findings import Finding, Severity, error, info, warning
from .files.names import CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX, SWAP_FILE_SUFFIX, TMP_FILE_SUFFIX
from .files.producer_snapshot import read_producer_snapshot
from .files.quorum_state import QUORUM_STATE_FILE, read_quorum_state
from .files.segment import Segment
from .log import METADATA_TOPIC, PartitionLog
from .logdir import DataDir, DataDirs, classify_path, open_partition_log, partition_checkpoints
from .records.control import ABORT, COMMIT, parse_control_key, parse_end_txn_marker

__all__ = [
    "Finding",
    "SegmentSummary",
    "Severity",
    "verify_data_dir",
    "verify_data_dirs",
    "verify_partition",
    "verify_segment",
]

MAX_SEGMENT_BYTES = INT32_MAX  # FileRecords: a .log cannot exceed Integer.MAX_VALUE bytes


@dataclass
class SegmentSummary:
    """What one pass over a segment learned (also used by :mod:`.describe`)."""

    base_offset: int
    size: int
    batches: int = 0
    first_offset: int | None = None
    next_offset: int | None = None
    max_timestamp: int = -1
    valid_bytes: int = 0
    magics: set[int] = field(default_factory=set)
    codecs: set[int] = field(default_factory=set)
    epochs: list[tuple[int, int]] = field(default_factory=list)  # (epoch, base offset) at each increase
    records: int | None = None  # deep only


class _IndexCheck:
    """Streams the offset index alongside the batch scan (both ordered by position)."""

    def __init__(self, seg: Segment, out: list[Finding]):
        self.idx = seg.offset_index
        self.path = str(seg.index_path)
        self.out = out
        self.it: Iterator = iter(enumerate(self.idx))
        self.cur = next(self.it, None)
        self.pending: tuple[int, int, int] | None = None  # (slot, offset, position) waiting for its last offset
        self.mismatches = 0
        self.prev_last = -1 << 63  # last offset of the batch before the current one

    def _close_pending(self) -> None:
        if self.pending is not None:
            slot, off, pos = self.pending
            self.out.append(error(self.path, slot * 8, "index",
                                  f"entry {slot} ({off}, {pos}): no batch from position {pos} up to the next "
                                  f"entry ends at offset {off}"))
            self.pending = None

    def batch(self, b) -> None:
        while self.cur is not None and self.cur[1].position <= b.position:
            slot, e = self.cur
            if e.position < b.position:
                self._close_pending()
                self.out.append(error(self.path, slot * 8, "index",
                                      f"entry {slot} ({e.offset}, {e.position}): position is not the start of a batch"))
            else:
                self._close_pending()
                if e.offset == b.last_offset:
                    pass
                elif e.offset > b.last_offset:
                    self.pending = (slot, e.offset, e.position)
                    self.mismatches += 1
                elif e.offset > self.prev_last:
                    self.out.append(warning(self.path, slot * 8, "index",
                                            f"entry {slot} ({e.offset}, {e.position}): offset inside the batch there "
                                            f"(last offset {b.last_offset}); Kafka before 0.10.1 indexed the first "
                                            "offset of an append"))
                else:
                    self.out.append(error(self.path, slot * 8, "index",
                                          f"entry {slot} ({e.offset}, {e.position}): offset not above the previous "
                                          f"batch's last offset {self.prev_last}: lookups would start too late"))
            self.cur = next(self.it, None)
        if self.pending is not None and b.position > self.pending[2] and b.last_offset >= self.pending[1]:
            if b.last_offset != self.pending[1]:
                self._close_pending()
            else:
                self.pending = None
        self.prev_last = b.last_offset

    def finish(self, log_size: int) -> None:
        self._close_pending()
        while self.cur is not None:
            slot, e = self.cur
            where = "beyond the end of the log" if e.position >= log_size else "not at a batch start"
            self.out.append(error(self.path, slot * 8, "index",
                                  f"entry {slot} ({e.offset}, {e.position}): position {where}"))
            self.cur = next(self.it, None)
        if self.mismatches:
            self.out.append(info(self.path, None, "index",
                                 f"{self.mismatches} entries carry the last offset of a multi-batch append "
                                 "(follower or cleaner write), not of the batch at their position"))


class _TimeIndexCheck:
    """Streams the time index alongside the batch scan (entries ordered by offset)."""

    def __init__(self, seg: Segment, out: list[Finding]):
        self.idx = seg.time_index
        self.path = str(seg.time_index_path)
        self.out = out
        self.it: Iterator = iter(enumerate(self.idx))
        self.cur = next(self.it, None)
        self.running_max = -1  # max timestamp of the batches before the current one
        self.deep_offsets = 0

    def batch(self, b) -> None:
        while self.cur is not None and self.cur[1].offset <= b.last_offset:
            slot, e = self.cur
            pos = slot * 12
            if b.max_timestamp != e.timestamp:
                self.out.append(warning(self.path, pos, "timeindex",
                                        f"entry {slot} ({e.timestamp}, {e.offset}): the batch holding offset "
                                        f"{e.offset} has max timestamp {b.max_timestamp}"))
            elif self.running_max >= e.timestamp:
                self.out.append(warning(self.path, pos, "timeindex",
                                        f"entry {slot} ({e.timestamp}, {e.offset}): an earlier batch already "
                                        f"reached timestamp {self.running_max}"))
            if e.offset != b.last_offset:
                self.deep_offsets += 1
            self.cur = next(self.it, None)
        self.running_max = max(self.running_max, b.max_timestamp)

    def finish(self, segment_max: int, closed: bool) -> None:
        while self.cur is not None:
            slot, e = self.cur
            self.out.append(error(self.path, slot * 12, "timeindex",
                                  f"entry {slot} ({e.timestamp}, {e.offset}): offset beyond the last batch"))
            self.cur = next(self.it, None)
        if self.deep_offsets:
            self.out.append(info(self.path, None, "timeindex",
                                 f"{self.deep_offsets} entries point inside a batch (offset of the record with the "
                                 "max timestamp, as leaders before Kafka 3.8 wrote them)"))
        last = self.idx.last_valid_entry.timestamp
        if closed and segment_max >= 0 and last < segment_max:
            self.out.append(warning(self.path, None, "timeindex",
                                    f"last entry has timestamp {last} but the segment's max timestamp is "
                                    f"{segment_max}: the final entry written at roll/close is missing, so Kafka "
                                    "under-reports the segment's largest timestamp (retention)"))


def _deep_check(b, path: str, out: list[Finding], summary: SegmentSummary) -> list | None:
    try:
        records = b.records()
    except KafkaLogError as e:
        out.append(error(path, b.position if e.position is None else e.position, "batch",
                         f"records cannot be decoded: {e.reason}"))
        return None
    summary.records = (summary.records or 0) + len(records)
    if b.magic >= 2:
        if len(records) != b.records_count:
            out.append(error(path, b.position, "batch",
                             f"header says {b.records_count} records, {len(records)} decoded"))
        prev = None
        max_ts = -1
        for r in records:
            if r.offset < b.base_offset or r.offset > b.last_offset:
                out.append(error(path, b.position, "offsets",
                                 f"record offset {r.offset} outside the batch range [{b.base_offset}, {b.last_offset}]"))
            if prev is not None and r.offset <= prev:
                out.append(error(path, b.position, "offsets", f"record offset {r.offset} after {prev}"))
            prev = r.offset
            max_ts = max(max_ts, r.timestamp)
        if records and b.timestamp_type == 0 and not b.has_delete_horizon and max_ts != b.max_timestamp:
            out.append(warning(path, b.position, "batch",
                               f"max timestamp {b.max_timestamp} in the header, {max_ts} over the records"))
        if b.is_control:
            for r in records[:1]:
                try:
                    _, ctype = parse_control_key(r.key)
                    if ctype in (ABORT, COMMIT):
                        parse_end_txn_marker(r.value)
                except CorruptRecordError as e:
                    out.append(error(path, b.position, "batch", f"control record: {e.reason}"))
    else:
        prev = None
        for r in records:
            if prev is not None and r.offset <= prev:
                out.append(error(path, b.position, "offsets", f"inner message offset {r.offset} after {prev}"))
            prev = r.offset
        if records and records[-1].offset != b.last_offset:
            out.append(error(path, b.position, "offsets",
                             f"wrapper offset {b.last_offset} differs from the last inner offset {records[-1].offset}"))
    return records


def verify_segment(
    seg: Segment,
    *,
    deep: bool = False,
    is_active: bool = False,
    previous_next_offset: int | None = None,
    findings: list[Finding] | None = None,
) -> tuple[list[Finding], SegmentSummary]:
    """Check one segment's ``.log`` and indexes; returns the findings and a summary of the scan."""
    out: list[Finding] = [] if findings is None else findings
    path = str(seg.path)
    size = seg.size
    summary = SegmentSummary(seg.base_offset, size)
    if size > MAX_SEGMENT_BYTES:
        out.append(error(path, None, "batch", f"log file of {size} bytes exceeds 2147483647 bytes"))
    if not seg.has_offset_index:
        out.append(warning(seg.index_path, None, "index", "missing: Kafka rebuilds it by recovering the segment"))
    if not seg.has_time_index:
        out.append(info(seg.time_index_path, None, "timeindex", "missing: Kafka creates it empty at load"))
    checks: list = []
    idx_check = time_check = None
    for kind, idx in (("index", seg.offset_index), ("timeindex", seg.time_index)):
        if not (seg.has_offset_index if kind == "index" else seg.has_time_index):
            continue
        ipath = str(seg.index_path if kind == "index" else seg.time_index_path)
        untrimmed = idx.padding_entries > 0 and idx.padding_is_zero()
        try:
            idx.sanity_check()
        except KafkaLogError as e:
            sev = ("info" if is_active else "warning") if untrimmed else "error"
            out.append(Finding(ipath, e.position, kind, sev, "Kafka's sanity check fails: " + e.reason
                               + (" (zero padding of an untrimmed file)" if untrimmed else "")))
        for pos, msg in idx.problems():
            out.append(error(ipath, pos, kind, msg))
        if untrimmed:
            sev = "info" if is_active else "warning"
            out.append(Finding(ipath, idx.valid_entries * idx.entry_size, kind, sev,
                               f"not trimmed: {idx.padding_entries} zero slots after {idx.valid_entries} entries "
                               "(preallocated file of an active segment or of a broker that crashed)"))
    if seg.has_offset_index:
        idx_check = _IndexCheck(seg, out)
        checks.append(idx_check)
    if seg.has_time_index:
        time_check = _TimeIndexCheck(seg, out)
        checks.append(time_check)
    txn_entries: list = []
    if seg.has_txn_index:
        txn = seg.txn_index
        try:
            txn.sanity_check()
        except KafkaLogError as e:
            out.append(error(seg.txn_index_path, e.position, "txnindex",
                             "Kafka's sanity check fails (the segment is recovered at load): " + e.reason))
        for pos, msg in txn.problems():
            out.append(error(seg.txn_index_path, pos, "txnindex", msg))
        try:
            txn_entries = list(txn)
        except KafkaLogError:
            txn_entries = []
    aborts_seen: set[int] = set()

    prev_last: int | None = None
    scanner = seg.scanner()
    try:
        for b in scanner:
            summary.batches += 1
            summary.magics.add(b.magic)
            summary.codecs.add(b.codec)
            if b.magic > 2:
                out.append(error(path, b.position, "batch", f"unknown magic {b.magic}"))
            if not b.is_valid():
                out.append(error(path, b.position, "crc",
                                 f"CRC mismatch (stored 0x{b.crc:08x}, computed 0x{b.compute_crc():08x}); recovery "
                                 "truncates the segment here"))
            last = b.last_offset
            first = b.base_offset if b.magic >= 2 or not b.is_compressed else None
            if b.magic >= 2 and b.last_offset_delta < 0:
                out.append(error(path, b.position, "batch", f"negative last offset delta {b.last_offset_delta}"))
            if summary.first_offset is None:
                if first is None:
                    try:
                        first = b.base_offset
                    except KafkaLogError as e:
                        out.append(error(path, b.position, "batch", f"cannot read the first offset: {e.reason}"))
                        first = last
                summary.first_offset = first
                if first < seg.base_offset:
                    out.append(error(path, b.position, "offsets",
                                     f"first offset {first} is below the segment base offset {seg.base_offset}"))
                if previous_next_offset is not None and first < previous_next_offset:
                    out.append(error(path, b.position, "offsets",
                                     f"first offset {first} overlaps the previous segment (next offset "
                                     f"{previous_next_offset})"))
            if prev_last is not None:
                if (first if first is not None else last) <= prev_last:
                    out.append(error(path, b.position, "offsets",
                                     f"offsets do not increase: batch starting at "
                                     f"{first if first is not None else last} follows last offset {prev_last}"))
            if not 0 <= last - seg.base_offset <= INT32_MAX:
                out.append(error(path, b.position, "offsets",
                                 f"last offset {last} does not fit the segment's int32 range from base offset "
                                 f"{seg.base_offset} (Kafka splits such segments)"))
            if b.magic >= 2:
                ple = b.partition_leader_epoch
                if ple >= 0 and (not summary.epochs or ple > summary.epochs[-1][0]):
                    summary.epochs.append((ple, b.base_offset))
                if b.is_control and txn_entries and b.producer_id >= 0:
                    aborts_seen.add(b.base_offset)
            prev_last = last
            summary.next_offset = last + 1
            summary.max_timestamp = max(summary.max_timestamp, b.max_timestamp)
            summary.valid_bytes = b.position + b.size
            for c in checks:
                c.batch(b)
            if deep:
                _deep_check(b, path, out, summary)
    except CorruptRecordError as e:
        out.append(error(path, e.position, "batch", f"{e.reason}; recovery truncates the segment here"))
    else:
        if scanner.stop_reason is not None:
            out.append(error(path, scanner.stop_position, "batch",
                             f"{scanner.stop_reason}: {size - scanner.stop_position} bytes after the last complete "
                             "batch; recovery truncates them"))
    if idx_check is not None:
        idx_check.finish(size)
    if time_check is not None:
        time_check.finish(summary.max_timestamp, closed=not is_active)
    for i, t in enumerate(txn_entries):
        if t.last_offset >= seg.base_offset and t.last_offset not in aborts_seen:
            out.append(error(seg.txn_index_path, i * 34, "txnindex",
                             f"entry {i}: no transaction marker at offset {t.last_offset} in the segment"))
    if size == 0 and not is_active:
        out.append(info(path, None, "batch", "empty segment"))
    return out, summary


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
            log = open_partition_log(Path(path), checkpoints)
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
    why = ("the data dir had a clean shutdown" if clean else
           f"the segment lies below the recovery point {log.recovery_point}")
    data_dir = log.path.parent
    for i in range(first, len(out)):
        f = out[i]
        if f.severity == "error" and f.kind in ("crc", "batch") and "recovery truncates" in f.message:
            msg = f.message.replace("; recovery truncates the segment here", "").replace(
                "; recovery truncates them", "").replace("recovery truncates the segment here", "")
            out[i] = error(f.file, f.position, f.kind,
                           f"{msg}; the broker will NOT truncate this at startup ({why}): it would serve and replicate "
                           f"the segment as it is. `kafkalog repair {data_dir} --full --dry-run` shows the cut (the "
                           f"records from byte {f.position} on, and every later segment), `kafkalog repair {data_dir} "
                           "--full` makes it")


def _verify_log(log: PartitionLog, deep: bool, out: list[Finding]) -> None:
    out.extend(log.findings)
    d = str(log.path)
    if not log.segments:
        out.append(warning(d, None, "layout", "no segments: Kafka creates an empty one at the log start offset"))

    # leftovers
    for p, suffix in log.temp_files:
        action = {
            SWAP_FILE_SUFFIX: "a replacement segment whose swap was interrupted; Kafka completes the swap at load",
            CLEANED_FILE_SUFFIX: "output of an interrupted cleaning or split; Kafka deletes it at load",
            DELETED_FILE_SUFFIX: "a deleted file awaiting removal; Kafka deletes it at load",
            TMP_FILE_SUFFIX: "temporary file of an interrupted atomic write; ignored by Kafka",
        }[suffix]
        sev = "info" if suffix == DELETED_FILE_SUFFIX else "warning"  # routine: file.delete.delay.ms
        out.append(Finding(str(p), None, "leftover", sev, action))

    # segments: which of them a broker starting on this dir would recover (and so truncate at an invalid byte)
    clean = (log.path.parent / CLEAN_SHUTDOWN_FILE).exists()
    recovered = set() if clean else {s.base_offset for s in log.segments_in_unflushed_range(log.recovery_point or 0)}
    prev_next: int | None = None
    summaries: list[SegmentSummary] = []
    for i, seg in enumerate(log.segments):
        if prev_next is not None and seg.base_offset < prev_next:
            out.append(error(seg.path, None, "offsets",
                             f"base offset {seg.base_offset} is below the previous segment's next offset {prev_next}"))
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

    # data-dir checkpoints
    lso_ckpt = log.log_start_offset_checkpoint
    if lso_ckpt is not None:
        if lso_ckpt > leo:
            out.append(error(d, None, "checkpoint",
                             f"{LOG_START_OFFSET_CHECKPOINT} says {lso_ckpt}, above the log end offset {leo}: Kafka "
                             "deletes every segment at load"))
        elif log.segments and lso_ckpt <= log.segments[0].base_offset:
            out.append(info(d, None, "checkpoint",
                            f"{LOG_START_OFFSET_CHECKPOINT} entry {lso_ckpt} is not above the first segment's base "
                            "offset (Kafka only writes entries above it)"))
    rp = log.recovery_point
    if rp is not None and rp > leo:
        out.append(warning(d, None, "checkpoint",
                           f"{RECOVERY_POINT_CHECKPOINT} says {rp}, above the log end offset {leo} (Kafka uses "
                           "the log end offset)"))
    hw = log.high_watermark_checkpoint
    if hw is not None and (hw > leo or hw < log_start):
        out.append(warning(d, None, "checkpoint",
                           f"{REPLICATION_OFFSET_CHECKPOINT} high watermark {hw} is outside [{log_start}, {leo}]"))
    cp = log.clean_point
    if cp is not None and (cp > leo or cp < log_start):
        out.append(warning(d, None, "checkpoint",
                           f"{CLEANER_OFFSET_CHECKPOINT} first dirty offset {cp} is outside [{log_start}, {leo}] "
                           "(Kafka resets it)"))

    # leader epochs
    epochs_path = log.leader_epoch_checkpoint_path
    if epochs_path.exists():
        try:
            ckpt = log.leader_epoch_checkpoint
        except KafkaLogError as e:
            out.append(error(epochs_path, e.position, "epoch", e.reason))
            ckpt = None
        if ckpt is not None:
            for problem in ckpt.validate():
                out.append(error(epochs_path, None, "epoch", problem))
            known = {e.epoch: e.start_offset for e in ckpt.entries}
            for e in ckpt.entries:
                if e.start_offset > leo:
                    out.append(warning(epochs_path, None, "epoch",
                                       f"epoch {e.epoch} starts at {e.start_offset}, after the log end offset {leo} "
                                       "(Kafka truncates it at load)"))
            seen_max = -1
            for s in summaries:
                for epoch, start in s.epochs:
                    if epoch <= seen_max:
                        continue
                    seen_max = epoch
                    if epoch not in known:
                        if ckpt.entries and epoch > ckpt.entries[0].epoch:
                            out.append(warning(epochs_path, None, "epoch",
                                               f"epoch {epoch} (first batch at offset {start}) is missing"))
                    elif known[epoch] != start and start >= log_start and known[epoch] > log_start:
                        out.append(warning(epochs_path, None, "epoch",
                                           f"epoch {epoch} recorded at {known[epoch]}, first batch of that epoch "
                                           f"starts at {start}"))
    elif any(2 in s.magics for s in summaries):
        out.append(info(epochs_path, None, "epoch", "missing (Kafka recreates it from the log)"))

    # partition.metadata
    mpath = log.partition_metadata_path
    if mpath.exists():
        try:
            meta = log.partition_metadata
            if meta is not None and not meta.canonical:
                out.append(warning(mpath, None, "metadata", "not in the exact form Kafka writes"))
            if meta is not None and meta.version != 0:
                out.append(warning(mpath, None, "metadata", f"version {meta.version} (Kafka writes 0)"))
        except KafkaLogError as e:
            out.append(error(mpath, e.position, "metadata", e.reason))
    elif log.topic != METADATA_TOPIC:
        out.append(warning(mpath, None, "metadata",
                           "missing: no topic id (a KRaft broker treats such a replica as stray)"))

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
            out.append(error(sp, e.position, "snapshot",
                             f"{e.reason} (Kafka deletes it and falls back to an older snapshot)"))
            continue
        for problem in snap.validate():
            out.append(warning(sp, None, "snapshot", problem))
        if offset > leo:
            out.append(warning(sp, None, "snapshot",
                               f"snapshot offset {offset} is above the log end offset {leo} (Kafka deletes it)"))


def _quorum_state_check(log: PartitionLog, summaries: list[SegmentSummary], out: list[Finding]) -> None:
    qpath = log.path / QUORUM_STATE_FILE
    if not qpath.exists():
        out.append(info(qpath, None, "metadata", "missing: the raft client starts unattached and writes it"))
        return
    try:
        state = read_quorum_state(qpath)
    except KafkaLogError as e:
        out.append(error(qpath, e.position, "metadata", e.reason))
        return
    epochs = [epoch for s in summaries for epoch, _ in s.epochs]
    for problem in state.validate(max(epochs) if epochs else None):
        sev = error if "does not start" in problem else warning
        out.append(sev(qpath, None, "metadata", problem))


def verify_data_dir(path: str | os.PathLike | DataDir, deep: bool = False) -> list[Finding]:
    """Findings for a whole data dir: its own files, then every partition."""
    own = not isinstance(path, DataDir)
    try:
        ddir = DataDir(path) if own else path  # type: ignore[arg-type]
    except KafkaLogError as e:
        return [error(e.path or path, e.position, "layout", e.reason)]
    assert isinstance(ddir, DataDir)
    out: list[Finding] = list(ddir.findings)
    try:
        _verify_data_dir(ddir, deep, out)
    finally:
        if own:
            ddir.close()
    return out


def _verify_data_dir(ddir: DataDir, deep: bool, out: list[Finding]) -> None:
    _data_dir_checks(ddir, out)
    topic_ids: dict[str, tuple[str, Path]] = {}
    for log in ddir.partitions():
        out.extend(verify_partition(log, deep))
        try:
            tid = log.topic_id
        except KafkaLogError:
            tid = None
        _topic_id_check(topic_ids, log.topic, log.dir_kind, tid, log.path, out)
        log.close()
    _recovery_point_membership(ddir, out)


def _data_dir_checks(ddir: DataDir, out: list[Finding]) -> None:
    """The data dir's own files: lock, meta.properties, clean-shutdown marker, the four checkpoints."""
    d = ddir.path
    status = ddir.lock_status()
    if status.held:
        who = ", ".join(f"pid {h.pid}" for h in status.holders if h.pid) or "another process"
        out.append(warning(status.path, None, "lock",
                           f".lock is held by {who}: a broker is running and files may change while being read"))
    if ddir.meta_properties is None and not any(f.file.endswith("meta.properties") for f in out):
        out.append(warning(d / "meta.properties", None, "metadata", "missing"))
    elif ddir.meta_properties is not None and not ddir.meta_properties.canonical:
        out.append(info(d / "meta.properties", None, "metadata", "not in the exact form Properties.store writes"))
    if ddir.clean_shutdown is not None:
        for problem in ddir.clean_shutdown.validate():
            out.append(warning(d / ".kafka_cleanshutdown", None, "metadata", problem))
    hosted = {(tp.topic, tp.partition) for tp in ddir.partition_dirs.values() if tp.kind in ("live", "future")}
    for name, ckpt in ddir.checkpoints.items():
        p = d / name
        if ckpt is None:
            if not p.exists() and any(tp.kind == "live" for tp in ddir.partition_dirs.values()):
                out.append(info(p, None, "checkpoint", "missing"))
            continue
        for problem in ckpt.validate():
            out.append(warning(p, None, "checkpoint", problem))
        for e in ckpt.entries:
            if (e.topic, e.partition) not in hosted:
                out.append(warning(p, None, "checkpoint",
                                   f"entry for {e.topic}-{e.partition}, which is not hosted in this data dir"))


def _topic_id_check(topic_ids: dict[str, tuple[str, Path]], topic: str, kind: str, tid: str | None, path: Path,
                    out: list[Finding]) -> None:
    """All live partitions of a topic in one data dir must carry the same topic id."""
    if tid is not None and kind == "live":
        seen = topic_ids.setdefault(topic, (tid, path))
        if seen[0] != tid:
            out.append(error(path / "partition.metadata", None, "metadata",
                             f"topic id {tid} differs from {seen[0]} in {seen[1].name}"))


def _recovery_point_membership(ddir: DataDir, out: list[Finding]) -> None:
    rp = ddir.recovery_points
    for p, tp in ddir.partition_dirs.items():
        if (tp.kind in ("live", "future") and tp.topic != METADATA_TOPIC
                and ddir.checkpoints.get(RECOVERY_POINT_CHECKPOINT) is not None):
            if (tp.topic, tp.partition) not in rp:
                out.append(info(p, None, "checkpoint",
                                f"not in {RECOVERY_POINT_CHECKPOINT}: after an unclean shutdown every segment is "
                                "recovered"))


def verify_data_dirs(paths: list[str | os.PathLike], deep: bool = False) -> list[Finding]:
    """Several data dirs of one broker: each one, plus the cross-dir rules (``MetaPropertiesEnsemble``)."""
    try:
        dirs = DataDirs(paths)
    except KafkaLogError as e:
        return [error(e.path or "", e.position, "layout", e.reason)]
    with dirs:
        out = dirs.ensemble_findings()
        for ddir in dirs:
            out.extend(verify_data_dir(ddir, deep))
    return out


# ------------------------------------------------------------------------------------ many paths, in parallel


@dataclass
class VerifyStats:
    """What a verify run covered."""

    data_dirs: int = 0
    partitions: int = 0
    segments: int = 0
    files: int = 0  # single files given on the command line
    bytes: int = 0  # .log (and KRaft snapshot) bytes scanned


@dataclass
class VerifyReport:
    findings: list[Finding]
    stats: VerifyStats
    seconds: float = 0.0

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.findings if f.severity == "warning")

    @property
    def ok(self) -> bool:
        return self.errors == 0


def partition_bytes(path: str | os.PathLike) -> int:
    """Sum of the ``.log`` sizes of a partition directory (the work a verify of it does)."""
    total = 0
    try:
        with os.scandir(path) as it:
            for e in it:
                if e.name.endswith((".log", ".checkpoint")) and e.is_file(follow_symlinks=False):
                    total += e.stat().st_size
    except OSError:
        pass
    return total


PartitionResult = tuple[list[Finding], int, int, str | None]  # findings, segments, bytes, topic id
PartitionRunner = Callable[[list[tuple[str, dict[str, int | None] | None, bool]]], list[PartitionResult]]


def partition_task(path: str, checkpoints: dict[str, int | None] | None, deep: bool
                   ) -> tuple[list[Finding], int, int, str | None]:
    """Worker: verify one partition dir; (findings, segments, bytes, topic id).

    ``checkpoints`` are the data dir's values for this partition (``None``: read them from the parent dir)."""
    p = Path(path)
    try:
        if checkpoints is None:
            checkpoints = partition_checkpoints(p)
        log = PartitionLog(
            p,
            log_start_offset_checkpoint=checkpoints.get(LOG_START_OFFSET_CHECKPOINT),
            recovery_point=checkpoints.get(RECOVERY_POINT_CHECKPOINT),
            high_watermark=checkpoints.get(REPLICATION_OFFSET_CHECKPOINT),
            clean_point=checkpoints.get(CLEANER_OFFSET_CHECKPOINT),
        )
    except KafkaLogError as e:
        return [error(e.path or path, e.position, "layout", e.reason)], 0, 0, None
    try:
        segments = len(log.segments)
        size = sum(s.size for s in log.segments) + sum(k.stat().st_size for k in log.kraft_snapshots
                                                       if k.name.endswith(".checkpoint"))
        out = verify_partition(log, deep)
        try:
            tid = log.topic_id
        except KafkaLogError:
            tid = None
        return out, segments, size, tid
    finally:
        log.close()


def verify_kraft_snapshot(path: str | os.PathLike, deep: bool = False) -> tuple[list[Finding], int]:
    """A KRaft snapshot (``<offset>-<epoch>.checkpoint``): batch framing and CRCs (records with ``deep``);
    returns the findings and the bytes scanned."""
    from .records import LogScanner

    name = os.fspath(path)
    out: list[Finding] = []
    from .files._index import map_file

    try:
        mm, _ = map_file(name, CorruptRecordError)
    except KafkaLogError as e:
        return [error(name, e.position, "layout", e.reason)], 0
    buf = memoryview(mm)
    try:
        scanner = LogScanner(buf, path=name)
        summary = SegmentSummary(0, len(buf))
        try:
            for b in scanner:
                if not b.is_valid():
                    out.append(error(name, b.position, "crc",
                                     f"CRC mismatch (stored 0x{b.crc:08x}, computed 0x{b.compute_crc():08x})"))
                if deep:
                    _deep_check(b, name, out, summary)
                del b
        except CorruptRecordError as e:
            out.append(error(name, e.position, "batch", e.reason))
        else:
            if scanner.stop_reason is not None:
                out.append(error(name, scanner.stop_position, "batch",
                                 f"{scanner.stop_reason}: {len(buf) - scanner.stop_position} bytes after the last "
                                 "complete batch"))
        return out, len(buf)
    finally:
        scanner = None  # type: ignore[assignment]
        buf.release()
        if hasattr(mm, "close"):
            try:
                mm.close()
            except BufferError:
                pass


_FILE_KINDS = {"snapshot": "snapshot", "offsetCheckpoint": "checkpoint", "leaderEpochCheckpoint": "epoch",
               "partitionMetadata": "metadata", "metaProperties": "metadata", "cleanShutdown": "metadata"}


def verify_file(path: str | os.PathLike, deep: bool = False) -> tuple[list[Finding], int, int]:
    """One file given on its own: a segment file (``.log`` or one of its indexes: the whole segment is
    checked), a KRaft snapshot, a producer snapshot, a checkpoint or metadata file. Returns (findings,
    segments, bytes)."""
    from .dumpers import dump_file, dump_kind

    p = Path(path)
    if not p.exists():
        return [error(p, None, "layout", "no such file")], 0, 0
    kind = dump_kind(p)
    if kind in ("log", "index", "timeindex", "txnindex"):
        prefix = p.name.split(".", 1)[0]
        log_path = p.parent / (prefix + ".log")
        if not log_path.exists():
            return [error(log_path, None, "layout", f"missing: {p.name} has no log file")], 0, 0
        later = [q for q in p.parent.glob("*.log") if q.name > log_path.name]
        seg = Segment(log_path)
        try:
            findings, summary = verify_segment(seg, deep=deep, is_active=not later)
        except KafkaLogError as e:
            return [error(e.path or log_path, e.position, "layout", e.reason)], 1, 0
        finally:
            seg.close()
        return findings, 1, summary.size
    if kind == "kraftSnapshot":
        findings, size = verify_kraft_snapshot(p, deep)
        return findings, 0, size
    if kind is None:
        return [info(p, None, "layout", "not a file kind Kafka keeps in a data dir: not checked")], 0, 0
    try:
        d = dump_file(p)
    except KafkaLogError as e:
        return [error(e.path or p, e.position, _FILE_KINDS.get(kind, "layout"), e.reason)], 0, 0
    return [error(p, x["position"], _FILE_KINDS.get(kind, "layout"), x["reason"]) for x in d.problems], 0, 0


ProgressCallback = Callable[[int], None]


def verify_paths(
    paths: list[str | os.PathLike],
    *,
    deep: bool = False,
    workers: int | None = None,
    independent: bool = False,
    on_total: ProgressCallback | None = None,
    on_advance: ProgressCallback | None = None,
    runner: PartitionRunner | None = None,
) -> VerifyReport:
    """Verify data dirs, partition dirs and single files (``kafkalog verify``), every partition in a process
    pool of ``workers`` processes (default: the CPU count; 1 = in this process).

    ``runner`` replaces the process pool: it gets every partition task as ``(path, checkpoints, deep)`` and
    returns :func:`partition_task` of each, in order (``kafkalog spark verify`` runs them as Spark tasks). The
    data dirs' own checks and the cross-partition ones stay here, so every runner gives the same report.

    Data dirs given together are treated as the ``log.dirs`` of one broker (cross-dir rules included) unless
    ``independent`` (data dirs of different brokers).
    ``on_total(bytes)`` is called once with the ``.log`` bytes to scan, ``on_advance(bytes)`` as each
    partition finishes. Findings come back grouped per data dir / partition / file, in the order given.
    """
    t0 = time.perf_counter()
    stats = VerifyStats()
    n_workers = max(1, workers if workers is not None else (os.cpu_count() or 1))

    # plan: (kind, path) in order; data dirs opened here (their own files are small)
    data_dirs: list[str | os.PathLike] = []
    items: list[tuple[str, Path]] = []
    for raw in paths:
        p = Path(raw)
        kind = classify_path(p) if p.exists() else "file"
        if kind == "dataDir":
            data_dirs.append(p)
        items.append((kind, p))

    results: dict[int, list[Finding]] = {}
    head: list[Finding] = []
    groups: list[DataDirs] = []
    tasks: list[tuple[int, str, dict[str, int | None] | None]] = []  # (slot, partition path, checkpoints)
    dir_slots: dict[int, tuple[DataDir, list[tuple[int, Path, str]]]] = {}
    opened: dict[Path, DataDir] = {}
    for group in ([[d] for d in data_dirs] if independent else [data_dirs] if data_dirs else []):
        try:
            dirs = DataDirs(group)
        except KafkaLogError as e:
            head.append(error(e.path or "", e.position, "layout", e.reason))
            bad = {Path(g) for g in group}
            items = [(k, p) for k, p in items if not (k == "dataDir" and p in bad)]
            continue
        groups.append(dirs)
        head.extend(dirs.ensemble_findings())
        for d in dirs:
            opened.setdefault(d.path, d)
    slot = 0
    singles: list[tuple[int, str, Path]] = []
    for kind, p in items:
        if kind == "dataDir":
            ddir = opened[p]
            stats.data_dirs += 1
            own: list[Finding] = list(ddir.findings)
            _data_dir_checks(ddir, own)
            results[slot] = own
            parts: list[tuple[int, Path, str]] = []
            dslot = slot
            slot += 1
            for pp, tp in ddir.partition_dirs.items():
                key = (tp.topic, tp.partition)
                ck = {
                    LOG_START_OFFSET_CHECKPOINT: ddir.log_start_offsets.get(key),
                    RECOVERY_POINT_CHECKPOINT: ddir.recovery_points.get(key),
                    REPLICATION_OFFSET_CHECKPOINT: ddir.high_watermarks.get(key),
                    CLEANER_OFFSET_CHECKPOINT: ddir.clean_points.get(key),
                }
                tasks.append((slot, str(pp), ck))
                parts.append((slot, pp, tp.kind))
                slot += 1
            dir_slots[dslot] = (ddir, parts)
        elif kind == "partition":
            tasks.append((slot, str(p), None))
            slot += 1
        else:
            singles.append((slot, "file", p))
            slot += 1

    sizes = {s: partition_bytes(pp) for s, pp, _ in tasks}
    single_sizes = {s: (p.stat().st_size if p.is_file() else 0) for s, _, p in singles}
    if on_total is not None:
        on_total(sum(sizes.values()) + sum(single_sizes.values()))

    topic_ids: dict[int, str | None] = {}

    def collect(s: int, res: tuple[list[Finding], int, int, str | None]) -> None:
        findings, segs, size, tid = res
        results[s] = findings
        stats.partitions += 1
        stats.segments += segs
        stats.bytes += size
        topic_ids[s] = tid
        if on_advance is not None:
            on_advance(sizes.get(s, size))

    try:
        if runner is not None:
            done = runner([(path, ck, deep) for _, path, ck in tasks]) if tasks else []
            if len(done) != len(tasks):
                raise RuntimeError(f"partition runner returned {len(done)} results for {len(tasks)} tasks")
            for (s, _, _), res in zip(tasks, done, strict=True):
                collect(s, res)
        elif n_workers > 1 and len(tasks) > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
            # biggest first so one large partition does not start last
            order = sorted(tasks, key=lambda t: -sizes[t[0]])
            with ProcessPoolExecutor(max_workers=min(n_workers, len(tasks)), mp_context=ctx) as pool:
                futs = {pool.submit(partition_task, path, ck, deep): s for s, path, ck in order}
                for fut in as_completed(futs):
                    collect(futs[fut], fut.result())
        else:
            for s, path, ck in tasks:
                collect(s, partition_task(path, ck, deep))
        for s, _, p in singles:
            findings, segs, size = verify_file(p, deep)
            results[s] = findings
            stats.files += 1
            stats.segments += segs
            stats.bytes += size
            if on_advance is not None:
                on_advance(single_sizes.get(s, size))
        for dslot, (ddir, parts) in dir_slots.items():
            seen: dict[str, tuple[str, Path]] = {}
            post: list[Finding] = []
            for s, pp, kind in parts:
                tp = ddir.partition_dirs[pp]
                _topic_id_check(seen, tp.topic, kind, topic_ids.get(s), pp, post)
            _recovery_point_membership(ddir, post)
            results[dslot].extend(post)
    finally:
        for g in groups:
            g.close()
    out = list(head)
    for s in sorted(results):
        out.extend(results[s])
    return VerifyReport(out, stats, time.perf_counter() - t0)
