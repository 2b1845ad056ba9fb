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

Two more partitions of the same copy are served as they are in other ways (``serving.damage``):

* a hole: ``codec-gzip-0``'s segment is cut inside its last-but-one batch and an empty segment follows at its old
  log end, as a roll leaves it (a torn closed segment). Every reader, and the follower, skips the hole's offsets
  without an error, receiving the records before it and those produced after it; the follower joins the ISR;
* a torn end: ``codec-none-0``'s active segment ends in the first 40 bytes of a batch at its log end offset (a
  torn write). The broker keeps them and appends the records produced after start-up after them: every reader,
  and the follower, stalls at the log end without an error while the leader counts the follower in the ISR;
* the same torn end in ``codec-snappy-0`` (a snappy batch's header) and ``log-append-time-0`` (an uncompressed
  one's), with more bytes produced after it than the torn batch declares (``serving.spanBytes``): its header is
  then read over them, a batch failing its CRC, and the readers do what ``serving.servedToOnceSpanned`` says (the
  Java consumer, kafka-python and librdkafka with ``check.crcs=true`` fail; librdkafka's defaults fail on the
  snappy one, which does not decompress, and stall on the other; the follower fails and stays out of the ISR).

Every outcome is the one doctor predicted.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import struct
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from damage import FIXTURES, damaged_copy

import kafkalog
from kafkalog.compat.broker import Broker
from kafkalog.compat.pytest_plugin import configured_libs
from kafkalog.compat.tools import run_tool
from kafkalog.storage.files.java import uuid_to_string
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.records import LogScanner, iter_batches
from kafkalog.tools.cli import main

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

VERSION = "4.3.1"
FIXTURE = "kafka-4.3.1-kraft"
TOPIC = "multi-segment"
FAST = {"log.initial.task.delay.ms": "0", "log.retention.check.interval.ms": "3600000",
        "log.cleaner.enable": "false", "num.recovery.threads.per.data.dir": "1"}
#: the fixture's records are older than the default retention (7 days) and segment.ms: without these the broker
#: would roll and delete the segments at start-up, and a produce would roll a new segment
PROPS = FAST | {"log.retention.ms": "-1", "log.roll.ms": str(100 * 365 * 86_400_000)}
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
#: a torn end of the active segment; a torn closed segment (a hole)
TORN, HOLED = "codec-none", "codec-gzip"
#: torn ends appended past, and the codec of the batch each torn header is copied from (None: the last one's)
SPANNED = {"codec-snappy": None, "log-append-time": 0}
PRODUCED = 5  # records produced to each after start-up


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


def _tear_active_end(pdir: Path, codec: int | None = None) -> int:
    """A torn write at the end of ``pdir``'s only (active) segment: the first 40 bytes of a batch at its log end
    offset (a copy of its last batch, or of the last one of ``codec``, renumbered). Returns their position."""
    seg = sorted(pdir.glob("*.log"))[-1]
    data = seg.read_bytes()
    batches = [(b.position, b.codec, b.last_offset) for b in iter_batches(data)]
    pos = [p for p, c, _ in batches if codec is None or c == codec][-1]
    torn = bytearray(data[pos:pos + 40])
    torn[0:8] = struct.pack(">q", batches[-1][2] + 1)
    seg.write_bytes(data + bytes(torn))
    return len(data)


def _tear_closed(pdir: Path) -> tuple[int, int]:
    """Cut ``pdir``'s only segment inside its last-but-one batch and start an empty segment at its old log end
    (indexes included), as a roll leaves it: a torn closed segment. Returns the hole's first and last offsets."""
    seg = sorted(pdir.glob("*.log"))[-1]
    batches = [(b.position, b.base_offset, b.last_offset) for b in iter_batches(seg.read_bytes())]
    (pos, first, _), end = batches[-2], batches[-1][2] + 1
    os.truncate(seg, pos + 30)
    for ext in ("log", "index", "timeindex"):
        (pdir / f"{end:020d}.{ext}").touch()
    return first, end - 1


def _reads(bootstrap: str, topic: str, start: int, last: int, wait: float) -> dict[str, tuple[list[int], list[str]]]:
    """Each consumer of the partition ``topic``-0 from ``start`` until it has ``last`` or ``wait`` seconds passed,
    all at once: the offsets it delivered and its errors."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as Tp
    from kafka import KafkaConsumer, TopicPartition

    def java() -> tuple[list[int], list[str]]:
        r = run_tool(VERSION, CONSOLE_CONSUMER, ["--bootstrap-server", bootstrap, "--topic", topic, "--partition",
                                                 "0", "--offset", str(start), "--max-messages",
                                                 str(last - start + 1), "--timeout-ms", str(int(wait * 1000)),
                                                 "--formatter-property", "print.offset=true"], timeout=120)
        got = [int(line.split("\t")[0].split(":")[1]) for line in r.stdout.splitlines() if line.startswith("Offset:")]
        return got, [line for line in r.stderr.splitlines() if "KafkaException" in line or "Corrupt" in line]

    def kafka_python() -> tuple[list[int], list[str]]:
        c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
        got: list[int] = []
        errors: list[str] = []
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, start)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and last not in got:
                for recs in c.poll(timeout_ms=500).values():
                    got += [m.offset for m in recs]
        except Exception as e:  # noqa: BLE001 - any error is an outcome
            errors.append(repr(e))
        finally:
            c.close()
        return got, errors

    def librdkafka(**conf) -> tuple[list[int], list[str]]:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"serving-{uuid.uuid4().hex}",
                      "enable.auto.commit": False, "log_level": 0, **conf})
        got: list[int] = []
        errors: list[str] = []
        try:
            c.assign([Tp(topic, 0, start)])
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and last not in got and len(errors) < 3:
                m = c.poll(0.5)
                if m is not None:
                    (errors.append(str(m.error())) if m.error() else got.append(m.offset()))
        finally:
            c.close()
        return got, errors

    with ThreadPoolExecutor(4) as pool:
        runs = {"javaConsumer": pool.submit(java), "kafkaPython": pool.submit(kafka_python),
                "librdkafka": pool.submit(librdkafka),
                "librdkafkaCheckCrcs": pool.submit(librdkafka, **{"check.crcs": True})}
        return {k: f.result() for k, f in runs.items()}


def _fate(got: list[int], errors: list[str], before: list[int], after: list[int]) -> str:
    """``skips`` (no error: the records ``before`` a hole and those ``after`` it, nothing between), ``stalls``
    (no error: the records ``before`` the log end, none of those produced ``after`` start-up) or ``fails`` (the
    records ``before`` it, then an error)."""
    if not errors and got == before + after:
        return "skips"
    if got == before:
        return "fails" if errors else "stalls"
    raise AssertionError(f"neither skips, stalls nor fails: offsets {got}, errors {errors}")


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


def _follower(leader: Broker, root: Path, corrupt: dict[int, int], in_sync: tuple[str, ...] = (),
              failing: tuple[str, ...] = ()) -> dict:
    """A second broker joining ``leader``'s quorum replicates both partitions (and partition 0 of the topics
    ``in_sync``, waiting for the leader to count it in their ISR, and of ``failing``, waiting for its fetch to
    fail): how far it gets, and whether the leader counts it in the ISR."""
    others = in_sync + failing
    from confluent_kafka.admin import AdminClient
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    data = root / "follower" / "data"
    data.mkdir(parents=True)
    cluster = next(line.split("=", 1)[1] for line in (leader.data_dir / "meta.properties").read_text().splitlines()
                   if line.startswith("cluster.id="))
    (data / "meta.properties").write_text(f"version=1\nnode.id=2\ncluster.id={cluster}\n"
                                          f"directory.id={uuid_to_string(uuid.uuid4().bytes)}\n")
    follower = Broker(VERSION, data_dir=data, server_properties=PROPS)
    follower.extra_properties |= {
        "process.roles": "broker", "node.id": "2", "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": f"1@127.0.0.1:{leader.controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{follower.port}"}
    out: dict = {}
    try:
        follower.start(timeout=60)
        admin = KafkaAdminClient(bootstrap_servers=leader.bootstrap_servers)
        try:
            accepted = admin.alter_partition_reassignments({TopicPartition(t, p): [1, 2] for t, p in
                                                            [(TOPIC, p) for p in corrupt] + [(t, 0) for t in others]})
            assert all(e is None for e in accepted.values()), accepted
            dirs = [data / f"{TOPIC}-{p}" for p in corrupt] + [data / f"{t}-0" for t in others]
            follower.wait_until(lambda: all(d.is_dir() for d in dirs), 30, "create the replicas")
            text = ""
            need = [f"Found invalid messages during fetch for partition {t}-{p}" for t, p in
                    [(TOPIC, p) for p in corrupt] + [(t, 0) for t in failing]]
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not all(n in text for n in need):
                time.sleep(0.5)
                text = follower.log_path.read_text(errors="replace")
            time.sleep(2)  # more fetches: the follower stays where it is
            client = AdminClient({"bootstrap.servers": leader.bootstrap_servers, "log_level": 0})

            def isr(t: str, p: int) -> list[int]:
                return sorted(client.list_topics(t, 10).topics[t].partitions[p].isrs)

            follower.wait_until(lambda: all(2 in isr(t, 0) for t in in_sync), 30, "the ISR of " + ", ".join(in_sync))
            md = client.list_topics(TOPIC, 10)
            out["replicas"] = {p: sorted(md.topics[TOPIC].partitions[p].replicas) for p in corrupt}
            out["isr"] = {p: sorted(md.topics[TOPIC].partitions[p].isrs) for p in corrupt}
            out["othersIsr"] = {t: isr(t, 0) for t in others}
        finally:
            admin.close()
        follower.stop()
        out["log"] = follower.log_path.read_text(errors="replace")
        out["leos"] = {p: PartitionLog(data / f"{TOPIC}-{p}").log_end_offset for p in corrupt}
        out["othersLeo"] = {t: PartitionLog(data / f"{t}-0").log_end_offset for t in others}
        with kafkalog.open(data) as replica:
            out["othersOffsets"] = {t: [r["offset"] for r in replica.partition(t, 0).records()] for t in others}
    finally:
        follower.close()
    return out


def _append_and_read(bootstrap: str, hole_first: int, spans: dict[str, int]) -> dict:
    """The log end offsets of the torn and the holed partitions at start-up, :data:`PRODUCED` records produced to
    each (acks=all: their offsets), records of 100 bytes to each of :data:`SPANNED` until more than its ``spans``
    bytes follow its torn bytes, then what each consumer reads of them, from two offsets before the damage."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    tps = [TopicPartition(t, 0) for t in (TORN, HOLED, *SPANNED)]
    c = KafkaConsumer(bootstrap_servers=bootstrap)
    out: dict = {"endAtStart": {tp.topic: o for tp, o in c.end_offsets(tps).items()}}
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    out["produced"] = {t: [producer.send(t, value=b"after start-up %d" % i, partition=0).get(30).offset
                           for i in range(PRODUCED)] for t in (TORN, HOLED)}
    for t, span in spans.items():  # (a batch of one record: more than 100 bytes each)
        out["produced"][t] = [producer.send(t, value=b"%-100d" % i, partition=0).get(30).offset
                              for i in range(span // 100 + 2)]
    producer.close()
    out["endAfter"] = {tp.topic: o for tp, o in c.end_offsets(tps).items()}
    c.close()
    with ThreadPoolExecutor(4) as pool:  # the torn ends' readers wait out their time while the hole's are served
        starts = {HOLED: hole_first - 2} | {t: out["endAtStart"][t] - 2 for t in (TORN, *SPANNED)}
        runs = {t: pool.submit(_reads, bootstrap, t, o, out["produced"][t][-1], 20 if t == HOLED else 8)
                for t, o in starts.items()}
        out["reads"] = {t: f.result() for t, f in runs.items()}
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory, kafka_libs):
    configured_libs(kafka_libs, VERSION)
    root = tmp_path_factory.mktemp("doctor-serving")
    d = root / "data"
    damaged_copy(FIXTURE, d, ("crc_mismatch",))  # multi-segment-1: a byte of a snappy batch
    plain = _flip_uncompressed_value(d / f"{TOPIC}-0")
    torn_at = _tear_active_end(d / f"{TORN}-0")
    for t, codec in SPANNED.items():
        _tear_active_end(d / f"{t}-0", codec)
    hole = _tear_closed(d / f"{HOLED}-0")
    rc, lines = _doctor(d)
    found = {int(p["partition"].rsplit("-", 1)[1]): p for p in lines if p.get("kind") == "corruptBatch"}
    assert sorted(found) == [0, 1] and found[0]["firstOffset"] == plain, found
    corrupt = {p: f["firstOffset"] for p, f in found.items()}
    last = {p: f["lastOffset"] for p, f in found.items()}
    leos = {p: PartitionLog(d / f"{TOPIC}-{p}").log_end_offset for p in corrupt}
    served = {t: [p for p in lines if p.get("partition") == f"{t}-0" and p.get("serving")]
              for t in (TORN, HOLED, *SPANNED)}
    t0 = time.monotonic()
    broker = Broker(VERSION, data_dir=d, server_properties=PROPS)
    seen: dict = {"doctor": (rc, lines, found), "corrupt": corrupt, "leos": leos, "served": served,
                  "tornAt": torn_at, "hole": hole}
    try:
        broker.start(timeout=90)
        seen["started"] = True
        bs = broker.bootstrap_servers
        seen["clients"] = {p: {"javaConsumer": _java(bs, p, o), "kafkaPython": _kafka_python(bs, p, o),
                               "librdkafka": _librdkafka(bs, p, o, last[p]), "librdkafkaCheckCrcs":
                               _librdkafka(bs, p, o, last[p], **{"check.crcs": True})} for p, o in corrupt.items()}
        seen |= _append_and_read(bs, hole[0], {t: served[t][0]["serving"]["spanBytes"] for t in SPANNED})
        seen["follower"] = _follower(broker, root, corrupt, (TORN, HOLED), tuple(SPANNED))
        broker.stop()
    finally:
        broker.close()
    seen["seconds"] = time.monotonic() - t0
    seen["log"] = broker.log_path.read_text(errors="replace")
    data = sorted((d / f"{TORN}-0").glob("*.log"))[-1].read_bytes()
    seen["afterTorn"] = [(b.base_offset, b.last_offset) for b in iter_batches(data[torn_at + 40:])]
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


def test_a_torn_active_end_is_kept_and_the_broker_appends_after_it(run):
    """After a clean shutdown the broker keeps the torn bytes: its log ends before them, the records produced after
    start-up are acknowledged and written after them, and no reader nor follower gets any of them, as doctor
    predicted."""
    [f] = run["served"][TORN]
    end, produced = run["endAtStart"][TORN], run["produced"][TORN]
    assert (f["kind"], f["severity"], f["code"]) == ("tornEnd", "loss", "doctor.tornEnd"), f
    assert (f["firstOffset"], f["facts"]["position"], f["bytes"]) == (end, run["tornAt"], 40), f
    s = f["serving"]
    assert s["damage"] == "tornEnd" and s["followerInIsr"] and s["cut"]["command"] == "kafkalog repair --full"
    assert produced == list(range(end, end + PRODUCED)) and run["endAfter"][TORN] == end + PRODUCED
    # written after the torn bytes, as they were produced
    assert run["afterTorn"] == [(o, o) for o in produced], run["afterTorn"]
    for reader, (got, errors) in run["reads"][TORN].items():
        assert _fate(got, errors, [end - 2, end - 1], produced) == s["servedTo"][reader] == "stalls", reader
    follower = run["follower"]
    assert s["servedTo"]["follower"] == "stalls" and follower["othersLeo"][TORN] == end, follower["othersLeo"]
    assert 2 in follower["othersIsr"][TORN], follower["othersIsr"]  # counted in sync, without the records


def test_every_reader_and_follower_skip_a_hole(run):
    [f] = run["served"][HOLED]
    first, last = run["hole"]
    assert (f["kind"], f["code"], f["firstOffset"], f["lastOffset"]) == ("lostOffsets", "doctor.hole", first, last), f
    s = f["serving"]
    assert s["damage"] == "hole" and s["followerInIsr"] and (s["cut"]["firstOffset"], s["cut"]["lastOffset"]) == (
        first, last)
    produced = run["produced"][HOLED]
    assert produced == list(range(last + 1, last + 1 + PRODUCED))
    for reader, (got, errors) in run["reads"][HOLED].items():
        assert _fate(got, errors, [first - 2, first - 1], produced) == s["servedTo"][reader] == "skips", reader
    follower = run["follower"]
    assert s["servedTo"]["follower"] == "skips" and 2 in follower["othersIsr"][HOLED], follower["othersIsr"]
    assert follower["othersOffsets"][HOLED] == list(range(first)) + produced  # the same hole, nothing else missing


@pytest.mark.parametrize("topic", list(SPANNED))
def test_once_appended_past_the_torn_batch_the_readers_fail_as_doctor_predicted(run, topic: str):
    """More bytes appended after the torn ones than the torn batch declares: a fetch at the log end reads the torn
    header over the new batches, a batch failing its CRC."""
    [f] = run["served"][topic]
    s, end, produced = f["serving"], run["endAtStart"][topic], run["produced"][topic]
    assert f["kind"] == "tornEnd" and f["firstOffset"] == end and s["spanBytes"] > 0, f
    assert s["tornCompressed"] == (SPANNED[topic] is None), s  # (snappy; uncompressed)
    assert produced == list(range(end, end + len(produced))) and run["endAfter"][topic] == produced[-1] + 1
    spanned = s["servedToOnceSpanned"]
    assert spanned["librdkafka"] == ("fails" if s["tornCompressed"] else "stalls"), spanned
    for reader, (got, errors) in run["reads"][topic].items():
        assert _fate(got, errors, [end - 2, end - 1], produced) == spanned[reader], (reader, got, errors)
        if spanned[reader] == "fails":
            assert any(f"offset {end} " in e or f"message at {end} " in e for e in errors), errors
    follower = run["follower"]
    assert spanned["follower"] == "fails" and 2 not in follower["othersIsr"][topic], follower["othersIsr"]
    assert follower["othersLeo"][topic] <= end, follower["othersLeo"]
    assert f"Found invalid messages during fetch for partition {topic}-0" in follower["log"]
