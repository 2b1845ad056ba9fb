"""Where remote segments live: a pluggable layout, and Kafka's ``LocalTieredStorage`` layout.

``LocalTieredStorage`` (kafka-storage's test jar, ``org.apache.kafka.server.log.remote.storage``) stores what
``RemoteLogManager`` uploads (``RemoteStorageManager.copyLogSegmentData``) under
``<dir>/kafka-tiered-storage/`` (``ROOT_STORAGE_DIR_NAME``):

* one directory per topic-partition, ``<topic>-<partition>-<topicId>`` (``RemoteTopicPartitionDirectory``,
  pattern ``(topic chars+)-(\\d+)-([a-zA-Z0-9_-]{22})``);
* per segment, ``<startOffset:020d>-<segmentUuid><suffix>`` (``RemoteLogSegmentFileset.RemoteLogSegmentFileType``:
  ``.log``, ``.index``, ``.timeindex``, ``.txnindex`` (optional: only when the segment has one),
  ``.leader_epoch_checkpoint`` (the leader epoch cache up to the segment's end, in the ``leader-epoch-checkpoint``
  text format) and ``.snapshot`` (the producer snapshot at the segment's end offset + 1)).

A :class:`RemoteLayout` lists partitions and segments and gives a local path for each file; another plugin's
layout is another class with the same three methods. Stores on ``s3://`` and other fsspec/pyarrow filesystems
are listed remotely and each segment's files are fetched into a local cache directory on first use (kafkalog's
readers map local files).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kafkalog.storage.errors import LogDirError
from kafkalog.storage.files.partition_metadata import PartitionMetadata
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io import fs
from kafkalog.storage.io.local import open_regular
from kafkalog.storage.log.paths import DATA_DIR, FILE, PARENT, PathError, classify
from kafkalog.storage.remote.tiered import by_tier

#: file kind -> suffix (``RemoteLogSegmentFileType``)
FILE_KINDS: dict[str, str] = {
    "log": ".log",
    "index": ".index",
    "timeindex": ".timeindex",
    "txnindex": ".txnindex",
    "leader_epoch_checkpoint": ".leader_epoch_checkpoint",
    "snapshot": ".snapshot",
}
#: kinds ``LocalTieredStorage`` always writes (``.txnindex`` is optional)
REQUIRED_KINDS = ("log", "index", "timeindex", "leader_epoch_checkpoint", "snapshot")
ROOT_STORAGE_DIR_NAME = "kafka-tiered-storage"
_TP_DIR = re.compile(r"([a-zA-Z0-9._-]+)-(\d+)-([a-zA-Z0-9_-]{22})")
_FILE = re.compile(r"(\d+)-([a-zA-Z0-9_-]{22})(\.[a-z_]+)")
_SUFFIX_KIND = {v: k for k, v in FILE_KINDS.items()}


@dataclass
class RemoteSegment:
    """One remote segment: its ``RemoteLogSegmentId`` (topic id partition + uuid), start offset and files."""

    topic: str
    partition: int
    topic_id: str
    segment_id: str
    start_offset: int
    files: dict[str, str] = field(default_factory=dict)  # kind -> path in the store
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return self.sizes.get("log", 0)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}/{self.start_offset}-{self.segment_id}"


class RemoteLayout(Protocol):
    """A remote store in one RemoteStorageManager's layout."""

    root: str

    def partitions(self) -> list[tuple[str, int, str]]:
        """``(topic, partition, topic id)`` of every partition the store holds."""
        ...

    def segments(self, topic: str, partition: int, topic_id: str) -> list[RemoteSegment]:
        """The partition's segments by start offset."""
        ...

    def local_path(self, seg: RemoteSegment, kind: str) -> Path | None:
        """A local file with the content of ``seg``'s file of ``kind`` (None: the store has none)."""
        ...


class LocalTieredStorageLayout:
    """Kafka's ``LocalTieredStorage`` layout, on a local directory or a URL (``s3://bucket/prefix``,
    ``memory://...``: the filesystems of :mod:`kafkalog.storage.io.fs`). ``root`` is the plugin's ``dir``
    (holding ``kafka-tiered-storage/``) or that ``kafka-tiered-storage`` directory itself."""

    name = "LocalTieredStorage"

    def __init__(self, root: str | os.PathLike, options: dict[str, str] | None = None):
        self.root = os.fspath(root)
        self._cache: Path | None = None
        self._spec, base = fs.split_uri(self.root, options or {})  # a local path, file:// or a URL alike
        sub = self._join(base, ROOT_STORAGE_DIR_NAME)
        named = base.rstrip("/").rsplit("/", 1)[-1] == ROOT_STORAGE_DIR_NAME
        if self._isdir(sub):
            base, named = sub, True
        elif not self._isdir(base):
            raise LogDirError("not a directory (expected LocalTieredStorage's dir or its kafka-tiered-storage/)",
                              self.root)
        self.base = base
        if not named and not self.partitions():  # neither the layout's root dir nor any of its partition dirs
            raise LogDirError(f"not a tiered-storage store: no {ROOT_STORAGE_DIR_NAME}/ and no "
                              f"<topic>-<partition>-<topicId> dir (expected LocalTieredStorage's dir or its "
                              f"{ROOT_STORAGE_DIR_NAME}/){_what_it_is(self.root) if self._spec.is_local else ''}",
                              self.root)

    # --- filesystem access (the one seam: kafkalog.storage.io.fs)
    def _join(self, a: str, b: str) -> str:
        return a.rstrip("/") + "/" + b

    def _isdir(self, p: str) -> bool:
        e = fs.info(self._spec, p)
        return e is not None and e.is_dir

    def _list(self, p: str) -> list[tuple[str, str, bool, int]]:
        return [(e.name, e.path, e.is_dir, e.size) for e in fs.listdir(self._spec, p)]

    def display(self, p: str) -> str:
        return fs.display(self._spec, p)

    # --- the layout
    def partitions(self) -> list[tuple[str, int, str]]:
        out = []
        for name, _path, is_dir, _ in self._list(self.base):
            m = _TP_DIR.fullmatch(name)
            if is_dir and m:
                out.append((m.group(1), int(m.group(2)), m.group(3)))
        return sorted(out)

    def partition_dir(self, topic: str, partition: int, topic_id: str) -> str:
        return self._join(self.base, f"{topic}-{partition}-{topic_id}")

    def segments(self, topic: str, partition: int, topic_id: str) -> list[RemoteSegment]:
        d = self.partition_dir(topic, partition, topic_id)
        segs: dict[str, RemoteSegment] = {}
        for name, path, is_dir, size in self._list(d):
            m = _FILE.fullmatch(name)
            if is_dir or not m or m.group(3) not in _SUFFIX_KIND:
                continue
            start, sid, kind = int(m.group(1)), m.group(2), _SUFFIX_KIND[m.group(3)]
            seg = segs.setdefault(sid, RemoteSegment(topic, partition, topic_id, sid, start))
            seg.files[kind] = path
            seg.sizes[kind] = size
        return sorted(segs.values(), key=lambda s: (s.start_offset, s.segment_id))

    def all_segments(self) -> list[RemoteSegment]:
        return [s for tp in self.partitions() for s in self.segments(*tp)]

    def local_path(self, seg: RemoteSegment, kind: str) -> Path | None:
        if kind not in seg.files:
            return None
        if self._spec.is_local:
            return Path(seg.files[kind])
        if self._cache is None:
            self._cache = Path(tempfile.mkdtemp(prefix="kafkalog-remote-"))
        # all of the segment's files side by side, under their own names (the readers find the indexes beside
        # the .log by name)
        d = self._cache / f"{seg.topic}-{seg.partition}-{seg.topic_id}"
        d.mkdir(exist_ok=True)
        for src in seg.files.values():
            dst = d / os.path.basename(src)
            if not dst.exists():
                fs.fetch(self._spec, src, dst)
        return d / os.path.basename(seg.files[kind])

    def evict(self, topic: str, partition: int) -> None:
        """Remove the local copies :meth:`local_path` fetched of the partition's files (a URL store's; a later
        :meth:`local_path` fetches them again). A hard link made to one elsewhere keeps its content."""
        if self._cache is None:
            return
        for d in self._cache.iterdir():
            m = _TP_DIR.fullmatch(d.name)
            if m and (m.group(1), int(m.group(2))) == (topic, partition):
                shutil.rmtree(d, ignore_errors=True)

    def close(self) -> None:
        if self._cache is not None:
            shutil.rmtree(self._cache, ignore_errors=True)
            self._cache = None

    def __enter__(self) -> LocalTieredStorageLayout:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _what_it_is(root: str) -> str:
    """What the one path contract says a local directory that is not a store is, as a clause of the refusal."""
    try:
        kind = classify(root).kind
    except PathError as e:
        return f"; it contains the data dir(s) {', '.join(e.data_dirs)}" if e.case == PARENT else ""
    return f"; it is {'a Kafka data dir' if kind == DATA_DIR else 'a Kafka partition dir'}" if kind != FILE else ""


#: layout name -> class (another plugin's layout registers here)
LAYOUTS: dict[str, type] = {"LocalTieredStorage": LocalTieredStorageLayout}


def is_remote_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` (local) looks like a LocalTieredStorage root (``kafka-tiered-storage/`` or its
    ``<topic>-<partition>-<topicId>`` dirs)."""
    p = Path(path)
    if (p / ROOT_STORAGE_DIR_NAME).is_dir():
        return True
    if p.name == ROOT_STORAGE_DIR_NAME and p.is_dir():
        return True
    return False


def open_remote_store(root: str | os.PathLike, layout: str = "LocalTieredStorage",
                      options: dict[str, str] | None = None) -> LocalTieredStorageLayout:
    cls = LAYOUTS.get(layout)
    if cls is None:
        raise LogDirError(f"unknown remote storage layout {layout!r} (known: {', '.join(LAYOUTS)})", os.fspath(root))
    return cls(root, options)


def remote_partition_view(store: LocalTieredStorageLayout, root: str | os.PathLike, *, topic: str | None = None,
                          partition: int | None = None, segment_ids: set[str] | None = None,
                          local_starts: Mapping[tuple[str, int], int] | None = None) -> Path:
    """A read-only data dir view of the store under ``root`` (created; the caller removes it): per partition a
    ``<topic>-<partition>`` dir whose ``<startOffset:020d>.log``/``.index``/``.timeindex``/``.txnindex`` are
    hard links to the remote files (copies when ``root`` is on another filesystem; a URL store's files are
    fetched into the local cache first) and a ``partition.metadata``,
    so every reader of partition dirs (``export``, ``dump``, ``diff``) reads remote segments unchanged.
    ``segment_ids`` keeps only those segments (e.g. the ``COPY_SEGMENT_FINISHED`` ones); a segment starting
    below the end of the previous one (overlapping offsets after a leader change) is left out.
    ``local_starts`` (``(topic, partition)`` -> its local log start offset, for a view read beside the partition's
    local segments): only the offsets the remote tier serves (:func:`~kafkalog.storage.remote.tiered.by_tier`): a
    segment at or above the local log start is left out, one reaching past it is a copy of its batches below it
    (its ``.log`` alone), so that the two tiers hold each offset once."""

    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    for t, p, tid in store.partitions():
        if (topic is not None and t != topic) or (partition is not None and p != partition):
            continue
        d = base / f"{t}-{p}"
        d.mkdir(exist_ok=True)
        (d / "partition.metadata").write_bytes(PartitionMetadata(tid).to_bytes())
        nxt: int | None = None
        for seg in store.segments(t, p, tid):
            if "log" not in seg.files or (segment_ids is not None and seg.segment_id not in segment_ids):
                continue
            if nxt is not None and seg.start_offset < nxt:
                continue
            lp = store.local_path(seg, "log")
            assert lp is not None
            with Segment(lp, seg.start_offset) as s:
                nxt = s.read_next_offset()
                local_start = None if local_starts is None else local_starts.get((t, p))
                served = (seg.start_offset, nxt) if local_start is None else \
                    by_tier(seg.start_offset, nxt, local_start)[0]
                if served is None:
                    continue
                if served[1] < nxt:  # the local log serves the rest: the batches below its start
                    _write_head(s, served[1], d / f"{seg.start_offset:020d}{FILE_KINDS['log']}")
                    continue
            for kind in ("log", "index", "timeindex", "txnindex"):
                src = store.local_path(seg, kind)
                if src is not None:
                    dst = d / f"{seg.start_offset:020d}{FILE_KINDS[kind]}"
                    try:  # a hard link: kafkalog's readers follow no symlink out of a partition dir
                        os.link(src, dst)
                    except OSError:  # another filesystem: a copy
                        shutil.copyfile(src, dst)
    return base


def _write_head(seg: Segment, end: int, dst: Path) -> None:
    """The batches of ``seg`` below offset ``end`` (a batch holding ``end`` - 1 whole) as the file ``dst``."""
    found = seg.translate_offset(end)
    cut = seg.size
    if found is not None:
        first = next(iter(seg.iter_batches(found.position)))
        cut = first.position if first.base_offset >= end else first.position + first.size
    with os.fdopen(open_regular(seg.path, LogDirError), "rb") as src, open(dst, "wb") as out:
        out.write(src.read(cut))
