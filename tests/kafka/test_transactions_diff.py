"""``kafkalog transactions`` against Kafka's own ``kafka-transactions.sh`` (TransactionsCommand), Kafka 4.3.1 only
(one broker run shared by the module, ~60 s).

On a real broker: a transactional producer (``abandoned``) writes to 2 partitions and is SIGKILLed inside its
transaction (``transaction.timeout.ms`` 15 min: the coordinator keeps it Ongoing), another (``committed``)
commits, the broker is SIGKILLed (its files are read as they are then), restarted and stopped; then, broker stopped, a transactional batch of a producer id no coordinator knows is appended offline
(a hanging transaction, as a lost marker leaves it). Restarted, the broker's ``describe-producers`` (every open
transaction), ``find-hanging``, ``describe`` and ``list`` are compared with what kafkalog reads from the files
once the broker is stopped again. The records carry timestamps an hour old so that find-hanging, which skips
producers that wrote less than ``--max-transaction-timeout`` (15) minutes ago, considers them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

VERSION = "4.3.1"
TXN_CLASS = "org.apache.kafka.tools.TransactionsCommand"
HOUR_AGO = int(time.time() * 1000) - 3_600_000
HANGING_PID = 999

PRODUCER = """
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "abandoned", "transaction.timeout.ms": 900000,
              "linger.ms": 5, "log_level": 3})
p.init_transactions(60)
p.begin_transaction()
for part, n in ((0, 3), (1, 2)):
    for i in range(n):
        p.produce("txn-open", value=b"v%d" % i, key=b"k%d" % i, partition=part, timestamp=int(sys.argv[2]) + i)
assert p.flush(60) == 0
print("ready", flush=True)
time.sleep(600)
"""


def _table(text: str) -> list[dict[str, str]]:
    """A ToolsUtils.prettyPrintTable table (no cell holds spaces) as dicts."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    return [dict(zip(lines[0], row, strict=True)) for row in lines[1:]] if lines else []


def _tool(bs: str, *args: str) -> list[dict[str, str]]:
    from kafkalog.compat.tools import run_tool

    p = run_tool(VERSION, TXN_CLASS, ["--bootstrap-server", bs, *args], timeout=120)
    assert p.returncode == 0, (args, p.stdout, p.stderr[-3000:])
    return _table(p.stdout)


@pytest.fixture(scope="module")
def run(module_broker_factory, tmp_path_factory):
    from kafkalog.compat.clients import ConfluentProducer, Record, create_topic
    from kafkalog.tools.cli import main

    broker = module_broker_factory(VERSION)
    bs = broker.bootstrap_servers
    create_topic(bs, "txn-open", partitions=2)
    create_topic(bs, "txn-done", partitions=1)
    child = subprocess.Popen([sys.executable, "-c", PRODUCER, bs, str(HOUR_AGO)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    finally:
        child.kill()  # inside its transaction
        child.wait()
    with ConfluentProducer(bs, transactional_id="committed", extra={"linger.ms": 5}) as p:
        p.begin()
        p.send_all("txn-done", [Record(key=b"a", value=b"1", partition=0, timestamp=HOUR_AGO)])
        p.commit()
    # EndTxn returns once PrepareCommit is written; the marker and CompleteCommit follow asynchronously. Wait for
    # them, so that what the killed broker leaves (and what its restart reports) does not depend on that race
    deadline = time.monotonic() + 120
    while True:
        open_rows = [r for r in _tool(bs, "describe-producers", "--topic", "txn-done", "--partition", "0")
                     if r["CurrentTransactionStartOffset"] != "None"]
        states = {r["TransactionalId"]: r["TransactionState"] for r in _tool(bs, "list")}
        if not open_rows and states.get("committed") == "CompleteCommit":
            break
        assert time.monotonic() < deadline, f"the committed transaction did not complete: {open_rows} {states}"
        time.sleep(0.5)
    broker.kill()  # the broker too: no producer snapshot at the log end, unflushed segments
    killed = tmp_path_factory.mktemp("killed") / "data"
    shutil.copytree(broker.data_dir, killed)
    broker.start()
    broker.stop()
    # a transaction whose marker was lost: no coordinator knows producer 999
    src = tmp_path_factory.mktemp("hang") / "hanging.jsonl"
    src.write_text(json.dumps({"producerId": HANGING_PID, "producerEpoch": 0, "baseSequence": 0, "isTransactional": True,
                               "records": [{"key": None, "value": "aGk=", "timestamp": HOUR_AGO}]}) + "\n")
    data = broker.data_dir
    assert main(["append", str(data), "txn-done-0", "--from", str(src)]) == 0
    assert main(["flush", str(data)]) == 0
    broker.start()
    now = int(time.time() * 1000)
    kafka = {
        "producers": {(t, p): _tool(bs, "describe-producers", "--topic", t, "--partition", str(p))
                      for t, p in (("txn-open", 0), ("txn-open", 1), ("txn-done", 0))},
        "hanging": _tool(bs, "find-hanging", "--broker-id", "1"),
        "describe": _tool(bs, "describe", "--transactional-id", "abandoned"),
        "list": _tool(bs, "list"),
    }
    broker.stop()
    from kafkalog.storage.reports.transactions import find_transactions

    return kafka, find_transactions([data], now_ms=now), data, find_transactions([killed], now_ms=now)


def test_open_transactions_are_describe_producers(run) -> None:
    kafka, report, *_ = run
    theirs = {(t, p, int(r["ProducerId"]), int(r["ProducerEpoch"]), int(r["CurrentTransactionStartOffset"]),
               int(r["LatestCoordinatorEpoch"]), int(r["LastTimestamp"]))
              for (t, p), rows in kafka["producers"].items() for r in rows if r["CurrentTransactionStartOffset"] != "None"}
    ours = {(t["topic"], t["partition"], t["producerId"], t["producerEpoch"], t["firstOffset"], t["coordinatorEpoch"],
             t["lastTimestamp"]) for t in report.transactions}
    assert ours == theirs
    assert len(ours) == 3  # the abandoned transaction on 2 partitions + the hanging one


def test_killed_broker_files(run) -> None:
    """The files of the broker SIGKILLed right after the producer (before the offline append): the same open
    transactions, rebuilt from the segments alone (no producer snapshot), with their coordinator state."""
    kafka, *_, killed = run
    theirs = {(t, p, int(r["ProducerId"]), int(r["ProducerEpoch"]), int(r["CurrentTransactionStartOffset"]))
              for (t, p), rows in kafka["producers"].items() for r in rows
              if r["CurrentTransactionStartOffset"] != "None" and int(r["ProducerId"]) != HANGING_PID}
    abandoned = [t for t in killed.transactions if t["transactionalId"] == "abandoned"]
    ours = {(t["topic"], t["partition"], t["producerId"], t["producerEpoch"], t["firstOffset"]) for t in abandoned}
    assert ours == theirs and len(ours) == 2
    assert {(t["coordinatorState"], t["status"]) for t in abandoned} == {("Ongoing", "open")}
    # EndTxn returns once PrepareCommit is written; the broker may die before the marker: then the
    # committed transaction is still open in the files, and the coordinator will finish it when it loads
    for t in killed.transactions:
        if t["transactionalId"] != "abandoned":
            assert (t["transactionalId"], t["topic"], t["coordinatorState"], t["status"]) == \
                ("committed", "txn-done", "PrepareCommit", "open"), t


def test_hanging_is_find_hanging(run) -> None:
    kafka, report, *_ = run
    theirs = {(r["Topic"], int(r["Partition"]), int(r["ProducerId"]), int(r["ProducerEpoch"]), int(r["StartOffset"]))
              for r in kafka["hanging"]}
    ours = {(t["topic"], t["partition"], t["producerId"], t["producerEpoch"], t["firstOffset"])
            for t in report.transactions if t["hanging"] and t["durationMs"] > 15 * 60_000}
    assert ours == theirs
    assert {x[2] for x in ours} == {HANGING_PID}
    (h,) = report.hanging
    assert h["abortCommand"].endswith(f"abort --topic txn-done --partition 0 --start-offset {h['firstOffset']}")
    assert h["blocksLso"] and h["lastStableOffset"] == h["firstOffset"]


def test_coordinator_is_describe_and_list(run) -> None:
    kafka, report, *_ = run
    (d,) = kafka["describe"]
    open_ = [t for t in report.transactions if t["transactionalId"] == "abandoned"]
    listed = {(tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1])) for tp in d["TopicPartitions"].split(",")}
    assert {(t["topic"], t["partition"]) for t in open_} == listed == {("txn-open", 0), ("txn-open", 1)}
    for t in open_:
        assert (t["producerId"], t["coordinatorProducerEpoch"], t["coordinatorState"], t["transactionTimeoutMs"],
                t["coordinatorStartTimestamp"], t["hanging"], t["status"]) == \
            (int(d["ProducerId"]), int(d["ProducerEpoch"]), d["TransactionState"], int(d["TransactionTimeoutMs"]),
             int(d["CurrentTransactionStartTimeMs"]), False, "open")
    theirs = {(r["TransactionalId"], int(r["ProducerId"]), r["TransactionState"]) for r in kafka["list"]}
    ours = {(c.transactional_id, c.producer_id, c.state) for c in report.coordinator.values()}
    assert ours == theirs and {x[0] for x in ours} == {"abandoned", "committed"}


def test_cli_exit_code_and_json(run, capsys) -> None:
    from kafkalog.tools.cli import main

    _, report, data, _ = run
    assert main(["transactions", "--json", "--hanging", "--bootstrap-server", "k:9092", str(data)]) == 1
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(x["topic"], x["producerId"], x["status"]) for x in lines] == [("txn-done", HANGING_PID, "hanging")]
    assert lines[0]["abortCommand"].startswith("kafka-transactions.sh --bootstrap-server k:9092 abort ")
