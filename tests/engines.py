"""One-call helpers over the library's plans for tests that check engine results on one partition or dir:
each builds the plan the command would, applies it (unless ``dry_run``) and returns what the tests look at.
The library itself has one path: ``plan_*`` then ``apply``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.storage.config.log_config import BrokerConfig, CleanerConfig, LogConfig
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.cleaner.cleaner import CleanResult
from kafkalog.storage.engine.cleaner.manager import plan_compact
from kafkalog.storage.engine.plan import ApplyResult, Plan, apply
from kafkalog.storage.engine.retention import plan_retention
from kafkalog.storage.files.checkpoints import CLEANER_OFFSET_CHECKPOINT
from kafkalog.storage.files.findings import Finding
from kafkalog.storage.log.dir_checkpoints import read_checkpoint_or_empty


def resolver(cfg: LogConfig | None = None, cleaner: CleanerConfig | None = None,
             expiration_ms: int | None = None) -> ConfigResolver:
    """A resolver that gives ``cfg`` to every topic, with a broker whose cleaner is ``cleaner``."""
    broker = BrokerConfig()
    if cleaner is not None:
        broker = BrokerConfig(cleaner=cleaner)
    if expiration_ms is not None:
        broker = BrokerConfig(cleaner=broker.cleaner,
                              settings={**broker.settings, "producer.id.expiration.ms": expiration_ms})
    return ConfigResolver(broker, config=cfg)


@dataclass
class Compaction:
    plan: Plan
    applied: ApplyResult | None
    result: CleanResult | None  # the round (measured in a dry run, done otherwise); None when not cleaned
    facts: dict[str, Any] = field(default_factory=dict)
    notes: list[Finding] = field(default_factory=list)

    @property
    def eligible(self) -> bool:
        return self.result is not None

    @property
    def checkpoint_offset(self) -> int | None:
        return self.facts.get("cleanPoint")


def compact(pdir: Path, cfg: LogConfig, cleaner: CleanerConfig | None = None, now: int = 0, *,
            dry_run: bool = False, force: bool = False, kafka_version: tuple[int, int] = (4, 0),
            expiration_ms: int | None = None, keep_deleted: bool = False, map_workers: int = 1) -> Compaction:
    """One cleaning round on one partition dir (``kafkalog compact PDIR``)."""
    plan = plan_compact([pdir], now_ms=now, resolver=resolver(cfg, cleaner, expiration_ms), force=force,
                        kafka_version=kafka_version, exact=dry_run, keep_deleted=keep_deleted,
                        map_workers=map_workers)
    plan.check()
    pp = plan.partitions[0]
    result = None
    applied = None
    if dry_run:
        if pp.ops:
            op = pp.ops[0]
            result = CleanResult(pp.name, pp.facts["firstDirtyOffset"], op.end_offset,  # type: ignore[attr-defined]
                                 bool(pp.facts.get("mapFull")))
            result.stats.messages_read = pp.facts.get("recordsRead", 0)
            result.stats.messages_retained = pp.facts.get("recordsRetained", 0)
            from kafkalog.storage.engine.cleaner.cleaner import CleanedSegment

            result.groups = [CleanedSegment(g.base_offset, g.sources, g.size or 0, g.source_bytes)
                             for g in op.groups]  # type: ignore[attr-defined]
    else:
        applied = apply(plan, backup=False)
        for r in applied.results.get(pp.dir, []):
            if isinstance(r, CleanResult):
                result = r
    return Compaction(plan, applied, result, pp.facts, pp.notes)


def clean_points(data_dir: Path) -> dict[tuple[str, int], int]:
    return read_checkpoint_or_empty(Path(data_dir) / CLEANER_OFFSET_CHECKPOINT)


def retain(pdir: Path, cfg: LogConfig, now: int, *, dry_run: bool = False, keep_deleted: bool = False,
           cleaner_enabled: bool = True) -> Plan:
    """One retention run on one partition dir (``kafkalog retain PDIR``); returns the plan (applied unless
    ``dry_run``)."""
    r = resolver(cfg, None if cleaner_enabled else CleanerConfig(enable_cleaner=False))
    plan = plan_retention([pdir], now_ms=now, resolver=r, keep_deleted=keep_deleted)
    plan.check()
    if not dry_run:
        apply(plan, backup=False)
    return plan


@dataclass
class Conversion:
    plan: Plan
    applied: list = field(default_factory=list)  # SegmentResult of each converted segment, in plan order
    backups: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {"segments": len(self.applied), "bytesIn": sum(r.bytes_in for r in self.applied),
                "bytesOut": sum(r.bytes_out for r in self.applied),
                "legacyBatches": sum(r.legacy_batches for r in self.applied),
                "backup": self.backups[0] if self.backups else None}


def convert(paths, opts=None, *, topics=None, dry_run: bool = False, backup: bool = True, backup_root=None,
            workers: int = 1, progress=None) -> Conversion:
    """``kafkalog convert PATHS``: the plan, applied unless ``dry_run``."""
    from kafkalog.storage.engine.convert import SegmentResult
    from kafkalog.storage.engine.message_format import plan_convert

    plan = plan_convert(paths, opts, topics=topics, workers=workers)
    plan.check()
    out = Conversion(plan)
    if dry_run:
        return out
    res = apply(plan, backup=backup, backup_root=backup_root, workers=workers, progress=progress)
    for pp in plan.partitions:
        out.applied += [r for r in res.results.get(pp.dir, []) if isinstance(r, SegmentResult)]
    out.backups = res.backups
    return out


@dataclass
class Migration:
    plan: Plan
    partitions: list  # PartitionMigration of each copied partition
    created_meta_properties: bool
    backups: list[str] = field(default_factory=list)


def migrate(source, dest, opts=None, *, dry_run: bool = False, backup: bool = True,
            backup_root=None) -> Migration:
    """``kafkalog migrate SOURCE DEST``: the plan, applied unless ``dry_run``."""
    from kafkalog.storage.engine.migrate import PartitionMigration, plan_migrate

    plan = plan_migrate(source, dest, opts)
    plan.check()
    parts = [PartitionMigration(**{k: f[c] for k, c in (
        ("source", "source"), ("dest", "dest"), ("topic", "topic"), ("partition", "partition"),
        ("topic_id", "topicId"), ("bytes", "bytes"), ("log_start_offset", "logStartOffset"),
        ("log_end_offset", "logEndOffset"), ("high_watermark", "highWatermark"), ("cleaner_offset", "cleanerOffset"),
        ("replaced", "replaced"))}, segments=[None] * f["segments"]) for f in (p.facts for p in plan.partitions)]
    created = any(op.path.endswith("meta.properties") for d in plan.data_dirs for op in d.pre_ops)
    out = Migration(plan, parts, created)
    if not dry_run:
        out.backups = apply(plan, backup=backup, backup_root=backup_root).backups
    return out


@dataclass
class Recovery:
    """What loading one partition did (or, with ``dry_run``, would do)."""

    loaded: Any
    ops: list

    @property
    def log_end_offset(self) -> int:
        return self.loaded.log_end_offset

    @property
    def truncated(self) -> list[tuple[str, int, int]]:
        return [(op.path, op.old_size, op.new_size) for op in self.ops if op.kind == "truncate"]

    @property
    def deleted(self) -> list[str]:
        return [op.path for op in self.ops if op.kind == "delete"]

    @property
    def written(self) -> list[str]:
        return [op.path for op in self.ops if op.kind in ("write", "create")]

    @property
    def records_dropped(self) -> int:
        return sum(loss.records or 0 for loss in self.loaded.losses)

    @property
    def changed(self) -> bool:
        return bool(self.ops)

    @property
    def notes(self) -> list[Finding]:
        return self.loaded.notes


def recover(pdir: Path, *, config: LogConfig | None = None, recovery_point: int = 0, log_start_offset: int = 0,
            had_clean_shutdown: bool = False, now_ms: int = 0, dry_run: bool = False,
            strict_indexes: bool = True) -> Recovery:
    """The broker's load of one partition dir (:func:`~kafkalog.storage.engine.loader.load_partition` on a
    planned view), its operations run unless ``dry_run``."""
    from kafkalog.storage.engine.loader import load_partition
    from kafkalog.storage.io.dirview import DirView
    from kafkalog.storage.io.ops import run_ops

    with DirView(pdir) as view:
        loaded = load_partition(view, config=config, recovery_point=recovery_point,
                                log_start_offset=log_start_offset, had_clean_shutdown=had_clean_shutdown,
                                now_ms=now_ms, strict_indexes=strict_indexes)
        ops = list(view.ops)
    if not dry_run:
        run_ops(ops)
    return Recovery(loaded, ops)
