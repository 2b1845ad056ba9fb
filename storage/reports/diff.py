"""Structured differences between two data dirs, partition dirs or segment files (``kafkalog diff``).

Three levels:

* ``bytes``: which files differ (present on one side only, or different content with the first differing byte);
* ``batches``: per partition, batches aligned by base offset; the first batch whose bytes differ (and which
  header fields differ), batches present on one side only;
* ``records``: per partition, records aligned by offset; the first record whose timestamp, key, value or headers
  differ, and the offsets present on one side only (as ranges).

Other engines' differential tests use :func:`diff_paths` (``result.equal``, ``result.differences``).
Memory is bounded by one batch per side: segments are mmapped and compared as they stream.

An offset spec (``offset_spec``, rpk's and kcat's grammar, :mod:`kafkalog.storage.log.offset_spec`) narrows the
batches and records levels to a range of each partition: it is resolved on each side (log start and end
offsets, time indexes) and the union of the two ranges is compared, so that a record in either side's range
is never left out; reading starts at the batch the offset index points to.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kafkalog.storage.errors import ConfigError, LogDirError
from kafkalog.storage.files.findings import Finding, note
from kafkalog.storage.io.fs import UrlPath, as_path, is_url, open_input, url_files
from kafkalog.storage.log.datadir import is_partition_dir, resolve_partition_dirs
from kafkalog.storage.log.offset_spec import OffsetSpec
from kafkalog.storage.reports.partition_records import (
    BatchInfo,
    Window,
    iter_partition_batches,
    iter_partition_records,
    offset_window,
)

LEVELS = ("bytes", "batches", "records")
_CHUNK = 1 << 20


# ----------------------------------------------------------------------------------------------- layout


# ------------------------------------------------------------------------------------------- results


@dataclass
class Difference:
    kind: str  # only-in-a, only-in-b, file, batch, batch-only-in-a, batch-only-in-b, record, offsets-only-in-a/b
    path: str  # relative path of the file / partition concerned
    note: Finding  # what differs, as a code and its facts (``kafkalog.facts`` words it: the command's ``detail``)
    offset: int | None = None
    a: dict[str, Any] | None = None
    b: dict[str, Any] | None = None

    def to_dict(self) -> dict:
        """The fields; the note as its ``code`` and ``facts``."""
        return {"kind": self.kind, "path": self.path, "code": self.note.kind, "facts": dict(self.note.facts),
                "offset": self.offset, "a": self.a, "b": self.b}


@dataclass
class DiffResult:
    a: str
    b: str
    level: str
    differences: list[Difference] = field(default_factory=list)
    partitions_compared: int = 0
    files_compared: int = 0

    @property
    def equal(self) -> bool:
        return not self.differences

    def summary(self) -> dict:
        """JSON (``diff --json``): ``differences`` counts them per kind, as a list of ``{kind, count}`` (a kind such
        as ``only-in-a`` is a value, never a key)."""
        kinds: dict[str, int] = {}
        for d in self.differences:
            kinds[d.kind] = kinds.get(d.kind, 0) + 1
        return {"a": self.a, "b": self.b, "level": self.level, "equal": self.equal,
                "partitions": self.partitions_compared, "files": self.files_compared,
                "differences": [{"kind": k, "count": n} for k, n in kinds.items()]}


# ------------------------------------------------------------------------------------------- compare


def _first_byte_difference(fa: Path, fb: Path) -> int | None:
    """Position of the first differing byte (or of the shorter file's end), None when identical."""
    sa, sb = fa.stat().st_size, fb.stat().st_size
    pos = 0
    with open_input(fa) as a, open_input(fb) as b:
        while True:
            ca = a.read(_CHUNK)
            cb = b.read(_CHUNK)
            if ca != cb:
                n = min(len(ca), len(cb))
                for i in range(n):
                    if ca[i] != cb[i]:
                        return pos + i
                return pos + n
            if not ca:
                return None if sa == sb else pos
            pos += len(ca)


def _files(root: Path) -> dict[str, Path]:
    if is_url(root):  # listed through the filesystem seam
        return dict(url_files(cast(UrlPath, root)))  # type: ignore[arg-type]
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for n in files:
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = p
    return out


def _diff_bytes(ra: Path, rb: Path, res: DiffResult, ignore: tuple[str, ...]) -> None:
    fa, fb = _files(ra), _files(rb)

    def skip(rel: str) -> bool:
        return any(Path(rel).match(g) for g in ignore)

    for rel in sorted(set(fa) | set(fb)):
        if skip(rel):
            continue
        if rel not in fb:
            res.differences.append(Difference("only-in-a", rel, note(rel, "diff.fileOnlyIn", side="a"),
                                              a={"size": fa[rel].stat().st_size}))
            continue
        if rel not in fa:
            res.differences.append(Difference("only-in-b", rel, note(rel, "diff.fileOnlyIn", side="b"),
                                              b={"size": fb[rel].stat().st_size}))
            continue
        res.files_compared += 1
        pos = _first_byte_difference(fa[rel], fb[rel])
        if pos is not None:
            sa, sb = fa[rel].stat().st_size, fb[rel].stat().st_size
            res.differences.append(Difference(
                "file", rel, note(rel, "diff.fileDiffers", position=pos, sizeA=sa, sizeB=sb),
                a={"size": sa, "position": pos}, b={"size": sb, "position": pos}))


_V2_FIELDS = (
    ("baseOffset", 0, 8), ("batchLength", 8, 12), ("partitionLeaderEpoch", 12, 16), ("magic", 16, 17),
    ("crc", 17, 21), ("attributes", 21, 23), ("lastOffsetDelta", 23, 27), ("baseTimestamp", 27, 35),
    ("maxTimestamp", 35, 43), ("producerId", 43, 51), ("producerEpoch", 51, 53), ("baseSequence", 53, 57),
    ("recordsCount", 57, 61),
)


def _batch_facts(b: BatchInfo) -> dict[str, Any]:
    """Where a batch is and what it holds: the facts of a differing batch's note."""
    return {"segment": b.segment, "position": b.position, "baseOffset": b.base_offset, "lastOffset": b.last_offset,
            "magic": b.magic}


def _batch_field_differences(x: BatchInfo, y: BatchInfo) -> list[str]:
    if x.magic >= 2 and y.magic >= 2 and len(x.data) >= 61 and len(y.data) >= 61:
        fields = [n for n, s, e in _V2_FIELDS if x.data[s:e] != y.data[s:e]]
        if x.data[61:] != y.data[61:]:
            fields.append("records")
        return fields
    if x.magic != y.magic:
        return ["magic"]
    return ["message"]


def _window(pa: Path, pb: Path, spec: OffsetSpec | None) -> Window | None:
    """The union of ``spec``'s ranges in A and in B (None: everything)."""
    if spec is None:
        return None
    (la, ha), (lb, hb) = offset_window(pa, spec), offset_window(pb, spec)
    if la >= ha:
        return lb, hb
    if lb >= hb:
        return la, ha
    return min(la, lb), max(ha, hb)


def _diff_batches(pa: Path, pb: Path, rel: str, res: DiffResult, limit: int,
                  spec: OffsetSpec | None = None) -> None:
    window = _window(pa, pb, spec)
    ia, ib = iter_partition_batches(pa, window), iter_partition_batches(pb, window)
    x, y = next(ia, None), next(ib, None)
    reported_batch = False
    only = {"a": 0, "b": 0}

    def only_in(side: str, batch: BatchInfo) -> None:
        if only[side] < limit:
            res.differences.append(Difference(f"batch-only-in-{side}", rel, note(
                rel, "diff.batchOnlyIn", side=side, baseOffset=batch.base_offset, lastOffset=batch.last_offset),
                batch.base_offset, **{side: batch.header()}))
        only[side] += 1

    while x is not None or y is not None:
        if y is None or (x is not None and x.last_offset < y.base_offset):
            assert x is not None  # (the loop runs while one side is left)
            only_in("a", x)
            x = next(ia, None)
        elif x is None or y.last_offset < x.base_offset:
            only_in("b", y)
            y = next(ib, None)
        else:
            if x.data != y.data and not reported_batch:
                fields = _batch_field_differences(x, y)
                res.differences.append(Difference(
                    "batch", rel, note(rel, "diff.batch", offset=max(x.base_offset, y.base_offset),
                                       a=_batch_facts(x), b=_batch_facts(y), fields=fields),
                    max(x.base_offset, y.base_offset), a=x.header() | {"fields": fields}, b=y.header()))
                reported_batch = True
            # advance the side(s) that end first
            if x.last_offset <= y.last_offset:
                nx = next(ia, None)
            else:
                nx = x
            if y.last_offset <= x.last_offset:
                ny = next(ib, None)
            else:
                ny = y
            x, y = nx, ny
    for side in ("a", "b"):
        if only[side] > limit:
            res.differences.append(Difference(f"batch-only-in-{side}", rel, note(
                rel, "diff.moreBatchesOnlyIn", side=side, batches=only[side] - limit)))


class _Ranges:
    """Offsets on one side only, collapsed into ranges (the first ``limit`` kept, the rest counted)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.ranges: list[list[int]] = []
        self.count = 0
        self.dropped = 0

    def add(self, off: int) -> None:
        self.count += 1
        if self.ranges and self.ranges[-1][1] == off - 1:
            self.ranges[-1][1] = off
        elif len(self.ranges) < self.limit:
            self.ranges.append([off, off])
        else:
            self.dropped += 1


def _record_dict(t: tuple) -> dict:
    return {"offset": t[0], "timestamp": t[1], "key": None if t[2] is None else t[2].hex(),
            "value": None if t[3] is None else t[3][:256].hex(), "headers": [[k, None if v is None else v.hex()]
                                                                           for k, v in t[4]],
            "segment": t[5], "position": t[6]}


def _diff_records(pa: Path, pb: Path, rel: str, res: DiffResult, limit: int,
                  spec: OffsetSpec | None = None) -> None:
    window = _window(pa, pb, spec)
    ia, ib = iter_partition_records(pa, window), iter_partition_records(pb, window)
    x, y = next(ia, None), next(ib, None)
    only_a, only_b = _Ranges(limit), _Ranges(limit)
    first_diff: tuple[tuple, tuple, list[str]] | None = None
    ndiff = 0
    while x is not None or y is not None:
        if y is None or (x is not None and x[0] < y[0]):
            assert x is not None  # (the loop runs while one side is left)
            only_a.add(x[0])
            x = next(ia, None)
        elif x is None or y[0] < x[0]:
            only_b.add(y[0])
            y = next(ib, None)
        else:
            if x[1:5] != y[1:5]:
                ndiff += 1
                if first_diff is None:
                    names = [n for n, i in (("timestamp", 1), ("key", 2), ("value", 3), ("headers", 4))
                             if x[i] != y[i]]
                    first_diff = (x, y, names)
            x, y = next(ia, None), next(ib, None)
    if first_diff is not None:
        fx, fy, names = first_diff
        res.differences.append(Difference(
            "record", rel, note(rel, "diff.record", offset=fx[0], fields=names, records=ndiff), fx[0],
            a=_record_dict(fx) | {"fields": names}, b=_record_dict(fy)))
    for side, r in (("a", only_a), ("b", only_b)):
        if r.count:
            res.differences.append(Difference(
                f"offsets-only-in-{side}", rel, note(rel, "diff.offsetsOnlyIn", side=side, offsets=r.count,
                                                     ranges=[list(x) for x in r.ranges], dropped=r.dropped),
                r.ranges[0][0], **{side: {"count": r.count, "ranges": r.ranges}}))


def _roots(a: Path, b: Path) -> tuple[str, list[tuple[str, Path | None, Path | None]]]:
    """Pair up the partitions of A and B: ``(kind, [(relative name, partition dir A, partition dir B)])``."""
    if is_partition_dir(a) or is_partition_dir(b):
        return "partition", [(a.name if a.name == b.name else f"{a.name}|{b.name}", a, b)]
    pa = {p.name: p for p in resolve_partition_dirs(a, read_only=True)}
    pb = {p.name: p for p in resolve_partition_dirs(b, read_only=True)}
    return "datadir", [(n, pa.get(n), pb.get(n)) for n in sorted(set(pa) | set(pb))]


def diff_paths(a: str | os.PathLike, b: str | os.PathLike, *, level: str = "records",
               ignore: tuple[str, ...] = (".lock",), limit: int = 20,
               offset_spec: OffsetSpec | None = None) -> DiffResult:
    """Compare two data dirs, two partition dirs or two ``.log`` files at ``level`` (bytes, batches, records).

    ``ignore``: glob patterns of files left out of the bytes comparison. ``limit`` caps the number of
    one-sided batches/offset ranges listed per partition. ``offset_spec``: only that range of each partition
    (batches and records levels; see the module docs).
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}")
    if offset_spec is not None and level == "bytes":
        raise ConfigError("an offset range applies to the batches and records levels, not to --level bytes")
    pa, pb = as_path(a), as_path(b)  # (a URL: read through the filesystem seam)
    for p in (pa, pb):
        if not p.exists():
            raise LogDirError("no such file or directory", str(p))
    res = DiffResult(str(pa), str(pb), level)
    if pa.is_file() and pb.is_file():
        res.files_compared = 1
        if level == "bytes":
            pos = _first_byte_difference(pa, pb)
            if pos is not None:
                res.differences.append(Difference("file", pa.name, note(pa.name, "diff.filesDiffer", position=pos),
                                                  a={"position": pos}, b={"position": pos}))
            return res
        # a single segment: compare as a one-segment partition
        return _diff_segment_files(pa, pb, res, limit, offset_spec)
    if pa.is_file() != pb.is_file():
        raise LogDirError("cannot compare a file with a directory", f"{pa} / {pb}")
    if level == "bytes":
        _diff_bytes(pa, pb, res, ignore)
        return res
    _kind, pairs = _roots(pa, pb)
    for rel, x, y in pairs:
        if x is None:
            res.differences.append(Difference("only-in-b", rel, note(rel, "diff.partitionOnlyIn", side="b")))
            continue
        if y is None:
            res.differences.append(Difference("only-in-a", rel, note(rel, "diff.partitionOnlyIn", side="a")))
            continue
        res.partitions_compared += 1
        if level == "batches":
            _diff_batches(x, y, rel, res, limit, offset_spec)
        else:
            _diff_records(x, y, rel, res, limit, offset_spec)
    return res


def _diff_segment_files(fa: Path, fb: Path, res: DiffResult, limit: int,
                        spec: OffsetSpec | None = None) -> DiffResult:
    # each file is read as the only segment of a partition (partition_records)
    if res.level == "batches":
        _diff_batches(fa, fb, fa.name, res, limit, spec)
    else:
        _diff_records(fa, fb, fa.name, res, limit, spec)
    return res


__all__ = ["DiffResult", "Difference", "LEVELS", "diff_paths", "is_partition_dir"]
