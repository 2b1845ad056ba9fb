"""Message format v2 record batches (docs/formats.md#record-batches-v2, docs/formats.md#records-v2).

A :class:`RecordBatch` is a zero-copy view over the bytes of one batch (a ``memoryview`` into a file's mmap or
any buffer). Header fields are unpacked lazily with one precompiled ``struct``; records are decoded only when
:meth:`RecordBatch.records` (or :meth:`RecordBatch.iter_record_tuples`) is called, so a CRC-only scan never
touches them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from crc32c import crc32c as _crc32c

from kafkalog.storage.codec.compression import DEFAULT_DECOMPRESS_LIMIT, codec_name, decompress
from kafkalog.storage.codec.crc import crc32c
from kafkalog.storage.codec.native import active
from kafkalog.storage.codec.varint import read_varint, read_varlong
from kafkalog.storage.errors import CompressionError, CorruptRecordError
from kafkalog.storage.records.record import PyRecord, Record, record_class
from kafkalog.storage.records.record_grammar import Slow, read_headers, read_record

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = 61  # DefaultRecordBatch.RECORD_BATCH_OVERHEAD
RECORD_CHUNK = 65536  # records decoded at a time by record_chunks (memory bounded by this, not the count)
assert HEADER.size == HEADER_SIZE

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_TIMESTAMP = -1
CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE = 0, 1, -1
TIMESTAMP_TYPE_NAMES = {CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime", NO_TIMESTAMP_TYPE: "NoTimestampType"}
INT32_MAX = 2147483647


MAGIC_OFFSET = 16  # Records.MAGIC_OFFSET: where every log entry (a v2 batch, a v0/v1 message) holds its magic


def magic_at(buf, position: int = 0) -> int:
    """The magic byte of the log entry at ``position``, signed as Kafka reads it (a byte above 127 is negative)."""
    m = buf[position + MAGIC_OFFSET]
    return m - 256 if m > 127 else m


def increment_sequence(sequence: int, increment: int) -> int:
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


_U32 = struct.Struct(">I")
_CRC_AT = _U32.unpack_from


class RecordBatch:
    """One v2 record batch. ``position`` is where it starts in the file (or buffer) it was read from.

    ``magic`` is the stored magic byte (2, or a higher value that Kafka also parses as v2 and that then fails
    validation).
    """

    __slots__ = ("buf", "position", "size", "path", "_h", "decompress_limit")

    def __init__(self, buf: memoryview, position: int = 0, path: str | None = None,
                 decompress_limit: int = DEFAULT_DECOMPRESS_LIMIT):
        self.buf = buf  # exactly the batch's bytes
        self.position = position
        self.size = len(buf)
        self.path = path
        self._h: tuple | None = None
        self.decompress_limit = decompress_limit

    # ----------------------------------------------------------------- header
    def _header(self) -> tuple:
        h = self._h
        if h is None:
            if self.size < HEADER_SIZE:
                raise CorruptRecordError(
                    f"record batch of {self.size} bytes is smaller than the 61-byte v2 header",
                    self.path, self.position)
            h = self._h = HEADER.unpack_from(self.buf, 0)
        return h

    @property
    def magic(self) -> int:
        return magic_at(self.buf)

    @property
    def base_offset(self) -> int:
        return self._header()[0]

    @property
    def batch_length(self) -> int:
        return self._header()[1]

    @property
    def partition_leader_epoch(self) -> int:
        return self._header()[2]

    @property
    def crc(self) -> int:
        return self._header()[4]

    @property
    def attributes(self) -> int:
        return self._header()[5] & 0xFF

    @property
    def last_offset_delta(self) -> int:
        return self._header()[6]

    @property
    def base_timestamp(self) -> int:
        return self._header()[7]

    @property
    def max_timestamp(self) -> int:
        return self._header()[8]

    @property
    def producer_id(self) -> int:
        return self._header()[9]

    @property
    def producer_epoch(self) -> int:
        return self._header()[10]

    @property
    def base_sequence(self) -> int:
        return self._header()[11]

    @property
    def records_count(self) -> int:
        return self._header()[12]

    @property
    def last_offset(self) -> int:
        h = self._header()
        return h[0] + h[6]

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def codec_name(self) -> str:
        return codec_name(self.codec)

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        """The KIP-534 delete horizon, or -1 when the batch has none."""
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def last_sequence(self) -> int:
        bs = self.base_sequence
        return -1 if bs == -1 else increment_sequence(bs, self.last_offset_delta)

    @property
    def is_compressed(self) -> bool:
        return self.codec != 0

    # -------------------------------------------------------------- validity
    def compute_crc(self) -> int:
        return crc32c(self.buf[21:])

    def is_valid(self) -> bool:
        """Kafka's ``isValid``: at least 61 bytes and the stored CRC32C matches (no header tuple is built)."""
        buf = self.buf
        return self.size >= HEADER_SIZE and _CRC_AT(buf, 17)[0] == _crc32c(buf[21:])

    def ensure_valid(self) -> None:
        if self.size < HEADER_SIZE:
            raise CorruptRecordError(
                f"record batch is smaller than the minimum allowed ({self.size} < {HEADER_SIZE})",
                self.path, self.position)
        stored = _CRC_AT(self.buf, 17)[0]
        computed = crc32c(self.buf[21:])
        if stored != computed:
            raise CorruptRecordError(
                f"record batch is corrupt (stored crc = 0x{stored:08x}, computed crc = 0x{computed:08x})",
                self.path, self.position)

    # --------------------------------------------------------------- records
    def records_payload(self) -> memoryview:
        """The records region as stored (compressed or not)."""
        return self.buf[HEADER_SIZE:]

    def decompressed_payload(self):
        """The records region uncompressed (a memoryview for uncompressed batches, else bytes)."""
        payload = self.buf[HEADER_SIZE:]
        codec = self.attributes & CODEC_MASK
        if codec == 0:
            return payload
        if codec > 4:
            raise CorruptRecordError(f"unknown compression type id {codec}", self.path, self.position + 22)
        try:
            return decompress(codec, payload, magic=2, limit=self.decompress_limit)
        except CompressionError as e:
            raise e.at(self.path, self.position + HEADER_SIZE) from None

    def _count(self) -> int:
        count = self._header()[12]
        if count < 0:
            raise CorruptRecordError(f"invalid record count {count}", self.path, self.position + 57)
        return count

    def iter_record_tuples(self) -> Iterator[tuple]:
        """Yield ``(offset, timestamp, key, value, headers)`` per record: the fast path (no Record objects).

        ``headers`` is a tuple of ``(key: str, value: bytes | None)``. The whole batch is decoded (and checked)
        before the first tuple is yielded.
        """
        count = self._count()
        if count == 0:
            return iter(())
        return iter(_decode(self, count, False))

    def record_tuples(self) -> list[tuple]:
        """Like :meth:`iter_record_tuples`, as a list."""
        count = self._count()
        return _decode(self, count, False) if count else []

    def records(self) -> list[Record]:
        """Decode every record (deep iteration), with Kafka's checks; raises CorruptRecordError."""
        count = self._count()
        return _decode(self, count, True) if count else []

    def record_chunks(self, full: bool = True, chunk: int = RECORD_CHUNK) -> Iterator[list]:
        """The records (``Record`` objects, or with ``full=False`` tuples) in lists of at most ``chunk``:
        deep iteration whose memory is bounded by the chunk, whatever count the batch declares."""
        count = self._count()
        return _iter_chunks(self, count, full, chunk) if count else iter(())

    def __iter__(self):
        return iter(self.records())

    def __repr__(self) -> str:
        return (f"RecordBatch(baseOffset={self.base_offset}, lastOffset={self.last_offset}, "
                f"position={self.position}, size={self.size}, codec={self.codec_name})")


def _decode(batch: RecordBatch, count: int, full: bool) -> list:
    h = batch._header()
    append_ts = h[8] if h[5] & TIMESTAMP_TYPE_MASK else None
    codec = h[5] & CODEC_MASK
    backend = active()
    core = backend.records
    nc = backend.codecs if 0 < codec <= 4 else None
    if nc is not None:  # decompressed and decoded natively (codec.rs), else as below
        got = nc.decode_compressed(batch.buf[HEADER_SIZE:], codec, 2, batch.decompress_limit, count, h[0],
                                        h[7], append_ts, h[11], full)
        if got is not None:
            return got[0]
    data = batch.decompressed_payload()
    if core is not None:  # reads the buffer in place
        got = core.decode_records(data, count, h[0], h[7], append_ts, h[11], full)
        if got is not None:
            return got[0]
    if not isinstance(data, bytes):
        data = bytes(data)  # one copy per batch: bytes index/slice are the fastest primitives
    if core is None:
        try:
            return _decode_fast(data, count, h[0], h[7], append_ts, h[11], full)[0]
        except (Slow, IndexError, CorruptRecordError):
            pass
    return _decode_careful(batch, data, count, full)[0]


def _iter_chunks(batch: RecordBatch, count: int, full: bool, chunk: int) -> Iterator[list]:
    """The records of a v2 batch ``chunk`` at a time: memory bounded by the chunk, not by the record count
    (a valid 4 MB batch can declare millions of tiny records). Each chunk is decoded fast, or carefully (with a
    precise error) when the fast decoder meets something unusual."""
    h = batch._header()
    core = active().records
    data = batch.decompressed_payload()
    if core is None and not isinstance(data, bytes):
        data = bytes(data)  # the native decoder reads the buffer in place; the Python one wants bytes
    append_ts = h[8] if h[5] & TIMESTAMP_TYPE_MASK else None
    p = i = 0
    while i < count:
        n = min(chunk, count - i)
        last = i + n == count
        got = None
        if core is not None:
            got = core.decode_records(data, n, h[0], h[7], append_ts, h[11], full, p, last)
        else:
            try:
                got = _decode_fast(data, n, h[0], h[7], append_ts, h[11], full, p, last)
            except (Slow, IndexError, CorruptRecordError):
                pass
        if got is None:
            if not isinstance(data, bytes):
                data = bytes(data)
            got = _decode_careful(batch, data, count, full, p, i, n)
        out, q = got
        yield out
        p, i = q, i + n


def _decode_fast(data: bytes, count: int, base_offset: int, base_ts: int, append_ts: int | None,
                 base_seq: int, full: bool, p: int = 0, last: bool = True) -> tuple[list, int]:
    """The hot loop over :func:`~kafkalog.storage.records.record_grammar.read_record`: one slice per key/value, no
    per-field bounds checks -- a record must end exactly at its declared length, which catches every overrun (as
    Kafka's ``DefaultRecord.readFrom`` does). Raises ``Slow``/``IndexError`` on anything unusual. Decodes
    ``count`` records from byte ``p``; with ``last`` they must end the data. Returns the records and the next
    position."""
    out: list = []
    append = out.append
    end = len(data)
    for _ in range(count):
        body, _tail, rec_end, ts_delta, off_delta, key, vs, ve, p = read_record(data, p, end)
        value = None if ve < 0 else data[vs:ve]
        if data[p] == 0:
            p += 1
            headers: tuple = ()
        else:
            headers, p = read_headers(data, p, rec_end)
        if p != rec_end:
            raise Slow
        if full:
            append(PyRecord(base_offset + off_delta, append_ts if append_ts is not None else base_ts + ts_delta,
                          key, value, list(headers), data[body], ts_delta, off_delta,
                          -1 if base_seq < 0 else increment_sequence(base_seq, off_delta), 2))
        else:
            append((base_offset + off_delta, append_ts if append_ts is not None else base_ts + ts_delta,
                    key, value, headers))
    if last and p != end:
        raise Slow
    return out, p


def _checked_nullable_bytes(data: bytes, p: int, n: int, rec_end: int, what: str) -> tuple[bytes | None, int]:
    """A key or value of length ``n`` (-1: null) at ``p`` for the careful decoder: running past the record is an
    error."""
    if n < 0:
        return None, p
    if n > rec_end - p:
        raise CorruptRecordError(f"{what} of {n} bytes runs past the record ({rec_end - p} left)")
    return data[p:p + n], p + n


def _decode_careful(batch: RecordBatch, data: bytes, count: int, full: bool, p: int = 0, first: int = 0,
                    n: int | None = None) -> tuple[list, int]:
    """Field-by-field decoding with a precise error (byte position and reason) for every malformation:
    records ``first`` .. ``first + n - 1`` of the batch's ``count``, from byte ``p``. Returns the records and
    the next position."""
    h = batch._header()
    base_offset, base_ts, max_ts, base_seq = h[0], h[7], h[8], h[11]
    log_append = bool(h[5] & TIMESTAMP_TYPE_MASK)
    compressed = bool(h[5] & CODEC_MASK)
    pos_base = batch.position + HEADER_SIZE
    path = batch.path
    end = len(data)
    out: list = []
    index = first
    stop = count if n is None else first + n
    record = record_class()

    def corrupt(msg: str, at: int) -> CorruptRecordError:
        if compressed:
            return CorruptRecordError(f"record {index}: {msg} (at byte {at} of the decompressed records)",
                                      path, pos_base)
        return CorruptRecordError(f"record {index}: {msg}", path, pos_base + at)

    for index in range(first, stop):  # noqa: B007 (read by corrupt())
        start = p
        if p >= end:
            raise corrupt(f"Incorrect declared batch size, premature EOF reached ({count} records declared)", p)
        try:
            length, p = read_varint(data, p, end)
        except CorruptRecordError as e:
            raise corrupt(f"Found invalid record structure: record length: {e.reason}", p) from None
        if length < 0:
            raise corrupt(f"Found invalid record structure: negative record length {length}", start)
        rec_end = p + length
        if rec_end > end:
            raise corrupt(f"Invalid record size: expected {length} bytes in record payload, but only "
                          f"{end - p} bytes remain", start)
        field = "attributes"
        try:
            if p >= rec_end:
                raise CorruptRecordError("record ends before its attributes")
            attributes = data[p]
            p += 1
            field = "timestampDelta"
            ts_delta, p = read_varlong(data, p, rec_end)
            field = "offsetDelta"
            off_delta, p = read_varint(data, p, rec_end)
            field = "key length"
            klen, p = read_varint(data, p, rec_end)
            key, p = _checked_nullable_bytes(data, p, klen, rec_end, "key")
            field = "value length"
            vlen, p = read_varint(data, p, rec_end)
            value, p = _checked_nullable_bytes(data, p, vlen, rec_end, "value")
            field = "header count"
            hcount, p = read_varint(data, p, rec_end)
            if hcount < 0 or hcount > rec_end - p:
                raise CorruptRecordError(f"invalid number of record headers {hcount}")
            headers = []
            for i in range(hcount):
                field = f"header {i} key"
                hk, p = read_varint(data, p, rec_end)
                if hk < 0:
                    raise CorruptRecordError(f"invalid negative header key size {hk}")
                if hk > rec_end - p:
                    raise CorruptRecordError(f"header key of {hk} bytes runs past the record")
                hkey = data[p:p + hk].decode("utf-8", "surrogateescape")
                p += hk
                field = f"header {i} value"
                hv, p = read_varint(data, p, rec_end)
                if hv < 0:
                    hval = None
                else:
                    if hv > rec_end - p:
                        raise CorruptRecordError(f"header value of {hv} bytes runs past the record")
                    hval = data[p:p + hv]
                    p += hv
                headers.append((hkey, hval))
        except CorruptRecordError as e:
            raise corrupt(f"Found invalid record structure: {field}: {e.reason}", p) from None
        if p != rec_end:
            raise corrupt(f"Invalid record size: expected to read {length} bytes in record payload, but "
                          f"instead read {p - (rec_end - length)}", start)
        timestamp = max_ts if log_append else base_ts + ts_delta
        offset = base_offset + off_delta
        if full:
            seq = -1 if base_seq < 0 else increment_sequence(base_seq, off_delta)
            out.append(record(offset, timestamp, key, value, headers, attributes, ts_delta, off_delta, seq, 2))
        else:
            out.append((offset, timestamp, key, value, tuple(headers)))
    if stop == count and p != end:
        index = count
        raise corrupt(f"Incorrect declared batch size, records still remaining in file ({end - p} bytes after "
                      f"{count} records)", p)
    return out, p
