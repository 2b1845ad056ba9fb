"""Data directories: one ``log.dirs`` entry (:class:`DataDir`) and several of them (:class:`DataDirs`, JBOD).

Loading is read-only. What Kafka would choke on (a sub-directory whose name does not parse, a corrupt
checkpoint, ...) becomes a :class:`Finding` in ``findings`` instead of an exception, so one bad file never
hides the rest of the directory.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Collection, Iterable, Iterator
from operator import methodcaller
from pathlib import Path
from typing import cast

from kafkalog.storage.errors import KafkaLogError, LogDirError
from kafkalog.storage.files.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    DATA_DIR_CHECKPOINTS,
    LOG_START_OFFSET_CHECKPOINT,
    MAX_CHECKPOINT_BYTES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpoint,
    read_offset_checkpoint,
)
from kafkalog.storage.files.clean_shutdown import (
    CLEAN_SHUTDOWN_FILE,
    CleanShutdownMarker,
    read_clean_shutdown,
)
from kafkalog.storage.files.findings import Finding, error, info, warning
from kafkalog.storage.files.meta_properties import META_PROPERTIES_FILE, MetaProperties, read_meta_properties
from kafkalog.storage.io.closing import Closing
from kafkalog.storage.io.dirview import DIR, FILE, SYMLINK_OUT, DirView
from kafkalog.storage.io.forward import Forward
from kafkalog.storage.io.fs import UrlPath, as_path, is_url, listdir, read_bytes
from kafkalog.storage.io.fs import info as file_info
from kafkalog.storage.io.lock import LOCK_FILE_NAME, LockStatus, lock_status
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.paths import (
    DATA_DIR,
    MISSING,
    NOT_A_DIRECTORY,
    PARTITION_DIR,
    PathError,
    PathKind,
    is_partition_listing,
    require,
    require_data_dir,
)
from kafkalog.storage.log.paths import FILE as FILE_ARGUMENT
from kafkalog.storage.log.topic_partition import METADATA_TOPIC, TopicPartitionDir, parse_topic_partition_name

REMOTE_LOG_INDEX_CACHE = "remote-log-index-cache"
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
METADATA_PARTITION_DIR = f"{METADATA_TOPIC}-0"
KNOWN_TOP_FILES = {
    META_PROPERTIES_FILE,
    LOCK_FILE_NAME,
    CLEAN_SHUTDOWN_FILE,
    BOOTSTRAP_CHECKPOINT,
    *DATA_DIR_CHECKPOINTS,
}



# ---- resolving user paths ------------------------------------------------------------------------------------
def classify_path(path: str | os.PathLike) -> str:
    """``"dataDir"``, ``"partition"`` or ``"file"``: what a command argument is, by the one path contract
    (:func:`kafkalog.storage.log.paths.classify`): a directory that is neither a data dir nor a partition dir, and a
    path that does not exist, are a :class:`~kafkalog.storage.log.paths.PathError`."""
    p = Path(path)
    if not p.is_dir():
        return "file" if p.exists() else require(p).kind
    return require(p).kind


def require_url_dir(url: UrlPath, accept: tuple[str, ...] = (DATA_DIR, PARTITION_DIR)) -> tuple[UrlPath, str]:
    """``(url, kind)``: what a directory under a URL is (a data dir or a partition dir, by the names it holds, as
    the one path contract classifies a local one), or with ``paths.FILE`` in ``accept`` a file (which Kafka file it
    is, its reader decides), else :class:`LogDirError` naming it (a :class:`~kafkalog.storage.log.paths.PathError`
    with the local path's words when it names nothing or a file)."""
    try:
        e = file_info(url.spec, url.fspath)
        if e is not None and not e.is_dir and FILE_ARGUMENT in accept:
            return url, FILE_ARGUMENT
        names = [x.name for x in listdir(url.spec, url.fspath)] if e is not None and e.is_dir else []
    except OSError as err:
        raise LogDirError(f"cannot list the directory: {err}", str(url)) from None
    if e is None or (e.is_dir and not names):  # (an object store has no empty directory: nothing is there)
        raise PathError(MISSING, str(url), "no such file or directory")  # the one path contract's answer
    if not e.is_dir:
        raise PathError(NOT_A_DIRECTORY, str(url), "not a directory")
    if is_partition_listing(names):
        kind = PARTITION_DIR
    elif any(n in KNOWN_TOP_FILES for n in names) or any(live_partition_name(n) is not None for n in names):
        kind = DATA_DIR
    else:
        raise LogDirError("not a Kafka data dir or partition dir: it holds no partition dir, no meta.properties "
                          "and no checkpoint file", str(url))
    if kind not in accept:
        what = {DATA_DIR: "data dir", PARTITION_DIR: "partition dir", FILE_ARGUMENT: "file"}
        raise LogDirError(f"a {what[kind]}, not a {' or '.join(what[a] for a in accept)}", str(url))
    return url, kind


def require_readable(path: str | os.PathLike | UrlPath,
                     accept: tuple[str, ...] = (DATA_DIR, PARTITION_DIR)) -> PathKind:
    """The one path contract for a report that only reads: a URL through the filesystem seam
    (:func:`require_url_dir`: a data dir, a partition dir or, when ``accept`` has it, a file), a local path by
    :func:`~kafkalog.storage.log.paths.require`."""
    if is_url(path):
        url, kind = require_url_dir(UrlPath.of(path), accept)  # type: ignore[arg-type]
        return PathKind(cast(Path, url), kind)
    return require(cast(str, path), accept)


def live_partition_name(name: str) -> TopicPartitionDir | None:
    """The parsed name of a live partition dir; None for ``-delete``/``-future``/``-stray`` dirs and for names
    that are not ``<topic>-<partition>``."""
    try:
        tp = parse_topic_partition_name(name)
    except LogDirError:
        return None
    return tp if tp.kind == "live" else None


def is_partition_dir(path: str | os.PathLike) -> bool:
    """A live partition directory: its name parses as ``<topic>-<partition>`` and it holds partition files (a URL:
    listed through the filesystem seam)."""
    if is_url(path):
        try:
            return live_partition_name(as_path(path).name) is not None and \
                require_url_dir(UrlPath.of(path))[1] == PARTITION_DIR  # type: ignore[arg-type]
        except LogDirError:
            return False
    p = Path(path)
    if live_partition_name(p.name) is None or not p.is_dir():
        return False
    try:
        with os.scandir(p) as it:
            return is_partition_listing([e.name for e in it])
    except OSError:
        return False


def list_partition_dirs(data_dir: str | os.PathLike, *, kinds: tuple[str, ...] = ("live",),
                        include_metadata: bool = True) -> list[tuple[Path, TopicPartitionDir]]:
    """The sub-directories of a data dir whose names parse as partition dirs of one of ``kinds``
    (``live``, ``future``, ``delete``, ``stray``), sorted by topic, then partition. Symlinks leaving the data dir,
    looping or dangling are not followed."""
    out = []
    listing = DirView(data_dir, DirView.READONLY)
    base = as_path(data_dir)
    for name in listing.names(DIR):
        if name == REMOTE_LOG_INDEX_CACHE:
            continue
        try:
            tp = parse_topic_partition_name(name)
        except LogDirError:
            continue
        if tp.kind not in kinds or (not include_metadata and tp.topic == METADATA_TOPIC):
            continue
        out.append((base / name, tp))
    out.sort(key=partition_order)
    return out


def partition_order(item: tuple[Path, TopicPartitionDir]) -> tuple[str, int, str]:
    """The order partition dirs are listed and reported in: by topic, then partition number (``-2`` before
    ``-10``), then dir name (a live dir before its ``-delete``/``-future`` ones)."""
    return item[1].topic, item[1].partition, item[0].name


def resolve_partition_dirs(paths: str | os.PathLike | Iterable[str | os.PathLike], topics: Collection[str] | None = None,
                           *, include_metadata: bool = True, read_only: bool = False) -> list[Path]:
    """The live partition dirs a command argument names: the path itself when it is a partition dir
    (:func:`is_partition_dir`), else its live partition sub-directories (sorted by topic, then partition;
    ``__cluster_metadata`` only if ``include_metadata``). ``topics`` keeps only those topics.
    :class:`~kafkalog.storage.log.paths.PathError` for a path that is neither (the one path contract); a URL
    only for a caller that ``read_only`` reads (:func:`require_readable`)."""
    if isinstance(paths, (str, os.PathLike, UrlPath)):
        paths = [paths]
    paths = list(paths)
    out: list[Path] = []
    present: set[str] = set()
    for raw in paths:
        k = require_readable(raw) if read_only else require(Path(raw))  # (a URL: through the filesystem seam)
        p, kind = k.path, k.kind
        tp = live_partition_name(p.name)
        if tp is not None and kind == PARTITION_DIR:
            present.add(tp.topic)
            if topics is None or tp.topic in topics:
                out.append(p)
            continue
        for c, tp in list_partition_dirs(p, include_metadata=include_metadata):
            present.add(tp.topic)
            if topics is None or tp.topic in topics:
                out.append(c)
    check_topics(topics, present, ", ".join(map(str, paths)))
    return out


def check_topics(requested: Collection[str] | None, present: Collection[str], where: str, *,
                 glob: bool = False) -> None:
    """A topic (``glob``: a pattern) asked for by ``--topics`` that matches no partition under the inputs is an
    error that lists the topics there, not an empty result."""
    if requested is None:
        return
    names = sorted(present)
    missing = [t for t in requested if not any(fnmatch.fnmatchcase(n, t) if glob else n == t for n in names)]
    if missing:
        shown = ", ".join(names[:40]) + (f", ... ({len(names)} topics)" if len(names) > 40 else "")
        raise LogDirError(f"no partition of topic {', '.join(sorted(missing))} here; the topics are: "
                          f"{shown or '(none: no partition dirs)'}", where)


def partition_dirs(data_dir: str | os.PathLike) -> list[tuple[Path, str, int]]:
    """The partition dirs a broker lists in its data dir's checkpoints: live and ``-future`` ones, without
    ``__cluster_metadata`` (``-delete``/``-stray`` dirs are not checkpointed), sorted by topic, then partition."""
    return [(p, tp.topic, tp.partition)
            for p, tp in list_partition_dirs(data_dir, kinds=("live", "future"), include_metadata=False)]


def data_dir_of(path: str | os.PathLike) -> Path:
    """The data dir holding ``path`` (a partition dir's parent, else ``path`` itself), resolved."""
    p = Path(path).resolve()
    return p.parent if is_partition_dir(p) else p


OffsetMap = dict[tuple[str, int], int]
"""A checkpoint file's entries: an offset by (topic, partition)."""


class DataDir(Closing):
    """One data directory, loaded read-only."""

    def __init__(self, path: str | os.PathLike | UrlPath):
        if is_url(path):  # read-only through the filesystem seam (a UrlPath: name, parent, / and str() as a Path's)
            self.path = cast(Path, require_url_dir(UrlPath.of(path), (DATA_DIR,))[0])  # type: ignore[arg-type]
        else:
            self.path = require_data_dir(cast(str, path))
        self.findings: list[Finding] = []
        self.meta_properties: MetaProperties | None = None
        self.checkpoints: dict[str, OffsetCheckpoint | None] = {}
        self.clean_shutdown: CleanShutdownMarker | None = None
        self.partition_dirs: dict[Path, TopicPartitionDir] = {}
        self.leftover_tmp_files: list[Path] = []
        self.other_entries: list[Path] = []
        self._logs: dict[Path, PartitionLog] = {}
        self._load()

    def __repr__(self) -> str:
        return f"DataDir({str(self.path)!r}, partitions={len(self.partition_dirs)})"

    # ---- loading -----------------------------------------------------------------------------------------
    def _load_url(self, listing: DirView) -> None:
        """:meth:`_load`'s files of a data dir under a URL, read through the filesystem seam (listed once)."""
        url = cast(UrlPath, self.path)

        def read(name: str, limit: int) -> bytes | None:
            if not listing.is_file(name):
                return None
            return read_bytes(url.spec, (url / name).fspath, limit)

        for name, parse in ((META_PROPERTIES_FILE, MetaProperties.from_bytes),
                            (CLEAN_SHUTDOWN_FILE, CleanShutdownMarker.from_bytes)):
            try:
                data = read(name, MAX_CHECKPOINT_BYTES)
                if data is not None:
                    setattr(self, "meta_properties" if name == META_PROPERTIES_FILE else "clean_shutdown",
                            parse(data, str(url / name)))
            except (KafkaLogError, OSError) as e:
                self.findings.append(error(url / name, getattr(e, "position", None), "metadata",
                                           getattr(e, "reason", str(e))))
        if self.meta_properties is not None:
            self.findings += [d.finding(url / META_PROPERTIES_FILE, "metadata", "error")
                              for d in self.meta_properties.validate()]
        for name in DATA_DIR_CHECKPOINTS:
            try:
                data = read(name, MAX_CHECKPOINT_BYTES)
                self.checkpoints[name] = None if data is None else OffsetCheckpoint.from_bytes(data, str(url / name))
            except (KafkaLogError, OSError) as e:
                self.checkpoints[name] = None
                self.findings.append(error(url / name, getattr(e, "position", None), "checkpoint",
                                           getattr(e, "reason", str(e))))

    def _load(self) -> None:
        if is_url(self.path):
            listing = DirView(self.path, DirView.READONLY)
            self._load_url(listing)
            self._load_listing(listing)
            return
        mp = self.path / META_PROPERTIES_FILE
        if mp.exists():
            try:
                self.meta_properties = read_meta_properties(mp)
                self.findings += [d.finding(mp, "metadata", "error") for d in self.meta_properties.validate()]
            except KafkaLogError as e:
                self.findings.append(error(mp, e.position, "metadata", e.reason))
        for name in DATA_DIR_CHECKPOINTS:
            p = self.path / name
            if not p.exists():
                self.checkpoints[name] = None
                continue
            try:
                self.checkpoints[name] = read_offset_checkpoint(p)
            except KafkaLogError as e:
                self.checkpoints[name] = None
                self.findings.append(error(p, e.position, "checkpoint", e.reason))
        try:
            self.clean_shutdown = read_clean_shutdown(self.path / CLEAN_SHUTDOWN_FILE)
        except KafkaLogError as e:  # e.g. not a regular file: the marker still "exists" for Kafka
            self.clean_shutdown = CleanShutdownMarker(path=str(self.path / CLEAN_SHUTDOWN_FILE))
            self.findings.append(warning(self.path / CLEAN_SHUTDOWN_FILE, None, "metadata", e.reason))
        self._load_listing(DirView(self.path, DirView.READONLY))

    def _load_listing(self, listing: DirView) -> None:
        for name in listing.names(None):
            ent = listing.entry(name)
            assert ent is not None
            p = self.path / name
            if ent.kind == SYMLINK_OUT:
                self.findings.append(warning(p, None, "layout", code="layout.symlinkOutOfDataDir"))
                continue
            if ent.kind == DIR:
                if name == REMOTE_LOG_INDEX_CACHE:
                    continue
                try:
                    self.partition_dirs[p] = parse_topic_partition_name(name)
                except LogDirError:
                    self.findings.append(error(p, None, "layout", code="layout.notPartitionDir", dirName=name,
                                               refuses=True))
                continue
            if ent.kind != FILE:
                if name != LOCK_FILE_NAME:
                    self.findings.append(warning(p, None, "layout", code="layout.notRegular", entry=ent.kind))
                continue
            if name.endswith(".tmp"):
                self.leftover_tmp_files.append(p)
                self.findings.append(
                    warning(p, None, "leftover", code="layout.tmpFile")
                )
            elif name not in KNOWN_TOP_FILES:
                self.other_entries.append(p)
                self.findings.append(info(p, None, "layout", code="layout.unusedInDataDir"))

    # ---- checkpoints -------------------------------------------------------------------------------------
    def _map(self, name: str) -> OffsetMap:
        """The checkpoint as a map, built once per checkpoint read (readers ask once per partition: rebuilding it
        each time made a 100,000-partition dir quadratic). Shared: callers copy it before changing it."""
        c = self.checkpoints.get(name)
        if c is None:
            return {}
        cache = self.__dict__.setdefault("_maps", {})
        hit = cache.get(name)
        if hit is None or hit[0] is not c:
            hit = cache[name] = (c, c.to_dict())
        return hit[1]

    recovery_points = Forward[OffsetMap](methodcaller("_map", RECOVERY_POINT_CHECKPOINT))
    log_start_offsets = Forward[OffsetMap](methodcaller("_map", LOG_START_OFFSET_CHECKPOINT))
    high_watermarks = Forward[OffsetMap](methodcaller("_map", REPLICATION_OFFSET_CHECKPOINT))
    clean_points = Forward[OffsetMap](methodcaller("_map", CLEANER_OFFSET_CHECKPOINT))

    @property
    def had_clean_shutdown(self) -> bool:
        return self.clean_shutdown is not None

    def lock_status(self) -> LockStatus:
        return lock_status(self.path)

    @property
    def is_metadata_dir(self) -> bool:
        return (self.path / METADATA_PARTITION_DIR).is_dir()

    # ---- partitions --------------------------------------------------------------------------------------
    def open_partition(self, path: Path) -> PartitionLog:
        log = self._logs.get(path)
        if log is None:
            tp = self.partition_dirs[path]
            key = (tp.topic, tp.partition)
            log = PartitionLog(
                path,
                log_start_offset_checkpoint=self.log_start_offsets.get(key),
                recovery_point=self.recovery_points.get(key),
                high_watermark=self.high_watermarks.get(key),
                clean_point=self.clean_points.get(key),
            )
            self._logs[path] = log
        return log

    def release(self, log: PartitionLog) -> None:
        """Close ``log`` and forget it (a reader that goes through every partition once keeps one open at a
        time: 100,000 partitions kept would hold about a gigabyte)."""
        log.close()
        self._logs.pop(log.path, None)

    def partitions(self, *, include_metadata: bool = True) -> Iterator[PartitionLog]:
        """Every partition directory (live, -delete, -future, -stray), opened lazily."""
        for p, tp in self.partition_dirs.items():
            if not include_metadata and tp.topic == METADATA_TOPIC:
                continue
            yield self.open_partition(p)

    def partition(self, topic: str, partition: int, kind: str = "live") -> PartitionLog | None:
        for p, tp in self.partition_dirs.items():
            if tp.topic == topic and tp.partition == partition and tp.kind == kind:
                return self.open_partition(p)
        return None

    def close(self) -> None:
        for log in self._logs.values():
            log.close()
        self._logs.clear()


class DataDirs(Closing):
    """Several data dirs of one broker (``log.dirs``)."""

    def __init__(self, paths: list[str | os.PathLike]):
        self.dirs = [DataDir(p) for p in paths]

    def __iter__(self) -> Iterator[DataDir]:
        return iter(self.dirs)

    def partitions(self) -> Iterator[PartitionLog]:
        for d in self.dirs:
            yield from d.partitions()

    def ensemble_findings(self) -> list[Finding]:
        """``MetaPropertiesEnsemble.verify`` and ``LogManager`` cross-dir rules."""
        out: list[Finding] = []
        cluster_ids: dict[str, Path] = {}
        node_ids: dict[int, Path] = {}
        directory_ids: dict[str, Path] = {}
        for d in self.dirs:
            m = d.meta_properties
            if m is None:
                continue
            mp = d.path / META_PROPERTIES_FILE
            if m.cluster_id is not None:
                cluster_ids.setdefault(m.cluster_id, mp)
            try:
                nid = m.node_id
            except KafkaLogError:
                nid = None
            if nid is not None:
                node_ids.setdefault(nid, mp)
            did = m.directory_id
            if did is not None:
                if did in directory_ids:
                    out.append(error(mp, None, "metadata", code="metadata.directoryIdReused", directoryId=did,
                                     other=str(directory_ids[did])))
                directory_ids.setdefault(did, mp)
        if len(cluster_ids) > 1:
            out.append(error(self.dirs[0].path, None, "metadata", code="metadata.clusterIdsDiffer",
                             clusterIds=sorted(cluster_ids)))
        if len(node_ids) > 1:
            out.append(error(self.dirs[0].path, None, "metadata", code="metadata.nodeIdsDiffer", nodeIds=sorted(node_ids)))
        live: dict[tuple[str, int], Path] = {}
        metadata_dirs = []
        for d in self.dirs:
            for p, tp in d.partition_dirs.items():
                if tp.topic == METADATA_TOPIC:
                    metadata_dirs.append(p)
                if tp.kind != "live":
                    continue
                key = (tp.topic, tp.partition)
                if key in live:
                    out.append(error(p, None, "layout", code="layout.alsoLive", partition=tp.name, other=str(live[key]),
                                     refuses=True))
                live.setdefault(key, p)
        if len(metadata_dirs) > 1:
            out.append(error(metadata_dirs[1], None, "layout", code="layout.metadataDirTwice", metadataDir=METADATA_PARTITION_DIR))
        return out

    def close(self) -> None:
        for d in self.dirs:
            d.close()
