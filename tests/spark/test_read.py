"""The kafkalog Spark data source reads exactly what the records layer reads."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest
from builders import BASE_TS, every_codec_data_dir, generated_partition

from kafkalog.storage.records.dump import dump_log

pytestmark = pytest.mark.spark


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TS_TYPES = {"CreateTime": 0, "LogAppendTime": 1, "NoTimestampType": -1}


def partition_dirs(root: Path) -> list[Path]:
    """The broker's partition dirs (not a tiered fixture's remote store: its dirs are named
    ``<topic>-<partition>-<topicId>``, read through ``option("remote", ...)``)."""
    return sorted({log.parent for log in root.rglob("*.log") if "kafka-tiered-storage" not in log.parts})


def reference_rows(pdirs: list[Path]) -> list[tuple]:
    """What ``kafkalog dump --json --deep`` prints (its library function, ``dump_log``), as rows."""
    out = []
    for pdir in pdirs:
        topic, _, part = pdir.name.rpartition("-")
        for log in sorted(pdir.glob("*.log")):
            for d in dump_log(str(log), deep=True):
                if d.get("event") is not None or not d.get("isValid") or "error" in d:
                    continue
                for r in d["records"]:
                    out.append((topic, int(part), r["offset"], r["timestamp"], TS_TYPES[d["timestampType"]],
                                r["key"], r["value"], [(k, v) for k, v in r["headers"]],
                                d["partitionLeaderEpoch"], d["producerId"], d["producerEpoch"],
                                r.get("sequence", -1), d["isTransactional"], d["isControl"], d["magic"],
                                d["codec"], str(log), d["position"]))
    return sorted(out, key=lambda t: (t[0], t[1], t[2], t[16]))


def spark_rows(df) -> list[tuple]:
    rows = df.select(*COLUMNS).collect()
    out = [(r.topic, r.partition, r.offset, r.timestampMs, r.timestampType, r.key and bytes(r.key),
            r.value and bytes(r.value), [(h.key, h.value and bytes(h.value)) for h in r.headers or []], r.leaderEpoch,
            r.producerId, r.producerEpoch, r.sequence, r.isTransactional, r.isControl, r.magic, r.codec,
            r.segment, r.position) for r in rows]
    return sorted(out, key=lambda t: (t[0], t[1], t[2], t[16]))


COLUMNS = ["topic", "partition", "offset", "timestampMs", "timestampType", "key", "value", "headers", "leaderEpoch",
           "producerId", "producerEpoch", "sequence", "isTransactional", "isControl", "magic", "codec", "segment",
           "position"]


@pytest.fixture(scope="module")
def mixed_dir(tmp_path_factory) -> Path:
    """Uncompressed, all four codecs, a producer id, several segments, and v0/v1 message sets."""
    return every_codec_data_dir(tmp_path_factory.mktemp("mixed"))


def test_reads_exactly_what_dump_deep_reads(spark, mixed_dir):
    df = (spark.read.format("kafkalog").option("maxPartitionBytes", str(512 * 1024))
          .option("includeControlRecords", "true").load(str(mixed_dir)))
    assert df.rdd.getNumPartitions() > 2  # the 1 MiB segments were split
    got = spark_rows(df)
    assert len(got) == 2 * 4000 + 4 * 1500 + 15
    assert got == reference_rows(partition_dirs(mixed_dir))


def test_real_kafka_fixtures_read_like_dump(spark):
    """Every partition of every captured broker dir under fixtures/ (Kafka 4.x, 3.9 KRaft, 3.9 ZK v0/v1)."""
    pdirs = partition_dirs(FIXTURES) if FIXTURES.is_dir() else []
    if not pdirs:
        assert os.environ.get("CI") != "true", "fixtures/ holds no captured broker dirs"
        return  # a checkout without fixtures: test_reads_exactly_what_dump_deep_reads covers generated data
    def read():  # (a DataFrameReader's option() changes it: a new one each time)
        return spark.read.format("kafkalog").option("mode", "permissive").option("paths", ",".join(map(str, pdirs)))

    df = read().option("includeControlRecords", "true").load().filter("_corrupt is null")
    want = reference_rows(pdirs)
    assert want and spark_rows(df) == want
    # by default, as format("kafka"): no control records
    assert spark_rows(read().load().filter("_corrupt is null")) == [r for r in want if not r[13]]
    assert any(r[13] for r in want)


def test_producer_fields_and_schema(spark, mixed_dir):
    df = spark.read.format("kafkalog").option("topics", "plain").load(str(mixed_dir))
    # format("kafka")'s columns first, with its types; then kafkalog's own
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields][:9] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int"), ("headers", "array<struct<key:string,value:binary>>"),
        ("timestampMs", "bigint")]
    r = df.filter("partition = 1 and offset = 123").collect()
    assert len(r) == 1
    r = r[0]
    assert (r.producerId, r.producerEpoch, r.sequence, r.leaderEpoch, r.timestampType) == (42, 0, 123, 3, 0)
    legacy = spark.read.format("kafkalog").option("topics", "leg*").load(str(mixed_dir)).orderBy("offset").collect()
    assert [x.magic for x in legacy] == [0] * 5 + [1] * 10
    assert [x.offset for x in legacy] == list(range(15))
    assert legacy[0].timestampMs == -1 and legacy[0].timestampType == -1
    assert legacy[5].timestampMs == BASE_TS and legacy[5].timestampType == 0
    # as format("kafka") shows them (PySpark collects local naive datetimes): -1 is one ms before the epoch
    assert legacy[0].timestamp == datetime.datetime.fromtimestamp(-1 / 1000)
    assert legacy[5].timestamp == datetime.datetime.fromtimestamp(BASE_TS / 1000)
    assert legacy[0].headers is None


def test_batch_level(spark, mixed_dir):
    df = spark.read.format("kafkalog").option("level", "batch").option("topics", "zstd").load(str(mixed_dir))
    rows = df.orderBy("baseOffset").collect()
    assert len(rows) == 15
    assert rows[0].baseOffset == 0 and rows[-1].lastOffset == 1499
    assert all(r.codec == "zstd" and r.crcValid and r.recordCount == 100 for r in rows)


def test_offset_and_time_pushdown(spark, mixed_dir):
    base = spark.read.format("kafkalog").option("pushFilters", "true").option("topics", "plain").load(str(mixed_dir))
    got = base.filter("partition = 0 and offset >= 2500 and offset < 2510").collect()
    assert sorted(r.offset for r in got) == list(range(2500, 2510))
    opt = (spark.read.format("kafkalog").option("topics", "plain").option("partitions", "0")
           .option("startingOffset", "3990").load(str(mixed_dir)))
    assert sorted(r.offset for r in opt.collect()) == list(range(3990, 4000))
    t0 = BASE_TS + 3000 * 10
    by_time = base.filter(f"partition = 1 and timestamp >= timestamp_millis({t0})").collect()
    want = [r for r in reference_rows(partition_dirs(mixed_dir)) if r[0] == "plain" and r[1] == 1 and r[3] >= t0]
    assert sorted(r.offset for r in by_time) == [r[2] for r in want]


def test_pushdown_narrows_the_plan(mixed_dir):
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThan

    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.source import KafkaLogReader

    r = KafkaLogReader(None, parse_read_options({"path": str(mixed_dir), "pushFilters": "true"}))
    filters = [EqualTo(("topic",), "plain"), EqualTo(("partition",), 0), GreaterThanOrEqual(("offset",), 3000),
               LessThan(("offset",), 3100), EqualTo(("key",), b"x")]
    left = list(r.pushFilters(filters))
    assert left == [filters[-1]]
    pieces = [p for part in r.partitions() for p in part.pieces]
    assert len(pieces) == 1 and pieces[0].topic == "plain" and pieces[0].partition == 0
    assert pieces[0].length < 60_000  # a slice of one segment found through the offset index


def test_corrupt_batch_failfast_and_permissive(spark, tmp_path):
    generated_partition(tmp_path / "t-0", 500, batch_records=50)
    log = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    from kafkalog.storage.records import iter_batches

    positions = [b.position for b in iter_batches(bytes(data))]
    data[positions[3] + 100] ^= 0xFF  # inside the records of the 4th batch
    log.write_bytes(bytes(data))
    with pytest.raises(Exception) as ei:
        spark.read.format("kafkalog").load(str(tmp_path)).count()
    assert f"byte {positions[3]}" in str(ei.value) and "crc" in str(ei.value)
    df = spark.read.format("kafkalog").option("mode", "permissive").load(str(tmp_path))
    bad = df.filter("_corrupt is not null").collect()
    assert len(bad) == 1 and bad[0].position == positions[3] and bad[0].segment == str(log)
    assert df.filter("_corrupt is null").count() == 450
    batches = spark.read.format("kafkalog").option("mode", "permissive").option("level", "batch").load(str(log))
    rows = batches.orderBy("position").collect()
    assert [r.position for r in rows] == positions and rows[3]._corrupt and rows[3].baseOffset is None
    assert all(r.crcValid and r._corrupt is None for i, r in enumerate(rows) if i != 3)


def torn_tail_partition(root: Path) -> tuple[Path, int]:
    """``root/t-0``: 100 records, then 9 zero bytes (a torn tail); its log and the tail's position."""
    generated_partition(root / "t-0", 100, batch_records=10)
    log = root / "t-0" / "00000000000000000000.log"
    size = log.stat().st_size
    with open(log, "ab") as f:
        f.write(b"\x00" * 9)
    return log, size


def test_torn_tail_is_reported(spark, tmp_path):
    log, size = torn_tail_partition(tmp_path)
    df = spark.read.format("kafkalog").option("mode", "permissive").load(str(log))
    bad = df.filter("_corrupt is not null").collect()
    assert len(bad) == 1 and bad[0].position == size and "torn tail" in bad[0]._corrupt
    assert df.count() == 101


@pytest.mark.skipif(os.environ.get("CI") != "true" and not __import__("kafkalog.storage.codec.native",
                    fromlist=["core"]).core, reason="the compiled record core is not built")
def test_partitions_yield_the_native_core_s_arrow_batches(spark, mixed_dir, monkeypatch):
    """The default read path: each input partition yields the Arrow record batches the compiled core built,
    already in the schema Spark expects (no cast, no Python object per record)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    from kafkalog.storage.records import RecordColumns
    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.source import KafkaLogDataSource, KafkaLogReader

    built = []
    to_arrow = RecordColumns.to_arrow

    def spy(self):
        rb = to_arrow(self)
        built.append((self._core is not None, rb))
        return rb

    monkeypatch.setattr(RecordColumns, "to_arrow", spy)
    options = {"path": str(mixed_dir), "topics": "plain,zstd"}
    schema = spark.read.format("kafkalog").options(**options).load().schema
    assert schema.simpleString() == spark.createDataFrame([], KafkaLogDataSource(options).schema()).schema.simpleString()
    reader = KafkaLogReader(schema, parse_read_options(options))
    out = [rb for part in reader.partitions() for rb in reader.read(part)]
    assert sum(rb.num_rows for rb in out) == 2 * 4000 + 1500
    assert built and all(native for native, _ in built)
    assert [id(rb) for rb in out] == [id(rb) for _, rb in built]  # yielded as built
    assert all(isinstance(rb, pa.RecordBatch) and rb.schema.equals(to_arrow_schema(schema, timezone="UTC"))
               for rb in out)


@pytest.mark.parametrize("include_control", [False, True])
def test_the_arrow_reader_s_rows_are_the_spark_source_s(mixed_dir, include_control):
    """:meth:`kafkalog.LogDirs.to_arrow` (one thread and several, every column and a projection) gives the Spark
    source's rows (its reader's Arrow batches, no JVM) on every committed fixture and the mixed dir: every codec,
    v0/v1 message sets, transactions, several segments."""
    import kafkalog
    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.plan import plan
    from kafkalog.tools.spark.scan import scan

    def rows(batches) -> list[tuple]:
        out = []
        for rb in batches:
            for r in rb.to_pylist():
                r["segment"] = os.path.basename(r["segment"])  # (the Spark source names the segment by its path)
                out.append(tuple(r.values()))
        return sorted(out, key=lambda t: (t[2], t[3], t[4], t[17], t[18]))

    for data in [*sorted(FIXTURES.glob("*/data")), mixed_dir]:
        opts = parse_read_options({"path": str(data), "includeControlRecords": str(include_control).lower()})
        spark_rows = rows(rb for group in plan(opts) for rb in scan(group, opts))
        assert spark_rows, data
        with kafkalog.open(data) as dirs:
            for threads in (1, 3):
                got = rows(dirs.to_arrow(include_control=include_control, threads=threads))
                assert got == spark_rows, (data, threads)
            cols = ["topic", "partition", "offset", "value", "headers"]
            narrow = dirs.to_arrow(include_control=include_control, columns=cols, threads=2).read_all()
            assert sorted(tuple(r.values()) for r in narrow.to_pylist()) == sorted(
                (t[2], t[3], t[4], t[1], t[7]) for t in spark_rows), data
