"""The index dumps (``.index``, ``.timeindex``, ``.txnindex``), each entry checked against the companion
``.log`` as DumpLogSegments checks it."""

from __future__ import annotations

import os
from pathlib import Path

from kafkalog.storage.errors import CorruptRecordError, KafkaLogError, LogDirError
from kafkalog.storage.files.names import LOG_FILE_SUFFIX
from kafkalog.storage.files.offset_index import OffsetIndex
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.files.time_index import NO_TIMESTAMP, TimeIndex
from kafkalog.storage.files.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from kafkalog.storage.files.txn_index import TransactionIndex
from kafkalog.storage.io.fs import absolute
from kafkalog.storage.reports.dump.file_dump import DEFAULT_MAX_MESSAGE_SIZE, FileDump, sanity_check


def _base_and_log(path: str | os.PathLike) -> tuple[int, Path]:
    """``file.getName.split("\\.")(0).toLong`` and the companion ``.log`` (DumpLogSegments' rules), beside it (under
    a URL: a :class:`~kafkalog.storage.io.fs.UrlPath`)."""
    p = absolute(path)
    prefix = p.name.split(".", 1)[0]
    try:
        base = int(prefix)
    except ValueError:
        raise LogDirError(f"cannot derive a base offset from the file name {p.name!r}", str(path)) from None
    return base, p.parent / (prefix + LOG_FILE_SUFFIX)


def _max_record_timestamp(batch) -> int:
    """Max timestamp over the records (DumpLogSegments iterates the batch deeply)."""
    ts = NO_TIMESTAMP
    for r in batch.iter_record_tuples():
        if r[1] > ts:
            ts = r[1]
    return ts


def _preallocated_only(idx) -> bool:
    """An index file of zeros only: preallocated by a running (or killed) broker before its first entry.
    DumpLogSegments reads slot 0 as an entry ``(baseOffset, 0)`` and crashes or reports a mismatch; it is
    reported as empty here (``info["slots"]`` keeps the slot count)."""
    return idx.length > 0 and idx.valid_entries == 0 and idx.padding_is_zero()


def _companion(out: FileDump, path: Path, base: int) -> Segment | None:
    """The companion ``.log`` as a :class:`Segment` (mmapped read-only on open; under a URL read in windows); None,
    and a problem in ``out`` saying why, when it cannot be read."""
    if not path.exists():
        out.problem(None, code="dump.companionMissing", log=path.name)
        return None
    seg = Segment(path, base)
    try:
        seg.open_log()  # now, so that an unreadable .log is reported here
    except KafkaLogError as e:
        out.problem(None, code="dump.companionUnreadable", log=path.name, error=e.reason)
        return None
    except OSError as e:
        out.problem(None, code="dump.companionUnreadable", log=path.name, error=e.strerror or str(e))
        return None
    return seg


def _dumped_whole(out: FileDump, base: int, idx: OffsetIndex | TimeIndex, empty: bool, index_sanity_check: bool) -> bool:
    """What an index's dump starts with (its size in ``info``), and whether that is the whole dump: an empty
    index (``empty``, each kind's test) says so, ``--index-sanity-check`` runs only the sanity check."""
    out.info = {"baseOffset": base, "length": idx.length, "slots": idx.entries, "entries": idx.valid_entries}
    if empty:
        out.empty = True
        out.lines.append(f"{out.file} is empty.")
        return True
    if index_sanity_check:
        sanity_check(out, idx)
        return True
    return False


# ------------------------------------------------------------------------------------------- .index


def dump_offset_index(
    path: str | os.PathLike,
    *,
    verify_index_only: bool = False,
    index_sanity_check: bool = False,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
) -> FileDump:
    """DumpLogSegments ``dumpIndex``: every slot until the zero padding, each checked against the first batch
    at its position in the companion ``.log`` (a mismatch when that batch's last offset differs; entries of
    multi-batch follower/cleaner appends legitimately mismatch). An entry with no complete batch within
    ``max_message_size`` bytes of its position is a problem (the tool crashes there)."""
    name = str(path)
    out = FileDump(name, "index")
    base, log_path = _base_and_log(path)
    with OffsetIndex.open(path, base) as idx:
        if _dumped_whole(out, base, idx, idx.entries == 0 or _preallocated_only(idx), index_sanity_check):
            return out
        log = _companion(out, log_path, base)
        try:
            for i in range(idx.entries):
                e = idx.entry(i)
                if e.offset == base and i > 0:
                    break  # zero padding of a preallocated file
                if log is not None:
                    _check_index_entry(out, log, i, e.offset, e.position, max_message_size)
                if not verify_index_only:
                    out.entries.append({"offset": e.offset, "position": e.position})
                    out.lines.append(f"offset: {e.offset} position: {e.position}")
        finally:
            if log is not None:
                log.close()
    return out


def _check_index_entry(out: FileDump, log: Segment, slot: int, offset: int, position: int, max_size: int) -> None:
    where = slot * 8
    if not 0 <= position < log.size:
        out.problem(where, code="dump.entryBeyondLog", entry=slot, offset=offset, filePosition=position,
                    log=log.path.name, logBytes=log.size)
        return
    scanner = log.scanner(position, position + max_size)
    try:
        batch = next(iter(scanner), None)
    except CorruptRecordError as e:
        out.problem(where, code="dump.entryCorrupt", entry=slot, offset=offset, filePosition=position,
                    error=e.reason, errorPosition=e.position, log=log.path.name)
        return
    if batch is None:
        out.problem(where, code="dump.entryNoBatch", entry=slot, offset=offset, filePosition=position,
                    maxMessageSize=max_size, log=log.path.name)
        return
    last = batch.last_offset
    if last != offset:
        out.index_mismatches.append((offset, last))


# ------------------------------------------------------------------------------------------- .timeindex


def dump_time_index(
    path: str | os.PathLike,
    *,
    verify_index_only: bool = False,
    index_sanity_check: bool = False,
) -> FileDump:
    """DumpLogSegments ``dumpTimeIndex``: each entry's offset is looked up through the ``.index`` and the
    batches after it; the first batch whose last offset reaches it must end exactly there (else "not found")
    and its max record timestamp must equal the entry's (else "mismatch"); timestamps must increase."""
    name = str(path)
    out = FileDump(name, "timeindex")
    base, log_path = _base_and_log(path)
    index_path = log_path.with_name(log_path.name[: -len(LOG_FILE_SUFFIX)] + ".index")
    with TimeIndex.open(path, base) as tidx:
        if _dumped_whole(out, base, tidx, not index_sanity_check and _preallocated_only(tidx), index_sanity_check):
            return out
        log = _companion(out, log_path, base)
        oidx = OffsetIndex.open(index_path, base) if index_path.exists() else OffsetIndex(b"", base)
        try:
            prev_ts = NO_TIMESTAMP
            for i in range(tidx.entries):
                e = tidx.entry(i)
                if e.offset == base and i > 0:
                    break
                if log is not None:
                    _check_time_entry(out, log, oidx, i, e.timestamp, e.offset, prev_ts)
                if not verify_index_only:
                    out.entries.append({"timestamp": e.timestamp, "offset": e.offset})
                    out.lines.append(f"timestamp: {e.timestamp} offset: {e.offset}")
                prev_ts = e.timestamp
        finally:
            oidx.close()
            if log is not None:
                log.close()
    return out


def _check_time_entry(out: FileDump, log: Segment, oidx: OffsetIndex, slot: int, ts: int, offset: int,
                      prev_ts: int) -> None:
    pos = oidx.lookup(offset).position
    if not 0 <= pos < log.size:
        pos = 0
    found = None
    try:
        for b in log.scanner(pos):
            if b.last_offset >= offset:
                found = b
                break
    except CorruptRecordError as e:
        out.problem(slot * 12, code="dump.timeEntryCorrupt", entry=slot, timestamp=ts, offset=offset,
                    error=e.reason, errorPosition=e.position, log=log.path.name)
        return
    if found is None:
        out.offsets_not_found.append((offset, -1))
        return
    if found.last_offset != offset:
        out.offsets_not_found.append((offset, found.last_offset))
        return
    try:
        max_ts = _max_record_timestamp(found)
    except KafkaLogError as e:
        out.problem(slot * 12, code="dump.timeEntryUndecodable", entry=slot, timestamp=ts, offset=offset,
                    batchPosition=found.position, error=e.reason)
        return
    if max_ts != ts:
        out.timestamp_mismatches.append((ts, max_ts))
    if prev_ts >= ts:
        out.out_of_order_timestamps.append((ts, prev_ts))


# ------------------------------------------------------------------------------------------- .txnindex


def dump_txn_index(path: str | os.PathLike) -> FileDump:
    """DumpLogSegments ``dumpTxnIndex``: one entry per aborted transaction."""
    name = str(path)
    out = FileDump(name, "txnindex")
    base, _ = _base_and_log(path)
    with TransactionIndex.open(path, base) as idx:
        out.info = {"baseOffset": base, "length": idx.length, "entries": idx.entries}
        try:
            for t in idx:
                out.entries.append({"version": t.version, "producerId": t.producer_id, "firstOffset": t.first_offset,
                                    "lastOffset": t.last_offset, "lastStableOffset": t.last_stable_offset})
                out.lines.append(f"version: {t.version} producerId: {t.producer_id} firstOffset: {t.first_offset} "
                                 f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}")
        except KafkaLogError as e:
            out.problem(e.position, e.reason)
        if idx.length % TXN_ENTRY_SIZE:
            out.info["trailingBytes"] = idx.length % TXN_ENTRY_SIZE
    return out
