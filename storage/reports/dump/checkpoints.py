"""The dumps of a data dir's text and metadata files: offset checkpoints, ``leader-epoch-checkpoint``,
``partition.metadata``, ``meta.properties``, ``quorum-state`` and the clean-shutdown marker."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkalog.storage.errors import KafkaLogError, LogDirError
from kafkalog.storage.files.checkpoints import read_offset_checkpoint
from kafkalog.storage.files.clean_shutdown import read_clean_shutdown
from kafkalog.storage.files.leader_epoch import read_leader_epoch_checkpoint
from kafkalog.storage.files.meta_properties import read_meta_properties
from kafkalog.storage.files.partition_metadata import read_partition_metadata
from kafkalog.storage.files.quorum_state import read_quorum_state
from kafkalog.storage.reports.dump.file_dump import FileDump

# ------------------------------------------------------------------------------------------- text files


def _dump_file(path: str | os.PathLike, kind: str, reader: Callable[[Any], Any],
               fill: Callable[[FileDump, Any], None], *, validate: bool = True) -> FileDump:
    """The skeleton of every text file's dump: the file read by its reader (its error a problem at its byte, a
    missing data dir raised), ``fill`` puts what it holds into the dump, then its own checks' problems."""
    name = str(path)
    out = FileDump(name, kind)
    try:
        parsed = reader(path)  # (a file under a URL through the filesystem seam)
    except KafkaLogError as e:
        if isinstance(e, LogDirError):
            raise
        out.problem(e.position, e.reason)
        return out
    if parsed is None:  # a reader that tells an absent file (the clean-shutdown marker's)
        out.problem(None, code="file.noSuchFile")
        return out
    fill(out, parsed)
    if validate:
        for d in parsed.validate():
            out.problem(d.position, code=d.code, **d.facts)
    return out


def _fill_offset_checkpoint(out: FileDump, ckpt: Any) -> None:
    out.info = {"checkpoint": Path(out.file).name, "version": 0, "count": len(ckpt.entries), "form": ckpt.form,
                "canonical": ckpt.canonical}
    for e in ckpt.entries:
        out.entries.append({"topic": e.topic, "partition": e.partition, "offset": e.offset})
        out.lines.append(f"topic: {e.topic} partition: {e.partition} offset: {e.offset}")


def dump_offset_checkpoint(path: str | os.PathLike) -> FileDump:
    """A data-dir offset checkpoint (recovery point, log start offset, high watermark, cleaner)."""
    return _dump_file(path, "offsetCheckpoint", read_offset_checkpoint, _fill_offset_checkpoint)


def _fill_leader_epoch_checkpoint(out: FileDump, ckpt: Any) -> None:
    out.info = {"version": 0, "count": len(ckpt.entries), "form": ckpt.form, "canonical": ckpt.canonical}
    for e in ckpt.entries:
        out.entries.append({"epoch": e.epoch, "startOffset": e.start_offset})
        out.lines.append(f"epoch: {e.epoch} startOffset: {e.start_offset}")


def dump_leader_epoch_checkpoint(path: str | os.PathLike) -> FileDump:
    return _dump_file(path, "leaderEpochCheckpoint", read_leader_epoch_checkpoint, _fill_leader_epoch_checkpoint)


def _fill_partition_metadata(out: FileDump, meta: Any) -> None:
    out.entries.append({"version": meta.version, "topicId": meta.topic_id, "canonical": meta.canonical})
    out.lines.append(f"version: {meta.version} topicId: {meta.topic_id}")


def dump_partition_metadata(path: str | os.PathLike) -> FileDump:
    return _dump_file(path, "partitionMetadata", read_partition_metadata, _fill_partition_metadata, validate=False)


def _fill_meta_properties(out: FileDump, meta: Any) -> None:
    props = meta.properties()
    for k in meta.keys():
        out.entries.append({"key": k, "value": props[k]})
        out.lines.append(f"{k}={props[k]}")
    info: dict[str, Any] = {"canonical": meta.canonical}
    try:
        info.update(version=meta.version, clusterId=meta.cluster_id, nodeId=meta.node_id,
                    directoryId=meta.directory_id)
    except KafkaLogError as e:
        out.problem(e.position, e.reason)
    out.info = info


def dump_meta_properties(path: str | os.PathLike) -> FileDump:
    return _dump_file(path, "metaProperties", read_meta_properties, _fill_meta_properties)


def _fill_quorum_state(out: FileDump, state: Any) -> None:
    d = state.to_dict()
    out.entries.append(d)
    out.lines.append(" ".join(f"{k}: {v}" for k, v in d.items()))


def dump_quorum_state(path: str | os.PathLike) -> FileDump:
    """KRaft ``quorum-state`` (``__cluster_metadata-0``)."""
    return _dump_file(path, "quorumState", read_quorum_state, _fill_quorum_state)


def _fill_clean_shutdown(out: FileDump, marker: Any) -> None:
    out.entries.append({"version": marker.version, "brokerEpoch": marker.broker_epoch, "json": marker.is_json})
    out.lines.append(f"version: {marker.version} brokerEpoch: {marker.broker_epoch}" if marker.is_json
                     else "clean shutdown marker without content (Kafka before 3.7)")


def dump_clean_shutdown(path: str | os.PathLike) -> FileDump:
    return _dump_file(path, "cleanShutdown", read_clean_shutdown, _fill_clean_shutdown)
