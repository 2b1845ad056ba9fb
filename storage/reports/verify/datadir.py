"""A data dir's own files and the rules across its partitions, and across several data dirs of one broker."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files.checkpoints import (
    RECOVERY_POINT_CHECKPOINT,
)
from kafkalog.storage.files.findings import Finding, error, info, warning
from kafkalog.storage.io.fs import is_url
from kafkalog.storage.io.lock import LockStatus
from kafkalog.storage.log.datadir import BOOTSTRAP_CHECKPOINT, DataDir, DataDirs
from kafkalog.storage.log.loss import RememberedOffset, remembered_facts
from kafkalog.storage.log.topic_partition import METADATA_TOPIC
from kafkalog.storage.reports.groups import OFFSETS_TOPIC, load_groups
from kafkalog.storage.reports.verify.files import verify_kraft_snapshot
from kafkalog.storage.reports.verify.partition import verify_partition


def verify_data_dir(path: str | os.PathLike | DataDir, deep: bool = False) -> list[Finding]:
    """Findings for a whole data dir: its own files, then every partition."""
    own = not isinstance(path, DataDir)
    try:
        ddir = DataDir(path) if own else path  # type: ignore[arg-type]
    except KafkaLogError as e:
        return [error(e.path or path, e.position, "layout", e.reason)]
    assert isinstance(ddir, DataDir)
    out: list[Finding] = list(ddir.findings)
    try:
        _verify_data_dir(ddir, deep, out)
    finally:
        if own:
            ddir.close()
    return out


def _verify_data_dir(ddir: DataDir, deep: bool, out: list[Finding]) -> None:
    _data_dir_checks(ddir, out)
    topic_ids: dict[str, tuple[str, Path]] = {}
    for log in ddir.partitions():
        out.extend(verify_partition(log, deep))
        try:
            tid = log.topic_id
        except KafkaLogError:
            tid = None
        _topic_id_check(topic_ids, log.topic, log.dir_kind, tid, log.path, out)
        ddir.release(log)
    _recovery_point_membership(ddir, out)
    _group_offsets_beyond_end(ddir, out)


def _data_dir_checks(ddir: DataDir, out: list[Finding]) -> None:
    """The data dir's own files: lock, meta.properties, clean-shutdown marker, the four checkpoints."""
    d = ddir.path
    if is_url(d):  # no process holds a lock on a URL: the check does not apply, and the report says so
        out.append(info(d / ".lock", None, "lock", code="verify.lockNotChecked"))
        status = None
    else:
        status = _lock_status(ddir, out)
    if status is not None and status.held:
        out.append(warning(status.path, None, "lock", code="verify.lockHeld",
                           pids=[h.pid for h in status.holders if h.pid]))
    if ddir.meta_properties is None and not any(f.file.endswith("meta.properties") for f in out):
        out.append(warning(d / "meta.properties", None, "metadata", code="verify.metaPropertiesMissing"))
    elif ddir.meta_properties is not None and not ddir.meta_properties.canonical:
        out.append(info(d / "meta.properties", None, "metadata", code="verify.metaPropertiesNotCanonical"))
    if ddir.clean_shutdown is not None:
        out += [x.finding(d / ".kafka_cleanshutdown", "metadata", "warning") for x in ddir.clean_shutdown.validate()]
    bootstrap = d / BOOTSTRAP_CHECKPOINT
    if bootstrap.exists() or bootstrap.is_symlink():
        # kafka-storage format writes it; every KRaft node reads it at start-up (KafkaRaftServer ->
        # BootstrapDirectory.read, BatchFileReader: records decoded, CRCs not checked). Small: read deeply.
        for f in verify_kraft_snapshot(bootstrap, deep=True)[0]:
            out.append(replace(f, facts={**f.facts, "bootstrap": True}))
    hosted = {(tp.topic, tp.partition) for tp in ddir.partition_dirs.values() if tp.kind in ("live", "future")}
    for name, ckpt in ddir.checkpoints.items():
        p = d / name
        if ckpt is None:
            if not p.exists() and any(tp.kind == "live" for tp in ddir.partition_dirs.values()):
                out.append(info(p, None, "checkpoint", code="verify.checkpointMissing", checkpoint=name))
            continue
        out += [x.finding(p, "checkpoint", "warning") for x in ckpt.validate()]
        for entry in ckpt.entries:
            if (entry.topic, entry.partition) not in hosted:
                out.append(warning(p, None, "checkpoint", code="verify.entryNotHosted", topic=entry.topic,
                                   partition=entry.partition))


def _lock_status(ddir: DataDir, out: list[Finding]) -> LockStatus | None:
    """Who holds the data dir's ``.lock`` (None: unreadable, and ``out`` says why)."""
    try:
        return ddir.lock_status()
    except KafkaLogError as e:  # e.g. a FIFO .lock: reported, never waited on
        out.append(error(e.path or ddir.path / ".lock", None, "lock", code="verify.lockUnreadable", error=e.reason))
        return None


def _group_offsets_beyond_end(ddir: DataDir, out: list[Finding]) -> None:
    """Consumer groups (in this data dir's live ``__consumer_offsets`` partitions) whose committed offsets are
    past the log end offset of their partition here: offsets the log no longer holds."""
    if not any(tp.topic == OFFSETS_TOPIC and tp.kind == "live" for tp in ddir.partition_dirs.values()):
        return
    try:
        found = load_groups([ddir.path], workers=1).beyond_end
    except KafkaLogError:
        return  # the __consumer_offsets partitions' own findings say what cannot be read
    per: dict[str, list[RememberedOffset]] = {}
    for r in found:
        per.setdefault(r.file, []).append(r)
    for pdir, rs in sorted(per.items()):
        out.append(error(pdir, None, "loss", code="loss.remembered", **remembered_facts(rs)))


def _topic_id_check(topic_ids: dict[str, tuple[str, Path]], topic: str, kind: str, tid: str | None, path: Path,
                    out: list[Finding]) -> None:
    """All live partitions of a topic in one data dir must carry the same topic id."""
    if tid is not None and kind == "live":
        seen = topic_ids.setdefault(topic, (tid, path))
        if seen[0] != tid:
            out.append(error(path / "partition.metadata", None, "metadata", code="verify.topicIdDiffers", topicId=tid,
                             otherTopicId=seen[0], otherPartition=seen[1].name))


def _recovery_point_membership(ddir: DataDir, out: list[Finding]) -> None:
    rp = ddir.recovery_points
    for p, tp in ddir.partition_dirs.items():
        if (tp.kind in ("live", "future") and tp.topic != METADATA_TOPIC
                and ddir.checkpoints.get(RECOVERY_POINT_CHECKPOINT) is not None):
            if (tp.topic, tp.partition) not in rp:
                out.append(info(p, None, "checkpoint", code="verify.notInRecoveryPoints",
                                checkpoint=RECOVERY_POINT_CHECKPOINT))


def verify_data_dirs(paths: list[str | os.PathLike], deep: bool = False) -> list[Finding]:
    """Several data dirs of one broker: each one, plus the cross-dir rules (``MetaPropertiesEnsemble``)."""
    try:
        dirs = DataDirs(paths)
    except KafkaLogError as e:
        return [error(e.path or "", e.position, "layout", e.reason)]
    with dirs:
        out = dirs.ensemble_findings()
        for ddir in dirs:
            out.extend(verify_data_dir(ddir, deep))
    return out
