"""A segment of a partition log, named so that it can be shipped elsewhere and opened there (a Spark executor).

:meth:`PartitionLog.segment_refs <kafkalog.storage.log.partition.PartitionLog.segment_refs>` lists a partition's
segments as :class:`SegmentRef` s (picklable: a filesystem spec and paths, the base offset, the size seen when
listed, the next segment's base offset, which file it was: a :class:`~kafkalog.storage.io.file_stamp.FileStamp`);
:class:`OpenSegments` opens them again as storage's :class:`~kafkalog.storage.files.segment.Segment`, whose rules
(the byte range of an offset or time range, where a segment may be split) every reader then follows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io.closing import Closing
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.io.file_stamp import FileStamp
from kafkalog.storage.io.fs import FsSpec, UrlPath, display

LOCAL = FsSpec("")


def fs_path(spec: FsSpec, fspath: str) -> str | UrlPath:
    """A path of ``spec``'s filesystem as the partition model opens it: a local path, or a URL (read through the
    filesystem seam)."""
    return fspath if spec.is_local else UrlPath(spec, fspath)


@dataclass(frozen=True)
class SegmentRef:
    """One segment of a partition log as it was listed: picklable, with no rule of its own (open it with
    :class:`OpenSegments` or :meth:`open` for those)."""

    spec: FsSpec
    path: str  # the .log, in ``spec``'s filesystem
    topic: str | None
    partition: int | None
    base_offset: int
    size: int  # the .log's size when listed: a reader reads no further
    next_base_offset: int | None  # base offset of the following segment of the same partition
    stamp: FileStamp | None = None  # which file the .log was when listed (None: not known, not checked)

    @property
    def name(self) -> str:
        """The name the ``.log`` is reported under."""
        return display(self.spec, self.path)

    @property
    def dir(self) -> str:
        """The partition dir's path in ``spec``'s filesystem."""
        return self.path.rstrip("/").rsplit("/", 1)[0] if "/" in self.path else "."

    @property
    def partition_dir(self) -> str | UrlPath:
        """The partition dir as the partition model opens it (:func:`fs_path`)."""
        return fs_path(self.spec, self.dir)

    def may_hold(self, start_offset: int | None, end_offset: int | None) -> bool:
        """Whether the segment may hold offsets in ``[start_offset, end_offset)`` by base offsets alone (as
        ``LocalLog.segments(from, to)`` chooses: the floor segment of ``start_offset`` and later ones below
        ``end_offset``)."""
        if start_offset is not None and self.next_base_offset is not None and self.next_base_offset <= start_offset:
            return False
        return end_offset is None or self.base_offset < end_offset

    @contextmanager
    def open(self) -> Iterator[Segment]:
        """The segment, opened as :class:`OpenSegments` opens it, closed on the way out."""
        with OpenSegments() as opened:
            yield opened.segment(self)


def segment_refs(segments: Sequence[Segment], topic: str | None, partition: int | None) -> list[SegmentRef]:
    """The refs of a partition's ``segments`` (a :class:`~kafkalog.storage.log.partition.PartitionLog`'s, by base
    offset), each with the base offset of the next one."""
    out = []
    for s, after in zip(segments, [*segments[1:], None], strict=True):
        nxt = None if after is None else after.base_offset
        path: Path | UrlPath = s.path
        spec, fspath = (path.spec, path.fspath) if isinstance(path, UrlPath) else (LOCAL, str(path))
        out.append(SegmentRef(spec, fspath, topic, partition, s.base_offset, s.size, nxt, s.stamp))
    return out


class OpenSegments(Closing):
    """Storage's segments of :class:`SegmentRef` s, their files read as every command reads them (a local one
    mapped, one under a URL through one read-only :class:`~kafkalog.storage.io.dirview.DirView` of its partition
    dir), opened when first asked for, open until :meth:`close`."""

    def __init__(self) -> None:
        self._views: dict[tuple[FsSpec, str], DirView] = {}
        self._segments: dict[tuple[FsSpec, str], Segment] = {}

    def segment(self, ref: SegmentRef) -> Segment:
        s = self._segments.get((ref.spec, ref.path))
        if s is not None:
            return s
        if ref.spec.is_local:  # its files mapped as they are
            s = Segment(ref.path, ref.base_offset)
        else:
            key = (ref.spec, ref.dir)
            view = self._views.get(key)
            if view is None:
                view = self._views[key] = DirView(ref.partition_dir, DirView.READONLY)
            s = Segment.in_view(view, ref.base_offset, ref.path.rstrip("/").rsplit("/", 1)[-1])
        self._segments[(ref.spec, ref.path)] = s
        return s

    def close(self) -> None:
        for s in self._segments.values():
            s.close()
        for v in self._views.values():
            v.close()
        self._segments.clear()
        self._views.clear()


__all__ = ["OpenSegments", "SegmentRef", "fs_path", "segment_refs"]
