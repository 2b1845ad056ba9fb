"""Capture small, real Kafka data directories as test fixtures.

    python -m kafkalog.compat.capture --out fixtures/                 # every fixture
    python -m kafkalog.compat.capture --out fixtures/ --only kafka-4.3.1-kraft
    python -m kafkalog.compat.capture --list

Each fixture ``<out>/<name>/`` holds:

* ``data/``            the broker's log dir exactly as the broker left it (after a clean shutdown, or SIGKILL
                       for ``*-killed``), copied byte for byte;
* ``expected.jsonl``   one line per acknowledged record, in produce order: topic, partition, offset, key, value
                       (base64 or null), headers ([name, base64|null]), timestamp (what the producer set),
                       ackTimestamp (what the broker acknowledged), client, codec, transaction;
* ``dumplogsegments.jsonl``  Kafka's own DumpLogSegments view of every .log file (deep, parsed by
                       :mod:`kafkalog.compat.tools`), so readers can be checked without a JVM;
* ``manifest.json``    Kafka version, mode, broker settings, topics with their configs, groups, notes;
* ``remote/``          (tiered fixtures) the ``dir`` of Kafka's ``LocalTieredStorage``: ``remote/kafka-tiered-storage/
                       <topic>-<partition>-<topicId>/<offset>-<segmentId>.{log,index,...}`` (:mod:`kafkalog.compat.tiered`);
* ``dumplogsegments-<decoder>.txt``  DumpLogSegments' text with ``--<decoder>`` for the internal topics it decodes
                       (``remote-log-metadata-decoder`` for ``__remote_log_metadata``, ``share-group-state-decoder``
                       for ``__share_group_state``), paths relative to ``data/``;
* ``CAPTURE.md``       how it was made.

Record content is deterministic (seeded per topic name) and timestamps are fixed (CreateTime topics), so
re-capturing gives the same keys/values/offsets; LogAppendTime values and internal topics differ per run.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime
import hashlib
import json
import platform
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kafkalog.compat import jars
from kafkalog.compat.broker import LEGACY_V0_PROPS, LEGACY_V1_PROPS, Broker, Mode, cluster_id_from
from kafkalog.compat.clients import (
    Client,
    ClientProducer,
    Codec,
    Produced,
    Record,
    alter_topic_config,
    chunks,
    consume,
    create_topic,
    producer,
)
from kafkalog.compat.errors import HarnessError
from kafkalog.compat.tools import dump_log_segments

#: 2025-06-15T15:06:40Z: fixed CreateTime base (retention and time-based rolling are disabled below).
TS_BASE = 1_750_000_000_000
SMALL_SEGMENT = 8 * 1024
#: keys/values longer than this are written to the .jsonl files as {"sha256": hex, "length": n}
INLINE_LIMIT = 4096

#: Broker settings shared by every fixture (on top of the harness defaults in kafkalog.compat.broker).
CAPTURE_PROPS: dict[str, str] = {
    "log.retention.ms": "-1",  # fixed 2025 timestamps must not expire
    "log.roll.ms": str(10 * 365 * 24 * 3600 * 1000),  # nor roll a segment per batch
    "log.index.size.max.bytes": "4096",  # preallocated indexes of killed brokers stay small
    "log.cleaner.backoff.ms": "500",
    "log.cleaner.min.cleanable.ratio": "0.01",
}
KRAFT_PROPS: dict[str, str] = {
    # get a KRaft snapshot (<offset>-<epoch>.checkpoint) into __cluster_metadata-0
    "metadata.log.max.record.bytes.between.snapshots": "4096",
    "metadata.log.max.snapshot.interval.ms": "3000",
}

#: Tiered fixture: one __remote_log_metadata and one __share_group_state partition, and a share-group snapshot
#: every 3 updates (so both ShareSnapshot and ShareUpdate records appear).
TIERED_PROPS: dict[str, str] = {
    "share.coordinator.state.topic.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.snapshot.update.records.per.snapshot": "3",
}

#: internal topics DumpLogSegments has a decoder for, beyond those of dumplogsegments.jsonl
DECODED_TOPICS: dict[str, str] = {"__remote_log_metadata": "remote-log-metadata-decoder",
                                  "__share_group_state": "share-group-state-decoder"}

WORDS = (
    "kafka log segment offset index batch record header producer consumer partition leader epoch "
    "replica cleaner compaction tombstone timestamp sequence transaction marker snapshot checkpoint"
).split()


@dataclass(frozen=True)
class FixtureSpec:
    name: str
    version: str
    mode: Mode
    magic: int  # message format the data topics get
    killed: bool = False
    scenarios: tuple[str, ...] = ()
    props: dict[str, str] = field(default_factory=dict)
    description: str = ""
    tiered: bool = False  # LocalTieredStorage + TopicBasedRemoteLogMetadataManager (kafkalog.compat.tiered)


V2_SCENARIOS = ("codecs", "large", "idempotent", "transactions", "log_append_time", "broker_compression",
                "compacted", "multi_segment", "groups")  # fmt: skip
LEGACY_SCENARIOS = ("codecs", "large", "log_append_time", "broker_compression", "compacted", "multi_segment", "groups")

FIXTURES: dict[str, FixtureSpec] = {
    s.name: s
    for s in (
        FixtureSpec(f"kafka-{jars.LATEST_4}-kraft", jars.LATEST_4, "kraft", 2, scenarios=V2_SCENARIOS,
                    description="newest 4.x, KRaft combined mode, clean shutdown"),
        FixtureSpec(f"kafka-{jars.LATEST_4}-kraft-killed", jars.LATEST_4, "kraft", 2, killed=True,
                    scenarios=("killed",), description="newest 4.x, SIGKILLed with an open transaction"),
        FixtureSpec(f"kafka-{jars.LATEST_4}-tiered", jars.LATEST_4, "kraft", 2, scenarios=("tiered", "share_groups"),
                    tiered=True, props=TIERED_PROPS,
                    description="newest 4.x, tiered storage (LocalTieredStorage, __remote_log_metadata) and share "
                                "groups (__share_group_state), clean shutdown"),
        FixtureSpec(f"kafka-{jars.LATEST_3}-kraft", jars.LATEST_3, "kraft", 2, scenarios=V2_SCENARIOS,
                    description="newest 3.9.x, KRaft combined mode, clean shutdown"),
        FixtureSpec(f"kafka-{jars.LATEST_3}-zk-v1", jars.LATEST_3, "zk", 1,
                    scenarios=(*LEGACY_SCENARIOS, "mixed_formats"), props=LEGACY_V1_PROPS,
                    description="3.9.x ZooKeeper mode, IBP 2.8, message format v1 (0.10.0); "
                                "plus a partition upgraded v0 -> v1 -> v2"),
        FixtureSpec(f"kafka-{jars.LATEST_3}-zk-v0", jars.LATEST_3, "zk", 0,
                    scenarios=tuple(s for s in LEGACY_SCENARIOS if s != "log_append_time"), props=LEGACY_V0_PROPS,
                    description="3.9.x ZooKeeper mode, IBP 2.8, message format v0 (0.9.0)"),
        FixtureSpec(f"kafka-{jars.LATEST_2}-zk-v1", jars.LATEST_2, "zk", 1, scenarios=LEGACY_SCENARIOS,
                    props=LEGACY_V1_PROPS, description="2.8.x ZooKeeper mode, message format v1 (0.10.0)"),
        FixtureSpec(f"kafka-{jars.LATEST_2}-zk-v0", jars.LATEST_2, "zk", 0,
                    scenarios=tuple(s for s in LEGACY_SCENARIOS if s != "log_append_time"), props=LEGACY_V0_PROPS,
                    description="2.8.x ZooKeeper mode, message format v0 (0.9.0)"),
    )
}  # fmt: skip


# --------------------------------------------------------------------------- deterministic content


def make_records(
    seed: str,
    n: int,
    *,
    partitions: int = 1,
    headers: bool = True,
    ts_base: int = TS_BASE,
    timestamps: bool = True,
    value_size: tuple[int, int] = (8, 240),
) -> list[Record]:
    """``n`` records for topic ``seed``: keys, null keys, tombstones, empty values, headers (incl. a null
    header value and a non-ASCII name), compressible text with some random bytes, timestamps that mostly
    grow but step back every 7th record (so time indexes see non-monotonic data)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key: bytes | None = None if i % 9 == 4 else b"key-%03d" % rng.randrange(40)
        value: bytes | None
        if key is not None and i % 11 == 7:
            value = None  # tombstone
        elif i % 13 == 5:
            value = b""
        else:
            size = rng.randrange(*value_size)
            text = " ".join(rng.choice(WORDS) for _ in range(size // 6 + 1)).encode()[:size]
            value = text + (rng.randbytes(16) if i % 5 == 0 else b"")
        hdrs: tuple[tuple[str, bytes | None], ...] = ()
        if headers:
            hdrs = ((), (("trace-id", b"t-%d" % i),), (("a", b"1"), ("null-value", None), ("schlüssel", b"\x00\xff")))[i % 3]
        ts = ts_base + i * 1000 - (5500 if i % 7 == 6 else 0)
        out.append(Record(value, key, hdrs, ts if timestamps else None, i % partitions))
    return out


# --------------------------------------------------------------------------- capture context


class Capture:
    """Holds the running broker and what was produced; scenarios call its helpers."""

    def __init__(self, spec: FixtureSpec, broker: Broker, log: Callable[[str], None]) -> None:
        self.spec = spec
        self.broker = broker
        self.bootstrap = broker.bootstrap_servers
        self.produced: list[Produced] = []
        self.topics: dict[str, dict[str, Any]] = {}
        self.groups: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.open_producers: list[ClientProducer] = []  # left open on purpose until the broker is killed
        self.log = log
        self.remote_root = broker.work_dir / "remote"

    @property
    def v2(self) -> bool:
        return self.spec.magic >= 2

    def topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None, *,
              segment_bytes: int | None = None, purpose: str = "") -> None:  # fmt: skip
        config = dict(config or {})
        if segment_bytes is not None:
            config["segment.index.bytes"] = "4096"
            # Kafka 4.1+ refuses segment.bytes < 1 MiB; internal.segment.bytes is its test escape hatch
            key = "internal.segment.bytes" if jars.parse_version(self.spec.version) >= (4, 1) else "segment.bytes"
            config[key] = str(segment_bytes)
        create_topic(self.bootstrap, name, partitions=partitions, config=config)
        self.topics[name] = {"partitions": partitions, "config": config, "purpose": purpose}

    def send(self, topic: str, records: Sequence[Record], *, client: Client = "kafka-python", codec: Codec = "none",
             flush_every: int | None = 10, idempotent: bool = False) -> list[Produced]:  # fmt: skip
        if client == "kafka-python":
            records = [_no_null_header_values(r) for r in records]
        with producer(self.bootstrap, client, compression=codec, idempotent=idempotent) as p:
            sent = [r for chunk in chunks(records, flush_every) for r in p.send_all(topic, chunk, 60)]
        self.produced += sent
        return sent

    def transaction(self, topic: str, records: Sequence[Record], *, commit: bool, client: Client = "confluent",
                    codec: Codec = "none", txid: str, flush_every: int | None = None) -> list[Produced]:  # fmt: skip
        if client == "kafka-python":
            records = [_no_null_header_values(r) for r in records]
        with producer(self.bootstrap, client, compression=codec, transactional_id=txid) as p:
            p.begin()
            sent = [r for chunk in chunks(records, flush_every) for r in p.send_all(topic, chunk, 60)]
            p.commit() if commit else p.abort()
        sent = [dataclasses.replace(s, transaction="committed" if commit else "aborted") for s in sent]
        self.produced += sent
        return sent

    def group(self, name: str, topic: str, *, client: Client, protocol: Literal["classic", "consumer"] = "classic") -> None:
        expected = sum(1 for p in self.produced if p.topic == topic and p.transaction != "aborted")
        got = consume(self.bootstrap, topic, client=client, group_id=name, commit=True,
                      isolation_level="read_committed", group_protocol=protocol, count=expected, timeout=60)  # fmt: skip
        self.groups.append({"group": name, "topic": topic, "client": client, "protocol": protocol, "consumed": len(got)})

    def partition_logs(self, topic: str, partition: int = 0) -> list[Path]:
        return sorted(self.broker.partition_dir(topic, partition).glob("*.log"))

    def wait_cleaned(self, topic: str, partition: int = 0, timeout: float = 90.0) -> int:
        """Wait until the cleaner checkpointed ``topic-partition`` up to the active segment's base offset."""
        ckpt = self.broker.data_dir / "cleaner-offset-checkpoint"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            active = int(self.partition_logs(topic, partition)[-1].stem)
            if ckpt.exists():
                for line in ckpt.read_text().splitlines()[2:]:
                    parts = line.split()
                    if len(parts) == 3 and parts[0] == topic and int(parts[1]) == partition and int(parts[2]) >= active:
                        return int(parts[2])
            time.sleep(0.5)
        raise HarnessError(f"the log cleaner did not clean {topic}-{partition} within {timeout:.0f}s")


def _no_null_header_values(r: Record) -> Record:
    """kafka-python cannot send a null header value: it sends an empty one instead (recorded as such)."""
    if any(v is None for _, v in r.headers):
        return dataclasses.replace(r, headers=tuple((k, b"" if v is None else v) for k, v in r.headers))
    return r


# --------------------------------------------------------------------------- scenarios


def scenario_codecs(c: Capture) -> None:
    codecs: tuple[Codec, ...] = ("none", "gzip", "snappy", "lz4", "zstd") if c.v2 else ("none", "gzip", "snappy", "lz4")
    for codec in codecs:
        name = f"codec-{codec}"
        c.topic(name, 1, purpose=f"{codec} batches from both clients; keys, null keys, tombstones, empty values"
                + (", headers" if c.v2 else ""))  # fmt: skip
        recs = make_records(name, 60, headers=c.v2)
        c.send(name, recs[:30], client="kafka-python", codec=codec, flush_every=10)
        c.send(name, recs[30:], client="confluent", codec=codec, flush_every=10)


def scenario_large(c: Capture) -> None:
    c.topic("large", 1, purpose="a few large records (40 KiB random, 200 KiB gzip text, 24 KiB random, null key)")
    rng = random.Random("large")
    text = (" ".join(rng.choice(WORDS) for _ in range(50000))).encode()[: 200 * 1024]
    c.send("large", [Record(rng.randbytes(40 * 1024), b"big-1", timestamp=TS_BASE)], client="kafka-python")
    c.send("large", [Record(text, b"big-2", timestamp=TS_BASE + 1000)], client="confluent", codec="gzip")
    c.send("large", [Record(rng.randbytes(24 * 1024), None, timestamp=TS_BASE + 2000)], client="confluent")


def scenario_idempotent(c: Capture) -> None:
    c.topic("idempotent", 2, purpose="idempotent producers (producer id/epoch/sequences, producer snapshots)")
    recs = make_records("idempotent", 80, partitions=2)
    c.send("idempotent", recs[:40], client="kafka-python", idempotent=True, flush_every=8)
    c.send("idempotent", recs[40:], client="confluent", codec="zstd", idempotent=True, flush_every=8)


def scenario_transactions(c: Capture) -> None:
    c.topic("transactions", 2, purpose="committed and aborted transactions, interleaved with plain records "
            "(control batches, .txnindex, __transaction_state)")  # fmt: skip
    recs = make_records("transactions", 60, partitions=2)
    c.transaction("transactions", recs[0:10], commit=True, txid="txn-confluent", flush_every=5)
    c.transaction("transactions", recs[10:18], commit=False, txid="txn-confluent", codec="lz4")
    # an aborted transaction with plain records written while it is open
    with producer(c.bootstrap, "confluent", transactional_id="txn-interleaved") as p:
        p.begin()
        first = p.send_all("transactions", recs[18:24], 60)
        c.send("transactions", recs[24:30], client="kafka-python", flush_every=None)  # plain, while open
        second = p.send_all("transactions", recs[30:36], 60)
        p.abort()
    c.produced += [dataclasses.replace(s, transaction="aborted") for s in first + second]
    c.transaction("transactions", recs[36:48], commit=True, client="kafka-python", txid="txn-kafka-python",
                  codec="gzip", flush_every=6)  # fmt: skip
    c.transaction("transactions", recs[48:60], commit=False, client="kafka-python", txid="txn-kafka-python")


def scenario_log_append_time(c: Capture) -> None:
    c.topic("log-append-time", 1, {"message.timestamp.type": "LogAppendTime"},
            purpose="LogAppendTime topic (the broker overwrites timestamps; ackTimestamp holds them)")  # fmt: skip
    recs = make_records("log-append-time", 40, headers=c.v2)
    c.send("log-append-time", recs[:20], client="kafka-python", flush_every=10)
    c.send("log-append-time", recs[20:], client="confluent", codec="gzip", flush_every=20)


def scenario_broker_compression(c: Capture) -> None:
    c.topic("broker-compression", 1, {"compression.type": "gzip"},
            purpose="topic compression.type=gzip: the broker recompresses lz4 and uncompressed batches")  # fmt: skip
    recs = make_records("broker-compression", 30, headers=c.v2)
    c.send("broker-compression", recs[:15], client="kafka-python", codec="lz4", flush_every=5)
    c.send("broker-compression", recs[15:], client="confluent", flush_every=5)


def _compaction_rounds(rounds: range, keys: int = 30) -> list[Record]:
    rng = random.Random("compacted")
    out = []
    for r in rounds:
        order = list(range(keys))
        rng.shuffle(order)
        for k in order:
            value = None if (k + r) % 17 == 0 else (f"round {r} key {k} ".encode() + b"x" * rng.randrange(60, 160))
            out.append(Record(value, b"ckey-%02d" % k, timestamp=TS_BASE + (r * keys + k) * 100))
    return out


def scenario_compacted(c: Capture) -> None:
    c.topic("compacted", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                             "min.compaction.lag.ms": "0"}, segment_bytes=SMALL_SEGMENT,
            purpose="compacted topic cleaned by the broker (then a dirty tail appended); tombstones, "
                    "and for v2 an aborted and a committed transaction")  # fmt: skip
    recs = _compaction_rounds(range(10))
    c.send("compacted", recs[:150], client="kafka-python", flush_every=15)
    if c.v2:
        extra = _compaction_rounds(range(100, 101), keys=10)
        c.transaction("compacted", extra[:5], commit=False, txid="txn-compacted")
        c.transaction("compacted", extra[5:], commit=True, txid="txn-compacted")
    c.send("compacted", recs[150:], client="confluent", codec="zstd" if c.v2 else "lz4", flush_every=15)
    cleaned_to = c.wait_cleaned("compacted")
    c.notes.append(f"compacted-0 was cleaned up to offset {cleaned_to} before the dirty tail was appended")
    c.send("compacted", _compaction_rounds(range(10, 11)), client="kafka-python", flush_every=15)


def scenario_multi_segment(c: Capture) -> None:
    c.topic("multi-segment", 2, {"index.interval.bytes": "512"}, segment_bytes=SMALL_SEGMENT,
            purpose="several segments per partition (8 KiB segments), dense offset/time indexes")  # fmt: skip
    recs = make_records("multi-segment", 300, partitions=2, headers=c.v2, value_size=(50, 250))
    c.send("multi-segment", recs[:100], client="kafka-python", flush_every=8)
    c.send("multi-segment", recs[100:200], client="confluent", codec="snappy", flush_every=10)
    c.send("multi-segment", recs[200:], client="kafka-python", codec="gzip", flush_every=20)


def scenario_groups(c: Capture) -> None:
    c.group("group-kafka-python", "codec-none", client="kafka-python")
    c.group("group-confluent", "codec-gzip", client="confluent")
    if jars.parse_version(c.spec.version) >= (4,):
        c.group("group-consumer-protocol", "multi-segment", client="confluent", protocol="consumer")


def scenario_mixed_formats(c: Capture) -> None:
    """One partition written as v0, then v1, then v2 (topic message.format.version raised twice)."""
    c.topic("mixed-formats", 1, {"message.format.version": "0.9.0"},
            purpose="message.format.version 0.9.0 -> 0.10.0 -> 2.8 on one partition: v0, v1 then v2 batches "
                    "(incl. a committed transaction once v2)")  # fmt: skip
    recs = make_records("mixed-formats", 60, headers=False)
    c.send("mixed-formats", recs[0:10], client="kafka-python", flush_every=5)
    c.send("mixed-formats", recs[10:20], client="confluent", codec="gzip", flush_every=10)
    alter_topic_config(c.bootstrap, "mixed-formats", {"message.format.version": "0.10.0"})
    c.send("mixed-formats", recs[20:30], client="kafka-python", flush_every=5)
    c.send("mixed-formats", recs[30:40], client="confluent", codec="lz4", flush_every=10)
    alter_topic_config(c.bootstrap, "mixed-formats", {"message.format.version": "2.8"})
    c.send("mixed-formats", recs[40:50], client="kafka-python", codec="zstd", flush_every=5)
    c.transaction("mixed-formats", recs[50:60], commit=True, txid="txn-mixed")
    c.topics["mixed-formats"]["config"]["message.format.version"] = "0.9.0 -> 0.10.0 -> 2.8"


def scenario_killed(c: Capture) -> None:
    c.topic("killed", 2, segment_bytes=SMALL_SEGMENT, purpose="written, then the broker was SIGKILLed "
            "(unflushed segments, preallocated 4 KiB indexes, no clean-shutdown marker)")  # fmt: skip
    recs = make_records("killed", 200, partitions=2, value_size=(50, 250))
    c.send("killed", recs[:100], client="kafka-python", flush_every=10)
    c.group("group-killed", "killed", client="confluent")
    c.send("killed", recs[100:], client="confluent", codec="lz4", flush_every=10)
    c.topic("open-transaction", 1, purpose="a transaction still open when the broker was killed")
    p = producer(c.bootstrap, "kafka-python", transactional_id="txn-open")
    p.begin()
    c.produced += p.send_all("open-transaction", [_no_null_header_values(r) for r in make_records("open-transaction", 8)], 60)
    c.notes.append("open-transaction-0 ends in an open (neither committed nor aborted) transaction")
    c.open_producers.append(p)


def scenario_tiered(c: Capture) -> None:
    """Two tiered partitions: 2 KiB segments, local.retention.bytes=1, so every rolled segment is uploaded to
    LocalTieredStorage and then deleted locally (only the active segment stays local)."""
    from kafkalog.compat.tiered import TIERED_TOPIC_CONFIG, remote_storage_dir

    c.topic("tiered", 2, TIERED_TOPIC_CONFIG | {"local.retention.bytes": "1"}, segment_bytes=2048,
            purpose="tiered (remote.storage.enable): rolled segments uploaded to remote/ and deleted locally")
    c.send("tiered", make_records("tiered", 120, partitions=2, headers=False, value_size=(60, 120)),
           client="kafka-python", flush_every=4)
    store = remote_storage_dir(c.remote_root)

    def done() -> bool:
        for p in (0, 1):
            logs = c.partition_logs("tiered", p)
            if len(list(store.glob(f"tiered-{p}-*/*.log"))) < 3 or not logs or int(logs[0].stem) == 0:
                return False
        return True

    c.broker.wait_until(done, 120, "upload the tiered segments and delete them locally")
    c.notes.append("tiered-0 and tiered-1: the segments before the active one exist only in remote/ "
                   "(local log start offset > 0; log-start-offset-checkpoint keeps the log start offset 0, and "
                   "leader-epoch-checkpoint the epochs from it); their local copies may still be there as "
                   "`.deleted` files (deleted file.delete.delay.ms after the local retention removed them)")


def scenario_share_groups(c: Capture) -> None:
    """A share group consuming with Kafka's ConsoleShareConsumer: accept, release, reject, accept again (each a
    ShareUpdate or, every 3 updates, a ShareSnapshot in __share_group_state)."""
    from kafkalog.compat.tools import run_tool

    c.topic("shared", 1, purpose="consumed by share group share-g (accept, release, reject)")
    c.send("shared", make_records("shared", 20, headers=False, value_size=(20, 40)), client="kafka-python",
           flush_every=5)
    group = "share-g"
    r = run_tool(c.spec.version, "kafka.admin.ConfigCommand",
                 ["--bootstrap-server", c.bootstrap, "--alter", "--entity-type", "groups", "--entity-name", group,
                  "--add-config", "share.auto.offset.reset=earliest"], timeout=120)
    if r.returncode != 0:
        raise HarnessError(f"kafka-configs failed: {r.stderr[-800:]}")
    for n, mode in ((5, None), (3, "--release"), (3, "--reject"), (4, None)):
        args = ["--bootstrap-server", c.bootstrap, "--topic", "shared", "--group", group, "--max-messages", str(n),
                "--timeout-ms", "20000"] + ([mode] if mode else [])
        r = run_tool(c.spec.version, "org.apache.kafka.tools.consumer.ConsoleShareConsumer", args, timeout=120)
        if r.returncode != 0:
            raise HarnessError(f"ConsoleShareConsumer {' '.join(args)} failed: {r.stderr[-800:]}")
        c.log(f"  share consumer {mode or '(accept)'}: {len(r.stdout.splitlines())} messages")
    c.groups.append({"group": group, "topic": "shared", "client": "ConsoleShareConsumer", "protocol": "share",
                     "consumed": "5 accepted, 3 released, 3 rejected, 4 accepted"})
    c.notes.append("share group share-g (kafka-configs share.auto.offset.reset=earliest, then ConsoleShareConsumer "
                   "--max-messages 5; 3 --release; 3 --reject; 4): __share_group_state-0 holds ShareSnapshot "
                   "(type 0, every 3 updates) and ShareUpdate (type 1) records whose state batches are AVAILABLE "
                   "(0), ACKNOWLEDGED (2) and ARCHIVED (4, the rejected ones)")


SCENARIOS: dict[str, Callable[[Capture], None]] = {
    "tiered": scenario_tiered,
    "share_groups": scenario_share_groups,
    "codecs": scenario_codecs,
    "large": scenario_large,
    "idempotent": scenario_idempotent,
    "transactions": scenario_transactions,
    "log_append_time": scenario_log_append_time,
    "broker_compression": scenario_broker_compression,
    "compacted": scenario_compacted,
    "multi_segment": scenario_multi_segment,
    "groups": scenario_groups,
    "mixed_formats": scenario_mixed_formats,
    "killed": scenario_killed,
}


# --------------------------------------------------------------------------- driver


def _wait_kraft_snapshot(broker: Broker, timeout: float = 60.0) -> None:
    meta = broker.data_dir / "__cluster_metadata-0"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.name != "bootstrap.checkpoint" for p in meta.glob("*.checkpoint")):
            return
        time.sleep(0.5)
    raise HarnessError(f"no KRaft snapshot appeared in {meta} within {timeout:.0f}s")


def capture(spec: FixtureSpec, out: Path, *, log: Callable[[str], None] = print) -> Path:
    """Run ``spec`` on a fresh broker and write the fixture to ``out/<name>`` (replacing it)."""
    started = time.monotonic()
    target = out / spec.name
    with tempfile.TemporaryDirectory(prefix=f"kafkalog-capture-{spec.name}-") as tmp:
        props = {**CAPTURE_PROPS, **(KRAFT_PROPS if spec.mode == "kraft" else {}), **spec.props}
        if spec.killed and spec.mode == "kraft":
            # the metadata log's indexes are preallocated to 10 MiB whatever log.index.size.max.bytes says:
            # keep that log out of the fixture (the clean fixtures have __cluster_metadata-0)
            props["metadata.log.dir"] = str(Path(tmp) / "metadata")
        extra: dict[str, Any] = {}
        if spec.tiered:
            from kafkalog.compat.tiered import tiered_broker_kwargs

            extra = tiered_broker_kwargs(spec.version, Path(tmp) / "remote")
            props = extra.pop("server_properties") | props
        broker = Broker(spec.version, mode=spec.mode, data_dir=Path(tmp) / "data", server_properties=props,
                        cluster_id=cluster_id_from(spec.name), **extra)  # fmt: skip
        try:
            broker.start()
            log(f"[{spec.name}] Kafka {spec.version} ({spec.mode}) up after {time.monotonic() - started:.1f}s")
            c = Capture(spec, broker, log)
            for name in spec.scenarios:
                t = time.monotonic()
                SCENARIOS[name](c)
                log(f"[{spec.name}]   {name}: {time.monotonic() - t:.1f}s")
            if spec.mode == "kraft" and "metadata.log.dir" not in props:
                _wait_kraft_snapshot(broker)
            if spec.killed:
                broker.kill()
                for p in c.open_producers:
                    p.abandon()
            else:
                broker.stop()
        except BaseException:
            kept = Path(tempfile.gettempdir()) / f"kafkalog-capture-{spec.name}.broker.log"
            if broker.log_path.exists():
                shutil.copyfile(broker.log_path, kept)
            log(f"[{spec.name}] FAILED; broker log kept in {kept}")
            raise
        finally:
            broker.close()
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        shutil.copytree(broker.data_dir, target / "data", symlinks=True)
        if spec.tiered:
            shutil.copytree(Path(tmp) / "remote", target / "remote", symlinks=True)
    elapsed = time.monotonic() - started
    _write_expected(target, c.produced)
    _write_dump(target, spec.version)
    _write_decoded_dumps(target, spec.version)
    _write_manifest(target, spec, c, props, elapsed)
    log(f"[{spec.name}] written to {target} in {elapsed:.1f}s ({_size(target) / 1024:.0f} KiB)")
    return target


def inline_b64(data: str | None) -> str | dict[str, Any] | None:
    """Base64 ``data`` as stored in the fixture .jsonl files: itself, or a digest if it is long."""
    if data is None:
        return None
    raw = base64.b64decode(data)
    if len(raw) <= INLINE_LIMIT:
        return data
    return {"sha256": hashlib.sha256(raw).hexdigest(), "length": len(raw)}


def _dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def _write_expected(target: Path, produced: list[Produced]) -> None:
    with open(target / "expected.jsonl", "w") as fh:
        for p in produced:
            d = p.to_json()
            fh.write(_dumps({**d, "key": inline_b64(d["key"]), "value": inline_b64(d["value"])}))


def _write_dump(target: Path, version: str) -> None:
    """``dumplogsegments.jsonl``: every ``data/*/*.log`` (``file`` relative to ``data/``), then every segment
    of ``remote/`` (``file`` = ``remote/kafka-tiered-storage/<topic>-<partition>-<topicId>/<offset>-<id>.log``;
    DumpLogSegments parses the base offset from the file name, so it dumps a copy named ``<offset>.log``)."""
    logs = sorted((target / "data").glob("*/*.log"))
    run = dump_log_segments(version, logs)
    root = str((target / "data").absolute()) + "/"
    batches = [{**b, "file": b["file"].removeprefix(root)} for b in run.batches()]
    remote_logs = sorted((target / "remote").glob("*/*/*.log"))
    if remote_logs:
        with tempfile.TemporaryDirectory(prefix="kafkalog-capture-remote-") as tmp:
            alias: dict[str, str] = {}
            for f in remote_logs:
                d = Path(tmp) / f.parent.name
                d.mkdir(exist_ok=True)
                copy = d / (f.name.split("-", 1)[0] + ".log")
                shutil.copyfile(f, copy)
                alias[str(copy)] = str(f.relative_to(target))
            batches += [{**b, "file": alias[b["file"]]} for b in dump_log_segments(version, list(map(Path, alias))).batches()]
    with open(target / "dumplogsegments.jsonl", "w") as fh:
        for b in batches:
            if "records" in b:
                b["records"] = [{**r, "key": inline_b64(r["key"]), "value": inline_b64(r["value"])} for r in b["records"]]
            fh.write(_dumps(b))


def _write_decoded_dumps(target: Path, version: str) -> None:
    """``dumplogsegments-<decoder>.txt``: DumpLogSegments' own text with the decoder of each internal topic of
    :data:`DECODED_TOPICS` present (``Dumping <path relative to data/>``)."""
    from kafkalog.compat.tools import dump_class, run_tool

    data = (target / "data").absolute()
    for topic, option in DECODED_TOPICS.items():
        logs = sorted(data.glob(f"{topic}-*/*.log"))
        if not logs:
            continue
        r = run_tool(version, dump_class(version), [f"--{option}", "--files", ",".join(map(str, logs))])
        if r.returncode != 0:
            raise HarnessError(f"DumpLogSegments --{option} failed: {r.stderr[-800:]}")
        (target / f"dumplogsegments-{option.removesuffix('-decoder')}.txt").write_text(
            r.stdout.replace(str(data) + "/", ""))


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _client_versions() -> dict[str, str]:
    import confluent_kafka
    import kafka

    return {
        "kafka-python": kafka.__version__,
        "confluent-kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "java": str(jars.java_version()),
        "python": platform.python_version(),
    }


def _write_manifest(target: Path, spec: FixtureSpec, c: Capture, props: dict[str, str], elapsed: float) -> None:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    command = f"python -m kafkalog.compat.capture --out fixtures/ --only {spec.name}"
    clients = _client_versions()
    server_properties = {k: ("<work dir>/metadata (not in the fixture)" if k == "metadata.log.dir" else v)
                         for k, v in props.items()}
    manifest = {
        "name": spec.name,
        "kafka_version": spec.version,
        "mode": spec.mode,
        "message_format": spec.magic,
        "shutdown": "SIGKILL" if spec.killed else "clean",
        "captured_at": now,
        "capture_seconds": round(elapsed, 1),
        "command": command,
        "clients": clients,
        "server_properties": server_properties,
        "topics": c.topics,
        "groups": c.groups,
        "records_produced": len(c.produced),
        "notes": c.notes,
    }
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    lines = [
        f"# {spec.name}",
        "",
        f"{spec.description}.",
        "",
        f"* Kafka **{spec.version}** from Maven Central, {spec.mode} mode, data topics in message format v{spec.magic}",
        f"* shutdown: {'SIGKILL (no clean shutdown)' if spec.killed else 'clean (SIGTERM)'}",
        f"* captured {now} in {elapsed:.0f}s with {', '.join(f'{k} {v}' for k, v in clients.items())}",
        "",
        "Re-create with:",
        "",
        "```",
        command,
        "```",
        "",
        "Broker settings on top of the harness defaults (`kafkalog.compat.broker`):",
        "",
        *[f"* `{k}={v}`" for k, v in server_properties.items()],
        "",
        "| topic | partitions | config | what |",
        "|---|---:|---|---|",
        *[
            f"| `{t}` | {d['partitions']} | {', '.join(f'`{k}={v}`' for k, v in d['config'].items()) or '—'} | {d['purpose']} |"
            for t, d in c.topics.items()
        ],
        "",
        *([f"Consumer groups (committed offsets in `__consumer_offsets`): {', '.join(g['group'] + ' (' + g['protocol'] + ')' for g in c.groups if g['protocol'] != 'share')}", ""] if any(g['protocol'] != 'share' for g in c.groups) else []),
        *([f"Share groups (state in `__share_group_state`): {', '.join(g['group'] for g in c.groups if g['protocol'] == 'share')}", ""] if any(g['protocol'] == 'share' for g in c.groups) else []),
        *[f"* {n}" for n in c.notes],
        "",
        "Files: `data/` = the broker's log dir, untouched; `expected.jsonl` = what the producers sent and the",
        "broker acknowledged; `dumplogsegments.jsonl` = Kafka's DumpLogSegments (deep) of every `.log`, parsed;",
        "`manifest.json` = this page as data.",
        *(["", "Tiered storage: `remote/` = the `dir` of Kafka's `LocalTieredStorage` (`rsm.config.dir`), in its own",
           "layout: `remote/kafka-tiered-storage/<topic>-<partition>-<topicId>/<startOffset>-<segmentId>.<suffix>`",
           "(`.log`, `.index`, `.timeindex`, `.snapshot`, `.leader_epoch_checkpoint`); the segments it holds are in",
           "`dumplogsegments.jsonl` too (`file` = their path under the fixture). `__remote_log_metadata-0` holds the",
           "RLMM's records for them (COPY_SEGMENT_STARTED/FINISHED per segment)."] if spec.tiered else []),
        *([""] if spec.tiered else []),
        *[f"`dumplogsegments-{o.removesuffix('-decoder')}.txt` = DumpLogSegments `--{o}` of `{t}-*`;"
          for t, o in DECODED_TOPICS.items() if spec.tiered],
        "",
    ]  # fmt: skip
    (target / "CAPTURE.md").write_text("\n".join(lines))


def write_readme(out: Path) -> None:
    rows = []
    for manifest_path in sorted(out.glob("*/manifest.json")):
        m = json.loads(manifest_path.read_text())
        size = _size(manifest_path.parent)
        rows.append(f"| [`{m['name']}`]({m['name']}/CAPTURE.md) | {m['kafka_version']} | {m['mode']} | "
                    f"v{m['message_format']} | {m['shutdown']} | {', '.join(m['topics'])} | {size / 1024:.0f} KiB |")  # fmt: skip
    text = "\n".join([
        "# Fixtures: real Kafka log directories",
        "",
        "Captured from real Apache Kafka brokers (jars from Maven Central) by `python -m kafkalog.compat.capture",
        "--out fixtures/`. Each fixture has `data/` (the log dir as the broker left it), `expected.jsonl` (what the",
        "producers sent, with broker-assigned offsets), `dumplogsegments.jsonl` (Kafka's own DumpLogSegments view),",
        "`manifest.json` and `CAPTURE.md`. Internal topics (`__consumer_offsets`, `__transaction_state`,",
        "`__cluster_metadata`) are in `data/` too. Record content is seeded and deterministic.",
        "",
        "| fixture | Kafka | mode | format | shutdown | topics | size |",
        "|---|---|---|---|---|---|---:|",
        *rows,
        "",
    ])  # fmt: skip
    (out / "README.md").write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkalog.compat.capture", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("fixtures"), help="fixtures directory (default: fixtures)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="capture only these fixtures")
    parser.add_argument("--list", action="store_true", help="list the fixtures and exit")
    parser.add_argument("--redump", action="store_true",
                        help="only rewrite dumplogsegments.jsonl of existing fixtures (after a parser change)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.list:
        for spec in FIXTURES.values():
            print(f"{spec.name}\t{spec.description}")
        return 0
    if args.redump:
        for manifest_path in sorted(args.out.glob("*/manifest.json")):
            if args.only and manifest_path.parent.name not in args.only:
                continue
            _write_dump(manifest_path.parent, json.loads(manifest_path.read_text())["kafka_version"])
            print(f"rewrote {manifest_path.parent / 'dumplogsegments.jsonl'}")
        return 0
    names = args.only or list(FIXTURES)
    unknown = [n for n in names if n not in FIXTURES]
    if unknown:
        print(f"error: unknown fixture(s) {', '.join(unknown)}; see --list", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        for name in names:
            capture(FIXTURES[name], args.out)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        write_readme(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
