"""``kafkalog conformance certify``: a data dir Kafka wrote is conformant on a real broker, the original is never
written, bad input is one clear error; the upgrade rehearsal of the committed ZooKeeper-era and 3.9.2 fixtures on
4.3.1 says what Kafka refuses or changes and which kafkalog command prepares the dir.

The non-conformant writers' corpus is ``test_certify_corpus.py``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from damage import tree

from kafkalog.compat.certify import (
    CertifyError,
    DirReport,
    Divergence,
    LoadEvent,
    PartitionResult,
    Restamp,
    ServedCount,
    certify,
    check_input,
    fatal_cause,
    load_events,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
SCHEMAS = ROOT / "docs" / "schemas"


def _schema_errors(line: dict) -> list[str]:
    """What is wrong with one line of ``certify --json`` against its schema in docs/schemas (docs/json.md)."""
    import jsonschema

    name = {"dir": "certifyDir", "divergence": "certifyDivergence"}[line["type"]]
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(line)]


def test_json_lines_follow_their_schemas():
    d = DirReport(path="/d", work_dir="/w", kafka="4.3.1", backend="jvm", metadata="created",
                  restamps=[Restamp("meta.properties", "version", "0", "1")],
                  events=[LoadEvent("recovery", "t-0", "Recovering unflushed segment 0")],
                  partitions=[PartitionResult("t-0", served=[ServedCount("confluent", "read_committed", 3, 3)])],
                  divergences=[Divergence("serve", "t-0", "served 2", "3 records", "Fetcher", first_offset=0,
                                          last_offset=2, client="confluent", isolation="read_committed")],
                  segments_dumped=1, bytes=10, started=True, seconds={"broker_start": 1.5})
    lines = [{"type": "divergence", "path": d.path, **x.to_json()} for x in d.divergences]
    lines.append({"type": "dir", **d.to_json()})
    assert [_schema_errors(x) for x in lines] == [[], []]
    assert _schema_errors({**lines[0], "kind": "gone"})  # the schemas can fail


def test_the_text_report_names_the_broker_mode(capsys):
    from kafkalog.tools.conformance import _render_dir
    from kafkalog.tools.output import render_table

    d = DirReport(path="/d", work_dir="/w", kafka="2.8.2", backend="jvm", metadata="created", mode="zk", started=True)
    _render_dir(d, render_table)
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["Apache Kafka 2.8.2 (ZooKeeper mode) certifying /d (0 bytes)",
                       "  metadata: none in the dir; the topics were created in the test broker's ZooKeeper, with "
                       "their files' topic ids and leader epochs"]


def _cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "conformance", "certify", *args],
                          capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT)


# ------------------------------------------------------------------------------------------- bad input


def test_bad_input_is_one_clear_error(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", data)
    (tmp_path / "plain").mkdir()
    (tmp_path / "file").write_text("x")
    before = tree(tmp_path)
    cases = {
        str(tmp_path / "missing"): "no such directory",
        str(tmp_path / "file"): "not a directory",
        str(tmp_path / "plain"): "not a data dir",
        str(data / "codec-none-0"): "not a data dir but a partition dir",
    }
    for path, words in cases.items():
        with pytest.raises(CertifyError, match=words):
            check_input(path)
        r = _cli(path, "--kafka", "4.3.1")
        assert r.returncode == 1, r.stderr
        assert r.stdout == "" and len(r.stderr.splitlines()) == 1 and words in r.stderr and path in r.stderr
    # an unreadable file (a dangling symlink: root reads any mode) is named
    bad = data / "codec-none-0" / "00000000000000000099.snapshot"
    bad.symlink_to(tmp_path / "gone")
    r = _cli(str(data), "--kafka", "4.3.1")
    assert r.returncode == 1 and f"{bad}: unreadable" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    bad.unlink()
    assert tree(tmp_path) == before  # no input was written (nor a work dir made beside it)


def test_a_dir_a_live_broker_holds_is_refused(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", data)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.lockf(f, fcntl.LOCK_EX); "
         "print('locked', flush=True); time.sleep(120)", str(data / ".lock")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        before = tree(data)
        with pytest.raises(CertifyError, match=f"held by a live broker \\(pid {holder.pid}"):
            check_input(data)
        r = _cli(str(data), "--kafka", "4.3.1")
        assert r.returncode == 1 and "held by a live broker" in r.stderr and str(holder.pid) in r.stderr, r.stderr
        assert tree(data) == before
    finally:
        holder.kill()
        holder.wait()


def test_usage_errors_exit_2(tmp_path: Path):
    data = str(FIXTURES / "kafka-4.3.1-kraft" / "data")
    assert _cli(data).returncode == 2  # --kafka is required
    r = _cli(data, "--kafka", "four")
    assert r.returncode == 2 and "--kafka" in r.stderr
    r = _cli(data, "--kafka", "4.3.1", "--image", "apache/kafka:4.3.1")
    assert r.returncode == 2 and "--backend container" in r.stderr
    assert _cli("--kafka", "4.3.1").returncode == 2  # no DIR


def test_log_evidence_is_classified():
    log = "\n".join([
        "[2026-01-01 00:00:00,000] INFO [LogLoader partition=t-0, dir=/d] Loading producer state till offset 5 (x)",
        "[2026-01-01 00:00:00,000] WARN [LogLoader partition=t-0, dir=/d] Deleting all segments because logEndOffset "
        "(67) is smaller than logStartOffset 167. (org.apache.kafka.storage.internals.log.LogLoader)",
        "[2026-01-01 00:00:00,000] INFO [LogLoader partition=u-0, dir=/d] Recovering unflushed segment 0. (x)",
        "[2026-01-01 00:00:00,000] ERROR [ControllerApis nodeId=1] Unexpected error handling request (x)",
        "[2026-01-01 00:00:00,000] ERROR Encountered fatal fault: Error starting LogManager (x)",
        "org.apache.kafka.common.config.ConfigException: Invalid value 8192 for configuration segment.bytes",
        "\tat org.apache.kafka.common.config.ConfigDef$Range.ensureValid(ConfigDef.java:1011)",
    ])
    events = load_events(log, {"t-0", "u-0"})
    assert [(e.kind, e.partition) for e in events] == [("deletion", "t-0"), ("recovery", "u-0"), ("error", None)]
    assert fatal_cause(log) == ("org.apache.kafka.common.config.ConfigException: Invalid value 8192 for "
                                "configuration segment.bytes")


# ------------------------------------------------------------------------------------------- real broker


@pytest.mark.kafka
@pytest.mark.timeout(600)
def test_a_dir_kafka_wrote_is_conformant_and_never_written(tmp_path: Path, kafka_libs):
    orig = tmp_path / "orig"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", orig)
    before = tree(orig)
    r = _cli(str(orig), "--kafka", "4.3.1", "--json", "--workdir", str(tmp_path / "work"))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["type"] for x in lines] == ["dir"], lines
    assert [_schema_errors(x) for x in lines] == [[]]
    d = lines[0]
    assert d["conformant"] and d["started"] and d["metadata"] == "own" and d["divergences"] == 0
    served = [p for p in d["partitionResults"] if not p["internal"]]
    assert len(served) == 15 and d["segmentsDumped"] >= 30
    for p in served:
        assert len(p["served"]) == 4 and all(c["served"] == c["expected"] > 0 for c in p["served"]), p
    txn = next(p for p in served if p["partition"] == "transactions-0")
    assert {c["isolation"]: c["expected"] for c in txn["served"]} == {"read_uncommitted": 30, "read_committed": 14}
    assert set(d["seconds"]) >= {"brokerStart", "consume", "dumpLogSegments", "verify"}
    assert tree(orig) == before


#: the committed ZooKeeper-era and 3.9.2 fixtures the upgrade rehearsal runs on 4.3.1 (one broker each, 10-40 s):
#: CI runs the 2.8.2 v0 dir (the oldest format, no partition.metadata, kafka-python failing on v0 LZ4), the others
#: run under the campaign marker
REHEARSAL = [pytest.param(n, id=n, marks=() if n == "kafka-2.8.2-zk-v0" else pytest.mark.campaign)
             for n in ("kafka-2.8.2-zk-v0", "kafka-2.8.2-zk-v1", "kafka-3.9.2-zk-v0", "kafka-3.9.2-zk-v1",
                       "kafka-3.9.2-kraft")]


@pytest.mark.kafka
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", REHEARSAL)
def test_upgrade_rehearsal_of_the_committed_fixtures_on_4_3_1(tmp_path: Path, kafka_libs, name: str):
    data = FIXTURES / name / "data"
    before = tree(data)
    report = certify([data], kafka="4.3.1", workdir=tmp_path / "work")
    assert tree(data) == before
    (d,) = report.dirs
    if name.endswith("-kraft"):
        # the 3.9.2 KRaft dir: 4.3.1 refuses its topics' segment.bytes under 1 MiB (its own __cluster_metadata)
        assert not d.started and d.metadata == "own"
        refused = next(x for x in d.divergences if x.kind == "refused")
        assert "segment.bytes" in refused.kafka and "ConfigException" in refused.kafka
        assert "kafka-configs" in (refused.command or "") and "LogConfig" in refused.rule
        return
    magic = name.rsplit("-", 1)[1]
    assert d.started and d.metadata == "created"
    kinds = {(x.kind, x.command.split(" (")[0] if x.command else None) for x in d.divergences}
    # the ZooKeeper meta.properties, the topic ids only ZooKeeper knew, the legacy formats: each names its command
    assert ("upgrade", "kafkalog migrate") in kinds and ("upgrade", "kafkalog topic-id --set ID") in kinds
    legacy = next(x for x in d.divergences if x.kind == "upgrade" and x.command == "kafkalog convert")
    assert magic in legacy.files and "KIP-724" in legacy.rule
    assert {r.field for r in d.restamps if r.file == "meta.properties"} >= {"cluster.id", "version"}
    ids = [r for r in d.restamps if r.field == "topic_id"]
    no_metadata = [x for x in d.divergences if x.kind == "upgrade" and x.file == "partition.metadata"]
    if name.startswith("kafka-2.8.2"):
        # 2.8.2 wrote no partition.metadata: a KRaft broker renames such a log away as a stray; certify gives each
        # topic a new id in the test broker's bootstrap records, writes it into the copy and says so
        assert len(ids) == len(d.partitions) and all(r.original is None for r in ids) and len(no_metadata) == 1
        assert "stray" in no_metadata[0].kafka and f"{len(d.partitions)} partition(s)" in no_metadata[0].files
    else:  # every topic created with the id its partition.metadata carries (as ZooKeeper knew it): none restamped
        assert not ids and not no_metadata
    # everything else Kafka 4.3.1 served as the files say (2.8.2's per-append index entries, an earlier batch's
    # position under an append's last offset, are no divergence: lookups stay right)
    assert not [x for x in d.divergences if x.kind in ("load", "refused", "dump", "verify", "corrupt")], \
        [x.to_json() for x in d.divergences if x.kind in ("load", "refused", "dump", "verify", "corrupt")]
    for p in d.partitions:
        for c in p.served:
            if c.client == "confluent":
                assert c.served == c.expected > 0, (d.path, p.partition, c)
    serve = [x for x in d.divergences if x.kind == "serve"]
    if magic == "v0":  # kafka-python cannot read v0 LZ4 without xxhash: named per partition, convert the way out
        assert {x.partition for x in serve} == {"codec-lz4-0", "compacted-0"}
        assert all(x.client == "kafka-python" and x.command == "kafkalog convert" for x in serve)
    else:
        assert not serve


@pytest.mark.kafka
@pytest.mark.timeout(900)
def test_the_container_backend_certifies_as_the_jvm_does(tmp_path: Path, kafka_libs):
    """The copy is in the work dir the container bind-mounts before the broker starts: a dir without
    __cluster_metadata with one clean partition and one with a bad CRC, through the command: exit 1 (not
    conformant), JSON Lines that follow their schemas, the original's bytes untouched. The topics keep the ids of
    their partition.metadata (the data dir formatted in a container of the image, the bootstrap records added
    before the broker starts: nothing restamped but meta.properties), and the report is the JVM backend's."""
    from builders import certify_data_dir
    from damage import crc_closed_segment

    from kafkalog.compat.pytest_plugin import container_image

    image = container_image("4.3.1")
    orig = certify_data_dir(tmp_path / "orig", ["clean", "crc"])
    crc_closed_segment(orig / "crc-0")
    before = tree(orig)
    r = _cli(str(orig), "--kafka", "4.3.1", "--backend", "container", "--image", image, "--json",
             "--workdir", str(tmp_path / "work"))
    assert tree(orig) == before
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [_schema_errors(x) for x in lines] == [[] for _ in lines]
    *divergences, d = lines
    assert d["type"] == "dir" and {x["type"] for x in divergences} == {"divergence"}
    assert d["backend"] == "container" and d["started"] and not d["conformant"] and d["divergences"] == len(divergences)
    clean = next(p for p in d["partitionResults"] if p["partition"] == "clean-0")
    assert [(c["client"], c["isolation"], c["served"]) for c in clean["served"]] == [
        (c, i, n) for i, n in (("read_uncommitted", 65), ("read_committed", 61)) for c in ("kafka-python", "confluent")]
    corrupt = [x for x in divergences if x["kind"] == "corrupt"]
    assert {x["partition"] for x in corrupt} == {"crc-0"} and len(corrupt) == 4
    assert all(x["firstOffset"] == 4 and x["position"] == 295 for x in corrupt)
    assert {x["partition"] for x in divergences if x["kind"] != "upgrade"} == {"crc-0"}
    assert d["mode"] == "kraft" and d["metadata"] == "created"
    assert [r for r in d["restamps"] if r["field"] == "topic_id"] == [], d["restamps"]

    # the same dir on the JVM backend: the same restamps, partitions served and divergences
    jvm = _cli(str(orig), "--kafka", "4.3.1", "--json", "--workdir", str(tmp_path / "work-jvm"))
    assert jvm.returncode == 1, jvm.stdout + jvm.stderr
    *jvm_divergences, jd = [json.loads(x) for x in jvm.stdout.splitlines()]

    def same(x: dict) -> tuple:
        return tuple(x.get(k) for k in ("kind", "partition", "firstOffset", "lastOffset", "file", "position",
                                         "client", "isolation", "files", "rule", "command"))

    assert sorted(map(same, divergences), key=repr) == sorted(map(same, jvm_divergences), key=repr)
    assert [(r["file"], r["field"], r["original"]) for r in d["restamps"]] == \
        [(r["file"], r["field"], r["original"]) for r in jd["restamps"]]
    assert d["partitionResults"] == jd["partitionResults"]


@pytest.mark.kafka
@pytest.mark.timeout(900)
def test_topics_are_created_with_the_topic_ids_of_their_files(tmp_path: Path, kafka_libs):
    """A dir without __cluster_metadata: the test broker's controller creates each topic with the id its
    partition.metadata carries (RegisterBrokerRecord, TopicRecord and PartitionRecords added to bootstrap.checkpoint),
    so no copy is restamped; each partition starts at its files' latest leader epoch, so Kafka keeps their epoch
    entries (a topic created through the admin API starts at a low epoch, and the broker's first entry truncates the
    files' higher ones: "caused truncation of conflicting entries", reported as dropped). The broker's registration
    is a clean restart of the bootstrap's node: one clean election from the ISR/ELR at the files' epoch + 1, no
    unclean one, no coordinator losing a partition it was loading."""
    from builders import certify_data_dir
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    from kafkalog.compat.broker import Broker
    from kafkalog.storage.files.leader_epoch import read_leader_epoch_checkpoint
    from kafkalog.storage.files.partition_metadata import read_partition_metadata
    from kafkalog.storage.records.reader import iter_batches

    orig = certify_data_dir(tmp_path / "orig", ["clean", "high"])
    ids = {t: read_partition_metadata(orig / f"{t}-0" / "partition.metadata").topic_id for t in ("clean", "high")}
    # high-0: its last segment written by a leader at epoch 5 (partitionLeaderEpoch is not under the CRC)
    seg = orig / "high-0" / "00000000000000000043.log"
    buf = bytearray(seg.read_bytes())
    for b in list(iter_batches(bytes(buf))):
        buf[b.position + 12:b.position + 16] = (5).to_bytes(4, "big")
    seg.write_bytes(bytes(buf))
    (orig / "high-0" / "leader-epoch-checkpoint").write_text("0\n2\n1 0\n5 43\n")
    before = tree(orig)
    report = certify([orig], kafka="4.3.1", workdir=tmp_path / "work")
    assert tree(orig) == before
    (d,) = report.dirs
    assert d.started and d.metadata == "created" and d.conformant, [x.to_json() for x in d.divergences]
    assert not [r for r in d.restamps if r.field == "topic_id"], d.restamps
    copy = Path(d.work_dir) / "data"
    for t, tid in ids.items():
        assert read_partition_metadata(copy / f"{t}-0" / "partition.metadata").topic_id == tid
        mine = read_leader_epoch_checkpoint(orig / f"{t}-0" / "leader-epoch-checkpoint").entries
        theirs = read_leader_epoch_checkpoint(copy / f"{t}-0" / "leader-epoch-checkpoint").entries
        assert theirs[:len(mine)] == mine and [e.epoch for e in theirs[len(mine):]] == [mine[-1].epoch + 1], \
            (mine, theirs)
    log = (Path(d.work_dir) / "broker.log").read_text()
    assert "Replayed initial RegisterBrokerRecord for broker 1" in log
    assert log.count("using ELR") + log.count("using ISR") >= 2 and "RECOVERING" not in log
    # the topics live in the broker's own metadata log with those ids: DescribeTopics after a restart says so
    with Broker("4.3.1", data_dir=copy) as broker:  # (started by the with)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        described = admin.describe_topics(TopicCollection(sorted(ids)))
        assert {t: str(f.result(timeout=60).topic_id) for t, f in described.items()} == ids


@pytest.mark.kafka
@pytest.mark.timeout(900)
def test_a_kafka_before_3_3_certifies_in_zookeeper_mode(tmp_path: Path, kafka_libs):
    """Kafka 2.8.2 (when KAFKALOG_KAFKA_VERSIONS names it: ``make test-older``) runs in ZooKeeper mode, as its users
    ran it (its KRaft mode was early access): the topics are created in its ZooKeeper before it starts, with the ids
    of their partition.metadata and at the files' latest leader epoch, so no topic id is restamped and the files'
    epoch entries stay as they are (the broker leads at that epoch: no new entry); the report says the mode."""
    from builders import certify_data_dir

    from kafkalog.compat.pytest_plugin import configured_libs
    from kafkalog.storage.files.leader_epoch import read_leader_epoch_checkpoint
    from kafkalog.storage.files.meta_properties import read_meta_properties
    from kafkalog.storage.files.partition_metadata import read_partition_metadata
    from kafkalog.storage.records.reader import iter_batches

    configured_libs(kafka_libs, "2.8.2")
    orig = certify_data_dir(tmp_path / "orig", ["clean", "high"])
    seg = orig / "high-0" / "00000000000000000043.log"  # written by a leader at epoch 5 (not under the CRC)
    buf = bytearray(seg.read_bytes())
    for b in list(iter_batches(bytes(buf))):
        buf[b.position + 12:b.position + 16] = (5).to_bytes(4, "big")
    seg.write_bytes(bytes(buf))
    (orig / "high-0" / "leader-epoch-checkpoint").write_text("0\n2\n1 0\n5 43\n")
    ids = {t: read_partition_metadata(orig / f"{t}-0" / "partition.metadata").topic_id for t in ("clean", "high")}
    before = tree(orig)
    r = _cli(str(orig), "--kafka", "2.8.2", "--json", "--workdir", str(tmp_path / "work"))
    assert tree(orig) == before
    assert r.returncode == 0, r.stdout + r.stderr
    (d,) = [json.loads(x) for x in r.stdout.splitlines()]
    assert _schema_errors(d) == []
    assert d["mode"] == "zk" and d["metadata"] == "created" and d["conformant"], d
    assert {x["file"] for x in d["restamps"]} == {"meta.properties"}, d["restamps"]  # no topic id restamped
    copy = Path(d["workDir"]) / "data"
    assert read_meta_properties(copy / "meta.properties").version == 0
    for t, tid in ids.items():
        assert read_partition_metadata(copy / f"{t}-0" / "partition.metadata").topic_id == tid
        assert read_leader_epoch_checkpoint(copy / f"{t}-0" / "leader-epoch-checkpoint").entries == \
            read_leader_epoch_checkpoint(orig / f"{t}-0" / "leader-epoch-checkpoint").entries


@pytest.mark.kafka
@pytest.mark.campaign
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", ["kafka-4.3.1-kraft", "kafka-4.3.1-kraft-killed"])
def test_the_bootstrap_registration_matches_any_clean_shutdown_marker(tmp_path: Path, kafka_libs, name: str):
    """The bootstrap's RegisterBrokerRecord carries the epoch the broker will report as previousBrokerEpoch: 12
    from the 4.3.1 fixture's marker (its __cluster_metadata removed), -1 for the killed fixture without a marker.
    Either way every partition is elected cleanly once, no id is restamped, and the 4.3.1 dir stays conformant."""
    orig = tmp_path / "orig"
    shutil.copytree(FIXTURES / name / "data", orig, symlinks=True)
    shutil.rmtree(orig / "__cluster_metadata-0", ignore_errors=True)
    (orig / "bootstrap.checkpoint").unlink(missing_ok=True)
    report = certify([orig], kafka="4.3.1", workdir=tmp_path / "work")
    (d,) = report.dirs
    assert d.started and d.metadata == "created" and not [r for r in d.restamps if r.field == "topic_id"]
    log = (Path(d.work_dir) / "broker.log").read_text()
    assert "RECOVERING" not in log and "no longer the leader" not in log
    assert log.count("using ELR") + log.count("using ISR") == len(d.partitions)
    if name == "kafka-4.3.1-kraft":
        assert d.conformant, [x.to_json() for x in d.divergences]
