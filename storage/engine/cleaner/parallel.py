"""The offset-map pass over several dirty segments at once, in worker processes.

The map is a pure function of the dirty section as long as it does not fill up: for every key (MD5) the offset
of its last keyed record at or above the first dirty offset, skipping aborted transactional batches. Each worker
maps whole segments on its own and returns ``{key: last offset}``; merging the results in segment order (later
segments win) and then hashing each distinct key once gives exactly the map the sequential pass builds --
provided the map never filled up. Since the number of distinct hashes only grows, that is the case iff the final
count is below the capacity; otherwise the caller reruns the sequential pass, which stops where the broker stops.

The transaction state a worker needs at its segment's start is known without reading earlier segments: the
aborted transactions (from the ``.txnindex`` files) with ``firstOffset < start <= lastOffset`` are ongoing there.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
from hashlib import md5
from pathlib import Path

from kafkalog.storage.engine.cleaner.offset_map import OffsetMap
from kafkalog.storage.engine.cleaner.records import map_records
from kafkalog.storage.engine.cleaner.txn import AbortedTxn, CleanedTransactionMetadata
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.records.batch import RecordBatch
from kafkalog.storage.records.reader import iter_batches
from kafkalog.storage.records.record_grammar import Slow

#: Below this many dirty bytes the sequential pass is used (process start-up is not worth it).
PARALLEL_MIN_BYTES = 32 * 1024 * 1024
#: Above this many distinct keys the sequential pass is used: each worker's key dict and the merged one cost
#: about 100 bytes per key, and the sequential pass keeps the map compact (see ``cleaner_map``).
PARALLEL_MAX_KEYS = 1 << 21


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class _KeyDict:
    """An ``OffsetMap`` stand-in for :func:`map_records` in a worker: every key raw, no hashing, no capacity."""

    __slots__ = ("raw",)

    def __init__(self) -> None:
        self.raw: dict[bytes, list[int]] = {}

    def new_cell(self, key: bytes, offset: int) -> list[int]:
        cell = self.raw[key] = [offset]
        return cell


def _map_segment(task: tuple) -> tuple[str, object]:
    """Worker: map one segment. Returns ``("ok", {key: offset})``, ``("error", message)`` or ``("full", None)``
    when the segment alone holds ``limit`` distinct keys (the map would fill up: the sequential pass decides
    where, and the worker's memory stays bounded by the map's capacity)."""
    path, seg_start, start, aborted, limit = task
    txn = CleanedTransactionMetadata()
    txn.add_aborted_transactions(t for t in aborted if t.first_offset >= seg_start)
    for t in aborted:
        if t.first_offset < seg_start <= t.last_offset:
            txn.ongoing_aborted[t.producer_id] = [t, None]
    keys = _KeyDict()
    raw = keys.raw
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return "ok", {}
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            for b in iter_batches(mm, path=path):
                if b.last_offset < start:
                    continue
                if b.is_control:
                    txn.on_control_batch_read(b)
                elif not txn.on_batch_read(b):
                    done = False
                    if (isinstance(b, RecordBatch) and b.magic >= 2 and b.base_offset >= start
                            and b.records_count >= 0 and b.is_valid()):
                        data = b.decompressed_payload()
                        try:
                            map_records(data if isinstance(data, bytes) else bytes(data), b.records_count,
                                        b.base_offset, keys)  # type: ignore[arg-type]
                            done = True
                        except (Slow, IndexError):
                            pass
                    if not done:
                        for t in b.iter_record_tuples():
                            if t[2] is not None and t[0] >= start:
                                k = bytes(t[2])
                                cell = raw.get(k)
                                if cell is None:
                                    raw[k] = [t[0]]
                                else:
                                    cell[0] = t[0]
                del b
                if len(raw) >= limit:
                    return "full", None
        finally:
            try:
                mm.close()
            except BufferError:  # a view is still referenced: the mapping goes with the object
                pass
    except KafkaLogError as e:
        return "error", str(e)
    return "ok", {k: c[0] for k, c in raw.items()}


def build_offset_map_parallel(segments: list[tuple[str, int]], start: int, end: int, aborted: list[AbortedTxn],
                              offset_map: OffsetMap, workers: int) -> bool:
    """Map ``segments`` (``(path, base offset)`` of the dirty segments, in order) with ``workers`` processes.

    Returns True when ``offset_map`` now holds exactly what the sequential pass would build (the map did not
    fill up); False when the caller must run the sequential pass (map would fill, or a segment needs the careful
    path's error).
    """
    limit = min(offset_map.capacity, PARALLEL_MAX_KEYS)
    tasks = [(path, max(base, start), start, aborted, limit) for path, base in segments]
    ctx = multiprocessing.get_context("fork")
    merged: dict[bytes, int] = {}
    with ctx.Pool(min(workers, len(tasks))) as pool:
        for status, result in pool.imap(_map_segment, tasks):
            if status != "ok":
                pool.terminate()
                return False
            assert isinstance(result, dict)  # "ok": the worker's {key: offset}
            merged.update(result)
            del result
            if len(merged) >= limit:  # distinct keys >= distinct hashes: the map fills up somewhere
                pool.terminate()
                return False
    offset_map.clear()
    offset_map.start = start
    merge_hash = offset_map.merge_hash
    for key, off in merged.items():
        # keys with the same MD5: the last put (the largest offset) wins
        merge_hash(md5(key).digest(), off, key=key)
    if offset_map.size >= offset_map.capacity:
        offset_map.clear()
        return False
    offset_map.latest_offset = end - 1
    return True


def dirty_segment_files(segments) -> list[tuple[str, int]]:
    """``(path, base offset)`` of SegmentViews."""
    return [(str(Path(s.path)), s.base_offset) for s in segments]
