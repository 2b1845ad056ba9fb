"""The records of a data dir's ``__remote_log_metadata`` partitions, decoded (:func:`iter_remote_log_metadata`): what
the broker's ``TopicBasedRemoteLogMetadataManager`` knows about the remote segments."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from kafkalog.storage.decoders.remote_log_metadata import (
    REMOTE_LOG_METADATA_TOPIC,
    decode_remote_log_metadata,
)
from kafkalog.storage.errors import CorruptRecordError, KafkaLogError
from kafkalog.storage.log.datadir import is_partition_dir, list_partition_dirs
from kafkalog.storage.log.dir_checkpoints import open_partition_log
from kafkalog.storage.log.topic_partition import parse_topic_partition_name

__all__ = ["iter_remote_log_metadata"]


def iter_remote_log_metadata(log_dirs: Iterable[str | os.PathLike]) -> Iterator[tuple[str, int, int, dict[str, Any]]]:
    """``(partition dir name, partition, offset, decoded record)`` for every record of every
    ``__remote_log_metadata-N`` partition in the data dirs ``log_dirs`` (partition dirs are accepted too), in
    data dir order, then partition, then offset, from each partition's log start offset. Control records are
    skipped. Raises :class:`KafkaLogError` with the segment file and byte position of a batch or record it cannot
    read or decode."""

    for d in log_dirs:
        p = os.fspath(d)
        if is_partition_dir(p):
            tp = parse_topic_partition_name(os.path.basename(os.path.normpath(p)))
            dirs = [(p, tp.partition)] if tp.topic == REMOTE_LOG_METADATA_TOPIC else []
        else:
            dirs = [(str(path), tp.partition) for path, tp in list_partition_dirs(p)
                    if tp.topic == REMOTE_LOG_METADATA_TOPIC]
        for path, partition in dirs:
            log = open_partition_log(path)
            try:
                start = log.log_start_offset
                name = os.path.basename(os.path.normpath(path))
                for _seg, b in log.iter_batches():
                    if b.is_control or b.last_offset < start:
                        continue
                    for rec in b.records():
                        if rec.offset < start:
                            continue
                        try:
                            decoded = decode_remote_log_metadata(rec.key, rec.value)
                        except KafkaLogError as e:
                            raise CorruptRecordError(f"record at offset {rec.offset}: {e.reason}",
                                                     path=str(b.path), position=b.position) from None
                        yield name, partition, rec.offset, decoded
            finally:
                log.close()
