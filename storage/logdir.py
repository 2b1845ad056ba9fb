"""Data directories: one ``log.dirs`` entry (:class:`DataDir`) and several of them (:class:`DataDirs`, JBOD).

Loading is read-only. What Kafka would choke on (a sub-directory whose name does not parse, a corrupt
checkpoint, ...) becomes a :class:`Finding` in ``findings`` instead of an exception, so one bad file never
hides the rest of the directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from .errors import KafkaLogError, LogDirError
from .files.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    DATA_DIR_CHECKPOINTS,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpoint,
    read_offset_checkpoint,
)
from .files.clean_shutdown import CLEAN_SHUTDOWN_FILE, CleanShutdownMarker, read_clean_shutdown
from .files.findings import Finding, error, info, warning
from .files.meta_properties import META_PROPERTIES_FILE, MetaProperties, read_meta_properties
from .lock import LOCK_FILE_NAME, LockStatus, lock_status
from .log import METADATA_TOPIC, PartitionLog, TopicPartitionDir, parse_topic_partition_name

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


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except (ValueError, OSError):
        return False


class DataDir:
    """One data directory, loaded read-only."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if not self.path.is_dir():
            raise LogDirError("not a directory", str(self.path))
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
    def _load(self) -> None:
        mp = self.path / META_PROPERTIES_FILE
        if mp.exists():
            try:
                self.meta_properties = read_meta_properties(mp)
                for problem in self.meta_properties.validate():
                    self.findings.append(error(mp, None, "metadata", problem))
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
        for entry in sorted(os.scandir(self.path), key=lambda e: e.name):
            p = Path(entry.path)
            name = entry.name
            if entry.is_symlink() and not _inside(p, self.path):
                self.findings.append(warning(p, None, "layout", "symlink leaving the data directory: not followed"))
                continue
            if entry.is_dir():
                if name == REMOTE_LOG_INDEX_CACHE:
                    continue
                try:
                    self.partition_dirs[p] = parse_topic_partition_name(name)
                except LogDirError as e:
                    self.findings.append(
                        error(p, None, "layout", f"{e.reason}; Kafka refuses to load this data directory")
                    )
                continue
            if name.endswith(".tmp"):
                self.leftover_tmp_files.append(p)
                self.findings.append(
                    warning(p, None, "leftover", "temporary file of an interrupted atomic write (Kafka ignores it)")
                )
            elif name not in KNOWN_TOP_FILES:
                self.other_entries.append(p)
                self.findings.append(info(p, None, "layout", "file Kafka does not use in a data directory"))

    # ---- checkpoints -------------------------------------------------------------------------------------
    def _map(self, name: str) -> dict[tuple[str, int], int]:
        c = self.checkpoints.get(name)
        return {} if c is None else c.to_dict()

    @property
    def recovery_points(self) -> dict[tuple[str, int], int]:
        return self._map(RECOVERY_POINT_CHECKPOINT)

    @property
    def log_start_offsets(self) -> dict[tuple[str, int], int]:
        return self._map(LOG_START_OFFSET_CHECKPOINT)

    @property
    def high_watermarks(self) -> dict[tuple[str, int], int]:
        return self._map(REPLICATION_OFFSET_CHECKPOINT)

    @property
    def clean_points(self) -> dict[tuple[str, int], int]:
        return self._map(CLEANER_OFFSET_CHECKPOINT)

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

    def __enter__(self) -> DataDir:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class DataDirs:
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
                    out.append(error(mp, None, "metadata", f"directory.id {did} also used by {directory_ids[did]}"))
                directory_ids.setdefault(did, mp)
        if len(cluster_ids) > 1:
            out.append(error(self.dirs[0].path, None, "metadata", f"data dirs disagree on cluster.id: {sorted(cluster_ids)}"))
        if len(node_ids) > 1:
            out.append(error(self.dirs[0].path, None, "metadata", f"data dirs disagree on the node id: {sorted(node_ids)}"))
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
                    out.append(error(p, None, "layout", f"{tp.name} is also live in {live[key]}; Kafka refuses to start"))
                live.setdefault(key, p)
        if len(metadata_dirs) > 1:
            out.append(error(metadata_dirs[1], None, "layout", f"{METADATA_PARTITION_DIR} found in several data dirs"))
        return out

    def close(self) -> None:
        for d in self.dirs:
            d.close()

    def __enter__(self) -> DataDirs:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
