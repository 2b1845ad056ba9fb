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


def _checkpoint_dump(name: str, kind: str, reader: Callable[[str], Any]) -> tuple[FileDump, Any]:
    out = FileDump(name, kind)
    try:
        return out, reader(name)
    except KafkaLogError as e:
        if isinstance(e, LogDirError):
            raise
        out.problem(e.position, e.reason)
        return out, None


def dump_offset_checkpoint(path: str | os.PathLike) -> FileDump:
    """A data-dir offset checkpoint (recovery point, log start offset, high watermark, cleaner)."""
    name = os.fspath(path)
    out, ckpt = _checkpoint_dump(name, "offsetCheckpoint", read_offset_checkpoint)
    if ckpt is None:
        return out
    out.info = {"checkpoint": Path(name).name, "version": 0, "count": len(ckpt.entries), "form": ckpt.form,
                "canonical": ckpt.canonical}
    for e in ckpt.entries:
        out.entries.append({"topic": e.topic, "partition": e.partition, "offset": e.offset})
        out.lines.append(f"topic: {e.topic} partition: {e.partition} offset: {e.offset}")
    for problem in ckpt.validate():
        out.problem(None, problem)
    return out


def dump_leader_epoch_checkpoint(path: str | os.PathLike) -> FileDump:
    name = os.fspath(path)
    out, ckpt = _checkpoint_dump(name, "leaderEpochCheckpoint", read_leader_epoch_checkpoint)
    if ckpt is None:
        return out
    out.info = {"version": 0, "count": len(ckpt.entries), "form": ckpt.form, "canonical": ckpt.canonical}
    for e in ckpt.entries:
        out.entries.append({"epoch": e.epoch, "startOffset": e.start_offset})
        out.lines.append(f"epoch: {e.epoch} startOffset: {e.start_offset}")
    for problem in ckpt.validate():
        out.problem(None, problem)
    return out


def dump_partition_metadata(path: str | os.PathLike) -> FileDump:
    name = os.fspath(path)
    out, meta = _checkpoint_dump(name, "partitionMetadata", read_partition_metadata)
    if meta is None:
        return out
    out.entries.append({"version": meta.version, "topicId": meta.topic_id, "canonical": meta.canonical})
    out.lines.append(f"version: {meta.version} topicId: {meta.topic_id}")
    return out


def dump_meta_properties(path: str | os.PathLike) -> FileDump:
    name = os.fspath(path)
    out, meta = _checkpoint_dump(name, "metaProperties", read_meta_properties)
    if meta is None:
        return out
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
    for problem in meta.validate():
        out.problem(None, problem)
    return out


def dump_quorum_state(path: str | os.PathLike) -> FileDump:
    """KRaft ``quorum-state`` (``__cluster_metadata-0``)."""
    name = os.fspath(path)
    out, state = _checkpoint_dump(name, "quorumState", read_quorum_state)
    if state is None:
        return out
    d = state.to_dict()
    out.entries.append(d)
    out.lines.append(" ".join(f"{k}: {v}" for k, v in d.items()))
    for problem in state.validate():
        out.problem(None, problem)
    return out


def dump_clean_shutdown(path: str | os.PathLike) -> FileDump:
    name = os.fspath(path)
    out, marker = _checkpoint_dump(name, "cleanShutdown", read_clean_shutdown)
    if marker is None:
        if not out.problems:
            out.problem(None, "no such file")
        return out
    entry = {"version": marker.version, "brokerEpoch": marker.broker_epoch, "json": marker.is_json}
    out.entries.append(entry)
    out.lines.append(f"version: {marker.version} brokerEpoch: {marker.broker_epoch}" if marker.is_json
                     else "clean shutdown marker without content (Kafka before 3.7)")
    for problem in marker.validate():
        out.problem(None, problem)
    return out
