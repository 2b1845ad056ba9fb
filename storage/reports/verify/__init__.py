"""Verification of partition logs and data dirs as pure functions returning :class:`Finding` lists.

Nothing here prints, writes or raises for bad data: every problem becomes a finding with the file, the byte
position, a ``kind`` and a severity. Shallow checks (always): batch framing, CRCs, offsets increasing and not
below the segment base, offset-index entries pointing at batch starts with matching offsets (Kafka's
``sanityCheck`` plus the stricter ``DumpLogSegments --verify-index-only`` rule), time-index entries matching
batch max timestamps, transaction-index sanity, checkpoints pointing inside the logs, ``partition.metadata``
present and consistent, leftover temporary files. ``deep=True`` also decodes every record (decompressing),
checks record offsets/timestamps against the batch headers and the control records against ``.txnindex``.

Kinds: ``crc``, ``batch``, ``offsets``, ``index``, ``timeindex``, ``txnindex``, ``checkpoint``, ``snapshot``,
``epoch``, ``metadata``, ``leftover``, ``layout``, ``lock``.

The package: :mod:`.segment` (one segment), :mod:`.partition` (one partition directory), :mod:`.datadir` (a data
dir, and several of one broker), :mod:`.files` (single files), and here :func:`verify_paths`, the parallel run
over many paths that every caller (the CLI, Spark) uses.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

from kafkalog.storage.config.resolver import ZOOKEEPER, ConfigResolver
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from kafkalog.storage.files.findings import Finding, Severity, error, warning
from kafkalog.storage.files.partition_metadata import PARTITION_METADATA_FILE
from kafkalog.storage.io.fs import UrlPath, as_path, is_url, listdir, task_path
from kafkalog.storage.log.datadir import DataDir, DataDirs, classify_path, require_readable
from kafkalog.storage.log.dir_checkpoints import partition_checkpoints
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.paths import DATA_DIR, FILE, PARTITION_DIR
from kafkalog.storage.log.segment_check import SegmentSummary, verify_segment
from kafkalog.storage.log.topic_partition import METADATA_TOPIC
from kafkalog.storage.reports.verify.datadir import (
    _data_dir_checks,
    _group_offsets_beyond_end,
    _recovery_point_membership,
    _topic_id_check,
    verify_data_dir,
    verify_data_dirs,
)
from kafkalog.storage.reports.verify.files import verify_file, verify_kraft_snapshot
from kafkalog.storage.reports.verify.partition import verify_partition

__all__ = [
    "Finding", "SegmentSummary", "Severity", "VerifyReport", "VerifyStats", "classify_path", "partition_task",
    "verify_data_dir", "verify_data_dirs", "verify_file", "verify_kraft_snapshot", "verify_partition",
    "verify_paths", "verify_segment",
]


# ------------------------------------------------------------------------------------ many paths, in parallel

ProgressCallback = Callable[[int], None]


@dataclass
class VerifyStats:
    """What a verify run covered."""

    data_dirs: int = 0
    partitions: int = 0
    segments: int = 0
    files: int = 0  # single files given on the command line
    bytes: int = 0  # .log (and KRaft snapshot) bytes scanned


@dataclass
class VerifyReport:
    findings: list[Finding]
    stats: VerifyStats
    seconds: float = 0.0

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.findings if f.severity == "warning")

    @property
    def ok(self) -> bool:
        return self.errors == 0


def partition_bytes(path: str | os.PathLike[str] | UrlPath) -> int:
    """Sum of the ``.log`` sizes of a partition directory (the work a verify of it does)."""
    total = 0
    if is_url(path):  # listed through the filesystem seam
        u = UrlPath.of(path)  # type: ignore[arg-type]
        try:
            return sum(e.size for e in listdir(u.spec, u.fspath) if not e.is_dir and e.name.endswith((".log", ".checkpoint")))
        except OSError:
            return 0
    try:
        with os.scandir(cast(str, path)) as it:
            for e in it:
                if e.name.endswith((".log", ".checkpoint")) and e.is_file(follow_symlinks=False):
                    total += e.stat().st_size
    except OSError:
        pass
    return total


PartitionResult = tuple[list[Finding], int, int, str | None]  # findings, segments, bytes, topic id
PartitionRunner = Callable[[list[tuple[str | UrlPath, dict[str, int | None] | None, bool]]], list[PartitionResult]]


def _partition_tasks(items: list[tuple[str | UrlPath, dict[str, int | None] | None]], deep: bool) -> list:
    """:func:`partition_task` for a chunk of partitions (one pool task)."""
    return [partition_task(path, ck, deep) for path, ck in items]


def partition_task(path: str | UrlPath, checkpoints: dict[str, int | None] | None, deep: bool
                   ) -> tuple[list[Finding], int, int, str | None]:
    """Worker: verify one partition dir (a local path, or a URL read through the filesystem seam); (findings,
    segments, bytes, topic id).

    ``checkpoints`` are the data dir's values for this partition (``None``: read them from the parent dir)."""
    p = as_path(path)
    try:
        if checkpoints is None:
            checkpoints = partition_checkpoints(p)
        log = PartitionLog(
            p,
            log_start_offset_checkpoint=checkpoints.get(LOG_START_OFFSET_CHECKPOINT),
            recovery_point=checkpoints.get(RECOVERY_POINT_CHECKPOINT),
            high_watermark=checkpoints.get(REPLICATION_OFFSET_CHECKPOINT),
            clean_point=checkpoints.get(CLEANER_OFFSET_CHECKPOINT),
        )
    except KafkaLogError as e:
        return [error(e.path or path, e.position, "layout", e.reason)], 0, 0, None
    try:
        segments = len(log.segments)
        size = sum(s.size for s in log.segments) + sum(log.view.size(k.name) for k in log.kraft_snapshots
                                                       if k.name.endswith(".checkpoint"))
        out = verify_partition(log, deep)
        try:
            tid = log.topic_id
        except KafkaLogError:
            tid = None
        return out, segments, size, tid
    finally:
        log.close()


def _zookeeper_topic_ids(ddir: DataDir, missing: list[tuple[int, Path]], results: dict[int, list[Finding]],
                         post: list[Finding]) -> None:
    """A ZooKeeper-mode data dir (``meta.properties`` version 0, no cluster metadata) whose partitions have no
    topic id: one warning for the dir, about a KRaft migration (a ZooKeeper broker does not need the ids, a KRaft
    broker treats such replicas as stray), with the command that assigns them; each partition's own warning
    becomes an info (the fact stays in ``--json``)."""
    missing = [(s, pp) for s, pp in missing if ddir.partition_dirs[pp].topic != METADATA_TOPIC]
    if not missing or ConfigResolver(data_dirs=[ddir.path]).data_dir(ddir.path).mode != ZOOKEEPER:
        return
    for s, pp in missing:
        where = str(pp / PARTITION_METADATA_FILE)
        results[s] = [replace(f, severity="info", message="missing: no topic id (a ZooKeeper-mode partition; "
                              "see the data dir's warning about a KRaft migration)")
                      if f.file == where and f.kind == "metadata" and f.severity == "warning" else f
                      for f in results[s]]
    topics = sorted({ddir.partition_dirs[pp].topic for _, pp in missing})
    post.append(warning(ddir.path, None, "metadata", code="verify.zookeeperTopicIds", partitions=len(missing),
                        topics=len(topics)))


def verify_paths(
    paths: Sequence[str | os.PathLike],
    *,
    deep: bool = False,
    workers: int | None = None,
    independent: bool = False,
    on_total: ProgressCallback | None = None,
    on_advance: ProgressCallback | None = None,
    runner: PartitionRunner | None = None,
) -> VerifyReport:
    """Verify data dirs, partition dirs and single files (``kafkalog verify``), every partition in a process
    pool of ``workers`` processes (default: the CPU count; 1 = in this process). A path that is none of them is a
    :class:`~kafkalog.storage.log.paths.PathError` (the one path contract: :func:`~kafkalog.storage.log.paths.classify`).

    ``runner`` replaces the process pool: it gets every partition task as ``(path, checkpoints, deep)`` and
    returns :func:`partition_task` of each, in order (``kafkalog spark verify`` runs them as Spark tasks). The
    data dirs' own checks and the cross-partition ones stay here, so every runner gives the same report.

    Data dirs given together are treated as the ``log.dirs`` of one broker (cross-dir rules included) unless
    ``independent`` (data dirs of different brokers).
    ``on_total(bytes)`` is called once with the ``.log`` bytes to scan, ``on_advance(bytes)`` as each
    partition finishes. Findings come back grouped per data dir / partition / file, in the order given.
    """
    t0 = time.perf_counter()
    stats = VerifyStats()
    n_workers = max(1, workers if workers is not None else (os.cpu_count() or 1))

    # plan: (kind, path) in order; data dirs opened here (their own files are small)
    data_dirs: list[str | os.PathLike] = []
    items: list[tuple[str, Path]] = []
    for raw in paths:
        # the one path contract: a PathError for what is not a path verify takes (a URL: a dir or a file, through
        # the filesystem seam)
        k = require_readable(raw, (DATA_DIR, PARTITION_DIR, FILE))
        p, kind = k.path, k.kind
        if kind == "dataDir":
            data_dirs.append(p)
        items.append((kind, p))

    results: dict[int, list[Finding]] = {}
    head: list[Finding] = []
    groups: list[DataDirs] = []
    tasks: list[tuple[int, str | UrlPath, dict[str, int | None] | None]] = []  # (slot, partition path, checkpoints)
    dir_slots: dict[int, tuple[DataDir, list[tuple[int, Path, str]]]] = {}
    opened: dict[Path, DataDir] = {}
    for group in ([[d] for d in data_dirs] if independent else [data_dirs] if data_dirs else []):
        try:
            dirs = DataDirs(group)
        except KafkaLogError as e:
            head.append(error(e.path or "", e.position, "layout", e.reason))
            bad = set(group)
            items = [(k, p) for k, p in items if not (k == "dataDir" and p in bad)]
            continue
        groups.append(dirs)
        head.extend(dirs.ensemble_findings())
        for d in dirs:
            opened.setdefault(d.path, d)
    slot = 0
    singles: list[tuple[int, str, Path]] = []
    for kind, p in items:
        if kind == "dataDir":
            ddir = opened[p]
            stats.data_dirs += 1
            own: list[Finding] = list(ddir.findings)
            _data_dir_checks(ddir, own)
            results[slot] = own
            parts: list[tuple[int, Path, str]] = []
            dslot = slot
            slot += 1
            for pp, tp in ddir.partition_dirs.items():
                key = (tp.topic, tp.partition)
                ck = {
                    LOG_START_OFFSET_CHECKPOINT: ddir.log_start_offsets.get(key),
                    RECOVERY_POINT_CHECKPOINT: ddir.recovery_points.get(key),
                    REPLICATION_OFFSET_CHECKPOINT: ddir.high_watermarks.get(key),
                    CLEANER_OFFSET_CHECKPOINT: ddir.clean_points.get(key),
                }
                tasks.append((slot, task_path(pp), ck))
                parts.append((slot, pp, tp.kind))
                slot += 1
            dir_slots[dslot] = (ddir, parts)
        elif kind == "partition":
            tasks.append((slot, task_path(p), None))
            slot += 1
        else:
            singles.append((slot, "file", p))
            slot += 1

    sizes = {s: partition_bytes(pp) for s, pp, _ in tasks}
    single_sizes = {s: (p.stat().st_size if p.is_file() else 0) for s, _, p in singles}
    if on_total is not None:
        on_total(sum(sizes.values()) + sum(single_sizes.values()))

    topic_ids: dict[int, str | None] = {}

    def collect(s: int, res: tuple[list[Finding], int, int, str | None]) -> None:
        findings, segs, size, tid = res
        results[s] = findings
        stats.partitions += 1
        stats.segments += segs
        stats.bytes += size
        topic_ids[s] = tid
        if on_advance is not None:
            on_advance(sizes.get(s, size))

    try:
        if runner is not None:
            done = runner([(path, ck, deep) for _, path, ck in tasks]) if tasks else []
            if len(done) != len(tasks):
                raise RuntimeError(f"partition runner returned {len(done)} results for {len(tasks)} tasks")
            for (s, _, _), res in zip(tasks, done, strict=True):
                collect(s, res)
        elif n_workers > 1 and len(tasks) > 1:

            ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
            # biggest first so one large partition does not start last
            order = sorted(tasks, key=lambda t: -sizes[t[0]])
            # small partitions go in chunks: one future per partition made 100,000 partitions crawl (the pool's
            # bookkeeping per future dominated a sub-millisecond task)
            per = max(1, min(64, len(order) // (n_workers * 16)))
            chunks = [order[i:i + per] for i in range(0, len(order), per)]
            with ProcessPoolExecutor(max_workers=min(n_workers, len(tasks)), mp_context=ctx) as pool:
                futs = {pool.submit(_partition_tasks, [(path, ck) for _, path, ck in c], deep): c for c in chunks}
                for fut in as_completed(futs):
                    for (s, _, _), res in zip(futs[fut], fut.result(), strict=True):
                        collect(s, res)
        else:
            for s, path, task_ck in tasks:
                collect(s, partition_task(path, task_ck, deep))
        for s, _, p in singles:
            findings, segs, size = verify_file(p, deep)
            results[s] = findings
            stats.files += 1
            stats.segments += segs
            stats.bytes += size
            if on_advance is not None:
                on_advance(single_sizes.get(s, size))
        for dslot, (ddir, parts) in dir_slots.items():
            seen: dict[str, tuple[str, Path]] = {}
            post: list[Finding] = []
            for s, pp, kind in parts:
                tp = ddir.partition_dirs[pp]
                _topic_id_check(seen, tp.topic, kind, topic_ids.get(s), pp, post)
            _recovery_point_membership(ddir, post)
            _group_offsets_beyond_end(ddir, post)
            _zookeeper_topic_ids(ddir, [(s, pp) for s, pp, _ in parts if topic_ids.get(s) is None], results, post)
            results[dslot].extend(post)
    finally:
        for g in groups:
            g.close()
    out = list(head)
    for s in sorted(results):
        out.extend(results[s])
    return VerifyReport(out, stats, time.perf_counter() - t0)
