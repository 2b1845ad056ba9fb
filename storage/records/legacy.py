"""Message formats v0 and v1 (docs/formats.md#message-sets-v0-and-v1): plain messages and compressed wrapper messages.

A :class:`LegacyBatch` is one shallow log entry: a plain message (a batch of exactly itself) or a compressed
wrapper whose value holds inner entries. It exposes the same attributes as :class:`RecordBatch`.
"""

from __future__ import annotations

import struct

from kafkalog.storage.codec.compression import DEFAULT_DECOMPRESS_LIMIT, codec_name, decompress
from kafkalog.storage.codec.crc import crc32
from kafkalog.storage.codec.native import active
from kafkalog.storage.errors import CompressionError, CorruptRecordError
from kafkalog.storage.records.batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    NO_TIMESTAMP_TYPE,
    magic_at,
)
from kafkalog.storage.records.record import Record, record_class

ENTRY_HEADER = struct.Struct(">qi")  # offset, size
MSG_HEAD = struct.Struct(">Ibb")  # crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
LOG_OVERHEAD = 12
RECORD_OVERHEAD_V0 = 14
RECORD_OVERHEAD_V1 = 22
LEGACY_CODEC_MASK = 0x07
LEGACY_TIMESTAMP_TYPE_MASK = 0x08


class LegacyMessage:
    """The fields of one v0/v1 message (the bytes after the 12-byte offset/size header)."""

    __slots__ = ("offset", "crc", "magic", "attributes", "timestamp", "key", "value", "raw")

    def __init__(self, offset, crc, magic, attributes, timestamp, key, value, raw=None):
        self.offset = offset
        self.crc = crc
        self.magic = magic
        self.attributes = attributes
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.raw = raw  # the CRC-covered bytes (magic .. end of value)

    def is_valid(self) -> bool:
        """The message's own CRC32 check (``LegacyRecord.isValid``)."""
        return self.raw is not None and self.crc == crc32(self.raw)


def parse_message(buf, pos: int, size: int, offset: int, path: str | None, file_pos: int,
                  copy: bool = True) -> LegacyMessage:
    """Parse the message occupying ``buf[pos:pos+size]`` (after the entry header). ``file_pos`` is the entry's
    position for error messages."""
    end = pos + size
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(f"message size {size} is smaller than the minimum message overhead (14)",
                                 path, file_pos)
    crc, magic, attributes = MSG_HEAD.unpack_from(buf, pos)
    p = pos + 6
    if magic == 1:
        if size < RECORD_OVERHEAD_V1:
            raise CorruptRecordError(f"v1 message size {size} is smaller than the v1 message overhead (22)",
                                     path, file_pos)
        (timestamp,) = _I64.unpack_from(buf, p)
        p += 8
    elif magic == 0:
        timestamp = NO_TIMESTAMP
    else:
        raise CorruptRecordError(f"invalid magic {magic} for a legacy message", path, file_pos + 16)
    key, p = _read_bytes(buf, p, end, "key", path, file_pos, copy)
    value, p = _read_bytes(buf, p, end, "value", path, file_pos, copy)
    return LegacyMessage(offset, crc, magic, attributes & 0xFF, timestamp, key, value, buf[pos + 4:end])


def _read_bytes(buf, p: int, end: int, what: str, path, file_pos: int, copy: bool):
    if p + 4 > end:
        raise CorruptRecordError(f"message ends inside the {what} length", path, file_pos)
    (n,) = _I32.unpack_from(buf, p)
    p += 4
    if n < 0:
        return None, p
    if n > end - p:
        raise CorruptRecordError(f"message {what} length {n} runs past the message end ({end - p} bytes left)",
                                 path, file_pos)
    data = buf[p:p + n]
    return (bytes(data) if copy else data), p + n


class LegacyBatch:
    """One v0/v1 shallow entry (plain message or compressed wrapper)."""

    __slots__ = ("buf", "position", "size", "path", "_msg", "_inner", "decompress_limit")
    records_count = None
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    last_sequence = -1
    partition_leader_epoch = -1
    is_transactional = False
    is_control = False
    has_delete_horizon = False
    delete_horizon_ms = NO_TIMESTAMP

    def __init__(self, buf: memoryview, position: int = 0, path: str | None = None,
                 decompress_limit: int = DEFAULT_DECOMPRESS_LIMIT):
        self.buf = buf
        self.position = position
        self.size = len(buf)
        self.path = path
        self._msg: LegacyMessage | None = None
        self._inner: list[LegacyMessage] | None = None
        self.decompress_limit = decompress_limit

    @property
    def magic(self) -> int:
        return magic_at(self.buf)

    @property
    def crc(self) -> int:
        return MSG_HEAD.unpack_from(self.buf, 12)[0]

    @property
    def attributes(self) -> int:
        return self.buf[17]

    @property
    def codec(self) -> int:
        return self.buf[17] & LEGACY_CODEC_MASK

    @property
    def codec_name(self) -> str:
        return codec_name(self.codec)

    @property
    def is_compressed(self) -> bool:
        return self.codec != 0

    @property
    def last_offset(self) -> int:
        return ENTRY_HEADER.unpack_from(self.buf, 0)[0]

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.buf[17] & LEGACY_TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def max_timestamp(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP
        return _I64.unpack_from(self.buf, 18)[0]

    def message(self) -> LegacyMessage:
        m = self._msg
        if m is None:
            off, size = ENTRY_HEADER.unpack_from(self.buf, 0)
            m = self._msg = parse_message(self.buf, 12, self.size - 12, off, self.path, self.position)
        return m

    # -------------------------------------------------------------- validity
    def compute_crc(self) -> int:
        return crc32(self.buf[16:])

    def is_valid(self) -> bool:
        return self.size - 12 >= RECORD_OVERHEAD_V0 and self.crc == crc32(self.buf[16:])

    def ensure_valid(self) -> None:
        if self.size - 12 < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(f"message size {self.size - 12} is smaller than the minimum (14)",
                                     self.path, self.position)
        stored, computed = self.crc, crc32(self.buf[16:])
        if stored != computed:
            raise CorruptRecordError(
                f"message is corrupt (stored crc = {stored}, computed crc = {computed})", self.path, self.position)

    # --------------------------------------------------------------- records
    def inner_messages(self) -> list[LegacyMessage]:
        """The messages of this entry with absolute offsets (one for a plain message)."""
        if self._inner is not None:
            return self._inner
        msg = self.message()
        codec = msg.attributes & LEGACY_CODEC_MASK
        if codec == 0:
            self._inner = [msg]
            return self._inner
        if msg.value is None:
            raise CorruptRecordError("compressed wrapper message has a null value", self.path, self.position)
        if codec == 4:
            raise CorruptRecordError("zstd compression is not allowed with message format v0/v1",
                                     self.path, self.position + 17)
        if codec > 4:
            raise CorruptRecordError(f"unknown compression type id {codec}", self.path, self.position + 17)
        try:
            data = decompress(codec, msg.value, magic=msg.magic, limit=self.decompress_limit)
        except CompressionError as e:
            raise e.at(self.path, self.position) from None
        inner: list[LegacyMessage] = []
        p = 0
        end = len(data)
        while end - p >= LOG_OVERHEAD:
            off, size = ENTRY_HEADER.unpack_from(data, p)
            where = f"(inner message {len(inner)} at byte {p} of the decompressed wrapper value)"
            if size < RECORD_OVERHEAD_V0:
                raise CorruptRecordError(
                    f"record size {size} is smaller than the minimum message overhead (14) {where}",
                    self.path, self.position)
            if size > end - p - LOG_OVERHEAD:
                break  # a short read silently ends the inner sequence (DataLogInputStream)
            try:
                m = parse_message(data, p + LOG_OVERHEAD, size, off, self.path, self.position)
            except CorruptRecordError as e:
                e.reason = f"{e.reason} {where}"
                e.position = self.position
                e.args = (e._render(),)
                raise
            if m.attributes & LEGACY_CODEC_MASK:
                raise CorruptRecordError(f"inner messages must not be compressed {where}", self.path,
                                         self.position)
            inner.append(m)
            p += LOG_OVERHEAD + size
        if not inner:
            raise CorruptRecordError("compressed wrapper message has no inner records", self.path, self.position)
        if msg.magic >= 1:
            last_rel = inner[-1].offset
            wrapper = msg.offset
            if wrapper == 0:
                base = 0
            else:
                base = wrapper - last_rel
                if base < 0:
                    raise CorruptRecordError(
                        f"wrapper offset {wrapper} is below its last inner relative offset {last_rel}",
                        self.path, self.position)
            for m in inner:
                m.offset = base + m.offset
        log_append = msg.magic >= 1 and bool(msg.attributes & LEGACY_TIMESTAMP_TYPE_MASK)
        if log_append:
            for m in inner:
                if m.magic >= 1:
                    m.timestamp = msg.timestamp
        self._inner = inner
        return inner

    @property
    def base_offset(self) -> int:
        if self.codec == 0:
            return self.last_offset
        return self.inner_messages()[0].offset

    def _native_records(self, full: bool) -> list | None:
        """The records decoded by the compiled core (``legacy.rs``), or ``None``: no core (or the pure-Python
        reference, ``codec.native.backend("python")``), or bytes the core leaves to :meth:`inner_messages`
        (which then gives the records or raises its error). A wrapper is decompressed natively only when the
        core decompresses (``Backend.codecs``)."""
        backend = active()
        core = backend.records
        if core is None or self._inner is not None or (self.buf[17] & LEGACY_CODEC_MASK and backend.codecs is None):
            return None
        return core.legacy_records(self.buf, self.decompress_limit, full)

    def message_fields(self) -> list[tuple]:
        """``(offset, timestamp, key, value, magic, crc, valid)`` per message (``valid``: its own CRC32 check),
        what ``dump --deep`` shows; by the compiled core when it is on (as :meth:`records`)."""
        backend = active()
        core = backend.records
        if (core is not None and self._inner is None and self.size > 17
                and not (self.buf[17] & LEGACY_CODEC_MASK and backend.codecs is None)):
            got = core.legacy_messages(self.buf, self.decompress_limit)
            if got is not None:
                return got
        return [(m.offset, m.timestamp, m.key, m.value, m.magic, m.crc, m.is_valid()) for m in self.inner_messages()]

    def records(self) -> list[Record]:
        # timestamps: v0 -> -1; v1 -> its own, or the wrapper's when the wrapper is LogAppendTime (already
        # applied by inner_messages), as LegacyRecord.timestamp() with a wrapper timestamp type
        if self.size > 17:
            got = self._native_records(True)
            if got is not None:
                return got
        record = record_class()
        return [record(m.offset, m.timestamp, m.key, m.value, [], m.attributes, None, None, -1, m.magic, m.crc)
                for m in self.inner_messages()]

    def record_tuples(self) -> list[tuple]:
        """``(offset, timestamp, key, value, headers=())`` per record, as :meth:`RecordBatch.record_tuples`."""
        if self.size > 17:
            got = self._native_records(False)
            if got is not None:
                return got
        return [(m.offset, m.timestamp, m.key, m.value, ()) for m in self.inner_messages()]

    def iter_record_tuples(self):
        return iter(self.record_tuples())

    def record_chunks(self, full: bool = True, chunk: int = 65536):
        """As :meth:`RecordBatch.record_chunks` (a legacy wrapper's inner messages are decoded together)."""
        recs = self.records() if full else self.record_tuples()
        for i in range(0, len(recs), chunk):
            yield recs[i:i + chunk]

    def __iter__(self):
        return iter(self.records())

    def __repr__(self) -> str:
        return (f"LegacyBatch(magic={self.magic}, lastOffset={self.last_offset}, position={self.position}, "
                f"size={self.size}, codec={self.codec_name})")
