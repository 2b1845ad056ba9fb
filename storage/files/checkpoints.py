"""The four offset checkpoint files of a data dir (``OffsetCheckpointFile``, docs/formats.md#offset-checkpoint-files).

``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``, ``replication-offset-checkpoint`` and
``cleaner-offset-checkpoint`` share one format::

    0
    <count>
    <topic> <partition> <offset>      (count times)

A zero-length file is valid and means "no entries" (every checkpoint is created empty by Kafka first).
A leftover ``<name>.tmp`` (crash during a write) is never read as the real file; see :func:`leftover_tmp`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Self, TypeVar

from kafkalog.storage.errors import CorruptCheckpointError
from kafkalog.storage.files._text import Form, format_checkpoint, parse_checkpoint
from kafkalog.storage.files.findings import Defect, defect
from kafkalog.storage.files.java import INT32_MAX, INT64_MAX, java_split_ws, parse_java_int
from kafkalog.storage.io.fileops import atomic_write, tmp_path
from kafkalog.storage.io.local import read_bounded

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # high watermarks
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

DATA_DIR_CHECKPOINTS = (
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)

CURRENT_VERSION = 0

# Kafka never writes a file larger than this for sane data dirs; a bound keeps hostile input from being
# slurped. (A million partitions at ~300 bytes a line is ~300 MB, so the bound is generous.)
MAX_CHECKPOINT_BYTES = 1 << 30


@dataclass(frozen=True)
class TopicPartitionOffset:
    topic: str
    partition: int
    offset: int


def entry_fields(line: str, n: int) -> list[str]:
    """The ``n`` whitespace-separated fields of a checkpoint entry line (``CheckpointFile``'s
    ``WHITESPACES_PATTERN`` split); ``ValueError`` for another count."""
    parts = java_split_ws(line)
    if len(parts) != n:
        raise ValueError(f"expected {n} fields, found {len(parts)}")
    return parts


def _parse_entry(line: str) -> TopicPartitionOffset:
    topic, partition, offset = entry_fields(line, 3)
    return TopicPartitionOffset(topic, parse_java_int(partition, 32), parse_java_int(offset, 64))


def _format_entry(e: TopicPartitionOffset) -> str:
    return f"{e.topic} {e.partition} {e.offset}"


E = TypeVar("E")


@dataclass
class TextCheckpoint(Generic[E]):
    """A version-0 text checkpoint (``CheckpointFile``: version line, count line, one entry a line) as read: the
    entries in file order, the line ending, the form and whether it is byte for byte what Kafka writes. A
    subclass names its entry grammar (``parse_entry``/``format_entry``)."""

    entries: list[E] = field(default_factory=list)
    newline: str = "\n"
    form: Form = "full"
    canonical: bool = True
    path: str | None = None

    @staticmethod
    def parse_entry(line: str) -> E:
        raise NotImplementedError

    @staticmethod
    def format_entry(e: E) -> str:
        raise NotImplementedError

    @classmethod
    def from_bytes(cls, data: bytes, path: str | os.PathLike | None = None) -> Self:
        p = None if path is None else str(path)
        parsed = parse_checkpoint(data, CURRENT_VERSION, cls.parse_entry, cls.format_entry, p)
        return cls(parsed.entries, parsed.newline, parsed.form, parsed.canonical, p)

    def to_bytes(self) -> bytes:
        return format_checkpoint(self.entries, CURRENT_VERSION, self.format_entry, self.newline, self.form)


@dataclass
class OffsetCheckpoint(TextCheckpoint[TopicPartitionOffset]):
    """Entries in file order (Kafka writes hash-map order; nothing depends on it)."""

    parse_entry = staticmethod(_parse_entry)
    format_entry = staticmethod(_format_entry)

    @classmethod
    def from_mapping(cls, offsets: dict[tuple[str, int], int], newline: str = "\n") -> OffsetCheckpoint:
        entries = [TopicPartitionOffset(t, p, o) for (t, p), o in offsets.items()]
        return cls(entries, newline)

    def to_dict(self) -> dict[tuple[str, int], int]:
        """As Kafka's ``read()`` map: a later duplicate wins."""
        return {(e.topic, e.partition): e.offset for e in self.entries}

    def updated(self, updates: Mapping[tuple[str, int], int | None]) -> dict[tuple[str, int], int]:
        """:meth:`to_dict` with ``updates`` applied: an offset sets the partition's entry, ``None`` removes it."""
        offsets = self.to_dict()
        for tp, offset in updates.items():
            if offset is None:
                offsets.pop(tp, None)
            else:
                offsets[tp] = offset
        return offsets

    def set_offsets(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Make ``offsets`` (in their order) the entries, written in the full form (the line ending is kept)."""
        self.entries = [TopicPartitionOffset(t, p, o) for (t, p), o in offsets.items()]
        self.form = "full"

    def get(self, topic: str, partition: int) -> int | None:
        return self.to_dict().get((topic, partition))

    def duplicates(self) -> list[tuple[str, int]]:
        seen: set[tuple[str, int]] = set()
        dups = []
        for e in self.entries:
            k = (e.topic, e.partition)
            if k in seen:
                dups.append(k)
            seen.add(k)
        return dups

    def validate(self) -> list[Defect]:
        """Problems Kafka does not reject at read time but that indicate a damaged or foreign file."""
        problems = [defect("checkpoint.duplicate", topic=t, partition=p) for t, p in self.duplicates()]
        for e in self.entries:
            if e.offset < 0:
                problems.append(defect("checkpoint.negativeOffset", offset=e.offset, topic=e.topic,
                                       partition=e.partition))
            if e.partition < 0:
                problems.append(defect("checkpoint.negativePartition", partition=e.partition, topic=e.topic))
        if not self.canonical:
            problems.append(defect("checkpoint.notCanonical"))
        return problems


def read_bytes_bounded(path: str | os.PathLike, limit: int, error_cls=CorruptCheckpointError) -> bytes:
    """Read a small regular file whole, refusing files above ``limit`` bytes before allocating; OS errors
    become ``error_cls``."""
    return read_bounded(path, limit, error_cls)


def read_offset_checkpoint(path: str | os.PathLike) -> OffsetCheckpoint:
    """Read one offset checkpoint file; :class:`CorruptCheckpointError` (with line number) when malformed."""
    return OffsetCheckpoint.from_bytes(read_bytes_bounded(path, MAX_CHECKPOINT_BYTES), path)


def read_checkpoint(path: Path) -> OffsetCheckpoint:
    """One offset checkpoint file of a data dir (a missing file reads as empty)."""
    return read_offset_checkpoint(path) if path.exists() else OffsetCheckpoint()


def write_offset_checkpoint(
    path: str | os.PathLike,
    checkpoint: OffsetCheckpoint | dict[tuple[str, int], int],
    *,
    fsync: bool = True,
) -> None:
    """Write atomically (tmp, fsync, rename, fsync dir) as ``CheckpointFile.write``."""
    if isinstance(checkpoint, dict):
        checkpoint = OffsetCheckpoint.from_mapping(checkpoint)
    for e in checkpoint.entries:
        if not (0 <= e.partition <= INT32_MAX and -(INT64_MAX + 1) <= e.offset <= INT64_MAX):
            raise ValueError(f"entry out of range: {e}")
        if not e.topic or any(c in " \t\n\x0b\f\r" for c in e.topic):
            raise ValueError(f"topic name cannot be written in a checkpoint: {e.topic!r}")
    atomic_write(path, checkpoint.to_bytes(), fsync=fsync)


def leftover_tmp(path: str | os.PathLike) -> Path | None:
    """The ``<path>.tmp`` a crashed atomic write left behind, if any (Kafka ignores it)."""
    t = tmp_path(path)
    return t if t.exists() else None
