"""``kafkalog doctor`` predicts serving, not only starting (issue 31 item 4), checked against a real broker.

A copy of the 4.3.1 fixture (cleanly stopped: the broker's start-up checks no segment) gets one CRC-corrupt batch
in a closed segment of each partition of topic ``multi-segment``: in partition 1 a byte of a snappy batch (its
records no longer decompress), in partition 0 a byte of the last record of an uncompressed batch (a header value:
its framing is intact and its records decode; librdkafka's defaults hand the damaged record over as it is). Doctor predicts, per batch, which readers fail and which receive the bytes
(``serving.servedTo``). One broker starts on the dir (asserted), then each reader fetches the corrupt offsets:

* (a) the Java consumer: Kafka's own ``kafka-console-consumer`` (``ConsoleConsumer``) from the harness's jars;
* (b) kafka-python; (c) librdkafka (confluent-kafka) with its defaults and (d) with ``check.crcs=true``;
* (e) a follower: a second broker (``process.roles=broker``, node 2) joins the first one's KRaft quorum and both
  partitions are reassigned to replicas [1, 2]; it replicates what is before each corrupt batch and never gets
  past it (its fetcher logs "Found invalid messages during fetch"), so it never joins the ISR.

Every outcome is the one doctor predicted.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
import uuid
from pathlib import Path

import pytest
from damage import FIXTURES, damaged_copy

import kafkalog
from kafkalog.compat.broker import Broker
from kafkalog.compat.pytest_plugin import configured_libs
from kafkalog.compat.tools import run_tool
from kafkalog.storage.files.java import uuid_to_string
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.records import LogScanner
from kafkalog.tools.cli import main

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

VERSION = "4.3.1"
FIXTURE = "kafka-4.3.1-kraft"
TOPIC = "multi-segment"
FAST = {"log.initial.task.delay.ms": "0", "log.retention.check.interval.ms": "3600000",
        "log.cleaner.enable": "false", "num.recovery.threads.per.data.dir": "1"}
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"


def _flip_uncompressed_value(pdir: Path) -> int:
    """Flip a byte of the last record (its value or a header value) of the middle uncompressed batch of the first
    (closed) segment of ``pdir``: its CRC fails, its framing and records stay intact. Returns its base offset."""
    seg = sorted(pdir.glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    plain = [(b.position, b.size, b.base_offset) for b in LogScanner(memoryview(bytes(data)))
             if b.codec == 0 and b.records_count > 0]
    pos, size, base = plain[len(plain) // 2]
    data[pos + size - 3] ^= 0x5A  # among the last bytes of the last record (a value, or a header's value)
    seg.write_bytes(bytes(data))
    return base


def _doctor(d: Path) -> tuple[int, list[dict]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["doctor", "--json", "--no-progress", str(d)])
    return rc, [json.loads(x) for x in out.getvalue().splitlines()]


def _java(bootstrap: str, partition: int, offset: int) -> str:
    r = run_tool(VERSION, CONSOLE_CONSUMER, ["--bootstrap-server", bootstrap, "--topic", TOPIC, "--partition",
                                             str(partition), "--offset", str(offset), "--max-messages", "10",
                                             "--timeout-ms", "10000", "--formatter-property", "print.offset=true"],
                 timeout=120)
    got = [int(line.split("\t")[0].split(":")[1]) for line in r.stdout.splitlines() if line.startswith("Offset:")]
    return _outcome(got, offset, "is invalid, cause: Record is corrupt" in r.stderr, r.stderr[-2000:])


def _outcome(got: list[int], corrupt: int, failed: bool, detail: str) -> str:
    """``fails`` (an error at the corrupt batch, nothing from it), ``delivers`` (its records, no error)."""
    if failed and corrupt not in got:
        return "fails"
    if not failed and corrupt in got:
        return "delivers"
    raise AssertionError(f"neither fails nor delivers: offsets {got}, error {failed}: {detail}")


def _kafka_python(bootstrap: str, partition: int, offset: int) -> str:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import CorruptRecordError

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    got: list[int] = []
    error = None
    try:
        tp = TopicPartition(TOPIC, partition)
        c.assign([tp])
        c.seek(tp, offset - 2)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and offset not in got:
            for recs in c.poll(timeout_ms=500).values():
                got += [m.offset for m in recs]
    except CorruptRecordError as e:
        error = e
    finally:
        c.close()
    return _outcome(got, offset, error is not None, repr(error))


def _librdkafka(bootstrap: str, partition: int, offset: int, last: int, **conf) -> tuple[str, list[str], dict]:
    """librdkafka's outcome from ``offset - 2``, its errors, and the values it delivered by offset (up to ``last``,
    the corrupt batch's last offset)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"serving-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "log_level": 0, **conf})
    got: list[int] = []
    errors: list[str] = []
    values: dict[int, tuple] = {}
    try:
        c.assign([TopicPartition(TOPIC, partition, offset - 2)])
        deadline = time.monotonic() + 20
        # an error comes back at every poll, the consumer never moving past the batch: 3 in a row are enough
        while time.monotonic() < deadline and last not in got and len(errors) < 3:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(str(m.error()))
            else:
                got.append(m.offset())
                values[m.offset()] = (m.key(), m.value(), tuple(m.headers() or ()))
    finally:
        c.close()
    return _outcome(got, offset, bool(errors), str(errors)), errors, values


def _follower(leader: Broker, root: Path, leos: dict[int, int], corrupt: dict[int, int]) -> dict:
    """A second broker joining ``leader``'s quorum replicates both partitions: how far it gets."""
    from confluent_kafka.admin import AdminClient
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    data = root / "follower" / "data"
    data.mkdir(parents=True)
    cluster = next(line.split("=", 1)[1] for line in (leader.data_dir / "meta.properties").read_text().splitlines()
                   if line.startswith("cluster.id="))
    (data / "meta.properties").write_text(f"version=1\nnode.id=2\ncluster.id={cluster}\n"
                                          f"directory.id={uuid_to_string(uuid.uuid4().bytes)}\n")
    follower = Broker(VERSION, data_dir=data, server_properties=FAST)
    follower.extra_properties |= {
        "process.roles": "broker", "node.id": "2", "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": f"1@127.0.0.1:{leader.controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{follower.port}"}
    out: dict = {}
    try:
        follower.start(timeout=60)
        admin = KafkaAdminClient(bootstrap_servers=leader.bootstrap_servers)
        try:
            accepted = admin.alter_partition_reassignments({TopicPartition(TOPIC, p): [1, 2] for p in corrupt})
            assert all(e is None for e in accepted.values()), accepted
            dirs = [data / f"{TOPIC}-{p}" for p in corrupt]
            follower.wait_until(lambda: all(d.is_dir() for d in dirs), 30, "create the replicas")
            text = ""
            need = [f"Found invalid messages during fetch for partition {TOPIC}-{p}" for p in corrupt]
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not all(n in text for n in need):
                time.sleep(0.5)
                text = follower.log_path.read_text(errors="replace")
            time.sleep(2)  # more fetches: the follower stays where it is
            md = AdminClient({"bootstrap.servers": leader.bootstrap_servers, "log_level": 0}).list_topics(TOPIC, 10)
            out["replicas"] = {p: sorted(md.topics[TOPIC].partitions[p].replicas) for p in corrupt}
            out["isr"] = {p: sorted(md.topics[TOPIC].partitions[p].isrs) for p in corrupt}
        finally:
            admin.close()
        follower.stop()
        out["log"] = follower.log_path.read_text(errors="replace")
        out["leos"] = {p: PartitionLog(data / f"{TOPIC}-{p}").log_end_offset for p in corrupt}
    finally:
        follower.close()
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory, kafka_libs):
    configured_libs(kafka_libs, VERSION)
    root = tmp_path_factory.mktemp("doctor-serving")
    d = root / "data"
    damaged_copy(FIXTURE, d, ("crc_mismatch",))  # multi-segment-1: a byte of a snappy batch
    plain = _flip_uncompressed_value(d / f"{TOPIC}-0")
    rc, lines = _doctor(d)
    found = {int(p["partition"].rsplit("-", 1)[1]): p for p in lines if p.get("kind") == "corruptBatch"}
    assert sorted(found) == [0, 1] and found[0]["firstOffset"] == plain, found
    corrupt = {p: f["firstOffset"] for p, f in found.items()}
    last = {p: f["lastOffset"] for p, f in found.items()}
    leos = {p: PartitionLog(d / f"{TOPIC}-{p}").log_end_offset for p in corrupt}
    t0 = time.monotonic()
    broker = Broker(VERSION, data_dir=d, server_properties=FAST)
    seen: dict = {"doctor": (rc, lines, found), "corrupt": corrupt, "leos": leos}
    try:
        broker.start(timeout=90)
        seen["started"] = True
        bs = broker.bootstrap_servers
        seen["clients"] = {p: {"javaConsumer": _java(bs, p, o), "kafkaPython": _kafka_python(bs, p, o),
                               "librdkafka": _librdkafka(bs, p, o, last[p]), "librdkafkaCheckCrcs":
                               _librdkafka(bs, p, o, last[p], **{"check.crcs": True})} for p, o in corrupt.items()}
        seen["follower"] = _follower(broker, root, leos, corrupt)
        broker.stop()
    finally:
        broker.close()
    seen["seconds"] = time.monotonic() - t0
    seen["log"] = broker.log_path.read_text(errors="replace")
    return seen


def test_doctor_says_the_broker_starts_and_serves_the_corrupt_batches(run):
    rc, lines, found = run["doctor"]
    assert rc == 1 and lines[-1]["verdict"] == "recovery" and lines[-1]["headline"] == "WILL START, WITH LOSS"
    assert run.get("started"), run["log"][-3000:]
    recovered = [line for line in run["log"].splitlines() if "Recovering unflushed segment" in line]
    assert not [line for line in recovered if f"partition={TOPIC}-" in line], recovered  # none of it checked
    for f in found.values():
        assert f["severity"] == "loss" and f["serving"]["cut"]["command"] == "kafkalog repair --full", f
        assert f["serving"]["cut"]["firstOffset"] == f["firstOffset"]
    assert found[0]["serving"]["recordsDecode"] and not found[1]["serving"]["recordsDecode"]


@pytest.mark.parametrize("partition", [0, 1])
def test_each_consumer_does_what_doctor_predicted(run, partition: int):
    predicted = run["doctor"][2][partition]["serving"]["servedTo"]
    clients = run["clients"][partition]
    got = {k: v[0] if isinstance(v, tuple) else v for k, v in clients.items()}
    assert got == {k: predicted[k] for k in got}, (got, clients)
    if partition == 0:  # the silent one: librdkafka's defaults deliver the damaged record, no error
        assert predicted["librdkafka"] == "delivers"
        first, last = run["doctor"][2][0]["firstOffset"], run["doctor"][2][0]["lastOffset"]
        with kafkalog.open(FIXTURES / FIXTURE / "data") as d:  # what the broker wrote, before the flipped byte
            before = {r["offset"]: (r["key"], r["value"], tuple(r["headers"])) for r in d.partition(TOPIC, 0).records()
                      if first <= r["offset"] <= last}
        delivered = {o: v for o, v in clients["librdkafka"][2].items() if first <= o <= last}
        assert sorted(delivered) == sorted(before), delivered
        changed = [o for o in before if delivered[o] != before[o]]
        assert changed == [last], (delivered, before)  # the last record's damaged byte, handed over as it is
    else:
        assert predicted["librdkafka"] == "fails" and "Decompression" in clients["librdkafka"][1][0]
    assert "CRC32C check" in clients["librdkafkaCheckCrcs"][1][0]


def test_a_follower_cannot_replicate_past_the_corrupt_batch(run):
    found, follower = run["doctor"][2], run["follower"]
    for p, o in run["corrupt"].items():
        assert found[p]["serving"]["servedTo"]["follower"] == "fails"
        assert f"Found invalid messages during fetch for partition {TOPIC}-{p}" in follower["log"], \
            follower["log"][-3000:]
        assert follower["leos"][p] <= o < run["leos"][p], (p, follower["leos"])
        assert follower["replicas"][p] == [1, 2] and follower["isr"][p] == [1], follower


def test_the_serving_run_stays_short(run):
    assert run["seconds"] < 90, run["seconds"]
