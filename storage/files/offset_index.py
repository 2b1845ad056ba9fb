"""Offset index ``<base>.index`` (``OffsetIndex``, docs/formats.md#offset-index).

8-byte entries: relative offset int32, physical position int32 (start of a batch in the ``.log``).
Rebuilding from a ``.log`` is :mod:`kafkalog.storage.log.segment`'s job.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkalog.storage.errors import CorruptIndexError
from kafkalog.storage.files.index import INT32_MAX, FixedIndex, base_offset_for, padded
from kafkalog.storage.records.legacy import LOG_OVERHEAD, RECORD_OVERHEAD_V0

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes


@dataclass(frozen=True)
class OffsetPosition:
    offset: int
    position: int


class OffsetIndex(FixedIndex):
    ENTRY = struct.Struct(">ii")
    KEY_FIELD = 0
    FIELDS = ("offset", "position")
    REL_FIELD = 0
    KIND = "index"

    def _make(self, t: tuple) -> OffsetPosition:
        return OffsetPosition(self.base_offset + t[0], t[1])

    @classmethod
    def from_entries(
        cls, base_offset: int, entries: list[OffsetPosition] | list[tuple[int, int]], *, size: int | None = None
    ) -> OffsetIndex:
        """An index holding ``entries`` (absolute offsets), zero-padded to ``size`` bytes when given."""
        b = OffsetIndexBuilder(base_offset)
        for e in entries:
            off, pos = (e.offset, e.position) if isinstance(e, OffsetPosition) else e
            b.append(off, pos)
        return b.build(size=size)

    @property
    def last_offset(self) -> int:
        """``OffsetIndex.lastOffset`` over Kafka's slots (base offset when empty)."""
        return self.base_offset if self.entries == 0 else self._make(self._tuple(self.entries - 1)).offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest valid entry with offset <= target, else ``(base_offset, 0)``."""
        slot = self._search(target_offset - self.base_offset, self.valid_entries)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return self._make(self._tuple(slot))

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> OffsetPosition | None:
        """Smallest entry whose position >= start_position + fetch_size (``fetchUpperBoundOffset``)."""
        target = start_position + fetch_size
        for e in self:
            if e.position >= target:
                return e
        return None

    @classmethod
    def head(cls, view: Any, path: Path, log_size: int) -> OffsetIndex:
        """The slots of the ``.index`` ``path`` in ``view`` (a :class:`~kafkalog.storage.io.dirview.DirView`) that
        a ``.log`` of ``log_size`` bytes can fill, one per message of at least 26 bytes (a v0 message with its log
        overhead), from the start: under a URL only those bytes are read, not a preallocated index's zero tail
        or what a damaged one holds past them."""
        size = 8 * (log_size // (LOG_OVERHEAD + RECORD_OVERHEAD_V0) + 1)
        return cls(view.head(path.name, size), base_offset_for(path.name, None), str(path))

    def positions(self) -> Sequence[int]:
        """The positions of the entries, read where they are (for :func:`bisect.bisect_right`; no pass over them):
        the slots up to the zero tail of a preallocated index."""
        return _EntryPositions(self)

    def sanity_check(self) -> None:
        """``OffsetIndex.sanityCheck`` exactly (over all slots, as Kafka counts them)."""
        if self.entries != 0 and self.last_offset < self.base_offset:
            raise self._err(
                f"corrupt index: non-zero size but the last offset is {self.last_offset} which is less than "
                f"the base offset {self.base_offset}",
                (self.entries - 1) * 8,
            )
        self._check_length("index")


class _EntryPositions(Sequence[int]):
    """:meth:`OffsetIndex.positions`: the zero tail found by bisection, each position read when asked for."""

    def __init__(self, index: OffsetIndex) -> None:
        self._index = index
        lo, hi = 1, index.entries  # (the first zero slot after the first)
        while lo < hi:
            mid = (lo + hi) // 2
            e = index.entry(mid)
            if e.position or e.offset != index.base_offset:
                lo = mid + 1
            else:
                hi = mid
        self._len = min(lo, index.entries)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i):  # type: ignore[override]
        return self._index.entry(i).position


class OffsetIndexBuilder:
    """A writable offset index with ``OffsetIndex.append``'s checks (used by rebuilds and writers)."""

    def __init__(self, base_offset: int, max_index_size: int | None = None):
        self.base_offset = base_offset
        self.max_entries = None if max_index_size is None else max_index_size // 8
        self._buf = bytearray()
        self.entries = 0
        self.last_offset = base_offset

    def is_full(self) -> bool:
        return self.max_entries is not None and self.entries >= self.max_entries

    def append(self, offset: int, position: int) -> None:
        if self.is_full():
            raise CorruptIndexError(f"attempt to append to a full index (size = {self.entries})")
        if self.entries != 0 and offset <= self.last_offset:
            raise CorruptIndexError(
                f"attempt to append an offset {offset} to position {self.entries} no larger than the last offset "
                f"appended ({self.last_offset})"
            )
        rel = offset - self.base_offset
        if not 0 <= rel <= INT32_MAX:
            raise CorruptIndexError(f"offset {offset} cannot be stored relative to base offset {self.base_offset}")
        self._buf += OffsetIndex.ENTRY.pack(rel, position)
        self.entries += 1
        self.last_offset = offset

    def build(self, *, size: int | None = None) -> OffsetIndex:
        return OffsetIndex(padded(bytes(self._buf), size, OffsetIndex.ENTRY.size), self.base_offset)


def read_offset_index(path: str | os.PathLike, base_offset: int | None = None) -> OffsetIndex:
    return OffsetIndex.open(path, base_offset)
