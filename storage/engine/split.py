"""The broker's offset-overflow split (``LocalLog.splitOverflowedSegment``, KAFKA-6264).

A segment written by an old broker can hold batches whose offsets do not fit its int32 relative range. At load
the broker copies its batches into new segments that each fit (a new segment at each batch that no longer fits,
named by that batch's base offset), filled by ``LogSegment.appendFromFile`` in chunks of up to 1 MiB (a larger
single batch is its own chunk, and the buffer then stays that large), swaps them in and loads again. Batches are
copied, not validated: recovery follows.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalog.storage.engine.swap import BlobBuild, NewSegment, ReplaceSegments, segment_files
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files.findings import note
from kafkalog.storage.files.names import offset_file_name
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.io.ops import Blob
from kafkalog.storage.log.segment import INT32_MAX, cleaned_name, fits, replay_appends
from kafkalog.storage.records import LogScanner

SPLIT_CHUNK_BYTES = 1024 * 1024  # appendChunkFromFile's read buffer


@dataclass
class SplitSegment:
    """One segment the split creates: ``buf[start:end]`` of the original ``.log``, appended in chunks starting
    at ``appends`` (positions relative to ``start``)."""

    base_offset: int
    start: int
    end: int
    appends: list[int]


def plan_overflow_split(buf, base_offset: int) -> list[SplitSegment]:
    """How ``LocalLog.splitOverflowedSegment`` cuts a ``.log`` whose offsets overflow ``base_offset``."""
    size = len(buf)
    out: list[SplitSegment] = []
    pos = 0
    cap = SPLIT_CHUNK_BYTES
    while pos < size:
        scanner = LogScanner(buf, pos)
        first = next(iter(scanner), None)
        if first is None:
            raise KafkaLogError(f"no complete batch at byte {pos} ({scanner.stop_reason or 'end'}): the broker "
                                "cannot split this segment either (IllegalStateException); repair truncates "
                                "it only once it is split", None, pos)
        new_base = first.base_offset
        del first
        seg = SplitSegment(new_base, pos, pos, [])
        while True:  # appendFromFile: one appendChunkFromFile per iteration
            n = 0
            for b in LogScanner(buf, pos):
                ok = fits(b.last_offset, new_base)
                if ok and (n == 0 or n + b.size < cap):
                    n += b.size
                    del b
                else:
                    del b
                    break
            if n == 0:
                break
            cap = max(cap, n)
            seg.appends.append(pos - seg.start)
            pos += n
        if pos == seg.start:
            raise KafkaLogError(f"failed to append records from position {pos} into a segment at {new_base}",
                                None, pos)
        seg.end = pos
        out.append(seg)
    return out


def split_overflowed_segment(view: DirView, base_offset: int, *, index_interval_bytes: int = 4096) -> list[int]:
    """Plan the split of segment ``base_offset`` on ``view``: one :class:`ReplaceSegments` whose new segments
    hold the original bytes (indexes by the append rule per chunk, closed and trimmed, the original's mtime).
    Returns the new base offsets."""
    log_name = offset_file_name(base_offset, ".log")
    buf = view.map(log_name)
    parts = plan_overflow_split(buf, base_offset)
    if sum(p.end - p.start for p in parts) != len(buf):
        raise KafkaLogError("inconsistent segment sizes after split", view.file(log_name))
    mtime = view.mtime_ns(log_name)
    files = {}
    contents = {}
    new = []
    for p in parts:
        idx = replay_appends(buf[p.start:p.end], p.base_offset, appends=p.appends,
                             index_interval_bytes=index_interval_bytes, close=True)
        log_blob = view.blob_range(log_name, p.start, p.end - p.start)
        oi = idx.offset_index.to_bytes(trim=True)
        ti = idx.time_index.to_bytes(trim=True)

        blobs = {".log": log_blob, ".index": Blob(oi), ".timeindex": Blob(ti)}
        for suffix, blob in blobs.items():
            files[cleaned_name(p.base_offset, suffix)] = blob
            contents[offset_file_name(p.base_offset, suffix)] = blob
        new.append(NewSegment(p.base_offset, {s: b.size for s, b in blobs.items()}))
    del buf
    op = ReplaceSegments(
        view.file(""), note(view.path, "op.splitOverflow", baseOffset=base_offset, firstOverflow=INT32_MAX + 1),
        sources=[base_offset], new=new, build=BlobBuild(files, mtime), source_files=segment_files(view, base_offset),
        source_bytes=view.size(log_name))
    op.path = str(view.path)
    op.plan_on(view, contents)
    return [p.base_offset for p in parts]
