"""The cleaner's key -> last offset map (``SkimpyOffsetMap``, spec 50-cleaner §4).

Kafka stores 24-byte entries (16-byte MD5 of the key + 8-byte offset) in a fixed array of
``slots = memory // 24`` and stops filling it at ``int(slots * load_factor)`` distinct hashes. Lookups only ever
compare hashes, so a dict keyed by the MD5 digest has exactly the same observable behaviour (two keys with the
same MD5 are one key; ``size`` counts distinct hashes; ``get`` of an unknown hash is ``-1``) while the capacity
— and therefore how far one pass reaches into the dirty section — is the broker's.
"""

from __future__ import annotations

from hashlib import md5

from ..errors import ConfigError

BYTES_PER_ENTRY = 24  # 16-byte MD5 + 8-byte offset
INT32_MAX = 2147483647
DEFAULT_DEDUPE_BUFFER_SIZE = 134217728
DEFAULT_LOAD_FACTOR = 0.9


def offset_map_memory(dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE, threads: int = 1) -> int:
    """Memory of one cleaner thread's map: ``min(dedupe.buffer.size / threads, Int.MaxValue)``."""
    return min(dedupe_buffer_size // max(threads, 1), INT32_MAX)


class OffsetMap:
    """Key hash -> offset, with the broker's capacity. ``latest_offset`` is the last offset put or forwarded."""

    __slots__ = ("memory", "load_factor", "slots", "capacity", "_map", "latest_offset", "lookups")

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
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1
        self.lookups = 0

    @staticmethod
    def hash_key(key) -> bytes:
        return md5(key).digest()

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def full(self) -> bool:
        return len(self._map) >= self.capacity

    @property
    def utilization(self) -> float:
        return len(self._map) / self.slots

    def put(self, key, offset: int) -> None:
        self._map[md5(key).digest()] = offset
        self.latest_offset = offset

    def get(self, key) -> int:
        return self._map.get(md5(key).digest(), -1)

    def put_hash(self, digest: bytes, offset: int) -> None:
        self._map[digest] = offset
        self.latest_offset = offset

    def get_hash(self, digest: bytes) -> int:
        return self._map.get(digest, -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._map)
