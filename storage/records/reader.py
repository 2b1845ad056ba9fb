"""Shallow iteration over a buffer of log entries (docs/formats.md#reading-a-log-file, ``FileLogInputStream.nextBatch``).

``iter_batches`` yields zero-copy batch views (:class:`RecordBatch` for magic >= 2, :class:`LegacyBatch` for
0 and 1). Nothing is validated here but the entry framing; call ``is_valid()``/``ensure_valid()`` per batch and
``records()`` for deep iteration.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator

from kafkalog.storage.codec.compression import DEFAULT_DECOMPRESS_LIMIT
from kafkalog.storage.codec.native import active
from kafkalog.storage.errors import CorruptRecordError
from kafkalog.storage.io import fs
from kafkalog.storage.records.batch import RecordBatch
from kafkalog.storage.records.legacy import LegacyBatch

HEADER_SIZE_UP_TO_MAGIC = 17
LOG_OVERHEAD = 12
MIN_ENTRY_SIZE_FIELD = 14
_OFFSET_SIZE = struct.Struct(">qi")

Batch = RecordBatch | LegacyBatch

TORN_TAIL = "torn tail"
PARTIAL_BATCH = "partial batch"


class LogScanner:
    """Iterate the entries of ``buf[start:end]``; afterwards ``stop_position`` is where the scan ended and
    ``stop_reason`` says why it ended early (``None`` at a clean end, ``'torn tail'`` when 1..17 bytes remain,
    ``'partial batch'`` when the last entry runs past ``end``).

    With ``max_batch_size`` set, a size field above it raises (as Kafka's in-memory scanner does).
    Positions reported are ``position_base + index in buf``.
    """

    __slots__ = ("buf", "start", "end", "path", "position_base", "max_batch_size", "stop_position",
                 "stop_reason", "decompress_limit")

    def __init__(self, buf, start: int = 0, end: int | None = None, *, path: str | None = None,
                 position_base: int = 0, max_batch_size: int | None = None,
                 decompress_limit: int = DEFAULT_DECOMPRESS_LIMIT):
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.start = start
        self.end = len(self.buf) if end is None else min(end, len(self.buf))
        self.path = path
        self.position_base = position_base
        self.max_batch_size = max_batch_size
        self.stop_position = start
        self.stop_reason: str | None = None
        self.decompress_limit = decompress_limit

    def __iter__(self) -> Iterator[Batch]:
        buf = self.buf
        pos = self.start
        end = self.end
        path = self.path
        base = self.position_base
        unpack = _OFFSET_SIZE.unpack_from
        max_size = self.max_batch_size
        limit = self.decompress_limit
        self.stop_reason = None
        try:
            while True:
                if pos >= end - HEADER_SIZE_UP_TO_MAGIC:
                    if pos < end:
                        self.stop_reason = TORN_TAIL
                    break
                _, size = unpack(buf, pos)
                if size < MIN_ENTRY_SIZE_FIELD:
                    raise CorruptRecordError(
                        f"Found record size {size} smaller than minimum record overhead (14)", path, base + pos)
                if max_size is not None and size > max_size:
                    raise CorruptRecordError(
                        f"Record size {size} exceeds the largest allowable message size ({max_size})",
                        path, base + pos)
                if pos > end - LOG_OVERHEAD - size:
                    self.stop_reason = PARTIAL_BATCH
                    break
                total = LOG_OVERHEAD + size
                view = buf[pos:pos + total]
                if 2 <= buf[pos + 16] < 128:  # a negative magic byte is "< 2" for Kafka: legacy
                    yield RecordBatch(view, base + pos, path, limit)
                else:
                    yield LegacyBatch(view, base + pos, path, limit)
                pos += total
        finally:
            self.stop_position = base + pos


class WindowedScanner(LogScanner):
    """A :class:`LogScanner` over a ``.log`` read through the filesystem seam (:class:`~kafkalog.storage.io.fs.SegmentFile`)
    in windows of at most :data:`~kafkalog.storage.io.fs.REMOTE_WINDOW` bytes (a batch larger than that gets a window
    of its own size): a file under a URL is never read whole. The first window is
    :data:`~kafkalog.storage.io.fs.FIRST_WINDOW` bytes (at least its first batch), each next one twice the last: a
    reader that stops after a batch or two (an index entry's check, a lookup) reads about them, a whole scan soon
    reads full windows. ``stop_position`` and ``stop_reason`` are reported as a scan of the whole file would report
    them. ``until``: the reader stops at the first batch from that byte (a piece of a segment): the windows are full
    ones from the start, and none reaches more than a first window's bytes past it."""

    __slots__ = ("file", "until")

    def __init__(self, file: fs.SegmentFile, start: int = 0, end: int | None = None, *, path: str | None = None,
                 max_batch_size: int | None = None, decompress_limit: int = DEFAULT_DECOMPRESS_LIMIT,
                 until: int | None = None):
        super().__init__(b"", start, None, path=path, max_batch_size=max_batch_size,
                         decompress_limit=decompress_limit)
        self.file = file
        self.end = file.size if end is None else min(end, file.size)
        self.until = until

    def __iter__(self) -> Iterator[Batch]:
        pos, end = self.start, self.end
        self.stop_reason = None
        self.stop_position = pos
        step = min(fs.FIRST_WINDOW if self.until is None else max(self.until - pos, fs.FIRST_WINDOW), fs.REMOTE_WINDOW)
        while True:
            want = min(end - pos, step)
            if self.until is not None:  # (a window as small as a first one at least: a batch is judged as ever)
                want = min(want, max(self.until - pos, fs.FIRST_WINDOW))
            if want < end - pos:  # a batch larger than the window, whole in the range: a window of its own size
                head = self.file.view(pos, 12)
                size = int.from_bytes(head[8:12], "big", signed=True) if len(head) == 12 else 0
                if 14 <= size and 12 + size <= end - pos and (self.max_batch_size is None or
                                                              size <= self.max_batch_size):
                    want = max(want, 12 + size)
            window = LogScanner(self.file.view(pos, want), 0, None, path=self.path, position_base=pos,
                                max_batch_size=self.max_batch_size, decompress_limit=self.decompress_limit)
            try:
                yield from window
            finally:
                self.stop_position = window.stop_position
            if pos + want >= end or window.stop_position == pos:  # the end of the range, or no whole batch left
                self.stop_reason = window.stop_reason
                return
            pos = window.stop_position
            step = min(2 * step, fs.REMOTE_WINDOW)


def iter_batches(buf, start: int = 0, end: int | None = None, *, path: str | None = None,
                 position_base: int = 0, max_batch_size: int | None = None,
                 decompress_limit: int = DEFAULT_DECOMPRESS_LIMIT) -> Iterator[Batch]:
    """Yield the shallow entries of ``buf[start:end]`` (stops silently at a torn tail or partial batch)."""
    return iter(LogScanner(buf, start, end, path=path, position_base=position_base,
                           max_batch_size=max_batch_size, decompress_limit=decompress_limit))


def batch_at(buf, position: int, *, path: str | None = None) -> Batch:
    """The entry starting at ``position`` (raises CorruptRecordError if it is not complete)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if len(mv) - position < HEADER_SIZE_UP_TO_MAGIC:
        raise CorruptRecordError("fewer than 17 bytes remain: no entry header", path, position)
    _, size = _OFFSET_SIZE.unpack_from(mv, position)
    if size < MIN_ENTRY_SIZE_FIELD:
        raise CorruptRecordError(f"Found record size {size} smaller than minimum record overhead (14)", path,
                                 position)
    if size > len(mv) - position - LOG_OVERHEAD:
        raise CorruptRecordError(f"entry of {size + 12} bytes runs past the end of the buffer", path, position)
    view = mv[position:position + LOG_OVERHEAD + size]
    if 2 <= mv[position + 16] < 128:
        return RecordBatch(view, position, path)
    return LegacyBatch(view, position, path)


class BatchScan:
    """What :func:`scan_crc` found: per entry its ``position`` and whether it ``is_valid()`` (columnar, no
    object per batch); ``stop_position``/``stop_reason`` as :class:`LogScanner` reports them."""

    __slots__ = ("positions", "valid", "stop_position", "stop_reason")

    def __init__(self) -> None:
        self.positions = array("q")
        self.valid = bytearray()  # 1: valid, 0: not
        self.stop_position = 0
        self.stop_reason: str | None = None

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def invalid(self) -> int:
        """How many entries are not valid."""
        return len(self.valid) - sum(self.valid)


def scan_crc(buf, start: int = 0, end: int | None = None, *, path: str | None = None, position_base: int = 0,
             max_batch_size: int | None = None, native: bool = True) -> BatchScan:
    """Shallow scan of ``buf[start:end]`` with every entry's ``is_valid()`` (CRC32C for v2, CRC32 for v0/v1),
    as :class:`LogScanner` and the batch classes give them, raising the same errors at the same positions.
    With the compiled core, runs of complete v2 entries are scanned and checked in one native pass (GIL
    released); every other entry goes through :class:`LogScanner`."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(mv) if end is None else min(end, len(mv))
    out = BatchScan()
    core = active().records if native else None
    pos = start
    while True:
        if core is not None:
            positions, flags, pos = core.scan_crc(mv, pos, end, max_batch_size)
            if flags:
                got = array("q")
                got.frombytes(positions)
                if position_base:
                    got = array("q", [p + position_base for p in got])
                out.positions.extend(got)
                out.valid += flags
        scanner = LogScanner(mv, pos, end, path=path, position_base=position_base, max_batch_size=max_batch_size)
        for b in scanner:
            out.positions.append(b.position)
            out.valid.append(1 if b.is_valid() else 0)
            pos = b.position - position_base + b.size
            if core is not None:
                break  # back to the native pass after this entry
        else:
            out.stop_position, out.stop_reason = scanner.stop_position, scanner.stop_reason
            return out
