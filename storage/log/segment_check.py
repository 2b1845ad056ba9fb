"""One segment: its ``.log`` batch by batch and its indexes against it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from kafkalog.storage.errors import CorruptRecordError, KafkaLogError
from kafkalog.storage.files.findings import Finding, error, info, warning
from kafkalog.storage.files.index import INT32_MAX
from kafkalog.storage.files.segment import Segment, WindowedScanner
from kafkalog.storage.log.loss import SegmentHole
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.records import LogScanner, scan_crc
from kafkalog.storage.records.batch import RecordBatch
from kafkalog.storage.records.control import ABORT, COMMIT, parse_control_key, parse_end_txn_marker

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


class _StreamedIndex:
    """An index's entries streamed alongside the batch scan: :attr:`cur` is the next ``(slot, entry)`` the scan has
    not reached yet (None: none left)."""

    KIND: str  # the findings' kind
    SLOT: int  # bytes per entry

    def __init__(self, idx, path, out: list[Finding]):
        self.idx = idx
        self.path = str(path)
        self.out = out
        self.it: Iterator = iter(enumerate(idx))
        self.cur = next(self.it, None)

    def advance(self) -> None:
        self.cur = next(self.it, None)

    def leftovers(self) -> Iterator:
        """The entries the scan never reached (``(slot, entry)``), consumed."""
        while self.cur is not None:
            yield self.cur
            self.advance()

    def noted(self, level=warning, *, code: str, entry: int, **facts) -> None:
        """A finding ``code`` of ``level`` (a warning by default) about the index's ``entry`` (its fields among
        ``facts``), at its byte position."""
        self.out.append(level(self.path, entry * self.SLOT, self.KIND, code=code, entry=entry, **facts))

    def count(self, *, code: str, entries: int) -> None:
        """An info finding ``code`` about a number of ``entries`` (none when it is 0)."""
        if entries:
            self.out.append(info(self.path, None, self.KIND, code=code, entries=entries))


class _IndexCheck(_StreamedIndex):
    """Streams the offset index alongside the batch scan (both ordered by position)."""

    KIND, SLOT = "index", 8

    def __init__(self, seg: Segment, out: list[Finding]):
        super().__init__(seg.offset_index, seg.index_path, out)
        self.pending: tuple[int, int, int] | None = None  # (slot, offset, position) waiting for its last offset
        self.mismatches = 0
        self.prev_last = -1 << 63  # last offset of the batch before the current one

    def _close_pending(self) -> None:
        if self.pending is not None:
            slot, off, pos = self.pending
            self.noted(error, code="verify.indexNoBatchEnds", entry=slot, offset=off, filePosition=pos)
            self.pending = None

    def batch(self, b) -> None:
        while self.cur is not None and self.cur[1].position <= b.position:
            slot, e = self.cur
            if e.position < b.position:
                self._close_pending()
                self.noted(error, code="verify.indexNotBatchStart", entry=slot, offset=e.offset,
                           filePosition=e.position)
            else:
                self._close_pending()
                if e.offset == b.last_offset:
                    pass
                elif e.offset > b.last_offset:
                    self.pending = (slot, e.offset, e.position)
                    self.mismatches += 1
                elif e.offset > self.prev_last:
                    self.noted(code="verify.indexInsideBatch", entry=slot, offset=e.offset, filePosition=e.position,
                               lastOffset=b.last_offset)
                else:
                    self.noted(error, code="verify.indexOffsetNotAbove", entry=slot, offset=e.offset,
                               filePosition=e.position, previousLastOffset=self.prev_last)
            self.advance()
        if self.pending is not None and b.position > self.pending[2] and b.last_offset >= self.pending[1]:
            if b.last_offset != self.pending[1]:
                self._close_pending()
            else:
                self.pending = None
        self.prev_last = b.last_offset

    def finish(self, log_size: int) -> None:
        self._close_pending()
        for slot, e in self.leftovers():
            self.noted(error, code="verify.indexBeyondLog" if e.position >= log_size else
                       "verify.indexNotAtBatchStart", entry=slot, offset=e.offset, filePosition=e.position)
        self.count(code="verify.indexLastOffsetOfAppend", entries=self.mismatches)


class _TimeIndexCheck(_StreamedIndex):
    """Streams the time index alongside the batch scan (entries ordered by offset)."""

    KIND, SLOT = "timeindex", 12

    def __init__(self, seg: Segment, out: list[Finding]):
        super().__init__(seg.time_index, seg.time_index_path, out)
        self.running_max = -1  # max timestamp of the batches before the current one
        self.deep_offsets = 0

    def batch(self, b) -> None:
        while self.cur is not None and self.cur[1].offset <= b.last_offset:
            slot, e = self.cur
            if b.max_timestamp != e.timestamp:
                self.noted(code="verify.timeIndexTimestampDiffers", entry=slot, timestamp=e.timestamp, offset=e.offset,
                           maxTimestamp=b.max_timestamp)
            elif self.running_max >= e.timestamp:
                self.noted(code="verify.timeIndexNotAboveEarlier", entry=slot, timestamp=e.timestamp, offset=e.offset,
                           earlierTimestamp=self.running_max)
            if e.offset != b.last_offset:
                self.deep_offsets += 1
            self.advance()
        self.running_max = max(self.running_max, b.max_timestamp)

    def finish(self, segment_max: int, closed: bool) -> None:
        for slot, e in self.leftovers():
            self.noted(error, code="verify.timeIndexBeyondLastBatch", entry=slot, timestamp=e.timestamp,
                       offset=e.offset)
        self.count(code="verify.timeIndexInsideBatch", entries=self.deep_offsets)
        last = self.idx.last_valid_entry.timestamp
        if closed and segment_max >= 0 and last < segment_max:
            self.out.append(warning(self.path, None, "timeindex", code="verify.timeIndexFinalEntry",
                                    lastTimestamp=last, maxTimestamp=segment_max))


def _deep_check(b, path: str, out: list[Finding], summary: SegmentSummary) -> None:
    """Decode every record of ``b`` (a chunk at a time: memory bounded whatever count the batch declares) and
    check offsets, the header's count and max timestamp, and a control batch's record."""
    n = 0
    prev = None
    max_ts = -1
    last_inner = None
    try:
        for records in b.record_chunks():
            if n == 0 and b.magic >= 2 and b.is_control:
                for r in records[:1]:
                    try:
                        _, ctype = parse_control_key(r.key)
                        if ctype in (ABORT, COMMIT):
                            parse_end_txn_marker(r.value)
                    except CorruptRecordError as e:
                        out.append(error(path, b.position, "batch", code="verify.controlRecord", error=e.reason))
            n += len(records)
            for r in records:
                if b.magic >= 2:
                    if r.offset < b.base_offset or r.offset > b.last_offset:
                        out.append(error(path, b.position, "offsets", code="verify.recordOutsideBatch", offset=r.offset,
                                         baseOffset=b.base_offset, lastOffset=b.last_offset))
                    if prev is not None and r.offset <= prev:
                        out.append(error(path, b.position, "offsets", code="verify.recordOffsetBack", offset=r.offset,
                                         previousOffset=prev))
                    max_ts = max(max_ts, r.timestamp)
                elif prev is not None and r.offset <= prev:
                    out.append(error(path, b.position, "offsets", code="verify.innerOffsetBack", offset=r.offset,
                                     previousOffset=prev))
                prev = r.offset
            if records:
                last_inner = records[-1].offset
    except KafkaLogError as e:
        out.append(error(path, b.position if e.position is None else e.position, "batch",
                         code="verify.recordsUndecodable", error=e.reason))
        return
    summary.records = (summary.records or 0) + n
    if b.magic >= 2:
        if n != b.records_count:
            out.append(error(path, b.position, "batch", code="verify.recordCount", declared=b.records_count,
                             decoded=n))
        if n and b.timestamp_type == 0 and not b.has_delete_horizon and max_ts != b.max_timestamp:
            out.append(warning(path, b.position, "batch", code="verify.maxTimestamp", headerMaxTimestamp=b.max_timestamp,
                               recordsMaxTimestamp=max_ts))
    elif n and last_inner != b.last_offset:
        out.append(error(path, b.position, "offsets", code="verify.wrapperOffset", wrapperOffset=b.last_offset,
                         lastInnerOffset=last_inner))


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
        out.append(error(path, None, "batch", code="verify.logTooLarge", bytes=size, limit=MAX_SEGMENT_BYTES))
    if not seg.has_offset_index:
        out.append(warning(seg.index_path, None, "index", code="verify.indexMissing", missing=True))
    if not seg.has_time_index:
        out.append(info(seg.time_index_path, None, "timeindex", code="verify.timeIndexMissing", missing=True))
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
            found = (info if is_active else warning) if untrimmed else error
            out.append(found(ipath, e.position, kind, code="verify.indexSanityCheck", error=e.reason,
                             untrimmed=untrimmed))
        out += [d.finding(ipath, kind, "error") for d in idx.problems()]
        if untrimmed:
            level = info if is_active else warning
            out.append(level(ipath, idx.valid_entries * idx.entry_size, kind, code="verify.notTrimmed",
                             zeroSlots=idx.padding_entries, entries=idx.valid_entries))
    if seg.has_offset_index:
        idx_check = _IndexCheck(seg, out)
        checks.append(idx_check)
    if seg.has_time_index:
        time_check = _TimeIndexCheck(seg, out)
        checks.append(time_check)
    txn_entries: list = []
    oversized = seg.txn_index_excess()
    if oversized:
        out.append(error(seg.txn_index_path, 0, "txnindex", code="verify.txnIndexOversized", entries=oversized[0],
                         bound=oversized[1], bytes=seg.size))
    elif seg.has_txn_index:
        txn = seg.txn_index
        try:
            txn.sanity_check()
        except KafkaLogError as e:
            out.append(error(seg.txn_index_path, e.position, "txnindex", code="verify.txnIndexSanityCheck",
                             error=e.reason))
        out += [d.finding(seg.txn_index_path, "txnindex", "error") for d in txn.problems()]
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
                out.append(error(path, b.position, "batch", code="verify.unknownMagic", magic=b.magic))
            if not b.is_valid():
                crc = f"CRC mismatch (stored 0x{b.crc:08x}, computed 0x{b.compute_crc():08x})"
                out.append(error(path, b.position, "crc", code="verify.crcTruncates", recoveryTruncates=True, reason=crc, storedCrc=b.crc, computedCrc=b.compute_crc()))
            last = b.last_offset
            first = b.base_offset if b.magic >= 2 or not b.is_compressed else None
            if b.magic >= 2 and isinstance(b, RecordBatch) and b.last_offset_delta < 0:
                out.append(error(path, b.position, "batch", code="verify.negativeLastOffsetDelta",
                                 lastOffsetDelta=b.last_offset_delta))
            if summary.first_offset is None:
                if first is None:
                    try:
                        first = b.base_offset
                    except KafkaLogError as e:
                        out.append(error(path, b.position, "batch", code="verify.firstOffsetUnreadable",
                                                         error=e.reason))
                        first = last
                summary.first_offset = first
                if first < seg.base_offset:
                    out.append(error(path, b.position, "offsets", code="verify.firstBelowBase", firstOffset=first,
                                     baseOffset=seg.base_offset))
                if previous_next_offset is not None and first < previous_next_offset:
                    out.append(error(path, b.position, "offsets", code="verify.overlapsPrevious", firstOffset=first,
                                     previousNextOffset=previous_next_offset))
            if prev_last is not None:
                if (first if first is not None else last) <= prev_last:
                    out.append(error(path, b.position, "offsets", code="verify.offsetsNotIncreasing",
                                     firstOffset=first if first is not None else last, previousLastOffset=prev_last))
            if not 0 <= last - seg.base_offset <= INT32_MAX:
                out.append(error(path, b.position, "offsets", code="verify.offsetBeyondInt32", lastOffset=last,
                                 baseOffset=seg.base_offset))
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
        out.append(error(path, e.position, "batch", code="verify.corruptTruncates",
                         recoveryTruncates=True, reason=e.reason))
    else:
        if scanner.stop_reason is not None:
            tail = f"{scanner.stop_reason}: {size - scanner.stop_position} bytes after the last complete batch"
            out.append(error(path, scanner.stop_position, "batch", code="verify.tailTruncates",
                             recoveryTruncates=True, reason=tail, stopReason=scanner.stop_reason,
                             bytes=size - scanner.stop_position))
    if idx_check is not None:
        idx_check.finish(size)
    if time_check is not None:
        time_check.finish(summary.max_timestamp, closed=not is_active)
    for i, t in enumerate(txn_entries):
        if t.last_offset >= seg.base_offset and t.last_offset not in aborts_seen:
            out.append(error(seg.txn_index_path, i * 34, "txnindex", code="verify.txnIndexNoMarker", entry=i,
                             lastOffset=t.last_offset))
    if size == 0 and not is_active:
        out.append(info(path, None, "batch", code="verify.emptySegment"))
    return out, summary


def segment_holes(log: PartitionLog, segments: Iterable[Segment]) -> list[SegmentHole]:
    """The ``segments`` of ``log`` whose batches end before their file does (a torn or partial batch) where the
    log's one rule for readers calls it a hole (:meth:`PartitionLog.segment_end_error`: in any segment but the
    active one, whose torn end is simply where the log ends, for the readers as for the broker, which computes
    its log end there after a clean shutdown). Every reader stops there, and a broker that does not recover the
    segment at load (:meth:`PartitionLog.segments_unchecked_at_load`) serves the log with the hole. Each segment
    is scanned from its last offset-index entry (from its start when that scan ends early, so that a wrong index
    never makes a hole)."""
    out: list[SegmentHole] = []
    for seg in segments:
        found = _torn(seg)
        if found is not None:
            scanner, nxt = found
            err = log.segment_end_error(seg, scanner)
            if err is None:
                continue  # the end of the active segment: where the log ends
            following = log.higher_segment(seg)
            assert following is not None
            out.append(SegmentHole(str(seg.path), scanner.stop_position, seg.size - scanner.stop_position,
                                   seg.base_offset if nxt is None else nxt, following.base_offset - 1,
                                   err.reason))
    return out


@dataclass(frozen=True)
class TornEnd:
    """The torn or partial batch at the end of an active segment: the ``bytes`` from ``position`` on, after the last
    complete batch (the log ends at ``first_offset``); ``declared_bytes``: the whole batch's size its header declares
    (``12 + `` its length field; None when fewer than 12 bytes are there); ``compressed``: whether its attributes
    name a compression codec (None when the bytes end before them); ``reason``: the scan's stop reason."""

    file: str
    position: int
    bytes: int
    first_offset: int
    declared_bytes: int | None
    compressed: bool | None
    reason: str


def segment_torn_end(log: PartitionLog, segments: Iterable[Segment]) -> TornEnd | None:
    """The torn or partial batch the active segment of ``log`` ends in, when it is among ``segments`` (those the
    broker's start-up leaves as they are, :meth:`PartitionLog.segments_unchecked_at_load`: after a clean shutdown):
    ``first_offset`` is the log end offset the broker computes before those bytes, ``bytes`` those after the last
    complete batch. Every reader ends the log there (not a hole: :func:`segment_holes`), but
    the broker keeps the bytes and appends after them (:mod:`kafkalog.storage.reports.serving`). None when the
    active segment ends in a complete batch, or in an entry that is not torn but corrupt (the CRC check's)."""
    seg = log.active_segment
    if seg is None or not any(s is seg for s in segments):
        return None
    found = _torn(seg)
    if found is None:
        return None
    scanner, nxt = found
    pos = scanner.stop_position
    if pos >= seg.size:
        return None
    head = (bytes(scanner.file.view(pos, 23)) if isinstance(scanner, WindowedScanner)
            else bytes(scanner.buf[pos - scanner.position_base:pos - scanner.position_base + 23]))
    declared = 12 + int.from_bytes(head[8:12], "big", signed=True) if len(head) >= 12 else None
    # the codec: v2's attributes (int16 at byte 21), v0/v1's (the byte after the magic byte)
    attributes = head[22] if len(head) >= 23 and head[16] >= 2 else head[17] if len(head) >= 18 and head[16] < 2 else None
    return TornEnd(str(seg.path), pos, seg.size - pos, seg.base_offset if nxt is None else nxt, declared,
                   None if attributes is None else bool(attributes & 7), scanner.stop_reason or "")


def segment_crc_failures(segments: Iterable[Segment]) -> list[SegmentHole]:
    """The first entry that fails its CRC (or its framing) in each of ``segments``, every byte of them scanned
    (:func:`~kafkalog.storage.records.scan_crc`, the compiled core's pass; a torn end is not one: see
    :func:`segment_holes`): a broker that does not recover such a segment at load
    (:meth:`PartitionLog.segments_unchecked_at_load`) serves it, and its consumers fail on that batch."""
    out: list[SegmentHole] = []
    for seg in segments:
        path = str(seg.path)
        try:
            pos = _first_crc_failure(seg, path)
        except CorruptRecordError as e:
            pos = e.position or 0
            out.append(SegmentHole(path, pos, seg.size - pos, None, None, e.reason))
            continue
        if pos is None:
            continue
        b = next(iter(seg.scanner(pos)))  # (that entry, complete: the scan checked it)
        first = b.base_offset if b.magic >= 2 else None
        out.append(SegmentHole(path, pos, b.size, first, b.last_offset,
                               f"the batch at byte {pos} fails its CRC (stored {b.crc}, computed "
                               f"{b.compute_crc()})"))
        del b
    return out


def _first_crc_failure(seg: Segment, path: str) -> int | None:
    """The position of the first entry of ``seg`` failing its CRC (None: none), every byte scanned: a local ``.log``
    by the compiled core's pass (:func:`~kafkalog.storage.records.scan_crc`), one under a URL entry by entry
    through its scanner, in bounded windows (the same entries and errors: ``LogScanner``'s)."""
    scanner = seg.scanner()
    if not isinstance(scanner, WindowedScanner):
        scan = scan_crc(seg.buf, path=path)
        return scan.positions[scan.valid.index(0)] if scan.invalid else None
    for b in scanner:
        if not b.is_valid():
            return b.position
        del b
    return None


def _torn(seg: Segment) -> tuple[LogScanner, int | None] | None:
    """:func:`_scan_end` of ``seg`` from its last offset-index entry (from its start when that scan ends early, so
    that a wrong index never makes a torn end)."""
    idx = seg.offset_index if seg.has_offset_index else None
    start = 0
    if idx is not None and idx.valid_entries:
        last = idx.entry(idx.valid_entries - 1).position
        start = last if 0 <= last < seg.size else 0
    found = _scan_end(seg, start)
    if found is not None and start:
        found = _scan_end(seg, 0)
    return found


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
