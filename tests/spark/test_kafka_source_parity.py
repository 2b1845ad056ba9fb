"""``format("kafkalog")`` over a broker's data dir gives the same rows as Spark's own ``format("kafka")``
against that broker (Kafka 4.3.1, Spark's Kafka connector from Maven Central).

One broker for the module: a topic of 3 partitions with keyed records with and without headers, a record
without key and value, gzip/lz4/zstd batches, a committed and an aborted transaction (so control records and
aborted records are in the log). With the broker still running (same machine: the data dir's files hold every
acknowledged batch, no flush or stop needed) the same query runs through both sources: every record's common
columns, and per partition count, min/max offset, sum of value lengths, distinct keys, min/max timestamp.
Identical, and so is the schema of the common columns. Control records are not rows on either side; the aborted
transaction's records are rows on both (``read_uncommitted``, Kafka's default)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest
from builders import BASE_TS

from kafkalog.compat import jars
from kafkalog.compat.clients import Record, create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

TOPIC = "parity"
HERE = Path(__file__).parent


def _records(tag: str, n: int, start: int) -> list[Record]:
    out = []
    for i in range(n):
        headers = (("trace", f"{tag}-{i}".encode()), ("empty", b"")) if i % 3 else ()
        out.append(Record(key=f"k{(start + i) % 7}".encode(), value=f"{tag}-value-{i}".encode() * (1 + i % 4),
                          headers=headers, timestamp=BASE_TS + start + i, partition=i % 3))
    return out


def _end_offsets(bootstrap: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "parity-probe", "log_level": 3})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(3)}
    finally:
        c.close()


@pytest.fixture(scope="module")
def results(module_broker_factory, tmp_path_factory):
    spark_jars = jars.ensure_spark_kafka(pyspark.__version__)
    b = module_broker_factory("4.3.1", mode="kraft")
    bs = b.bootstrap_servers
    create_topic(bs, TOPIC, partitions=3, config={"retention.ms": "-1"})  # BASE_TS is years ago
    fast = {"linger.ms": 5}
    produce(bs, TOPIC, _records("plain", 30, 0), client="confluent", flush_every=10, extra=fast)
    produce(bs, TOPIC, [Record(key=None, value=None, timestamp=BASE_TS + 99, partition=1)], client="confluent",
            extra=fast)
    for i, codec in enumerate(("gzip", "lz4", "zstd")):
        produce(bs, TOPIC, _records(codec, 12, 100 * (i + 1)), client="confluent", compression=codec, extra=fast)
    produce(bs, TOPIC, _records("committed", 9, 500), client="confluent", transactional_id="parity-c", extra=fast)
    produce(bs, TOPIC, _records("aborted", 9, 600), client="confluent", transactional_id="parity-a",
            transaction="abort", extra=fast)
    # every record + one marker per partition for each transaction: wait until the markers are in the log
    want = {p: 10 + (1 if p == 1 else 0) + 12 + 3 + 3 + 2 for p in range(3)}
    deadline = time.monotonic() + 30
    while (got := _end_offsets(bs)) != want:
        assert time.monotonic() < deadline, f"end offsets {got}, expected {want}"
        time.sleep(0.3)
    out = tmp_path_factory.mktemp("parity") / "result.pickle"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*sys.path])
    proc = subprocess.run([sys.executable, str(HERE / "kafka_vs_kafkalog.py"), bs, str(b.data_dir), TOPIC, str(out),
                           ",".join(map(str, spark_jars))], env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(out, "rb") as f:
        return pickle.load(f)


def test_same_schema_for_the_common_columns(results):
    assert results["kafkalog"]["schema"] == results["kafka"]["schema"]


def test_same_rows(results):
    kafka, kafkalog = results["kafka"]["rows"], results["kafkalog"]["rows"]
    assert len(kafka) == 3 * (10 + 12 + 3 + 3) + 1
    assert any(r[7] is None for r in kafka) and any(r[7] for r in kafka)  # with and without headers
    assert any(r[0] is None and r[1] is None for r in kafka)
    assert kafkalog == kafka


def test_same_aggregation(results):
    assert results["kafkalog"]["agg"] == results["kafka"]["agg"]
    assert [r[0] for r in results["kafka"]["agg"]] == [0, 1, 2]
