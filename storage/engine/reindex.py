"""``kafkalog reindex``: rebuild segments' ``.index``, ``.timeindex`` and ``.txnindex`` with the broker's
recovery rule (``LogSegment.recover``, producer state replayed across the segments), as a plan.

By default only the indexes of segments whose indexes are missing or wrong (what ``verify`` reports as an error
for them: entries that do not match the log, failing sanity checks) are rebuilt; a healthy partition is left as
the broker wrote it (an index written while appending can differ from the recovery rule's and be right).
``all_segments`` rebuilds every segment's indexes by the recovery rule. Only files whose bytes change are
written, so a second run changes nothing. ``.log`` files are never changed: a segment with invalid bytes makes
the plan invalid (nothing is written anywhere) and is left for ``repair``: its partition's error is
``reindex.invalidBytes`` (the segment, its valid bytes, why the recovery stops there), or ``reindex.mustSplit`` for
a segment whose offsets overflow its base offset (KAFKA-6264: the segment, its base offset, the batch's
position)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.plan import PartitionPlan, Plan, Runner, default_runner
from kafkalog.storage.engine.targets import Target, group_partitions, plan_partitions
from kafkalog.storage.errors import OffsetOverflowError
from kafkalog.storage.files.findings import Finding, note
from kafkalog.storage.files.names import index_file_name, time_index_file_name, txn_index_file_name
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.log.leader_epoch_cache import LeaderEpochCache
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.producer_state import ProducerStateManager
from kafkalog.storage.log.segment import recover_segment
from kafkalog.storage.log.segment_check import verify_segment


def _write_if_changed(view: DirView, name: str, data: bytes, why: str | Finding) -> None:
    if view.exists(name) and view.size(name) == len(data) and view.read(name) == data:
        return
    view.write(name, data, why)


def _index_problem(seg, is_active: bool) -> Finding | None:
    """The first error ``verify`` reports for this segment's index files (None: they are sound)."""

    names = {seg.index_path.name, seg.time_index_path.name, seg.txn_index_path.name}
    findings, _ = verify_segment(seg, is_active=is_active)
    for f in findings:
        if Path(f.file).name in names and (f.severity == "error" or f.facts.get("missing")):
            return f
    return None


def _plan_partition(task: tuple) -> PartitionPlan:
    data_dir, pdir, topic, part, interval, settings, all_segments = task
    pp = PartitionPlan(data_dir, pdir, topic, part, settings=settings)
    with pp.planning(), DirView(pdir) as view:
        log = PartitionLog(view)
        psm = ProducerStateManager(None)
        epochs = LeaderEpochCache(None)
        rebuilt = 0
        for seg in log.segments:
            b = seg.base_offset
            try:
                r = recover_segment(seg.buf, b, index_interval_bytes=interval, producers=psm, epochs=epochs,
                                    path=str(seg.path))
            except OffsetOverflowError as e:  # the broker splits it at load (repair does)
                pp.fail(code="reindex.mustSplit", segment=str(seg.path), baseOffset=e.base_offset,
                        position=e.position, error=e.reason)
                return pp
            if r.valid_bytes < r.log_size:  # recovery would truncate them (repair does)
                cause = r.cause()
                pp.fail(code="reindex.invalidBytes", segment=str(seg.path), validBytes=r.valid_bytes,
                        bytes=r.truncated_bytes, stop=cause["stop"], error=cause["error"])
                return pp
            if not all_segments:
                problem = _index_problem(seg, seg is log.segments[-1])
                if problem is None:
                    continue
                why: str | Finding = note(seg.path, "reindex.indexProblem", log=seg.path.name, finding={
                    "file": problem.file, "code": problem.code or problem.kind, "facts": dict(problem.facts),
                    "message": problem.message})
            else:
                why = note(seg.path, "reindex.recoveryRule", log=seg.path.name)
            _write_if_changed(view, index_file_name(b), r.offset_index.to_bytes(), why)
            _write_if_changed(view, time_index_file_name(b), r.time_index.to_bytes(), why)
            if r.aborted or view.exists(txn_index_file_name(b)):
                _write_if_changed(view, txn_index_file_name(b), r.txn_index.to_bytes(), why)
            rebuilt += 1
        pp.facts = {"segments": rebuilt}
        pp.seal(view)
        log.close()
    return pp


def plan_reindex(paths: Iterable[str | os.PathLike], *, resolver: ConfigResolver | None = None,
                 topics: set[str] | None = None, all_segments: bool = False, runner: Runner | None = None,
                 workers: int = 1, progress=None) -> Plan:
    """The plan of ``kafkalog reindex`` over partition dirs or data dirs (their partitions, ``__cluster_metadata``
    included). ``index.interval.bytes`` is each topic's effective setting (:class:`ConfigResolver`)."""
    groups = group_partitions(paths, topics=topics, include_metadata=True)
    resolver = resolver or ConfigResolver(data_dirs=list(groups))

    def task(t: Target) -> tuple:
        return (str(t.data_dir), str(t.path), t.topic, t.partition, t.config.index_interval_bytes,
                t.config.describe(["index.interval.bytes"]), all_segments)

    return plan_partitions(Plan("reindex"), groups, resolver, runner or default_runner(workers, progress),
                           _plan_partition, task)


__all__ = ["plan_reindex"]
