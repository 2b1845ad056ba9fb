"""Distributed jobs: the single-machine engines run per partition (or per segment) on Spark, one report.

* :func:`verify` — ``storage.verify.verify_partition`` per partition on the executors, the data dir's own
  findings (``DataDir.findings``, lock) on the driver;
* :func:`export` — the data source into Parquet (partitioned by topic/partition) or JSON Lines;
* :func:`convert` — ``storage.engine.convert.convert_segment`` per segment, while the driver holds every data
  dir's ``.lock`` and has hard-linked the originals into a backup first (as ``kafkalog convert``);
* :func:`compact` — ``storage.engine.cleaner.compact_partition`` per partition under the same lock/backup
  rules as ``kafkalog compact``; tasks leave ``cleaner-offset-checkpoint`` alone (it is shared by every partition
  of a data dir) and the driver writes it once per data dir from all outcomes at the end.

Executors must see the same paths as the driver (local mode, or a shared filesystem).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafkalog.storage.errors import KafkaLogError


@dataclass
class JobReport:
    job: str
    rows: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(r.get("severity") == "error" or r.get("error") for r in self.rows)


def _driver_paths(paths: list[str]) -> list[str]:
    """Local paths made absolute on the driver: executors of a cluster run in their own working directories
    (a relative path that works in local mode names nothing there). URIs (``s3://``...) are left alone."""
    return [p if "://" in str(p) else os.path.abspath(p) for p in paths]


def _sc(spark):
    return spark.sparkContext


def _run_per_item(spark, items: list, fn: Callable, slices: int | None = None) -> list:
    if not items:
        return []
    n = min(len(items), slices or max(1, _sc(spark).defaultParallelism * 2))
    return _sc(spark).parallelize(items, n).flatMap(fn).collect()


# ------------------------------------------------------------------------------------------------ verify
def _verify_one(item: tuple) -> list:
    from kafkalog.storage.verify import partition_task

    return [partition_task(*item)]


def verify(spark, paths: list[str], *, deep: bool = False, independent: bool = False) -> JobReport:
    """``kafkalog verify`` with its partition tasks run by Spark: the driver plans, checks each data dir's own
    files and the cross-partition rules (checkpoint entries, topic ids, recovery-point membership, the
    ``log.dirs`` ensemble unless ``independent``), exactly as :func:`~kafkalog.storage.verify.verify_paths`."""
    paths = _driver_paths(paths)
    from kafkalog.storage.verify import verify_paths

    report = verify_paths(paths, deep=deep, independent=independent,
                          runner=lambda tasks: _run_per_item(spark, tasks, _verify_one))
    rows = [f.to_dict() for f in report.findings]
    sev = {"error": 0, "warning": 0, "info": 0}
    for r in rows:
        sev[r["severity"]] = sev.get(r["severity"], 0) + 1
    st = report.stats
    return JobReport("verify", rows, {"partitions": st.partitions, "segments": st.segments, "bytes": st.bytes,
                                      "dataDirs": st.data_dirs, "files": st.files, "findings": len(rows), **sev})


# ------------------------------------------------------------------------------------------------ export
def export(spark, paths: list[str], out: str, *, fmt: str = "parquet", options: dict[str, str] | None = None,
           mode: str = "errorifexists") -> JobReport:
    """Read with the data source and write Parquet (partitioned by topic, partition) or JSON Lines."""
    paths = _driver_paths(paths)
    out = _driver_paths([out])[0]
    reader = spark.read.format("kafkalog")
    for k, v in (options or {}).items():
        reader = reader.option(k, v)
    df = reader.option("paths", ",".join(paths)).load()
    w = df.write.mode(mode)
    if fmt == "parquet":
        w.partitionBy("topic", "partition").parquet(out)
    elif fmt == "json":
        w.json(out)
    else:
        raise KafkaLogError(f"unknown export format {fmt!r} (parquet or json)")
    written = spark.read.parquet(out).count() if fmt == "parquet" else spark.read.json(out).count()
    return JobReport("export", [], {"records": written, "format": fmt, "out": out})


# ------------------------------------------------------------------------------------------------ convert
def _convert_one(item) -> list[dict]:
    from kafkalog.storage.engine.convert import convert_segment

    seg, opts = item
    try:
        r = convert_segment(seg, opts)
    except KafkaLogError as e:
        return [{"segment": seg, "error": str(e)}]
    return [{"partition": r.partition, "segment": r.segment, "bases": r.bases, "bytesIn": r.bytes_in,
             "bytesOut": r.bytes_out, "batchesIn": r.batches_in, "batchesOut": r.batches_out,
             "legacyBatches": r.legacy_batches}]


def convert(spark, paths: list[str], opts=None, *, topics: set[str] | None = None, dry_run: bool = False,
            backup: bool = True, backup_root: str | None = None) -> JobReport:
    paths = _driver_paths(paths)
    from kafkalog.storage.engine.convert import ConvertOptions, plan_convert
    from kafkalog.storage.engine.plan import Backup, data_dir_lock
    from kafkalog.storage.logdir import data_dir_of

    opts = opts or ConvertOptions()
    plan = plan_convert(paths, opts, topics=topics)
    if dry_run or plan.empty:
        rows = [{"segment": a.path, "plan": a.detail} for a in plan.actions]
        return JobReport("convert", rows, {"segments": len(plan.actions), "bytes": plan.bytes, "dryRun": dry_run})
    by_dir: dict[Path, list] = {}
    for a in plan.actions:
        by_dir.setdefault(data_dir_of(Path(a.path).parent), []).append(a)
    with contextlib.ExitStack() as stack:
        for ddir, actions in by_dir.items():
            stack.enter_context(data_dir_lock(ddir))
            if backup:
                root = Path(backup_root) / ddir.name if backup_root else Backup.default_root(ddir, "convert")
                bk = Backup(root, ddir)
                for a in actions:
                    for f in a.files:
                        bk.preserve(f, copy=False)
        rows = _run_per_item(spark, [(a.path, opts) for a in plan.actions], _convert_one)
    return JobReport("convert", rows, {"segments": len(rows), "bytesIn": sum(r.get("bytesIn", 0) for r in rows),
                                       "bytesOut": sum(r.get("bytesOut", 0) for r in rows)})


# ------------------------------------------------------------------------------------------------ compact
def _compact_one(item) -> list[dict]:
    from kafkalog.storage.engine.cleaner import compact_partition

    pdir, cfg, cleaner, now, dry_run, force, version, expiration = item
    try:
        # the driver writes cleaner-offset-checkpoint once per data dir from all outcomes: tasks of one data
        # dir run at the same time and must not each rewrite the shared file
        out = compact_partition(pdir, cfg, cleaner, now, dry_run=dry_run, force=force, kafka_version=version,
                                expiration_ms=expiration, update_checkpoint=False)
    except KafkaLogError as e:
        return [{"partition": Path(pdir).name, "dir": pdir, "error": str(e)}]
    d = out.to_dict()
    d["dir"] = pdir
    return [d]


def compact(spark, paths: list[str], *, now: int, dry_run: bool = False, force: bool = False,
            kafka_version: tuple[int, int] = (4, 0), overrides: dict[str, str] | None = None,
            server_properties: str | None = None, topic_config: str | None = None, backup: bool = True,
            backup_root: str | None = None) -> JobReport:
    paths = _driver_paths(paths)
    from kafkalog.storage.engine.cleaner import update_cleaner_checkpoints
    from kafkalog.storage.engine.cleaner_log import parse_partition_dir_name
    from kafkalog.storage.engine.cleaner_manager import ConfigResolver, resolve_partitions
    from kafkalog.storage.engine.plan import Backup, data_dir_lock

    resolver = ConfigResolver(server_properties, topic_config, overrides or {})
    cleaner = resolver.broker.cleaner
    expiration = resolver.broker.producer_id_expiration_ms
    items = []
    by_dir: dict[Path, list[Path]] = {}
    for data_dir, pdir in resolve_partitions(paths):
        by_dir.setdefault(data_dir, []).append(pdir)
    with contextlib.ExitStack() as stack:
        for data_dir, pdirs in by_dir.items():
            if not dry_run:
                stack.enter_context(data_dir_lock(data_dir))
            bk = Backup(backup_root or Backup.default_root(data_dir, "compact"), data_dir) \
                if backup and not dry_run else None
            for pdir in pdirs:
                topic, _ = parse_partition_dir_name(pdir.name)
                cfg = resolver.log_config(data_dir, topic)
                if not cfg.compact:
                    continue
                if bk is not None:
                    for f in sorted(pdir.iterdir()):
                        if f.is_file() and f.suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
                            bk.preserve(f, copy=False)
                    bk.preserve(data_dir / "cleaner-offset-checkpoint", copy=True)
                items.append((str(pdir), cfg, cleaner, now, dry_run, force, kafka_version, expiration))
        rows = _run_per_item(spark, items, _compact_one)
        if not dry_run:  # one cleaner-offset-checkpoint write per data dir, from every task's clean point
            updates: dict[Path, dict[tuple[str, int], int]] = {}
            for r in rows:
                if r.get("checkpoint_offset") is not None:
                    p = Path(r["dir"])
                    updates.setdefault(p.parent, {})[parse_partition_dir_name(p.name)] = r["checkpoint_offset"]
            for data_dir, offsets in updates.items():
                update_cleaner_checkpoints(data_dir, offsets)
    return JobReport("compact", rows, {"partitions": len(rows),
                                       "bytesReclaimed": sum(r.get("bytes_reclaimed", 0) for r in rows),
                                       "dryRun": dry_run})
