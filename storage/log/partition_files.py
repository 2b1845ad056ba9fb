"""What a partition directory holds, as the broker's loader sorts it: segments by base offset, producer
snapshots, KRaft snapshots, leftover temporary files, and findings for whatever else is there (names that do not
parse, orphaned indexes, symlinks leaving the directory, special files, ...); nothing is modified."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from kafkalog.storage.files.findings import Finding, error, info, warning
from kafkalog.storage.files.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
)
from kafkalog.storage.files.names import (
    INDEX_SUFFIXES,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    offset_from_file_name,
    temp_suffix,
)
from kafkalog.storage.files.partition_metadata import (
    PARTITION_METADATA_FILE,
)
from kafkalog.storage.files.quorum_state import QUORUM_STATE_FILE
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io.dirview import DANGLING, DIR, FILE, SPECIAL, SYMLINK_OUT, DirView

KRAFT_SNAPSHOT_SUFFIX = ".checkpoint"
KRAFT_SNAPSHOT_PART_SUFFIX = ".checkpoint.part"


_KAFKA_FILE_SUFFIXES = (LOG_FILE_SUFFIX, *INDEX_SUFFIXES, PRODUCER_SNAPSHOT_FILE_SUFFIX, KRAFT_SNAPSHOT_SUFFIX)


def _kafka_file_name(name: str) -> bool:
    """A name the broker reads or writes in a partition dir (segment files, snapshots, its metadata files)."""
    return name.endswith(_KAFKA_FILE_SUFFIXES) or name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE,
                                                          QUORUM_STATE_FILE)


def unfinished_swap(partition_dir: str | os.PathLike, names: list[str]) -> str | None:
    """Why the ``.log`` files of a partition dir holding ``names`` are not the log the broker will load, or None:
    ``.swap`` files are a segment replacement (cleaning, conversion, a split) that a crash interrupted; the broker
    completes it at load (``LogLoader``), so until then the ``.log`` files alone miss or duplicate records."""
    swaps = sorted(n for n in names if n.endswith(SWAP_FILE_SUFFIX))
    if not swaps:
        return None
    parent = os.path.dirname(os.path.normpath(os.fspath(partition_dir))) or "."
    return (f"an unfinished segment replacement ({len(swaps)} .swap file(s): {', '.join(swaps[:3])}"
            f"{', ...' if len(swaps) > 3 else ''}): the broker completes it at load; until then the segments "
            f"listed are not the partition's log. Run `kafkalog repair {parent}` first")


@dataclass
class PartitionFiles:
    """The files of one partition directory (:func:`list_partition_files`)."""

    segments: list[Segment] = field(default_factory=list)
    snapshot_files: list[tuple[int, Path]] = field(default_factory=list)
    temp_files: list[tuple[Path, str]] = field(default_factory=list)  # (path, suffix)
    kraft_snapshots: list[Path] = field(default_factory=list)
    other_files: list[Path] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def list_partition_files(view: DirView, path: Path, metadata_log: bool) -> PartitionFiles:
    """The files of the partition directory ``path`` as ``view`` has it (``metadata_log``: the
    ``__cluster_metadata`` partition, whose KRaft snapshots are its own)."""
    logs: dict[int, str] = {}
    prefixes_with_log: set[str] = set()
    index_files: list[Path] = []
    out = PartitionFiles()
    for name in view.names(None):
        e = view.entry(name)
        assert e is not None
        p = path / name
        if e.kind == SYMLINK_OUT:
            out.findings.append(warning(p, None, "layout", code="layout.symlinkOutOfPartitionDir"))
            continue
        if e.kind in (DIR, SPECIAL) and _kafka_file_name(name):
            out.findings.append(error(p, None, "layout", code="layout.kafkaNameNotAFile", directory=e.kind == DIR))
            continue
        if e.kind == DIR:
            out.findings.append(info(p, None, "layout", code="layout.subdirectory"))
            continue
        if e.kind == SPECIAL:
            out.findings.append(warning(p, None, "layout", code="layout.special"))
            continue
        if e.kind == DANGLING:
            out.findings.append(warning(p, None, "layout", code="layout.danglingSymlink"))
            continue
        assert e.kind == FILE
        suffix = temp_suffix(name)
        if suffix is not None and not name.endswith(".checkpoint.deleted"):
            out.temp_files.append((p, suffix))
            continue
        if name.endswith(LOG_FILE_SUFFIX):
            try:
                base = offset_from_file_name(name)
            except ValueError:
                out.findings.append(error(p, None, "layout", code="layout.logNameNoOffset"))
                continue
            if base < 0:
                out.findings.append(error(p, None, "layout", code="layout.negativeBaseOffset", baseOffset=base))
                continue
            if base in logs:
                out.findings.append(error(p, None, "layout", code="layout.baseOffsetTwice", baseOffset=base,
                                          first=logs[base], second=name))
                continue
            logs[base] = name
            prefixes_with_log.add(name.split(".", 1)[0])
        elif name.endswith(INDEX_SUFFIXES):
            index_files.append(p)
        elif name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX):
            try:
                out.snapshot_files.append((offset_from_file_name(name), p))
            except ValueError:
                out.findings.append(warning(p, None, "snapshot", code="layout.snapshotNameNoOffset"))
        elif name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE, QUORUM_STATE_FILE):
            continue
        elif metadata_log and (
            name.endswith(KRAFT_SNAPSHOT_SUFFIX) or name.endswith(KRAFT_SNAPSHOT_PART_SUFFIX)
            or name.endswith(".checkpoint.deleted")
        ):
            out.kraft_snapshots.append(p)
        else:
            out.other_files.append(p)
            out.findings.append(info(p, None, "layout", code="layout.unusedInPartitionDir"))
    for p in index_files:
        if p.name.split(".", 1)[0] not in prefixes_with_log:
            out.findings.append(warning(p, None, "index", code="layout.orphanedIndex"))
    out.segments = [Segment.in_view(view, b, logs[b]) for b in sorted(logs)]
    out.snapshot_files.sort()
    return out
