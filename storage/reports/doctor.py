"""``kafkalog doctor``: what the broker will do at its next start on these log dirs, predicted offline.

One pre-flight over the ``log.dirs`` of one broker, built from what the project already computes:

* the startup gate of a KRaft broker (:func:`~kafkalog.storage.reports.startup_gate.startup_gate`): missing or
  disagreeing ``meta.properties``, ``__cluster_metadata-0`` outside the metadata dir, duplicate live partitions
  and dirs that are not partitions'. Each refusal carries the broker's own message (the text of the exception it
  dies with);
* the repair plan, computed by the very function ``kafkalog repair --dry-run --kafka-exact`` uses
  (:func:`~kafkalog.storage.engine.repair.plan_repair`): which partitions are recovered and how many ``.log``
  bytes are scanned, every truncation (records, offsets, reason), the indexes and producer snapshots rebuilt,
  interrupted segment replacements completed, and the files that stop the broker at startup (an unreadable
  ``partition.metadata`` or ``leader-epoch-checkpoint``: the plan's ``startupErrors``);
* the KRaft metadata of the dir (:class:`~kafkalog.storage.config.resolver.ConfigResolver`): a replica whose
  ``partition.metadata`` topic id is missing or not the one in ``__cluster_metadata`` is a stray
  (``LogManager.isStrayKraftReplica``): the broker renames it ``-stray`` and never serves it;
* ``-delete``, ``-stray`` and ``-future`` dirs, and segments holding message format v0/v1 batches (info: a 4.x
  broker loads and serves them and appends v2 batches after them).

``tests/kafka/test_doctor_broker.py`` checks every kind of refusal, the stray rename and the legacy segments against
a real 4.3.1 broker (and the first cases against 3.9.2).

The broker's recovery time is estimated as bytes to scan / scan rate. The rate is measured: planning runs the
broker's segment recovery over exactly those bytes, so ``bytes scanned / planning time`` is kafkalog's rate on
this machine for this data, divided by :data:`BROKER_SLOWDOWN` (the broker/kafkalog ratio measured by
``bench_repair.py``); below :data:`MIN_MEASURED_BYTES` (too little to time) :data:`SCAN_RATE` is used instead,
the broker's own rate from that measurement. A caller can pass its own rate.

Verdicts: ``healthy`` (exit 0), ``recovery`` (the broker starts, after recovering or losing data, or with
warnings; exit 1), ``fatal`` (the broker will not start; exit 4).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.storage.config.resolver import KRAFT, METADATA_DIR, ConfigResolver
from kafkalog.storage.engine.message_format import audit
from kafkalog.storage.engine.plan import Plan
from kafkalog.storage.engine.repair import plan_repair
from kafkalog.storage.engine.targets import whole_data_dirs
from kafkalog.storage.errors import KafkaLogError, LogDirError
from kafkalog.storage.files.findings import Finding, note
from kafkalog.storage.files.names import is_index_file
from kafkalog.storage.files.partition_metadata import PARTITION_METADATA_FILE, PartitionMetadata
from kafkalog.storage.io.fs import UrlPath, is_url, task_path
from kafkalog.storage.io.local import read_bounded
from kafkalog.storage.log.datadir import DataDir, require_readable
from kafkalog.storage.log.loss import RememberedOffset, remembered_facts
from kafkalog.storage.log.paths import DATA_DIR
from kafkalog.storage.log.segment_check import segment_crc_failures, segment_holes, segment_torn_end
from kafkalog.storage.log.topic_partition import METADATA_TOPIC
from kafkalog.storage.parallel import run_partition_tasks
from kafkalog.storage.reports.groups import OFFSETS_TOPIC, load_groups
from kafkalog.storage.reports.serving import Serving, hole_serving, serving, torn_end_serving
from kafkalog.storage.reports.startup_gate import startup_gate

#: the broker's startup recovery, in ``.log`` bytes per second: measured with
#: ``tests/benchmarks/bench_repair.py --scale 0.05`` (Kafka 4.3.1, ``num.recovery.threads.per.data.dir=1``, 216 MB of
#: 16 KiB idempotent v2 batches in 100 partitions, no clean-shutdown marker: "Loaded 100 logs in 3600ms") on the
#: 2-core CI machine, page cache warm. More recovery threads divide the time by up to their number.
SCAN_RATE = 57 * 1024 * 1024
#: how much slower the broker's recovery was than kafkalog's over the same bytes, in that same run (broker load
#: 3.6 s / ``kafkalog repair`` 1.25 s): a rate measured while planning is divided by it
BROKER_SLOWDOWN = 2.88
#: below this many bytes scanned, the planning time is too short to measure a rate: :data:`SCAN_RATE` is used
MIN_MEASURED_BYTES = 32 * 1024 * 1024

FATAL, LOSS, RECOVERY, WARNING, INFO, ERROR = "fatal", "loss", "recovery", "warning", "info", "error"
HEALTHY = "healthy"
EXIT = {HEALTHY: 0, RECOVERY: 1, FATAL: 4}


@dataclass
class Problem:
    """One thing the broker will do or meet at its next start."""

    severity: str  # fatal | loss | recovery | warning | info | error (kafkalog could not predict)
    kind: str  # startup, truncation, lostOffsets, corruptBatch, tornEnd, recovery, rebuild, leftover, stray, topicId, dirs,
    # offlineDir, legacyFormat, plan
    path: str
    message: str  # words the library still gives itself ("" when ``note`` says it)
    broker_message: str | None = None  # fatal: what the broker logs as it stops (its exception's message)
    partition: str | None = None
    first_offset: int | None = None
    last_offset: int | None = None
    records: int | None = None
    bytes: int | None = None
    cause: str | None = None  # what the broker logs first (the exception under its fatal fault)
    serving: Serving | None = None  # corruptBatch, a hole, tornEnd: what its readers get, what cuts or salvages it
    note: Finding | None = None  # what was observed, as a code and its facts (kafkalog.facts words it)

    def to_dict(self) -> dict[str, Any]:
        """JSON: the fields; with a ``note``, its ``code`` and ``facts`` (the command puts its words in
        ``message``)."""
        return {"type": "problem", "severity": self.severity, "kind": self.kind, "path": self.path,
                "partition": self.partition, "message": self.message, "brokerMessage": self.broker_message,
                "firstOffset": self.first_offset, "lastOffset": self.last_offset, "records": self.records,
                "bytes": self.bytes, "cause": self.cause,
                "serving": None if self.serving is None else self.serving.to_dict(),
                **({"code": self.note.code or self.note.kind, "facts": dict(self.note.facts)}
                   if self.note is not None else {})}


def _noted(severity: str, kind: str, path, code: str, *, partition: str | None = None, cause: str | None = None,
           broker_message: str | None = None, **facts: Any) -> Problem:
    """A problem whose words are its note's: ``code`` and ``facts`` (the offsets, counts and bytes among them are
    also the problem's own fields where it has one)."""
    return Problem(severity, kind, str(path), "", broker_message, partition=partition, cause=cause,
                   first_offset=facts.get("firstOffset"), last_offset=facts.get("lastOffset"),
                   records=facts.get("records"), bytes=facts.get("bytes"),
                   note=note(path, code, **facts, **({"cause": cause} if cause is not None else {})))


@dataclass
class Diagnosis:
    log_dirs: list[str]
    problems: list[Problem] = field(default_factory=list)
    plan: Plan | None = None
    kraft: bool = False
    partitions: int = 0
    partitions_recovered: int = 0
    bytes_to_scan: int = 0
    records_truncated: int = 0
    scan_rate: float = SCAN_RATE  # bytes per second
    scan_rate_source: str = "constant"  # measured | constant | given
    plan_seconds: float = 0.0

    @property
    def verdict(self) -> str:
        sev = {p.severity for p in self.problems}
        if FATAL in sev:
            return FATAL
        if sev & {LOSS, RECOVERY, WARNING, ERROR}:
            return RECOVERY
        return HEALTHY

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]

    @property
    def fatal(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == FATAL]

    @property
    def estimate_seconds(self) -> float:
        return self.bytes_to_scan / self.scan_rate if self.scan_rate > 0 else 0.0

    def headline_note(self) -> Finding:
        """The verdict line as a code and its facts (``kafkalog.facts`` words it): ``doctor.verdictHealthy``
        (``HEALTHY``), ``doctor.verdictFatal`` (``WILL NOT START: <the broker's message>``: the first fatal
        problem's ``brokerMessage`` and how many ``more``), ``doctor.verdictRecovery`` (``WILL START, RECOVERING 3
        PARTITIONS (truncating 12 records)``: ``partitionsRecovered``, ``recordsTruncated``, ``bytesTruncated`` (the
        invalid bytes the truncations drop), ``warnings`` (warnings and errors) and ``loss`` (a problem loses data))."""
        where = self.log_dirs[0] if self.log_dirs else ""
        v = self.verdict
        if v == FATAL:
            first = self.fatal[0]
            return note(where, "doctor.verdictFatal", brokerMessage=first.broker_message or first.message,
                        more=len(self.fatal) - 1)
        if v == HEALTHY:
            return note(where, "doctor.verdictHealthy")
        return note(where, "doctor.verdictRecovery", partitionsRecovered=self.partitions_recovered,
                    recordsTruncated=self.records_truncated,
                    bytesTruncated=sum(p.bytes or 0 for p in self.problems
                                       if p.severity == LOSS and p.kind == "truncation"),
                    warnings=sum(1 for p in self.problems if p.severity in (WARNING, ERROR)),
                    loss=any(p.severity == LOSS for p in self.problems))

    def summary(self) -> dict[str, Any]:
        """JSON (docs/schemas/doctorSummary.schema.json): the counts and the verdict; ``headline`` is empty here, the
        command puts the words of :meth:`headline_note` in it (``kafkalog.facts.render``)."""
        return {"type": "summary", "verdict": self.verdict, "exitCode": self.exit_code, "headline": "",
                "logDirs": list(self.log_dirs), "kraft": self.kraft, "partitions": self.partitions,
                "partitionsRecovered": self.partitions_recovered, "bytesToScan": self.bytes_to_scan,
                "recordsTruncated": self.records_truncated,
                "fatal": [p.broker_message or p.message for p in self.fatal],
                "estimatedRecoverySeconds": round(self.estimate_seconds, 3),
                "scanRateBytesPerSecond": round(self.scan_rate), "scanRateSource": self.scan_rate_source,
                "counts": {s: sum(1 for p in self.problems if p.severity == s)
                           for s in (FATAL, LOSS, RECOVERY, WARNING, INFO, ERROR)}}


# ------------------------------------------------------------------------------------- the plan, read


def _from_plan(diag: Diagnosis, plan: Plan) -> None:
    offline: dict[str, list[tuple[str, dict]]] = {}
    for dp in plan.data_dirs:
        for pp in dp.partitions:
            diag.partitions += 1
            name = pp.name
            if pp.error is not None:  # the plan's error as data: its code and facts
                diag.problems.append(_noted(ERROR, "plan", pp.dir, "doctor.planError", partition=name,
                                            planError={"code": pp.error.kind, "facts": dict(pp.error.facts)}))
                continue
            for e in pp.facts.get("startupErrors", []):
                if e["offline"]:
                    offline.setdefault(dp.path, []).append((name, e))
                else:
                    diag.problems.append(_noted(FATAL, "startup", e["file"], "doctor.unreadable", partition=name,
                                                cause=e["cause"], broker_message=e["brokerMessage"], offline=False))
            scanned = pp.facts.get("bytesScanned", 0)
            rebuilt = sorted({Path(op.path).name for op in pp.ops if not op.routine and op.kind in ("write", "create")
                              and (is_index_file(Path(op.path).name) or op.path.endswith(".snapshot"))})
            if pp.facts.get("segmentsRecovered"):
                diag.partitions_recovered += 1
                diag.bytes_to_scan += scanned
                diag.problems.append(_noted(RECOVERY, "recovery", pp.dir, "doctor.recovers", partition=name,
                                            segments=pp.facts["segmentsRecovered"], rebuilt=rebuilt,
                                            lastOffset=pp.facts["logEndOffset"], bytes=scanned))
            elif rebuilt:
                diag.problems.append(_noted(RECOVERY, "rebuild", pp.dir, "doctor.rebuilds", partition=name,
                                            rebuilt=rebuilt))
            for loss in pp.losses:
                if loss.records:
                    diag.records_truncated += loss.records
                diag.problems.append(Problem(
                    LOSS if loss.damage else RECOVERY, "truncation", loss.file or pp.dir, loss.reason, partition=name,
                    first_offset=loss.first_offset, last_offset=loss.last_offset, records=loss.records,
                    bytes=loss.bytes, note=loss.note))
            leftovers = [op for op in pp.ops if not op.routine and op.kind in ("rename", "delete")
                         and Path(op.path).name.endswith((".swap", ".cleaned", ".deleted"))]
            if leftovers:
                diag.problems.append(_noted(RECOVERY, "leftover", pp.dir, "doctor.swapCompleted", partition=name,
                                            files=sorted({Path(op.path).name for op in leftovers})))
    every = len(offline) == len(plan.data_dirs)
    dirs = ", ".join(dp.path for dp in plan.data_dirs)
    for d, failed in offline.items():
        for name, e in failed:
            if every:  # LogManager.handleLogDirFailure
                diag.problems.append(_noted(FATAL, "startup", e["file"], "doctor.unreadable", partition=name,
                                            cause=e["cause"], broker_message=f"Shutdown broker because all log dirs "
                                            f"in {dirs} have failed", offline=True))
            else:
                diag.problems.append(_noted(WARNING, "offlineDir", e["file"], "doctor.unreadable", partition=name,
                                            cause=e["cause"], offline=True, logDir=d))


# ------------------------------------------------------------------------------------- dirs and topic ids


def _dir_checks(diag: Diagnosis, dirs: list[DataDir], resolver: ConfigResolver, kraft: bool) -> None:
    for d in dirs:
        if is_url(d.path):  # no process holds a lock on a URL: not checked, and said
            diag.problems.append(_noted(INFO, "lock", d.path / ".lock", "lock.notChecked"))
        if not d.had_clean_shutdown:
            diag.problems.append(_noted(INFO, "recovery", d.path / ".kafka_cleanshutdown", "doctor.noCleanShutdown"))
        md = resolver.data_dir(d.path).metadata if kraft else None
        known = md.topic_ids if md is not None else {}
        for p, tp in sorted(d.partition_dirs.items()):
            if tp.topic == METADATA_TOPIC:
                continue
            if tp.kind == "delete":
                diag.problems.append(_noted(INFO, "dirs", p, "doctor.deleteDir", partition=p.name))
            elif tp.kind == "stray":
                diag.problems.append(_noted(WARNING, "stray", p, "doctor.strayDir", partition=p.name))
            elif tp.kind == "future":
                diag.problems.append(_noted(INFO, "dirs", p, "doctor.futureDir", partition=p.name))
            elif tp.kind == "live" and known:
                _topic_id(diag, p, tp.topic, tp.partition, known.get(tp.topic))


def _topic_id(diag: Diagnosis, p: Path, topic: str, partition: int, expected: str | None) -> None:
    stray = f"{topic}-{partition}.<uuid>-stray"
    try:
        pm = p / PARTITION_METADATA_FILE
        tid = None
        if pm.is_file() and not pm.is_symlink():  # (a URL's through the filesystem seam)
            tid = PartitionMetadata.from_bytes(read_bounded(pm, 1 << 16, LogDirError), str(pm)).topic_id
    except (KafkaLogError, OSError):
        return  # unreadable: the plan's startupErrors say what happens
    if tid is None:
        diag.problems.append(_noted(WARNING, "stray", p, "doctor.noTopicId", partition=p.name, strayName=stray))
    elif expected is None:
        diag.problems.append(_noted(WARNING, "stray", p, "doctor.unknownTopic", partition=p.name, topic=topic,
                                    metadataDir=METADATA_DIR, strayName=stray))
    elif tid != expected:
        diag.problems.append(_noted(WARNING, "topicId", p / PARTITION_METADATA_FILE, "doctor.topicIdDiffers",
                                    partition=p.name, topic=topic, topicId=tid, expected=expected,
                                    metadataDir=METADATA_DIR, strayName=stray))


def _remembered(diag: Diagnosis, dirs: list[DataDir], paths: list[Path], crc: bool) -> None:
    """A loss for every live partition whose checkpoints, producer snapshots, leader epochs or consumer groups'
    committed offsets remember offsets its log no longer holds (:meth:`PartitionLog.remembered_beyond_end`,
    :attr:`GroupsReport.beyond_end`), and, in every segment the broker's start-up does not check
    (:meth:`PartitionLog.segments_unchecked_at_load`: all of them after a clean shutdown, the active one too; those
    below the recovery point otherwise) and the plan neither truncates nor deletes, a torn end that is a hole
    (:func:`~kafkalog.storage.log.segment_check.segment_holes`), a torn end of the active segment
    (:func:`~kafkalog.storage.log.segment_check.segment_torn_end`: the broker appends after it) or, with ``crc``, a
    batch failing its CRC (:func:`~kafkalog.storage.log.segment_check.segment_crc_failures`): the broker starts and
    serves the log as it is, each with its :mod:`~kafkalog.storage.reports.serving` prediction. What the recovery
    does check, it truncates: the plan's losses say where."""
    found: dict[Path, list[RememberedOffset]] = {}
    cut = {(p.partition, Path(p.path).name) for p in diag.problems if p.kind == "truncation"}
    for d in dirs:
        for log in d.partitions(include_metadata=False):
            try:
                if log.dir_kind != "live":
                    continue
                found[log.path] = log.remembered_beyond_end()
                unchecked = [s for s in log.segments_unchecked_at_load(d.had_clean_shutdown)
                             if (log.name, s.path.name) not in cut]
                for h in segment_holes(log, unchecked):
                    p = _noted(LOSS, "lostOffsets", h.file, "doctor.hole", partition=log.name,
                               firstOffset=h.first_offset, lastOffset=h.last_offset, bytes=h.bytes,
                               position=h.position, reason=h.reason)
                    p.serving = hole_serving(log, h.first_offset)
                    diag.problems.append(p)
                torn = segment_torn_end(log, unchecked)
                if torn is not None:  # kept at load, appended after: what the broker appends is never served
                    p = _noted(LOSS, "tornEnd", torn.file, "doctor.tornEnd", partition=log.name,
                               firstOffset=torn.first_offset, bytes=torn.bytes, position=torn.position,
                               stopReason=torn.reason)
                    p.serving = torn_end_serving(torn.bytes, torn.declared_bytes, torn.compressed)
                    diag.problems.append(p)
                for h in segment_crc_failures(unchecked) if crc else ():
                    p = _noted(LOSS, "corruptBatch", h.file, "doctor.corruptBatch", partition=log.name,
                               firstOffset=h.first_offset, lastOffset=h.last_offset, bytes=h.bytes,
                               position=h.position, reason=h.reason)
                    p.serving = serving(log, h.file, h.position, h.first_offset)
                    diag.problems.append(p)
            except KafkaLogError:
                pass  # an unreadable log end: the plan reports the partition
            finally:
                d.release(log)
    if any(tp.topic == OFFSETS_TOPIC and tp.kind == "live" for d in dirs for tp in d.partition_dirs.values()):
        try:
            for r in load_groups(paths).beyond_end:  # (a URL's partition dir: the one its log has)
                found.setdefault(next((k for k in found if str(k) == r.file), None) or Path(r.file), []).append(r)
        except KafkaLogError:
            pass  # `kafkalog groups` reports what cannot be read
    for pdir, rs in sorted(found.items()):
        if rs:
            gone = remembered_facts(rs)
            diag.problems.append(_noted(LOSS, "lostOffsets", pdir, "loss.remembered", partition=pdir.name,
                                        firstOffset=gone["logEndOffset"], lastOffset=gone["lastMissing"], **gone))


def _live(dirs: list[DataDir]) -> list[Path]:
    return [p for d in dirs for p, tp in d.partition_dirs.items() if tp.kind == "live" and tp.topic != METADATA_TOPIC]


def _audit_partition(pdir: str | UrlPath) -> list:
    """The segments of one partition holding v0/v1 batches (a task of :func:`run_partition_tasks`)."""

    try:
        return list(audit([pdir]))
    except (KafkaLogError, OSError):
        return []  # unreadable segments: the plan says what the broker does with them


def _legacy(diag: Diagnosis, dirs: list[DataDir], *, workers: int = 1, progress=None) -> None:

    live = _live(dirs)
    per: dict[str, list] = {}
    for found in run_partition_tasks(_audit_partition, [task_path(p) for p in live], workers=workers,
                                     progress=progress):
        for a in found:
            per.setdefault(a.partition, []).append(a)
    for d in dirs:
        for p in d.partition_dirs:
            segs = per.get(p.name)
            if segs and p in live:
                diag.problems.append(_noted(INFO, "legacyFormat", p, "doctor.legacyFormat", partition=p.name,
                                            segments=len(segs), batches=sum(a.v0_batches + a.v1_batches for a in segs),
                                            bytes=sum(a.legacy_bytes for a in segs)))


# ------------------------------------------------------------------------------------- the diagnosis


def diagnose(log_dirs: Iterable[str | os.PathLike], *, now_ms: int | None = None,
             resolver: ConfigResolver | None = None, node_id: int | None = None, workers: int = 1,
             progress=None, on_total=None, scan_rate: float | None = None, legacy: bool = True) -> Diagnosis:
    """Predict the broker's next start on ``log_dirs`` (the ``log.dirs`` of one broker, in their configured
    order: the first is the metadata dir). See the module doc. ``node_id``: the configured ``node.id`` (default:
    ``server.properties`` of ``resolver``, else unchecked); ``scan_rate``: bytes/s for the estimate (default:
    measured, or :data:`SCAN_RATE`); ``legacy``: look for v0/v1 batches (a scan of every batch header) and check
    the CRC of every batch of the segments the recovery leaves as they are (a read of every byte).
    ``workers``: processes planning (and scanning) partitions, those of every log dir together; ``on_total(n)``:
    how many partition steps there are, before the first ``progress(k)`` (``k`` steps done). A log dir that is
    not a data dir is a :class:`~kafkalog.storage.log.paths.PathError` (the one path contract), before anything is
    read."""
    # the one path contract (a URL: a data dir read through the filesystem seam, the prediction only)
    paths = [require_readable(d if is_url(d) else os.path.abspath(d), (DATA_DIR,)).path for d in log_dirs]
    resolver = resolver or ConfigResolver(data_dirs=paths)
    if node_id is None:
        raw = resolver.broker.props.get("node.id", resolver.broker.props.get("broker.id"))
        node_id = int(raw) if raw is not None and str(raw).strip().lstrip("-").isdigit() else None
    dirs = [DataDir(p) for p in paths]
    try:
        kraft = any(resolver.data_dir(p).mode == KRAFT or (p / METADATA_DIR).is_dir() for p in paths)
        diag = Diagnosis([str(p) for p in paths], kraft=kraft)
        diag.problems += [Problem(FATAL, "startup", r.path, r.message, r.broker_message, cause=r.cause, note=r.note)
                          for r in startup_gate(dirs, kraft=kraft, node_id=node_id)]
        if on_total is not None:
            on_total(sum(len(v) for v in whole_data_dirs(paths).values()) + (len(_live(dirs)) if legacy else 0))
        t0 = time.perf_counter()
        plan = plan_repair(paths, now_ms=now_ms if now_ms is not None else int(time.time() * 1000),
                           resolver=resolver, strict_indexes=False, workers=workers, progress=progress)
        diag.plan_seconds = time.perf_counter() - t0
        diag.plan = plan
        _from_plan(diag, plan)
        _dir_checks(diag, dirs, resolver, kraft)
        _remembered(diag, dirs, paths, crc=legacy)
        if legacy:
            _legacy(diag, dirs, workers=workers, progress=progress)
    finally:
        for d in dirs:
            d.close()
    if scan_rate is not None:
        diag.scan_rate, diag.scan_rate_source = float(scan_rate), "given"
    elif diag.bytes_to_scan >= MIN_MEASURED_BYTES and diag.plan_seconds > 0:
        diag.scan_rate = diag.bytes_to_scan / diag.plan_seconds / BROKER_SLOWDOWN
        diag.scan_rate_source = "measured"
    order = {FATAL: 0, LOSS: 1, ERROR: 2, RECOVERY: 3, WARNING: 4, INFO: 5}
    diag.problems.sort(key=lambda p: order[p.severity])
    return diag


__all__ = ["Diagnosis", "MIN_MEASURED_BYTES", "Problem", "SCAN_RATE", "BROKER_SLOWDOWN", "diagnose"]
