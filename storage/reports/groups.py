"""Consumer groups and their committed offsets, read offline from ``__consumer_offsets`` partitions (what
``kafkalog groups`` prints): the offline ``kafka-consumer-groups.sh --describe --all-groups``.

The groups are what :mod:`kafkalog.storage.reports.group_coordinator` replays of each partition.

Lag = the partition's end offset minus the committed offset, for partitions present (live) in the same data
dirs. The end offset is what ``kafka-consumer-groups.sh`` shows as LOG-END-OFFSET: ``ListOffsets(latest)``
read-uncommitted, i.e. the high watermark. Offline: the ``replication-offset-checkpoint`` entry capped at the
log end offset, or the log end offset without an entry (``logEndOffsetSource`` says which).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files.findings import Finding, note
from kafkalog.storage.log.datadir import DataDir, require_readable
from kafkalog.storage.log.loss import CONSUMER_GROUP, RememberedOffset
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.paths import PARTITION_DIR
from kafkalog.storage.parallel import run_partition_tasks
from kafkalog.storage.reports.consumer_group import Group
from kafkalog.storage.reports.group_coordinator import replay_offsets_partition, replay_task

__all__ = ["OFFSETS_TOPIC", "GroupsReport", "load_groups"]

OFFSETS_TOPIC = "__consumer_offsets"
PARALLEL_BYTES = 64 << 20  # from this much __consumer_offsets data on, partitions are replayed in parallel


@dataclass
class GroupsReport:
    groups: list[Group]
    partitions: list[str]  # the __consumer_offsets partition dirs read
    #: a partition that could not be read to its end (its groups as far as it was read) or whose log end offset
    #: could not be read, as notes (``groups.crcMismatch``, ``groups.recordUndecodable``, ``groups.unreadable``,
    #: ``groups.logEndOffsetUnreadable``; kafkalog.facts words them)
    errors: list[Finding]
    notes: list[Finding]  # structured notes (kafkalog.facts words them)
    #: end offsets (high watermark, else log end offset) of the partitions present that some member is assigned
    assigned_ends: dict[tuple[str, int], int | None] = field(default_factory=dict)
    #: committed offsets past the log end offset of their partition (present in these dirs): offsets the group
    #: consumed that the log no longer holds (its lag is negative)
    beyond_end: list[RememberedOffset] = field(default_factory=list)

    def describe_rows(self) -> list[dict[str, Any]]:
        return [r for g in self.groups for r in g.describe_rows(self.assigned_ends)]


def load_groups(log_dirs: Iterable[str | os.PathLike], *, group: str | None = None,
                progress: Any = None, workers: int | None = None) -> GroupsReport:
    """``kafkalog groups``: every group of the live ``__consumer_offsets`` partitions found in ``log_dirs``
    (data dirs of one broker, or partition dirs), with its members and latest committed offsets, and the lag
    against the partitions present in the same dirs. ``group`` keeps that group only. ``progress`` (optional,
    :func:`kafkalog.tools.output.progress`'s bar) gets ``update(total=bytes)`` then ``advance(bytes)``.
    ``workers``: processes replaying partitions at once (default: the CPU count from :data:`PARALLEL_BYTES` of
    ``__consumer_offsets`` on, else 1); the report is the same for any number. Raises
    :class:`~kafkalog.storage.log.paths.PathError` (the one path contract) for a path that is neither a data dir nor
    a partition dir."""

    dirs: list[DataDir] = []
    offsets_logs: list[PartitionLog] = []
    logs: dict[tuple[str, int], PartitionLog] = {}
    single: list[PartitionLog] = []
    try:
        for raw in log_dirs:
            k = require_readable(raw)  # the one path contract (a URL: through the filesystem seam)
            p = k.path
            if k.kind == PARTITION_DIR:
                log = PartitionLog(p)
                single.append(log)
                candidates = [log]
            else:
                d = DataDir(p)
                dirs.append(d)
                candidates = list(d.partitions(include_metadata=False))
            for log in candidates:
                if log.dir_kind != "live":
                    continue
                # a partition read once: the first dir that has it (the same dir given twice lists it twice)
                if logs.setdefault((log.topic, log.partition), log) is log and log.topic == OFFSETS_TOPIC:
                    offsets_logs.append(log)
        topic_names: dict[str, str] = {}
        for (topic, _), log in logs.items():
            try:
                tid = log.topic_id
            except KafkaLogError:
                tid = None
            if tid:
                topic_names.setdefault(tid, topic)
        groups: list[Group] = []
        errors: list[Finding] = []
        notes: list[Finding] = []
        ordered = sorted(offsets_logs, key=lambda lg: lg.partition)
        sizes = [lg.size for lg in ordered]
        if progress is not None:
            progress.update(total=sum(sizes))
        if workers is None:
            workers = (os.cpu_count() or 1) if sum(sizes) >= PARALLEL_BYTES else 1
        if workers <= 1:  # in this process: the bar advances batch by batch
            results = [replay_offsets_partition(lg, advance=None if progress is None else progress.advance)
                       for lg in ordered]
        else:  # the workers open their own logs: only paths travel; the bar advances a partition's bytes at once

            results = run_partition_tasks(replay_task, [lg.path for lg in ordered], workers=workers,
                                          threads=1, progress=None if progress is None else progress.advance,
                                          weights=sizes)
        for log, (shard, err) in zip(ordered, results, strict=True):
            if err:
                errors.append(err)
            notes.extend(n if n.file else replace(n, file=str(log.path)) for n in shard.notes)
            groups.extend(shard.finish(topic_names))
        if group is not None:
            groups = [g for g in groups if g.group_id == group]
        ends: dict[tuple[str, int], tuple[int | None, str | None]] = {}
        for g in groups:
            for tp, o in g.offsets.items():
                if tp not in ends:
                    ends[tp] = _end_offset(logs.get(tp), errors)
                o.log_end_offset, o.log_end_offset_source = ends[tp]
            for m in g.members.values():
                for tp in m.assignment:
                    if tp not in ends:
                        ends[tp] = _end_offset(logs.get(tp), errors)
        groups.sort(key=lambda g: g.group_id)
        return GroupsReport(groups, [str(lg.path) for lg in offsets_logs], errors, notes,
                            {tp: e[0] for tp, e in ends.items()}, _beyond_end(groups, logs))
    finally:
        for d in dirs:
            d.close()
        for log in single:
            log.close()


def _beyond_end(groups: list[Group], logs: dict[tuple[str, int], PartitionLog]) -> list[RememberedOffset]:
    """The committed offsets of ``groups`` past the log end offset of their partition (when it is present)."""
    out: list[RememberedOffset] = []
    leos: dict[tuple[str, int], int | None] = {}
    for g in groups:
        for tp, o in sorted(g.offsets.items()):
            log = logs.get(tp)
            if log is None or o.offset < 0:
                continue
            if tp not in leos:
                try:
                    leos[tp] = log.log_end_offset
                except KafkaLogError:
                    leos[tp] = None  # (the error is reported with the partition's end offset)
            leo = leos[tp]
            if leo is not None and o.offset > leo:
                out.append(RememberedOffset(CONSUMER_GROUP, str(log.path), o.offset, leo, group=g.group_id))
    return out


def _end_offset(log: PartitionLog | None, errors: list[Finding]) -> tuple[int | None, str | None]:
    if log is None:
        return None, None
    try:
        leo = log.log_end_offset
    except KafkaLogError as e:
        errors.append(note(log.path, "groups.logEndOffsetUnreadable", error=str(e)))
        return None, None
    hw = log.high_watermark_checkpoint
    if hw is None:
        return leo, "logEndOffset"
    return min(hw, leo), "highWatermark"
