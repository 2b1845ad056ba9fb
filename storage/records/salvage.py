"""Salvage scanning: the valid batches of a damaged buffer, resynchronising after every corrupt region.

:func:`salvage_scan` walks ``buf`` as :class:`~kafkalog.storage.records.reader.LogScanner` does, but a position
that does not hold a valid entry does not stop it: the bytes from there up to the next position that holds one
are reported as a :class:`SkippedRange` and the scan carries on. An entry is *valid* when

* its framing is structurally sound: offset >= 0, size field >= 14 and within the buffer (and ``max_batch_size``),
  a magic byte of 0, 1 or 2 and, per format, the header fields Kafka never writes otherwise: v2 has at least the
  61-byte header, unused attribute bits clear, ``lastOffsetDelta``/``recordsCount`` >= 0 and producer id, epoch,
  base sequence and partition leader epoch >= -1; a v0/v1 message has no unknown attribute bits and key/value
  lengths that fill the message exactly;
* its checksum matches: CRC32C over the batch for v2 (``RecordBatch.is_valid``), CRC32 over the message for v0/v1
  (``LegacyBatch.is_valid``, a compressed wrapper included);
* with ``check_records`` (the default), its records decode (decompression and Kafka's record checks; a v0/v1
  wrapper's inner messages). A batch whose CRC matches but whose records do not decode is reported as a skipped
  range with the reason, never yielded.

Kafka's checksums do not cover the first bytes of an entry: a v2 batch's base offset, length, partition leader
epoch and magic (bytes 0-20), a v0/v1 entry's offset and size (bytes 0-11). Damage there that keeps the framing
consistent cannot be detected from the bytes (Kafka would read such a batch too).

Resynchronising is a fast search: candidate positions are found with one compiled regular expression over the
header bytes (run in C, no Python per byte), so zero-filled, sparse or random regions cost a fraction of a second
per 10 MiB; only candidates are checked further. Checksumming candidates that turn out not to be batches is
bounded by a budget (``8 x`` the scanned bytes plus 64 MiB); once it is spent, candidates larger than
:data:`LARGE_CANDIDATE` bytes are skipped unchecked (and the reason says so). Nothing is copied: batches are
zero-copy views, so memory is bounded by one batch (plus its decoded records when they are checked).
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from crc32c import crc32c as _crc32c

from kafkalog.storage.codec.compression import DEFAULT_DECOMPRESS_LIMIT
from kafkalog.storage.codec.crc import crc32
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.records.batch import HEADER, HEADER_SIZE, RecordBatch
from kafkalog.storage.records.legacy import RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1, LegacyBatch
from kafkalog.storage.records.reader import LOG_OVERHEAD, MIN_ENTRY_SIZE_FIELD

Batch = RecordBatch | LegacyBatch

LARGE_CANDIDATE = 1 << 20
_BUDGET_FACTOR = 8
_BUDGET_BASE = 64 << 20
_I32 = struct.Struct(">i")
_ENTRY = struct.Struct(">qi")
_CRC_AT = struct.Struct(">I").unpack_from
_V2_ATTRIBUTE_BITS = 0x7F  # codec (3), timestamp type, transactional, control, delete horizon

_ANY = rb"[\x00-\xff]"


def _byte_range(lo: int, hi: int) -> bytes:
    return b"[\\x%02x-\\x%02x]" % (lo, hi)


def _at_least_14(n: int) -> bytes:
    """A pattern for an n-byte big-endian unsigned value >= 14."""
    if n == 1:
        return _byte_range(14, 255)
    return b"(?:" + _byte_range(1, 255) + _ANY + b"{%d}|\\x00" % (n - 1) + _at_least_14(n - 1) + b")"


@functools.lru_cache(maxsize=64)
def _candidate_pattern(max_size: int) -> re.Pattern[bytes] | None:
    """Candidate entry starts: offset >= 0 (first byte < 0x80), a size field in about [14, max_size] (its leading
    bytes bounded by max_size's), then at +16 magic 2 with the attributes' high byte 0 and bit 7 clear, or magic
    0/1 with attribute bits 4-7 clear. Run as a lookahead, so every start is found in C."""
    if max_size < MIN_ENTRY_SIZE_FIELD:
        return None
    n = (max_size.bit_length() + 7) // 8
    top = max_size >> (8 * (n - 1))
    if n == 1:
        size = _byte_range(14, top)
    else:
        size = b"(?:" + _byte_range(1, top) + _ANY + b"{%d}|\\x00" % (n - 1) + _at_least_14(n - 1) + b")"
    return re.compile(b"(?=" + _byte_range(0, 0x7F) + _ANY + b"{7}" + b"\\x00" * (4 - n) + size + _ANY + b"{4}"
                      + b"(?:\\x02" + _ANY + b"{4}\\x00" + _byte_range(0, 0x7F) + b"|[\\x00\\x01]"
                      + _byte_range(0, 0x0F) + b"))", re.DOTALL)


_WINDOW = 1 << 20
_ZEROS4 = bytes(4)


def _next_candidate(mv: memoryview, pos: int, end: int, pattern: re.Pattern[bytes] | None) -> int:
    """The first candidate position >= pos (``end`` when there is none). A zero-filled run (preallocated or sparse
    files) is crossed at memcmp speed: an entry needs a nonzero size byte at +8..+11."""
    if pattern is None:
        return end
    while pos < end - 16:
        if mv[pos + 8:pos + 12] == _ZEROS4:
            q = pos + 8
            while q < end:
                chunk = bytes(mv[q:q + _WINDOW])
                rest = chunk.lstrip(b"\x00")
                if rest:
                    q += len(chunk) - len(rest)
                    break
                q += len(chunk)
            if q >= end:
                return end
            pos = max(pos, q - 11)
        stop = min(end, pos + _WINDOW)
        m = pattern.search(mv, pos, min(end, stop + 32))
        if m is not None:
            return m.start()
        pos = stop
    return end


@dataclass(frozen=True)
class SkippedRange:
    """Bytes ``[start, end)`` (positions in the file) that hold no valid batch, and why the first of them did not."""

    start: int
    end: int
    reason: str
    path: str | None = None
    batch: Batch | None = field(default=None, compare=False, repr=False)
    """with ``include_invalid``: the entry filling the range, whose CRC does not match but whose framing is intact
    and whose records decode (read its records, knowing they are not checked)"""

    @property
    def size(self) -> int:
        return self.end - self.start


class SalvageStats:
    """What one scan found: batches yielded, ranges and bytes skipped."""

    __slots__ = ("batches", "skipped_ranges", "skipped_bytes", "budget_exhausted")

    def __init__(self) -> None:
        self.batches = 0
        self.skipped_ranges = 0
        self.skipped_bytes = 0
        self.budget_exhausted = False


def _header_problem(buf, pos: int, end: int, max_size: int | None) -> tuple[str | None, int]:
    """``(why the entry at pos is not structurally valid or None, its total size)``."""
    if end - pos < LOG_OVERHEAD + 5:
        return f"{end - pos} bytes left: too few for an entry header (17)", 0
    offset, size = _ENTRY.unpack_from(buf, pos)
    if offset < 0:
        return f"negative offset {offset}", 0
    if size < MIN_ENTRY_SIZE_FIELD:
        return f"size field {size} is smaller than the minimum record overhead (14)", 0
    if max_size is not None and size > max_size:
        return f"size field {size} exceeds the largest allowable message size ({max_size})", 0
    total = LOG_OVERHEAD + size
    if total > end - pos:
        return f"size field {size} runs past the end of the data ({end - pos - LOG_OVERHEAD} bytes left)", 0
    magic = buf[pos + 16]
    if magic == 2:
        if total < HEADER_SIZE:
            return f"v2 batch of {total} bytes is smaller than the 61-byte header", 0
        h = HEADER.unpack_from(buf, pos)
        if h[5] & ~_V2_ATTRIBUTE_BITS:
            return f"unused attribute bits set (attributes 0x{h[5] & 0xFFFF:04x})", 0
        if h[6] < 0 or h[12] < 0:
            return f"negative lastOffsetDelta ({h[6]}) or record count ({h[12]})", 0
        if h[9] < -1 or h[10] < -1 or h[11] < -1 or h[2] < -1:
            return "producer id, epoch, base sequence or partition leader epoch below -1", 0
        return None, total
    if magic in (0, 1):
        attrs = buf[pos + 17]
        if attrs & 0xF0 or (magic == 0 and attrs & 0x08):
            return f"unknown attribute bits set (attributes 0x{attrs:02x})", 0
        overhead = RECORD_OVERHEAD_V0 if magic == 0 else RECORD_OVERHEAD_V1
        if size < overhead:
            return f"v{magic} message size {size} is smaller than the v{magic} message overhead ({overhead})", 0
        p = pos + LOG_OVERHEAD + overhead - 8  # the key length
        msg_end = pos + total
        (klen,) = _I32.unpack_from(buf, p)
        if klen < -1 or p + 4 + max(klen, 0) + 4 > msg_end:
            return f"key length {klen} does not fit the message", 0
        p += 4 + max(klen, 0)
        (vlen,) = _I32.unpack_from(buf, p)
        if vlen < -1 or p + 4 + max(vlen, 0) != msg_end:
            return f"value length {vlen} does not end at the message end", 0
        return None, total
    return f"invalid magic {magic - 256 if magic > 127 else magic} (expected 0, 1 or 2)", 0


def _records_problem(batch: Batch) -> str | None:
    """Why the records of a CRC-valid batch do not decode (None when they do); memory bounded by a chunk."""
    try:
        if isinstance(batch, RecordBatch):
            if batch.magic != 2:
                return f"unsupported magic {batch.magic}"
            for _ in batch.record_chunks(full=False):
                pass
        else:
            batch.inner_messages()
            batch._inner = None  # decoded again by the consumer: do not keep them alive
    except KafkaLogError as e:
        return f"CRC valid but records do not decode: {e.reason}"
    except (ValueError, IndexError, OverflowError, struct.error, UnicodeDecodeError) as e:  # unchecked bytes
        return f"records do not decode: {type(e).__name__}: {e}"
    return None


def salvage_scan(buf, start: int = 0, end: int | None = None, *, path: str | None = None,
                 position_base: int = 0, max_batch_size: int | None = None, check_records: bool = True,
                 decompress_limit: int = DEFAULT_DECOMPRESS_LIMIT, include_invalid: bool = False,
                 stats: SalvageStats | None = None) -> Iterator[Batch | SkippedRange]:
    """Yield, in file order, every valid batch of ``buf[start:end]`` (zero-copy :class:`RecordBatch` /
    :class:`LegacyBatch` views whose ``position`` is ``position_base + index``) and a :class:`SkippedRange` for
    every region between them that holds none (see the module doc). The yielded batches and ranges tile
    ``[start, end)`` exactly.

    ``include_invalid``: an entry whose CRC does not match is still handed out, as the ``batch`` of its skipped
    range, when its framing is provably intact -- the bytes right after it hold a valid entry (or, when the entry
    starts where the previous valid one ended or at ``start``, the data ends there), no valid entry starts
    inside it -- and its records decode."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(mv) if end is None else min(end, len(mv))
    st = stats if stats is not None else SalvageStats()
    budget = _BUDGET_FACTOR * max(0, end - start) + _BUDGET_BASE
    limit = end - start - LOG_OVERHEAD
    pattern = _candidate_pattern(limit if max_batch_size is None else min(limit, max_batch_size))
    pos = start
    skip_from: int | None = None
    skip_reason = ""
    while pos < end:
        problem, total = _header_problem(mv, pos, end, max_batch_size)
        if problem is None:
            v2 = mv[pos + 16] == 2
            if skip_from is not None and total > LARGE_CANDIDATE and budget <= 0:
                problem = f"candidate of {total} bytes not checked: resync budget spent"
                st.budget_exhausted = True
            else:
                if v2:
                    stored, computed = _CRC_AT(mv, pos + 17)[0], _crc32c(mv[pos + 21:pos + total])
                else:
                    stored, computed = _CRC_AT(mv, pos + 12)[0], crc32(mv[pos + 16:pos + total])
                if stored != computed:
                    if include_invalid:
                        suspect = _suspect(mv, pos, total, end, v2, skip_from is None, max_batch_size, pattern,
                                           position_base, path, decompress_limit)
                        if suspect is not None:
                            if skip_from is not None:
                                yield _skipped(st, skip_from, pos, skip_reason, position_base, path)
                                skip_from = None
                            reason = (f"{'v2 batch' if v2 else 'message'} CRC mismatch (stored 0x{stored:08x}, "
                                      f"computed 0x{computed:08x}); framing intact and records decode")
                            yield _skipped(st, pos, pos + total, reason, position_base, path, suspect)
                            del suspect
                            pos += total
                            continue
                    if skip_from is not None:
                        budget -= total
                        problem = "CRC mismatch"
                    else:
                        problem = (f"{'v2 batch' if v2 else 'message'} CRC mismatch (stored 0x{stored:08x}, "
                                   f"computed 0x{computed:08x})")
        if problem is None:
            view = mv[pos:pos + total]
            batch: Batch = (RecordBatch(view, position_base + pos, path, decompress_limit) if v2
                            else LegacyBatch(view, position_base + pos, path, decompress_limit))
            bad = _records_problem(batch) if check_records else None
            if skip_from is not None:
                yield _skipped(st, skip_from, pos, skip_reason, position_base, path)
                skip_from = None
            if bad is not None:
                # the bytes are what was written (the CRC matches): report the whole entry and go past it
                yield _skipped(st, pos, pos + total, bad, position_base, path)
            else:
                st.batches += 1
                yield batch
            del batch, view
            pos += total
            continue
        if skip_from is None:
            skip_from, skip_reason = pos, problem or "not a batch"
        pos = _next_candidate(mv, pos + 1, end, pattern)
    if skip_from is not None:
        yield _skipped(st, skip_from, end, skip_reason, position_base, path)


def _skipped(st: SalvageStats, a: int, b: int, reason: str, base: int, path: str | None,
             batch: Batch | None = None) -> SkippedRange:
    st.skipped_ranges += 1
    st.skipped_bytes += b - a
    return SkippedRange(base + a, base + b, reason, path, batch)


def _valid_at(mv: memoryview, pos: int, end: int, max_size: int | None) -> bool:
    """A structurally valid entry with a matching CRC starts at ``pos``."""
    problem, total = _header_problem(mv, pos, end, max_size)
    if problem is not None:
        return False
    if mv[pos + 16] == 2:
        return bool(_CRC_AT(mv, pos + 17)[0] == _crc32c(mv[pos + 21:pos + total]))
    return bool(_CRC_AT(mv, pos + 12)[0] == crc32(mv[pos + 16:pos + total]))


def _suspect(mv: memoryview, pos: int, total: int, end: int, v2: bool, trusted: bool, max_size: int | None,
             pattern: re.Pattern[bytes] | None, base: int, path: str | None, limit: int) -> Batch | None:
    """The CRC-failing entry at ``pos`` as a batch when its framing is provably intact and its records decode."""
    nxt = pos + total
    if not (nxt == end and trusted) and not (nxt < end and _valid_at(mv, nxt, end, max_size)):
        return None
    q = _next_candidate(mv, pos + 1, end, pattern)
    while q < nxt:
        if _valid_at(mv, q, end, max_size):
            return None  # a valid entry inside: the size field is what is damaged
        q = _next_candidate(mv, q + 1, end, pattern)
    view = mv[pos:nxt]
    batch: Batch = RecordBatch(view, base + pos, path, limit) if v2 else LegacyBatch(view, base + pos, path, limit)
    return batch if _records_problem(batch) is None else None


__all__ = ["LARGE_CANDIDATE", "SalvageStats", "SkippedRange", "salvage_scan"]
