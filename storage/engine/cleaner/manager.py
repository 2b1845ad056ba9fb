"""Kafka's ``LogCleanerManager``: what a cleaning round cleans (``cleanableOffsets``, ``maxCompactionDelay``,
``grabFilthiestCompactedLog``'s eligibility) and the ``kafkalog compact`` plan over data dirs, one round per
partition, then the ``cleaner-offset-checkpoint`` update (``updateCheckpoints``); the round itself is
:mod:`.cleaner`'s (Kafka's ``Cleaner``).

Library API (the ``kafkalog compact`` command is a thin shell over it):

* :func:`cleanable_offsets`, :func:`log_to_clean` — the cleanable range, dirty ratio and eligibility;
* :func:`plan_compact` — the plan: a :class:`CompactRound` per compacted partition, then the checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from kafkalog.storage.config.log_config import CleanerConfig, LogConfig
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.cleaner.cleaner import (
    CleanResult,
    LogToClean,
    filter_round,
    group_segments_by_size,
    map_cannot_fill,
    map_round,
)
from kafkalog.storage.engine.cleaner.parallel import default_workers
from kafkalog.storage.engine.cleaner.record_filter import UncleanableError
from kafkalog.storage.engine.plan import Loss, PartitionPlan, Plan, PlanError, Runner, Setting, default_runner
from kafkalog.storage.engine.swap import replacement_effect
from kafkalog.storage.engine.targets import Target, checkpoint_bytes, group_partitions, plan_partitions
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files.checkpoints import CLEANER_OFFSET_CHECKPOINT
from kafkalog.storage.files.findings import note
from kafkalog.storage.files.names import offset_file_name
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.io.ops import Op
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.segment import SEGMENT_SUFFIXES

LONG_MAX = 9223372036854775807


# ------------------------------------------------------------------------------ choosing what to clean
def cleanable_offsets(log: PartitionLog, checkpoint: int | None, now: int, cfg: LogConfig,
                      expiration_ms: int) -> tuple[int, int, bool]:
    """``(firstDirtyOffset, firstUncleanableDirtyOffset, forceUpdateCheckpoint)``."""
    start = log.log_start_offset
    dirty = start if checkpoint is None else checkpoint
    force = False
    if dirty < start or dirty > log.log_end_offset:
        dirty, force = start, True
    active = log.active_segment
    assert active is not None
    candidates = [log.last_stable_offset(now, expiration_ms), active.base_offset]
    lag = max(cfg.min_compaction_lag_ms, 0)
    if lag > 0:
        for s in log.non_active_segments_from(dirty):
            if s.largest_timestamp() > now - lag:
                candidates.append(s.base_offset)
                break
    return dirty, max(dirty, min(candidates)), force


def max_compaction_delay(log: PartitionLog, first_dirty: int, now: int, cfg: LogConfig) -> int:
    ts = [s.first_batch_timestamp() for s in log.non_active_segments_from(first_dirty)]
    ts = [t for t in ts if t > 0]
    earliest = min(ts) if ts else LONG_MAX
    clean_until = now - max(cfg.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


def log_to_clean(log: PartitionLog, checkpoint: int | None, now: int, cfg: LogConfig,
                 expiration_ms: int) -> LogToClean:
    dirty, uncleanable, force = cleanable_offsets(log, checkpoint, now, cfg, expiration_ms)
    nas = log.non_active_segments_from(uncleanable)
    first_unc = nas[0].base_offset if nas else log.active_segment.base_offset  # type: ignore[union-attr]
    clean_bytes = sum(s.size for s in log.segments if s.base_offset < dirty)
    cleanable = sum(s.size for s in log.log_segments(min(dirty, first_unc), first_unc))
    delay = max_compaction_delay(log, dirty, now, cfg)
    return LogToClean(dirty, uncleanable, first_unc, clean_bytes, cleanable, delay > 0, force)


# ------------------------------------------------------------------------------------------- the plan
@dataclass
class PlannedGroup:
    """A group of segments a round replaces by one cleaned segment. ``size``/``txn`` are known when the plan was
    made with a measuring pass (``exact``), else at apply."""

    base_offset: int
    sources: list[int]
    source_files: list[str]
    source_bytes: int
    size: int | None = None
    txn: bool | None = None

    @property
    def suffixes(self) -> tuple[str, ...] | None:
        if self.txn is None:
            return None
        return (".log", ".index", ".timeindex") + ((".txnindex",) if self.txn else ())


@dataclass
class CompactRound(Op):
    """One cleaning round on one partition: rebuild the key map, filter each group into a new segment, swap it in
    (Kafka's ``.cleaned``/``.swap``/``.deleted`` protocol), group by group as the broker does."""

    kind: ClassVar[str] = "compact"
    config: LogConfig = field(default=None, repr=False)  # type: ignore[assignment]
    cleaner: CleanerConfig = field(default=None, repr=False)  # type: ignore[assignment]
    now: int = 0
    log_start_offset: int | None = None
    high_watermark: int | None = None
    expiration_ms: int = 86400000
    legacy_to_v2: bool = True
    per_batch_index: bool = True
    map_workers: int = 1
    keep_deleted: bool = False
    to_clean: LogToClean | None = field(default=None, repr=False)
    end_offset: int = 0
    groups: list[PlannedGroup] = field(default_factory=list)
    snapshots: list[str] = field(default_factory=list)  # producer snapshots of bases that disappear

    def originals(self) -> list[tuple[str, bool]]:
        d = Path(self.path)
        return [(str(d / n), False) for g in self.groups for n in g.source_files] + \
            [(str(d / n), False) for n in self.snapshots]

    def run(self) -> CleanResult:

        assert self.to_clean is not None
        with PartitionLog(self.path, log_start_offset_checkpoint=self.log_start_offset,
                          high_watermark=self.high_watermark) as log:
            offset_map, end, full = map_round(log, self.to_clean, self.cleaner, workers=self.map_workers)
            if end != self.end_offset:
                raise PlanError(f"the key map ends the round at offset {end}, the plan at {self.end_offset}: the "
                                "partition changed since planning; nothing of it was changed", self.path)
            try:
                return filter_round(log, self.to_clean, offset_map, end, self.config, self.cleaner, self.now,
                                    write=True, map_full=full, legacy_to_v2=self.legacy_to_v2,
                                    expiration_ms=self.expiration_ms, keep_deleted=self.keep_deleted,
                                    per_batch_index=self.per_batch_index, expect=self.groups)
            except UncleanableError as e:
                raise KafkaLogError(f"the broker would mark this partition uncleanable: {e.reason}", e.path,
                                    e.position) from None

    def trace(self) -> tuple:
        return (self.kind, self.path, self.end_offset,
                tuple((g.base_offset, tuple(g.sources), g.suffixes) for g in self.groups))

    def done_trace(self, result: CleanResult) -> tuple:
        return (self.kind, self.path, result.end_offset,
                tuple((g.base_offset, tuple(g.sources), g.suffixes) for g in result.groups))

    @property
    def bytes(self) -> int:
        if any(g.size is None for g in self.groups):
            return 0
        return sum(g.source_bytes - (g.size or 0) for g in self.groups)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "endOffset": self.end_offset,
                "groups": [{"baseOffset": g.base_offset, "sources": g.sources, "bytesBefore": g.source_bytes,
                            "bytesAfter": g.size} for g in self.groups]}



def _setting(cfg: LogConfig, name: str, value) -> dict:
    return Setting(name, value, cfg.source(name)).to_dict()


def _plan_partition(task: tuple) -> PartitionPlan:
    (data_dir, pdir, topic, part, cfg, cleaner, checkpoint, lso, hw, now, force, version, exact, keep_deleted,
     map_workers, expiration, settings) = task
    pp = PartitionPlan(data_dir, pdir, topic, part, settings=settings)
    if not cfg.compact:
        pp.notes.append(note(pdir, "compact.policy", setting=_setting(cfg, "cleanup.policy", list(cfg.cleanup_policy))))
        return pp
    if not cleaner.enable_cleaner:
        pp.notes.append(note(pdir, "compact.cleanerDisabled", setting={"name": "log.cleaner.enable", "value": False}))
        return pp
    with pp.planning(), DirView(pdir) as view:
        log = PartitionLog(view, log_start_offset_checkpoint=lso, high_watermark=hw)
        if not log.segments:
            pp.notes.append(note(pdir, "compact.noSegments"))
            return pp
        ltc = log_to_clean(log, checkpoint, now, cfg, expiration)
        pp.facts = {"firstDirtyOffset": ltc.first_dirty_offset,
                    "firstUncleanableOffset": ltc.first_uncleanable_offset,
                    "cleanableRatio": round(ltc.cleanable_ratio, 6), "cleanableBytes": ltc.cleanable_bytes,
                    "cleanBytes": ltc.clean_bytes}
        if ltc.force_update_checkpoint:
            pp.facts["cleanPoint"] = ltc.first_dirty_offset
            pp.notes.append(note(pdir, "compact.cleanPointReset", cleanPoint=checkpoint,
                                 firstDirtyOffset=ltc.first_dirty_offset))
        if ltc.total_bytes == 0:
            active = log.active_segment
            assert active is not None
            leo = log.log_end_offset
            if active.size == 0 or leo <= active.base_offset:
                pp.notes.append(note(pdir, "compact.emptyLog"))
                return pp
            pp.facts["activeSegmentBytes"] = active.size
            pp.facts["activeSegmentOffsets"] = [active.base_offset, leo - 1]
            pp.notes.append(note(pdir, "compact.activeOnly", bytes=active.size, firstOffset=active.base_offset,
                                 lastOffset=leo - 1))
            return pp
        if not force and not ltc.eligible(cfg.min_cleanable_dirty_ratio):
            pp.notes.append(note(pdir, "compact.notEligible", dirtyRatio=ltc.cleanable_ratio,
                                 setting=_setting(cfg, "min.cleanable.dirty.ratio", cfg.min_cleanable_dirty_ratio)))
            return pp
        if ltc.first_uncleanable_offset <= ltc.first_dirty_offset and not ltc.cleanable_bytes:
            pp.notes.append(note(pdir, "compact.nothingCleanable"))
            return pp
        legacy_to_v2, per_batch = version >= (4, 0), version >= (3, 9)
        result: CleanResult | None = None
        try:
            if exact:
                offset_map, end, full = map_round(log, ltc, cleaner, workers=map_workers)
                result = filter_round(log, ltc, offset_map, end, cfg, cleaner, now, write=False, map_full=full,
                                      legacy_to_v2=legacy_to_v2, expiration_ms=expiration,
                                      per_batch_index=per_batch)
                del offset_map
            elif map_cannot_fill(log, ltc, cleaner):
                dirty = log.log_segments(ltc.first_dirty_offset, ltc.first_uncleanable_offset)
                end = ltc.first_uncleanable_offset if dirty else 0
            else:
                _, end, _ = map_round(log, ltc, cleaner, workers=map_workers)
        except UncleanableError as e:
            pp.fail(code="compact.uncleanable", file=None if e.path is None else str(e.path), position=e.position,
                    error=e.reason)
            return pp
        groups = group_segments_by_size(log.log_segments(0, end), cfg.segment_size, cfg.segment_index_bytes,
                                        ltc.first_uncleanable_offset)
        planned = []
        for i, g in enumerate(groups):
            files = [n for s in g for n in (offset_file_name(s.base_offset, x) for x in SEGMENT_SUFFIXES)
                     if view.exists(n)]
            pg = PlannedGroup(g[0].base_offset, [s.base_offset for s in g], files, sum(s.size for s in g))
            if result is not None:
                pg.size, pg.txn = result.groups[i].size, bool(result.groups[i].txn_entries)
            planned.append(pg)
        op = CompactRound(pdir, note(pdir, "op.compactRound", cleanPoint=ltc.first_dirty_offset), config=cfg, cleaner=cleaner, now=now,
                          log_start_offset=lso, high_watermark=hw, expiration_ms=expiration,
                          legacy_to_v2=legacy_to_v2, per_batch_index=per_batch, map_workers=map_workers,
                          keep_deleted=keep_deleted, to_clean=ltc, end_offset=end, groups=planned)
        _record_round(view, op)
        pp.facts["cleanPoint"] = end
        pp.facts["endOffset"] = end
        if result is not None:
            st = result.stats
            pp.facts.update(bytesBefore=result.bytes_before, bytesAfter=result.bytes_after,
                            bytesReclaimed=result.bytes_reclaimed, recordsRead=st.messages_read,
                            recordsRetained=st.messages_retained, mapFull=result.map_full)
        dropped = None if result is None else result.stats.messages_read - result.stats.messages_retained
        pp.losses.append(Loss(
            "", log.log_start_offset, end - 1, dropped, 0 if result is None else result.bytes_reclaimed,
            setting=Setting("delete.retention.ms", cfg.delete_retention_ms, cfg.source("delete.retention.ms")),
            note=note(pp.dir, "loss.compaction")))
        pp.seal(view)
        log.close()
    return pp


def _record_round(view: DirView, op: CompactRound) -> None:
    """The round's effect on the listing: each group's source files go, the new segments' files appear, and the
    producer snapshots of base offsets that no longer start a segment go (``replace_segments`` step 4)."""
    removes = [n for g in op.groups for n in g.source_files]
    new_bases = {g.base_offset for g in op.groups}
    for g in op.groups:
        for b in g.sources:
            snap = offset_file_name(b, ".snapshot")
            if b not in new_bases and view.exists(snap):
                op.snapshots.append(snap)
    removes, deleted = replacement_effect(view, removes + op.snapshots, op.keep_deleted)
    creates: list[tuple[str, int | None]] = list(deleted)
    for g in op.groups:
        for suffix in g.suffixes or (".log", ".index", ".timeindex"):
            creates.append((offset_file_name(g.base_offset, suffix), g.size if suffix == ".log" else None))
    view.add(op, removes=removes, creates=creates)


def plan_compact(paths: Iterable[str | os.PathLike], *, now_ms: int, resolver: ConfigResolver | None = None,
                 topics: set[str] | None = None, force: bool = False, kafka_version: tuple[int, int] = (4, 0),
                 exact: bool = False, keep_deleted: bool = False, map_workers: int | None = None,
                 runner: Runner | None = None, workers: int = 1, progress=None) -> Plan:
    """The plan of ``kafkalog compact``: one broker cleaning round per compacted partition under ``paths``, then
    ``cleaner-offset-checkpoint`` with the new clean points. ``exact`` measures each round while planning (new
    segment sizes, records dropped: what ``--dry-run`` shows); otherwise they are known once applied. A partition
    the broker would mark uncleanable (its round would fail) makes the plan invalid: its error is
    ``compact.uncleanable`` (the file, byte position and the broker's reason)."""
    groups = group_partitions(paths, topics=topics)
    resolver = resolver or ConfigResolver(data_dirs=list(groups))
    mw = default_workers() if map_workers is None else map_workers

    def task(t: Target) -> tuple:
        st = t.state
        return (str(t.data_dir), str(t.path), t.topic, t.partition, t.config, t.broker.cleaner,
                st.clean_points.get(t.key), st.log_start_offsets.get(t.key), st.high_watermarks.get(t.key), now_ms,
                force, kafka_version, exact, keep_deleted, mw, t.broker.producer_id_expiration_ms,
                t.config.describe(["cleanup.policy", "min.cleanable.dirty.ratio", "delete.retention.ms",
                                   "min.compaction.lag.ms", "segment.bytes", "internal.segment.bytes"]))

    plan = Plan("compact", now=now_ms, options={"kafkaVersion": ".".join(map(str, kafka_version))})
    return plan_partitions(plan, groups, resolver, runner or default_runner(workers, progress), _plan_partition, task,
                           finish=_dir_ops)


def _dir_ops(dp, st) -> None:
    """``cleaner-offset-checkpoint`` with every partition's new clean point, written once per data dir (the
    broker serialises it under its cleaner lock); entries of partitions no longer in the dir are dropped."""
    updates = {(p.topic, p.partition): p.facts["cleanPoint"] for p in dp.partitions if "cleanPoint" in p.facts}
    if not updates:
        return
    offsets = dict(st.clean_points)
    offsets.update(updates)
    live = {k: v for k, v in offsets.items() if (Path(st.path) / f"{k[0]}-{k[1]}").is_dir()}
    if live != st.clean_points or CLEANER_OFFSET_CHECKPOINT in st.unreadable:
        view = DirView(st.path)
        view.write(CLEANER_OFFSET_CHECKPOINT, checkpoint_bytes(live), note(view.path, "op.cleanPoints"))
        dp.ops = list(view.ops)


__all__ = ["CompactRound", "PlannedGroup", "cleanable_offsets", "log_to_clean", "max_compaction_delay",
           "plan_compact"]
