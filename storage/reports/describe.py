"""A JSON-ready description of a partition log (what ``kafkalog describe`` prints)."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from typing import Any

from kafkalog.storage.codec.compression import codec_name
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files.checkpoints import DATA_DIR_CHECKPOINTS
from kafkalog.storage.files.findings import Finding
from kafkalog.storage.io.fs import UrlPath, as_path
from kafkalog.storage.log.datadir import (
    DataDir,
    check_topics,
    list_partition_dirs,
    partition_order,
    require_readable,
)
from kafkalog.storage.log.dir_checkpoints import open_partition_log, read_checkpoint_or_empty
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.paths import PARTITION_DIR, PathKind
from kafkalog.storage.log.topic_partition import parse_topic_partition_name


def _codec(c: int) -> str:
    try:
        return codec_name(c)
    except KafkaLogError:
        return f"unknown({c})"


def describe_partition(
    path: str | os.PathLike | UrlPath | PartitionLog,
    *,
    scan: bool = True,
    checkpoints: dict[str, int | None] | None = None,
) -> dict[str, Any]:
    """Describe one partition directory.

    Keys: ``dataDir``, ``dir``, ``topic``, ``partition``, ``dirKind``, ``size``, ``segments`` (list),
    ``logStartOffset``, ``logEndOffset``, ``recoveryPoint``, ``highWatermark``, ``cleanPoint``,
    ``leaderEpochs`` (list of ``[epoch, startOffset]``), ``topicId``, ``producerSnapshots``, ``leftovers``,
    ``magics`` and ``codecs`` (sorted; empty when ``scan`` is False, which skips the per-batch header scan).
    Unreadable per-partition files show as ``None`` plus an ``errors`` list.
    """
    if isinstance(path, PartitionLog):
        log, own = path, False
    else:
        log = open_partition_log(as_path(path), checkpoints)  # (a URL: read through the filesystem seam)
        own = True
    errors: list[str] = []
    try:
        magics: set[int] = set()
        codecs: set[int] = set()
        segments = []
        for seg in log.segments:
            entry: dict[str, Any] = {
                "baseOffset": seg.base_offset,
                "file": seg.path.name,
                "size": seg.size,
                "indexEntries": seg.offset_index.valid_entries if seg.has_offset_index else None,
                "timeIndexEntries": seg.time_index.valid_entries if seg.has_time_index else None,
                "txnIndexEntries": seg.txn_index.entries if seg.has_txn_index else None,
                "maxTimestamp": seg.max_timestamp_so_far().timestamp,
            }
            if scan:
                batches = 0
                next_offset = None
                try:
                    for b in log.segment_batches(seg):  # (a torn batch in a closed segment is an error)
                        batches += 1
                        magics.add(b.magic)
                        codecs.add(b.codec)
                        next_offset = b.next_offset
                except KafkaLogError as e:
                    errors.append(str(e))
                entry["batches"] = batches
                entry["nextOffset"] = next_offset
            segments.append(entry)
            seg.close()
        try:
            leo = log.log_end_offset
        except KafkaLogError as e:
            errors.append(str(e))
            leo = None
        try:
            epochs = [[e.epoch, e.start_offset] for e in log.leader_epochs]
        except KafkaLogError as e:
            errors.append(str(e))
            epochs = None
        try:
            topic_id = log.topic_id
        except KafkaLogError as e:
            errors.append(str(e))
            topic_id = None
        out: dict[str, Any] = {
            "dataDir": str(log.path.parent),
            "dir": log.path.name,
            "topic": log.topic,
            "partition": log.partition,
            "dirKind": log.dir_kind,
            "size": log.size,
            "segments": segments,
            "logStartOffset": log.log_start_offset,
            "logEndOffset": leo,
            "recoveryPoint": log.recovery_point,
            "highWatermark": log.high_watermark_checkpoint,
            "cleanPoint": log.clean_point,
            "leaderEpochs": epochs,
            "topicId": topic_id,
            "producerSnapshots": log.snapshot_offsets(),
            "leftovers": [p.name for p, _ in log.temp_files],
            "magics": sorted(magics),
            "codecs": [_codec(c) for c in sorted(codecs)],
        }
        if errors:
            out["errors"] = list(dict.fromkeys(errors))  # one line per error (the active segment's scan and the
            # log end offset read the same bytes)
        if log.unfinished_swap:
            out["warnings"] = [log.unfinished_swap]
        return out
    finally:
        if own:
            log.close()


def _topic_of(name: str) -> str | None:
    try:
        return parse_topic_partition_name(name).topic
    except KafkaLogError:
        return None


def describe_paths(paths: list[str | os.PathLike | UrlPath], *, scan: bool = True,
                   topics: Collection[str] | None = None) -> Iterator[dict[str, Any]]:
    """``kafkalog describe``: one description per partition (:func:`describe_partition`) of every data dir or
    partition dir in ``paths``, a data dir's partitions in :func:`~kafkalog.storage.log.datadir.partition_order` (by
    topic, then partition number). ``topics`` keeps only those topics (a name with no partition is an error
    listing the topics there, :func:`~kafkalog.storage.log.datadir.check_topics`). A partition or data dir that
    cannot be read gives an object with ``dataDir``, ``dir`` and ``errors`` only. A path that is neither a data
    dir nor a partition dir is a :class:`~kafkalog.storage.log.paths.PathError` (the one path contract), raised by
    this call before anything is described. A path may be a URL (``s3://bucket/data``): it is read through the
    filesystem seam by the same objects (DataDir, PartitionLog, Segment; a ``.log`` in windows), read-only."""
    kinds = [require_readable(raw) for raw in paths]  # (a URL: through the filesystem seam)
    if topics is not None:
        present = set()
        for k in kinds:
            if k.kind == PARTITION_DIR:
                present.add(_topic_of(k.path.name))
            else:
                dirs = ("live", "future", "delete", "stray")
                present.update(tp.topic for _, tp in list_partition_dirs(k.path, kinds=dirs))
        check_topics(topics, {t for t in present if t is not None}, ", ".join(map(str, paths)))
    return _describe(kinds, scan, topics)


def _describe(kinds: list[PathKind], scan: bool, topics: Collection[str] | None) -> Iterator[dict[str, Any]]:
    for k in kinds:
        p = k.path
        if k.kind == PARTITION_DIR and topics is not None and _topic_of(p.name) not in topics:
            continue
        if k.kind == PARTITION_DIR:
            notes: list[Finding] = []  # its values of the parent's checkpoints: one that does not parse is an error
            for name in DATA_DIR_CHECKPOINTS:
                read_checkpoint_or_empty(p.parent / name, notes)
            try:
                d = describe_partition(p, scan=scan)
                if notes:
                    d["errors"] = [*d.get("errors", ()), *(f"{n.file}: {n.facts['error']}" for n in notes)]
                yield d
            except KafkaLogError as e:
                yield {"dataDir": str(p.parent), "dir": p.name, "errors": [str(e)]}
            continue
        try:
            ddir = DataDir(p)
        except KafkaLogError as e:
            yield {"dataDir": str(p), "dir": None, "errors": [str(e)]}
            continue
        with ddir:
            # a data-dir checkpoint that does not parse: every partition's value from it is unknown, not absent
            unread = [f"{f.file}: {f.message}" for f in ddir.findings if f.kind == "checkpoint" and f.severity == "error"]
            for pp, tp in sorted(ddir.partition_dirs.items(), key=partition_order):
                if topics is not None and tp.topic not in topics:
                    continue
                log = ddir.open_partition(pp)
                try:
                    d = describe_partition(log, scan=scan)
                    if unread:
                        d["errors"] = [*d.get("errors", ()), *unread]
                    yield d
                except KafkaLogError as e:
                    yield {"dataDir": str(p), "dir": log.path.name, "topic": log.topic, "partition": log.partition,
                           "errors": [str(e)]}
                finally:
                    ddir.release(log)
