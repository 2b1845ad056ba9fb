"""Open and hanging transactions of data dirs (what ``kafkalog transactions`` prints).

The open transactions of a partition are those of the producer state a broker has after loading it
(:meth:`PartitionLog.producer_state <kafkalog.storage.log.partition.PartitionLog.producer_state>`: the latest producer
snapshot plus the batches after it, as ``ProducerStateManager`` rebuilds it); the earliest one is the first
unstable offset, which pins the last stable offset (what ``read_committed`` consumers and the log cleaner stop
at). Each is joined with the transaction coordinator's state read from the ``__transaction_state`` partitions
found in the same dirs (latest value per transactional id, as the coordinator loads it).

"Hanging" is ``kafka-transactions.sh find-hanging``'s rule (``TransactionsCommand.FindHangingTransactionsCommand``):
an open transaction is hanging when no transactional id currently has its producer id (``ListTransactions``
filtered on producer ids, ``Dead`` excluded), or when that transactional id's state (``DescribeTransactions``)
does not list the partition: the coordinator will then never write its marker. find-hanging also skips
transactions whose producer wrote less than ``--max-transaction-timeout`` minutes (15) ago, to avoid racing a
live producer; offline there is no race, so every open transaction is reported with its ``durationMs`` (now minus
the producer's last timestamp, find-hanging's ``Duration``) and callers filter if they want.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.decoders.transaction_state import (
    TRANSACTION_STATES,
    parse_transaction_key,
    parse_transaction_value,
)
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files.findings import Finding, note
from kafkalog.storage.io.fs import absolute, as_path
from kafkalog.storage.log.datadir import DataDir, check_topics, require_readable
from kafkalog.storage.log.dir_checkpoints import open_partition_log
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.paths import PARTITION_DIR
from kafkalog.storage.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from kafkalog.storage.parallel import run_partition_tasks

__all__ = ["TRANSACTION_STATE_TOPIC", "CoordinatorTxn", "TransactionReport", "abort_command",
           "find_transactions", "open_transactions", "read_transaction_state"]

TRANSACTION_STATE_TOPIC = "__transaction_state"
METADATA_TOPIC = "__cluster_metadata"
BOOTSTRAP_PLACEHOLDER = "BOOTSTRAP"
PARALLEL_FROM = 64  # partitions: below, a process pool costs more than it saves


@dataclass
class CoordinatorTxn:
    """The coordinator's latest ``TransactionLogValue`` of one transactional id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    partitions: set[tuple[str, int]]
    start_timestamp: int
    last_update_timestamp: int
    coordinator_partition: str  # the __transaction_state-N dir it was read from
    offset: int


@dataclass
class TransactionReport:
    """What :func:`find_transactions` found: the open transactions (dicts of the fields of
    ``docs/schemas/openTransaction.schema.json``; their ``reason`` a note, a code and its facts, which
    ``kafkalog.facts`` words), partitions that could not be read (``{dataDir, dir, error}``: ``error`` a note when a
    data partition's log cannot be read, ``transactions.partitionUnreadable`` or ``transactions.partitionOsError``,
    else the error's words), and the coordinator state."""

    transactions: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    coordinator: dict[str, CoordinatorTxn] = field(default_factory=dict)
    coordinator_partitions: list[int] = field(default_factory=list)
    coordinator_complete: bool = False
    partitions_scanned: int = 0

    @property
    def hanging(self) -> list[dict[str, Any]]:
        return [t for t in self.transactions if t["hanging"]]


def abort_command(topic: str, partition: int, start_offset: int, bootstrap: str = BOOTSTRAP_PLACEHOLDER) -> str:
    """The ``kafka-transactions.sh`` command that aborts the transaction starting at ``start_offset`` (brokers
    3.0+; the tool looks the producer id, epoch and coordinator epoch up with ``DescribeProducers``)."""
    return (f"kafka-transactions.sh --bootstrap-server {bootstrap} abort --topic {topic} --partition {partition} "
            f"--start-offset {start_offset}")


# ------------------------------------------------------------------------------------------- coordinator


def read_transaction_state(log: PartitionLog, into: dict[str, CoordinatorTxn] | None = None) -> dict[str, CoordinatorTxn]:
    """The latest value per transactional id of one ``__transaction_state`` partition, as the coordinator loads
    it (``TransactionStateManager.loadTransactionMetadata``: in offset order, a tombstone removes the id).
    Raises :class:`KafkaLogError` on a record it cannot decode (the coordinator fails to load it too)."""
    out: dict[str, CoordinatorTxn] = {} if into is None else into
    start = log.log_start_offset
    for _seg, b in log.iter_batches():
        if b.is_control or b.last_offset < start:
            continue
        for rec in b.records():
            if rec.offset < start or rec.key is None:
                continue
            try:
                _, tid = parse_transaction_key(rec.key)
                if tid is None:
                    continue
                parsed = parse_transaction_value(rec.value)
            except KafkaLogError as e:
                raise e.at(b.path, b.position) from None
            if parsed is None:
                out.pop(tid, None)
                continue
            data = parsed[1]
            status = data["transactionStatus"]
            state = TRANSACTION_STATES[status] if 0 <= status < len(TRANSACTION_STATES) else f"Unknown({status})"
            parts = {(p["topic"], pid) for p in data["transactionPartitions"] or () for pid in p["partitionIds"]}
            out[tid] = CoordinatorTxn(tid, data["producerId"], data["producerEpoch"], state,
                                      data["transactionTimeoutMs"], parts, data["transactionStartTimestampMs"],
                                      data["transactionLastUpdateTimestampMs"], log.path.name, rec.offset)
    return out


# -------------------------------------------------------------------------------------------- partitions


def _first_timestamp(log: PartitionLog, producer_id: int, first_offset: int) -> int | None:
    """Timestamp of the transaction's first batch (its first record's; the append time for LogAppendTime)."""
    if first_offset < log.log_start_offset:
        return None
    try:
        for _seg, b in log.iter_batches(first_offset):
            if b.base_offset == first_offset and b.magic >= 2 and b.producer_id == producer_id:
                return b.max_timestamp if b.timestamp_type == 1 else b.base_timestamp  # type: ignore[union-attr]
            if b.base_offset >= first_offset:
                return None
    except KafkaLogError:
        return None
    return None


def open_transactions(log: PartitionLog, now_ms: int,
                      expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> list[dict[str, Any]]:
    """The open transactions of one partition as the broker's ``ProducerStateManager`` has them after loading
    (``DescribeProducers``' ``currentTransactionStartOffset``), in first-offset order, without the coordinator
    columns: ``producerId``, ``producerEpoch``, ``coordinatorEpoch``, ``firstOffset``, ``lastOffset`` (the
    producer's last data offset), ``firstTimestamp``, ``lastTimestamp``, ``ageMs``, ``durationMs``,
    ``lastStableOffset``, ``blocksLso``, ``blocksCleaner``."""
    psm = log.producer_state(now_ms, expiration_ms)
    if not psm.ongoing_txns:
        return []
    fuo = psm.first_unstable_offset
    lso = log.last_stable_offset(now_ms, expiration_ms)
    active = log.active_segment
    out = []
    for first in sorted(psm.ongoing_txns):
        pid = psm.ongoing_txns[first]
        entry = psm.producers.get(pid)
        if entry is None:
            continue
        first_ts = _first_timestamp(log, pid, first)
        pins = first == fuo
        out.append({
            "producerId": pid,
            "producerEpoch": entry.producer_epoch,
            "coordinatorEpoch": entry.coordinator_epoch,
            "firstOffset": first,
            "lastOffset": entry.last_data_offset,
            "firstTimestamp": first_ts,
            "lastTimestamp": entry.last_timestamp,
            "ageMs": None if first_ts is None or first_ts < 0 else now_ms - first_ts,
            "durationMs": now_ms - entry.last_timestamp,
            "lastStableOffset": lso,
            "blocksLso": pins,
            # the cleaner's firstUncleanableDirtyOffset is min(LSO, active segment base): segments above the
            # transaction's start that are not active stay dirty until it ends (on a compacted topic: find_transactions
            # clears it for a topic whose cleanup.policy it knows has no compact)
            "blocksCleaner": pins and active is not None and first < active.base_offset,
        })
    return out


def _judge(txn: dict[str, Any], topic: str, partition: int, by_pid: dict[int, CoordinatorTxn],
           complete: bool, found_any: bool) -> None:
    c = by_pid.get(txn["producerId"])
    tp = f"{topic}-{partition}"
    txn["transactionalId"] = c.transactional_id if c else None
    txn["coordinatorState"] = c.state if c else None
    txn["coordinatorPartition"] = c.coordinator_partition if c else None
    txn["coordinatorProducerEpoch"] = c.producer_epoch if c else None
    txn["transactionTimeoutMs"] = c.timeout_ms if c else None
    txn["coordinatorStartTimestamp"] = c.start_timestamp if c else None
    if c is not None:
        if (topic, partition) in c.partitions:
            txn["hanging"] = False
            txn["status"] = "open"
            txn["reason"] = note(tp, "transactions.open", transactionalId=c.transactional_id, state=c.state,
                                 topic=topic, partition=partition, timeoutMs=c.timeout_ms)
        else:
            txn["hanging"] = True
            txn["status"] = "hanging"
            txn["reason"] = note(tp, "transactions.notListed", transactionalId=c.transactional_id, state=c.state,
                                 coordinatorPartition=c.coordinator_partition, topic=topic, partition=partition)
    elif complete:
        txn["hanging"] = True
        txn["status"] = "hanging"
        txn["reason"] = note(tp, "transactions.noTransactionalId", producerId=txn["producerId"])
    else:
        txn["hanging"] = None
        txn["status"] = "unknown"
        txn["reason"] = note(tp, "transactions.unknown", producerId=txn["producerId"], someFound=found_any)


# ----------------------------------------------------------------------------------------------- data dirs


def _partition_logs(paths: Iterable[str | os.PathLike]) -> Iterator[PartitionLog | dict[str, Any]]:
    """Live partition logs of the data dirs / partition dirs in ``paths`` (the metadata log excluded; a partition
    named twice once); a partition dir or data dir that cannot be read gives an error dict, a path that is
    neither is a :class:`~kafkalog.storage.log.paths.PathError` (the one path contract)."""
    seen: set[Path] = set()

    def first(log: PartitionLog) -> bool:
        key = log.path.resolve()
        if key in seen:
            log.close()
            return False
        seen.add(key)
        return True

    for k in [require_readable(raw) for raw in paths]:  # every path before any is opened (a URL: through the seam)
        p = k.path
        if k.kind == PARTITION_DIR:
            try:
                log = open_partition_log(p)
            except KafkaLogError as e:
                yield {"dataDir": str(p.parent), "dir": p.name, "error": str(e)}
                continue
            if first(log):
                yield log
            continue
        try:
            ddir = DataDir(p)
        except KafkaLogError as e:
            yield {"dataDir": str(p), "dir": None, "error": str(e)}
            continue
        for log in ddir.partitions(include_metadata=False):
            if log.dir_kind == "live" and first(log):
                yield log


def _partition_task(task: tuple) -> tuple[list[dict[str, Any]], Finding | None]:
    """One partition's open transactions (in a worker process): ``(transactions, error)``, the error a note about
    the partition dir: ``transactions.partitionUnreadable`` (the error's ``file``, byte ``position``, ``error`` and
    its ``errorKind``, the ``dataDir`` repair would be run on) or ``transactions.partitionOsError``."""
    path, log_start, recovery, hw, clean, now, expiration_ms = task
    try:
        with PartitionLog(path, log_start_offset_checkpoint=log_start, recovery_point=recovery, high_watermark=hw,
                          clean_point=clean) as log:
            return open_transactions(log, now, expiration_ms), None
    except KafkaLogError as e:
        return [], note(path, "transactions.partitionUnreadable", file=e.path, position=e.position, error=e.reason,
                        errorKind=type(e).__name__, dataDir=str(as_path(path).parent))
    except OSError as e:
        return [], note(path, "transactions.partitionOsError", file=str(e.filename or path), error=e.strerror or str(e))


def _compacted(resolver, log: PartitionLog) -> bool | None:
    """Is the topic compacted (the cleaner only cleans those)? Its effective ``cleanup.policy`` through the one
    config resolver; None when the data dirs hold no cluster metadata (a ZooKeeper-mode dir, or a KRaft log dir
    other than the metadata one): the topic's overrides are unknown, so an open transaction may hold the
    cleaner back."""
    try:
        if resolver.data_dir(log.path.parent).metadata is None:
            return None
        return bool(resolver.log_config(log.path.parent, log.topic).compact)
    except KafkaLogError:
        return None


def find_transactions(paths: Iterable[str | os.PathLike], *, now_ms: int | None = None,
                      expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                      transaction_state_partitions: int | None = None, topics: set[str] | None = None,
                      bootstrap: str = BOOTSTRAP_PLACEHOLDER, workers: int | None = None, on_total=None,
                      on_advance=None) -> TransactionReport:
    """``kafkalog transactions``: every open transaction of the partitions in ``paths`` (data dirs or partition
    dirs), joined with the coordinator state of the ``__transaction_state`` partitions among them.

    ``now_ms``: the time ages are measured at (default: the wall clock). ``transaction_state_partitions``:
    ``transaction.state.log.num.partitions`` (default: assume the ``__transaction_state`` partitions found are
    all of them when they are numbered 0..N-1 without a gap); when some are missing, an open transaction
    whose producer id is in none of those found is ``"unknown"`` rather than hanging. ``topics``: only these
    topics' partitions (a topic with no partition there is an error). ``on_total(n)`` is called once with the
    number of partitions, ``on_advance(n)`` as they are done. ``workers``: processes reading partitions at once
    (default: the CPU count from 64 partitions on, else 1)."""
    paths = list(paths)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    report = TransactionReport()
    logs: list[PartitionLog] = []
    for item in _partition_logs(paths):
        if isinstance(item, dict):
            report.errors.append(item)
        else:
            logs.append(item)
    try:
        check_topics(topics, {log.topic for log in logs}, ", ".join(str(p) for p in paths))
        if on_total is not None:
            on_total(len(logs))
        seen: set[int] = set()
        for log in logs:
            if log.topic != TRANSACTION_STATE_TOPIC or log.partition in seen:
                continue
            try:
                read_transaction_state(log, report.coordinator)
                seen.add(log.partition)
            except KafkaLogError as e:
                report.errors.append({"dataDir": str(log.path.parent), "dir": log.path.name, "error": str(e)})
        report.coordinator_partitions = sorted(seen)
        if transaction_state_partitions is not None:
            report.coordinator_complete = seen >= set(range(transaction_state_partitions))
        else:
            report.coordinator_complete = bool(seen) and seen == set(range(max(seen) + 1))
        by_pid = {c.producer_id: c for c in report.coordinator.values() if c.state != "Dead"}
        data_logs = [log for log in logs if log.topic != TRANSACTION_STATE_TOPIC
                     and (topics is not None and log.topic in topics or topics is None)]
        if on_advance is not None and len(logs) > len(data_logs):
            on_advance(len(logs) - len(data_logs))
        tasks = [(log.path, log.log_start_offset_checkpoint, log.recovery_point, log.high_watermark_checkpoint,
                  log.clean_point, now, expiration_ms) for log in data_logs]
        for log in data_logs:  # the workers open their own
            log.close()
        n = workers if workers is not None else (os.cpu_count() or 1) if len(tasks) >= PARALLEL_FROM else 1
        results = run_partition_tasks(_partition_task, tasks, workers=n, threads=1, progress=on_advance)
        report.partitions_scanned = len(data_logs)

        resolver = ConfigResolver(data_dirs=sorted({absolute(log.path.parent) for log in data_logs}, key=str))
        for log, (txns, error) in zip(data_logs, results, strict=True):
            if error is not None:
                report.errors.append({"dataDir": str(log.path.parent), "dir": log.path.name, "error": error})
            compacted = _compacted(resolver, log)
            for t in txns:
                t["blocksCleaner"] = t["blocksCleaner"] and compacted is not False
                _judge(t, log.topic, log.partition, by_pid, report.coordinator_complete, bool(seen))
                report.transactions.append({
                    "dataDir": str(log.path.parent), "dir": log.path.name, "topic": log.topic,
                    "partition": log.partition, **t,
                    "abortCommand": abort_command(log.topic, log.partition, t["firstOffset"], bootstrap)})
    finally:
        for log in logs:
            log.close()
    return report
