"""Certify data dirs written by any system against a real Apache Kafka broker (``kafkalog conformance certify``).

:func:`certify` takes data dirs (a broker's ``log.dirs`` entry written by Kafka, a Kafka-compatible broker, a
backup/restore or migration tool, kafkalog itself) and checks what a real broker of a given version does with a
copy of each (the originals are only read):

1. **Copy and restamp.** The data dir is copied into a work dir. What must match the test broker is restamped in
   the copy and reported as a :class:`Restamp`: ``meta.properties`` (cluster, node and directory ids). A dir
   without ``__cluster_metadata`` gets its topics (partition count from the partition dirs) in the test broker's
   ``bootstrap.checkpoint`` with the ids of their ``partition.metadata`` and the files' leader epochs
   (:func:`_bootstrap_topics`, on either backend; a topic without any ``partition.metadata`` gets a new id,
   written into the copy); a topic whose files carry no single readable id, and every topic on a broker before 3.7
   or an image that formats its storage as it starts, is created on a first start of the broker and each copied
   ``partition.metadata`` gets the id the broker gave it. On a Kafka before 3.3 (KRaft not production ready) the
   broker runs in ZooKeeper mode and the topics are created in its ZooKeeper with the files' ids and leader epochs
   (:func:`_zookeeper_topics`; the report's ``mode`` says so). A dir with
   its own ``__cluster_metadata`` keeps it (and its ``meta.properties``): the broker runs with that dir's node
   id, so the topics, their ids and configs are the dir's own.
2. **Load.** The broker starts on the copy (the original's clean-shutdown marker and offset checkpoints as
   they are, the log cleaner off, retention off). Its own log lines about loading (recovery, truncation,
   rebuilt indexes and producer state, stray or renamed dirs, errors) are the evidence (:class:`LoadEvent`).
3. **Serve.** Every partition is consumed to its end by kafka-python and confluent-kafka (``check.crcs=true``),
   at read_uncommitted and read_committed, and compared record for record (offset, key, value, headers,
   timestamp and its type) with what kafkalog reads from the original files
   (:func:`kafkalog.storage.engine.export.iter_partition_batches`: at read_committed up to the last stable
   offset, the aborted transactions skipped as the files' markers and ``.txnindex`` say).
4. **Tools.** Kafka's ``DumpLogSegments --deep-iteration --index-sanity-check`` runs on every segment of the
   original; ``kafkalog verify --kafka-exact`` (``--deep``) runs on the original.

The result (:class:`CertifyReport`) is facts: each :class:`Divergence` has the partition and offsets or the
file and byte, what Kafka did (its log line, the client's error, what it served), what the files imply, the
Kafka rule (class/method) behind it and, where one exists, the kafkalog command that prepares the dir.

What the files imply is read partition by partition while the clients consume, one isolation level at a time, and
held beside one client's records: the memory follows the largest partition (1.2-1.35 GiB for a dir of 4
partitions of 250 MB, where holding the whole dir took 3.7-3.9 GiB: docs/commands/conformance.md), not the dir. (Two crashes seen while this was written, in the
compiled core's legacy decoder with the clients' threads alive, were the core's ``.so`` overwritten in place under
the running process; ``tests/storage/test_native_threads.py`` decodes every v0/v1 batch from several threads with
Kafka clients alive and holds the results to the Python reference.) Internal topics (``__consumer_offsets``, ``__transaction_state``) are loaded and dumped but not consumed: the broker's
coordinators write to them as soon as they load them.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.compat import jars
from kafkalog.compat.broker import Broker, KafkaBroker, make_broker
from kafkalog.compat.clients import confluent_headers
from kafkalog.compat.errors import BrokerError, HarnessError, ToolError
from kafkalog.compat.tools import dump_log_segments
from kafkalog.facts import render
from kafkalog.storage.decoders.cluster_metadata import encode_metadata_record
from kafkalog.storage.decoders.common import kafka_str_to_uuid, uuid_to_kafka_str
from kafkalog.storage.engine.export import ExportFilter, iter_partition_batches
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files.checkpoints import DATA_DIR_CHECKPOINTS
from kafkalog.storage.files.clean_shutdown import CLEAN_SHUTDOWN_FILE, read_clean_shutdown
from kafkalog.storage.files.leader_epoch import read_leader_epoch_checkpoint
from kafkalog.storage.files.meta_properties import MetaProperties, read_meta_properties, write_meta_properties
from kafkalog.storage.files.names import segment_log_files
from kafkalog.storage.files.partition_metadata import read_partition_metadata, write_partition_metadata
from kafkalog.storage.io.lock import describe_holders, lock_status
from kafkalog.storage.log.datadir import BOOTSTRAP_CHECKPOINT, classify_path, list_partition_dirs
from kafkalog.storage.log.dir_checkpoints import open_partition_log
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.records.builder import build_batch
from kafkalog.storage.records.reader import iter_batches
from kafkalog.storage.reports.transactions import open_transactions
from kafkalog.storage.reports.verify import verify_paths

CLIENTS = ("kafka-python", "confluent")
ISOLATIONS = ("read_uncommitted", "read_committed")
METADATA_DIR = "__cluster_metadata-0"

#: the broker settings of a certification run: nothing the broker does on its own (cleaning, retention) may
#: change the copy while it is read
CERTIFY_PROPS: dict[str, str] = {
    "log.cleaner.enable": "false",
    "log.retention.ms": "-1",
    "log.retention.bytes": "-1",
    "log.retention.check.interval.ms": "3600000",
    "log.message.timestamp.after.max.ms": "9223372036854775807",
}


class CertifyError(HarnessError):
    """Bad input to certify: not a data dir, an unreadable file, a dir a live broker holds."""


# ----------------------------------------------------------------------------------------------- results


@dataclass
class Restamp:
    """A file certify changed in the copy so that the test broker accepts it, and why."""

    file: str  # relative to the data dir
    field: str
    original: str | None
    test_broker: str


@dataclass
class LoadEvent:
    """One broker log line about loading the copy."""

    kind: str  # recovery, truncation, indexRebuild, producerState, stray, logStart, deletion, error, warning
    partition: str | None
    line: str


@dataclass
class Divergence:
    """One way Kafka's behaviour differs from what the files imply."""

    kind: str  # load, serve, corrupt, transaction, files, dump, verify, upgrade, refused
    partition: str | None
    kafka: str  # what Kafka did (its log line, a client's error, what it served)
    files: str  # what the files imply
    rule: str  # the Kafka class/method behind it
    first_offset: int | None = None
    last_offset: int | None = None
    file: str | None = None
    position: int | None = None
    client: str | None = None
    isolation: str | None = None
    command: str | None = None  # the kafkalog command that prepares the dir

    def to_json(self) -> dict[str, Any]:
        return {_camel(k): v for k, v in asdict(self).items()}


@dataclass
class ServedCount:
    client: str
    isolation: str
    expected: int  # records the files imply at this isolation level
    served: int  # records the client received


@dataclass
class PartitionResult:
    partition: str
    internal: bool = False  # loaded and dumped, not consumed (the broker's coordinators write to it)
    served: list[ServedCount] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.partition, "internal": self.internal,
                "served": [{"client": c.client, "isolation": c.isolation, "expected": c.expected,
                            "served": c.served} for c in self.served]}


@dataclass
class DirReport:
    """One data dir's certification."""

    path: str
    work_dir: str
    kafka: str
    backend: str
    metadata: str  # "own" (the dir's __cluster_metadata), "created" (topics created by certify)
    mode: str = "kraft"  # the test broker's: "kraft", or "zk" (ZooKeeper mode: a Kafka before KRAFT_PRODUCTION_SINCE)
    restamps: list[Restamp] = field(default_factory=list)
    events: list[LoadEvent] = field(default_factory=list)
    partitions: list[PartitionResult] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    segments_dumped: int = 0
    bytes: int = 0  # bytes of the data dir (all files)
    started: bool = False
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> wall seconds

    @property
    def conformant(self) -> bool:
        return self.started and not self.divergences

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path, "workDir": self.work_dir, "kafka": self.kafka, "backend": self.backend,
            "mode": self.mode, "metadata": self.metadata, "conformant": self.conformant, "started": self.started,
            "partitionCount": len(self.partitions), "segmentsDumped": self.segments_dumped, "bytes": self.bytes,
            "restamps": [{_camel(k): v for k, v in asdict(r).items()} for r in self.restamps],
            "loadEvents": [asdict(e) for e in self.events],
            "partitionResults": [p.to_json() for p in self.partitions],
            "divergences": len(self.divergences),
            "seconds": {_camel(k): round(v, 2) for k, v in self.seconds.items()},
        }  # fmt: skip


@dataclass
class CertifyReport:
    kafka: str
    backend: str
    dirs: list[DirReport] = field(default_factory=list)

    @property
    def conformant(self) -> bool:
        return bool(self.dirs) and all(d.conformant for d in self.dirs)

    @property
    def divergences(self) -> list[Divergence]:
        return [x for d in self.dirs for x in d.divergences]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


# ----------------------------------------------------------------------------------------------- input


def check_input(path: str | os.PathLike) -> Path:
    """The data dir ``path``, or a :class:`CertifyError` saying why it cannot be certified."""
    p = Path(path)
    if not p.exists():
        raise CertifyError(f"{p}: no such directory")
    if not p.is_dir():
        raise CertifyError(f"{p}: not a directory (certify takes data dirs)")
    try:
        kind = classify_path(p)
    except KafkaLogError as e:
        raise CertifyError(f"{p}: not a data dir: {e.reason}") from None
    if kind != "dataDir":
        raise CertifyError(f"{p}: not a data dir but a {'partition dir' if kind == 'partition' else kind} "
                           "(give the broker's log.dirs entry)")
    try:
        status = lock_status(p)
    except KafkaLogError as e:
        raise CertifyError(f"{e.path}: {e.reason}") from None
    if status.held:
        raise CertifyError(f"{p}: held by a live broker ({describe_holders(status.holders)} locks {status.path}); "
                           "certify a copy taken while it is stopped")
    for root, dirs, files in os.walk(p):
        for name in dirs:
            d = Path(root) / name
            if not os.access(d, os.R_OK | os.X_OK):
                raise CertifyError(f"{d}: directory not readable")
        for name in files:
            f = Path(root) / name
            try:
                with open(f, "rb") as fh:
                    fh.read(1)
            except OSError as e:
                raise CertifyError(f"{f}: unreadable: {e.strerror}") from None
    return p


def _dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.is_symlink())


# ----------------------------------------------------------------------------------------------- expected


Row = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int | None, str | None]
TS_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


@dataclass
class Expected:
    """What the files imply a consumer reads from one partition at one isolation level."""

    rows: list[Row]
    #: the files stop being readable here: (file, byte, first offset of the batch, reason)
    unreadable: tuple[str, int | None, int | None, str] | None = None


def _expected(pdir: Path, isolation: str) -> Expected:
    rows: list[Row] = []
    try:
        with open_partition_log(pdir) as plog:
            log_start = plog.log_start_offset
        # the test broker is the partition's only replica: its high watermark is the log end once it leads
        flt = ExportFilter(include_control=False, read_committed=isolation == "read_committed",
                           from_offset=log_start, sole_replica=True)
        for head, recs in iter_partition_batches(pdir, flt):
            ts_type, magic = head[2], head[10]
            for off, ts, key, value, headers in recs:
                # a client gives no timestamp (nor its type) for magic 0 and for -1 (NO_TIMESTAMP: a v0 message
                # up-converted), as the clients' side reads them below
                none = magic == 0 or ts == -1
                rows.append((off, _b(key), _b(value), tuple((k, _b(v)) for k, v in headers),
                             None if none else ts, None if none else TS_TYPES.get(ts_type)))
    except KafkaLogError as e:
        return Expected(rows, (e.path or str(pdir), e.position, rows[-1][0] + 1 if rows else None, e.reason))
    return Expected(rows)


def _b(v: Any) -> bytes | None:
    return None if v is None else bytes(v)


# ----------------------------------------------------------------------------------------------- evidence

_EVENT_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("leaderEpoch", re.compile(r"caused truncation of conflicting entries")),
    ("truncation", re.compile(r"[Tt]runcat|Found invalid messages|invalid bytes", re.S)),
    ("indexRebuild", re.compile(r"corrupted index|[Rr]ebuilding index|index file .*(corrupt|missing)|"
                                r"[Dd]eleting index")),
    ("recovery", re.compile(r"Recovering unflushed segment|no clean shutdown file|[Rr]ecovering segment")),
    ("producerState", re.compile(r"rebuilding producer state|[Dd]eleting producer snapshot|producer snapshot")),
    ("stray", re.compile(r"[Ss]tray|[Rr]enam")),
    ("logStart", re.compile(r"log start offset|[Ii]ncrementing log start")),
    ("deletion", re.compile(r"[Dd]eleting (all )?segments?|scheduled for deletion")),
]
_OFFSET = re.compile(r"\b[Oo]ffset\s*\(?(\d+)")
_PARTITION = re.compile(r"partition=([^,\]\s]+)|\b([A-Za-z0-9._-]+-\d+)\b")
_LEVEL = re.compile(r"^\[[^\]]*\] (ERROR|WARN|INFO|DEBUG|TRACE) ")
#: start-up lines of every load, not about the data
_ROUTINE = re.compile(r"Loading producer state till offset|Producer state recovery took|"
                      r"Completed load of Log|Loaded \d+ logs|Logs loading complete|Attempting recovery for all logs|"
                      r"Skipping recovery of \d+ logs|Loading logs from log dirs|Created log for partition|"
                      r"Reloading from producer snapshot and rebuilding producer state from offset")

RULES = {
    "leaderEpoch": "LeaderEpochFileCache.assign (a new leader epoch below the file's latest truncates the entries "
                   "from it; clients whose records carry the higher epoch are fenced and reset: KIP-320)",
    "truncation": "LogLoader.recoverSegment -> LogSegment.recover (truncates at the first invalid batch)",
    "indexRebuild": "LogLoader.loadSegmentFiles -> LogSegment.sanityCheck (a corrupt or missing index is rebuilt)",
    "recovery": "LogLoader.recoverLog (no clean shutdown: the segments past the recovery point are re-read)",
    "producerState": "LogLoader.rebuildProducerState / ProducerStateManager.truncateAndReload",
    "stray": "LogManager.loadLog / ReplicaManager (a log not in the cluster metadata, or with another topic id, "
             "is a stray)",
    "logStart": "UnifiedLog.maybeIncrementLogStartOffset / LogLoader (log start offset vs the segments)",
    "deletion": "LogLoader.removeAndDeleteSegmentsAsync",
    "error": "LogManager.loadLogs",
    "warning": "LogManager.loadLogs",
}
COMMANDS = {
    "leaderEpoch": "kafkalog migrate (cuts leader-epoch-checkpoint for the destination), or restore where the "
                   "destination's leader epoch is at least the files'",
    "truncation": "kafkalog repair", "recovery": "kafkalog repair", "indexRebuild": "kafkalog reindex",
    "producerState": "kafkalog repair", "stray": "kafkalog topic-id", "logStart": "kafkalog repair",
    "deletion": "kafkalog repair", "error": "kafkalog repair",
}


_FATAL = re.compile(r"fatal fault|Error starting|Shutdown broker because|Exiting Kafka|Halting|all log dirs.*failed|"
                    r"KafkaStorageException|LogManager|log dir")
_EXCEPTION = re.compile(r"^(?:Caused by: )?((?:[a-z]+\.)+[A-Za-z]*(?:Exception|Error)(?::.*)?)$")


def fatal_cause(log_text: str) -> str | None:
    """The exception behind a broker's fatal fault at start-up (its last ``Caused by``, else its first line)."""
    lines = log_text.splitlines()
    for i, line in enumerate(lines):
        if "fatal fault" in line or "Error starting" in line or "Exiting Kafka" in line:
            found = [m[1] for x in lines[i + 1:i + 200] if (m := _EXCEPTION.match(x.strip()))]
            if found:
                return found[-1]
            return line.strip()
    return None


def _refusal_rule(cause: str | None) -> str:
    if cause and "ConfigException" in cause:
        return "LogConfig.validate / ConfigDef.Range.ensureValid (topic configs from __cluster_metadata)"
    if cause and ("partition.metadata" in cause or "topic ID" in cause or "topic id" in cause.lower()):
        return "PartitionMetadataFile.read / UnifiedLog.initializeTopicId"
    return "KafkaRaftServer.startup / LogManager.loadLogs"


def _refusal_command(cause: str | None) -> str:
    if cause and "ConfigException" in cause:
        return "change the topic config on the old cluster before the upgrade (kafka-configs.sh --alter)"
    if cause and ("topic ID" in cause or "topic id" in cause.lower() or "partition.metadata" in cause):
        return "kafkalog repair (rewrites partition.metadata) or kafkalog topic-id --set ID"
    return "kafkalog verify --deep, then kafkalog repair"


def load_events(log_text: str, partitions: set[str]) -> list[LoadEvent]:
    """The broker's log lines about loading the partitions: each classified, ERROR/WARN lines always kept."""
    out: list[LoadEvent] = []
    for line in log_text.splitlines():
        m = _LEVEL.match(line)
        if m is None or _ROUTINE.search(line):
            continue
        names = {a or b for a, b in _PARTITION.findall(line)}
        ours = sorted(n for n in names if n in partitions)
        part = ours[0] if ours else None
        kind = next((k for k, pat in _EVENT_PATTERNS if pat.search(line)), None)
        if kind is None and m[1] in ("ERROR", "WARN") and (part or (m[1] == "ERROR" and _FATAL.search(line))):
            kind = "error" if m[1] == "ERROR" else "warning"
        if kind is None or (part is None and kind not in ("error", "stray")):
            continue
        out.append(LoadEvent(kind, part, line.strip()))
    return out


# ----------------------------------------------------------------------------------------------- consuming


@dataclass
class Served:
    rows: list[Row]
    error: str | None = None  # the client's error, if it stopped on one
    error_offset: int | None = None
    end: int | None = None  # the end the broker reported (high watermark, or last stable offset)


def _consume_partition(bootstrap: str, topic: str, partition: int, client: str, isolation: str,
                       idle: float = 6.0, timeout: float = 60.0) -> Served:
    if client == "kafka-python":
        return _consume_kafka_python(bootstrap, topic, partition, isolation, idle, timeout)
    return _consume_confluent(bootstrap, topic, partition, isolation, idle, timeout)


def _consume_kafka_python(bootstrap: str, topic: str, partition: int, isolation: str, idle: float,
                          timeout: float) -> Served:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level=isolation, check_crcs=True)
    tp = TopicPartition(topic, partition)
    out = Served([])
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        out.end = consumer.end_offsets([tp], timeout_ms=15_000)[tp]
        deadline, last = time.monotonic() + timeout, time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last < idle:
            try:
                if consumer.position(tp, timeout_ms=5_000) >= out.end:
                    break
                polled = consumer.poll(timeout_ms=500)
            except Exception as e:  # the client's own error (CorruptRecordError, ...) is the evidence
                out.error, out.error_offset = f"{type(e).__name__}: {e}", _position(consumer, tp)
                break
            for recs in polled.values():
                for m in recs:
                    if out.rows and m.offset <= out.rows[-1][0]:
                        out.error = f"received offset {m.offset} again after offset {out.rows[-1][0]}"
                        out.error_offset = m.offset
                        return out
                    out.rows.append((m.offset, m.key, m.value, tuple((k, v) for k, v in (m.headers or [])),
                                     None if m.timestamp in (-1, None) else m.timestamp,
                                     None if m.timestamp in (-1, None) else TS_TYPES.get(m.timestamp_type)))
                    last = time.monotonic()
    finally:
        consumer.close()
    return out


def _position(consumer: Any, tp: Any) -> int | None:
    try:
        return int(consumer.position(tp, timeout_ms=2_000))
    except Exception:  # no position known: the error is reported without one
        return None


def _consume_confluent(bootstrap: str, topic: str, partition: int, isolation: str, idle: float,
                       timeout: float) -> Served:
    from confluent_kafka import (
        OFFSET_BEGINNING,
        TIMESTAMP_NOT_AVAILABLE,
        Consumer,
        KafkaError,
        TopicPartition,
    )

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkalog-certify", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": isolation, "check.crcs": True,
                         "enable.partition.eof": True, "log_level": 0})
    out = Served([])
    try:
        _, out.end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline, last = time.monotonic() + timeout, time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last < idle:
            # up to 1000 messages a call (one Python call per message was most of this client's time), waiting at
            # most 0.1 s: consume() waits its whole timeout for a batch it cannot fill, even after the partition's end
            had = len(out.rows)
            if _confluent_rows(consumer.consume(1000, 0.1), out, KafkaError._PARTITION_EOF, TIMESTAMP_NOT_AVAILABLE):
                break
            if len(out.rows) > had:
                last = time.monotonic()
    finally:
        consumer.close()
    return out


def _confluent_rows(messages: list, out: Served, eof: int, no_ts: int) -> bool:
    """Append ``messages`` (a ``Consumer.consume`` answer) to ``out``; True when the partition's end, an error or an
    offset going back ends the reading."""
    for m in messages:
        err, offset = m.error(), m.offset()
        if err is not None:
            if err.code() == eof:
                return True
            out.error, out.error_offset = f"{err.name()}: {err.str()}", offset
            return True
        if offset is None:
            out.error = "a record without an offset"
            return True
        if out.rows and offset <= out.rows[-1][0]:
            out.error, out.error_offset = f"received offset {offset} again after offset {out.rows[-1][0]}", offset
            return True
        ts_type, ts = m.timestamp()
        none = ts_type == no_ts or ts == -1
        out.rows.append((offset, m.key(), m.value(), confluent_headers(m.headers()),
                         None if none else ts, None if none else TS_TYPES.get(ts_type - 1)))
    return False


def _fmt(row: Row | None) -> str:
    if row is None:
        return "nothing"
    off, key, value, headers, ts, tst = row

    def s(b: bytes | None) -> str:
        if b is None:
            return "null"
        return repr(b[:40])[1:] + ("..." if len(b) > 40 else "") if b.isascii() else base64.b64encode(b[:30]).decode()

    hs = ",".join(f"{k}={s(v)}" for k, v in headers)
    return f"offset {off} key {s(key)} value {s(value)} headers [{hs}] timestamp {ts} ({tst})"


def compare_served(name: str, client: str, isolation: str, want: Expected, got: Served) -> list[Divergence]:
    """The divergences between what the files imply (``want``) and what a client got (``got``)."""
    out: list[Divergence] = []
    rule = "ReplicaManager.fetchMessages -> UnifiedLog.read (serves the log's batches as stored)"
    by_off = {r[0]: r for r in got.rows}
    seen: set[int] = set()
    first_bad: tuple[Row | None, Row | None] | None = None
    missing: list[int] = []
    for row in want.rows:
        g = by_off.get(row[0])
        seen.add(row[0])
        if g is None:
            missing.append(row[0])
        elif g != row and first_bad is None:
            first_bad = (g, row)
    extra = [r[0] for r in got.rows if r[0] not in seen]
    if want.unreadable is not None and want.unreadable[1] is None and not want.rows:
        # kafkalog refuses the partition as a whole (a layout that says records are gone): no record to compare
        return [Divergence(
            "files", name, file=want.unreadable[0],
            kafka=f"served {len(got.rows)} record(s)" + (f" from offset {got.rows[0][0]}" if got.rows else ""),
            files=f"kafkalog cannot read the partition: {want.unreadable[3]}",
            rule="the partition's layout (kafkalog verify names the rule)", command="kafkalog doctor")]
    if want.unreadable is not None:
        file, pos, first, reason = want.unreadable
        served_past = [o for o in extra if first is None or o >= first]
        out.append(Divergence(
            "corrupt", name, client=client, isolation=isolation, file=file, position=pos, first_offset=first,
            kafka=(f"{client} stopped with {got.error} at offset {got.error_offset}" if got.error else
                   f"{client} received {len(served_past)} record(s) from offset {first} on, unchecked"),
            files=f"the files cannot be read past {file}@{pos}: {reason}",
            rule="DefaultRecordBatch.ensureValid / LegacyRecord.ensureValid (checked by the consumer, not by the "
                 "broker's fetch path)", command="kafkalog repair"))
        extra = [o for o in extra if o not in served_past]
    elif got.error is not None:
        out.append(Divergence("serve", name, client=client, isolation=isolation, first_offset=got.error_offset,
                              kafka=f"{client} stopped with {got.error} at offset {got.error_offset}",
                              files="the files are readable to their end", rule=rule))
    if missing and not (want.unreadable is None and got.error is not None and missing[0] >= (got.error_offset or 0)):
        out.append(Divergence("serve", name, client=client, isolation=isolation, first_offset=missing[0],
                              last_offset=missing[-1],
                              kafka=f"served no record at {len(missing)} offset(s) from {missing[0]} to {missing[-1]}"
                                    f" (end {got.end})",
                              files=f"the files hold {len(missing)} record(s) there", rule=rule))
    if extra:
        out.append(Divergence("serve", name, client=client, isolation=isolation, first_offset=extra[0],
                              last_offset=extra[-1],
                              kafka=f"served {len(extra)} record(s) at offsets {extra[0]}..{extra[-1]}",
                              files="the files imply no record there at this isolation level"
                                    + (" (aborted or past the last stable offset)" if isolation == "read_committed"
                                       else ""),
                              rule=rule if isolation == "read_uncommitted" else
                              "UnifiedLog.collectAbortedTransactions / Fetcher (aborted transactions skipped by "
                              "the consumer from the fetch's abortedTransactions)"))
    if first_bad is not None:
        g, w = first_bad
        out.append(Divergence("serve", name, client=client, isolation=isolation, first_offset=w[0] if w else None,
                              kafka=f"served {_fmt(g)}", files=f"the files hold {_fmt(w)}", rule=rule))
    return out


# ----------------------------------------------------------------------------------------------- certify


def certify(dirs: Sequence[str | os.PathLike], *, kafka: str = jars.LATEST_4, backend: str | None = None,
            image: str | None = None, workdir: str | os.PathLike | None = None,
            on_phase: Callable[[str], None] | None = None) -> CertifyReport:
    """Certify each data dir in ``dirs`` against Kafka ``kafka`` (one broker per dir; see the module doc)."""
    jars.parse_version(kafka)
    paths = [check_input(d) for d in dirs]
    backend = backend or os.environ.get("KAFKALOG_BROKER", "jvm")
    base = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix=f"kafkalog-certify-{kafka}-"))
    report = CertifyReport(kafka, backend)
    for i, p in enumerate(paths):
        report.dirs.append(_certify_dir(p, base / f"{i}-{p.name}", kafka, backend, image, on_phase or (lambda _: None)))
    return report


def _timed(rep: DirReport, phase: str, on_phase: Callable[[str], None]) -> Any:
    class _T:
        def __enter__(self) -> None:
            on_phase(phase)
            self.t0 = time.perf_counter()

        def __exit__(self, *exc: object) -> None:
            rep.seconds[phase] = rep.seconds.get(phase, 0.0) + time.perf_counter() - self.t0

    return _T()


def _certify_dir(orig: Path, work: Path, kafka: str, backend: str, image: str | None,
                 on_phase: Callable[[str], None]) -> DirReport:
    work.mkdir(parents=True, exist_ok=True)
    copy = work / "data"
    has_metadata = (orig / METADATA_DIR).is_dir()
    rep = DirReport(str(orig), str(work), kafka, backend, "own" if has_metadata else "created",
                    bytes=_dir_bytes(orig))
    parts = [(pd, tp) for pd, tp in list_partition_dirs(orig, include_metadata=False)]
    names = {pd.name for pd, _ in parts}
    meta = _original_meta(orig, rep)
    own_node = meta.node_id if has_metadata and meta is not None and meta.version == 1 else None
    own = own_node is not None
    # a dir without its own metadata, on a Kafka whose KRaft mode was not yet production ready, is certified as its
    # users ran that Kafka: in ZooKeeper mode (the JVM backend; the container backend runs KRaft only)
    rep.mode = "zk" if not own and backend == "jvm" and jars.parse_version(kafka) < KRAFT_PRODUCTION_SINCE \
        else "kraft"
    _upgrade_facts(orig, parts, meta, has_metadata, rep)
    props = dict(CERTIFY_PROPS)
    broker: KafkaBroker | None = None
    try:
        if own:
            with _timed(rep, "copy", on_phase):
                shutil.copytree(orig, copy, symlinks=True, ignore=shutil.ignore_patterns(".lock"))
            broker = make_broker(kafka, backend=backend, image=image, data_dir=copy, server_properties=props)
            node = str(own_node)
            broker.extra_properties |= {"node.id": node,
                                        "controller.quorum.voters": f"{node}@127.0.0.1:{broker.controller_port}"}
        elif rep.mode == "zk":
            broker = zk_broker = Broker(kafka, mode="zk", data_dir=copy, server_properties=props)
            # every topic created in the test broker's ZooKeeper before it starts, with the id its files carry (a
            # topic without a single one gets a new id, written into the copy), at the files' leader epochs
            ids = _file_topic_ids(parts)
            new_ids = _new_topic_ids(parts, known=ids)
            copy.mkdir(parents=True)
            write_meta_properties(copy / "meta.properties", MetaProperties.new(
                version=0, cluster_id=broker.cluster_id, node_id=int(broker.server_properties()["broker.id"])))
            with _timed(rep, "createTopics", on_phase):
                _zookeeper_topics(zk_broker, parts, ids | new_ids)
            with _timed(rep, "copy", on_phase):
                _install_copy(orig, copy, parts, rep, new_ids)
        else:
            broker = make_broker(kafka, backend=backend, image=image, data_dir=copy, server_properties=props)
            # the topics whose files carry their id are created with it, by the controller's bootstrap records
            # (a topic whose partitions have no partition.metadata at all, as Kafka 2.8 left them, gets a new id,
            # written into the copy), on either backend (the container's formatting runs in the image); a broker
            # older than 3.7 (no bootstrap.checkpoint before 3.3, no directory ids in a RegisterBrokerRecord
            # before 3.7), or an image that formats its storage only as it starts, takes the admin API for every
            # topic
            bootstrap = broker.formats_offline and jars.parse_version(kafka) >= BOOTSTRAP_SINCE
            new_ids = _new_topic_ids(parts) if bootstrap else {}
            ids = {**_file_topic_ids(parts), **new_ids} if bootstrap else {}
            if ids:
                with _timed(rep, "createTopics", on_phase):
                    _bootstrap_topics(broker, orig, parts, ids)
            rest = [(pd, tp) for pd, tp in parts if tp.topic not in ids]
            if any(tp.kind == "live" for _pd, tp in rest):  # the others through the admin API, new ids restamped
                with _timed(rep, "brokerStart", on_phase):
                    broker.start(timeout=180)
                with _timed(rep, "createTopics", on_phase):
                    _create_topics(broker, rest)
                broker.stop()
            with _timed(rep, "copy", on_phase):
                _install_copy(orig, copy, parts, rep, new_ids)
        log_start = broker.log_size()
        with _timed(rep, "brokerStart", on_phase):
            try:
                broker.start(timeout=180)
                rep.started = True
            except BrokerError as e:
                text = broker.log_since(log_start)
                cause = fatal_cause(text)
                rep.divergences.append(Divergence(
                    "refused", None, kafka=f"Kafka {kafka} did not start on the copy"
                    + (f": {cause}" if cause else f" ({e.args[0].splitlines()[0]})"),
                    files="a data dir a broker can load", rule=_refusal_rule(cause),
                    command=_refusal_command(cause)))
        rep.events = [e for e in load_events(broker.log_since(log_start), names)
                      if rep.started or e.partition is not None or e.kind != "error"]  # (the refusal says it)
        for ev in rep.events:
            at = _OFFSET.search(ev.line)
            rep.divergences.append(Divergence(
                "load", ev.partition, first_offset=int(at[1]) if at else None, kafka=ev.line,
                files=_event_files(ev, rep), rule=RULES[ev.kind], command=COMMANDS.get(ev.kind)))
        if rep.started:
            with _timed(rep, "consume", on_phase):
                _serve(broker, parts, rep)
            broker.stop(require_clean_marker=False)
            _after_stop(parts, copy, rep)
    except HarnessError as e:
        rep.divergences.append(Divergence("refused", None, kafka=f"{type(e).__name__}: {e}",
                                          files="a data dir a broker can load and serve",
                                          rule="KafkaRaftServer.startup"))
    finally:
        if broker is not None:
            broker.close()
    with _timed(rep, "dumpLogSegments", on_phase):
        _dump(orig, parts, kafka, rep)
    with _timed(rep, "verify", on_phase):
        _verify(orig, rep)
    _attribute_refusal(rep)
    return rep


def _attribute_refusal(rep: DirReport) -> None:
    """A broker that refused the dir rarely names the partition: when ``verify`` finds exactly one partition whose
    ``partition.metadata`` Kafka cannot read, the refusal is that partition's."""
    refused = [x for x in rep.divergences if x.kind == "refused" and x.partition is None]
    bad = {x.partition for x in rep.divergences if x.kind == "verify" and x.files.startswith("[metadata]")}
    if len(refused) == 1 and len(bad) == 1:
        x = refused[0]
        x.partition = bad.pop()
        x.file = str(Path(rep.path) / str(x.partition) / "partition.metadata")
        x.rule = "PartitionMetadataFile.read -> UnifiedLog.initializeTopicId (every log loads its topic id)"
        x.command = "kafkalog repair (rewrites partition.metadata) or kafkalog topic-id --set ID"


def _event_files(ev: LoadEvent, rep: DirReport) -> str:
    if ev.kind != "leaderEpoch":
        return "a clean load: nothing to recover, rebuild or rename"
    if rep.metadata == "created":
        return ("leader epochs above the test broker's: certify created the topic, so its leader epoch starts low, "
                "as in any cluster the partition is restored into")
    return "leader epochs above the one the cluster metadata gives the partition"


def _original_meta(orig: Path, rep: DirReport) -> MetaProperties | None:
    try:
        return read_meta_properties(orig / "meta.properties") if (orig / "meta.properties").exists() else None
    except KafkaLogError as e:
        rep.divergences.append(Divergence("verify", None, file=e.path, position=e.position, kafka="not run",
                                          files=f"meta.properties does not parse: {e.reason}",
                                          rule="MetaProperties / PropertiesUtils.readPropertiesFile",
                                          command="kafkalog repair"))
        return None


def _upgrade_facts(orig: Path, parts: list, meta: MetaProperties | None, has_metadata: bool, rep: DirReport) -> None:
    """What a ZooKeeper-era or legacy-format dir needs before a KRaft / 4.x broker takes it as it is (a ZooKeeper-mode
    test broker takes a ZooKeeper-era dir's meta.properties, topics and partition.metadata as they are)."""
    v4 = jars.parse_version(rep.kafka) >= (4,)
    kraft = rep.mode == "kraft"
    if kraft and meta is not None and meta.version == 0:
        rep.divergences.append(Divergence(
            "upgrade", None, file="meta.properties",
            kafka="a KRaft broker needs meta.properties version 1 (node.id, cluster.id, directory.id); certify "
                  "restamped the copy" + ("; Kafka 4 has no ZooKeeper mode" if v4 else ""),
            files=f"ZooKeeper-era meta.properties (version 0, broker.id={meta.node_id}, cluster.id={meta.cluster_id})",
            rule="MetaPropertiesEnsemble.verify (KRaft needs version 1)",
            command="kafkalog migrate (into a data dir formatted by kafka-storage format)"))
    if kraft and not has_metadata and meta is not None and meta.version == 0:
        rep.divergences.append(Divergence(
            "upgrade", None, file=METADATA_DIR,
            kafka="a KRaft broker takes its topics and topic ids from __cluster_metadata; certify created the topics "
                  "in the test broker's, with the ids of their partition.metadata (a topic without one got a new "
                  "id, restamped in the copy)",
            files="no __cluster_metadata: the topics and their ids live elsewhere (ZooKeeper)",
            rule="LogManager.loadLog / ReplicaManager.applyDelta (a log whose topic id the metadata does not "
                 "know is a stray)",
            command="kafkalog topic-id --set ID (or kafkalog migrate --topic-id ID) with the destination's ids"))
    missing = sorted(pd.name for pd, tp in parts if tp.kind == "live" and not (pd / "partition.metadata").exists())
    if kraft and not has_metadata and missing:
        rep.divergences.append(Divergence(
            "upgrade", None, file="partition.metadata",
            kafka="a KRaft broker treats a log without partition.metadata as a stray ('The topicId does not exist "
                  "in Log ..., treat it as a stray log') and renames it to <dir>.<uuid>-stray: nothing of it is "
                  "served; certify gave each such topic an id in the test broker's metadata and wrote it into the copy",
            files=f"{len(missing)} partition(s) of {len({n.rsplit('-', 1)[0] for n in missing})} topic(s) have no "
                  f"partition.metadata (no topic id in the dir): {', '.join(missing[:8])}"
                  + (f" and {len(missing) - 8} more" if len(missing) > 8 else ""),
            rule="BrokerMetadataPublisher / LogManager (a log whose topic id the metadata does not know is a "
                 "stray)",
            command="kafkalog topic-id --set ID (or kafkalog migrate --topic-id ID) with the destination's ids"))
    if v4:
        legacy = {pd.name: m for pd, _tp in parts if (m := _legacy_segments(pd))}
        if legacy:
            magics = sorted({mg for ms in legacy.values() for _, mg in ms})
            rep.divergences.append(Divergence(
                "upgrade", None,
                kafka="Kafka 4 writes and down-converts no message format v0/v1 (KIP-724): it serves the legacy "
                      "batches as stored (clients must read v0/v1) and its cleaner rewrites them as v2",
                files=f"{sum(len(v) for v in legacy.values())} segment(s) of {len(legacy)} partition(s) hold "
                      f"message format {'/'.join(f'v{m}' for m in magics)} batches: {', '.join(sorted(legacy))}",
                rule="UnifiedLog.appendAsLeader / LogValidator (v2 only since 4.0, KIP-724)",
                command="kafkalog convert"))


def _legacy_segments(pdir: Path) -> list[tuple[Path, int]]:
    out = []
    try:
        with PartitionLog(pdir) as plog:
            for seg in plog.segments:
                b = next(iter(seg.iter_batches(0)), None)
                if b is not None and b.magic < 2:
                    out.append((seg.path, b.magic))
                seg.close()
    except KafkaLogError:
        return out
    return out


def _create_topics(broker: KafkaBroker, parts: list) -> None:
    counts: dict[str, int] = {}
    for _pd, tp in parts:
        if tp.kind == "live":
            counts[tp.topic] = max(counts.get(tp.topic, 0), tp.partition + 1)
    for topic, n in sorted(counts.items()):
        broker.create_topic(topic, partitions=n)
    deadline = time.monotonic() + 60
    want = {f"{t}-{p}" for t, n in counts.items() for p in range(n)}
    # a KRaft broker before 3.0 (Kafka 2.8's early-access mode) writes no partition.metadata: its logs are made
    # without one, and the topic ids stay in its metadata log
    made = "partition.metadata" if jars.parse_version(broker.version) >= TOPIC_ID_FILES_SINCE else ""
    while time.monotonic() < deadline:
        if all((broker.data_dir / n / made).exists() for n in want):
            return
        time.sleep(0.3)
    missing = sorted(n for n in want if not (broker.data_dir / n / made).exists())
    raise BrokerError(f"the test broker did not create {missing[:5]} within 60 s")


def _file_topic_ids(parts: list) -> dict[str, str]:
    """Each live topic's id as its files carry it: the one topic id every partition's ``partition.metadata`` of
    the topic holds (not the zero id nor the metadata topic's, and no other topic's)."""
    seen: dict[str, set[str | None]] = {}
    for pd, tp in parts:
        if tp.kind != "live":
            continue
        try:
            tid: str | None = read_partition_metadata(pd / "partition.metadata").topic_id
        except (KafkaLogError, OSError):
            tid = None
        if tid is not None and kafka_str_to_uuid(tid).int in (0, 1):  # Uuid.ZERO_UUID, Uuid.METADATA_TOPIC_ID
            tid = None
        seen.setdefault(tp.topic, set()).add(tid)
    ids = {t: tid for t, v in seen.items() if len(v) == 1 and (tid := next(iter(v))) is not None}
    owners: dict[str, int] = {}
    for tid in ids.values():
        owners[tid] = owners.get(tid, 0) + 1
    return {t: tid for t, tid in ids.items() if owners[tid] == 1}


def _new_topic_ids(parts: list, known: Mapping[str, str] | None = None) -> dict[str, str]:
    """A new topic id for each live topic none of whose partitions has a ``partition.metadata`` or, given the ``known``
    ids, for each live topic not in it."""
    has: dict[str, bool] = {}
    for pd, tp in parts:
        if tp.kind == "live":
            has[tp.topic] = tp.topic in known if known is not None else \
                has.get(tp.topic, False) or (pd / "partition.metadata").exists()
    out = {}
    for topic in sorted(t for t, h in has.items() if not h):
        u = uuid.uuid4()
        while u.int in (0, 1):  # Uuid.ZERO_UUID, Uuid.METADATA_TOPIC_ID
            u = uuid.uuid4()
        out[topic] = uuid_to_kafka_str(u.bytes)
    return out


def _latest_epoch(pdir: Path) -> int:
    """The partition's latest leader epoch as its ``leader-epoch-checkpoint`` says (0 without one)."""
    try:
        return max((e.epoch for e in read_leader_epoch_checkpoint(pdir / "leader-epoch-checkpoint").entries),
                   default=0)
    except (KafkaLogError, OSError):
        return 0


def _previous_broker_epoch(orig: Path) -> int:
    """The broker epoch a broker starting on a copy of ``orig`` tells its controller it had before
    (``LogManager.readBrokerEpochFromCleanShutdownFiles``: the clean-shutdown marker's ``brokerEpoch``; -1 for an
    empty marker, as Kafka up to 3.6 writes it, an unreadable one or none)."""
    try:
        marker = read_clean_shutdown(orig / CLEAN_SHUTDOWN_FILE)
    except (KafkaLogError, OSError):
        return -1
    return marker.broker_epoch if marker is not None and marker.broker_epoch is not None else -1


#: the first Kafka whose controller takes certify's bootstrap records (RegisterBrokerRecord v3: log dirs)
BOOTSTRAP_SINCE = (3, 7)
#: the first Kafka whose KRaft brokers write each log's partition.metadata
TOPIC_ID_FILES_SINCE = (3, 0)
#: the first Kafka whose KRaft mode is production ready (KIP-833); before it (Kafka 2.8's early access, 3.0-3.2's
#: preview) clusters ran ZooKeeper, and certify runs such a broker in ZooKeeper mode
KRAFT_PRODUCTION_SINCE = (3, 3)


def _zookeeper_topics(broker: Broker, parts: list, ids: dict[str, str]) -> None:
    """Create the topics in the test broker's ZooKeeper before the broker first starts, as a ZooKeeper-mode cluster
    holds them (``kafka.zk.ZkData``): ``/cluster/id`` with the cluster id of the copy's meta.properties
    (``ClusterIdZNode``), ``/brokers/topics/<topic>`` with this node the replica of each partition and the files'
    ``topic_id`` (``TopicZNode``: KIP-516, a ZooKeeper-mode cluster keeps topic ids there since 2.8), and each
    partition's state (``TopicPartitionStateZNode``: this node the leader and the ISR, at the files' latest leader
    epoch). The controller finds every partition online on a live leader at its failover and sends this node
    ``LeaderAndIsr`` at that epoch with that topic id: no ``partition.metadata`` is restamped and no leader epoch
    entry of the files is dropped (``LeaderEpochFileCache.assign``: the same epoch at the log end is no update)."""
    node = int(broker.server_properties()["broker.id"])
    pdirs = {(tp.topic, tp.partition): pd for pd, tp in parts if tp.kind == "live"}
    counts: dict[str, int] = {}
    for topic, partition in pdirs:
        counts[topic] = max(counts.get(topic, 0), partition + 1)

    def js(value: Any) -> str:
        return json.dumps(value, separators=(",", ":"))

    nodes = [("/cluster", ""), ("/cluster/id", js({"version": "1", "id": broker.cluster_id})), ("/brokers", ""),
             ("/brokers/topics", "")]
    for topic in sorted(counts):
        at = f"/brokers/topics/{topic}"
        nodes += [(at, js({"version": 2, "partitions": {str(p): [node] for p in range(counts[topic])},
                           "adding_replicas": {}, "removing_replicas": {}, "topic_id": ids[topic]})),
                  (f"{at}/partitions", "")]
        for p in range(counts[topic]):
            epoch = _latest_epoch(pd) if (pd := pdirs.get((topic, p))) is not None else 0
            nodes += [(f"{at}/partitions/{p}", ""), (f"{at}/partitions/{p}/state", js({
                "controller_epoch": 1, "leader": node, "version": 1, "leader_epoch": epoch, "isr": [node]}))]
    broker.create_znodes(nodes)


def _bootstrap_topics(broker: KafkaBroker, orig: Path, parts: list, ids: dict[str, str]) -> None:
    """Format the test broker's data dir and add to its ``bootstrap.checkpoint``, before the snapshot's footer: a
    ``RegisterBrokerRecord`` of this node (fenced, in the formatted log dir, at the broker epoch the copy's
    clean-shutdown marker gives), a ``TopicRecord`` per topic (the files' topic id) and one ``PartitionRecord`` per
    partition (this node the only replica and the ISR, no leader yet, at the files' latest leader epoch). The
    controller appends them to the empty metadata log when it activates (``ActivationRecordsGenerator
    .recordsForEmptyLog``) and replays them, so the topics exist with the files' ids and no ``partition.metadata``
    needs a new one.

    The registration makes the broker's start a restart of a cleanly stopped node: its own registration then finds
    that one at the epoch it reports (``ClusterControlManager.registerBroker``: ``storedBrokerEpoch ==
    previousBrokerEpoch``), so the controller handles it as a clean shutdown and, once the broker is unfenced,
    elects it leader from the ISR at the files' epoch + 1. Without it the registration counted as a new incarnation
    after an unclean shutdown (``handleBrokerShutdown``: ISR emptied, then an unclean election at epoch + 2), and a
    partition whose bootstrap named the node leader was served before that, at the files' epoch, then taken away."""
    data = broker.format()
    node = int(broker.server_properties()["node.id"])
    directory = kafka_str_to_uuid(read_meta_properties(data / "meta.properties").directory_id or "")
    pdirs = {(tp.topic, tp.partition): pd for pd, tp in parts if tp.kind == "live"}
    counts: dict[str, int] = {}
    for topic, partition in pdirs:
        if topic in ids:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
    values = [encode_metadata_record(0, {
        "brokerId": node, "incarnationId": uuid.uuid4(), "brokerEpoch": _previous_broker_epoch(orig),
        "endPoints": [], "features": [], "rack": None, "fenced": True, "inControlledShutdown": False,
        "logDirs": [directory]}, 3)]
    for topic in sorted(counts):
        tid = kafka_str_to_uuid(ids[topic])
        values.append(encode_metadata_record(2, {"name": topic, "topicId": tid}, 0))
        for p in range(counts[topic]):
            epoch = _latest_epoch(pd) if (pd := pdirs.get((topic, p))) is not None else 0
            values.append(encode_metadata_record(3, {
                "partitionId": p, "topicId": tid, "replicas": [node], "isr": [node], "removingReplicas": [],
                "addingReplicas": [], "leader": -1, "leaderEpoch": epoch, "partitionEpoch": 0,
                "directories": [directory]}, 1))
    path = data / BOOTSTRAP_CHECKPOINT
    buf = path.read_bytes()
    footer = list(iter_batches(buf))[-1]
    if not footer.is_control or footer.position + footer.size != len(buf):
        raise BrokerError(f"{path}: kafka-storage format wrote no snapshot footer to add the topics before")
    at = footer.base_offset
    added = build_batch([(at + i, footer.max_timestamp, None, v) for i, v in enumerate(values)],
                        partition_leader_epoch=footer.partition_leader_epoch)
    moved = (at + len(values)).to_bytes(8, "big") + buf[footer.position + 8:]  # the CRC does not cover the offset
    path.write_bytes(buf[:footer.position] + added + moved)


def _install_copy(orig: Path, copy: Path, parts: list, rep: DirReport, new_ids: dict[str, str]) -> None:
    """Put the original's partitions, checkpoints and clean-shutdown marker into the test broker's stopped data
    dir, each ``partition.metadata`` restamped with the broker's topic id (``new_ids``: the ids given in the
    bootstrap records to the topics without one; the broker's meta.properties and __cluster_metadata stay)."""
    broker_ids: dict[str, str] = dict(new_ids)
    for pd, tp in parts:
        mine = copy / pd.name
        if (mine / "partition.metadata").exists():
            broker_ids.setdefault(tp.topic, read_partition_metadata(mine / "partition.metadata").topic_id)
    for pd, tp in parts:
        dst = copy / pd.name
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(pd, dst, symlinks=True)
        pm = dst / "partition.metadata"
        tid = broker_ids.get(tp.topic)
        if tid is None:
            continue
        if not pm.exists():  # a KRaft broker renames a log without a topic id away as a stray: _upgrade_facts
            write_partition_metadata(pm, tid)
            rep.restamps.append(Restamp(f"{pd.name}/partition.metadata", "topic_id", None, tid))
            continue
        try:
            old = read_partition_metadata(pm).topic_id
        except KafkaLogError:
            continue  # a partition.metadata Kafka cannot read either: the broker's reaction is the evidence
        if old != tid:
            write_partition_metadata(pm, tid)
            rep.restamps.append(Restamp(f"{pd.name}/partition.metadata", "topic_id", old, tid))
    for name in (*DATA_DIR_CHECKPOINTS, CLEAN_SHUTDOWN_FILE):
        src, dst = orig / name, copy / name
        if src.exists():
            shutil.copyfile(src, dst)
        else:
            dst.unlink(missing_ok=True)
    mp = copy / "meta.properties"
    if mp.exists() and (orig / "meta.properties").exists():
        theirs = _try_meta(orig / "meta.properties")
        ours = read_meta_properties(mp)
        stamps: list[tuple[str, str | None, str | None]] = [
            ("cluster.id", theirs.cluster_id if theirs else None, ours.cluster_id),
            ("node.id", str(theirs.node_id) if theirs else None, str(ours.node_id)),
            ("directory.id", theirs.directory_id if theirs else None, ours.directory_id),
            ("version", str(theirs.version) if theirs else None, str(ours.version))]
        for key, original, restamped in stamps:
            if restamped is not None and original != restamped:
                rep.restamps.append(Restamp("meta.properties", key, original, restamped))
        write_meta_properties(mp, ours)


def _try_meta(p: Path) -> MetaProperties | None:
    try:
        return read_meta_properties(p)
    except KafkaLogError:
        return None


def _serve(broker: KafkaBroker, parts: list, rep: DirReport) -> None:
    """Consume every live partition with each client at each isolation level and compare with what kafkalog reads
    from the original files (:func:`_expected`). One partition at one isolation level is held at a time (the
    files' records and one client's), so the memory follows the largest partition, not the dir; the reading is
    timed as the ``expected`` phase, apart from ``consume``."""
    # (the enclosing "consume" timer adds this call's whole wall time: the reading is taken out of it here)
    rep.seconds["consume"] = rep.seconds.get("consume", 0.0) - _serve_partitions(broker, parts, rep)


def _serve_partitions(broker: KafkaBroker, parts: list, rep: DirReport) -> float:
    reading = 0.0
    for pd, tp in parts:
        res = PartitionResult(pd.name, internal=tp.topic.startswith("__"))
        rep.partitions.append(res)
        if res.internal or tp.kind != "live":
            continue
        if not (broker.data_dir / pd.name).is_dir():
            rep.divergences.append(Divergence(
                "load", pd.name, kafka="the partition dir is gone from the broker's data dir after loading",
                files="a live partition", rule=RULES["stray"], command=COMMANDS["stray"]))
            continue
        legacy = bool(_legacy_segments(pd))
        ends: dict[tuple[str, str], int | None] = {}
        for iso in ISOLATIONS:
            t0 = time.perf_counter()
            want = _expected(pd, iso)
            reading += time.perf_counter() - t0
            for client in CLIENTS:
                t0 = time.perf_counter()
                try:
                    got = _consume_partition(broker.bootstrap_servers, tp.topic, tp.partition, client, iso)
                except Exception as e:  # a client that cannot even start reading is evidence too
                    got = Served([], error=f"{type(e).__name__}: {e}")
                phase = "consumeKafkaPython" if client == "kafka-python" else "consumeLibrdkafka"
                rep.seconds[phase] = rep.seconds.get(phase, 0.0) + time.perf_counter() - t0
                res.served.append(ServedCount(client, iso, len(want.rows), len(got.rows)))
                ends[(client, iso)] = got.end
                for d in compare_served(pd.name, client, iso, want, got):
                    if d.kind == "files" and any(x.kind == "files" and x.partition == d.partition
                                                 for x in rep.divergences):
                        continue  # said once per partition
                    if legacy and d.command is None:  # a client that cannot read a legacy format
                        d.command = "kafkalog convert"
                    rep.divergences.append(d)
                del got  # (one client's records held at a time)
            del want
        _transactions(pd, ends.get(("kafka-python", "read_uncommitted")), ends.get(("kafka-python", "read_committed")),
                      rep)
    rep.seconds["expected"] = rep.seconds.get("expected", 0.0) + reading
    return reading


def _transactions(pd: Path, hw: int | None, lso: int | None, rep: DirReport) -> None:
    """An open transaction (no marker) in the files, or a last stable offset below the high watermark on the
    broker: either way read_committed consumers and the cleaner stop there until someone aborts it."""
    try:
        with PartitionLog(pd) as plog:
            files_open = open_transactions(plog, int(time.time() * 1000))
    except KafkaLogError:
        files_open = []
    kafka_open = hw is not None and lso is not None and lso < hw
    if not files_open and not kafka_open:
        return
    first = files_open[0] if files_open else None
    rep.divergences.append(Divergence(
        "transaction", pd.name, first_offset=first["firstOffset"] if first else lso,
        last_offset=first["lastOffset"] if first else None,
        kafka=(f"last stable offset {lso} below the high watermark {hw}: read_committed consumers (and the cleaner) "
               f"stop at {lso} until the transaction is aborted" if kafka_open else
               f"last stable offset = high watermark = {hw}: the broker knows no open transaction (its producer "
               "state did not come back at load)"),
        files=(", ".join(f"producer {t['producerId']} (epoch {t['producerEpoch']}) has an open transaction from "
                         f"offset {t['firstOffset']} to {t['lastOffset']}, no marker" for t in files_open)
               or "no open transaction"),
        rule="ProducerStateManager.firstUndecidedOffset / UnifiedLog.lastStableOffset (only a marker ends a "
             "transaction: the coordinator's, or kafka-transactions.sh abort)",
        command="kafkalog transactions (names it and prints the kafka-transactions.sh abort command)"))


def _after_stop(parts: list, copy: Path, rep: DirReport) -> None:
    """What the broker changed in the copy's partitions, file by file (after its clean stop): leader epoch entries
    it dropped, segments it deleted or truncated."""
    seen = {(e.partition, e.kind) for e in rep.events}
    for pd, tp in parts:
        c = copy / pd.name
        if tp.topic.startswith("__") or tp.kind != "live" or not c.is_dir() or (pd.name, "stray") in seen:
            continue  # a stray's files were renamed away: the broker's lines say what happened
        try:
            mine = read_leader_epoch_checkpoint(pd / "leader-epoch-checkpoint").entries \
                if (pd / "leader-epoch-checkpoint").exists() else []
            theirs = read_leader_epoch_checkpoint(c / "leader-epoch-checkpoint").entries \
                if (c / "leader-epoch-checkpoint").exists() else []
        except KafkaLogError:
            mine = theirs = []
        dropped = [(e.epoch, e.start_offset) for e in mine if e not in theirs]
        if dropped:
            rep.divergences.append(Divergence(
                "load", pd.name, file=str(pd / "leader-epoch-checkpoint"), first_offset=dropped[0][1],
                kafka=f"dropped leader epoch entries (epoch, start offset) {dropped} at load",
                files=f"leader-epoch-checkpoint holds {[(e.epoch, e.start_offset) for e in mine]}",
                rule="UnifiedLog.initializeLeaderEpochCache -> LeaderEpochFileCache.truncateFromEndAsyncFlush "
                     "(entries at or past the log end offset are removed)", command="kafkalog repair"))
        if (pd.name, "truncation") in seen or (pd.name, "deletion") in seen or (pd.name, "warning") in seen:
            continue
        for log in segment_log_files(pd):
            other = c / log.name
            size = log.stat().st_size
            if not other.exists():
                rep.divergences.append(Divergence(
                    "load", pd.name, file=str(log), kafka="deleted the segment at load",
                    files=f"a segment of {size} bytes", rule=RULES["deletion"], command="kafkalog repair"))
            elif other.stat().st_size < size:
                rep.divergences.append(Divergence(
                    "load", pd.name, file=str(log), position=other.stat().st_size,
                    kafka=f"truncated the segment to {other.stat().st_size} bytes at load",
                    files=f"a segment of {size} bytes", rule=RULES["truncation"], command="kafkalog repair"))


def _dump(orig: Path, parts: list, kafka: str, rep: DirReport) -> None:
    rule = "DumpLogSegments (--deep-iteration: FileRecords batches, ensureValid; --index-sanity-check: " \
           "OffsetIndex/TimeIndex.sanityCheck; --verify-index-only: each entry against the log)"
    files: list[Path] = []
    for pd, _tp in parts:
        for log in segment_log_files(pd):
            files.append(log)
            for ext in (".index", ".timeindex"):
                idx = log.with_suffix(ext)
                if idx.exists():
                    files.append(idx)
    if not files:
        return
    try:
        run = dump_log_segments(kafka, files, deep=True, print_data=False, index_sanity_check=True,
                                on_error="split")
    except ToolError as e:
        rep.divergences.append(Divergence("dump", None, kafka=f"DumpLogSegments failed: {str(e)[:500]}",
                                          files="segments Kafka's tool can read", rule=rule))
        return
    indexes = [f for f in files if f.suffix in (".index", ".timeindex")]
    legacy = {str(Path(p).resolve()) for pd, _tp in parts for p, _magic in _legacy_segments(pd)}
    checked = [(f, True) for f in run.files]  # (file, from the --index-sanity-check run)
    if indexes:  # the index entries against the log: where each points, whether timestamps go back
        try:
            checked += [(f, False) for f in dump_log_segments(kafka, indexes, deep=False, print_data=False,
                                                              verify_index_only=True, on_error="split").files]
        except ToolError as e:
            rep.divergences.append(Divergence("dump", None, kafka=f"DumpLogSegments --verify-index-only failed: "
                                              f"{str(e)[:500]}", files="indexes Kafka's tool reads", rule=rule))
    for f, sanity_run in checked:
        name = Path(f.path).parent.name
        if f.kind == "log" and sanity_run:
            rep.segments_dumped += 1
        problems: list[str] = []
        if f.error:
            problems.append(f"crashed: {f.error.strip().splitlines()[-1][:300] if f.error.strip() else 'no output'}")
        if f.invalid_bytes:
            problems.append(f"{f.invalid_bytes} invalid byte(s) at the end")
        back = [(a, b) for a, b in f.non_consecutive if a >= 0 and b <= a]  # gaps are normal (compaction)
        if back:
            problems.append(f"offsets that go back (previous, next): {back[:3]}")
        # in a v0/v1 segment, an entry at a message below its offset is how Kafka up to 2.8 indexed an append of
        # several messages (the append's last offset at its first message): OffsetIndex.lookup gives an earlier
        # position and the read scans forward, so there only an entry past its offset's message loses records
        wrong = f.index_mismatches
        if str(Path(f.path).with_suffix(".log").resolve()) in legacy:
            wrong = [(i, b) for i, b in wrong if b > i]
        if wrong:
            problems.append("--verify-index-only: entries (index offset, offset of the batch it points at) that "
                            f"disagree {wrong[:3]}")
        if f.timestamp_mismatches:
            problems.append(f"--verify-index-only: time index entries (index timestamp, log timestamp) that "
                            f"disagree {f.timestamp_mismatches[:3]}")
        if f.out_of_order_timestamps:
            problems.append(f"--verify-index-only: time index timestamps that go back (timestamp, previous) "
                            f"{f.out_of_order_timestamps[:3]}")
        if sanity_run and f.kind in ("index", "timeindex") and not (f.passed_sanity_check or f.empty) and not f.error:
            problems.append("did not pass --index-sanity-check")
        for p in problems:
            rep.divergences.append(Divergence("dump", name, file=f.path, kafka=f"DumpLogSegments: {p}",
                                              files="a segment and indexes Kafka's tool reads cleanly", rule=rule,
                                              command="kafkalog reindex" if f.kind != "log" else "kafkalog repair"))


def _verify(orig: Path, rep: DirReport) -> None:
    report = verify_paths([orig], deep=True, workers=1)
    for f in report.findings:
        if f.severity != "error":
            continue
        p = Path(f.file)
        part = p.name if p.is_dir() and p.parent == orig else p.parent.name if p.parent.parent == orig else None
        rep.divergences.append(Divergence("verify", part, file=f.file, position=f.position,
                                          kafka="kafkalog verify --deep (Kafka's loading rules): " + render(f),
                                          files=f"[{f.kind}] {render(f)}", rule=f"kafkalog verify [{f.kind}]",
                                          command="kafkalog doctor"))
