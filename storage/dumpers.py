"""Dump functions for every file kind of a data dir except ``.log`` (which is :mod:`.records.dump`), as
DumpLogSegments dumps them (``docs/commands/dump.md``, ``DumpLogSegments``), plus the text/metadata files Kafka's tool ignores.

Each ``dump_*`` function returns a :class:`FileDump`: JSON-ready ``entries`` (one dict per index entry,
snapshot producer, checkpoint line, ...), file-level ``info``, the checks DumpLogSegments reports at the end of
a run (index mismatches, time-index mismatches / out-of-order timestamps / offsets not found) and ``problems``
(what makes Kafka's tool crash or reject the file: a missing ``.log``, an index entry past the end of the log,
a failed sanity check, a corrupt snapshot), each with the byte position. :meth:`FileDump.text` gives the
DumpLogSegments-style stdout lines and :meth:`FileDump.report_lines` its stderr reports.

| file | function |
|---|---|
| ``<base>.index`` | :func:`dump_offset_index` (``verify_index_only``, ``index_sanity_check`` as the tool's options) |
| ``<base>.timeindex`` | :func:`dump_time_index` (same options) |
| ``<base>.txnindex`` | :func:`dump_txn_index` |
| ``<offset>.snapshot`` | :func:`dump_producer_snapshot` |
| the four data-dir offset checkpoints | :func:`dump_offset_checkpoint` |
| ``leader-epoch-checkpoint`` | :func:`dump_leader_epoch_checkpoint` |
| ``partition.metadata`` | :func:`dump_partition_metadata` |
| ``meta.properties`` | :func:`dump_meta_properties` |
| ``.kafka_cleanshutdown`` | :func:`dump_clean_shutdown` |
| ``quorum-state`` | :func:`dump_quorum_state` |
| KRaft ``<offset>-<epoch>.checkpoint`` / ``bootstrap.checkpoint`` | :func:`dump_kraft_snapshot` (a stream of batch dicts) |

:func:`dump_file` dispatches on the file name. :func:`record_decoder` returns the hooks behind
``--offsets-decoder``, ``--transaction-log-decoder``, ``--cluster-metadata-decoder``,
``--remote-log-metadata-decoder`` and ``--share-group-state-decoder`` for
:func:`kafkalog.storage.records.dump.dump_log`: they add ``decoded`` (a dict), ``decodedText`` (the tool's
``key: ... payload: ...`` text) or ``decodeError`` to each record dict.

One deliberate difference from DumpLogSegments: an index file of zeros only (preallocated by a running or
killed broker before the segment's first index entry) dumps as empty; the tool reads its slot 0 as an entry
``(baseOffset, 0)`` and then crashes (empty ``.log``) or reports a mismatch.

Memory: index files are mmapped and walked entry by entry; a batch is read per entry; nothing loads a whole
``.log``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .errors import CorruptRecordError, KafkaLogError, LogDirError
from .files._index import map_file
from .files.checkpoints import DATA_DIR_CHECKPOINTS, read_offset_checkpoint
from .files.clean_shutdown import CLEAN_SHUTDOWN_FILE, read_clean_shutdown
from .files.leader_epoch import LEADER_EPOCH_CHECKPOINT, read_leader_epoch_checkpoint
from .files.meta_properties import META_PROPERTIES_FILE, read_meta_properties
from .files.names import LOG_FILE_SUFFIX
from .files.offset_index import OffsetIndex
from .files.partition_metadata import PARTITION_METADATA_FILE, read_partition_metadata
from .files.producer_snapshot import read_producer_snapshot
from .files.quorum_state import QUORUM_STATE_FILE, read_quorum_state
from .files.time_index import NO_TIMESTAMP, TimeIndex
from .files.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from .files.txn_index import TransactionIndex
from .records.dump import RecordDecoder, dump_log
from .records.reader import LogScanner

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DECODERS",
    "FileDump",
    "decrement_sequence",
    "dump_clean_shutdown",
    "dump_quorum_state",
    "dump_file",
    "dump_kind",
    "dump_kraft_snapshot",
    "dump_leader_epoch_checkpoint",
    "dump_meta_properties",
    "dump_offset_checkpoint",
    "dump_offset_index",
    "dump_partition_metadata",
    "dump_producer_snapshot",
    "dump_time_index",
    "dump_txn_index",
    "record_decoder",
]

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # DumpLogSegments --max-message-size
INT32_MAX = (1 << 31) - 1

Dialect = Literal["4.3", "3.9"]


@dataclass
class FileDump:
    """What dumping one non-``.log`` file found (see the module doc)."""

    file: str
    kind: str
    entries: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    empty: bool = False
    #: None: not run; True/False: ``--index-sanity-check`` result
    passed_sanity_check: bool | None = None
    #: .index: (index offset, last offset of the batch at the entry's position), in discovery order
    index_mismatches: list[tuple[int, int]] = field(default_factory=list)
    #: .timeindex: (index timestamp, max record timestamp of the batch), in discovery order
    timestamp_mismatches: list[tuple[int, int]] = field(default_factory=list)
    #: .timeindex: (index timestamp, previously indexed timestamp)
    out_of_order_timestamps: list[tuple[int, int]] = field(default_factory=list)
    #: .timeindex: (indexed offset, last offset of the first batch reaching it, -1 if none)
    offsets_not_found: list[tuple[int, int]] = field(default_factory=list)
    #: [{"position": int | None, "reason": str}]: what Kafka's tool would crash on or reject
    problems: list[dict[str, Any]] = field(default_factory=list)
    #: DumpLogSegments' stdout lines for this file (after "Dumping <file>")
    lines: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No problem and nothing for DumpLogSegments to report."""
        return not (self.problems or self.index_mismatches or self.timestamp_mismatches
                    or self.out_of_order_timestamps or self.offsets_not_found or self.passed_sanity_check is False)

    def problem(self, position: int | None, reason: str) -> None:
        self.problems.append({"position": position, "reason": reason})

    def text(self) -> list[str]:
        return list(self.lines)

    def report_lines(self) -> list[str]:
        """DumpLogSegments' end-of-run stderr reports for this file (Kafka prints them newest first for
        ``.index`` mismatches and in discovery order for the time-index lists)."""
        path = os.path.abspath(self.file)
        out: list[str] = []
        if self.index_mismatches:
            out.append(f"Mismatches in :{path}")
            out += [f"  Index offset: {a}, log offset: {b}" for a, b in reversed(self.index_mismatches)]
        if self.timestamp_mismatches:
            out.append(f"Found timestamp mismatch in :{path}")
            out += [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in self.timestamp_mismatches]
        if self.out_of_order_timestamps:
            out.append(f"Found out of order timestamp in :{path}")
            out += [f"  Index timestamp: {a}, Previously indexed timestamp: {b}"
                    for a, b in self.out_of_order_timestamps]
        if self.offsets_not_found:
            out.append("The following indexed offsets are not found in the log.")
            out += [f"Indexed offset: {a}, found log offset: {b}" for a, b in self.offsets_not_found]
        return out

    def json_objects(self) -> Iterator[dict[str, Any]]:
        """JSON Lines for ``kafkalog dump --json``: one object per entry (``file``, ``kind`` + the entry),
        then objects with an ``event`` key for file-level facts and reports."""
        for e in self.entries:
            yield {"file": self.file, "kind": self.kind, **e}
        if self.info:
            yield {"file": self.file, "kind": self.kind, "event": "info", **self.info}
        if self.empty:
            yield {"file": self.file, "kind": self.kind, "event": "empty"}
        if self.passed_sanity_check is not None:
            yield {"file": self.file, "kind": self.kind, "event": "sanityCheck", "passed": self.passed_sanity_check}
        for a, b in self.index_mismatches:
            yield {"file": self.file, "kind": self.kind, "event": "indexMismatch", "indexOffset": a, "logOffset": b}
        for a, b in self.timestamp_mismatches:
            yield {"file": self.file, "kind": self.kind, "event": "timestampMismatch", "indexTimestamp": a,
                   "logTimestamp": b}
        for a, b in self.out_of_order_timestamps:
            yield {"file": self.file, "kind": self.kind, "event": "outOfOrderTimestamp", "indexTimestamp": a,
                   "previousTimestamp": b}
        for a, b in self.offsets_not_found:
            yield {"file": self.file, "kind": self.kind, "event": "offsetNotFound", "indexOffset": a, "logOffset": b}
        for p in self.problems:
            yield {"file": self.file, "kind": self.kind, "event": "error", **p}

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file, "kind": self.kind, "entries": self.entries, "info": self.info, "empty": self.empty,
            "passedSanityCheck": self.passed_sanity_check, "indexMismatches": self.index_mismatches,
            "timestampMismatches": self.timestamp_mismatches, "outOfOrderTimestamps": self.out_of_order_timestamps,
            "offsetsNotFound": self.offsets_not_found, "problems": self.problems,
        }


# ------------------------------------------------------------------------------------------- helpers


def _base_and_log(path: str) -> tuple[int, Path]:
    """``file.getName.split("\\.")(0).toLong`` and the companion ``.log`` (DumpLogSegments' rules)."""
    p = Path(path)
    prefix = p.name.split(".", 1)[0]
    try:
        base = int(prefix)
    except ValueError:
        raise LogDirError(f"cannot derive a base offset from the file name {p.name!r}", path) from None
    return base, p.absolute().parent / (prefix + LOG_FILE_SUFFIX)


class _Log:
    """The companion ``.log``, mmapped read-only (or absent)."""

    def __init__(self, path: Path):
        self.path = path
        self.buf: memoryview | None = None
        self._map: Any = None
        self.error: str | None = None
        if not path.exists():
            self.error = f"the companion log file {path.name} does not exist"
            return
        try:
            self._map, _ = map_file(path, LogDirError)
            self.buf = memoryview(self._map)
        except KafkaLogError as e:
            self.error = f"the companion log file {path.name} cannot be read: {e.reason}"
        except OSError as e:
            self.error = f"the companion log file {path.name} cannot be read: {e.strerror or e}"

    @property
    def size(self) -> int:
        return 0 if self.buf is None else len(self.buf)

    def batches(self, start: int, end: int | None = None) -> LogScanner:
        assert self.buf is not None
        return LogScanner(self.buf, start, end, path=str(self.path))

    def close(self) -> None:
        if self.buf is not None:
            try:
                self.buf.release()
            except BufferError:
                pass
            self.buf = None
        if self._map is not None and hasattr(self._map, "close"):
            try:
                self._map.close()
            except BufferError:
                pass
        self._map = None


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


def _opt_long(v: int | None) -> str:
    return "OptionalLong.empty" if v is None else f"OptionalLong[{v}]"


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``DefaultRecordBatch.decrementSequence``: sequences wrap at Integer.MAX_VALUE."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _sanity_check(out: FileDump, idx) -> None:
    """``--index-sanity-check``: Kafka's ``sanityCheck`` of an offset or time index, as DumpLogSegments prints it."""
    try:
        idx.sanity_check()
        out.passed_sanity_check = True
        out.lines.append(f"{out.file} passed sanity check.")
    except KafkaLogError as e:
        out.passed_sanity_check = False
        out.problem(e.position, e.reason)


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
    name = os.fspath(path)
    out = FileDump(name, "index")
    base, log_path = _base_and_log(name)
    with OffsetIndex.open(name, base) as idx:
        out.info = {"baseOffset": base, "length": idx.length, "slots": idx.entries, "entries": idx.valid_entries}
        if idx.entries == 0 or _preallocated_only(idx):
            out.empty = True
            out.lines.append(f"{name} is empty.")
            return out
        if index_sanity_check:
            _sanity_check(out, idx)
            return out
        log = _Log(log_path)
        try:
            if log.error is not None:
                out.problem(None, log.error)
            for i in range(idx.entries):
                e = idx.entry(i)
                if e.offset == base and i > 0:
                    break  # zero padding of a preallocated file
                if log.buf is not None:
                    _check_index_entry(out, log, i, e.offset, e.position, max_message_size)
                if not verify_index_only:
                    out.entries.append({"offset": e.offset, "position": e.position})
                    out.lines.append(f"offset: {e.offset} position: {e.position}")
        finally:
            log.close()
    return out


def _check_index_entry(out: FileDump, log: _Log, slot: int, offset: int, position: int, max_size: int) -> None:
    where = slot * 8
    if not 0 <= position < log.size:
        out.problem(where, f"entry {slot} ({offset}, {position}): position is beyond the end of "
                           f"{log.path.name} ({log.size} bytes)")
        return
    scanner = log.batches(position, position + max_size)
    try:
        batch = next(iter(scanner), None)
    except CorruptRecordError as e:
        out.problem(where, f"entry {slot} ({offset}, {position}): {e.reason} at position {e.position} of "
                           f"{log.path.name}")
        return
    if batch is None:
        out.problem(where, f"entry {slot} ({offset}, {position}): no complete batch within "
                           f"{max_size} bytes (--max-message-size) at position {position} of {log.path.name}")
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
    name = os.fspath(path)
    out = FileDump(name, "timeindex")
    base, log_path = _base_and_log(name)
    index_path = log_path.with_name(log_path.name[: -len(LOG_FILE_SUFFIX)] + ".index")
    with TimeIndex.open(name, base) as tidx:
        out.info = {"baseOffset": base, "length": tidx.length, "slots": tidx.entries, "entries": tidx.valid_entries}
        if not index_sanity_check and _preallocated_only(tidx):
            out.empty = True
            out.lines.append(f"{name} is empty.")
            return out
        if index_sanity_check:
            _sanity_check(out, tidx)
            return out
        log = _Log(log_path)
        oidx = OffsetIndex.open(index_path, base) if index_path.exists() else OffsetIndex(b"", base)
        try:
            if log.error is not None:
                out.problem(None, log.error)
            prev_ts = NO_TIMESTAMP
            for i in range(tidx.entries):
                e = tidx.entry(i)
                if e.offset == base and i > 0:
                    break
                if log.buf is not None:
                    _check_time_entry(out, log, oidx, i, e.timestamp, e.offset, prev_ts)
                if not verify_index_only:
                    out.entries.append({"timestamp": e.timestamp, "offset": e.offset})
                    out.lines.append(f"timestamp: {e.timestamp} offset: {e.offset}")
                prev_ts = e.timestamp
        finally:
            oidx.close()
            log.close()
    return out


def _check_time_entry(out: FileDump, log: _Log, oidx: OffsetIndex, slot: int, ts: int, offset: int,
                      prev_ts: int) -> None:
    pos = oidx.lookup(offset).position
    if not 0 <= pos < log.size:
        pos = 0
    found = None
    try:
        for b in log.batches(pos):
            if b.last_offset >= offset:
                found = b
                break
    except CorruptRecordError as e:
        out.problem(slot * 12, f"entry {slot} ({ts}, {offset}): {e.reason} at position {e.position} of "
                               f"{log.path.name}")
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
        out.problem(slot * 12, f"entry {slot} ({ts}, {offset}): the batch at position {found.position} cannot be "
                               f"decoded: {e.reason}")
        return
    if max_ts != ts:
        out.timestamp_mismatches.append((ts, max_ts))
    if prev_ts >= ts:
        out.out_of_order_timestamps.append((ts, prev_ts))


# ------------------------------------------------------------------------------------------- .txnindex


def dump_txn_index(path: str | os.PathLike) -> FileDump:
    """DumpLogSegments ``dumpTxnIndex``: one entry per aborted transaction."""
    name = os.fspath(path)
    out = FileDump(name, "txnindex")
    base, _ = _base_and_log(name)
    with TransactionIndex.open(name, base) as idx:
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


# ------------------------------------------------------------------------------------------- .snapshot


def dump_producer_snapshot(path: str | os.PathLike) -> FileDump:
    """DumpLogSegments ``dumpProducerIdSnapshot``: one entry per producer, in file order. A corrupt snapshot
    (bad version, truncated, CRC mismatch) is a problem, as the tool prints the exception instead."""
    name = os.fspath(path)
    out = FileDump(name, "snapshot")
    try:
        snap = read_producer_snapshot(name)
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
                f"{pe.coordinator_epoch} currentTxnFirstOffset: {_opt_long(txn)} "
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


# ------------------------------------------------------------------------------------------- text files


def _checkpoint_dump(name: str, kind: str, reader: Callable[[str], Any]) -> tuple[FileDump, Any]:
    out = FileDump(name, kind)
    try:
        return out, reader(name)
    except KafkaLogError as e:
        if isinstance(e, LogDirError):
            raise
        out.problem(e.position, e.reason)
        return out, None


def dump_offset_checkpoint(path: str | os.PathLike) -> FileDump:
    """A data-dir offset checkpoint (recovery point, log start offset, high watermark, cleaner)."""
    name = os.fspath(path)
    out, ckpt = _checkpoint_dump(name, "offsetCheckpoint", read_offset_checkpoint)
    if ckpt is None:
        return out
    out.info = {"checkpoint": Path(name).name, "version": 0, "count": len(ckpt.entries), "form": ckpt.form,
                "canonical": ckpt.canonical}
    for e in ckpt.entries:
        out.entries.append({"topic": e.topic, "partition": e.partition, "offset": e.offset})
        out.lines.append(f"topic: {e.topic} partition: {e.partition} offset: {e.offset}")
    for problem in ckpt.validate():
        out.problem(None, problem)
    return out


def dump_leader_epoch_checkpoint(path: str | os.PathLike) -> FileDump:
    name = os.fspath(path)
    out, ckpt = _checkpoint_dump(name, "leaderEpochCheckpoint", read_leader_epoch_checkpoint)
    if ckpt is None:
        return out
    out.info = {"version": 0, "count": len(ckpt.entries), "form": ckpt.form, "canonical": ckpt.canonical}
    for e in ckpt.entries:
        out.entries.append({"epoch": e.epoch, "startOffset": e.start_offset})
        out.lines.append(f"epoch: {e.epoch} startOffset: {e.start_offset}")
    for problem in ckpt.validate():
        out.problem(None, problem)
    return out


def dump_partition_metadata(path: str | os.PathLike) -> FileDump:
    name = os.fspath(path)
    out, meta = _checkpoint_dump(name, "partitionMetadata", read_partition_metadata)
    if meta is None:
        return out
    out.entries.append({"version": meta.version, "topicId": meta.topic_id, "canonical": meta.canonical})
    out.lines.append(f"version: {meta.version} topicId: {meta.topic_id}")
    return out


def dump_meta_properties(path: str | os.PathLike) -> FileDump:
    name = os.fspath(path)
    out, meta = _checkpoint_dump(name, "metaProperties", read_meta_properties)
    if meta is None:
        return out
    props = meta.properties()
    for k in meta.keys():
        out.entries.append({"key": k, "value": props[k]})
        out.lines.append(f"{k}={props[k]}")
    info: dict[str, Any] = {"canonical": meta.canonical}
    try:
        info.update(version=meta.version, clusterId=meta.cluster_id, nodeId=meta.node_id,
                    directoryId=meta.directory_id)
    except KafkaLogError as e:
        out.problem(e.position, e.reason)
    out.info = info
    for problem in meta.validate():
        out.problem(None, problem)
    return out


def dump_quorum_state(path: str | os.PathLike) -> FileDump:
    """KRaft ``quorum-state`` (``__cluster_metadata-0``)."""
    name = os.fspath(path)
    out, state = _checkpoint_dump(name, "quorumState", read_quorum_state)
    if state is None:
        return out
    d = state.to_dict()
    out.entries.append(d)
    out.lines.append(" ".join(f"{k}: {v}" for k, v in d.items()))
    for problem in state.validate():
        out.problem(None, problem)
    return out


def dump_clean_shutdown(path: str | os.PathLike) -> FileDump:
    name = os.fspath(path)
    out, marker = _checkpoint_dump(name, "cleanShutdown", read_clean_shutdown)
    if marker is None:
        if not out.problems:
            out.problem(None, "no such file")
        return out
    entry = {"version": marker.version, "brokerEpoch": marker.broker_epoch, "json": marker.is_json}
    out.entries.append(entry)
    out.lines.append(f"version: {marker.version} brokerEpoch: {marker.broker_epoch}" if marker.is_json
                     else "clean shutdown marker without content (Kafka before 3.7)")
    for problem in marker.validate():
        out.problem(None, problem)
    return out


# ------------------------------------------------------------------------------------------- decoders

RecordDecoderName = Literal["offsets", "transaction", "cluster-metadata", "remote-log-metadata", "share-group-state"]


def _keyed_decoder(fmt: Callable, dec: Callable, dialect: Dialect) -> RecordDecoder:
    """A hook for internal topics whose records have a schema'd key and value (offsets, transactions):
    DumpLogSegments' text in ``decodedText``, the JSON form in ``decoded``, or ``decodeError``."""

    def decode(batch: dict, rec: dict) -> None:
        key, value = rec["key"], rec["value"]
        try:
            rec["decodedText"] = fmt(key, value, rec["offset"], dialect)
            rec["decoded"] = dec(key, value)
        except CorruptRecordError as e:
            rec["decodeError"] = e.reason

    return decode


def _offsets_decoder(dialect: Dialect) -> RecordDecoder:
    from .decoders.consumer_offsets import decode_offsets_record, format_offsets_record

    return _keyed_decoder(format_offsets_record, decode_offsets_record, dialect)


def _transaction_decoder(dialect: Dialect) -> RecordDecoder:
    from .decoders.transaction_state import decode_transaction_record, format_transaction_record

    return _keyed_decoder(format_transaction_record, decode_transaction_record, dialect)


def _metadata_decoder(dialect: Dialect) -> RecordDecoder:
    from .decoders.cluster_metadata import decode_metadata_record, format_metadata_record

    def decode(batch: dict, rec: dict) -> None:
        value, offset = rec["value"], rec["offset"]
        rec["decodedText"] = format_metadata_record(value, offset)
        if value is None:
            rec["decodeError"] = "metadata record without a value"
            return
        try:
            rec["decoded"] = decode_metadata_record(value)
        except CorruptRecordError as e:
            rec["decodeError"] = e.reason

    return decode


def _remote_log_metadata_decoder(dialect: Dialect) -> RecordDecoder:
    from .decoders.remote_log_metadata import decode_remote_log_metadata, format_remote_log_metadata

    def decode(batch: dict, rec: dict) -> None:
        key, value, offset = rec["key"], rec["value"], rec["offset"]
        rec["decodedText"] = format_remote_log_metadata(value, offset)
        try:
            rec["decoded"] = decode_remote_log_metadata(key, value)
        except CorruptRecordError as e:
            rec["decodeError"] = e.reason

    return decode


def _share_group_state_decoder(dialect: Dialect) -> RecordDecoder:
    from .decoders.share_group_state import decode_share_group_state_record, format_share_group_state_record

    return _keyed_decoder(format_share_group_state_record, decode_share_group_state_record, dialect)


DECODERS: dict[str, Callable[[Dialect], RecordDecoder]] = {
    "offsets": _offsets_decoder,
    "transaction": _transaction_decoder,
    "cluster-metadata": _metadata_decoder,
    "remote-log-metadata": _remote_log_metadata_decoder,
    "share-group-state": _share_group_state_decoder,
}


def record_decoder(name: str, dialect: Dialect = "4.3") -> RecordDecoder:
    """The per-record hook for ``dump_log(..., record_decoder=...)``: ``"offsets"``
    (``--offsets-decoder``), ``"transaction"`` (``--transaction-log-decoder``), ``"cluster-metadata"``
    (``--cluster-metadata-decoder``), ``"remote-log-metadata"`` (``--remote-log-metadata-decoder``) or
    ``"share-group-state"`` (``--share-group-state-decoder``). ``dialect`` picks the text of Kafka 4.3 or 3.9 where they differ."""
    try:
        return DECODERS[name](dialect)
    except KeyError:
        raise ValueError(f"unknown decoder {name!r} (one of {', '.join(DECODERS)})") from None


def decode_control_records(batch: dict, dialect: Dialect = "4.3") -> None:
    """Add ``control`` (decoded JSON) and ``controlText`` (DumpLogSegments' control part) to the records of a
    control batch dict (KRaft SnapshotHeader/Footer, KRaftVersion, KRaftVoters, LeaderChange, txn markers)."""
    from .decoders.kraft_control import decode_control_record, format_control_record

    for rec in batch.get("records", ()):
        try:
            rec["control"] = decode_control_record(rec["key"], rec["value"])
            rec["controlText"] = format_control_record(rec["key"], rec["value"], dialect)
        except CorruptRecordError as e:
            rec["decodeError"] = e.reason


def dump_kraft_snapshot(
    path: str | os.PathLike,
    *,
    deep: bool = True,
    decode: bool = True,
    max_bytes: int | None = None,
    dialect: Dialect = "4.3",
) -> Iterator[dict]:
    """A KRaft snapshot (``<offset>-<epoch>.checkpoint``, ``bootstrap.checkpoint``) or any
    ``__cluster_metadata`` segment: the batch dicts of :func:`dump_log`, with metadata records decoded
    (``--cluster-metadata-decoder``) and control records (snapshot header/footer, voters, ...) decoded."""
    dec = _metadata_decoder(dialect) if decode else None
    for d in dump_log(path, deep=deep, max_bytes=max_bytes, record_decoder=dec):
        if decode and d.get("isControl"):
            decode_control_records(d, dialect)
        yield d


# ------------------------------------------------------------------------------------------- dispatch

_BY_SUFFIX: dict[str, Callable[..., FileDump]] = {
    ".index": dump_offset_index,
    ".timeindex": dump_time_index,
    ".txnindex": dump_txn_index,
    ".snapshot": dump_producer_snapshot,
}
_BY_NAME: dict[str, Callable[[str | os.PathLike], FileDump]] = {
    **{n: dump_offset_checkpoint for n in DATA_DIR_CHECKPOINTS},
    LEADER_EPOCH_CHECKPOINT: dump_leader_epoch_checkpoint,
    PARTITION_METADATA_FILE: dump_partition_metadata,
    META_PROPERTIES_FILE: dump_meta_properties,
    CLEAN_SHUTDOWN_FILE: dump_clean_shutdown,
    QUORUM_STATE_FILE: dump_quorum_state,
}


_KIND_BY_SUFFIX = {".index": "index", ".timeindex": "timeindex", ".txnindex": "txnindex", ".snapshot": "snapshot"}
_KIND_BY_NAME = {
    **{n: "offsetCheckpoint" for n in DATA_DIR_CHECKPOINTS},
    LEADER_EPOCH_CHECKPOINT: "leaderEpochCheckpoint",
    PARTITION_METADATA_FILE: "partitionMetadata",
    META_PROPERTIES_FILE: "metaProperties",
    CLEAN_SHUTDOWN_FILE: "cleanShutdown",
    QUORUM_STATE_FILE: "quorumState",
}


def dump_kind(path: str | os.PathLike) -> str | None:
    """Which dumper handles ``path``: ``"log"`` (the records layer), ``"kraftSnapshot"``
    (:func:`dump_kraft_snapshot`), the :attr:`FileDump.kind` of :func:`dump_file`, or None (unknown)."""
    name = os.path.basename(os.fspath(path))
    if name in _KIND_BY_NAME:
        return _KIND_BY_NAME[name]
    if "." not in name:
        return None
    suffix = name[name.rindex("."):]
    if suffix == ".log":
        return "log"
    if suffix == ".checkpoint":
        return "kraftSnapshot"
    return _KIND_BY_SUFFIX.get(suffix)


def dump_file(
    path: str | os.PathLike,
    *,
    verify_index_only: bool = False,
    index_sanity_check: bool = False,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
) -> FileDump:
    """Dump any non-``.log`` file by its name (ValueError for ``.log``/``.checkpoint`` and unknown files)."""
    name = os.path.basename(os.fspath(path))
    if name in _BY_NAME:
        return _BY_NAME[name](path)
    if "." in name:
        suffix = name[name.rindex("."):]
        if suffix == ".index":
            return dump_offset_index(path, verify_index_only=verify_index_only,
                                     index_sanity_check=index_sanity_check, max_message_size=max_message_size)
        if suffix == ".timeindex":
            return dump_time_index(path, verify_index_only=verify_index_only, index_sanity_check=index_sanity_check)
        if suffix in _BY_SUFFIX:
            return _BY_SUFFIX[suffix](path)
    raise ValueError(f"no dumper for {name!r} (.log and .checkpoint files are dumped as record batches)")
