"""The cleaner's key -> last offset map (``SkimpyOffsetMap``, docs/semantics.md#cleaner-offset-map).

Kafka stores 24-byte entries (16-byte MD5 of the key + 8-byte offset) in a fixed array of
``slots = memory // 24`` and stops filling it at ``int(slots * load_factor)`` distinct hashes. Lookups only ever
compare hashes, so a dict keyed by the MD5 digest has exactly the same observable behaviour (two keys with the
same MD5 are one key; ``size`` counts distinct hashes; ``get`` of an unknown hash is ``-1``) while the capacity
— and therefore how far one pass reaches into the dirty section — is the broker's.

Speed: MD5 costs more than everything else a record needs, and compacted topics repeat keys. So each distinct
hash owns a one-element list (a *cell*) holding its offset, and short keys (``<= RAW_KEY_MAX`` bytes) are also
remembered raw, pointing at their hash's cell: a key seen before is found by one dict lookup on its bytes, MD5
is computed once per distinct key, and keys with the same MD5 still share one cell (one offset), as in Kafka.

Memory: a dict entry costs about 225-260 bytes per distinct key (measured), against Kafka's 24. So the dicts
are only the *hot* part of the map: when they hold ``spill_keys`` hashes they are moved into a *run* -- three
sorted arrays (hash high and low 64 bits, offset), 24 bytes per hash like Kafka's -- and emptied (in place: hot
loops hold references to them). A hash lives in exactly one place, so ``size`` is still the number of distinct
hashes; lookups that miss the dicts hash the key and binary-search the runs (a C ``bisect`` per run), about
3.5 us more per record than a dict hit. So the map spills only when it must: ``spill_keys`` defaults to what
half of the machine's available memory holds (``MemAvailable``), at least ``SPILL_KEYS``, and at least
``capacity / MAX_RUNS``. On a machine with room for the whole map (5.03 M keys for the default 128 MiB
``log.cleaner.dedupe.buffer.size``: about 1.3 GB) nothing changes; a larger buffer on a smaller machine costs
``spill_keys * 260 + size * 24`` bytes instead of running out of memory.

With the compiled record core the map is held natively instead (``OffsetMapCore`` in ``storage/native``): the
same rules (one entry per distinct MD5, a bounded cache of raw short keys), about 40 bytes per hash plus at most
``RAW_CACHE_KEYS`` cached raw keys, and the cleaner's per-record loops run against it without a Python object
per record. The dict map above stays the reference (``KAFKALOG_NATIVE=0``, and a map created with
``spill_keys``); tests compare the two.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from hashlib import md5
from heapq import merge

from kafkalog.storage.codec.native import core
from kafkalog.storage.errors import ConfigError

BYTES_PER_ENTRY = 24  # 16-byte MD5 + 8-byte offset
INT32_MAX = 2147483647
DEFAULT_DEDUPE_BUFFER_SIZE = 134217728
DEFAULT_LOAD_FACTOR = 0.9
RAW_KEY_MAX = 64  # longer keys are only kept as their MD5 (bounded memory per entry)
SPILL_KEYS = 1 << 20  # the least number of hashes kept in the dicts before a spill (about 270 MB)
MAX_RUNS = 8  # the spill threshold grows with the capacity so that lookups search at most this many runs
HOT_BYTES_PER_KEY = 260  # measured: digest + cell + raw key + dict slots
MEMORY_SHARE = 0.5  # of MemAvailable the hot dicts may use
RAW_CACHE_KEYS = 1 << 21  # the native map remembers at most this many raw keys (about 80 bytes each)


def available_memory() -> int | None:
    """``MemAvailable`` from /proc/meminfo (Linux), in bytes; None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def default_spill_keys(capacity: int) -> int:
    """Hashes the hot dicts may hold: as many as half the available memory takes, within the bounds above."""
    avail = available_memory()
    budget = int(avail * MEMORY_SHARE) // HOT_BYTES_PER_KEY if avail else SPILL_KEYS
    return max(SPILL_KEYS, -(-capacity // MAX_RUNS), budget)


class _Run:
    """Hashes sorted by (high, low) 64-bit halves, with their offsets: 24 bytes per hash."""

    __slots__ = ("hi", "lo", "off")

    def __init__(self, cells: dict[bytes, list[int]]):
        items = sorted(cells.items())
        self.hi = array("Q", (int.from_bytes(d[:8], "big") for d, _ in items))
        self.lo = array("Q", (int.from_bytes(d[8:], "big") for d, _ in items))
        self.off = array("q", (c[0] for _, c in items))

    def find(self, digest: bytes) -> int:
        """Index of ``digest`` in this run, or -1."""
        h = int.from_bytes(digest[:8], "big")
        lo = int.from_bytes(digest[8:], "big")
        hi_arr = self.hi
        i = bisect_left(hi_arr, h)
        n = len(hi_arr)
        while i < n and hi_arr[i] == h:
            if self.lo[i] == lo:
                return i
            i += 1
        return -1


def offset_map_memory(dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE, threads: int = 1) -> int:
    """Memory of one cleaner thread's map: ``min(dedupe.buffer.size / threads, Int.MaxValue)``."""
    return min(dedupe_buffer_size // max(threads, 1), INT32_MAX)


class OffsetMap:
    """Key hash -> offset, with the broker's capacity. ``latest_offset`` is the last offset put or forwarded.

    ``cells`` maps MD5 digest -> ``[offset]``; ``raw`` maps short raw keys to the same cell objects.
    """

    __slots__ = ("memory", "load_factor", "slots", "capacity", "cells", "raw", "latest_offset", "start", "_values",
                 "spill_keys", "runs", "spilled", "native")

    def __init__(self, memory: int = DEFAULT_DEDUPE_BUFFER_SIZE, load_factor: float = DEFAULT_LOAD_FACTOR, *,
                 spill_keys: int | None = None):
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
        self.spill_keys = max(1, spill_keys if spill_keys is not None else default_spill_keys(self.capacity))
        self.runs: list[_Run] = []
        self.spilled = 0  # hashes held in runs
        # the native map, unless the dict map's spilling is asked for (spill_keys) or the core is off
        self.native = core.OffsetMapCore(RAW_CACHE_KEYS, RAW_KEY_MAX) if core is not None and spill_keys is None \
            else None

    @staticmethod
    def hash_key(key) -> bytes:
        return md5(key).digest()

    @property
    def size(self) -> int:
        if self.native is not None:
            return self.native.size
        return len(self.cells) + self.spilled

    def _spill(self) -> None:
        """Move the hot dicts into a new run (emptied in place: callers hold references to them)."""
        self.runs.append(_Run(self.cells))
        self.spilled += len(self.cells)
        self.cells.clear()
        self.raw.clear()

    def _run_find(self, digest: bytes) -> tuple[_Run | None, int]:
        for run in self.runs:
            i = run.find(digest)
            if i >= 0:
                return run, i
        return None, -1

    def put(self, key, offset: int) -> None:
        """``SkimpyOffsetMap.put`` (the caller checks ``size < capacity`` first, as ``buildOffsetMapForSegment``)."""
        key = bytes(key)
        self.latest_offset = offset
        if self.native is not None:
            self.native.put(key, offset)
            return
        cell = self.raw.get(key)
        if cell is None:
            cell = self.new_cell(key, offset)
        cell[0] = offset

    def new_cell(self, key: bytes, offset: int) -> list[int]:
        """Put a key not in ``raw`` (hashing it): its hash's cell, created if new, is set to ``offset``.
        (A hash already spilled into a run is updated there; the returned cell is then a detached copy.)"""
        d = md5(key).digest()
        cell = self.cells.get(d)
        if cell is None:
            if self.runs:
                run, i = self._run_find(d)
                if run is not None:
                    run.off[i] = offset
                    return [offset]
            if len(self.cells) >= self.spill_keys:
                self._spill()
            cell = self.cells[d] = [offset]
        else:
            cell[0] = offset
        if len(key) <= RAW_KEY_MAX:
            self.raw[key] = cell
        return cell

    def get(self, key) -> int:
        key = bytes(key)
        if self.native is not None:
            return self.native.get(key)
        cell = self.raw.get(key)
        if cell is None:
            return self.get_hash(md5(key).digest())
        return cell[0]

    def get_unknown(self, key) -> int:
        """``get`` for a key known not to be in ``raw`` (long, or never put): by its MD5."""
        return self.get_hash(md5(key).digest())

    def put_hash(self, digest: bytes, offset: int) -> None:
        self.merge_hash(digest, offset, newest=False)
        self.latest_offset = offset

    def merge_hash(self, digest: bytes, offset: int, *, newest: bool = True, key: bytes | None = None) -> None:
        """Set ``digest``'s offset (with ``newest``: only if larger -- merging per-segment results, where keys
        with the same MD5 meet out of order). ``key`` (short enough) is remembered raw for hot lookups."""
        if self.native is not None:
            self.native.merge_hash(digest, offset, newest, key)
            return
        cell = self.cells.get(digest)
        if cell is None and self.runs:
            run, i = self._run_find(digest)
            if run is not None:
                if not newest or offset > run.off[i]:
                    run.off[i] = offset
                return
        if cell is None:
            if len(self.cells) >= self.spill_keys:
                self._spill()
            cell = self.cells[digest] = [offset]
        elif not newest or offset > cell[0]:
            cell[0] = offset
        if key is not None and len(key) <= RAW_KEY_MAX:
            self.raw[key] = cell

    def get_hash(self, digest: bytes) -> int:
        if self.native is not None:
            return self.native.get_hash(digest)
        cell = self.cells.get(digest)
        if cell is not None:
            return cell[0]
        for run in self.runs:
            i = run.find(digest)
            if i >= 0:
                return run.off[i]
        return -1

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def clear(self) -> None:
        if self.native is not None:
            self.native.clear()
        self.cells.clear()
        self.raw.clear()
        self.runs.clear()
        self.spilled = 0
        self.latest_offset = -1
        self._values = None

    def items(self):
        """``(digest, offset)`` of every mapped hash."""
        if self.native is not None:
            yield from self.native.items()
            return
        for d, c in self.cells.items():
            yield d, c[0]
        for run in self.runs:
            for h, lo, off in zip(run.hi, run.lo, run.off, strict=True):
                yield h.to_bytes(8, "big") + lo.to_bytes(8, "big"), off

    def freeze(self) -> None:
        """Index the map's offsets (sorted) for :meth:`maps_none_of`; call once the map is built."""
        if self.native is not None:
            self.native.freeze()
            return
        hot = sorted(c[0] for c in self.cells.values())
        if not self.runs:
            self._values = array("q", hot)
            return
        self._values = array("q", merge(hot, *(sorted(r.off) for r in self.runs)))

    def maps_none_of(self, base_offset: int, last_offset: int) -> bool:
        """True when ``[base_offset, last_offset]`` lies inside the mapped range ``[start, latest_offset]`` and
        no key's offset in the map falls in it: then no keyed record of a batch with that range is the latest
        for its key, and ``shouldRetainRecord`` drops them all (keyless records are dropped anyway), so the
        batch's records need not be read. False when unknown (not frozen, or outside the mapped range)."""
        if base_offset < self.start or last_offset > self.latest_offset:
            return False
        if self.native is not None:
            return self.native.maps_none_of(base_offset, last_offset) is True
        v = self._values
        if v is None:
            return False
        i = bisect_left(v, base_offset)
        return i == len(v) or v[i] > last_offset

    def __len__(self) -> int:
        return self.size
