"""Message format v2 record batches (spec 10-records §3, §4).

A :class:`RecordBatch` is a zero-copy view over the bytes of one batch (a ``memoryview`` into a file's mmap or
any buffer). Header fields are unpacked lazily with one precompiled ``struct``; records are decoded only when
:meth:`RecordBatch.records` (or :meth:`RecordBatch.iter_record_tuples`) is called, so a CRC-only scan never
touches them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from ..codec.compression import DEFAULT_DECOMPRESS_LIMIT, codec_name, decompress
from ..codec.crc import crc32c
from ..codec.varint import read_varint, read_varlong
from ..errors import CompressionError, CorruptRecordError
from .record import Record

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = 61  # DefaultRecordBatch.RECORD_BATCH_OVERHEAD
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


def increment_sequence(sequence: int, increment: int) -> int:
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


class RecordBatch:
    """One v2 record batch. ``position`` is where it starts in the file (or buffer) it was read from."""

    __slots__ = ("buf", "position", "size", "path", "_h", "decompress_limit")
    magic = 2

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
        if self.size < HEADER_SIZE:
            return False
        return self.crc == crc32c(self.buf[21:])

    def ensure_valid(self) -> None:
        if self.size < HEADER_SIZE:
            raise CorruptRecordError(
                f"record batch is smaller than the minimum allowed ({self.size} < {HEADER_SIZE})",
                self.path, self.position)
        stored = self.crc
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
        payload = self.buf[HEADER_SIZE:]
        codec = self.codec
        if codec == 0:
            return payload
        if codec > 4:
            raise CorruptRecordError(f"unknown compression type id {codec}", self.path, self.position + 22)
        try:
            return decompress(codec, payload, magic=2, limit=self.decompress_limit)
        except CompressionError as e:
            raise e.at(self.path, self.position + HEADER_SIZE) from None

    def iter_record_tuples(self) -> Iterator[tuple]:
        """Yield ``(offset, timestamp, key, value, headers)`` per record: the fast path (no Record objects).

        ``headers`` is a tuple of ``(key: str, value: bytes | None)``.
        """
        count = self.records_count
        if count < 0:
            raise CorruptRecordError(f"invalid record count {count}", self.path, self.position + 57)
        if count == 0:
            return iter(())
        return _decode(self, count, tuples=True)

    def records(self) -> list[Record]:
        """Decode every record (deep iteration), with Kafka's checks; raises CorruptRecordError."""
        count = self.records_count
        if count < 0:
            raise CorruptRecordError(f"invalid record count {count}", self.path, self.position + 57)
        if count == 0:
            return []
        return list(_decode(self, count, tuples=False))

    def __iter__(self):
        return iter(self.records())

    def __repr__(self) -> str:
        return (f"RecordBatch(baseOffset={self.base_offset}, lastOffset={self.last_offset}, "
                f"position={self.position}, size={self.size}, codec={self.codec_name})")


def _decode(batch: RecordBatch, count: int, tuples: bool) -> Iterator:
    data = batch.decompressed_payload()
    compressed = batch.codec != 0
    # position of data[0] in the file, for errors (inside a compressed payload: the payload start)
    pos_base = batch.position + HEADER_SIZE
    h = batch._header()
    base_offset = h[0]
    base_ts = h[7]
    log_append = bool(h[5] & TIMESTAMP_TYPE_MASK)
    max_ts = h[8]
    base_seq = h[11]
    path = batch.path
    end = len(data)
    p = 0
    mv = memoryview(data) if not isinstance(data, memoryview) else data

    def corrupt(msg: str, at: int) -> CorruptRecordError:
        where = pos_base if compressed else pos_base + at
        if compressed:
            msg = f"{msg} (at byte {at} of the decompressed records)"
        return CorruptRecordError(msg, path, where)

    for _ in range(count):
        start = p
        if p >= end:
            raise corrupt("Incorrect declared batch size, premature EOF reached", p)
        # length (varint)
        b = data[p]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            try:
                length, p = read_varint(data, p, end)
            except CorruptRecordError as e:
                raise corrupt(f"Found invalid record structure: {e.reason}", p) from None
        rec_end = p + length
        if length < 0 or rec_end > end:
            raise corrupt(
                f"Incorrect declared batch size, premature EOF reached (record length {length}, "
                f"{end - p} bytes remain)", start)
        try:
            attributes = data[p]
            p += 1
            b = data[p]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                ts_delta, p = read_varlong(data, p, rec_end)
            b = data[p]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                off_delta, p = read_varint(data, p, rec_end)
            b = data[p]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                klen, p = read_varint(data, p, rec_end)
            if klen < 0:
                key = None
            else:
                if p + klen > rec_end:
                    raise corrupt("Found invalid record structure: key runs past the record", p)
                key = bytes(mv[p:p + klen])
                p += klen
            b = data[p]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                vlen, p = read_varint(data, p, rec_end)
            if vlen < 0:
                value = None
            else:
                if p + vlen > rec_end:
                    raise corrupt("Found invalid record structure: value runs past the record", p)
                value = bytes(mv[p:p + vlen])
                p += vlen
            b = data[p]
            if b < 0x80:
                hcount = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                hcount, p = read_varint(data, p, rec_end)
            if hcount < 0 or hcount > rec_end - p:
                raise corrupt(f"Found invalid record structure: invalid header count {hcount}", p)
            if hcount:
                headers = []
                for _h in range(hcount):
                    hk, p = read_varint(data, p, rec_end)
                    if hk < 0 or p + hk > rec_end:
                        raise corrupt(f"Found invalid record structure: invalid header key length {hk}", p)
                    hkey = bytes(mv[p:p + hk]).decode("utf-8", "surrogateescape")
                    p += hk
                    hv, p = read_varint(data, p, rec_end)
                    if hv < 0:
                        hval = None
                    else:
                        if p + hv > rec_end:
                            raise corrupt("Found invalid record structure: header value runs past the record", p)
                        hval = bytes(mv[p:p + hv])
                        p += hv
                    headers.append((hkey, hval))
                headers = tuple(headers)
            else:
                headers = ()
        except IndexError:
            raise corrupt("Found invalid record structure: record ends inside a field", p) from None
        except CorruptRecordError as e:
            if e.path is None:
                raise corrupt(f"Found invalid record structure: {e.reason}", p) from None
            raise
        if p != rec_end:
            raise corrupt(
                f"Invalid record size: expected to read {length} bytes in record payload, but instead read "
                f"{p - (rec_end - length)}", start)
        offset = base_offset + off_delta
        timestamp = max_ts if log_append else base_ts + ts_delta
        if tuples:
            yield (offset, timestamp, key, value, headers)
        else:
            seq = -1 if base_seq < 0 else increment_sequence(base_seq, off_delta)
            yield Record(offset, timestamp, key, value, list(headers), attributes, ts_delta, off_delta, seq, 2)
    if p != end:
        raise corrupt("Incorrect declared batch size, records still remaining in file", p)
