"""Produce, consume and administer through real Kafka clients: kafka-python and confluent-kafka (librdkafka).

Batch boundaries are made deterministic: records are buffered with a long linger and each ``flush_every``
records are flushed as one produce request, so one flush = one batch per partition (unless a batch exceeds
the producer's batch size, which callers keep below 1 MiB).
"""

from __future__ import annotations

import base64
import dataclasses
import time
import uuid
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kafkalog.compat.errors import HarnessError
from kafkalog.storage.io.closing import Closing

Client = Literal["kafka-python", "confluent"]
CLIENTS: tuple[Client, ...] = ("kafka-python", "confluent")
Codec = Literal["none", "gzip", "snappy", "lz4", "zstd"]
CODECS: tuple[Codec, ...] = ("none", "gzip", "snappy", "lz4", "zstd")

Header = tuple[str, bytes | None]


def confluent_headers(headers: Mapping[str, str | bytes | None] | Sequence[tuple[str, str | bytes | None]] | None
                      ) -> tuple[Header, ...]:
    """A confluent-kafka message's headers as Header pairs. A consumer hands back a list of (key, bytes) pairs;
    confluent-kafka types headers as a producer may pass them (a dict, str values), so those are accepted too."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers or ()
    return tuple((k, v.encode() if isinstance(v, str) else v) for k, v in pairs)


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


@dataclass(frozen=True)
class Record:
    """What a producer sends. ``timestamp`` None = the client's clock; ``partition`` None = the partitioner."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None
    partition: int | None = None


@dataclass(frozen=True)
class Produced:
    """An acknowledged record.

    ``create_timestamp`` is what the producer set (None: the client's clock), ``timestamp`` what the broker
    acknowledged (the broker's clock for LogAppendTime topics, -1/None where the format has no timestamp).
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp: int | None
    client: Client
    codec: Codec = "none"
    create_timestamp: int | None = None
    transaction: Literal["committed", "aborted"] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "key": b64(self.key),
            "value": b64(self.value),
            "headers": [[k, b64(v)] for k, v in self.headers],
            "timestamp": self.create_timestamp,
            "ackTimestamp": self.timestamp,
            "client": self.client,
            "codec": self.codec,
            "transaction": self.transaction,
        }


@dataclass(frozen=True)
class Consumed:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = field(default=())
    timestamp: int | None = None
    timestamp_type: str | None = None


# --------------------------------------------------------------------------- admin


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def create_topic(
    bootstrap: str,
    name: str,
    *,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> None:
    """Create a topic (replication factor 1) and wait until every partition has a leader."""
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config or {}))
    try:
        admin.create_topics([topic], request_timeout=timeout)[name].result(timeout)
    except Exception as exc:
        raise HarnessError(f"cannot create topic {name!r}: {exc}") from exc
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=name, timeout=5).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            if all(p.leader >= 0 for p in md.partitions.values()):
                return
        time.sleep(0.2)
    raise HarnessError(f"topic {name!r} has no leader after {timeout:.0f}s")


def alter_topic_config(bootstrap: str, name: str, config: Mapping[str, str], timeout: float = 30.0) -> None:
    """Set topic config overrides (incremental SET; others untouched)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in config.items()]
    resource = ConfigResource("topic", name, incremental_configs=entries)
    admin = _admin(bootstrap)  # must outlive the futures
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout)


def topic_config(bootstrap: str, name: str, timeout: float = 30.0) -> dict[str, str]:
    from confluent_kafka.admin import ConfigResource

    admin = _admin(bootstrap)  # must outlive the futures
    futures = admin.describe_configs([ConfigResource("topic", name)])
    (result,) = (f.result(timeout) for f in futures.values())
    return {k: v.value for k, v in result.items()}


# --------------------------------------------------------------------------- producers


class ClientProducer(Closing):
    """One producer of either client; use as a context manager."""

    client: Client

    def __init__(self, bootstrap: str, *, compression: Codec = "none", idempotent: bool = False,
                 transactional_id: str | None = None, extra: Mapping[str, Any] | None = None) -> None:
        """The harness's producer: 5 s linger and 1 MiB batches (a flush of :meth:`send_all` makes one batch per
        partition), 4 MiB requests, acks from all replicas, idempotent when asked or transactional; ``extra``
        (in the client's own setting names) on top."""
        if compression not in CODECS:
            raise ValueError(f"unknown codec {compression!r}")
        self.bootstrap = bootstrap
        self.compression = compression
        self.idempotent = idempotent or transactional_id is not None
        self.transactional_id = transactional_id
        self._p: Any = self._open(self._settings() | dict(extra or {}))

    @abstractmethod
    def _settings(self) -> dict[str, Any]:
        """The harness's producer settings (see ``__init__``) in the client's names."""

    @abstractmethod
    def _open(self, conf: dict[str, Any]) -> Any:
        """The client's producer with ``conf``, its transactions initialised when it has a transactional id."""

    @abstractmethod
    def send_all(self, topic: str, records: Sequence[Record], timeout: float) -> list[Produced]:
        """Send ``records`` as one flush (one batch per partition) and wait for every acknowledgement."""

    @abstractmethod
    def begin(self) -> None: ...

    @abstractmethod
    def commit(self) -> None: ...

    @abstractmethod
    def abort(self) -> None: ...

    @abstractmethod
    def abandon(self) -> None:
        """Drop the producer without flushing or waiting (its broker may be gone)."""


class KafkaPythonProducer(ClientProducer):
    client: Client = "kafka-python"

    def _settings(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "compression_type": None if self.compression == "none" else self.compression,
            "linger_ms": 5000,
            "batch_size": 1024 * 1024,
            "max_request_size": 4 * 1024 * 1024,
            "acks": -1,
            "enable_idempotence": self.idempotent,
        }
        if self.transactional_id is not None:
            conf["transactional_id"] = self.transactional_id
        return conf

    def _open(self, conf: dict[str, Any]) -> Any:
        from kafka import KafkaProducer

        p = KafkaProducer(**conf)
        if self.transactional_id is not None:
            p.init_transactions()
        return p

    def send_all(self, topic: str, records: Sequence[Record], timeout: float = 60.0) -> list[Produced]:
        futures = [
            self._p.send(
                topic, value=r.value, key=r.key, headers=list(r.headers) or None,
                partition=r.partition, timestamp_ms=r.timestamp,
            )
            for r in records
        ]  # fmt: skip
        self._p.flush(timeout)
        out = []
        for r, f in zip(records, futures, strict=True):
            md = f.get(timeout)
            out.append(Produced(topic, md.partition, md.offset, r.key, r.value, r.headers, md.timestamp,
                                self.client, self.compression, r.timestamp))
        return out

    def begin(self) -> None:
        self._p.begin_transaction()

    def commit(self) -> None:
        self._p.commit_transaction()

    def abort(self) -> None:
        self._p.abort_transaction()

    def close(self) -> None:
        self._p.close(timeout=30)

    def abandon(self) -> None:
        self._p.close(timeout=0)


class ConfluentProducer(ClientProducer):
    client: Client = "confluent"

    def _settings(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "compression.type": self.compression,
            "linger.ms": 5000,
            "batch.size": 1024 * 1024,
            "batch.num.messages": 100000,
            "message.max.bytes": 4 * 1024 * 1024,
            "acks": "all",
            "enable.idempotence": self.idempotent,
            "log_level": 3,
        }
        if self.transactional_id is not None:
            conf["transactional.id"] = self.transactional_id
        return conf

    def _open(self, conf: dict[str, Any]) -> Any:
        from confluent_kafka import Producer

        p = Producer(conf)
        if self.transactional_id is not None:
            p.init_transactions(60)
        return p

    def send_all(self, topic: str, records: Sequence[Record], timeout: float = 60.0) -> list[Produced]:
        from confluent_kafka import TIMESTAMP_NOT_AVAILABLE

        results: list[Any] = [None] * len(records)
        errors: list[str] = []

        def report(i: int) -> Any:
            def cb(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(str(err))
                else:
                    results[i] = msg

            return cb

        for i, r in enumerate(records):
            kwargs: dict[str, Any] = {"value": r.value, "key": r.key, "on_delivery": report(i)}
            if r.headers:
                kwargs["headers"] = list(r.headers)
            if r.partition is not None:
                kwargs["partition"] = r.partition
            if r.timestamp is not None:
                kwargs["timestamp"] = r.timestamp
            self._p.produce(topic, **kwargs)
        left = self._p.flush(timeout)
        if errors or left:
            raise HarnessError(f"confluent producer to {topic!r}: {left} undelivered, errors: {errors[:3]}")
        out = []
        for r, msg in zip(records, results, strict=True):
            ts_type, ts = msg.timestamp()
            timestamp = None if ts_type == TIMESTAMP_NOT_AVAILABLE else ts
            out.append(Produced(topic, msg.partition(), msg.offset(), r.key, r.value, r.headers, timestamp,
                                self.client, self.compression, r.timestamp))
        return out

    def begin(self) -> None:
        self._p.begin_transaction()

    def commit(self) -> None:
        self._p.commit_transaction(60)

    def abort(self) -> None:
        self._p.abort_transaction(60)

    def close(self) -> None:
        self._p.flush(30)

    def abandon(self) -> None:
        self._p.purge()
        del self._p


def producer(
    bootstrap: str,
    client: Client = "kafka-python",
    *,
    compression: Codec = "none",
    idempotent: bool = False,
    transactional_id: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> ClientProducer:
    if client == "kafka-python":
        return KafkaPythonProducer(bootstrap, compression=compression, idempotent=idempotent,
                                   transactional_id=transactional_id, extra=extra)  # fmt: skip
    if client == "confluent":
        return ConfluentProducer(bootstrap, compression=compression, idempotent=idempotent,
                                 transactional_id=transactional_id, extra=extra)  # fmt: skip
    raise ValueError(f"client must be one of {CLIENTS}, not {client!r}")


def chunks(records: Sequence[Record], size: int | None) -> Iterable[Sequence[Record]]:
    """``records`` in slices of ``size`` (None: all at once): one slice per flush."""
    size = size or max(1, len(records))
    for i in range(0, len(records), size):
        yield records[i : i + size]


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[Record],
    *,
    client: Client = "kafka-python",
    compression: Codec = "none",
    flush_every: int | None = None,
    idempotent: bool = False,
    transactional_id: str | None = None,
    transaction: Literal["commit", "abort"] = "commit",
    extra: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
) -> list[Produced]:
    """Send ``records`` in flushes of ``flush_every`` (one batch per flush and partition).

    With ``transactional_id`` all flushes form one transaction, committed or aborted per ``transaction``.
    """
    with producer(bootstrap, client, compression=compression, idempotent=idempotent,
                  transactional_id=transactional_id, extra=extra) as p:  # fmt: skip
        if transactional_id is None:
            return [r for chunk in chunks(records, flush_every) for r in p.send_all(topic, chunk, timeout)]
        p.begin()
        sent = [r for chunk in chunks(records, flush_every) for r in p.send_all(topic, chunk, timeout)]
        if transaction == "commit":
            p.commit()
            state: Literal["committed", "aborted"] = "committed"
        else:
            p.abort()
            state = "aborted"
        return [dataclasses.replace(s, transaction=state) for s in sent]


# --------------------------------------------------------------------------- consumers


def consume(
    bootstrap: str,
    topic: str,
    *,
    client: Client = "kafka-python",
    count: int | None = None,
    group_id: str | None = None,
    commit: bool = False,
    isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted",
    group_protocol: Literal["classic", "consumer"] = "classic",
    timeout: float = 30.0,
    idle: float = 3.0,
) -> list[Consumed]:
    """Read ``topic`` from the beginning: until ``count`` records arrived, or nothing came for ``idle`` s.

    With ``group_id`` the consumer subscribes as a group member (classic or KIP-848 ``consumer`` protocol,
    the latter confluent-only) and, with ``commit``, commits the consumed positions synchronously.
    Without it, all partitions are assigned manually and nothing is committed.
    """
    if commit and group_id is None:
        raise ValueError("commit needs a group_id")
    if client == "kafka-python":
        if group_protocol != "classic":
            raise ValueError("kafka-python only speaks the classic group protocol")
        return _consume_kafka_python(bootstrap, topic, count, group_id, commit, isolation_level, timeout, idle)
    if client == "confluent":
        return _consume_confluent(bootstrap, topic, count, group_id, commit, isolation_level, group_protocol, timeout, idle)
    raise ValueError(f"client must be one of {CLIENTS}, not {client!r}")


def _wait_for(get_partitions: Any, topic: str, timeout: float) -> set[int]:
    """Partitions of ``topic`` once the client's metadata knows them (right after a broker restart it may not)."""
    deadline = time.monotonic() + timeout
    while True:
        parts = get_partitions()
        if parts:
            return set(parts)
        if time.monotonic() > deadline:
            raise HarnessError(f"topic {topic!r} has no partitions in the metadata after {timeout:.0f}s")
        time.sleep(0.3)


class _Polling:
    """When a consume loop stops: ``count`` records read, or the ``timeout`` passed (an error when ``count`` was
    not reached), or, reading everything (``count`` None), nothing new for ``idle`` seconds once the consumer has
    partitions (``started``: at once when they were assigned, not subscribed)."""

    def __init__(self, count: int | None, timeout: float, idle: float, started: bool) -> None:
        self.count, self.idle, self.started = count, idle, started
        self.deadline = time.monotonic() + timeout
        self.last = time.monotonic()  # the last progress

    def progress(self) -> None:
        self.last = time.monotonic()

    def done(self, got: int) -> bool:
        now = time.monotonic()
        if self.count is not None and got >= self.count:
            return True
        if now > self.deadline:
            if self.count is not None:
                raise HarnessError(f"consumed {got} of {self.count} records before the timeout")
            return True
        return self.count is None and self.started and now - self.last > self.idle


def _consume_kafka_python(
    bootstrap: str, topic: str, count: int | None, group_id: str | None, commit: bool,
    isolation_level: str, timeout: float, idle: float,
) -> list[Consumed]:  # fmt: skip
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group_id, auto_offset_reset="earliest", enable_auto_commit=False,
        isolation_level=isolation_level,
    )  # fmt: skip
    out: list[Consumed] = []
    try:
        if group_id is None:
            parts = _wait_for(lambda: consumer.partitions_for_topic(topic), topic, timeout)
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
        else:
            consumer.subscribe([topic])
        polling = _Polling(count, timeout, idle, started=group_id is None)
        while not polling.done(len(out)):
            polled = consumer.poll(timeout_ms=500)
            if consumer.assignment():
                polling.started = True
            for recs in polled.values():
                for m in recs:
                    ts_type = {0: "CreateTime", 1: "LogAppendTime"}.get(m.timestamp_type)
                    headers = tuple((k, v) for k, v in (m.headers or []))
                    out.append(Consumed(m.topic, m.partition, m.offset, m.key, m.value, headers, m.timestamp, ts_type))
                polling.progress()
        if commit:
            consumer.commit()
    finally:
        consumer.close()
    return out


def _consume_confluent(
    bootstrap: str, topic: str, count: int | None, group_id: str | None, commit: bool,
    isolation_level: str, group_protocol: str, timeout: float, idle: float,
) -> list[Consumed]:  # fmt: skip
    from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer
    from confluent_kafka import TopicPartition as TP

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group_id or f"kafkalog-{uuid.uuid4().hex}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": isolation_level,
        "log_level": 3,
    }
    if group_protocol == "consumer":
        conf["group.protocol"] = "consumer"
    consumer = Consumer(conf)
    out: list[Consumed] = []
    ts_types = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}
    try:
        if group_id is None:

            def partitions() -> set[int] | None:
                md = consumer.list_topics(topic, timeout=10).topics.get(topic)
                return None if md is None or md.error is not None else set(md.partitions)

            parts = _wait_for(partitions, topic, timeout)
            consumer.assign([TP(topic, p, OFFSET_BEGINNING) for p in sorted(parts)])
        else:
            consumer.subscribe([topic])
        polling = _Polling(count, timeout, idle, started=group_id is None)
        while not polling.done(len(out)):
            m = consumer.poll(0.5)
            if not polling.started and consumer.assignment():
                polling.started = True
                polling.progress()
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == -191:  # _PARTITION_EOF (only with enable.partition.eof)
                    continue
                raise HarnessError(f"confluent consumer on {topic!r}: {err}")
            m_topic, m_partition, m_offset = m.topic(), m.partition(), m.offset()
            if m_topic is None or m_partition is None or m_offset is None:
                raise HarnessError(f"confluent consumer on {topic!r}: a record without topic, partition or offset")
            ts_type, ts = m.timestamp()
            out.append(Consumed(m_topic, m_partition, m_offset, m.key(), m.value(), confluent_headers(m.headers()), ts,
                                ts_types.get(ts_type)))
            polling.progress()
        if commit and out:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return out
