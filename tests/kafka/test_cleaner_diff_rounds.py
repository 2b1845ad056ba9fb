"""Differential tests, part 2 (issue 6): ``__consumer_offsets`` compaction and later cleaning rounds, the real
broker's cleaner vs ``kafkalog compact`` (the CLI) on byte-identical copies of its input.

One broker per Kafka version (KRaft, ``offsets.topic.num.partitions=1``, 1 MiB offsets segments):

* inputs, cleaner off: consumer groups commit offsets many times (kafka-python and confluent-kafka, classic
  and, on 4.x, the KIP-848 consumer protocol; large offset metadata fills several segments), a transactional
  producer commits and aborts offsets, one group's offsets are partly deleted and a group is deleted
  (tombstones); the admin API's committed offsets are recorded. Topic ``rnd`` (``delete.retention.ms`` 1 s)
  gets keyed data (none/gzip/zstd) with tombstones, committed and aborted transactions. Stop; copy -> B1.
* round 1, prompt cleaner: the broker cleans both partitions; stop; copy -> R1. ``kafkalog compact`` on B1
  (config from B1's ``__cluster_metadata`` and the broker's ``server.properties``) at the broker's cleaning
  time, recovered from the delete horizons the broker wrote.
* rounds 2 and 3: cleaner off, more data for ``rnd`` (dirty again, a segment rolls; snappy/lz4 too); stop;
  copy -> Bn (the broker's round-n input); wait until the clock is past the earlier horizons; the broker's round
  n; stop; copy -> Rn; ``kafkalog compact`` on Bn at the broker's time. Round 2 removes the expired tombstones
  and gives the markers of emptied transactions a horizon; round 3 removes those markers.

Compared: segment files and bytes (every codec byte-identical with the compiled core; without it uncompressed
and gzip batches byte-identical, others by records, offsets and batch boundaries), index files, segment mtimes, ``cleaner-offset-checkpoint``; for ``__consumer_offsets`` also
the latest commit per group/partition, decoded with :mod:`kafkalog.storage.decoders.consumer_offsets`, against
the admin API. Inputs are kept as ``in1``..``in3`` beside them for diagnosing a failure.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import random
import shutil
import string
import time
from pathlib import Path

import pytest
from engines import clean_points
from test_cleaner_diff import PROMPT, SEGMENT, _segments, compare_cleaned, keyed_records

from kafkalog.compat import clients, jars
from kafkalog.compat.broker import Broker
from kafkalog.storage.codec.native import core
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.decoders.consumer_offsets import parse_offsets_key, parse_offsets_value
from kafkalog.storage.records import iter_batches
from kafkalog.storage.records.control import parse_control_key
from kafkalog.tools.cli import main as kafkalog_main

pytestmark = pytest.mark.kafka

OFFSETS = "__consumer_offsets"
# codecs whose recompressed batches must equal the broker's byte for byte (all of them with the compiled core)
BYTE_IDENTICAL_CODECS = (0, 1, 2, 3, 4) if core is not None else (0, 1)
RETENTION = 1000  # rnd's delete.retention.ms: round 2 runs seconds after round 1's horizons
RND_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT), "min.cleanable.dirty.ratio": "0.01",
              "delete.retention.ms": str(RETENTION), "min.compaction.lag.ms": "0"}
BASE_PROPS = {"log.cleaner.enable": "false", "offsets.topic.num.partitions": "1",
              "offsets.topic.segment.bytes": str(SEGMENT)}
SRC_PARTITIONS = 4
SRC_RECORDS = 50  # per partition


# ------------------------------------------------------------------------------------------- inputs
def _meta(rnd: random.Random) -> str:
    """Offset metadata (offset.metadata.max.bytes is 4096): a few commits fill a 1 MiB segment."""
    return "".join(rnd.choices(string.ascii_letters, k=rnd.randrange(600, 1400)))


def _until_assigned(poll, assignment, what: str) -> None:
    deadline = time.monotonic() + 60
    while not assignment():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: no partitions assigned within 60s")
        poll()


def _kafka_python_commits(bs: str, group: str, commits: int, rnd: random.Random) -> None:
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer("src", bootstrap_servers=bs, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    try:
        _until_assigned(lambda: c.poll(timeout_ms=300), c.assignment, group)
        tps = sorted(c.assignment())
        for _ in range(commits):
            c.commit({tp: OffsetAndMetadata(rnd.randrange(SRC_RECORDS + 1), _meta(rnd), -1) for tp in tps})
    finally:
        c.close()


def _confluent_commits(bs: str, group: str, commits: int, rnd: random.Random, protocol: str = "classic",
                       transactions: bool = False) -> dict:
    """Commits by a group member; with ``transactions`` then a committed and an aborted transactional commit
    (returns what the committed one sent)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    conf = {"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "log_level": 3}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    c = Consumer(conf)
    sent = {}
    try:
        c.subscribe(["src"])
        _until_assigned(lambda: c.poll(0.3), c.assignment, group)
        parts = sorted(tp.partition for tp in c.assignment())
        for _ in range(commits):
            c.commit(offsets=[TopicPartition("src", p, rnd.randrange(SRC_RECORDS + 1), metadata=_meta(rnd))
                              for p in parts], asynchronous=False)
        if transactions:
            # offsets committed in a transaction (then a marker in __consumer_offsets), one committed, one aborted
            p = Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{group}", "log_level": 3})
            p.init_transactions(60)
            for commit, targets in ((True, parts[:2]), (False, parts)):
                tps = [TopicPartition("src", q, rnd.randrange(SRC_RECORDS + 1), metadata=_meta(rnd)) for q in targets]
                p.begin_transaction()
                p.send_offsets_to_transaction(tps, c.consumer_group_metadata(), 60)
                (p.commit_transaction if commit else p.abort_transaction)(60)
                if commit:
                    sent = {(group, "src", tp.partition): (tp.offset, tp.metadata) for tp in tps}
            p.flush(10)
    finally:
        c.close()
    return sent


def _admin_offsets(bs: str, groups: list[str]) -> dict[tuple[str, str, int], tuple[int, str]]:
    """OffsetFetch through kafka-python's admin client (confluent-kafka 2.16 fails to decode long metadata)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        listed = admin.list_group_offsets({g: None for g in groups})
    finally:
        admin.close()
    return {(g, tp.topic, tp.partition): (om.offset, om.metadata or "")
            for g, parts in listed.items() for tp, om in parts.items() if om.offset >= 0}


def _group_activity(bs: str, version: str) -> tuple[list[str], dict, dict]:
    """Commits, a transactional commit and abort, deleted offsets and a deleted group; returns the groups and
    what the admin API reports for them afterwards."""
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient, TopicPartition

    rnd = random.Random(34)
    clients.produce(bs, "src", [clients.Record(b"v%d" % i, key=b"%d" % i, partition=i % SRC_PARTITIONS)
                                for i in range(SRC_RECORDS * SRC_PARTITIONS)], client="confluent")
    groups = ["g-del", "g-cf", "g-kp", "g-cf2"]
    admin = AdminClient({"bootstrap.servers": bs, "log_level": 0})
    # deletions first, so that their tombstones land in segments the cleaner rewrites
    _kafka_python_commits(bs, "g-del", 120, rnd)
    for fut in admin.delete_consumer_groups(["g-del"], request_timeout=30).values():
        fut.result(60)
    in_txn = _confluent_commits(bs, "g-cf", 260, rnd, transactions=True)
    kadmin = KafkaAdminClient(bootstrap_servers=bs)  # confluent-kafka has no DeleteConsumerGroupOffsets
    try:
        result = kadmin.delete_group_offsets("g-cf", [TopicPartition("src", 3)])
    finally:
        kadmin.close()
    assert all(err is None or getattr(err, "errno", 0) == 0 for err in result.values()), result
    # KIP-848 consumer protocol where the broker enables it by default (4.x)
    new_protocol = jars.parse_version(version) >= (4,)
    _confluent_commits(bs, "g-cf2", 150, rnd, protocol="consumer" if new_protocol else "classic")
    _kafka_python_commits(bs, "g-kp", 360, rnd)  # the tail: about 1.3 MiB after the deletions
    return groups, _admin_offsets(bs, groups), in_txn


def _rnd_round1(bs: str) -> None:
    rnd = random.Random(35)
    R = clients.Record
    keyed = functools.partial(keyed_records, rnd, size=300)

    clients.produce(bs, "rnd", keyed(2500, "n", 600, tomb_every=13), client="kafka-python", flush_every=250)
    clients.produce(bs, "rnd", keyed(2000, "g", 600, tomb_every=11), client="confluent", compression="gzip",
                    flush_every=250)
    clients.produce(bs, "rnd", keyed(1200, "z", 400, tomb_every=17), client="confluent", compression="zstd",
                    flush_every=200)
    tc = [R(rnd.randbytes(300), key=b"tc-%d" % i) for i in range(60)]
    clients.produce(bs, "rnd", tc, client="confluent", transactional_id="tx-rnd", transaction="commit",
                    flush_every=30)
    clients.produce(bs, "rnd", [R(rnd.randbytes(300), key=b"ta-%d" % i) for i in range(60)],
                    client="kafka-python", transactional_id="tx-rnd", transaction="abort", flush_every=30)
    # the committed transaction's records are all superseded: its marker loses its data
    clients.produce(bs, "rnd", [R(rnd.randbytes(300), key=r.key) for r in tc], client="kafka-python")
    clients.produce(bs, "rnd", [R(rnd.randbytes(300), key=b"tk-%d" % i) for i in range(40)],
                    client="confluent", transactional_id="tx-rnd", transaction="commit", flush_every=40)
    clients.produce(bs, "rnd", keyed(5500, "n", 600, tomb_every=7), client="kafka-python", flush_every=250)
    clients.produce(bs, "rnd", keyed(300, "tail", 300), client="kafka-python", flush_every=100)


def _rnd_more(bs: str, round_no: int) -> None:
    """About 1.2 MiB more for ``rnd`` before round ``round_no``: the log is dirty again and a segment rolls."""
    rnd = random.Random(36 + round_no)
    R = clients.Record
    recs = [R(None if i % 9 == 8 else rnd.randbytes(300), key=b"n-%d" % rnd.randrange(600)) for i in range(4000)]
    # tombstones this round keeps, with a delete horizon (which tells the broker's cleaning time)
    recs += [R(None, key=b"fresh%d-%d" % (round_no, i)) for i in range(30)]
    clients.produce(bs, "rnd", recs, client="kafka-python", flush_every=260)
    codec, client = ("snappy", "kafka-python") if round_no == 2 else ("lz4", "confluent")
    clients.produce(bs, "rnd", [R(None if i % 5 == 4 else rnd.randbytes(300), key=b"z-%d" % rnd.randrange(400))
                                for i in range(600)], client=client, compression=codec, flush_every=200)
    clients.produce(bs, "rnd", [R(b"t", key=b"tail%d-%d" % (round_no, i)) for i in range(200)], client="confluent",
                    flush_every=100)


# ------------------------------------------------------------------------------------------- running
def _horizons(pdir: Path) -> list[int]:
    return [b.delete_horizon_ms for p in sorted(pdir.glob("*.log")) for b in iter_batches(p.read_bytes())
            if b.has_delete_horizon]


def _kafkalog_compact(pdir: Path, now: int, version: str, server_properties: Path) -> dict:
    kv = ".".join(version.split(".")[:2])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = kafkalog_main(["compact", str(pdir), "--now", str(now), "--kafka-version", kv,
                            "--server-properties", str(server_properties), "--no-backup", "--json"])
    assert rc == 0, out.getvalue()
    (row,) = [r for r in map(json.loads, out.getvalue().splitlines()) if r.get("cleaned")]
    return row


def _cleaned_to(broker: Broker, expected: dict[tuple[str, int], int]):
    def cond() -> bool:
        ck = clean_points(broker.data_dir)
        return all(ck.get(k) == v for k, v in expected.items())
    return cond


# 3.9.2's rounds under -m campaign (make campaign): test_cleaner_diff keeps the 3.x cleaner in CI
@pytest.fixture(scope="module", params=[jars.LATEST_4, pytest.param(jars.LATEST_3, marks=pytest.mark.campaign)])
def rounds(request, tmp_path_factory):
    version = request.param
    root = tmp_path_factory.mktemp(f"rounds-{version}")
    t0 = time.monotonic()
    times = {}
    a = Broker(version, data_dir=root / "a" / "data", server_properties=BASE_PROPS)
    try:
        # phase 0: inputs
        a.start()
        a.create_topic("src", partitions=SRC_PARTITIONS)
        a.create_topic("rnd", config=RND_CONFIG)
        _rnd_round1(a.bootstrap_servers)
        groups, admin_offsets, in_txn = _group_activity(a.bootstrap_servers, version)
        a.stop()
        b1 = root / "b1" / "data"
        shutil.copytree(a.data_dir, b1)  # copy2: mtimes preserved
        shutil.copytree(a.data_dir, root / "in1" / "data")  # inputs kept for diagnosing a failure
        times["inputs"] = time.monotonic() - t0

        # phase 1: the broker's round 1 on both partitions
        a.extra_properties.update(PROMPT | {"log.cleaner.min.cleanable.ratio": "0.01"})
        expected = {(OFFSETS, 0): _segments(b1 / f"{OFFSETS}-0")[-1], ("rnd", 0): _segments(b1 / "rnd-0")[-1]}
        assert len(_segments(b1 / f"{OFFSETS}-0")) >= 3 and len(_segments(b1 / "rnd-0")) >= 3
        a.start()
        a.wait_until(_cleaned_to(a, expected), 90, "clean __consumer_offsets-0 and rnd-0")
        a.stop()
        r1 = root / "r1" / "data"
        shutil.copytree(a.data_dir, r1)
        props = root / "server.properties"  # the config of the broker's cleaning pass
        shutil.copy(a.properties_path, props)
        times["round1"] = time.monotonic() - t0

        # kafkalog round 1 on B1, each partition at the broker's cleaning time for it
        now1 = {}
        out1 = {}
        for topic, retention in ((OFFSETS, 86_400_000), ("rnd", RETENTION)):
            hz = _horizons(r1 / f"{topic}-0")
            assert hz, f"the broker's round 1 set no delete horizon in {topic}-0"
            now1[topic] = min(hz) - retention
            out1[topic] = _kafkalog_compact(b1 / f"{topic}-0", now1[topic], version, props)

        # rounds 2 and 3: rnd dirty again, the broker's clock past the earlier horizons, then a broker round
        later = {}
        for n in (2, 3):
            a.extra_properties.update({"log.cleaner.enable": "false"})
            a.start()
            _rnd_more(a.bootstrap_servers, n)
            a.stop()
            bn = root / f"b{n}" / "data"
            shutil.copytree(a.data_dir, bn)  # the broker's round-n input, byte for byte
            shutil.copytree(a.data_dir, root / f"in{n}" / "data")
            old = max(_horizons(bn / "rnd-0"))
            while int(time.time() * 1000) < old + 500:
                time.sleep(0.1)
            a.extra_properties.update({"log.cleaner.enable": "true"})
            a.start()
            a.wait_until(_cleaned_to(a, {("rnd", 0): _segments(bn / "rnd-0")[-1]}), 90, f"clean rnd-0 (round {n})")
            a.stop()
            rn = root / f"r{n}" / "data"
            shutil.copytree(a.data_dir, rn)
            new = [h for h in _horizons(rn / "rnd-0") if h > old]
            assert new, f"the broker's round {n} set no new delete horizon"
            now = max(new) - RETENTION
            later[n] = {"b": bn, "r": rn, "now": now, "out": _kafkalog_compact(bn / "rnd-0", now, version, props)}
            times[f"round{n}"] = time.monotonic() - t0
        times["total"] = time.monotonic() - t0
        print(f"\nrounds {version}: " + ", ".join(f"{k} {v:.1f}s" for k, v in times.items()))
        yield {"version": version, "b1": b1, "r1": r1, "groups": groups, "admin_offsets": admin_offsets,
               "in_txn": in_txn, "props": props,
               "now1": now1, "out1": out1, "later": later}
    finally:
        a.close()


# ------------------------------------------------------------------------------------------- comparing


def _tombstones_and_markers(pdir: Path, below: int) -> tuple[int, int]:
    """(tombstones, control batches) in segments below offset ``below``."""
    tombs = markers = 0
    for p in sorted(pdir.glob("*.log")):
        for b in iter_batches(p.read_bytes()):
            if b.base_offset >= below:
                continue
            if b.is_control:
                markers += 1
            else:
                tombs += sum(1 for t in b.iter_record_tuples() if t[3] is None)
    return tombs, markers


def _latest_commits(pdir: Path) -> tuple[dict, dict, int]:
    """Replay ``__consumer_offsets`` as the group coordinator loads it: the latest offset commit per
    (group, topic, partition) and the latest group metadata per group (None: a tombstone), with
    transactional commits applied at their COMMIT marker and dropped at ABORT. Every record is decoded."""
    offsets: dict[tuple[str, str, int], tuple[int, str] | None] = {}
    groups: dict[str, object] = {}
    pending: dict[int, list] = {}
    decoded = 0
    for p in sorted(pdir.glob("*.log")):
        for b in iter_batches(p.read_bytes(), path=str(p)):
            if b.is_control:
                for r in b.records():
                    kind = parse_control_key(r.key)[1] if r.key is not None else None
                    staged = pending.pop(b.producer_id, [])
                    if kind == 1:  # COMMIT
                        offsets.update(staged)
                continue
            for r in b.records():
                rtype, key = parse_offsets_key(r.key)
                assert key is not None, (p.name, r.offset, rtype)
                value = parse_offsets_value(rtype, r.value)
                decoded += 1
                if rtype in (0, 1):
                    k = (key["group"], key["topic"], key["partition"])
                    v = None if value is None else (value[1]["offset"], value[1]["metadata"])
                    if b.is_transactional:
                        pending.setdefault(b.producer_id, []).append((k, v))
                    else:
                        offsets[k] = v
                elif rtype == 2:
                    groups[key["group"]] = value
    return {k: v for k, v in offsets.items() if v is not None}, groups, decoded


@pytest.fixture(params=["a", "b"])
def side(request):
    return request.param


def test_offsets_topic_cleaned_as_the_broker_cleans_it(rounds):
    pa, pb = rounds["r1"] / f"{OFFSETS}-0", rounds["b1"] / f"{OFFSETS}-0"
    assert rounds["out1"][OFFSETS]["cleaned"], rounds["out1"][OFFSETS]
    assert rounds["out1"][OFFSETS]["bytesReclaimed"] > 2 * SEGMENT
    assert compare_cleaned(pa, pb, active_may_grow=True, rebuilt_timeindex=False) > 0
    ca, cb = clean_points(rounds["r1"]), clean_points(rounds["b1"])
    assert ca[(OFFSETS, 0)] == cb[(OFFSETS, 0)] == rounds["out1"][OFFSETS]["endOffset"]


def test_offsets_topic_keeps_the_latest_commits(rounds, side):
    pdir = (rounds["r1"] if side == "a" else rounds["b1"]) / f"{OFFSETS}-0"
    offsets, groups, decoded = _latest_commits(pdir)
    assert decoded > 0
    expected = rounds["admin_offsets"]
    assert {k for k in expected if k[0] == "g-cf"} == {("g-cf", "src", p) for p in (0, 1, 2)}
    # the committed transaction's offsets are the latest (librdkafka sends TxnOffsetCommit metadata with its C
    # string terminator, which the broker stores)
    in_txn = {k: (o, m.rstrip("\x00")) for k, (o, m) in expected.items() if k in rounds["in_txn"]}
    assert rounds["in_txn"] and in_txn == rounds["in_txn"]
    assert expected and not any(k[0] == "g-del" for k in expected)
    assert offsets == expected
    assert groups.get("g-del") is None  # the deleted group's tombstone (or nothing) is what remains


def test_offsets_topic_config_is_the_brokers(rounds):
    """kafkalog compact found the broker's config: segment.bytes and the compact policy from the
    __cluster_metadata ConfigRecords of the auto-created topic, the min ratio from server.properties."""
    cfg = ConfigResolver(str(rounds["props"])).log_config(rounds["b1"], OFFSETS)
    assert cfg.compact and cfg.segment_bytes == SEGMENT and cfg.min_cleanable_dirty_ratio == 0.01
    assert cfg.delete_retention_ms == 86_400_000
    # without server.properties (offsets.topic.segment.bytes defaults to 100 MiB) the metadata log still tells
    assert ConfigResolver().log_config(rounds["b1"], OFFSETS).segment_bytes == SEGMENT


def test_round_one_on_rnd_equals_the_brokers(rounds):
    pa, pb = rounds["r1"] / "rnd-0", rounds["b1"] / "rnd-0"
    assert rounds["out1"]["rnd"]["cleaned"]
    assert compare_cleaned(pa, pb, rebuilt_timeindex=False) > 0
    assert clean_points(rounds["r1"])[("rnd", 0)] == clean_points(rounds["b1"])[("rnd", 0)]
    # round 1 keeps tombstones (now with a KIP-534 delete horizon) and both transaction markers
    tombs, markers = _tombstones_and_markers(pa, rounds["out1"]["rnd"]["endOffset"])
    assert tombs > 0 and markers >= 2


@pytest.mark.parametrize("n", [2, 3])
def test_later_round_on_rnd_equals_the_brokers(rounds, n):
    r = rounds["later"][n]
    out = r["out"]
    assert out["cleaned"] and out["firstDirtyOffset"] > 0, out
    assert compare_cleaned(r["r"] / "rnd-0", r["b"] / "rnd-0", rebuilt_timeindex=False) > 0
    assert clean_points(r["r"])[("rnd", 0)] == clean_points(r["b"])[("rnd", 0)] \
        == out["endOffset"]


def _markers(pdir: Path) -> dict[int, int | None]:
    """Offset -> delete horizon (None: not set) of every transaction marker."""
    return {b.base_offset: b.delete_horizon_ms if b.has_delete_horizon else None
            for p in sorted(pdir.glob("*.log")) for b in iter_batches(p.read_bytes()) if b.is_control}


def test_tombstones_and_markers_go_after_their_delete_horizon(rounds):
    """Kafka's order (LogCleaner + CleanedTransactionMetadata): round 1 keeps tombstones and sets their
    horizon, and keeps both markers without one (their transactions still had batches in that pass); round 2
    removes the expired tombstones and, the transactions now empty, gives the two markers a horizon; round 3
    removes those markers. The marker of the transaction whose records survive stays."""
    clean_point = rounds["out1"]["rnd"]["endOffset"]  # round 1's cleaned section
    r1, r2, r3 = rounds["r1"] / "rnd-0", rounds["later"][2]["r"] / "rnd-0", rounds["later"][3]["r"] / "rnd-0"
    m1, m2, m3 = _markers(r1), _markers(r2), _markers(r3)
    assert len(m1) == 3 and set(m1.values()) == {None}
    assert m2.keys() == m1.keys()
    emptied = sorted(o for o, h in m2.items() if h is not None)
    assert len(emptied) == 2 and max(m2.values(), key=lambda h: h or 0) == rounds["later"][2]["now"] + RETENTION
    assert m3.keys() == m1.keys() - set(emptied) and set(m3.values()) == {None}
    t1, _ = _tombstones_and_markers(r1, clean_point)
    t2, _ = _tombstones_and_markers(r2, clean_point)
    assert t1 > 0 and t2 == 0
