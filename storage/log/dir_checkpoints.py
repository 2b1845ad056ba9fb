"""A data dir's four offset checkpoints as its partitions read them (``LogManager.loadLogs``): each file parsed once
per version, a missing or malformed one read as empty, locally or under a URL through the filesystem seam; and
:func:`open_partition_log`, a :class:`PartitionLog` with its data dir's checkpoint values."""

from __future__ import annotations

import functools
import os
import stat
import time
from pathlib import Path
from typing import cast

from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files import checkpoints as ckpt
from kafkalog.storage.files.findings import Finding, note
from kafkalog.storage.io.fs import UrlPath, as_path, is_url, read_bytes
from kafkalog.storage.io.fs import info as file_info
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.topic_partition import parse_topic_partition_name


def read_checkpoint_or_empty(path: str | os.PathLike,
                             notes: list[Finding] | None = None) -> dict[tuple[str, int], int]:
    """As ``LogManager.loadLogs``: a missing or malformed offset checkpoint reads as empty (``notes`` gets why); a
    file under a URL through the filesystem seam."""
    p = as_path(path)
    if not p.is_file():
        return {}
    try:
        return ckpt.read_offset_checkpoint(p).to_dict()
    except KafkaLogError as e:
        if notes is not None:
            notes.append(note(p, "checkpoint.unreadable", error=e.reason))
        return {}


@functools.lru_cache(maxsize=32)
def _checkpoint_table(path: str, stamp: tuple[int, int, int]) -> dict[tuple[str, int], int] | None:
    """A checkpoint file's entries as Kafka's ``read()`` map, once per version of the file (``stamp``: its inode,
    size and mtime): the partitions of a data dir read their values from one parse, not one parse each (an export
    of 5,000 partitions parsed its four checkpoints 20,000 times). None when it does not parse."""
    try:
        return ckpt.read_offset_checkpoint(path).to_dict()
    except KafkaLogError:
        return None


@functools.lru_cache(maxsize=32)
def _url_checkpoint_table(f: UrlPath, stamp: tuple[int, int]) -> dict[tuple[str, int], int] | None:
    """:func:`_checkpoint_table` of a checkpoint under a URL (``stamp``: its size and mtime), read through the
    filesystem seam."""
    try:
        data = read_bytes(f.spec, f.fspath, ckpt.MAX_CHECKPOINT_BYTES)
        return ckpt.OffsetCheckpoint.from_bytes(data, str(f)).to_dict()
    except (KafkaLogError, OSError):
        return None


CheckpointTables = dict[str, "dict[tuple[str, int], int] | None"]

#: a file modified this recently is read, not taken from the cache: a file's mtime has the kernel's coarse clock
#: (a few ms), so a rewrite of the same size within it, on a reused inode, has the same stamp (as git's "racily
#: clean" index entries)
RACY_NS = 2_000_000_000


def _cached(table, key, stamp: tuple[int, ...], mtime_ns: int):
    """``table(key, stamp)`` from the cache, unless the file changed within :data:`RACY_NS` (or its filesystem does
    not say when)."""
    if mtime_ns <= 0 or time.time_ns() - mtime_ns < RACY_NS:
        return table.__wrapped__(key, stamp)
    return table(key, stamp)


def checkpoint_tables(data_dir: str | os.PathLike | UrlPath) -> CheckpointTables:
    """The four offset checkpoints of a data dir as maps by name (None: missing, not a regular file or not
    parsing), each parsed once per version of its file; a data dir under a URL is read through the filesystem
    seam. A reader that opens many partitions of one data dir at once reads them here once
    (:func:`partition_checkpoints`)."""
    tables: CheckpointTables = {}
    if is_url(data_dir):
        u = UrlPath.of(data_dir)  # type: ignore[arg-type]
        for name in ckpt.DATA_DIR_CHECKPOINTS:
            uf = u / name
            try:
                e = file_info(uf.spec, uf.fspath)
            except OSError:
                e = None
            tables[name] = None if e is None or e.is_dir else \
                _cached(_url_checkpoint_table, uf, (e.size, e.mtime_ns), e.mtime_ns)
        return tables
    d = Path(cast(str, data_dir))
    for name in ckpt.DATA_DIR_CHECKPOINTS:
        f = d / name
        try:
            st = f.stat()
        except OSError:
            st = None
        tables[name] = None if st is None or not stat.S_ISREG(st.st_mode) else \
            _cached(_checkpoint_table, str(f), (st.st_ino, st.st_size, st.st_mtime_ns), st.st_mtime_ns)
    return tables


def partition_checkpoints(path: str | os.PathLike | UrlPath,
                          tables: CheckpointTables | None = None) -> dict[str, int | None]:
    """This partition's values in its parent data dir's four offset checkpoints (a checkpoint that is missing or
    does not parse gives None), from ``tables`` when given (:func:`checkpoint_tables` of the parent), else read
    (through the filesystem seam for a partition dir under a URL)."""
    p = as_path(path)
    tp = parse_topic_partition_name(p.name)
    if tables is None:
        tables = checkpoint_tables(p.parent)
    return {name: None if table is None else table.get((tp.topic, tp.partition)) for name, table in tables.items()}


def open_partition_log(path: str | os.PathLike | UrlPath, checkpoints: dict[str, int | None] | None = None, *,
                       remote_log_enabled: bool = False) -> PartitionLog:
    """A :class:`PartitionLog` of ``path`` (a local path or a URL) with its data dir's checkpoint values (read from
    the parent dir unless ``checkpoints`` gives them; ``{}`` for none)."""
    values = partition_checkpoints(path) if checkpoints is None else checkpoints
    return PartitionLog(path, log_start_offset_checkpoint=values.get(ckpt.LOG_START_OFFSET_CHECKPOINT),
                        recovery_point=values.get(ckpt.RECOVERY_POINT_CHECKPOINT),
                        high_watermark=values.get(ckpt.REPLICATION_OFFSET_CHECKPOINT),
                        clean_point=values.get(ckpt.CLEANER_OFFSET_CHECKPOINT),
                        remote_log_enabled=remote_log_enabled)
