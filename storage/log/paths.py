"""The one path contract: what a command argument is, and the one message and exit class for what it is not.

Every command resolves its path arguments here (through :func:`classify`, :func:`require` and
:func:`require_destination`, which :mod:`kafkalog.storage.log.datadir` and the engines call), so a path that does
not exist, a file where a directory is expected, an empty directory, a directory holding nothing of Kafka's and
the parent of data dirs get the same answer from every command: a :class:`PathError` (a
:class:`~kafkalog.storage.errors.LogDirError`: the CLI prints it as one line and exits 1).

What a directory is:

* a **partition dir** holds segment, index or snapshot files, ``partition.metadata`` or
  ``leader-epoch-checkpoint`` (the name alone cannot decide: a data dir called ``kafka-logs-0`` parses as a
  topic-partition name);
* a **data dir** holds ``meta.properties``, one of the data-dir files (the four offset checkpoints,
  ``bootstrap.checkpoint``, ``.kafka_cleanshutdown``, the ``.lock`` a broker or kafkalog took),
  ``remote-log-index-cache`` or at least one
  sub-directory named as a partition dir (live, ``-delete``, ``-future``, ``-stray``, ``__cluster_metadata-0``)
  that is not itself a data dir;
* anything else is not Kafka's, and the error says what it is: empty, not Kafka's, or the parent of the data
  dirs it names.

A mutating command only ever writes into a directory this module recognised as a data dir (or a partition dir
inside one); the destinations of ``import``, ``migrate`` and ``rehydrate`` may also be a new data dir
(:func:`require_destination`: a path that does not exist yet, or an empty directory).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kafkalog.storage.errors import LogDirError
from kafkalog.storage.files.checkpoints import DATA_DIR_CHECKPOINTS
from kafkalog.storage.files.clean_shutdown import CLEAN_SHUTDOWN_FILE
from kafkalog.storage.files.leader_epoch import LEADER_EPOCH_CHECKPOINT
from kafkalog.storage.files.meta_properties import META_PROPERTIES_FILE
from kafkalog.storage.files.names import INDEX_SUFFIXES, LOG_FILE_SUFFIX, PRODUCER_SNAPSHOT_FILE_SUFFIX
from kafkalog.storage.files.partition_metadata import PARTITION_METADATA_FILE
from kafkalog.storage.io.fs import is_url, local_path
from kafkalog.storage.io.lock import LOCK_FILE_NAME
from kafkalog.storage.log.topic_partition import parse_topic_partition_name

#: what a path argument is (:attr:`PathKind.kind`)
DATA_DIR = "dataDir"
PARTITION_DIR = "partition"
FILE = "file"

#: the cases of a path that is none of them (:attr:`PathError.case`)
MISSING = "missing"
NOT_A_DIRECTORY = "notADirectory"
EMPTY = "empty"
NOT_KAFKA = "notKafka"
PARENT = "parentOfDataDirs"

#: files only a data dir holds
DATA_DIR_FILES = frozenset({META_PROPERTIES_FILE, CLEAN_SHUTDOWN_FILE, LOCK_FILE_NAME, "bootstrap.checkpoint",
                            "remote-log-index-cache", *DATA_DIR_CHECKPOINTS})
_PARTITION_FILE_SUFFIXES = (LOG_FILE_SUFFIX, *INDEX_SUFFIXES, PRODUCER_SNAPSHOT_FILE_SUFFIX)
_PARTITION_FILES = frozenset({PARTITION_METADATA_FILE, LEADER_EPOCH_CHECKPOINT})
_EXPECTED = {
    DATA_DIR: "a Kafka data dir (an entry of log.dirs)",
    PARTITION_DIR: "a Kafka partition dir",
    FILE: "a Kafka file",
}


_URL_AS_PATH = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:/")


class PathError(LogDirError):
    """A command argument that is not what the command takes. ``case`` is one of :data:`MISSING`,
    :data:`NOT_A_DIRECTORY`, :data:`EMPTY`, :data:`NOT_KAFKA`, :data:`PARENT`; ``data_dirs`` the data dirs inside
    a parent."""

    def __init__(self, case: str, path: str | os.PathLike, reason: str, data_dirs: tuple[str, ...] = ()):
        self.case = case
        self.data_dirs = data_dirs
        super().__init__(reason, str(path))


@dataclass(frozen=True)
class PathKind:
    """What an argument is: ``kind`` is :data:`DATA_DIR`, :data:`PARTITION_DIR` or :data:`FILE` (any regular
    file or other non-directory: which Kafka file it is, its reader decides)."""

    path: Path
    kind: str


def _names(p: Path) -> list[str] | None:
    try:
        with os.scandir(p) as it:
            return [e.name for e in it]
    except OSError:
        return None


def is_partition_listing(names: list[str]) -> bool:
    """The names of a directory's entries make it a partition dir."""
    return any(n in _PARTITION_FILES or n.endswith(_PARTITION_FILE_SUFFIXES) for n in names)


def _has_data_dir_files(names: list[str]) -> bool:
    return any(n in DATA_DIR_FILES for n in names)


def _partition_named(name: str) -> bool:
    try:
        parse_topic_partition_name(name)
    except LogDirError:
        return False
    return True


def _dir_kind(p: Path, names: list[str]) -> str | None:
    """:data:`PARTITION_DIR`, :data:`DATA_DIR` or None (neither) for the directory ``p`` holding ``names``."""
    if is_partition_listing(names):
        return PARTITION_DIR
    if _has_data_dir_files(names):
        return DATA_DIR
    for n in names:
        if not _partition_named(n):
            continue
        c = p / n
        if not c.is_dir() or (c.is_symlink() and not os.path.realpath(c).startswith(os.path.realpath(p) + os.sep)):
            continue
        inner = _names(c)
        if inner is None or not _has_data_dir_files(inner):  # a data dir named like a partition is not one
            return DATA_DIR
    return None


def data_dir_holding(path: str | os.PathLike) -> Path | None:
    """The data dir ``path`` would be inside (the nearest existing ancestor, or ``path`` itself, holding
    ``meta.properties`` or another data-dir file of Kafka's own: not a name alone, nor a ``.lock`` alone, as
    pytest's ``/tmp/pytest-of-root/pytest-275``), or None. The broker refuses to load a data dir holding a folder that is not a partition (``'pq' is not
    in the form of topic-partition``): nothing but partitions may be created there."""
    p = Path(os.path.abspath(path))
    for d in (p, *p.parents):
        names = _names(d) if d.is_dir() else None
        if names is not None and any(n in DATA_DIR_FILES and n != LOCK_FILE_NAME for n in names):
            return d
    return None


def classify(path: str | os.PathLike, expected: tuple[str, ...] = (DATA_DIR, PARTITION_DIR)) -> PathKind:
    """What ``path`` is (:class:`PathKind`), or :class:`PathError` with the contract's message when it is
    nothing of Kafka's (the message names what was ``expected``). A directory that cannot be listed reads as a
    data dir (its reader names the OS error). A URL is not a local path: the commands that take one read and
    change local dirs (:func:`kafkalog.open` and the Spark source read ``s3://``... dirs)."""
    path = local_path(path)  # (a file:// URL is the local path it names)
    if is_url(path) or _URL_AS_PATH.match(os.fspath(path)):  # (a URL made a Path keeps one slash: s3:/bucket)
        raise PathError(NOT_KAFKA, os.fspath(path), "a URL: this command reads and changes local data dirs only "
                        "(kafkalog.open(url) and the Spark source read s3://, gs://, hdfs:// data dirs)")
    p = Path(path)
    if not p.exists():
        raise PathError(MISSING, p, "no such file or directory" if not p.is_symlink() else
                        "dangling symbolic link")
    if not p.is_dir():
        return PathKind(p, FILE)
    names = _names(p)
    if names is None:
        return PathKind(p, DATA_DIR)
    kind = _dir_kind(p, names)
    if kind is not None:
        return PathKind(p, kind)
    if not names:
        raise PathError(EMPTY, p, f"empty directory, not {_expected(expected)}")
    inside = []
    for n in sorted(names):
        c = p / n
        if c.is_dir() and not c.is_symlink():
            inner = _names(c)
            if inner is not None and _dir_kind(c, inner) == DATA_DIR:
                inside.append(str(c))
    if inside:
        shown = ", ".join(inside[:10]) + (f" ... ({len(inside)} data dirs)" if len(inside) > 10 else "")
        raise PathError(PARENT, p, f"not a Kafka data dir; it contains the data dir(s) {shown}: pass those",
                        tuple(inside))
    raise PathError(NOT_KAFKA, p, f"not {_expected(expected)}: it holds no partition dir, no meta.properties and "
                    "no checkpoint file")


def require(path: str | os.PathLike, accept: tuple[str, ...] = (DATA_DIR, PARTITION_DIR)) -> PathKind:
    """:func:`classify`, and :class:`PathError` unless the path is one of ``accept``."""
    k = classify(path, tuple(a for a in accept if a != FILE) or (DATA_DIR, PARTITION_DIR))
    if k.kind in accept:
        return k
    if k.kind == FILE:
        raise PathError(NOT_A_DIRECTORY, k.path, f"not a directory (expected {_expected(accept)})")
    raise PathError(NOT_KAFKA, k.path, f"{_EXPECTED[k.kind]}, not {_expected(accept)}")


def require_data_dir(path: str | os.PathLike) -> Path:
    """The path of a recognised data dir (what a command writing data-dir files takes), else :class:`PathError`."""
    return require(path, (DATA_DIR,)).path


def require_destination(path: str | os.PathLike, *, new: bool = True) -> Path:
    """A data dir a command may write partitions into: a recognised data dir, or a new one (an empty directory,
    or with ``new`` a path that does not exist yet and whose parent is a directory). A file, a partition dir, a
    directory that is not Kafka's, the parent of data dirs or a new one inside a data dir is a :class:`PathError`."""
    p = Path(path)
    if new and not p.exists() and not p.is_symlink():
        if not p.parent.is_dir():
            raise PathError(MISSING, p.parent, f"no such directory (the parent of the new data dir {p})")
        _not_inside_a_data_dir(p)
        return p
    try:
        return require_data_dir(p)
    except PathError as e:
        if e.case == EMPTY:
            _not_inside_a_data_dir(p)
            return p
        raise


def _not_inside_a_data_dir(p: Path) -> None:
    holder = data_dir_holding(p.parent)
    if holder is not None:
        raise PathError(NOT_KAFKA, p, f"inside the data dir {holder}, where the broker would refuse to load the data "
                        "dir (a folder that is not a partition): a new data dir goes beside it, not in it")


def _expected(accept: tuple[str, ...]) -> str:
    return " or ".join(_EXPECTED[a] for a in accept)


__all__ = ["DATA_DIR", "DATA_DIR_FILES", "EMPTY", "FILE", "MISSING", "NOT_A_DIRECTORY", "NOT_KAFKA", "PARENT",
           "PARTITION_DIR", "PathError", "PathKind", "classify", "data_dir_holding", "is_partition_listing", "require",
           "require_data_dir", "require_destination"]
