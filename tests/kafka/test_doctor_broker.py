"""``kafkalog doctor``'s predictions against real brokers (issue 15).

Per Kafka version, damaged copies of the real fixtures (``tests/damage.py``) are diagnosed, then a broker is started
on each (module-scoped: each dir is started once, and every test reads the results):

* "torn": no clean-shutdown marker and a torn write at the end of a segment (as SIGKILL leaves it): doctor
  predicts recovery with a truncation (exit 1); the broker starts, recovers, and every partition's log end
  offset is the one the plan predicted. Stopped cleanly, the same dir is then HEALTHY (exit 0).
* "clusterid": a second log dir whose ``meta.properties`` holds another cluster id; "metadata": a zero-length
  ``partition.metadata`` (the broker's fatal fault "Error starting LogManager"); "epochs": a malformed
  ``leader-epoch-checkpoint`` (its only log dir goes offline: "Shutdown broker because all log dirs in ... have
  failed"): doctor predicts WILL NOT START (exit 4) with a message, and the broker refuses to start, logging that
  very message and the exception doctor names as its cause; "badname": a directory that is not a partition's
  ("Found directory ..., 'notapartition' is not in the form of topic-partition ...").
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from pathlib import Path

import pytest
from damage import FIXTURES, damaged_copy

from kafkalog.compat.errors import BrokerError
from kafkalog.compat.pytest_plugin import configured_libs
from kafkalog.storage.records import LogScanner
from kafkalog.storage.reports.partition_records import iter_partition_batches
from kafkalog.tools.cli import main

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

#: version -> the fixture its broker wrote (and stopped cleanly)
FIXTURE = {"4.3.1": "kafka-4.3.1-kraft", "3.9.2": "kafka-3.9.2-kraft"}
FAST = {"log.initial.task.delay.ms": "0", "log.retention.check.interval.ms": "3600000",
        "log.cleaner.enable": "false", "num.recovery.threads.per.data.dir": "1"}


def _doctor(*args: str) -> tuple[int, str]:
    """``kafkalog doctor ARGS`` in this process (the CLI's own code path, without a Python start-up per dir)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["doctor", *args])
    assert rc in (0, 1, 4), out.getvalue()[-2000:]
    return rc, out.getvalue()


def _leos(bootstrap: str, partitions: list[tuple[str, int]]) -> dict[str, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkalog-doctor", "log_level": 0})
    try:
        return {f"{t}-{p}": c.get_watermark_offsets(TopicPartition(t, p), timeout=20)[1] for t, p in partitions}
    finally:
        c.close()


def _build(root: Path, fixture: str) -> dict[str, list[Path]]:
    dirs: dict[str, list[Path]] = {}
    torn = root / "torn" / "data"
    damaged_copy(fixture, torn, ("unclean", "torn_tail"))
    # and a record byte flipped in a middle batch of another partition's active segment: records are lost
    last = sorted((torn / "multi-segment-1").glob("*.log"))[-1]
    data = bytearray(last.read_bytes())
    batches = [(b.position, b.size) for b in LogScanner(memoryview(bytes(data)))]
    pos, size = batches[len(batches) // 2]
    data[pos + size - 3] ^= 0x5A
    last.write_bytes(bytes(data))
    dirs["torn"] = [torn]
    a, b = root / "clusterid" / "data", root / "clusterid" / "data2"
    damaged_copy(fixture, a, ())
    b.mkdir()
    text = (a / "meta.properties").read_text().splitlines()
    (b / "meta.properties").write_text("\n".join(
        "cluster.id=AAAAAAAAAAAAAAAAAAAAAg" if line.startswith("cluster.id=") else
        "directory.id=BBBBBBBBBBBBBBBBBBBBBg" if line.startswith("directory.id=") else line for line in text) + "\n")
    dirs["clusterid"] = [a, b]
    meta = root / "metadata" / "data"
    damaged_copy(fixture, meta, ("bad_partition_metadata",))
    dirs["metadata"] = [meta]
    epochs = root / "epochs" / "data"
    damaged_copy(fixture, epochs, ())
    (epochs / "idempotent-0" / "leader-epoch-checkpoint").write_text("0\n1\nnot an entry\n")
    dirs["epochs"] = [epochs]
    badname = root / "badname" / "data"
    damaged_copy(fixture, badname, ())
    (badname / "notapartition").mkdir()
    dirs["badname"] = [badname]
    return dirs


def _doctor_and_broker(version: str, dirs: list[Path], extra, timeout: float, started) -> tuple[int, list, dict]:
    """Doctor's exit and JSON lines on ``dirs``, then what a broker started on them did: ``started(broker,
    result)`` runs once it is up (a broker that does not start is killed); the result says whether it started,
    how long it all took, and holds the broker's log."""
    import json

    from kafkalog.compat.broker import Broker

    rc, text = _doctor("--json", *extra, *map(str, dirs))
    lines = [json.loads(x) for x in text.splitlines()]
    props = dict(FAST)
    if len(dirs) > 1:
        props["log.dirs"] = ",".join(map(str, dirs))
    broker = Broker(version, data_dir=dirs[0], server_properties=props)
    result: dict = {"started": False}
    t0 = time.monotonic()
    try:
        broker.start(timeout=timeout)
        result["started"] = True
        started(broker, result)
    except BrokerError:
        broker.kill()
    finally:
        broker.close()
    result["seconds"] = time.monotonic() - t0
    result["log"] = broker.log_path.read_text(errors="replace")
    return rc, lines, result


# CI runs the newest Kafka line; the older one under -m campaign (make campaign)
@pytest.fixture(scope="module", params=[v if v == max(FIXTURE, key=lambda x: tuple(map(int, x.split(".")))) else
                                        pytest.param(v, marks=pytest.mark.campaign) for v in sorted(FIXTURE)])
def runs(request, tmp_path_factory, kafka_libs):
    """version, and per damaged dir: (doctor's exit, its JSON lines, what the broker did)."""
    version = request.param
    configured_libs(kafka_libs, version)
    root = tmp_path_factory.mktemp(f"doctor-{version}")
    out = {}
    for name, dirs in _build(root, FIXTURE[version]).items():

        def started(broker, result, dirs=dirs):
            parts = sorted((p.name.rsplit("-", 1)[0], int(p.name.rsplit("-", 1)[1])) for p in dirs[0].iterdir()
                           if p.is_dir() and (p / "partition.metadata").exists() and "__cluster" not in p.name)
            result["leos"] = _leos(broker.bootstrap_servers, parts)
            broker.stop()
            result["after"] = _doctor("--json", str(dirs[0]))

        out[name] = _doctor_and_broker(version, dirs, (), 90, started)
    return version, out


def test_torn_tail_truncation_is_what_the_broker_truncates(runs):
    version, out = runs
    rc, lines, broker = out["torn"]
    summary = lines[-1]
    assert rc == 1 and summary["verdict"] == "recovery", summary
    assert summary["headline"].startswith("WILL START, RECOVERING")
    truncations = {p["partition"]: p for p in lines if p.get("kind") == "truncation"}
    assert sorted(truncations) == ["multi-segment-0", "multi-segment-1"], truncations
    lost = truncations["multi-segment-1"]
    assert lost["severity"] == "loss" and lost["records"] > 0 and "crc" in lost["message"].lower(), lost
    assert f"truncating {summary['recordsTruncated']:,d} records" in summary["headline"]
    assert broker["started"], broker["log"][-3000:]
    assert "Recovering unflushed segment" in broker["log"]
    # every partition's log end offset after the broker's recovery is the one doctor predicted
    predicted = {p["partition"]: p["lastOffset"] for p in lines if p.get("kind") == "recovery" and p["partition"]}
    assert predicted and set(predicted) <= set(broker["leos"])
    assert {k: broker["leos"][k] for k in predicted} == predicted
    for name, t in truncations.items():  # the broker's log ends where the predicted loss begins
        assert t["firstOffset"] == broker["leos"][name], (name, t)
    # stopped cleanly by the broker, nothing is left to recover; what the truncation took stays a loss only where
    # something remembers it (a consumer group committed past the new log end: never HEALTHY over that, issue 34)
    rc_after, text_after = broker["after"]
    after = [json.loads(x) for x in text_after.splitlines()]
    problems = [p for p in after if p.get("severity")]
    assert after[-1]["verdict"] != "fatal" and "RECOVERING" not in after[-1]["headline"], after[-1]
    assert all(p["kind"] == "lostOffsets" and p["partition"] in truncations for p in problems), problems
    for p in problems:  # the offsets remembered past the log end begin where the broker's log now ends
        assert p["firstOffset"] == broker["leos"][p["partition"]], p
    assert rc_after == (1 if problems else 0), text_after


@pytest.mark.parametrize("case", ["clusterid", "metadata", "epochs", "badname"])
def test_will_not_start_is_a_broker_that_refuses_with_that_message(runs, case: str):
    version, out = runs
    rc, lines, broker = out[case]
    summary = lines[-1]
    assert rc == 4 and summary["verdict"] == "fatal", summary
    assert not broker["started"], f"Kafka {version} started on the {case} dir"
    message = summary["fatal"][0]
    assert summary["headline"].startswith("WILL NOT START: ")
    if case == "clusterid":  # the dirs in the broker's (TreeMap) order: the message names the same dir
        assert message.startswith("Invalid cluster.id in: ")
    assert message in broker["log"], f"{message!r} not in the broker's log:\n{broker['log'][-3000:]}"
    fatal = next(p for p in lines if p.get("severity") == "fatal")
    if fatal["cause"]:  # the exception doctor names is the one the broker logs
        assert fatal["cause"] in broker["log"], broker["log"][-3000:]


def test_broker_runs_stay_short(runs):
    _version, out = runs
    assert sum(r["seconds"] for _, _, r in out.values()) < 120


# ------------------------------------------------------------------------------------- the start-up gate, 4.3.1 only
#: the start-up gate cases below run on Kafka 4.3.1 only (CI time: a refusing broker costs one JVM start each);
#: 3.9.2 runs the cases above. name -> (damage, doctor's extra arguments)
GATE_VERSION = "4.3.1"
OTHER_DIR_ID = "BBBBBBBBBBBBBBBBBBBBBg"


def _second_dir(a: Path, *, directory_id: str | None = OTHER_DIR_ID, meta: bool = True) -> Path:
    b = a.with_name("data2")
    b.mkdir()
    if meta:
        lines = (a / "meta.properties").read_text().splitlines()
        (b / "meta.properties").write_text("\n".join(
            f"directory.id={directory_id}" if line.startswith("directory.id=") and directory_id else line
            for line in lines) + "\n")
    return b


def _set_meta(d: Path, key: str, value: str) -> None:
    mp = d / "meta.properties"
    mp.write_text("\n".join(f"{key}={value}" if line.startswith(f"{key}=") else line
                            for line in mp.read_text().splitlines()) + "\n")


def _gate_cases(root: Path) -> dict[str, tuple[list[Path], list[str]]]:
    """Each case: a copy of the 4.3.1 fixture (formatted, cleanly stopped) damaged one way."""
    import shutil

    cases: dict[str, tuple[list[Path], list[str]]] = {}

    def base(name: str) -> Path:
        d = root / name / "data"
        damaged_copy(FIXTURE[GATE_VERSION], d, ())
        return d

    a = base("nodeid")  # the stored node.id is not the configured one (the harness configures node.id=1)
    _set_meta(a, "node.id", "2")
    cases["nodeid"] = ([a], ["--node-id", "1"])
    a = base("nometa")  # a second log dir, not empty, never formatted
    b = _second_dir(a, meta=False)
    shutil.move(a / "codec-none-0", b / "codec-none-0")
    cases["nometa"] = ([a, b], [])
    a = base("metadir")  # __cluster_metadata-0 in the second log dir
    b = _second_dir(a)
    shutil.copytree(a / "__cluster_metadata-0", b / "__cluster_metadata-0")
    cases["metadir"] = ([a, b], [])
    a = base("twice")  # a partition live in two log dirs
    b = _second_dir(a)
    shutil.copytree(a / "codec-none-0", b / "codec-none-0")
    cases["twice"] = ([a, b], [])
    a = base("dirid")  # two log dirs with the same directory.id
    b = _second_dir(a, directory_id=None)
    cases["dirid"] = ([a, b], [])
    a = base("reservedid")  # a directory.id among the 100 Kafka reserves (not one of the 3 it names)
    _set_meta(a, "directory.id", "AAAAAAAAAAAAAAAAAAAAMg")
    cases["reservedid"] = ([a], [])
    a = base("badmeta")  # a partition.metadata that is not empty but malformed
    (a / "codec-none-0" / "partition.metadata").write_text("version: 0\ntopic_id: not-a-topic-id\n")
    cases["badmeta"] = ([a], [])
    a = base("stray")  # a topic id that is not the topic's in __cluster_metadata: a stray, not fatal
    # and, in the same dir, topic codec-gzip's partition replaced by a 3.9.2 ZooKeeper broker's v1 segments
    from engines import migrate

    from kafkalog.storage.engine.migrate import MigrateOptions
    from kafkalog.storage.files.partition_metadata import read_partition_metadata

    tid = read_partition_metadata(a / "codec-gzip-0" / "partition.metadata").topic_id
    migrate(FIXTURES / "kafka-3.9.2-zk-v1" / "data" / "codec-none-0", a,
            MigrateOptions(topic="codec-gzip", topic_id=tid, overwrite=True), backup=False)
    (a / "codec-none-0" / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAg\n")
    cases["stray"] = ([a], [])
    return cases


@pytest.fixture(scope="module")
def gate_runs(tmp_path_factory, kafka_libs):
    """Per start-up gate case: (doctor's exit, its JSON lines, what the 4.3.1 broker did)."""
    configured_libs(kafka_libs, GATE_VERSION)
    root = tmp_path_factory.mktemp("doctor-gate")
    out = {}
    for name, (dirs, extra) in _gate_cases(root).items():

        def started(broker, result, name=name, dirs=dirs):
            if name == "stray":
                broker.wait_until(lambda d=dirs[0]: any(d.glob("codec-none-0.*-stray")), 20, "rename the stray")
                result["strays"] = sorted(p.name for p in dirs[0].glob("*-stray"))
                from kafkalog.compat.clients import Record, produce

                produce(broker.bootstrap_servers, "codec-gzip", [Record(value=b"after the legacy batches")])
                broker.stop()
                result["magics"] = [b.magic for b in iter_partition_batches(dirs[0] / "codec-gzip-0")]
            broker.kill()

        out[name] = _doctor_and_broker(GATE_VERSION, dirs, extra, 45, started)
    return out


@pytest.mark.parametrize("case", ["nodeid", "nometa", "metadir", "twice", "dirid", "reservedid",
                                  "badmeta"])
def test_start_up_gate_refusals_are_the_brokers(gate_runs, case: str):
    rc, lines, broker = gate_runs[case]
    summary = lines[-1]
    assert rc == 4 and summary["verdict"] == "fatal", summary
    assert not broker["started"], f"Kafka {GATE_VERSION} started on the {case} dir"
    message = summary["fatal"][0]
    if case == "twice":  # the log dirs load in parallel: the broker names the two dirs in the order they loaded
        a, b = re.search(r"found in both (\S+) and (\S+)\. ", message).groups()
        assert message in broker["log"] or message.replace(f"{a} and {b}", f"{b} and {a}") in broker["log"], \
            broker["log"][-3000:]
    else:
        assert message in broker["log"], f"{message!r} not in the broker's log:\n{broker['log'][-3000:]}"
    fatal = next(p for p in lines if p.get("severity") == "fatal")
    if fatal["cause"]:
        assert fatal["cause"] in broker["log"], broker["log"][-3000:]


def test_a_topic_id_mismatch_is_a_stray_the_broker_renames(gate_runs):
    rc, lines, broker = gate_runs["stray"]
    assert rc == 1 and lines[-1]["verdict"] == "recovery", lines[-1]
    stray = [p for p in lines if p.get("kind") == "topicId"]
    assert [p["partition"] for p in stray] == ["codec-none-0"] and "-stray" in stray[0]["message"]
    assert broker["started"], broker["log"][-3000:]
    assert [s.split(".")[0] for s in broker["strays"]] == ["codec-none-0"], broker["strays"]


def test_legacy_segments_load_and_the_broker_appends_v2_after_them(gate_runs):
    """KIP-724 (Kafka 4.0): a 4.x broker loads a partition of v1 batches, serves it, and writes every new batch as
    v2 after them in the same log; doctor reports them as info, not as a reason not to start."""
    rc, lines, broker = gate_runs["stray"]
    legacy = [p for p in lines if p.get("kind") == "legacyFormat"]
    assert [p["partition"] for p in legacy] == ["codec-gzip-0"] and legacy[0]["severity"] == "info", legacy
    assert "appends only v2" in legacy[0]["message"], legacy[0]
    magics = broker["magics"]
    assert set(magics[:-1]) == {1} and magics[-1] == 2, magics


def test_gate_broker_runs_stay_short(gate_runs):
    assert sum(r["seconds"] for _, _, r in gate_runs.values()) < 60
