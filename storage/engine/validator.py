"""Kafka's ``LogValidator`` for an append (docs/semantics.md#appending): the checks a batch passes before the log
takes it (framing, CRC, ``max.message.bytes``, ``segment.bytes``, a follower's offset order, v2 for a leader),
shared by :class:`~kafkalog.storage.engine.writer.LogWriter` and ``append --dry-run`` (:func:`preview_append`).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from pathlib import Path

from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.topic_id import check_topic_id
from kafkalog.storage.errors import ConfigError, CorruptRecordError, KafkaLogError
from kafkalog.storage.files.partition_metadata import PARTITION_METADATA_FILE, read_partition_metadata
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.topic_partition import live_topic_partition, partition_path_for
from kafkalog.storage.records import LogScanner

_I32 = struct.Struct(">i")



class RecordTooLargeError(KafkaLogError):
    """A batch above ``max.message.bytes`` or ``segment.bytes`` (RecordTooLarge/RecordBatchTooLarge)."""


class OffsetOrderError(KafkaLogError):
    """A follower append starting below the log end offset (UnexpectedAppendOffsetException)."""


def analyze_append(buf: bytearray, config: LogConfig, where: str) -> list[tuple[int, int, int, int, int]]:
    """``analyzeAndValidateRecords``: (position, base offset, last offset, max timestamp, size) per batch;
    CRC and size checks; trailing partial bytes trimmed from ``buf``."""
    out = []
    scanner = LogScanner(memoryview(buf))
    for b in scanner:
        if b.size > config.max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {b.size} bytes exceeds max.message.bytes ({config.max_message_bytes})", where, b.position)
        if not b.is_valid():
            raise CorruptRecordError("record batch is corrupt (CRC mismatch)", where, b.position)
        out.append((b.position, b.base_offset, b.last_offset, b.max_timestamp, b.size))
        del b
    del scanner
    if out:
        end = out[-1][0] + out[-1][4]
        del buf[end:]
    return out


def check_follower_offset(first: int, log_end_offset: int, where: str) -> None:
    """A follower append starts at or above the log end offset (``UnifiedLog.appendAsFollower``)."""
    if first < log_end_offset:
        raise OffsetOrderError(f"unexpected append offset {first}: the log end offset is {log_end_offset}", where)


def check_append_size(size: int, config: LogConfig, where: str) -> None:
    """One append must fit a segment (``LogSegment``: segment.bytes)."""
    if size > config.segment_size:
        raise RecordTooLargeError(f"append of {size} bytes exceeds segment.bytes ({config.segment_size})", where)


def check_leader_magic(buf, pos: int, where: str) -> None:
    """kafkalog's leader append assigns offsets to v2 batches only."""
    if buf[pos + 16] < 2:
        raise CorruptRecordError("leader appends of message format v0/v1 are not supported; append them as a "
                                 "follower (offsets kept)", where, pos)


def check_append_identity(partition_dir: str | os.PathLike, *, topic_id: str | None, leader_epoch: int | None) -> None:
    """What an append stamps and records about its partition is Kafka's: a leader epoch of 0 to 2147483647 (an
    Int32; -1, ``NO_PARTITION_LEADER_EPOCH``, is no leader's), and a valid topic id that, where the partition has
    a ``partition.metadata`` already, is its own (``UnifiedLog.assignTopicId``: ``InconsistentTopicIdException``)."""
    if leader_epoch is not None and not 0 <= leader_epoch <= 2**31 - 1:
        raise ConfigError(f"leader epoch {leader_epoch}: a leader's epoch is 0 to 2147483647")
    if topic_id is None:
        return
    check_topic_id(topic_id)
    f = Path(partition_dir) / PARTITION_METADATA_FILE
    if f.is_file():
        have = read_partition_metadata(f).topic_id
        if have != topic_id:
            raise ConfigError(f"topic id {topic_id} is not the partition's: its {PARTITION_METADATA_FILE} holds "
                              f"{have} (Kafka refuses an inconsistent topic id)", str(f))


def preview_append(data_dir: str | os.PathLike, partition: str, batches: Iterable[bytes], *,
                   config: LogConfig | None = None, keep_offsets: bool = False, topic_id: str | None = None,
                   leader_epoch: int | None = 0) -> tuple[int, int, int]:
    """``append --dry-run``: check every append as :func:`append_to_partition` would (batch framing, CRC,
    max.message.bytes, segment.bytes, offset order for a follower, v2 only for a leader) and return
    ``(appends, records, log end offset after)``, touching nothing."""

    topic, _ = live_topic_partition(partition)
    pdir = partition_path_for(data_dir, partition)
    check_append_identity(pdir, topic_id=topic_id, leader_epoch=None if keep_offsets else leader_epoch)
    if config is None:

        config = ConfigResolver(data_dirs=[data_dir]).log_config(data_dir, topic)
    leo = 0
    if pdir.is_dir():
        with PartitionLog(pdir) as plog:
            segs = plog.segments
            leo = segs[-1].read_next_offset() if segs else 0
    n = records = 0
    for data in batches:
        n += 1
        buf = bytearray(data)
        analyzed = analyze_append(buf, config, str(pdir))
        if not analyzed:
            continue
        check_append_size(len(buf), config, str(pdir))
        if keep_offsets:
            check_follower_offset(analyzed[0][1], leo, str(pdir))
            for (_pos, base, last, _mts, _sz) in analyzed:
                records += last - base + 1
            leo = analyzed[-1][2] + 1
            continue
        for (pos, _base, _last, _mts, _sz) in analyzed:
            check_leader_magic(buf, pos, str(pdir))
            delta = _I32.unpack_from(buf, pos + 23)[0]
            records += delta + 1
            leo += delta + 1
    return n, records, leo


__all__ = ["OffsetOrderError", "RecordTooLargeError", "analyze_append", "check_append_identity", "check_append_size",
           "check_follower_offset", "check_leader_magic", "preview_append"]
