"""Scanning planned pieces into Arrow record batches (runs on Spark workers; usable without Spark).

Per batch, not per record: the batch header is read once, the CRC checked once, records decoded by the records
layer's fast path (``iter_record_tuples``) and appended to column lists; batch-level columns are expanded with
one ``take``. Arrow batches are flushed every ``ROWS_PER_CHUNK`` records or ``BYTES_PER_CHUNK`` bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate, chain

import pyarrow as pa
import pyarrow.compute as pc

from kafkalog.storage.errors import CorruptIndexError, CorruptRecordError, KafkaLogError
from kafkalog.storage.records import PARTIAL_BATCH, LogScanner, RecordBatch

from .fs import REMOTE_WINDOW, SegmentFile
from .options import ReadOptions
from .plan import Piece
from .schema import BATCH_COLUMNS, CORRUPT_COLUMN, HEADERS_TYPE, RECORD_COLUMNS, arrow_schema

ROWS_PER_CHUNK = 65536
BYTES_PER_CHUNK = 32 * 1024 * 1024
INT31 = 1 << 31


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
def iter_piece(piece: Piece, f: SegmentFile, max_batch_size: int) -> Iterator[RecordBatch | Corrupt]:
    """The entries of ``piece`` (batches, or one :class:`Corrupt` after which the piece ends)."""
    pos = piece.start
    end = piece.end
    while pos < end:
        want = end - pos if f.is_mapped else min(end - pos, REMOTE_WINDOW)
        if f.is_mapped:
            buf, base, lo, hi = f.view(0, f.size), 0, pos, end
        else:
            buf, base, lo, hi = f.view(pos, want), pos, 0, want
        scanner = LogScanner(buf, lo, hi, path=piece.name, position_base=base, max_batch_size=max_batch_size)
        try:
            yield from scanner
        except CorruptRecordError as e:
            yield Corrupt(piece, e.position if e.position is not None else scanner.stop_position, e.reason)
            return
        new_pos = scanner.stop_position
        if scanner.stop_reason is None and new_pos >= base + hi:
            pos = new_pos
            continue
        if not f.is_mapped and base + hi < end:
            # window ended inside a batch: next window starts at that batch (and holds all of it)
            head = f.view(new_pos, 12)
            if len(head) == 12:
                size = int.from_bytes(head[8:12], "big", signed=True)
                if size >= 14 and 12 + size > REMOTE_WINDOW:
                    if size > max_batch_size:
                        yield Corrupt(piece, new_pos, f"Record size {size} exceeds the largest allowable message "
                                                      f"size ({max_batch_size})")
                        return
                    big = f.view(new_pos, 12 + size)
                    yield from LogScanner(big, 0, len(big), path=piece.name, position_base=new_pos,
                                          max_batch_size=max_batch_size)
                    pos = new_pos + 12 + size
                    continue
            if new_pos > pos:
                pos = new_pos
                continue
        left = piece.file_size - new_pos
        if end < piece.file_size:
            raise CorruptIndexError(
                f"split boundary at byte {end} is not a batch boundary (the entry at byte {new_pos} runs past it): "
                f"the offset index does not match the log", piece.name, new_pos)
        what = "a partial batch" if scanner.stop_reason == PARTIAL_BATCH else "a torn tail"
        yield Corrupt(piece, new_pos, f"{left} bytes at the end of the segment are {what}, not a complete batch")
        return


def _valid(b) -> str | None:
    try:
        if b.is_valid():
            return None
        return (f"record batch is corrupt (stored crc = 0x{b.crc:08x}, computed crc = 0x{b.compute_crc():08x})"
                if b.magic >= 2 else f"message is corrupt (stored crc = {b.crc}, computed crc = {b.compute_crc()})")
    except KafkaLogError as e:
        return e.reason


# ----------------------------------------------------------------------------------- record level
class _RecordChunk:
    def __init__(self):
        # per batch
        self.b_topic: list = []
        self.b_part: list = []
        self.b_tstype: list = []
        self.b_epoch: list = []
        self.b_pid: list = []
        self.b_pepoch: list = []
        self.b_txn: list = []
        self.b_ctrl: list = []
        self.b_magic: list = []
        self.b_codec: list = []
        self.b_seg: list = []
        self.b_pos: list = []
        # per record
        self.take: list[int] = []
        self.offsets: list = []
        self.timestamps: list = []
        self.keys: list = []
        self.values: list = []
        self.headers: list = []
        self.any_headers = False
        self.sequences: list = []
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, piece: Piece, b, recs: list) -> None:
        n = len(recs)
        bi = len(self.b_topic)
        self.b_topic.append(piece.topic)
        self.b_part.append(piece.partition)
        self.b_tstype.append(b.timestamp_type)
        self.b_epoch.append(b.partition_leader_epoch)
        self.b_pid.append(b.producer_id)
        self.b_pepoch.append(b.producer_epoch)
        self.b_txn.append(b.is_transactional)
        self.b_ctrl.append(b.is_control)
        self.b_magic.append(b.magic)
        self.b_codec.append(b.codec_name)
        self.b_seg.append(piece.name)
        self.b_pos.append(b.position)
        self.take.extend([bi] * n)
        offs, tss, ks, vs, hs = zip(*recs, strict=True)
        self.offsets.extend(offs)
        self.timestamps.extend(tss)
        self.keys.extend(ks)
        self.values.extend(vs)
        self.headers.extend(hs)
        if not self.any_headers and any(hs):
            self.any_headers = True
        bs = b.base_sequence
        if bs < 0:
            self.sequences.extend([-1] * n)
        else:
            base = b.base_offset
            self.sequences.extend([(bs + o - base) % INT31 for o in offs])
        self.nbytes += b.size

    def to_arrow(self) -> pa.RecordBatch:
        take = pa.array(self.take, pa.int32())

        def expand(values, typ):
            return pc.take(pa.array(values, typ), take)

        n = len(self.offsets)
        if self.any_headers:
            counts = [0, *accumulate(map(len, self.headers))]
            flat = list(chain.from_iterable(self.headers))
            flat_k = [h[0] for h in flat]
            flat_v = [h[1] for h in flat]
            items = pa.StructArray.from_arrays([pa.array(flat_k, pa.string()), pa.array(flat_v, pa.binary())],
                                               names=["key", "value"])
            headers = pa.ListArray.from_arrays(pa.array(counts, pa.int32()), items, type=HEADERS_TYPE())
        else:
            empty = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())],
                                               names=["key", "value"])
            headers = pa.ListArray.from_arrays(pa.array([0] * (n + 1), pa.int32()), empty, type=HEADERS_TYPE())
        cols = {
            "topic": expand(self.b_topic, pa.string()),
            "partition": expand(self.b_part, pa.int32()),
            "offset": pa.array(self.offsets, pa.int64()),
            "timestamp": pa.array(self.timestamps, pa.int64()),
            "timestampType": expand(self.b_tstype, pa.int32()),
            "key": pa.array(self.keys, pa.binary()),
            "value": pa.array(self.values, pa.binary()),
            "headers": headers,
            "leaderEpoch": expand(self.b_epoch, pa.int32()),
            "producerId": expand(self.b_pid, pa.int64()),
            "producerEpoch": expand(self.b_pepoch, pa.int32()),
            "sequence": pa.array(self.sequences, pa.int32()),
            "isTransactional": expand(self.b_txn, pa.bool_()),
            "isControl": expand(self.b_ctrl, pa.bool_()),
            "magic": expand(self.b_magic, pa.int32()),
            "codec": expand(self.b_codec, pa.string()),
            "segment": expand(self.b_seg, pa.string()),
            "position": expand(self.b_pos, pa.int64()),
        }
        schema = arrow_schema(RECORD_COLUMNS)
        return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)


def _record_filter(opts: ReadOptions):
    so, eo, st, et = opts.start_offset, opts.end_offset, opts.start_timestamp, opts.end_timestamp
    lo_o = so if so is not None else -(1 << 63)
    hi_o = eo if eo is not None else 1 << 63
    lo_t = st if st is not None else -(1 << 63)
    hi_t = et if et is not None else 1 << 63
    return lo_o, hi_o, lo_t, hi_t


def scan_records(pieces: list[Piece], opts: ReadOptions) -> Iterator[pa.RecordBatch | Corrupt]:
    """Record-level Arrow batches (schema ``RECORD_COLUMNS``) and :class:`Corrupt` markers, in log order."""
    filtering = opts.has_record_filter
    lo_o, hi_o, lo_t, hi_t = _record_filter(opts)
    chunk = _RecordChunk()
    for piece in pieces:
        with SegmentFile(piece.spec, piece.path) as f:
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
                    if filtering:
                        if b.last_offset < lo_o:
                            continue
                        if magic >= 2:
                            if b.base_offset >= hi_o:
                                break
                            if b.max_timestamp < lo_t:
                                continue
                    recs = list(b.iter_record_tuples())
                except KafkaLogError as e:
                    yield Corrupt(piece, e.position if e.position is not None else b.position, e.reason)
                    continue
                if filtering:
                    recs = [r for r in recs if lo_o <= r[0] < hi_o and lo_t <= r[1] < hi_t]
                if not recs:
                    continue
                chunk.add(piece, b, recs)
                if len(chunk) >= ROWS_PER_CHUNK or chunk.nbytes >= BYTES_PER_CHUNK:
                    yield chunk.to_arrow()
                    chunk = _RecordChunk()
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
    cols = list(zip(*rows, strict=True)) if rows else [[] for _ in columns]
    return pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)],
                                      schema=schema)


def scan_batches(pieces: list[Piece], opts: ReadOptions) -> Iterator[pa.RecordBatch | Corrupt]:
    """Batch-level Arrow batches (schema ``BATCH_COLUMNS``), no record decoding (except the base offset of
    v0/v1 compressed wrappers, which Kafka also reads from the first inner message)."""
    lo_o, hi_o, _, _ = _record_filter(opts)
    rows: list[tuple] = []
    for piece in pieces:
        with SegmentFile(piece.spec, piece.path) as f:
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
                    rows.append(_batch_row(piece, b, crc_valid))
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
    known = {
        "topic": [c.piece.topic for c in items],
        "partition": [c.piece.partition for c in items],
        "segment": [c.piece.name for c in items],
        "position": [c.position for c in items],
        CORRUPT_COLUMN: [c.reason for c in items],
    }
    arrays = [pa.array(known[f.name], f.type) if f.name in known else pa.nulls(n, f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


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
            yield corrupt_rows([item], columns)
        elif opts.permissive:
            yield with_corrupt_column(item)
        else:
            yield item


