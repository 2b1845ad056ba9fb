"""kafkalog's own writers, certified against a real Kafka (issue 31 item 5): ``import``, ``append``, ``convert``,
``compact``, ``retain``, ``repair``, ``migrate``, ``rehydrate`` and the Spark writer each do their work on their
own partition of ONE data dir, a copy of ``fixtures/kafka-4.3.1-kraft/data``, and ``certify`` loads that dir in
one broker start and must find it conformant (every partition served record for record by both clients at both
isolation levels, Kafka's DumpLogSegments and ``verify`` clean).

The dir keeps its own ``__cluster_metadata`` (the broker keeps the topics, their ids and configs): a topic the
metadata does not know would be a stray, so every writer writes into a partition of an existing topic, with
that topic's id. Where a command only writes its own names (``rehydrate`` writes the tiered topic's, a v0
partition comes from a ZooKeeper-era dir), its output is staged and moved in with ``migrate``, as an operator
restoring into an existing cluster would.

Kafka 4.3.1 runs by default (CI); 3.9.2, and 2.8.2 when ``KAFKALOG_KAFKA_VERSIONS`` names it, under
``campaign`` (``make campaign``). Those brokers cannot read the 4.3.1 ``__cluster_metadata`` nor the 4.x group
coordinator's records: their copy goes without the internal topics, and ``certify`` creates the topics with the
ids of their ``partition.metadata`` (none restamped): 3.9.2 in KRaft mode (the controller's bootstrap records),
2.8.2 in ZooKeeper mode (the topic znodes; 2.8's KRaft was early access, not what its users ran)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from damage import leftovers, tree

from kafkalog.compat.certify import CertifyReport, certify
from kafkalog.compat.pytest_plugin import configured_versions, require_modules
from kafkalog.storage.files.partition_metadata import read_partition_metadata
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.tools.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
NOW = 1800000000000

#: writer -> the partition of the 4.3.1 fixture it writes
TARGETS = {
    "append": "codec-none-0",
    "import": "codec-gzip-0",
    "convert": "codec-snappy-0",
    "migrate": "large-0",
    "compact": "multi-segment-0",
    "retain": "multi-segment-1",
    "repair": "codec-lz4-0",
    "rehydrate": "idempotent-1",
    "spark": "broker-compression-0",
}

VERSIONS = [pytest.param("4.3.1", id="4.3.1"), pytest.param("3.9.2", id="3.9.2", marks=pytest.mark.campaign)]
if "2.8.2" in configured_versions():
    VERSIONS.append(pytest.param("2.8.2", id="2.8.2", marks=pytest.mark.campaign))


def _kl(*args: str, code: int = 0) -> None:
    """One kafkalog command, in-process through the CLI's ``main``."""
    got = main([str(a) for a in args])
    assert got == code, f"kafkalog {' '.join(map(str, args))}: exit {got}, expected {code}"


def _topic_id(d: Path, name: str) -> str:
    return read_partition_metadata(d / name / "partition.metadata").topic_id


def _span(p: Path) -> tuple[int, int]:
    with PartitionLog(p) as plog:
        return plog.log_start_offset, plog.log_end_offset


def _migrate_in(src: Path, d: Path, name: str) -> None:
    """``src`` replaces ``d/name`` under that partition's name and topic id (its files go to no backup)."""
    topic, _, part = name.rpartition("-")
    _kl("migrate", src, d, "--topic", topic, "--partition", part, "--topic-id", _topic_id(d, name),
        "--overwrite", "--no-backup")


_SPARK_WRITE = """
import sys
from kafkalog.tools.spark import session
d, topic, part, topic_id, now = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
spark = session("local[1]", conf={"spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "1",
                                  "spark.driver.memory": "512m"})
try:
    rows = [(topic, part, f"k{i}".encode(), f"spark-{i}".encode() * 3, now + i) for i in range(20)]
    df = spark.createDataFrame(rows, "topic string, partition int, key binary, value binary, timestamp bigint")
    (df.coalesce(1).write.format("kafkalog").mode("append").option("codec", "lz4").option("batchSize", "256")
     .option("topicIds", f"{topic}={topic_id}").save(d))
finally:
    spark.stop()
"""


def _spark_write(d: Path, name: str) -> None:
    """One small ``df.write.format("kafkalog")`` append, by a local Spark in a process of its own: a JVM this
    process started would stay, without the JVM scan's jars the Spark tests' session needs on its classpath."""
    require_modules("pyspark", "pyarrow", extra="spark")
    topic, _, part = name.rpartition("-")
    proc = subprocess.run([sys.executable, "-c", _SPARK_WRITE, str(d), topic, part, _topic_id(d, name), str(NOW)],
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]


def build_written_dir(d: Path, work: Path) -> dict[str, str]:
    """The 4.3.1 fixture copied to ``d``, each writer's work done on its own partition (:data:`TARGETS`); returns
    writer -> what it did, in words, for the failure message."""
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", d)
    work.mkdir(parents=True)
    done: dict[str, str] = {}
    before = {w: _span(d / n) for w, n in TARGETS.items()}

    # repair (first, on the whole dir: nothing else in it needs repair): the leftovers of an interrupted segment
    # replacement and an orphaned index in codec-lz4-0
    done["repair"] = str(leftovers(d))
    _kl("repair", "--no-backup", d, code=1)

    # append (a leader's append: offsets from the log end), then flush writes the checkpoints, as its doc says
    src = work / "append.jsonl"
    src.write_text("".join(json.dumps({"key": f"a{i}", "value": f"appended {i}", "timestamp": NOW + i}) + "\n"
                           for i in range(12)))
    _kl("append", d, TARGETS["append"], "--from", src, "--payload", "utf8", "--now", NOW)
    _kl("flush", "--no-backup", d)

    # import: codec-zstd exported to JSON Lines, imported as codec-gzip's partition 0 (emptied first)
    _kl("export", d / "codec-zstd-0", "--out", work / "zstd.jsonl")
    tid = _topic_id(d, TARGETS["import"])
    shutil.rmtree(d / TARGETS["import"])
    _kl("import", work / "zstd.jsonl", d, "--topic", "codec-gzip", "--topic-id", tid)

    # convert: a message format v0 partition of the ZooKeeper-era fixture, moved in, then converted to v2
    _migrate_in(FIXTURES / "kafka-3.9.2-zk-v0" / "data" / "codec-gzip-0", d, TARGETS["convert"])
    _kl("convert", "--no-backup", d / TARGETS["convert"])

    # migrate: a 3.9.2 KRaft partition in place of large-0
    _migrate_in(FIXTURES / "kafka-3.9.2-kraft" / "data" / "compacted-0", d, TARGETS["migrate"])

    # compact: a round with cleanup.policy=compact on multi-segment-0 (its closed segments are dirty)
    _kl("compact", "--no-backup", "--now", NOW, "--config", "cleanup.policy=compact", d / TARGETS["compact"])

    # retain: a clock at which retention.ms deletes the oldest segment (offsets 0..47)
    _kl("retain", "--no-backup", "--now", 1750000300000, "--config", "retention.ms=200000", d / TARGETS["retain"])

    # rehydrate: the tiered fixture's tiered-0 (remote segments + local ones), moved in as idempotent-1
    tiered = FIXTURES / "kafka-4.3.1-tiered"
    (work / "rehydrated").mkdir()  # a formatted log dir (kafka-storage format): the fixture's meta.properties
    shutil.copyfile(d / "meta.properties", work / "rehydrated" / "meta.properties")
    _kl("rehydrate", tiered / "remote", work / "rehydrated", "--metadata-dir", tiered / "data", "--topic", "tiered",
        "--partition", "0")
    _migrate_in(work / "rehydrated" / "tiered-0", d, TARGETS["rehydrate"])

    # the Spark writer: one small append
    _spark_write(d, TARGETS["spark"])

    after = {w: _span(d / n) for w, n in TARGETS.items()}
    for w in TARGETS:
        assert (d / TARGETS[w]).is_dir()
        done[w] = f"{TARGETS[w]}: offsets {before[w][0]}..{before[w][1]} -> {after[w][0]}..{after[w][1]}" + (
            f" ({done[w]})" if w in done else "")
    assert tree(d / "codec-zstd-0") == tree(FIXTURES / "kafka-4.3.1-kraft" / "data" / "codec-zstd-0")
    return done


def _explain(report: CertifyReport, done: dict[str, str]) -> str:
    out = ["what each writer did:", *(f"  {w}: {s}" for w, s in done.items()), "certify's report:"]
    for d in report.dirs:
        out += [f"  {d.path}: started {d.started}, {len(d.divergences)} divergence(s)",
                *(f"  {json.dumps(x.to_json(), default=str)}" for x in d.divergences)]
    return "\n".join(out)


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.timeout(900)
@pytest.mark.parametrize("version", VERSIONS)
def test_kafkalogs_writers_are_conformant(tmp_path: Path, kafka_libs, version: str):
    d = tmp_path / "data"
    done = build_written_dir(d, tmp_path / "work")
    if version != "4.3.1":
        # an older broker cannot read 4.3.1's metadata log (certify creates the topics) nor the 4.x group
        # coordinator's records in __consumer_offsets (3.9.2 ignores keys of versions 3, 5-8 with a warning):
        # no writer of kafkalog wrote them, so the internal topics go too
        for p in d.iterdir():
            if p.name.startswith("__"):
                shutil.rmtree(p)
        (d / "bootstrap.checkpoint").unlink()
    report = certify([d], kafka=version, workdir=tmp_path / "certify")
    (rep,) = report.dirs
    assert rep.started and rep.conformant, _explain(report, done)
    assert rep.mode == ("zk" if version == "2.8.2" else "kraft")
    assert [r for r in rep.restamps if r.field == "topic_id"] == []  # every topic kept its files' id
    served = {p.partition: p for p in rep.partitions}
    for w, name in TARGETS.items():  # every writer's partition was consumed to its end, by both clients
        cs = served[name].served
        assert len(cs) == 4 and all(c.served == c.expected > 0 for c in cs), (w, name, cs)
