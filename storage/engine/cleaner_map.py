"""The cleaner's key -> last offset map (``SkimpyOffsetMap``, spec 50-cleaner §4).

Kafka stores 24-byte entries (16-byte MD5 of the key + 8-byte offset) in a fixed array of
``slots = memory // 24`` and stops filling it at ``int(slots * load_factor)`` distinct hashes. Lookups only ever
compare hashes, so a dict keyed by the MD5 digest has exactly the same observable behaviour (two keys with the
same MD5 are one key; ``size`` counts distinct hashes; ``get`` of an unknown hash is ``-1``) while the capacity
— and therefore how far one pass reaches into the dirty section — is the broker's.

Speed: MD5 costs more than everything else a record needs, and compacted topics repeat keys. So each distinct
hash owns a one-element list (a *cell*) holding its offset, and short keys (``<= RAW_KEY_MAX`` bytes) are also
remembered raw, pointing at their hash's cell: a key seen before is found by one dict lookup on its bytes, MD5
is computed once per distinct key, and keys with the same MD5 still share one cell (one offset), as in Kafka.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from hashlib import md5

from ..errors import ConfigError

BYTES_PER_ENTRY = 24  # 16-byte MD5 + 8-byte offset
INT32_MAX = 2147483647
DEFAULT_DEDUPE_BUFFER_SIZE = 134217728
DEFAULT_LOAD_FACTOR = 0.9
RAW_KEY_MAX = 64  # longer keys are only kept as their MD5 (bounded memory per entry)


def offset_map_memory(dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE, threads: int = 1) -> int:
    """Memory of one cleaner thread's map: ``min(dedupe.buffer.size / threads, Int.MaxValue)``."""
    return min(dedupe_buffer_size // max(threads, 1), INT32_MAX)


class OffsetMap:
    """Key hash -> offset, with the broker's capacity. ``latest_offset`` is the last offset put or forwarded.

    ``cells`` maps MD5 digest -> ``[offset]``; ``raw`` maps short raw keys to the same cell objects.
    """

    __slots__ = ("memory", "load_factor", "slots", "capacity", "cells", "raw", "latest_offset", "start", "_values")

    def __init__(self, memory: int = DEFAULT_DEDUPE_BUFFER_SIZE, load_factor: float = DEFAULT_LOAD_FACTOR):
        self.memory = memory
        self.load_factor = load_factor
        self.slots = memory // BYTES_PER_ENTRY
        if not self.slots * load_factor > 1:
            raise ConfigError(
                "offset map is too small to fit in even a single message, so log cleaning will never make "
                "progress. You can increase log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads")
        # Cleaner.buildOffsetMapForSegment: maxDesiredMapSize = (map.slots * dupBufferLoadFactor).toInt
        self.capacity = int(self.slots * load_factor)
        self.cells: dict[bytes, list[int]] = {}
        self.raw: dict[bytes, list[int]] = {}
        self.latest_offset = -1
        self.start = -1  # the first offset mapped (the round's first dirty offset)
        self._values: array | None = None

    @staticmethod
    def hash_key(key) -> bytes:
        return md5(key).digest()

    @property
    def size(self) -> int:
        return len(self.cells)

    @property
    def full(self) -> bool:
        return len(self.cells) >= self.capacity

    @property
    def utilization(self) -> float:
        return len(self.cells) / self.slots

    def put(self, key, offset: int) -> None:
        """``SkimpyOffsetMap.put`` (the caller checks ``size < capacity`` first, as ``buildOffsetMapForSegment``)."""
        key = bytes(key)
        cell = self.raw.get(key)
        if cell is None:
            cell = self.new_cell(key, offset)
        cell[0] = offset
        self.latest_offset = offset

    def new_cell(self, key: bytes, offset: int) -> list[int]:
        """Put a key not in ``raw`` (hashing it): its hash's cell, created if new, is set to ``offset``."""
        d = md5(key).digest()
        cell = self.cells.get(d)
        if cell is None:
            cell = self.cells[d] = [offset]
        else:
            cell[0] = offset
        if len(key) <= RAW_KEY_MAX:
            self.raw[key] = cell
        return cell

    def get(self, key) -> int:
        key = bytes(key)
        cell = self.raw.get(key)
        if cell is None:
            cell = self.cells.get(md5(key).digest())
            if cell is None:
                return -1
        return cell[0]

    def get_unknown(self, key) -> int:
        """``get`` for a key known not to be in ``raw`` (long, or never put): by its MD5."""
        cell = self.cells.get(md5(key).digest())
        return -1 if cell is None else cell[0]

    def put_hash(self, digest: bytes, offset: int) -> None:
        cell = self.cells.get(digest)
        if cell is None:
            self.cells[digest] = [offset]
        else:
            cell[0] = offset
        self.latest_offset = offset

    def get_hash(self, digest: bytes) -> int:
        cell = self.cells.get(digest)
        return -1 if cell is None else cell[0]

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def clear(self) -> None:
        self.cells.clear()
        self.raw.clear()
        self.latest_offset = -1
        self._values = None

    def freeze(self) -> None:
        """Index the map's offsets (sorted) for :meth:`maps_none_of`; call once the map is built."""
        self._values = array("q", sorted(c[0] for c in self.cells.values()))

    def maps_none_of(self, base_offset: int, last_offset: int) -> bool:
        """True when ``[base_offset, last_offset]`` lies inside the mapped range ``[start, latest_offset]`` and
        no key's offset in the map falls in it: then no keyed record of a batch with that range is the latest
        for its key, and ``shouldRetainRecord`` drops them all (keyless records are dropped anyway), so the
        batch's records need not be read. False when unknown (not frozen, or outside the mapped range)."""
        v = self._values
        if v is None or base_offset < self.start or last_offset > self.latest_offset:
            return False
        i = bisect_left(v, base_offset)
        return i == len(v) or v[i] > last_offset

    def __len__(self) -> int:
        return len(self.cells)
