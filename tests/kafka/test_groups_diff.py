"""``kafkalog groups`` against ``kafka-consumer-groups.sh --describe --all-groups`` on a real broker (issue 15).

One broker per Kafka version (module scope). Two topics (``orders``: 3 partitions, ``payments``: 2), and groups
that cover what the coordinator's load must get right:

* ``g-partial``: a classic consumer (confluent) that commits offsets short of the end (lag > 0), then leaves;
* ``g-python``: a kafka-python classic consumer that commits everything (lag 0);
* ``g-simple``: offsets set with ``alter_consumer_group_offsets`` (no member ever: a "simple" group);
* ``g-offsets-deleted``: commits on both topics, then ``delete_consumer_group_offsets`` of ``payments``;
* ``g-deleted``: commits, then ``delete_consumer_groups``: absent;
* ``g-txn``: a transactional producer's ``send_offsets_to_transaction``, committed; then the same
  partitions again in an aborted transaction: the committed values stay;
* ``g-active``: a classic member still in the group (Stable) when the broker stops: its consumer id, host and
  client id are on its rows;
* 4.x: ``g-kip848``: a KIP-848 (``group.protocol=consumer``) consumer that commits and leaves, and
  ``g-kip848-active``: one still in its (Stable) group when the broker stops.

Kafka's ``ConsumerGroupCommand --describe --all-groups`` (and ``--state``) runs against the live broker; the
broker is stopped cleanly and ``kafkalog groups`` (the library and the CLI's JSON) must give the same rows:
groups, committed offsets, log end offsets (high watermark), lags, members, states.
"""

from __future__ import annotations

import io
import json
import threading
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from kafkalog.compat.clients import Record, consume, create_topic, produce
from kafkalog.compat.tools import run_tool
from kafkalog.storage.reports.groups import load_groups
from kafkalog.tools.cli import main

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
ORDERS, PAYMENTS, TXN_OUT = "orders", "payments", "txn-out"


def _records(n: int, partitions: int) -> list[Record]:
    return [Record(value=f"v{i}".encode(), key=f"k{i}".encode(), partition=i % partitions) for i in range(n)]


def _confluent(bs: str, group: str, **extra) -> object:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "log_level": 3, **extra})


def _commit(bs: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit explicit offsets as a member of ``group`` (subscribed, so it is a real classic group)."""
    from confluent_kafka import TopicPartition as TP

    c = _confluent(bs, group)
    try:
        c.subscribe(sorted({t for t, _ in offsets}))
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        c.commit(offsets=[TP(t, p, o) for (t, p), o in sorted(offsets.items())], asynchronous=False)
    finally:
        c.close()


def _parse_describe(stdout: str) -> set[tuple[str, ...]]:
    rows = set()
    for line in stdout.splitlines():
        cells = line.split()
        if len(cells) == 9 and cells[0] != "GROUP":
            rows.add(tuple(cells))
    return rows


def _parse_state(stdout: str) -> dict[str, tuple[str, str, int]]:
    out = {}
    for line in stdout.splitlines():
        cells = line.split()
        if len(cells) >= 4 and cells[0] != "GROUP" and cells[-1].isdigit():
            strategy = "-" if cells[-3].startswith("(") else cells[-3]  # 3.x prints an empty one as blank
            out[cells[0]] = (strategy, cells[-2], int(cells[-1]))
    return out


def _dash(v) -> str:
    return "-" if v is None else str(v)


@pytest.fixture(scope="module")
def scenario(kafka_version: str, module_broker_factory) -> dict:
    from confluent_kafka import ConsumerGroupTopicPartitions, Producer
    from confluent_kafka import TopicPartition as TP
    from confluent_kafka.admin import AdminClient
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient

    four = int(kafka_version.split(".")[0]) >= 4
    broker = module_broker_factory(kafka_version)
    bs = broker.bootstrap_servers
    create_topic(bs, ORDERS, partitions=3)
    create_topic(bs, PAYMENTS, partitions=2)
    create_topic(bs, TXN_OUT, partitions=1)
    produce(bs, ORDERS, _records(30, 3), client="confluent")
    produce(bs, PAYMENTS, _records(20, 2), client="confluent")
    admin = AdminClient({"bootstrap.servers": bs, "log_level": 0})

    _commit(bs, "g-partial", {(ORDERS, 0): 4, (ORDERS, 1): 10, (PAYMENTS, 1): 3})
    consume(bs, ORDERS, client="kafka-python", count=30, group_id="g-python", commit=True, idle=2)
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("g-simple", [TP(PAYMENTS, 0, 7)])])[
        "g-simple"].result(30)
    _commit(bs, "g-offsets-deleted", {(ORDERS, 2): 5, (PAYMENTS, 0): 2, (PAYMENTS, 1): 6})
    kp_admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        result = kp_admin.delete_group_offsets("g-offsets-deleted", [KTP(PAYMENTS, 0), KTP(PAYMENTS, 1)])
    finally:
        kp_admin.close()
    assert all(getattr(e, "errno", 0) == 0 for e in result.values()), result
    _commit(bs, "g-deleted", {(ORDERS, 0): 9})
    admin.delete_consumer_groups(["g-deleted"])["g-deleted"].result(30)

    # transactional offset commits: one committed, then one aborted (the committed values stay)
    meta_consumer = _confluent(bs, "g-txn")
    p = Producer({"bootstrap.servers": bs, "transactional.id": "groups-txn", "log_level": 3})
    p.init_transactions(30)
    for offsets, commit in (({(ORDERS, 1): 8, (PAYMENTS, 0): 3}, True), ({(ORDERS, 1): 9, (PAYMENTS, 1): 4}, False)):
        p.begin_transaction()
        p.produce(TXN_OUT, b"x")
        p.send_offsets_to_transaction([TP(t, q, o) for (t, q), o in offsets.items()],
                                      meta_consumer.consumer_group_metadata(), 30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    meta_consumer.close()

    if four:  # KIP-848 consumer group
        consume(bs, PAYMENTS, client="confluent", count=20, group_id="g-kip848", commit=True,
                group_protocol="consumer", idle=2)

    # members still in their groups when the broker stops: classic, and (4.x) KIP-848
    actives = [_confluent(bs, "g-active", **{"client.id": "active-client"})]
    if four:
        actives.append(_confluent(bs, "g-kip848-active", **{"client.id": "active-848", "group.protocol": "consumer"}))
    for active in actives:
        active.subscribe([ORDERS])
    for active in actives:
        got, deadline = 0, time.monotonic() + 30
        while got < 30 and time.monotonic() < deadline:
            m = active.poll(0.3)
            got += m is not None and not m.error()
        active.commit(asynchronous=False)
    if four:  # until the KIP-848 member has reconciled its assignment (the group is Stable)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            d = admin.describe_consumer_groups(["g-kip848-active"])["g-kip848-active"].result(10)
            if str(d.state).endswith("STABLE"):
                break
            actives[1].poll(0.2)

    describe = run_tool(kafka_version, TOOL, ["--bootstrap-server", bs, "--describe", "--all-groups"], timeout=120)
    state = run_tool(kafka_version, TOOL, ["--bootstrap-server", bs, "--describe", "--all-groups", "--state"],
                     timeout=120)
    broker.stop()
    for active in actives:  # the broker is gone: do not wait for them
        threading.Thread(target=active.close, daemon=True).start()
    return {"version": kafka_version, "four": four, "data": Path(broker.data_dir), "describe": describe,
            "state": state}


def test_kafka_tool_ran(scenario):
    assert scenario["describe"].returncode == 0, scenario["describe"].stderr[-2000:]
    assert scenario["state"].returncode == 0, scenario["state"].stderr[-2000:]


def test_same_rows_as_kafka_consumer_groups_describe(scenario):
    want = _parse_describe(scenario["describe"].stdout)
    report = load_groups([scenario["data"]])
    assert report.errors == []
    got = {tuple(_dash(r[k]) for k in ("group", "topic", "partition", "currentOffset", "logEndOffset", "lag",
                                        "consumerId", "host", "clientId")) for r in report.describe_rows()}
    assert got == want
    groups = {r[0] for r in want}
    assert {"g-partial", "g-python", "g-simple", "g-offsets-deleted", "g-txn", "g-active"} <= groups
    assert "g-deleted" not in groups
    assert not any(r[0] == "g-offsets-deleted" and r[1] == PAYMENTS for r in want)
    assert scenario["four"] == ("g-kip848" in groups) == ("g-kip848-active" in groups)
    if scenario["four"]:  # the KIP-848 member's rows: its assignment (topic ids resolved) and identity
        assert {r[6:] for r in want if r[0] == "g-kip848-active"} == {
            (next(r[6] for r in want if r[0] == "g-kip848-active"), "/127.0.0.1", "active-848")}


def test_same_states_and_member_counts(scenario):
    want = _parse_state(scenario["state"].stdout)
    report = load_groups([scenario["data"]])
    # ASSIGNMENT-STRATEGY: a classic group's protocol; a KIP-848 group's is the broker's configured default
    # (group.consumer.assignors) unless its members name one: not in the files, so not compared
    got = {g.group_id: (_dash(g.protocol) if g.type == "classic" else want.get(g.group_id, ("?",))[0], g.state,
                        len(g.members)) for g in report.groups}
    assert got == want
    assert want["g-active"] == ("range", "Stable", 1)
    if scenario["four"]:
        assert want["g-kip848-active"][1:] == ("Stable", 1)
    assert "g-deleted" not in got


def test_transactional_commits_and_group_types(scenario):
    report = load_groups([scenario["data"]])
    groups = {g.group_id: g for g in report.groups}
    txn = groups["g-txn"]
    assert {tp: o.offset for tp, o in txn.offsets.items()} == {(ORDERS, 1): 8, (PAYMENTS, 0): 3}
    assert txn.pending_transactional_offsets == 0
    assert groups["g-simple"].is_simple and groups["g-simple"].state == "Empty"
    assert groups["g-partial"].protocol_type == "consumer"
    assert {tp: o.lag for tp, o in groups["g-partial"].offsets.items()} == {
        (ORDERS, 0): 6, (ORDERS, 1): 0, (PAYMENTS, 1): 7}
    if scenario["four"]:
        assert groups["g-kip848"].type == "consumer"
    assert all(o.log_end_offset_source == "highWatermark" for g in report.groups for o in g.offsets.values())


def test_cli_json(scenario):
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["groups", "--json", str(scenario["data"])]) == 0
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert [o["groupId"] for o in lines] == sorted(o["groupId"] for o in lines)
    want = _parse_describe(scenario["describe"].stdout)
    committed = {(o["groupId"], x["topic"], str(x["partition"]), str(x["committedOffset"]), str(x["lag"]))
                 for o in lines for x in o["offsets"]}
    assert committed == {(r[0], r[1], r[2], r[3], r[5]) for r in want if r[3] != "-"}
