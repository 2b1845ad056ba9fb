"""Time index ``<base>.timeindex`` (``TimeIndex``, docs/formats.md#time-index).

12-byte entries: timestamp int64, relative offset int32. Timestamps strictly increase; offsets do not decrease.
Rebuilding from a ``.log`` is :mod:`kafkalog.storage.log.segment`'s job.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from kafkalog.storage.errors import CorruptIndexError
from kafkalog.storage.files.index import INT32_MAX, FixedIndex, padded

NO_TIMESTAMP = -1


@dataclass(frozen=True)
class TimestampOffset:
    timestamp: int
    offset: int


class TimeIndex(FixedIndex):
    ENTRY = struct.Struct(">qi")
    KEY_FIELD = 0
    FIELDS = ("timestamp", "offset")
    REL_FIELD = 1
    KIND = "timeindex"

    def _make(self, t: tuple) -> TimestampOffset:
        return TimestampOffset(t[0], self.base_offset + t[1])

    @classmethod
    def from_entries(
        cls, base_offset: int, entries: list[TimestampOffset] | list[tuple[int, int]], *, size: int | None = None
    ) -> TimeIndex:
        b = TimeIndexBuilder(base_offset)
        for e in entries:
            ts, off = (e.timestamp, e.offset) if isinstance(e, TimestampOffset) else e
            b.maybe_append(ts, off)
        return b.build(size=size)

    @property
    def last_entry(self) -> TimestampOffset:
        """``TimeIndex.lastEntry`` over Kafka's slots; ``(-1, base_offset)`` when empty."""
        if self.entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self._make(self._tuple(self.entries - 1))

    @property
    def last_valid_entry(self) -> TimestampOffset:
        n = self.valid_entries
        return TimestampOffset(NO_TIMESTAMP, self.base_offset) if n == 0 else self._make(self._tuple(n - 1))

    @property
    def max_timestamp_so_far(self) -> TimestampOffset:
        """What a loaded segment believes its max timestamp is (``readMaxTimestampAndOffsetSoFar``)."""
        return self.last_valid_entry

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Largest valid entry with timestamp <= target, else ``(-1, base_offset)``."""
        slot = self._search(target_timestamp, self.valid_entries)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self._make(self._tuple(slot))

    def sanity_check(self) -> None:
        """``TimeIndex.sanityCheck`` exactly."""
        if self.entries != 0:
            last = self.last_entry
            first_ts = self._tuple(0)[0]
            if last.timestamp < first_ts:
                raise self._err(
                    f"corrupt time index: non-zero size but the last timestamp is {last.timestamp} which is less "
                    f"than the first timestamp {first_ts}",
                    (self.entries - 1) * 12,
                )
            if last.offset < self.base_offset:
                raise self._err(
                    f"corrupt time index: non-zero size but the last offset is {last.offset} which is less than "
                    f"the first offset {self.base_offset}",
                    (self.entries - 1) * 12,
                )
        self._check_length("time index")


class TimeIndexBuilder:
    """A writable time index with ``TimeIndex.maybeAppend``'s rules (only strictly growing timestamps are
    written; the last slot is reserved unless ``skip_full_check``)."""

    def __init__(self, base_offset: int, max_index_size: int | None = None):
        self.base_offset = base_offset
        self.max_entries = None if max_index_size is None else max_index_size // 12
        self._buf = bytearray()
        self.entries = 0
        self.last = TimestampOffset(NO_TIMESTAMP, base_offset)

    def is_full(self) -> bool:
        return self.max_entries is not None and self.entries >= self.max_entries - 1

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        if not skip_full_check and self.is_full():
            raise CorruptIndexError(f"attempt to append to a full time index (size = {self.entries})")
        if self.entries != 0 and offset < self.last.offset:
            raise CorruptIndexError(
                f"attempt to append an offset ({offset}) to slot {self.entries} no larger than the last offset "
                f"appended ({self.last.offset})"
            )
        if self.entries != 0 and timestamp < self.last.timestamp:
            raise CorruptIndexError(
                f"attempt to append a timestamp ({timestamp}) to slot {self.entries} no larger than the last "
                f"timestamp appended ({self.last.timestamp})"
            )
        if timestamp > self.last.timestamp:
            rel = offset - self.base_offset
            if not 0 <= rel <= INT32_MAX:
                raise CorruptIndexError(
                    f"offset {offset} cannot be stored relative to base offset {self.base_offset}"
                )
            self._buf += TimeIndex.ENTRY.pack(timestamp, rel)
            self.entries += 1
            self.last = TimestampOffset(timestamp, offset)
            return True
        return False

    def build(self, *, size: int | None = None) -> TimeIndex:
        return TimeIndex(padded(bytes(self._buf), size, TimeIndex.ENTRY.size), self.base_offset)


def read_time_index(path: str | os.PathLike, base_offset: int | None = None) -> TimeIndex:
    return TimeIndex.open(path, base_offset)
