"""``kafkalog transactions`` on the real fixtures: the broker SIGKILLed inside a transaction
(kafka-4.3.1-kraft-killed: ``open-transaction-0`` ends in a transaction the coordinator still has Ongoing), the
clean 4.3.1 fixture (every transaction finished), and copies where ``kafkalog append`` adds the transactions a
lost marker leaves behind (hanging). Kafka's own tools agree on a real broker: tests/kafka/test_transactions_diff.py."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path

import pytest

from kafkalog.facts import render
from kafkalog.storage.log.paths import PathError
from kafkalog.storage.reports.transactions import abort_command, find_transactions
from kafkalog.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
KILLED = ROOT / "fixtures" / "kafka-4.3.1-kraft-killed" / "data"
CLEAN = ROOT / "fixtures" / "kafka-4.3.1-kraft" / "data"
NOW = 1795308400000


def _append(data: Path, tp: str, tmp: Path, obj: dict, *extra: str) -> None:
    src = tmp / "in.jsonl"
    src.write_text(json.dumps(obj) + "\n")
    assert main(["append", str(data), tp, "--from", str(src), "--now", str(NOW), *extra]) == 0


@pytest.fixture
def killed_copy(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(KILLED, data)
    return data


def test_killed_fixture_open_transaction() -> None:
    report = find_transactions([KILLED], now_ms=NOW)
    assert report.errors == [] and report.coordinator_partitions == [0, 1, 2, 3, 4] and report.coordinator_complete
    (t,) = report.transactions
    assert t == {
        "dataDir": str(KILLED), "dir": "open-transaction-0", "topic": "open-transaction", "partition": 0,
        "producerId": 0, "producerEpoch": 0, "coordinatorEpoch": -1, "firstOffset": 0, "lastOffset": 7,
        "firstTimestamp": 1750000000000, "lastTimestamp": 1750000007000, "ageMs": NOW - 1750000000000,
        "durationMs": NOW - 1750000007000, "lastStableOffset": 0, "blocksLso": True, "blocksCleaner": False,
        "transactionalId": "txn-open", "coordinatorState": "Ongoing", "coordinatorPartition": "__transaction_state-4",
        "coordinatorProducerEpoch": 0, "transactionTimeoutMs": 60000, "coordinatorStartTimestamp": 1795308379782,
        "hanging": False, "status": "open", "reason": t["reason"],
        "abortCommand": "kafka-transactions.sh --bootstrap-server BOOTSTRAP abort --topic open-transaction "
                        "--partition 0 --start-offset 0",
    }
    assert (t["reason"].kind, t["reason"].facts["state"], t["reason"].facts["timeoutMs"]) == \
        ("transactions.open", "Ongoing", 60000)
    assert "Ongoing" in render(t["reason"]) and "60000 ms" in render(t["reason"])
    assert report.hanging == []


def test_partition_dir_alone_is_unknown() -> None:
    """Without the __transaction_state partitions, kafkalog cannot tell: unknown, not hanging."""
    (t,) = find_transactions([KILLED / "open-transaction-0"], now_ms=NOW).transactions
    assert (t["hanging"], t["status"], t["transactionalId"]) == (None, "unknown", None)
    assert "none found" in render(t["reason"])


def test_clean_fixture_has_none(capsys) -> None:
    report = find_transactions([CLEAN], now_ms=NOW)
    assert report.transactions == [] and report.errors == []
    assert {c.transactional_id: c.state for c in report.coordinator.values()} == {
        "txn-confluent": "CompleteAbort", "txn-compacted": "CompleteCommit", "txn-interleaved": "CompleteAbort",
        "txn-kafka-python": "CompleteAbort"}
    assert main(["transactions", str(CLEAN)]) == 0
    assert "0 open transaction(s), 0 hanging" in capsys.readouterr().out


def test_hanging_unknown_producer_and_unlisted_partition(killed_copy: Path, tmp_path: Path, capsys) -> None:
    # a producer no transactional id has, and txn-open's producer on a partition its coordinator does not list
    _append(killed_copy, "killed-1", tmp_path, {"producerId": 999, "producerEpoch": 3, "baseSequence": 0,
                                                "isTransactional": True,
                                                "records": [{"key": None, "value": "aGk=", "timestamp": NOW - 7200000}]})
    _append(killed_copy, "killed-0", tmp_path, {"producerId": 0, "producerEpoch": 0, "baseSequence": 100,
                                                "isTransactional": True,
                                                "records": [{"key": None, "value": "aGk=", "timestamp": NOW - 60000}]})
    # non-transactional data behind it fills the partition past a segment roll: the cleaner is held back
    big = base64.b64encode(b"x" * 3000).decode()
    for _ in range(2):
        _append(killed_copy, "killed-0", tmp_path, {"key": None, "value": big, "timestamp": NOW},
                "--config", "internal.segment.bytes=4096")
    report = find_transactions([killed_copy], now_ms=NOW, bootstrap="k1:9092")
    by = {t["dir"]: t for t in report.transactions}
    assert sorted(by) == ["killed-0", "killed-1", "open-transaction-0"]
    k1, k0 = by["killed-1"], by["killed-0"]
    assert (k1["producerId"], k1["producerEpoch"], k1["hanging"], k1["status"], k1["transactionalId"]) == \
        (999, 3, True, "hanging", None)
    assert k1["ageMs"] == 7200000 and "no transactional id has producer id 999" in render(k1["reason"])
    assert k1["abortCommand"] == abort_command("killed", 1, k1["firstOffset"], "k1:9092")
    assert (k0["transactionalId"], k0["coordinatorState"], k0["hanging"]) == ("txn-open", "Ongoing", True)
    assert "does not list killed-0" in render(k0["reason"])
    assert k0["blocksLso"] and k0["blocksCleaner"] and k0["lastStableOffset"] == k0["firstOffset"]
    assert not by["open-transaction-0"]["hanging"]
    assert [t["dir"] for t in report.hanging] == ["killed-0", "killed-1"]

    assert main(["transactions", "--now", str(NOW), "--bootstrap-server", "k1:9092", str(killed_copy)]) == 1
    out = capsys.readouterr().out
    assert "PARTITION" in out and "TRANSACTIONAL ID" in out and "LSO,CLEANER" in out
    assert f"kafka-transactions.sh --bootstrap-server k1:9092 abort --topic killed --partition 1 --start-offset " \
           f"{k1['firstOffset']}" in out
    assert "--partition 0 --start-offset 0\n" not in out  # the open one is the coordinator's to finish
    assert main(["transactions", "--json", "--hanging", "--now", str(NOW), str(killed_copy)]) == 1
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["dir"] for x in lines] == ["killed-0", "killed-1"]


def test_workers_give_the_same_report(killed_copy: Path, tmp_path: Path) -> None:
    _append(killed_copy, "killed-1", tmp_path, {"producerId": 999, "producerEpoch": 0, "baseSequence": 0,
                                                "isTransactional": True, "records": [{"key": None, "value": None}]})
    done: list[int] = []
    one = find_transactions([killed_copy], now_ms=NOW, workers=1)
    two = find_transactions([killed_copy], now_ms=NOW, workers=2, on_total=done.append, on_advance=done.append)
    assert one.transactions == two.transactions and len(two.transactions) == 2
    assert done[0] == 13 and sum(done[1:]) == 13  # 8 data partitions + 5 __transaction_state


def test_missing_coordinator_partitions(killed_copy: Path, tmp_path: Path) -> None:
    """A __transaction_state partition missing (on another broker): a producer id found nowhere is unknown;
    --transaction-state-partitions says how many there are."""
    _append(killed_copy, "killed-1", tmp_path, {"producerId": 999, "producerEpoch": 0, "baseSequence": 0,
                                                "isTransactional": True, "records": [{"key": None, "value": None}]})
    shutil.rmtree(killed_copy / "__transaction_state-2")
    report = find_transactions([killed_copy], now_ms=NOW)
    assert not report.coordinator_complete
    by = {t["dir"]: t for t in report.transactions}
    assert by["killed-1"]["status"] == "unknown" and "some are missing" in render(by["killed-1"]["reason"])
    assert by["open-transaction-0"]["status"] == "open"  # its coordinator partition (4) is here
    shutil.rmtree(killed_copy / "__transaction_state-4")
    report = find_transactions([killed_copy], now_ms=NOW, transaction_state_partitions=4)
    assert report.coordinator_complete is False
    report = find_transactions([killed_copy], now_ms=NOW, transaction_state_partitions=2)
    assert report.coordinator_complete and {t["status"] for t in report.transactions} == {"hanging"}


def test_topics_filter_and_errors(tmp_path: Path, capsys) -> None:
    assert find_transactions([KILLED], now_ms=NOW, topics={"killed"}).transactions == []
    assert main(["transactions", "--topics", "nope", str(KILLED)]) == 1
    assert "no partition of topic nope here" in capsys.readouterr().err
    for path, says in ((tmp_path / "missing", "no such file or directory"), (KILLED / "meta.properties",
                                                                           "not a directory (expected")):
        assert main(["transactions", "--json", str(path)]) == 1  # the one path contract: an error, not a row
        cap = capsys.readouterr()
        assert cap.out == "" and f"{path}: {says}" in cap.err
        with pytest.raises(PathError, match=re.escape(says)):
            find_transactions([path], now_ms=NOW)


def test_corrupt_partition_is_an_error_not_a_traceback(killed_copy: Path, capsys) -> None:
    log = killed_copy / "open-transaction-0" / "00000000000000000000.log"
    with log.open("r+b") as f:
        f.write(b"\xff" * 12)
    report = find_transactions([killed_copy], now_ms=NOW)
    (err,) = report.errors
    assert err["dir"] == "open-transaction-0" and "byte 0" in render(err["error"])
    assert "repair --dry-run" in render(err["error"])
    assert main(["transactions", str(killed_copy)]) == 1
    assert "error: open-transaction-0:" in capsys.readouterr().out
    # a torn tail: the broker's recovery drops the partial batch, so there is no transaction left
    with log.open("r+b") as f:
        f.write(KILLED.joinpath("open-transaction-0", log.name).read_bytes()[:12])
    with log.open("r+b") as f:
        f.truncate(600)
    assert find_transactions([killed_copy], now_ms=NOW).transactions == []


def test_json_schema(killed_copy: Path, tmp_path: Path, capsys) -> None:
    import jsonschema
    schema = json.loads((ROOT / "docs" / "schemas" / "openTransaction.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    _append(killed_copy, "killed-1", tmp_path, {"producerId": 999, "producerEpoch": 0, "baseSequence": 0,
                                                "isTransactional": True, "records": [{"key": None, "value": None}]})
    broken = tmp_path / "broken" / "open-transaction-0"  # a partition it cannot read: an error row
    shutil.copytree(killed_copy / "open-transaction-0", broken)
    with (broken / "00000000000000000000.log").open("r+b") as f:
        f.write(b"\xff" * 12)
    main(["transactions", "--json", "--now", str(NOW), str(killed_copy), str(killed_copy / "open-transaction-0"),
          str(broken)])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 3 and sum("error" in x for x in lines) == 1  # open-transaction-0 named twice: once
    for obj in lines:
        validator.validate(obj)


def test_blocks_the_cleaner_only_on_a_compacted_topic(tmp_path: Path) -> None:
    """An open transaction below a rolled segment pins the cleaner's first uncleanable offset, which matters only
    where the cleaner runs: the topic's cleanup.policy comes from the cluster metadata in the dir (compacted-0:
    compact; codec-none-0: delete)."""
    data = tmp_path / "data"
    shutil.copytree(CLEAN, data)
    big = base64.b64encode(b"x" * 3000).decode()
    for tp in ("compacted-0", "codec-none-0"):
        _append(data, tp, tmp_path, {"producerId": 4242 + len(tp), "producerEpoch": 0, "baseSequence": 0,
                                     "isTransactional": True,
                                     "records": [{"key": "aw==", "value": "aGk=", "timestamp": NOW - 60000}]})
        for _ in range(2):  # data behind it, past a segment roll
            _append(data, tp, tmp_path, {"key": "aw==", "value": big, "timestamp": NOW},
                    "--config", "internal.segment.bytes=4096")
    by = {t["dir"]: t for t in find_transactions([data], now_ms=NOW).transactions}
    assert by["compacted-0"]["blocksLso"] and by["compacted-0"]["blocksCleaner"]
    assert by["codec-none-0"]["blocksLso"] and not by["codec-none-0"]["blocksCleaner"]
