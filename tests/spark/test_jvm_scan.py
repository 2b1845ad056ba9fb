"""The JVM segment scan (``kafkalog.tools.spark.jvm.load``) gives exactly the rows of ``format("kafkalog")``: the
same plan, decoded in the JVM by Kafka's record classes, with column pruning."""

from __future__ import annotations

import datetime

import pytest
from builders import BASE_TS, generated_partition
from test_read import FIXTURES, partition_dirs, spark_rows, torn_tail_partition
from test_read import mixed_dir as mixed_dir  # the module-scoped fixture: all codecs, v0/v1, producer ids

from kafkalog.compat.pytest_plugin import in_ci

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def jvm(spark):
    from kafkalog.tools.spark.jvm import has_scan

    if not has_scan(spark):
        assert not in_ci(), "CI=true: the JVM segment scan must be on the Spark session's classpath"
        pytest.skip("the JVM segment scan is not on the classpath (no JDK or no kafka-clients)")
    return spark


def _both(spark, path: str | None, **options: str):
    from kafkalog.tools.spark.jvm import CLASS, load

    a = load(spark, path, options)
    assert "kafkalog segment scan" in _plan(a), CLASS
    reader = spark.read.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, v)
    b = reader.load(path) if path is not None else reader.load()
    return a, b


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def _same(a, b) -> int:
    got, want = spark_rows(a), spark_rows(b)
    assert got == want
    # the columns spark_rows leaves out: Spark's timestamp
    ts = sorted((r.topic, r.partition, r.offset, r.timestamp) for r in a.select("topic", "partition", "offset",
                                                                                "timestamp").collect())
    assert ts == sorted((r.topic, r.partition, r.offset, r.timestamp) for r in b.select(
        "topic", "partition", "offset", "timestamp").collect())
    return len(got)


def test_every_fixture_reads_as_the_python_source(jvm):
    pdirs = partition_dirs(FIXTURES)
    assert pdirs or not in_ci()
    paths = ",".join(map(str, pdirs))
    n = _same(*_both(jvm, None, paths=paths, includeControlRecords="true"))
    assert n > 3000
    assert _same(*_both(jvm, None, paths=paths)) < n  # without the transaction markers


def test_codecs_legacy_and_producer_fields(jvm, mixed_dir):
    a, b = _both(jvm, str(mixed_dir), maxPartitionBytes=str(512 * 1024))
    assert a.rdd.getNumPartitions() == b.rdd.getNumPartitions() > 2  # the same plan: the 1 MiB segments split
    assert _same(a, b) == 2 * 4000 + 4 * 1500 + 15
    legacy = sorted(a.filter("topic = 'legacy'").collect(), key=lambda r: r.offset)
    assert legacy[0].timestamp == datetime.datetime.fromtimestamp(-1 / 1000) and legacy[0].headers is None


@pytest.mark.parametrize("options", [
    {"topics": "plain", "partitions": "1"},
    {"topics": "plain", "startingOffset": "1990", "endingOffset": "2010"},
    {"topics": "gz,lz4", "startingTimestamp": str(BASE_TS + 700 * 10)},
    {"offset": "-100"},
    {"offset": "7:40", "topics": "legacy,snappy"},
    {"verifyCrc": "false", "topics": "zstd"},
])  # fmt: skip
def test_planning_options_read_the_same_rows(jvm, mixed_dir, options):
    a, b = _both(jvm, str(mixed_dir), **options)
    _same(a, b)


def test_only_the_asked_columns_are_read(jvm, mixed_dir):
    from kafkalog.tools.spark.jvm import load

    q = load(jvm, str(mixed_dir)).groupBy("topic").agg({"offset": "max", "value": "count"})
    plan = _plan(q)
    read = plan.split("kafkalog segment scan ", 1)[1].split()[0]
    assert sorted(read.split(",")) == ["offset", "topic", "value"], plan  # 3 of the 19 columns


def test_what_it_does_not_read_goes_to_the_python_source(jvm, mixed_dir):
    from kafkalog.tools.spark.jvm import load

    df = load(jvm, str(mixed_dir), {"level": "batch", "topics": "zstd"})
    assert "segment scan" not in _plan(df)
    assert df.count() == 15


def test_a_corrupt_batch_fails_naming_segment_and_byte(jvm, tmp_path):
    from kafkalog.storage.records import iter_batches
    from kafkalog.tools.spark.jvm import load

    generated_partition(tmp_path / "t-0", 500, batch_records=50)
    log = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    positions = [b.position for b in iter_batches(bytes(data))]
    data[positions[3] + 100] ^= 0xFF
    log.write_bytes(bytes(data))
    with pytest.raises(Exception) as ei:
        load(jvm, str(tmp_path)).count()
    assert f"at byte {positions[3]}" in str(ei.value) and "crc" in str(ei.value) and str(log) in str(ei.value)


def test_a_torn_tail_fails_as_in_the_python_source(jvm, tmp_path):
    from kafkalog.tools.spark.jvm import load

    _, size = torn_tail_partition(tmp_path)
    for df in (load(jvm, str(tmp_path)), jvm.read.format("kafkalog").load(str(tmp_path))):
        with pytest.raises(Exception) as ei:
            df.count()
        assert f"byte {size}" in str(ei.value) and "torn tail" in str(ei.value)


def test_paths_with_separators_and_unicode(jvm, tmp_path):
    root = tmp_path / "dir with space|and%pipe é"
    generated_partition(root / "t-0", 30, batch_records=10)
    a, b = _both(jvm, str(root))
    assert _same(a, b) == 30
    assert {r.segment for r in a.select("segment").collect()} == {str(root / "t-0" / "00000000000000000000.log")}


def test_what_the_scan_refuses_is_said(mixed_dir):
    """No Spark needed: the reasons :func:`load` reads through ``format("kafkalog")`` instead."""
    import dataclasses

    from kafkalog.tools.spark.jvm import jvm_scan_refusal, pieces_refusal
    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.plan import plan

    opts = parse_read_options({"path": str(mixed_dir)})
    assert jvm_scan_refusal(opts) is None
    assert jvm_scan_refusal(parse_read_options({"path": str(mixed_dir), "level": "batch"})) == "level=batch"
    assert jvm_scan_refusal(parse_read_options({"path": str(mixed_dir), "mode": "permissive"})) == "mode=permissive"
    assert jvm_scan_refusal(parse_read_options({"path": "s3://bucket/data"})) == "a remote file system"
    groups = plan(opts)
    assert pieces_refusal(groups) is None
    big = [[dataclasses.replace(groups[0][0], end=1 << 31)]]
    assert pieces_refusal(big) == f"a segment larger than 2 GiB ({groups[0][0].name})"
