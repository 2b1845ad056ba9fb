"""Scanning planned pieces into Arrow record batches (runs on Spark workers; usable without Spark).

Per batch, not per record: the batch header is read once, the CRC checked once, records decoded into Arrow
columns by the records layer's ``RecordColumns`` (straight into Arrow buffers with the compiled record core);
batch-level columns are expanded with one ``take``. Arrow batches are flushed every ``ROWS_PER_CHUNK`` records or ``BYTES_PER_CHUNK`` bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from kafkalog.storage.errors import CorruptIndexError, CorruptRecordError, KafkaLogError
from kafkalog.storage.files.segment import WindowedScanner
from kafkalog.storage.io.file_stamp import FileStamp
from kafkalog.storage.io.fs import SegmentFile
from kafkalog.storage.records import PARTIAL_BATCH, LegacyBatch, LogScanner, RecordBatch, RecordColumns

from .filters import columns as filter_columns
from .filters import keeps
from .options import ReadOptions
from .plan import Piece
from .schema import BATCH_COLUMNS, CORRUPT_COLUMN, RECORD_COLUMNS, arrow_schema, batch_constant_columns

ROWS_PER_CHUNK = 65536
BYTES_PER_CHUNK = 32 * 1024 * 1024
log = logging.getLogger("kafkalog.spark.scan")

#: a piece whose segment is not the file planned (:meth:`~kafkalog.storage.io.file_stamp.FileStamp.holds`), in words; the
#: JVM scan fills the same fields (its ``replaced`` option)
REPLACED = ("{segment} (offsets {first} to {last} of {topic}-{partition}, bytes {start} to {end}) was replaced after "
            "the read was planned: planned {size} bytes modified at {mtime} ms, found {found_size} bytes modified "
            "at {found_mtime} ms (compaction swaps a new file in under the same name, recovery truncates one, "
            "retention deletes one and a new one may take its name). Re-run the query to read it as it is now.")
REPLACED_FAIL = ('If you want the query to skip such a segment and read the rest, set the source option '
                 '"failOnDataLoss" to "false".')
REPLACED_WARN = 'Its records were not read (the source option "failOnDataLoss" is "false").'


class DataLossError(KafkaLogError):
    """Records planned for the read are gone or not the planned ones any more (and ``failOnDataLoss`` is true)."""


def replaced_message(piece: Piece, found: FileStamp, opts: ReadOptions) -> str:
    """:data:`REPLACED` for ``piece``, whose segment is now ``found``."""
    lo_o, hi_o, _, _ = record_filter(opts.in_window(piece.window))
    planned = piece.stamp or found
    return REPLACED.format(segment=piece.name, first=max(lo_o, piece.base_offset),
                           last="the end" if hi_o >= 1 << 63 else hi_o, topic=piece.topic,
                           partition=-1 if piece.partition is None else piece.partition, start=piece.start,
                           end=piece.end, size=planned.size, mtime=planned.mtime_ms, found_size=found.size,
                           found_mtime=found.mtime_ms)


def planned_file(piece: Piece, f: SegmentFile, opts: ReadOptions) -> bool:
    """Whether ``f`` (``piece``'s segment, opened) is the file that was planned (the piece's stamp); when it is not,
    the read fails (:class:`DataLossError`) or, with ``failOnDataLoss`` false, the piece is skipped with a warning."""
    if piece.stamp is None or piece.stamp.holds(f.stamp):
        return True
    message = replaced_message(piece, f.stamp, opts)
    if opts.fail_on_data_loss:
        raise DataLossError(f"{message} {REPLACED_FAIL}")
    log.warning("%s %s", message, REPLACED_WARN)
    return False


@dataclass(frozen=True)
class Corrupt:
    """A place where the log could not be read: reported as a ``_corrupt`` row or raised (failfast)."""

    piece: Piece
    position: int
    reason: str
    offset: int | None = None

    def error(self) -> CorruptRecordError:
        return CorruptRecordError(self.reason, self.piece.name, self.position)


# ----------------------------------------------------------------------------------- batch iteration
def iter_piece(piece: Piece, f: SegmentFile, max_batch_size: int) -> Iterator[RecordBatch | LegacyBatch | Corrupt]:
    """The entries of ``piece`` (batches, or one :class:`Corrupt` after which the piece ends): a local segment's
    mapped bytes scanned at once, a URL's in storage's bounded windows (:class:`WindowedScanner`)."""
    end = piece.end
    scanner = LogScanner(f.view(0, f.size), piece.start, end, path=piece.name, max_batch_size=max_batch_size) \
        if f.is_mapped else WindowedScanner(f, piece.start, end, path=piece.name, max_batch_size=max_batch_size)
    try:
        yield from scanner
    except CorruptRecordError as e:
        yield Corrupt(piece, e.position if e.position is not None else scanner.stop_position, e.reason)
        return
    new_pos = scanner.stop_position
    if scanner.stop_reason is None and new_pos >= end:
        return
    left = piece.file_size - new_pos
    if end < piece.file_size:
        raise CorruptIndexError(
            f"split boundary at byte {end} is not a batch boundary (the entry at byte {new_pos} runs past it): "
            f"the offset index does not match the log", piece.name, new_pos)
    what = "a partial batch" if scanner.stop_reason == PARTIAL_BATCH else "a torn tail"
    yield Corrupt(piece, new_pos, f"{left} bytes at the end of the segment are {what}, not a complete batch")


def _valid(b) -> str | None:
    try:
        if b.is_valid():
            return None
        return (f"record batch is corrupt (stored crc = 0x{b.crc:08x}, computed crc = 0x{b.compute_crc():08x})"
                if b.magic >= 2 else f"message is corrupt (stored crc = {b.crc}, computed crc = {b.compute_crc()})")
    except KafkaLogError as e:
        return e.reason


# ----------------------------------------------------------------------------------- record level
def record_filter(opts: ReadOptions):
    """``(lo_o, hi_o, lo_t, hi_t)``: a record is read when ``lo_o <= offset < hi_o and lo_t <= timestamp < hi_t``
    (+-2^63 where ``opts`` sets no bound)."""
    so, eo, st, et = opts.start_offset, opts.end_offset, opts.start_timestamp, opts.end_timestamp
    lo_o = so if so is not None else -(1 << 63)
    hi_o = eo if eo is not None else 1 << 63
    lo_t = st if st is not None else -(1 << 63)
    hi_t = et if et is not None else 1 << 63
    return lo_o, hi_o, lo_t, hi_t


def _batch_filters(opts: ReadOptions) -> tuple:
    """The pushed filters evaluated on batch headers (those over columns constant per batch)."""
    per_batch = batch_constant_columns(opts)
    return tuple(n for n in opts.filters if filter_columns(n) <= per_batch)


def _header_values(piece: Piece, b) -> dict:
    """The record-level columns that are constant over batch ``b`` (what its rows will hold)."""
    return {"topic": piece.topic, "partition": piece.partition, "timestampType": b.timestamp_type,
            "leaderEpoch": b.partition_leader_epoch, "producerId": b.producer_id,
            "producerEpoch": b.producer_epoch, "isTransactional": b.is_transactional, "isControl": b.is_control,
            "magic": b.magic, "codec": b.codec_name, "segment": piece.name, "position": b.position,
            CORRUPT_COLUMN: None}


def scan_records(pieces: list[Piece], opts: ReadOptions) -> Iterator[pa.RecordBatch | Corrupt]:
    """Record-level Arrow batches (schema ``RECORD_COLUMNS``) and :class:`Corrupt` markers, in log order."""
    batch_filters = _batch_filters(opts)
    chunk = RecordColumns(capacity=8 << 20)
    for piece in pieces:
        popts = opts.in_window(piece.window)  # the partition's resolved `offset` option
        filtering = popts.has_record_filter
        lo_o, hi_o, lo_t, hi_t = record_filter(popts)
        keep = (lo_o, hi_o, lo_t, hi_t) if filtering else None
        with SegmentFile(piece.spec, piece.path) as f:
            if not planned_file(piece, f, opts):
                continue
            for b in iter_piece(piece, f, opts.max_batch_size):
                if isinstance(b, Corrupt):
                    yield b
                    continue
                if opts.verify_crc:
                    bad = _valid(b)
                    if bad is not None:
                        yield Corrupt(piece, b.position, bad)
                        continue
                magic = b.magic
                try:
                    if not opts.include_control and magic >= 2 and b.is_control:
                        continue  # as format("kafka"): Kafka's consumer never returns control records
                    if batch_filters and not keeps(batch_filters, _header_values(piece, b)):
                        continue
                    if filtering:
                        if b.last_offset < lo_o:
                            continue
                        if magic >= 2:
                            if b.base_offset >= hi_o:
                                break
                            if b.max_timestamp < lo_t:
                                continue
                    if not chunk.add_batch(b, piece.topic, piece.partition, piece.name, keep):
                        continue
                except KafkaLogError as e:
                    yield Corrupt(piece, e.position if e.position is not None else b.position, e.reason)
                    continue
                if len(chunk) >= ROWS_PER_CHUNK or chunk.nbytes >= BYTES_PER_CHUNK:
                    yield chunk.to_arrow()  # and the chunk is empty again
                del b
    if len(chunk):
        yield chunk.to_arrow()


# ----------------------------------------------------------------------------------- batch level
def _batch_row(piece: Piece, b, crc_valid) -> tuple:
    legacy = b.magic < 2
    return (
        piece.topic, piece.partition, b.base_offset, b.last_offset, None if legacy else b.records_count,
        None if legacy else b.base_timestamp, b.max_timestamp, b.timestamp_type, b.partition_leader_epoch,
        b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence, b.is_transactional, b.is_control,
        b.magic, b.codec_name, b.crc, crc_valid, b.size, piece.name, b.position,
    )


def _rows_to_arrow(rows: list[tuple], columns) -> pa.RecordBatch:
    schema = arrow_schema(columns)
    cols: list[tuple | list] = list(zip(*rows, strict=True)) if rows else [[] for _ in columns]
    return pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)],
                                      schema=schema)


def scan_batches(pieces: list[Piece], opts: ReadOptions) -> Iterator[pa.RecordBatch | Corrupt]:
    """Batch-level Arrow batches (schema ``BATCH_COLUMNS``), no record decoding (except the base offset of
    v0/v1 compressed wrappers, which Kafka also reads from the first inner message)."""
    batch_filters = _batch_filters(opts)
    names = [n for n, _ in BATCH_COLUMNS]
    rows: list[tuple] = []
    for piece in pieces:
        lo_o, hi_o, _, _ = record_filter(opts.in_window(piece.window))
        with SegmentFile(piece.spec, piece.path) as f:
            if not planned_file(piece, f, opts):
                continue
            for b in iter_piece(piece, f, opts.max_batch_size):
                if isinstance(b, Corrupt):
                    yield b
                    continue
                crc_valid = None
                if opts.verify_crc:
                    bad = _valid(b)
                    if bad is not None:
                        yield Corrupt(piece, b.position, bad)
                        continue
                    crc_valid = True
                try:
                    if b.last_offset < lo_o:
                        continue
                    if b.magic >= 2 and b.base_offset >= hi_o:
                        break
                    row = _batch_row(piece, b, crc_valid)
                    if batch_filters and not keeps(batch_filters, {CORRUPT_COLUMN: None, **dict(zip(names, row, strict=True))}):
                        continue
                    rows.append(row)
                except KafkaLogError as e:
                    yield Corrupt(piece, e.position if e.position is not None else b.position, e.reason)
                    continue
                if len(rows) >= ROWS_PER_CHUNK:
                    yield _rows_to_arrow(rows, BATCH_COLUMNS)
                    rows = []
                del b
    if rows:
        yield _rows_to_arrow(rows, BATCH_COLUMNS)


# ----------------------------------------------------------------------------------- corrupt rows
def corrupt_rows(items: list[Corrupt], columns) -> pa.RecordBatch:
    schema = arrow_schema(columns, corrupt=True)
    n = len(items)
    known: dict[str, list[object]] = {
        "topic": [c.piece.topic for c in items],
        "partition": [c.piece.partition for c in items],
        "segment": [c.piece.name for c in items],
        "position": [c.position for c in items],
        CORRUPT_COLUMN: [c.reason for c in items],
    }
    arrays = [pa.array(known[f.name], f.type) if f.name in known else pa.nulls(n, f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _corrupt_values(c: Corrupt) -> dict:
    return {"topic": c.piece.topic, "partition": c.piece.partition, "segment": c.piece.name,
            "position": c.position, CORRUPT_COLUMN: c.reason}


def with_corrupt_column(rb: pa.RecordBatch) -> pa.RecordBatch:
    return rb.append_column(pa.field(CORRUPT_COLUMN, pa.string()), pa.nulls(rb.num_rows, pa.string()))


def scan(pieces: list[Piece], opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Arrow batches for ``pieces`` under ``opts`` (the whole read path of one Spark input partition):
    failfast raises the first corruption; permissive yields it as a ``_corrupt`` row."""
    columns = BATCH_COLUMNS if opts.batch_level else RECORD_COLUMNS
    source = scan_batches(pieces, opts) if opts.batch_level else scan_records(pieces, opts)
    for item in source:
        if isinstance(item, Corrupt):
            if not opts.permissive:
                raise item.error()
            if opts.filters and not keeps(opts.filters, _corrupt_values(item)):
                continue  # a pushed filter drops it, as Spark would (its data columns are null)
            yield corrupt_rows([item], columns)
        elif opts.permissive:
            yield with_corrupt_column(item)
        else:
            yield item


