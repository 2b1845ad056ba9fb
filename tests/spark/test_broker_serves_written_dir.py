"""A data dir written by ``df.write.format("kafkalog")`` is loaded and served by a real Kafka 4.x broker."""

from __future__ import annotations

import time

import pytest
from builders import BASE_TS

from kafkalog.compat import jars
from kafkalog.compat.broker import Broker
from kafkalog.compat.clients import consume
from kafkalog.storage.files.partition_metadata import read_partition_metadata

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_written_dir_served_by_kafka4(spark, tmp_path):
    topic = "Spark-Written"  # mixed case: topicIds keeps it (Spark lower-cases option names)
    b = Broker(jars.LATEST_4, data_dir=tmp_path / "k4" / "data")
    b.start()
    try:
        b.create_topic(topic, partitions=2)
        deadline = time.monotonic() + 30
        while not all((b.partition_dir(topic, p) / "partition.metadata").exists() for p in (0, 1)):
            assert time.monotonic() < deadline, "broker did not create the partitions"
            time.sleep(0.2)
        b.stop()
        topic_id = read_partition_metadata(b.partition_dir(topic, 0) / "partition.metadata").topic_id
        rows = [(topic, i % 2, f"k{i}".encode(), f"value-{i}".encode() * 5, [("trace", f"{i}".encode())],
                 BASE_TS + i) for i in range(600)]
        df = spark.createDataFrame(rows, "topic string, partition int, key binary, value binary, "
                                         "headers array<struct<key:string,value:binary>>, timestamp bigint")
        (df.repartition(2, "partition").sortWithinPartitions("timestamp").write.format("kafkalog").mode("append")
         .option("codec", "zstd").option("batchSize", "2048").option("topicIds", f"{topic}={topic_id}")
         .save(str(b.data_dir)))
        b.start()
        got = consume(b.bootstrap_servers, topic, count=600, timeout=90)
    finally:
        b.close()
    by_part: dict[int, list] = {0: [], 1: []}
    for c in got:
        by_part[c.partition].append((c.offset, c.key, c.value, c.timestamp, [(h[0], h[1]) for h in c.headers]))
    for p in (0, 1):
        want = [(n, f"k{i}".encode(), f"value-{i}".encode() * 5, BASE_TS + i, [("trace", f"{i}".encode())])
                for n, i in enumerate(range(p, 600, 2))]
        assert sorted(by_part[p]) == want
