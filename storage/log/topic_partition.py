"""Partition-directory names: Kafka's topic-partition naming (``LocalLog.parseTopicPartitionName``,
``LocalLog.logDirName``) and topic validation (``Topic.validate``), parsed and checked here once, and the path of a
partition directory kafkalog may write into."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kafkalog.storage.errors import LogDirError
from kafkalog.storage.files.java import parse_java_int

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
_NS = "[^ \t\n\x0b\f\r]+"  # java.util.regex \S+
_SUFFIXED_DIR = {
    s: re.compile(f"^({_NS})-({_NS})\\.({_NS}){re.escape(s)}$", re.DOTALL)
    for s in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)
}
METADATA_TOPIC = "__cluster_metadata"


@dataclass(frozen=True)
class TopicPartitionDir:
    """A parsed partition directory name."""

    topic: str
    partition: int
    kind: str  # 'live' | 'delete' | 'future' | 'stray'
    unique_id: str | None = None  # the 32-hex uuid of -delete/-future/-stray names

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def parse_topic_partition_name(name: str) -> TopicPartitionDir:
    """``LocalLog.parseTopicPartitionName``; :class:`LogDirError` for a name Kafka would reject."""
    def bad() -> LogDirError:
        return LogDirError(
            f"{name!r} is not in the form of topic-partition or topic-partition.uniqueId-delete "
            "(if marked for deletion)",
            name,
        )

    if not name or "-" not in name:
        raise bad()
    kind, unique = "live", None
    for suffix, pattern in _SUFFIXED_DIR.items():
        if name.endswith(suffix):
            if not pattern.match(name):
                raise bad()
            kind = suffix[1:]
            dot = name.rindex(".")
            unique = name[dot + 1 : -len(suffix)]
            name_part = name[:dot]
            break
    else:
        name_part = name
    i = name_part.rfind("-")
    if i < 0:
        raise bad()
    topic, part = name_part[:i], name_part[i + 1 :]
    if not topic or not part or not _writable_name(topic):
        raise bad()
    try:
        partition = parse_java_int(part)
    except ValueError:
        raise bad() from None
    return TopicPartitionDir(topic, partition, kind, unique)


def _writable_name(topic: str) -> bool:
    """A topic a checkpoint line can hold: no whitespace (the field separator) and valid UTF-8. The broker creates
    no other directory (topics are validated at creation); a dir named otherwise is not a partition."""
    if any(c.isspace() for c in topic):
        return False
    try:
        topic.encode("utf-8")
    except UnicodeEncodeError:  # a name that was not UTF-8 on disk (surrogate-escaped by os.listdir)
        return False
    return True


def live_topic_partition(name: str) -> tuple[str, int]:
    """``<topic>-<partition>`` of a live partition dir -> (topic, partition); :class:`LogDirError` for any other
    name (``-delete``/``-future``/``-stray`` dirs included)."""
    tp = parse_topic_partition_name(name)
    if tp.kind != "live":
        raise LogDirError(f"not a live partition directory (a -{tp.kind} dir): {name!r}", name)
    return tp.topic, tp.partition


TOPIC_MAX_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic(topic: str) -> str:
    """Kafka's ``Topic.validate``: a topic name kafkalog may create a directory for (characters
    ``[a-zA-Z0-9._-]``, at most 249, not ``.`` or ``..``). :class:`LogDirError` otherwise: a name from input or
    arguments never becomes a path outside the data dir."""
    if not isinstance(topic, str) or not topic:
        raise LogDirError("Topic name is illegal, it can't be empty", repr(topic))
    if topic in (".", ".."):
        raise LogDirError('Topic name cannot be "." or ".."', topic)
    if len(topic) > TOPIC_MAX_LENGTH:
        raise LogDirError(f"Topic name is illegal, it can't be longer than {TOPIC_MAX_LENGTH} characters, topic "
                          f"name: {topic[:60]!r}...", topic[:60])
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise LogDirError(f"Topic name {topic!r} is illegal, it contains a character other than ASCII "
                          "alphanumerics, '.', '_' and '-'", repr(topic))
    return topic


def partition_dir_name(topic: str, partition: int) -> str:
    """``LocalLog.logDirName``: ``<topic>-<partition>``, for a valid topic (:func:`validate_topic`) and a
    partition number in ``[0, 2^31)``."""
    validate_topic(topic)
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < 1 << 31:
        raise LogDirError(f"partition of {topic!r} must be an integer in [0, 2147483647], got {partition!r}",
                          topic)
    return f"{topic}-{partition}"


def partition_path(data_dir: str | os.PathLike, topic: str, partition: int) -> Path:
    """The directory of partition ``topic-partition`` in ``data_dir``, for writing: the name is validated
    (:func:`partition_dir_name`) and the path must stay inside the data dir: an existing partition dir that is a
    symlink, or anything that resolves outside ``data_dir``, is refused (:class:`LogDirError`)."""
    root = Path(data_dir)
    path = root / partition_dir_name(topic, partition)
    if path.is_symlink():
        raise LogDirError(f"{path}: the partition directory is a symlink; kafkalog does not write through it",
                          str(path))
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root or real == real_root:
        raise LogDirError(f"{path}: resolves to {real}, outside the data dir {real_root}", str(path))
    if path.exists() and not path.is_dir():
        raise LogDirError(f"{path}: exists and is not a directory", str(path))
    return path


def partition_path_for(data_dir: str | os.PathLike, name: str) -> Path:
    """:func:`partition_path` for a ``<topic>-<partition>`` name given by a user (``kafkalog append DIR T-P``)."""
    topic, part = live_topic_partition(name)
    return partition_path(data_dir, topic, part)
