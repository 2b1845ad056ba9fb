"""What every engine reads from a data dir before it plans: its checkpoints (a malformed one reads as empty,
as the broker reads it), the clean-shutdown marker, the ``.lock``, and which partitions a command argument
names."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kafkalog.storage.config.log_config import BrokerConfig, LogConfig
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.plan import DataDirPlan, PartitionPlan, Plan, Runner
from kafkalog.storage.errors import LogDirError
from kafkalog.storage.files.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpoint,
)
from kafkalog.storage.files.clean_shutdown import CLEAN_SHUTDOWN_FILE
from kafkalog.storage.files.findings import Finding, note
from kafkalog.storage.io.dirview import fingerprints
from kafkalog.storage.io.fs import absolute, is_url
from kafkalog.storage.io.lock import LockStatus, describe_holders, lock_status
from kafkalog.storage.log.datadir import partition_dirs, require_readable, resolve_partition_dirs
from kafkalog.storage.log.dir_checkpoints import read_checkpoint_or_empty
from kafkalog.storage.log.paths import DATA_DIR, require_destination
from kafkalog.storage.log.topic_partition import parse_topic_partition_name


@dataclass
class DataDirState:
    path: Path
    recovery_points: dict[tuple[str, int], int] = field(default_factory=dict)
    log_start_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    high_watermarks: dict[tuple[str, int], int] = field(default_factory=dict)
    clean_points: dict[tuple[str, int], int] = field(default_factory=dict)
    clean_shutdown: bool = False
    lock: LockStatus | None = None
    notes: list[Finding] = field(default_factory=list)
    unreadable: set[str] = field(default_factory=set)  # checkpoint files that did not parse

    def fingerprints(self) -> dict[str, tuple | None]:
        return fingerprints(self.path, (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                                        REPLICATION_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT, CLEAN_SHUTDOWN_FILE))

    def new_plan(self) -> DataDirPlan:
        dp = DataDirPlan(str(self.path), notes=list(self.notes), fingerprints=self.fingerprints())
        if self.lock is not None and self.lock.held:
            who = describe_holders(self.lock.holders, "a live process")
            dp.notes.append(note(self.path, "lock.held", holders=who))
        return dp


def read_data_dir(path: str | os.PathLike) -> DataDirState:
    """The state of a data dir an engine plans on: a recognised data dir, or an empty directory a command makes a
    new data dir (the one path contract, :func:`kafkalog.storage.log.paths.require_destination`)."""
    # a URL (doctor's prediction, planned on a read-only view through the filesystem seam): a data dir, read
    d = absolute(require_readable(path, (DATA_DIR,)).path if is_url(path) else require_destination(path, new=False))
    st = DataDirState(d)
    for name, attr in ((RECOVERY_POINT_CHECKPOINT, "recovery_points"), (LOG_START_OFFSET_CHECKPOINT,
                                                                        "log_start_offsets"),
                       (REPLICATION_OFFSET_CHECKPOINT, "high_watermarks"), (CLEANER_OFFSET_CHECKPOINT,
                                                                           "clean_points")):
        before = len(st.notes)
        setattr(st, attr, read_checkpoint_or_empty(d / name, st.notes))
        if len(st.notes) > before:
            st.unreadable.add(name)
    st.clean_shutdown = (d / CLEAN_SHUTDOWN_FILE).exists()
    if is_url(d):  # no process holds a lock on a URL: not checked, and the plan says so
        st.notes.append(note(d / ".lock", "lock.notChecked"))
        return st
    try:
        st.lock = lock_status(d)
    except (OSError, LogDirError) as e:  # a FIFO .lock: applying refuses it (DirLock) with the reason
        st.notes.append(note(d / ".lock", "lock.unreadable", error=str(getattr(e, "reason", e))))
        st.lock = None
    return st


def checkpoint_bytes(offsets: dict[tuple[str, int], int]) -> bytes:
    return OffsetCheckpoint.from_mapping(offsets).to_bytes()


def group_partitions(paths: Iterable[str | os.PathLike], *, topics: set[str] | None = None,
                     include_metadata: bool = False) -> dict[Path, list[Path]]:
    """``{data dir: [partition dirs]}`` for command arguments that are data dirs (every live partition, without
    ``__cluster_metadata`` unless ``include_metadata``) or partition dirs (themselves)."""
    out: dict[Path, list[Path]] = {}
    for p in resolve_partition_dirs(list(paths), topics, include_metadata=include_metadata):
        a = Path(os.path.abspath(p))
        out.setdefault(a.parent, []).append(a)
    return out


def data_dir_partitions(data_dir: str | os.PathLike) -> list[tuple[Path, str, int]]:
    return [(absolute(p), t, n) for p, t, n in partition_dirs(data_dir)]


def whole_data_dirs(data_dirs: Iterable[str | os.PathLike]) -> dict[Path, list[Path]]:
    """``{data dir: [partition dirs]}`` for engines that take whole data dirs (repair, flush): every partition the
    broker checkpoints (live and ``-future``). Each must be a recognised data dir (a directory that is not Kafka's
    is a :class:`~kafkalog.storage.log.paths.PathError`: these engines write the data dir's own files)."""
    return {absolute(require_readable(d, (DATA_DIR,)).path): [p for p, _, _ in data_dir_partitions(d)]
            for d in data_dirs}


@dataclass
class Target:
    """One partition an engine plans, with its effective config and what its data dir knows."""

    data_dir: Path
    path: Path
    topic: str
    partition: int
    config: LogConfig
    state: DataDirState
    broker: BrokerConfig

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


def plan_partitions(plan: Plan, groups: dict[Path, list[Path]], resolver: ConfigResolver, run: Runner,
                    plan_partition: Callable[[tuple], PartitionPlan], task: Callable[[Target], tuple], *,
                    prepare: Callable[[DataDirPlan, DataDirState], None] | None = None,
                    finish: Callable[[DataDirPlan, DataDirState], None] | None = None,
                    notes: bool = True) -> Plan:
    """The loop of every engine's plan: per data dir, its state (checkpoints, marker, lock) and the resolver's
    notes, ``prepare(dp, st)``; one task per partition (``task(target)``: the picklable arguments of
    ``plan_partition``), planned through ``run`` (threads, processes or Spark tasks); then, unless a partition
    could not be planned, ``finish(dp, st)``: the data dir's own operations (checkpoints, markers). The partitions
    of every data dir go to ``run`` together: several ``log.dirs`` are planned in parallel, not one after another."""
    dirs: list[tuple[DataDirPlan, DataDirState, int]] = []
    tasks: list[tuple] = []
    for d, pdirs in groups.items():
        st = read_data_dir(d)
        dp = st.new_plan()
        if notes:
            dp.notes += resolver.notes(d)
        if prepare is not None:
            prepare(dp, st)
        broker = resolver.broker_for(d)
        for p in pdirs:
            tp = parse_topic_partition_name(p.name)
            tasks.append(task(Target(d, p, tp.topic, tp.partition, resolver.log_config(d, tp.topic), st, broker)))
        dirs.append((dp, st, len(pdirs)))
    done = list(run(plan_partition, tasks))
    i = 0
    for dp, st, n in dirs:
        dp.partitions, i = done[i:i + n], i + n
        if finish is not None and not any(pp.error for pp in dp.partitions):
            finish(dp, st)
        plan.data_dirs.append(dp)
    return plan


__all__ = ["DataDirState", "Target", "checkpoint_bytes", "data_dir_partitions", "group_partitions",
           "plan_partitions", "read_data_dir", "whole_data_dirs"]
