"""``kafkalog groups`` (storage/reports/groups.py): groups and committed offsets replayed from ``__consumer_offsets`` as
the coordinator loads them, on the real fixtures and on synthetic partitions built with the decoders' own
message specs (``Message.write``); the CLI views and the ``group`` JSON Schema. The broker comparison is
tests/kafka/test_groups_diff.py."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import shutil
import struct
import uuid
from pathlib import Path

import pytest

from kafkalog.facts import render
from kafkalog.storage.decoders.offsets_schemas import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    RECORD_TYPES,
)
from kafkalog.storage.engine.writer import LogWriter
from kafkalog.storage.records.builder import build_batch, build_end_txn_marker
from kafkalog.storage.reports.group_coordinator import GroupCoordinatorShard
from kafkalog.storage.reports.groups import load_groups
from kafkalog.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
T0 = 1_700_000_000_000
I16 = struct.Struct(">h")


# ------------------------------------------------------------------------------------------- record builders


def key(record_type: int, **fields) -> bytes:
    return I16.pack(record_type) + RECORD_TYPES[record_type].key.write(fields, 0)


def value(record_type: int, version: int, **fields) -> bytes:
    msg = RECORD_TYPES[record_type].value
    data = msg.defaults(version) | fields
    return I16.pack(version) + msg.write(data, version)


def commit(group: str, topic: str, partition: int, offset: int) -> tuple[bytes, bytes]:
    return (key(1, group=group, topic=topic, partition=partition),
            value(1, 3, offset=offset, leaderEpoch=0, metadata="", commitTimestamp=T0))


def commit_tombstone(group: str, topic: str, partition: int) -> tuple[bytes, None]:
    return key(1, group=group, topic=topic, partition=partition), None


def classic_group(group: str, members: list[tuple[str, list[tuple[str, list[int]]]]] = (), generation: int = 1):
    ms = []
    for member_id, assignment in members:
        a = I16.pack(0) + CONSUMER_PROTOCOL_ASSIGNMENT.write(
            {"assignedPartitions": [{"topic": t, "partitions": ps} for t, ps in assignment], "userData": None}, 0)
        ms.append({"memberId": member_id, "groupInstanceId": None, "clientId": "cli", "clientHost": "/10.0.0.1",
                   "rebalanceTimeout": 300000, "sessionTimeout": 45000, "subscription": b"", "assignment": a})
    return key(2, group=group), value(2, 3, protocolType="consumer", generation=generation,
                                      protocol="range" if ms else None, leader=ms[0]["memberId"] if ms else None,
                                      currentStateTimestamp=T0, members=ms)


_RECORD_OFFSET = itertools.count(1000)


def replay(records, shard: GroupCoordinatorShard | None = None, producer_id: int = -1) -> GroupCoordinatorShard:
    """Replay (key, value) pairs at increasing record offsets, as one producer's (-1: plain) records."""
    shard = shard or GroupCoordinatorShard(0, "d")
    for k, v in records:
        shard.replay(next(_RECORD_OFFSET), producer_id, k, v)
    return shard


def groups_of(shard: GroupCoordinatorShard, names: dict[str, str] | None = None) -> dict:
    return {g.group_id: g for g in shard.finish(names or {})}


def offsets_of(g) -> dict:
    return {tp: o.offset for tp, o in g.offsets.items()}


# ------------------------------------------------------------------------------------------ the replay rules


def test_latest_commit_wins_and_a_tombstone_deletes_it():
    s = replay([commit("g", "t", 0, 5), commit("g", "t", 0, 9), commit("g", "t", 1, 3),
                commit_tombstone("g", "t", 1)])
    g = groups_of(s)["g"]
    assert offsets_of(g) == {("t", 0): 9}
    assert g.is_simple and g.state == "Empty" and g.type == "classic"  # created by the commit alone


def test_a_group_tombstone_deletes_the_group():
    s = replay([classic_group("g"), commit("g", "t", 0, 5), commit_tombstone("g", "t", 0), (key(2, group="g"), None),
                classic_group("kept"), commit("kept", "t", 0, 1)])
    assert set(groups_of(s)) == {"kept"}


def test_offsets_of_a_removed_group_are_invisible():
    s = replay([commit("g", "t", 0, 5), (key(2, group="g"), None)])
    assert groups_of(s) == {}


def test_classic_group_members_and_assignment():
    s = replay([classic_group("g", [("m1", [("t", [0, 1])]), ("m2", [("t", [2])])], generation=4),
                commit("g", "t", 0, 5)])
    g = groups_of(s)["g"]
    assert g.state == "Stable" and g.generation == 4 and g.protocol == "range" and g.protocol_type == "consumer"
    assert g.members["m1"].assignment == [("t", 0), ("t", 1)] and g.members["m2"].client_host == "/10.0.0.1"
    rows = g.describe_rows({("t", 1): 20, ("t", 2): 30})
    assert [(r["partition"], r["consumerId"], r["currentOffset"]) for r in rows] == [
        (0, "m1", 5), (1, "m1", None), (2, "m2", None)]
    assert rows[1]["logEndOffset"] == 20 and rows[1]["lag"] is None


def test_transactional_commits_wait_for_their_marker():
    s = replay([commit("g", "t", 0, 1)])
    replay([commit("g", "t", 0, 7), commit("g", "t", 1, 8)], s, producer_id=42)
    replay([commit("g", "t", 2, 9)], s, producer_id=43)
    g = groups_of(s)["g"]
    assert offsets_of(g) == {("t", 0): 1} and g.pending_transactional_offsets == 3
    s.end_transaction(42, commit=True)
    s.end_transaction(43, commit=False)
    g = groups_of(s)["g"]
    assert offsets_of(g) == {("t", 0): 7, ("t", 1): 8} and g.pending_transactional_offsets == 0


def test_a_later_plain_commit_beats_an_earlier_transactional_one():
    s = GroupCoordinatorShard(0, "d")
    k, v = commit("g", "t", 0, 7)
    s.replay(10, 42, k, v)  # transactional, record offset 10
    k, v = commit("g", "t", 0, 3)
    s.replay(11, -1, k, v)  # plain, record offset 11
    s.end_transaction(42, commit=True)
    assert offsets_of(groups_of(s)["g"]) == {("t", 0): 3}


def test_a_tombstone_drops_pending_transactional_commits():
    s = replay([commit("g", "t", 0, 1)])
    replay([commit("g", "t", 0, 7)], s, producer_id=42)
    replay([commit_tombstone("g", "t", 0)], s)
    s.end_transaction(42, commit=True)
    assert offsets_of(groups_of(s)["g"]) == {}


def _cg(group: str, epoch: int):
    return key(3, groupId=group), value(3, 0, epoch=epoch)


def _cg_member(group: str, member: str):
    return key(5, groupId=group, memberId=member), value(
        5, 0, instanceId=None, rackId=None, clientId="c-" + member, clientHost="/h", subscribedTopicNames=["t"],
        subscribedTopicRegex=None, rebalanceTimeoutMs=1000, serverAssignor="uniform", classicMemberMetadata=None)


def _cg_current(group: str, member: str, epoch: int, state: int, tid: uuid.UUID, parts: list[int]):
    return key(8, groupId=group, memberId=member), value(
        8, 0, memberEpoch=epoch, previousMemberEpoch=epoch - 1, state=state,
        assignedPartitions=[{"topicId": tid, "partitions": parts, "assignmentEpochs": None}],
        partitionsPendingRevocation=[])


def _cg_target_epoch(group: str, epoch: int):
    return key(6, groupId=group), value(6, 0, assignmentEpoch=epoch)


def test_consumer_group_state_as_the_broker_computes_it():
    tid = uuid.UUID(int=7)
    from kafkalog.storage.decoders.common import uuid_to_kafka_str

    names = {uuid_to_kafka_str(tid): "t"}
    s = replay([_cg_member("cg", "m1"), _cg("cg", 3), _cg_target_epoch("cg", 2)])
    assert groups_of(s, names)["cg"].state == "Assigning"  # group epoch > target assignment epoch
    replay([_cg_target_epoch("cg", 3), _cg_current("cg", "m1", 2, 0, tid, [0])], s)
    assert groups_of(s, names)["cg"].state == "Reconciling"  # member epoch behind
    replay([_cg_current("cg", "m1", 3, 0, tid, [0, 1])], s)
    g = groups_of(s, names)["cg"]
    assert g.state == "Stable" and g.type == "consumer" and g.protocol == "uniform"
    assert g.members["m1"].assignment == [("t", 0), ("t", 1)] and g.members["m1"].client_id == "c-m1"
    # the member leaves: current assignment, target, member tombstones; then the group's
    replay([(key(8, groupId="cg", memberId="m1"), None), (key(7, groupId="cg", memberId="m1"), None),
            (key(5, groupId="cg", memberId="m1"), None)], s)
    assert groups_of(s, names)["cg"].state == "Empty"
    replay([(key(6, groupId="cg"), None), (key(3, groupId="cg"), None)], s)
    assert groups_of(s, names) == {}


def test_unknown_record_types_are_noted_not_fatal():
    s = replay([(I16.pack(99) + b"xx", b"\x00\x00")])
    assert groups_of(s) == {} and "unknown record type 99" in render(s.notes[0])


# ------------------------------------------------------------------------------------------------ from files


def test_fixture_4_3_1_classic_and_consumer_groups():
    r = load_groups([FIXTURES / "kafka-4.3.1-kraft" / "data"])
    assert r.errors == [] and len(r.partitions) == 5
    got = {g.group_id: (g.type, g.state, {tp: (o.offset, o.lag) for tp, o in g.offsets.items()}) for g in r.groups}
    assert got == {
        "group-confluent": ("classic", "Empty", {("codec-gzip", 0): (60, 0)}),
        "group-kafka-python": ("classic", "Empty", {("codec-none", 0): (60, 0)}),
        "group-consumer-protocol": ("consumer", "Empty", {("multi-segment", 0): (150, 0),
                                                           ("multi-segment", 1): (150, 0)}),
    }
    cg = next(g for g in r.groups if g.type == "consumer")
    assert cg.generation == 3 and cg.assignment_epoch == 2
    assert all(o.log_end_offset_source == "highWatermark" for g in r.groups for o in g.offsets.values())



def test_a_dir_given_twice_is_read_once():
    """The same data dir twice (a partition dir and its data dir too): each __consumer_offsets partition is replayed
    once, as a partition once (the first wins); groups were listed twice."""
    data = FIXTURES / "kafka-4.3.1-kraft" / "data"
    once = load_groups([data])
    for dirs in ([data, data], [data / "__consumer_offsets-0", data]):
        r = load_groups(dirs)
        assert len(r.partitions) == len(once.partitions)
        assert [g.group_id for g in r.groups] == [g.group_id for g in once.groups]

@pytest.mark.parametrize("fixture", ["kafka-3.9.2-zk-v0", "kafka-3.9.2-zk-v1", "kafka-3.9.2-kraft"])
def test_fixture_3_9_groups(fixture):
    r = load_groups([FIXTURES / fixture / "data"])
    assert r.errors == []
    assert {g.group_id: offsets_of(g) for g in r.groups} == {
        "group-confluent": {("codec-gzip", 0): 60}, "group-kafka-python": {("codec-none", 0): 60}}


def test_killed_broker_lag_against_the_log_end_offset():
    r = load_groups([FIXTURES / "kafka-4.3.1-kraft-killed" / "data"])
    (g,) = r.groups
    assert {tp: (o.offset, o.log_end_offset, o.lag, o.log_end_offset_source) for tp, o in g.offsets.items()} == {
        ("killed", 0): (50, 100, 50, "logEndOffset"), ("killed", 1): (50, 100, 50, "logEndOffset")}


def test_partition_dirs_and_missing_topic_partitions(tmp_path: Path):
    src = FIXTURES / "kafka-4.3.1-kraft" / "data"
    r = load_groups([src / "__consumer_offsets-0"])  # only the coordinator partition: no end offsets
    (g,) = r.groups
    assert g.group_id == "group-confluent"
    assert [(o.log_end_offset, o.lag) for o in g.offsets.values()] == [(None, None)]


def _offsets_partition(root: Path) -> Path:
    d = root / "__consumer_offsets-0"
    with LogWriter(d, now_ms=T0) as w:
        for k, v in [classic_group("g"), commit("g", "orders", 0, 4)]:
            w.append(build_batch([(None, T0, k, v)]))
        k, v = commit("g", "orders", 0, 6)
        w.append(build_batch([(None, T0, k, v)], producer_id=5, producer_epoch=0, base_sequence=0,
                             is_transactional=True))
        w.append(build_end_txn_marker(offset=0, producer_id=5, producer_epoch=0, coordinator_epoch=1, commit=True,
                                      timestamp=T0))
        k, v = commit("g", "orders", 0, 8)
        w.append(build_batch([(None, T0, k, v)], producer_id=6, producer_epoch=0, base_sequence=0,
                             is_transactional=True))
        w.append(build_end_txn_marker(offset=0, producer_id=6, producer_epoch=0, coordinator_epoch=1, commit=False,
                                      timestamp=T0))
    with LogWriter(root / "orders-0", now_ms=T0) as w:
        w.append(build_batch([(None, T0, None, b"x") for _ in range(10)]))
    return d


def test_markers_in_a_real_partition(tmp_path: Path):
    _offsets_partition(tmp_path)
    r = load_groups([tmp_path])
    (g,) = r.groups
    assert offsets_of(g) == {("orders", 0): 6} and g.offsets[("orders", 0)].lag == 4
    assert g.offsets[("orders", 0)].log_end_offset_source == "logEndOffset"  # no replication-offset-checkpoint


def test_corrupt_partition_reads_up_to_the_damage_and_exits_1(tmp_path: Path):
    d = _offsets_partition(tmp_path)
    seg = d / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[-30] ^= 0x5A  # inside the last batch (the aborted transaction's marker)
    seg.write_bytes(bytes(data))
    r = load_groups([tmp_path])
    assert len(r.errors) == 1 and r.errors[0].file == str(seg) and r.errors[0].kind == "groups.crcMismatch"
    assert render(r.errors[0]) == f"{seg}: byte {r.errors[0].facts['position']}: batch at offset " \
        f"{r.errors[0].facts['offset']} has a CRC mismatch: groups read up to it"
    assert offsets_of(r.groups[0]) == {("orders", 0): 6}
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(["groups", str(tmp_path)]) == 1
    assert "error:" in err.getvalue()


# ----------------------------------------------------------------------------------------------------- the CLI


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def test_cli_views():
    data = str(FIXTURES / "kafka-4.3.1-kraft" / "data")
    rc, out, _ = run_cli(["groups", data])
    assert rc == 0
    assert "CURRENT-OFFSET" in out and "LOG-END-OFFSET" in out and "group-consumer-protocol" in out
    rc, out, _ = run_cli(["groups", data, "--state", "--group", "group-confluent"])
    assert rc == 0 and "group-confluent" in out and "group-kafka-python" not in out and "Empty" in out
    rc, out, _ = run_cli(["groups", data, "--members"])
    assert rc == 0 and "CONSUMER-ID" in out
    rc, out, err = run_cli(["groups", data, "--group", "nope"])
    assert rc == 1 and "does not exist" in err
    rc, out, err = run_cli(["groups", str(FIXTURES / "README.md")])
    assert rc == 1 and f"{FIXTURES / 'README.md'}: not a directory (expected a Kafka data dir" in err


def test_cli_json_validates_against_the_group_schema():
    import jsonschema
    schema = json.loads((ROOT / "docs" / "schemas" / "group.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    n = 0
    for fixture in ("kafka-4.3.1-kraft", "kafka-3.9.2-zk-v0", "kafka-4.3.1-kraft-killed"):
        rc, out, _ = run_cli(["groups", "--json", str(FIXTURES / fixture / "data")])
        assert rc == 0
        for line in out.splitlines():
            validator.validate(json.loads(line))
            n += 1
    assert n == 6


def test_cli_json_of_a_stable_group_validates(tmp_path: Path):
    import jsonschema
    schema = json.loads((ROOT / "docs" / "schemas" / "group.schema.json").read_text())
    d = tmp_path / "__consumer_offsets-0"
    with LogWriter(d, now_ms=T0) as w:
        for k, v in [classic_group("g", [("m1", [("t", [0])])]), commit("g", "t", 0, 1)]:
            w.append(build_batch([(None, T0, k, v)]))
    rc, out, _ = run_cli(["groups", "--json", str(tmp_path)])
    assert rc == 0
    obj = json.loads(out)
    jsonschema.validate(obj, schema)
    assert obj["state"] == "Stable" and obj["offsets"][0]["consumerId"] == "m1"
    shutil.rmtree(d)


def test_torn_tail_is_noted_and_ignored_as_recovery_would(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft-killed" / "data", data)
    seg = data / "__consumer_offsets-3" / "00000000000000000000.log"
    with open(seg, "r+b") as f:
        f.truncate(700)  # inside the last batch (the group's empty GroupMetadata after the member left)
    r = load_groups([data])
    assert r.errors == [] and "65 bytes at the end (from byte 635)" in render(r.notes[0])
    (g,) = r.groups
    assert g.state == "Stable" and offsets_of(g) == {("killed", 0): 50, ("killed", 1): 50}
    rc, out, err = run_cli(["groups", "--offsets", str(data)])
    assert rc == 0 and "note:" in err and "rdkafka-" in out
