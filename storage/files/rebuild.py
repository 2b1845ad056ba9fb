"""Rebuilding ``.index`` / ``.timeindex`` / ``.txnindex`` from a ``.log`` exactly as Kafka does (20-indexes §4-§7).

Two rules exist for the offset and time indexes:

* :func:`rebuild_indexes_recovery` — ``LogSegment.recover``: one decision per batch, the byte counter compared
  before the batch is added; stops at the first invalid batch (CRC, size < 14, offset out of the segment's
  int32 range). This is what a broker writes after an unclean shutdown, and what is reproducible from the
  ``.log`` alone.
* :func:`rebuild_indexes_append` — ``LogSegment.append``: one decision per *append* (a leader append is one
  batch; a follower/cleaner append is many), entry = (last offset of the append, position of its first byte).
  Needs the append boundaries to be byte-exact; with ``per_batch=True`` it follows Kafka >= 4.1 (KAFKA-806).

Both finish like a closed segment: the time index gets the final entry for the segment's max timestamp and
both indexes are trimmed (``onBecomeInactiveSegment``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import CorruptIndexError, CorruptRecordError, KafkaLogError
from ..records import LogScanner
from ._index import INT32_MAX
from .offset_index import OffsetIndex, OffsetIndexBuilder
from .producer_snapshot import ProducerSnapshot
from .time_index import NO_TIMESTAMP, TimeIndex, TimeIndexBuilder, TimestampOffset
from .txn_index import AbortedTxn, TransactionIndex

DEFAULT_INDEX_INTERVAL_BYTES = 4096

STOP_TORN_TAIL = "torn tail"
STOP_PARTIAL_BATCH = "partial batch"
STOP_CORRUPT = "corrupt batch"
STOP_OFFSET_OVERFLOW = "offset overflow"
STOP_INVALID_OFFSET = "invalid offset"

UNKNOWN = TimestampOffset(NO_TIMESTAMP, -1)  # TimestampOffset.UNKNOWN


@dataclass
class RebuiltIndexes:
    offset_index: OffsetIndex
    time_index: TimeIndex
    log_size: int
    valid_bytes: int  # the valid prefix (recovery truncates the .log here)
    batches: int
    max_timestamp: TimestampOffset  # (max timestamp, shallow offset) over the valid batches
    next_offset: int | None  # last offset + 1 of the last valid batch
    stop_reason: str | None = None
    error: KafkaLogError | None = None
    txn_index: TransactionIndex | None = None
    leader_epochs: list[tuple[int, int]] = field(default_factory=list)  # (epoch, start offset) assigned

    @property
    def truncated_bytes(self) -> int:
        return self.log_size - self.valid_bytes


def _relative_ok(offset: int, base_offset: int) -> bool:
    return 0 <= offset - base_offset <= INT32_MAX


def _producer_state(snapshot: ProducerSnapshot | None, prior_batches: Iterable):
    """Producer state at a segment's base offset: ``snapshot`` then ``prior_batches`` replayed
    (``storage/producer_state.py``, the broker's ``ProducerStateManager``)."""
    from ..producer_state import ProducerStateManager  # late: producer_state imports the files layer

    psm = ProducerStateManager.from_snapshot(snapshot)
    for b in prior_batches:
        if b.magic < 2:
            continue
        try:
            psm.replay(b)
        except CorruptRecordError:
            break
    return psm


def rebuild_indexes_recovery(
    log_buf,
    base_offset: int,
    *,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    path: str | None = None,
    prior_batches: Iterable = (),
    snapshot: ProducerSnapshot | None = None,
    with_txn_index: bool = False,
) -> RebuiltIndexes:
    """``LogSegment.recover`` over ``log_buf`` (bytes/mmap of a ``.log``).

    With ``with_txn_index`` the aborted-transaction index is rebuilt too; producer state is taken from
    ``snapshot`` and then ``prior_batches`` (the batches of earlier segments from the snapshot's offset up to
    this segment's base offset), as ``rebuildProducerState`` would.
    """
    producers = _producer_state(snapshot, prior_batches) if with_txn_index else None
    offset_index = OffsetIndexBuilder(base_offset)
    time_index = TimeIndexBuilder(base_offset)
    aborted: list[AbortedTxn] = []
    epochs: list[tuple[int, int]] = []
    valid_bytes = 0
    last_index_entry = 0
    max_ts = UNKNOWN
    batches = 0
    next_offset = None
    stop_reason = None
    error: KafkaLogError | None = None
    scanner = LogScanner(log_buf, path=path)
    try:
        for batch in scanner:
            batch.ensure_valid()
            last = batch.last_offset
            if not _relative_ok(last, base_offset):
                stop_reason = STOP_OFFSET_OVERFLOW
                error = CorruptRecordError(
                    f"offset {last} cannot be stored relative to the segment base offset {base_offset}",
                    path, batch.position)
                break
            if batch.max_timestamp > max_ts.timestamp:
                max_ts = TimestampOffset(batch.max_timestamp, last)
            if valid_bytes - last_index_entry > index_interval_bytes:
                offset_index.append(last, valid_bytes)
                time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                last_index_entry = valid_bytes
            if batch.magic >= 2:
                ple = batch.partition_leader_epoch
                if ple >= 0 and (not epochs or ple > epochs[-1][0]):
                    epochs.append((ple, batch.base_offset))
                if producers is not None:
                    txn = producers.replay(batch)
                    if txn is not None:
                        aborted.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                                  txn.last_stable_offset))
            valid_bytes += batch.size
            batches += 1
            next_offset = last + 1
        else:
            stop_reason = scanner.stop_reason
    except CorruptRecordError as e:
        stop_reason = STOP_CORRUPT
        error = e.at(path)
    except CorruptIndexError as e:  # InvalidOffsetException: Kafka empties the whole segment
        stop_reason = STOP_INVALID_OFFSET
        error = e.at(path)
    time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
    result = RebuiltIndexes(
        offset_index.build(),
        time_index.build(),
        len(log_buf),
        valid_bytes,
        batches,
        max_ts,
        next_offset,
        stop_reason,
        error,
        TransactionIndex.from_entries(base_offset, aborted) if producers is not None else None,
        epochs,
    )
    if stop_reason == STOP_INVALID_OFFSET:  # LogLoader.recoverLog: segment.truncateTo(baseOffset)
        result.valid_bytes = 0
        result.next_offset = None
        result.batches = 0
        result.offset_index = OffsetIndex(b"", base_offset)
        result.time_index = TimeIndex(b"", base_offset)
    return result


def rebuild_indexes_append(
    log_buf,
    base_offset: int,
    *,
    appends: Iterable[int] | None = None,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    per_batch: bool = False,
    restarts: Iterable[int] = (),
    close: bool = True,
    deep_time_offsets: bool = False,
    path: str | None = None,
) -> RebuiltIndexes:
    """``LogSegment.append`` replayed over the batches of ``log_buf``.

    * ``appends``: byte positions where appends started (batch boundaries; 0 is implied). ``None`` = one
      append per batch (a leader writing v2 batches).
    * ``per_batch``: the KAFKA-806 rule of Kafka >= 4.1 (decision per batch inside an append).
    * ``restarts``: positions (append boundaries) where the broker restarted cleanly: the segment was closed
      (final time-index entry) and reloaded (byte counter back to 0).
    * ``close``: finish as a closed segment (final time-index entry); ``False`` leaves the indexes as the
      active segment has them (still trimmed here; pad with ``to_bytes(size=...)``).
    * ``deep_time_offsets``: time-index offsets as leaders before KAFKA-16310 wrote them (the offset of the
      first record carrying the batch's max timestamp instead of the batch's last offset).

    Invalid batches are not checked (appends were validated by the broker); the scan stops where the framing
    ends.
    """
    starts = None if appends is None else set(appends) | {0}
    restart_set = set(restarts)
    offset_index = OffsetIndexBuilder(base_offset)
    time_index = TimeIndexBuilder(base_offset)
    bytes_since = 0
    max_so_far = UNKNOWN
    batches = 0
    next_offset = None
    scanner = LogScanner(log_buf, path=path)
    error: KafkaLogError | None = None
    stop_reason = None

    def shallow_offset(batch) -> int:
        """Offset recorded with a batch's max timestamp."""
        if not deep_time_offsets:
            return batch.last_offset
        if batch.timestamp_type == 1:  # LogAppendTime: every record has the max; the first offset was used
            return batch.base_offset
        best_ts, best_off = NO_TIMESTAMP, batch.last_offset
        for r in batch.records():
            if r.timestamp > best_ts:
                best_ts, best_off = r.timestamp, r.offset
        return best_off

    # current append state
    app_pos = 0
    app_size = 0
    app_last = None
    app_max = UNKNOWN

    def flush_append() -> None:
        nonlocal bytes_since, max_so_far
        if app_last is None:
            return
        if app_max.timestamp > max_so_far.timestamp:
            max_so_far = app_max
        if bytes_since > index_interval_bytes:
            offset_index.append(app_last, app_pos)
            time_index.maybe_append(max_so_far.timestamp, max_so_far.offset)
            bytes_since = 0
        bytes_since += app_size

    valid_bytes = 0
    try:
        for batch in scanner:
            pos = batch.position
            boundary = starts is None or pos in starts
            if pos in restart_set or boundary:
                if not per_batch:
                    flush_append()
                if pos in restart_set and pos > 0:
                    if max_so_far != UNKNOWN:
                        time_index.maybe_append(max_so_far.timestamp, max_so_far.offset, skip_full_check=True)
                    bytes_since = 0
                app_pos, app_size, app_last, app_max = pos, 0, None, UNKNOWN
            last = batch.last_offset
            if not _relative_ok(last, base_offset):
                raise CorruptIndexError(
                    f"offset {last} cannot be stored relative to the segment base offset {base_offset}", path, pos
                )
            mts = batch.max_timestamp
            if per_batch:
                if mts > max_so_far.timestamp:
                    max_so_far = TimestampOffset(mts, shallow_offset(batch))
                if bytes_since > index_interval_bytes:
                    offset_index.append(last, pos)
                    time_index.maybe_append(max_so_far.timestamp, max_so_far.offset)
                    bytes_since = 0
                bytes_since += batch.size
            else:
                if mts > app_max.timestamp:
                    app_max = TimestampOffset(mts, shallow_offset(batch))
                app_size += batch.size
                app_last = last
            batches += 1
            next_offset = last + 1
            valid_bytes = pos + batch.size
        stop_reason = scanner.stop_reason
        if not per_batch:
            flush_append()
    except (CorruptRecordError, CorruptIndexError) as e:
        error = e.at(path)
        stop_reason = STOP_CORRUPT if isinstance(e, CorruptRecordError) else STOP_INVALID_OFFSET
    if close and max_so_far != UNKNOWN:
        time_index.maybe_append(max_so_far.timestamp, max_so_far.offset, skip_full_check=True)
    return RebuiltIndexes(
        offset_index.build(),
        time_index.build(),
        len(log_buf),
        valid_bytes,
        batches,
        max_so_far,
        next_offset,
        stop_reason,
        error,
    )


def rebuild_txn_index(
    log_buf,
    base_offset: int,
    *,
    prior_batches: Iterable = (),
    snapshot: ProducerSnapshot | None = None,
    path: str | None = None,
) -> TransactionIndex:
    """The ``.txnindex`` recovery writes for a segment (see :func:`rebuild_indexes_recovery`)."""
    r = rebuild_indexes_recovery(
        log_buf, base_offset, path=path, prior_batches=prior_batches, snapshot=snapshot, with_txn_index=True
    )
    assert r.txn_index is not None
    return r.txn_index
