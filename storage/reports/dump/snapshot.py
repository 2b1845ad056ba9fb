"""The producer snapshot dump (``<offset>.snapshot``)."""

from __future__ import annotations

import os
from typing import Any

from kafkalog.storage.errors import KafkaLogError, LogDirError
from kafkalog.storage.files.producer_snapshot import read_producer_snapshot
from kafkalog.storage.reports.dump.file_dump import FileDump, opt_long

INT32_MAX = (1 << 31) - 1


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``DefaultRecordBatch.decrementSequence``: sequences wrap at Integer.MAX_VALUE."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


# ------------------------------------------------------------------------------------------- .snapshot


def dump_producer_snapshot(path: str | os.PathLike) -> FileDump:
    """DumpLogSegments ``dumpProducerIdSnapshot``: one entry per producer, in file order. A corrupt snapshot
    (bad version, truncated, CRC mismatch) is a problem, as the tool prints the exception instead."""
    name = str(path)
    out = FileDump(name, "snapshot")
    try:
        snap = read_producer_snapshot(path)
    except KafkaLogError as e:
        if isinstance(e, LogDirError) or e.path is None:
            raise
        out.problem(e.position, e.reason)
        return out
    out.info = {"version": snap.version, "crc": snap.crc, "producers": len(snap.entries)}
    if snap.trailing:
        out.info["trailingBytes"] = len(snap.trailing)
    for pe in snap.entries:
        txn = pe.current_txn_first_offset if pe.current_txn_first_offset >= 0 else None
        d: dict[str, Any] = {"producerId": pe.producer_id, "producerEpoch": pe.producer_epoch,
                             "coordinatorEpoch": pe.coordinator_epoch, "currentTxnFirstOffset": txn,
                             "lastTimestamp": pe.timestamp}
        line = (f"producerId: {pe.producer_id} producerEpoch: {pe.producer_epoch} coordinatorEpoch: "
                f"{pe.coordinator_epoch} currentTxnFirstOffset: {opt_long(txn)} "
                f"lastTimestamp: {pe.timestamp} ")
        if pe.has_batch_metadata:
            first_seq = decrement_sequence(pe.last_sequence, pe.offset_delta)
            d.update(firstSequence=first_seq, lastSequence=pe.last_sequence, lastOffset=pe.last_offset,
                     offsetDelta=pe.offset_delta, timestamp=pe.timestamp)
            line += (f"firstSequence: {first_seq} lastSequence: {pe.last_sequence} "
                     f"lastOffset: {pe.last_offset} offsetDelta: {pe.offset_delta} timestamp: {pe.timestamp}")
        out.entries.append(d)
        out.lines.append(line)
    return out
