"""Run one query through Spark's own ``format("kafka")`` (against a live broker) and ``format("kafkalog")``
(over that broker's data dir), in a Spark session of its own (Spark's Kafka connector jars must be on the JVM's
classpath from its start, so not in the tests' shared session).

``python kafka_vs_kafkalog.py BOOTSTRAP DATA_DIR TOPIC OUT JARS``: writes to OUT a pickle of
``{"kafka": {...}, "kafkalog": {...}}``, each with ``schema`` (name, type, nullable of the common columns),
``rows`` (every record, the common columns, by partition and offset) and ``agg`` (per partition: count, min and
max offset, sum of value lengths, distinct keys, min and max timestamp).
"""

from __future__ import annotations

import pickle
import sys

COMMON = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
AGG = """SELECT partition, count(*) AS n, min(offset) AS lo, max(offset) AS hi,
          sum(length(value)) AS value_bytes, count(DISTINCT key) AS keys,
          min(timestamp) AS t_lo, max(timestamp) AS t_hi
         FROM records GROUP BY partition ORDER BY partition"""


def _plain(v):
    if isinstance(v, bytearray):
        return bytes(v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if hasattr(v, "asDict"):
        return {k: _plain(x) for k, x in v.asDict().items()}
    return v


def run(spark, df) -> dict:
    df = df.select(*COMMON)
    df.createOrReplaceTempView("records")
    schema = [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema.fields]
    rows = [tuple(_plain(v) for v in r) for r in df.orderBy("partition", "offset").collect()]
    agg = [tuple(r) for r in spark.sql(AGG).collect()]
    return {"schema": schema, "rows": rows, "agg": agg}


def main(bootstrap: str, data_dir: str, topic: str, out: str, jars: str) -> None:
    from kafkalog.tools.spark import session

    spark = session("local[2]", app_name="kafka-vs-kafkalog", conf={
        "spark.jars": jars, "spark.sql.session.timeZone": "UTC", "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "1g"})
    try:
        kafka = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                 .option("startingOffsets", "earliest").option("endingOffsets", "latest")
                 .option("includeHeaders", "true").load())
        kafkalog = spark.read.format("kafkalog").option("topics", topic).load(data_dir)
        result = {"kafka": run(spark, kafka), "kafkalog": run(spark, kafkalog)}
    finally:
        spark.stop()
    with open(out, "wb") as f:
        pickle.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:6])
