"""Differential tests of the internal-topic decoders against Apache Kafka's own DumpLogSegments (marker
``kafka``), for Kafka 4.3.1 (dialect "4.3") and 3.9.2 (dialect "3.9"):

* synthetic: segments of seeded random records of every spec and version (plus corrupt ones) for
  ``__consumer_offsets``, ``__transaction_state``, ``__cluster_metadata`` and control records; every record's
  ``--offsets-decoder`` / ``--transaction-log-decoder`` / ``--cluster-metadata-decoder`` / control text must be
  exactly what the ``format_*`` functions give;
* a real broker: consumer groups (classic and, on 4.x, KIP-848), committed and aborted transactions, topic
  configs and a deleted topic; then every record of the broker's internal topics (and KRaft checkpoints)
  formats exactly as DumpLogSegments prints it, and the metadata replay finds the topics, ids and configs.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from builders import single_record_batches, write_segment
from test_decoders import i16, random_message

from kafkalog.compat import clients, jars
from kafkalog.compat.broker import Broker
from kafkalog.compat.tools import dump_log_segments
from kafkalog.storage.decoders import (
    format_control_record,
    format_metadata_record,
    format_offsets_record,
    format_transaction_record,
    topic_configs,
    topic_ids,
)
from kafkalog.storage.decoders import kraft_control as kc
from kafkalog.storage.decoders import metadata_schemas as ms
from kafkalog.storage.decoders import offsets_schemas as os_
from kafkalog.storage.decoders import transaction_state as ts
from kafkalog.storage.records import iter_batches

pytestmark = pytest.mark.kafka

VERSIONS = [jars.LATEST_4, jars.LATEST_3]
# tagged fields added after 3.9 (a 3.9 DumpLogSegments does not print them): left out of 3.9's inputs
NEWER_THAN_3_9 = {"topicId", "metadataHash", "assignmentTimestamp", "assignmentEpochs", "nextProducerEpoch",
                  "cordonedLogDirs"}


def dialect_of(version: str) -> str:
    return "3.9" if version.startswith("3.") else "4.3"


def _strip(d, newer: bool):
    if not newer:
        return d
    if isinstance(d, dict):
        return {k: _strip(v, newer) for k, v in d.items() if k not in NEWER_THAN_3_9}
    if isinstance(d, list):
        return [_strip(x, newer) for x in d]
    return d


def _kafka_text(rec: dict, control: bool) -> str | None:
    if control:
        return rec.get("control")
    parts = []
    if "keyText" in rec:
        parts.append("key: " + rec["keyText"])
    if "valueText" in rec:
        parts.append("payload: " + rec["valueText"])
    return " ".join(parts)


def _assert_same(version: str, path: Path, decoder: str | None, ours) -> int:
    run = dump_log_segments(version, [path], decoder=decoder, print_data=False)
    got = run.files[0].records()
    recs = [r for b in iter_batches(path.read_bytes()) for r in b.records()]
    assert len(got) == len(recs)
    diffs = []
    for r, k in zip(recs, got, strict=True):
        theirs = _kafka_text(k, decoder is None)
        mine = ours(r)
        if mine != theirs:
            diffs.append(f"offset {r.offset}:\n  kafka: {theirs}\n  ours : {mine}")
    assert not diffs, "\n".join(diffs[:5])
    return len(recs)


# ------------------------------------------------------------------------------------------- synthetic


def _offsets_records(rng: random.Random, dialect: str) -> list:
    old = dialect == "3.9"
    recs = []
    for t, rt in os_.RECORD_TYPES.items():
        if old and t > 8:
            continue
        for _ in range(4):
            k = i16(t) + rt.key.write(random_message(rt.key, 0, rng), 0)
            for v in range(rt.value.valid.lo, rt.value.valid.hi + 1):
                recs.append((k, i16(v) + rt.value.write(_strip(random_message(rt.value, v, rng), old), v)))
            recs.append((k, None))
    sub, asg = os_.CONSUMER_PROTOCOL_SUBSCRIPTION, os_.CONSUMER_PROTOCOL_ASSIGNMENT
    gkey = i16(2) + os_.GROUP_METADATA_KEY.write({"group": "g"}, 0)
    for v in range(5):
        for _ in range(4):
            d = _strip(random_message(os_.GROUP_METADATA_VALUE, v, rng), old)
            d["protocolType"] = "consumer"
            for m in d["members"]:
                sv, av = rng.randrange(-1, 6), rng.randrange(-1, 6)
                m["subscription"] = i16(sv) + sub.write(random_message(sub, min(max(sv, 0), 3), rng),
                                                        min(max(sv, 0), 3))
                m["assignment"] = i16(av) + asg.write(random_message(asg, min(max(av, 0), 3), rng),
                                                      min(max(av, 0), 3))
                if rng.random() < 0.2:
                    m["assignment"] = m["assignment"][:-1]
            recs.append((gkey, i16(v) + os_.GROUP_METADATA_VALUE.write(d, v)))
    ck = i16(1) + os_.OFFSET_COMMIT_KEY.write({"group": "g", "topic": "t", "partition": 0}, 0)
    ov = os_.OFFSET_COMMIT_VALUE.write({"offset": 1, "metadata": "", "commitTimestamp": 2}, 0)
    recs += [(i16(99) + b"\x00\x01a", b"\x00\x00"), (i16(1) + b"\x00\x01a", b"\x00\x00"),
             (i16(3) + b"\x00\x01a", b"\x00\x00\x00"), (i16(1) + b"\x00\x05ab", None), (ck, b"\x00"),
             (ck, i16(5) + ov), (ck, i16(-1) + ov), (i16(0) + ck[2:], i16(1) + ov + bytes(8)),
             (i16(3) + b"\x00\x01g", i16(1) + b"\x00\x00\x00\x01\x00"), (ck + b"zz", i16(0) + ov + b"zz")]
    return recs


def _transaction_records(rng: random.Random, dialect: str) -> list:
    topics = ["t", "topic", "orders", "__x", "a-b", "payments-eu-1", "ü"]
    recs = []
    for i in range(120):
        v = rng.randrange(0, 2)
        d = _strip(random_message(ts.TRANSACTION_LOG_VALUE, v, rng), dialect == "3.9")
        d["transactionStatus"] = rng.randrange(0, 8)
        if d["transactionStatus"] != 0 or rng.random() < 0.5:
            d["transactionPartitions"] = [{"topic": rng.choice(topics),
                                           "partitionIds": rng.sample(range(200), rng.randrange(0, 30))}
                                          for _ in range(rng.randrange(0, 6))]
        else:
            d["transactionPartitions"] = None
        recs.append((i16(0) + ts.TRANSACTION_LOG_KEY.write({"transactionalId": f"tx-{i}"}, 0),
                     i16(v) + ts.TRANSACTION_LOG_VALUE.write(d, v)))
    key = i16(0) + b"\x00\x02tx"
    recs.append((key, None))
    if dialect == "4.3":  # 3.9's text decoder aborts the whole dump on these
        recs += [(i16(1) + b"\x00\x02tx", None), (b"\x00", None), (key, b"\x00"), (key, i16(2) + bytes(30)),
                 (key, i16(0) + bytes(3))]
    return recs


def _metadata_records(rng: random.Random, dialect: str) -> list:
    old = dialect == "3.9"
    recs = []
    for api, msg in ms.METADATA_RECORDS.items():
        if old and api == 28:
            continue
        hi = {0: 3, 17: 2}.get(api, msg.valid.hi) if old else msg.valid.hi
        for v in range(msg.valid.lo, hi + 1):
            for _ in range(3):
                recs.append((None, bytes([1, api, v]) + msg.write(_strip(random_message(msg, v, rng), old), v)))
    topic_x = bytes([1, 2, 0]) + ms.METADATA_RECORDS[2].write({"name": "x"}, 0)
    recs += [(None, v) for v in (b"\x01\x63\x00\x00", b"\x01\x02\x00\x00", b"\x00\x02\x00", b"\x05", topic_x + b"\x00",
                                 b"\x01\x08\xff\xff\xff\x7f\x80", b"\x80\x80\x80\x80\x80\x80",
                                 b"\x01\x80\x80\x80\x80\x80\x80", b"\x01\x00\x00\x80", b"\x01\x00\x05\x00")]
    return recs


def _control_records(rng: random.Random) -> list:
    recs = []
    for tid, (msg, _) in kc._MESSAGES.items():
        for _ in range(6):
            d = random_message(msg, 0, rng)
            d["version"] = rng.choice([0, 0, 1, -1])
            recs.append((i16(0) + i16(tid), msg.write(d, 0)))
    recs += [(i16(0) + i16(0), i16(0) + struct.pack(">i", 7)), (i16(0) + i16(1), i16(3) + struct.pack(">i", 9) + b"x"),
             (i16(0) + i16(9), b""), (i16(2) + i16(1), i16(0) + struct.pack(">i", 9))]
    return recs


@pytest.mark.parametrize("version", VERSIONS)
def test_synthetic_records_format_like_dump_log_segments(version: str, tmp_path: Path):
    dialect = dialect_of(version)
    rng = random.Random(20240611)
    offsets = write_segment(tmp_path / "offsets", 0, single_record_batches(_offsets_records(rng, dialect)))
    txn = write_segment(tmp_path / "txn", 0, single_record_batches(_transaction_records(rng, dialect)))
    meta = write_segment(tmp_path / "meta", 0, single_record_batches(_metadata_records(rng, dialect)))
    ctl = write_segment(tmp_path / "ctl", 0, single_record_batches(_control_records(rng), control=True))
    n = _assert_same(version, offsets, "offsets",
                     lambda r: format_offsets_record(r.key, r.value, r.offset, dialect=dialect))
    n += _assert_same(version, txn, "transaction",
                      lambda r: format_transaction_record(r.key, r.value, r.offset, dialect=dialect))
    n += _assert_same(version, meta, "cluster-metadata", lambda r: format_metadata_record(r.value, r.offset))
    n += _assert_same(version, ctl, None, lambda r: format_control_record(r.key, r.value, dialect=dialect))
    assert n > 400


# ------------------------------------------------------------------------------------------ real broker

ORDERS_CONFIG = {"cleanup.policy": "compact", "retention.ms": "1234567", "min.insync.replicas": "1"}


@pytest.fixture(scope="module", params=VERSIONS)
def broker_dir(request, tmp_path_factory):
    version = request.param
    root = tmp_path_factory.mktemp(f"decoders-{version}")
    b = Broker(version, data_dir=root / "data")
    try:
        b.start()
        bs = b.bootstrap_servers
        b.create_topic("orders", partitions=3, config=ORDERS_CONFIG)
        b.create_topic("plain")
        b.create_topic("doomed")
        clients.alter_topic_config(bs, "orders", {"segment.bytes": "2000000"})
        clients.alter_topic_config(bs, "plain", {"retention.ms": "60000"})
        clients.alter_topic_config(bs, "plain", {"retention.ms": "70000"})
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": bs})
        admin.delete_topics(["doomed"], operation_timeout=30)["doomed"].result(60)
        R = clients.Record
        recs = [R(b"v%d" % i, key=b"k%d" % (i % 7)) for i in range(60)]
        clients.produce(bs, "orders", recs, client="confluent", transactional_id="tx-commit", transaction="commit",
                        flush_every=20)
        clients.produce(bs, "orders", recs, client="kafka-python", transactional_id="tx-abort",
                        transaction="abort", flush_every=30)
        clients.produce(bs, "plain", recs, client="confluent", idempotent=True)
        clients.consume(bs, "orders", client="kafka-python", group_id="g-classic", commit=True, idle=2.0)
        clients.consume(bs, "plain", client="confluent", group_id="g-confluent", commit=True, idle=2.0)
        if dialect_of(version) == "4.3":
            clients.consume(bs, "plain", client="confluent", group_id="g-848", commit=True,
                            group_protocol="consumer", idle=2.0)
        b.stop()
        yield version, b.data_dir
    finally:
        b.close()


def _segments(data: Path, prefix: str) -> list[Path]:
    return sorted(p for d in data.glob(prefix + "*") for p in d.iterdir()
                  if p.suffix in (".log", ".checkpoint") and p.stat().st_size > 0)


def _format(r, batch, decoder: str, dialect: str) -> str | None:
    if batch.is_control:
        return format_control_record(r.key, r.value, dialect=dialect)
    if decoder == "offsets":
        return format_offsets_record(r.key, r.value, r.offset, dialect=dialect)
    if decoder == "transaction":
        return format_transaction_record(r.key, r.value, r.offset, dialect=dialect)
    return format_metadata_record(r.value, r.offset)


@pytest.mark.parametrize(("prefix", "decoder"), [("__consumer_offsets-", "offsets"),
                                                 ("__transaction_state-", "transaction"),
                                                 ("__cluster_metadata-", "cluster-metadata")])
def test_broker_internal_topics_format_like_dump_log_segments(broker_dir, prefix: str, decoder: str):
    version, data = broker_dir
    dialect = dialect_of(version)
    paths = _segments(data, prefix)
    assert paths, f"no {prefix} segments in {data}"
    run = dump_log_segments(version, paths, decoder=decoder, print_data=False)
    total, diffs = 0, []
    for path in paths:
        got = run[path].records()
        ours = [(r, b) for b in iter_batches(path.read_bytes()) for r in b.records()]
        assert len(got) == len(ours), path
        for (r, b), k in zip(ours, got, strict=True):
            total += 1
            theirs = _kafka_text(k, b.is_control)
            mine = _format(r, b, decoder, dialect)
            if mine != theirs:
                diffs.append(f"{path.name} offset {r.offset}:\n  kafka: {theirs}\n  ours : {mine}")
    assert not diffs, "\n".join(diffs[:5])
    assert total > 0


def test_broker_metadata_replay(broker_dir):
    _, data = broker_dir
    values = [r.value for p in _segments(data, "__cluster_metadata-") if p.suffix == ".log"
              for b in iter_batches(p.read_bytes()) if not b.is_control for r in b.records()]
    configs = topic_configs(values)
    assert configs["orders"] == dict(ORDERS_CONFIG, **{"segment.bytes": "2000000"})
    assert configs["plain"] == {"retention.ms": "70000"}
    assert "doomed" not in configs
    ids = topic_ids(values)
    assert "doomed" not in ids
    for topic in ("orders", "plain"):
        meta = (data / f"{topic}-0" / "partition.metadata").read_text()
        assert f"topic_id: {ids[topic]}" in meta
