"""Stream every record of data dirs / partitions out as JSON Lines or Parquet (``kafkalog export``; the Parquet
layout is :mod:`.parquet`'s).

Rows have the one record schema, ``records/columns.RECORD_COLUMNS`` (the Spark data source's and ``to_arrow``'s:
the same 19 columns, names and order)::

    key, value, topic, partition, offset, timestamp, timestampType (-1/0/1), headers [(key, value)],
    timestampMs, leaderEpoch, producerId, producerEpoch, sequence, isTransactional, isControl, magic, codec,
    segment (the .log file name), position (byte position of the record's batch)

``timestamp`` is a TIMESTAMP in Arrow and Parquet; JSON and Python have no such type, so there it is the epoch
ms, the value of ``timestampMs``. Control records (transaction markers) are left out unless asked for
(``include_control``; ``kafkalog export --print-control-records``), as a Kafka consumer never sees them; an
export that ``kafkalog import`` rebuilds the log from asks for them. Segments are read through mmap batch by
batch and closed as soon as they are done: memory is bounded by one batch (JSON Lines) or one row group
(Parquet), never by a segment. Offset ranges start at the batch the offset index points to.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from kafkalog.storage.codec.compression import DEFAULT_DECOMPRESS_LIMIT
from kafkalog.storage.engine.export_filter import ExportFilter, ExportStats, time_start
from kafkalog.storage.errors import ConfigError, KafkaLogError, LogDirError
from kafkalog.storage.files.checkpoints import REPLICATION_OFFSET_CHECKPOINT
from kafkalog.storage.files.names import segment_log_files
from kafkalog.storage.io.fs import as_path
from kafkalog.storage.io.jsonio import b64_field, header_fields, text_output
from kafkalog.storage.log.datadir import live_partition_name, resolve_partition_dirs
from kafkalog.storage.log.dir_checkpoints import open_partition_log, partition_checkpoints
from kafkalog.storage.log.loss import remembered_facts
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.records.batch import RECORD_CHUNK, increment_sequence
from kafkalog.storage.records.columns import RECORD_COLUMNS, RecordColumns
from kafkalog.storage.records.control import control_type_name, parse_control_key

EXPORT_COLUMNS = RECORD_COLUMNS  # the record schema of the Spark data source, defined once
# the fields of a row, in every layout (a JSON Lines row's ``timestamp`` is the epoch ms, as its ``timestampMs``)
COLUMN_NAMES = [n for n, _ in EXPORT_COLUMNS]
DEFAULT_ROW_GROUP_ROWS = 64 * 1024
DEFAULT_ROW_GROUP_BYTES = 64 * 1024 * 1024


BatchRows = tuple[tuple, list[tuple]]
"""``(batch fields, records)``: batch fields = (topic, partition, timestampType, leaderEpoch, producerId,
producerEpoch, baseSequence, baseOffset, isTransactional, isControl, magic, codec, segment, position);
records = [(offset, timestamp, key, value, headers)]."""


RunSink = Callable[[str, int, str, memoryview, int, int], int]
"""``run(topic, partition, segment name, buf, start, end) -> position``: takes the records of a run of plain
entries from ``buf[start:end]`` itself (the native core, checking each CRC) and returns where it stopped."""


def _selected_batches(partition_dir: str | os.PathLike, flt: ExportFilter,
                      stats: ExportStats | None, run: RunSink | None = None) -> Iterator[tuple[str, int, str, Any]]:
    """``(topic, partition, segment name, batch)`` of every batch of one partition the filter may keep (checked
    against its CRC), segment by segment (each closed, and reported to ``stats.on_segment``, when done).

    With ``run`` and a filter that keeps every batch whatever its offsets, times and producer, runs of plain
    entries go to ``run`` instead; the entry each run stops at (compressed, legacy, control, damaged, the end)
    is read here as usual, so errors and skips are the same."""
    read = PartitionRead(partition_dir, flt)
    try:
        yield from read.batches(stats, run)
    finally:
        read.close()


Span = tuple[int | None, int | None, int | None, int | None]
"""Part of a partition's read: ``(first, start, last, stop)``, the segments whose base offsets are in ``[first,
last]`` (None: unbounded), read from byte ``start`` of the first (None: where the whole read starts in it, -1: not
at all) to the batches starting before byte ``stop`` of the last (None: its end)."""


class SpanEnd:
    """Where the read of a :data:`Span` ended in its last segment: ``position``, the byte of the first batch it did
    not read (its ``stop``, or beyond it when a batch straddles it), or None when the segment ended there (its
    end, a torn tail of the active segment, the range's end offset, an error)."""

    position: int | None = None


class PartitionRead:
    """One partition opened once for a read that may be cut into :data:`Span` s read by several threads at once
    (:meth:`batches`): the partition log, its checks (an unfinished swap, offsets remembered beyond the end:
    raised by every span's read, where the whole read raises them), the range and the aborted transactions of a
    read_committed read are made once, on the first span's thread; a segment is closed once every span holding it
    (:meth:`hold`) is :meth:`done`, the partition when the last one is (or when :meth:`close` d)."""

    def __init__(self, partition_dir: str | os.PathLike, flt: ExportFilter) -> None:
        self.path = as_path(partition_dir)  # (a partition dir under a URL is read through the filesystem seam)
        self.flt = flt
        self._lock = threading.Lock()
        self._opened = False
        self._error: BaseException | None = None
        self._plog: PartitionLog | None = None
        self._holds: dict[int, int] = {}
        self._spans = 0
        self.topic, self.partition = "", 0
        self.lo, self.hi = flt.from_offset, flt.to_offset
        self.aborted: dict[int, list[tuple[int, int]]] = {}

    def hold(self, base_offsets: Iterable[int]) -> None:
        """One more span reads the segments of these base offsets (planned before the read starts)."""
        self._spans += 1
        for b in base_offsets:
            self._holds[b] = self._holds.get(b, 0) + 1

    def done(self, base_offsets: Iterable[int]) -> None:
        """A span planned with :meth:`hold` is read (or given up): the segments no other span holds are closed,
        and the partition after the last span."""
        with self._lock:
            closing = []
            for b in base_offsets:
                self._holds[b] -= 1
                if not self._holds[b]:
                    closing.append(b)
            self._spans -= 1
            last = self._spans <= 0
            plog = self._plog
        if plog is not None and closing:
            for seg in plog.segments:
                if seg.base_offset in closing:
                    seg.close()
        if last:
            self.close()

    def _open(self) -> PartitionLog:
        with self._lock:
            if not self._opened:
                self._opened = True
                try:
                    self._plog = self._load()
                except BaseException as e:  # noqa: BLE001 - every span's read raises it, the first one in order
                    self._error = e
            if self._error is not None:
                raise self._error.with_traceback(None)
            assert self._plog is not None
            return self._plog

    def _load(self) -> PartitionLog:
        pdir, flt = self.path, self.flt
        tp = live_partition_name(pdir.name)
        if tp is None:
            raise KafkaLogError("not a partition directory (<topic>-<partition>)", str(pdir))
        self.topic, self.partition = tp.topic, tp.partition
        checkpoints = partition_checkpoints(pdir)
        if flt.sole_replica:
            checkpoints[REPLICATION_OFFSET_CHECKPOINT] = None
        plog = open_partition_log(pdir, checkpoints)
        try:
            if plog.unfinished_swap:  # exporting the listed segments would silently miss records
                raise LogDirError(plog.unfinished_swap, str(pdir))
            remembered = plog.remembered_beyond_end()
            if remembered:  # its checkpoints, snapshots or epochs remember offsets the log no longer holds
                gone = remembered_facts(remembered)
                names = ", ".join(dict.fromkeys(os.path.basename(r.file) for r in remembered))
                raise LogDirError(f"offsets {gone['logEndOffset']}..{gone['lastMissing']} are gone: the log ends at "
                                  f"offset {gone['logEndOffset']}, but {names} remember later offsets (`kafkalog "
                                  "verify` says which)", str(pdir))
            lo, hi = flt.from_offset, flt.to_offset  # (an offset spec is resolved by the caller: for_partition)
            if flt.read_committed:
                # a read_committed consumer reads up to the last stable offset (an open transaction's first offset;
                # no producer expires offline), skips control batches and the batches of aborted transactions:
                # those of a producer between an aborted transaction's first offset and its abort marker (.txnindex)
                lso = plog.last_stable_offset(0, 1 << 62)
                hi = lso if hi is None else min(hi, lso)
                for t in plog.collect_aborted_transactions(plog.log_start_offset if lo is None else lo, hi):
                    self.aborted.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
            self.lo, self.hi = lo, hi
        except BaseException:
            plog.close()
            raise
        return plog

    def close(self) -> None:
        with self._lock:
            plog, self._plog = self._plog, None
            if self._opened and self._error is None:
                self._error = KafkaLogError("the partition's read is closed", str(self.path))
            self._opened = True
        if plog is not None:
            plog.close()

    def batches(self, stats: ExportStats | None, run: RunSink | None = None, span: Span | None = None,
                ended: SpanEnd | None = None) -> Iterator[tuple[str, int, str, Any]]:
        """The batches of :func:`_selected_batches`, of the whole partition or of ``span`` (where it ended in
        ``ended``): the spans of a partition give the batches its whole read gives, each once. The whole read
        closes each segment once past it; a span's are closed by :meth:`done`."""
        plog = self._open()
        flt, topic, partition = self.flt, self.topic, self.partition
        lo, hi, aborted = self.lo, self.hi, self.aborted
        t_lo = flt.from_time
        first, start0, last, stop = span if span is not None else (None, None, None, None)
        if lo is not None or hi is not None or t_lo is not None or flt.read_committed or flt.transactional_only \
                or flt.producer_ids is not None:
            run = None
        segs = plog.segments
        own = span is None
        for i, seg in enumerate(segs):
            if first is not None and seg.base_offset < first:
                continue
            if last is not None and seg.base_offset > last:
                break
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
            seg_size = seg.size
            in_last = last is not None and seg.base_offset == last
            if (lo is not None and nxt is not None and nxt <= lo) or (start0 == -1 and seg.base_offset == first):
                if own:
                    seg.close()
                if stats is not None and stats.on_segment is not None:
                    stats.on_segment(seg_size)
                continue
            if hi is not None and seg.base_offset >= hi:
                break
            start = segment_start(seg, lo) if start0 is None or seg.base_offset != first else start0
            end = stop if in_last else None
            name = seg.path.name
            reached = SpanEnd()
            try:
                for b in (plog.segment_batches(seg, start, end) if run is None
                          else _entries(plog, seg, start, run, topic, partition, end, reached)):
                    if end is not None and b.position >= end:
                        reached.position = b.position
                        break
                    if lo is not None and b.last_offset < lo:
                        continue
                    if hi is not None and b.magic >= 2 and b.base_offset >= hi:
                        break
                    if t_lo is not None and b.magic >= 1 and b.max_timestamp < t_lo and b.timestamp_type == 0:
                        continue
                    if b.is_control and (not flt.include_control or flt.read_committed):
                        continue
                    if flt.transactional_only and not b.is_transactional:
                        continue
                    if flt.producer_ids is not None and b.producer_id not in flt.producer_ids:
                        continue
                    if aborted and b.is_transactional and any(
                            first_o <= b.base_offset <= last_o for first_o, last_o in aborted.get(b.producer_id, ())):
                        continue
                    b.ensure_valid()
                    yield topic, partition, name, b
                    del b
            finally:
                if own:
                    seg.close()
            if in_last and ended is not None:
                ended.position = reached.position
            if stats is not None and stats.on_segment is not None:
                stats.on_segment(seg_size)


def segment_start(seg, lo: int | None) -> int:
    """The byte a read of the offsets from ``lo`` starts at in ``seg``: the offset index's entry for it (0 without
    one, or when it fails)."""
    if lo is not None and lo > seg.base_offset and seg.has_offset_index:
        try:
            return seg.offset_index.lookup(lo).position
        except KafkaLogError:
            return 0
    return 0


def _entries(plog: PartitionLog, seg, start: int, run: RunSink, topic: str, partition: int,
             stop: int | None = None, reached: SpanEnd | None = None) -> Iterator[Any]:
    """The segment's entries from ``start`` that ``run`` does not take (see :func:`_selected_batches`); where
    they end is judged as :meth:`PartitionLog.segment_batches` judges it. With ``stop``, only the entries
    starting before it (where the next one starts in ``reached``)."""
    pos, end, name = start, seg.size, seg.path.name
    while True:
        if stop is not None and pos < stop:
            pos = run(topic, partition, name, seg.buf, pos, min(stop, end))
        elif stop is None:
            pos = run(topic, partition, name, seg.buf, pos, end)
        if stop is not None and pos >= stop:
            if reached is not None:
                reached.position = pos
            return
        scanner = seg.scanner(pos)
        b = next(iter(scanner), None)
        if b is None:
            err = plog.segment_end_error(seg, scanner)
            if err is not None:
                raise err
            return
        yield b
        pos = b.position + b.size


KEY_FORMATS = ("utf8", "hex", "base64")


def key_bytes(text: str, fmt: str = "utf8") -> bytes:
    """The key bytes written as ``text`` in ``fmt``: ``utf8`` (undecodable bytes as ``surrogateescape``, as
    ``--payload utf8`` prints them), ``hex`` or ``base64``."""
    try:
        if fmt == "utf8":
            return text.encode("utf-8", "surrogateescape")
        if fmt == "hex":
            return bytes.fromhex(text)
        if fmt == "base64":
            return base64.b64decode(text, validate=True)
    except ValueError as e:
        raise ConfigError(f"key {text!r} is not valid {fmt}: {e}") from None
    raise ConfigError(f"unknown key format {fmt!r} (one of {', '.join(KEY_FORMATS)})")


def _record_window(flt: ExportFilter) -> tuple[int, int, int, int] | None:
    """The filter's ``[offset, timestamp)`` window as ``(lo_o, hi_o, lo_t, hi_t)``, or None for everything."""
    if flt.from_offset is None and flt.to_offset is None and flt.from_time is None and flt.to_time is None:
        return None
    big = 1 << 63
    return (-big if flt.from_offset is None else flt.from_offset, big if flt.to_offset is None else flt.to_offset,
            -big if flt.from_time is None else flt.from_time, big if flt.to_time is None else flt.to_time)


def _record_chunks(b, window, flt: ExportFilter | None = None) -> Iterator[list[tuple]]:
    """The batch's records as tuples, a bounded chunk at a time (whatever count it declares), filtered."""
    for recs in b.record_chunks(full=False):
        if window is not None:
            lo_o, hi_o, lo_t, hi_t = window
            recs = [r for r in recs if lo_o <= r[0] < hi_o and lo_t <= r[1] < hi_t]
        if flt is not None and flt.key is not None:
            recs = [r for r in recs if flt.keeps(r)]
        if recs:
            yield recs


def iter_partition_batches(partition_dir: str | os.PathLike, flt: ExportFilter | None = None,
                           stats: ExportStats | None = None) -> Iterator[BatchRows]:
    """The batches of one partition (filtered), each with its decoded records."""
    flt = _resolved(partition_dir, flt or ExportFilter())
    window = _record_window(flt)
    for topic, partition, name, b in _selected_batches(partition_dir, flt, stats):
        magic = b.magic
        head = (topic, partition, b.timestamp_type, b.partition_leader_epoch, b.producer_id, b.producer_epoch,
                b.base_sequence, b.base_offset if magic >= 2 else None, b.is_transactional, b.is_control,
                magic, b.codec_name, name, b.position)
        counted = False
        for recs in _record_chunks(b, window, flt):  # memory bounded whatever the record count
            if stats is not None:
                stats.batches += 0 if counted else 1
                stats.records += len(recs)
            counted = True
            yield head, recs


def _resolved(partition_dir: str | os.PathLike, flt: ExportFilter) -> ExportFilter:
    """``flt`` for one partition (its offset spec resolved against the log start offset its data dir's
    checkpoint holds, as the broker's; a ``from_time`` started through the time indexes)."""
    if flt.offset_spec is None and flt.from_time is None:
        return flt
    with open_partition_log(as_path(partition_dir)) as plog:
        return flt.for_partition(plog)


def _sequence(base_seq: int, base_offset: int | None, offset: int) -> int:
    if base_seq < 0 or base_offset is None:
        return -1
    return increment_sequence(base_seq, offset - base_offset)


def rows_of(head: tuple, recs: list[tuple]) -> Iterator[dict[str, Any]]:
    """Row dicts (bytes for key/value/header values) of one batch."""
    topic, partition, ts_type, ple, pid, pepoch, base_seq, base_off, txn, ctrl, magic, codec, seg, pos = head
    for off, ts, key, value, headers in recs:  # RECORD_COLUMNS, in its order
        yield {"key": key, "value": value, "topic": topic, "partition": partition, "offset": off, "timestamp": ts,
               "timestampType": ts_type, "headers": list(headers), "timestampMs": ts, "leaderEpoch": ple,
               "producerId": pid, "producerEpoch": pepoch, "sequence": _sequence(base_seq, base_off, off),
               "isTransactional": txn, "isControl": ctrl, "magic": magic, "codec": codec, "segment": seg,
               "position": pos}


def iter_export_rows(paths: Iterable[str | os.PathLike], flt: ExportFilter | None = None,
                     stats: ExportStats | None = None) -> Iterator[dict[str, Any]]:
    """Every record (as a row dict) of every partition under ``paths``, partition by partition, in offset order."""
    flt = flt or ExportFilter()
    for pdir in resolve_partition_dirs(list(paths), flt.topics):
        if stats is not None:
            stats.partitions += 1
        for head, recs in iter_partition_batches(pdir, flt, stats):
            yield from rows_of(head, recs)


# ------------------------------------------------------------------------------------------- JSON Lines


def _b64(v: bytes | None) -> str | None:
    return None if v is None else base64.b64encode(v).decode("ascii")


def control_type(key: bytes | None) -> str:
    """The type of a control record from its key: COMMIT, ABORT (transaction markers), LEADER_CHANGE..."""
    try:
        return control_type_name(parse_control_key(key)[1])
    except KafkaLogError:
        return "UNKNOWN"


def row_to_json(row: dict[str, Any], render: Callable[[bytes | None], str | None] = _b64) -> dict[str, Any]:
    """JSON-ready row: key/value/header values base64 (null stays null; ``render`` writes them another way,
    as ``export --payload`` asks), headers ``[{key, value}]``; a control record also has ``controlType``
    (COMMIT or ABORT for transaction markers)."""
    out = dict(row)
    if row.get("isControl"):
        out["controlType"] = control_type(row["key"])
    out["key"] = render(row["key"])
    out["value"] = render(row["value"])
    out["headers"] = [{"key": k, "value": render(v)} for k, v in row["headers"]]
    return out


def row_from_json(obj: dict[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`row_to_json` (an export without ``timestampMs``, from before it was written, reads the
    same: its ``timestamp`` is the epoch ms)."""
    row = dict(obj)
    if "timestampMs" in obj:
        row["timestamp"] = obj["timestampMs"]
    for k in ("key", "value"):
        row[k] = b64_field(obj.get(k), k)
    row["headers"] = header_fields(obj.get("headers"), b64_field)
    return row


def export_jsonl(paths: Iterable[str | os.PathLike], out: IO[str] | str | os.PathLike,
                 flt: ExportFilter | None = None, *, progress: Callable[[int], None] | None = None,
                 render: Callable[[bytes | None], str | None] = _b64) -> ExportStats:
    """Write every record as one JSON object per line to ``out`` (a path, ``-`` for stdout, or a text stream).
    ``progress(bytes)`` is called with each segment's size once it is exported; ``render`` writes keys, values
    and header values (base64 by default: what ``import`` reads)."""

    stats = ExportStats(on_segment=progress)
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    with text_output(out) as (stream, written):
        if written is not None:
            stats.files.append(written)
        for row in iter_export_rows(paths, flt, stats):
            stream.write(dumps(row_to_json(row, render)))
            stream.write("\n")
    return stats


# ---------------------------------------------------------------------------------------------- Parquet


def _native_runs(cols: RecordColumns, w, stats: ExportStats, include_control: bool, row_group_rows: int,
                 row_group_bytes: int, *, decompress_limit: int = 0, one_group: bool = False) -> RunSink:
    """A :data:`RunSink` adding runs of plain v2 batches (CRC checked, at most ``RECORD_CHUNK`` records each;
    control batches only if ``include_control``) to ``cols`` in the core, writing full row groups to ``w``. With
    ``decompress_limit`` compressed v2 batches join the runs (decompressed natively within it, without the GIL);
    with ``one_group`` a run stops after each row group written (what ``w`` holds stays one row group)."""
    core = cols._core
    assert core is not None
    stop = (0 if include_control else 0x20) | (0 if decompress_limit else 0x07)  # a control batch; a codec

    def run(topic: str, partition: int, name: str, buf, pos: int, end: int) -> int:
        while True:  # (a row group written empties cols, and its piece names)
            piece = cols._piece((topic, partition, name))
            pos, rows, batches = core.add_entries(buf, pos, end, 0, piece, row_group_rows, row_group_bytes, True,
                                                  stop, RECORD_CHUNK, decompress_limit)
            if not rows and end - pos > 17 and not 2 <= buf[pos + 16] < 128:  # plain v0/v1 messages, CRC32 checked
                pos, rows = core.add_legacy_entries(buf, pos, end, 0, piece, row_group_rows, row_group_bytes,
                                                    DEFAULT_DECOMPRESS_LIMIT, True, True)
                batches = rows  # (one message, one entry)
            stats.batches += batches
            stats.records += rows
            if len(cols) < row_group_rows and cols.nbytes < row_group_bytes:
                if not rows:
                    return pos
                continue
            n = len(cols)
            w.write_batch(cols.to_arrow(), row_group_size=max(n, row_group_rows))
            if one_group:
                return pos
    return run


def export_bytes(paths: Iterable[str | os.PathLike], topics: set[str] | None = None) -> int:
    """The ``.log`` bytes an export of ``paths`` reads at most (the total of its progress bar)."""
    total = 0
    for pdir in resolve_partition_dirs(list(paths), topics):
        total += sum(p.stat().st_size for p in segment_log_files(pdir))
    return total


__all__ = [
    "COLUMN_NAMES", "EXPORT_COLUMNS", "KEY_FORMATS", "ExportFilter", "ExportStats",
    "control_type", "export_jsonl", "key_bytes", "time_start",
    "export_bytes", "iter_export_rows", "iter_partition_batches", "row_from_json",
    "row_to_json", "rows_of",
]
