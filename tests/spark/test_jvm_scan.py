"""``format("kafkalog")`` with kafkalog's jar is the JVM source (``KafkaLogSource.java``): it reads through the JVM
segment scan by default and gives exactly the rows of the Python data source (``format("kafkalog_python")`` in the
same session): the same plan (kafkalog's planner, run on the driver), decoded in the JVM by Kafka's record classes,
with column pruning; what the scan does not read goes to the Python source with its reason in the plan."""

from __future__ import annotations

import datetime

import pytest
from builders import BASE_TS, generated_partition, generated_record
from test_read import FIXTURES, partition_dirs, spark_rows, torn_tail_partition
from test_read import mixed_dir as mixed_dir  # the module-scoped fixture: all codecs, v0/v1, producer ids

from kafkalog.compat.pytest_plugin import in_ci

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def jvm(spark):
    from kafkalog.tools.spark.jvm import has_scan, has_source

    if not (has_scan(spark) and has_source(spark)):
        assert not in_ci(), "CI=true: the JVM segment scan must be on the Spark session's classpath"
        pytest.skip("the JVM segment scan is not on the classpath (no JDK or no kafka-clients)")
    return spark


def _read(spark, fmt: str, path: str | None, options: dict[str, str]):
    reader = spark.read.format(fmt)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(path) if path is not None else reader.load()


def _both(spark, path: str | None, **options: str):
    """The default path (``format("kafkalog")``: the JVM source and scan) and the Python data source."""
    from kafkalog.tools.spark.jvm import PYTHON_NAME, load

    a = _read(spark, "kafkalog", path, options)
    assert "kafkalog segment scan" in _plan(a)
    assert "kafkalog segment scan" in _plan(load(spark, path, options))  # (load: the scan, planned in this process)
    b = _read(spark, PYTHON_NAME, path, options)
    assert "segment scan" not in _plan(b)
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
    q = jvm.read.format("kafkalog").load(str(mixed_dir)).groupBy("topic").agg({"offset": "max", "value": "count"})
    plan = _plan(q)
    read = plan.split("kafkalog segment scan ", 1)[1].split()[0]
    assert sorted(read.split(",")) == ["offset", "topic", "value"], plan  # 3 of the 19 columns


@pytest.mark.parametrize(("options", "reason"), [
    ({"level": "batch"}, "level=batch"),
    ({"mode": "permissive"}, "mode=permissive"),
    ({"pushFilters": "true"}, "pushFilters"),
])  # fmt: skip
def test_what_it_does_not_read_goes_to_the_python_source(jvm, mixed_dir, options, reason):
    from kafkalog.tools.spark.jvm import PYTHON_NAME, load

    df = _read(jvm, "kafkalog", str(mixed_dir), {"topics": "zstd", **options})
    plan = _plan(df)
    assert "segment scan" not in plan and f"kafkalog Python data source ({reason})" in plan, plan
    want = _read(jvm, PYTHON_NAME, str(mixed_dir), {"topics": "zstd", **options})
    assert df.schema == want.schema
    assert sorted(map(repr, df.collect())) == sorted(map(repr, want.collect()))
    assert "segment scan" not in _plan(load(jvm, str(mixed_dir), {"topics": "zstd", **options}))


def test_a_pushed_filter_reaches_the_python_source(jvm, mixed_dir):
    df = _read(jvm, "kafkalog", str(mixed_dir), {"pushFilters": "true", "topics": "plain"}).where("offset = 5")
    assert [(r.partition, r.offset) for r in df.select("partition", "offset").collect()] == [(0, 5), (1, 5)]


def test_the_planner_s_refusal_after_planning_goes_to_the_python_source(jvm, mixed_dir, tmp_path):
    """A refusal of the planned pieces (a segment past 2 GiB, a remote segment) comes from the driver's planner:
    with a planner (``spark.kafkalog.python``) whose pieces_refusal refuses every plan, the query reads through the
    Python source, with the same rows."""
    import sys

    from kafkalog.tools.spark.jvm import PYTHON_NAME

    (tmp_path / "sitecustomize.py").write_text(
        "import kafkalog.tools.spark.jvm as j\nj.pieces_refusal = lambda groups: 'a segment larger than 2 GiB (t)'\n")
    wrapper = tmp_path / "python"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={tmp_path} exec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    jvm.conf.set("spark.kafkalog.python", str(wrapper))
    try:
        df = _read(jvm, "kafkalog", str(mixed_dir), {"topics": "gz"})
        plan = _plan(df)
        assert "segment scan" not in plan and "kafkalog Python data source (a segment larger than 2 GiB (t))" in plan
        assert spark_rows(df) == spark_rows(_read(jvm, PYTHON_NAME, str(mixed_dir), {"topics": "gz"}))
    finally:
        jvm.conf.unset("spark.kafkalog.python")
    assert "kafkalog segment scan" in _plan(_read(jvm, "kafkalog", str(mixed_dir), {"topics": "gz"}))


def test_the_planner_answers_as_the_python_source_plans(mixed_dir, tmp_path):
    """No Spark: ``python -m kafkalog.tools.spark.jvm_plan``'s answers (schema, pieces, refusals, errors)."""
    import json
    import subprocess
    import sys

    from kafkalog.tools.spark.jvm import data_loss_options, encode_pieces
    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.plan import plan
    from kafkalog.tools.spark.schema import BATCH_SCHEMA_DDL, RECORD_SCHEMA_DDL

    def ask(request: str, **options: str) -> dict:
        proc = subprocess.run([sys.executable, "-m", "kafkalog.tools.spark.jvm_plan"], check=True, capture_output=True,
                              input=json.dumps({"request": request, "options": options}), text=True)
        return json.loads(proc.stdout)

    path = str(mixed_dir)
    assert ask("schema", path=path) == {"schema": RECORD_SCHEMA_DDL, "refusal": None, "streamSchemes": []}
    assert ask("schema", path=path, level="batch") == {"schema": BATCH_SCHEMA_DDL, "refusal": "level=batch",
                                                      "streamSchemes": []}
    opts = parse_read_options({"path": path, "offset": "-100"})
    assert ask("plan", path=path, offset="-100") == {"pieces": encode_pieces(plan(opts), opts), "verifyCrc": "true",
                                                     "includeControlRecords": "false", "scan": data_loss_options(opts)}
    assert ask("plan", path=path, mode="permissive") == {"refusal": "mode=permissive"}
    assert ask("plan", path=str(tmp_path / "nope")) == {"error": f"LogDirError: {tmp_path / 'nope'}: no such file or directory"}


def test_the_python_source_is_named_kafkalog_python(jvm):
    from kafkalog.tools.spark.jvm import PYTHON_NAME, python_format

    assert python_format(jvm) == PYTHON_NAME
    assert jvm._jsparkSession.sessionState().dataSourceManager().dataSourceExists(PYTHON_NAME)
    assert not jvm._jsparkSession.sessionState().dataSourceManager().dataSourceExists("kafkalog")


def test_a_bad_dir_fails_with_kafkalog_s_message_on_both_paths(jvm, tmp_path):
    from kafkalog.tools.spark.jvm import PYTHON_NAME

    missing = tmp_path / "missing"
    for fmt in ("kafkalog", PYTHON_NAME):
        with pytest.raises(Exception) as ei:
            jvm.read.format(fmt).load(str(missing)).count()
        assert f"{missing}: no such file or directory" in str(ei.value), fmt
    with pytest.raises(Exception) as ei:
        jvm.read.format("kafkalog").option("level", "nope").load(str(tmp_path)).count()
    assert "option level: expected 'record' or 'batch', got 'nope'" in str(ei.value)


def test_a_corrupt_batch_fails_naming_segment_and_byte(jvm, tmp_path):
    from kafkalog.storage.records import iter_batches
    from kafkalog.tools.spark.jvm import PYTHON_NAME

    generated_partition(tmp_path / "t-0", 500, batch_records=50)
    log = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    positions = [b.position for b in iter_batches(bytes(data))]
    data[positions[3] + 100] ^= 0xFF
    log.write_bytes(bytes(data))
    for fmt in ("kafkalog", PYTHON_NAME):
        with pytest.raises(Exception) as ei:
            jvm.read.format(fmt).load(str(tmp_path)).count()
        assert str(positions[3]) in str(ei.value) and "crc" in str(ei.value).lower() and str(log) in str(ei.value), fmt


def test_a_torn_tail_fails_as_in_the_python_source(jvm, tmp_path):
    from kafkalog.tools.spark.jvm import PYTHON_NAME

    _, size = torn_tail_partition(tmp_path)
    for df in (jvm.read.format("kafkalog").load(str(tmp_path)), jvm.read.format(PYTHON_NAME).load(str(tmp_path))):
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

    from kafkalog.tools.spark.jvm import jvm_scan_refusal, option_refusal, pieces_refusal
    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.plan import plan

    opts = parse_read_options({"path": str(mixed_dir)})
    assert jvm_scan_refusal(opts) is None
    assert jvm_scan_refusal(parse_read_options({"path": str(mixed_dir), "level": "batch"})) == "level=batch"
    assert jvm_scan_refusal(parse_read_options({"path": str(mixed_dir), "mode": "permissive"})) == "mode=permissive"
    assert jvm_scan_refusal(parse_read_options({"path": "s3a://bucket/data"})) is None  # Hadoop's s3a (test_jvm_s3a)
    assert jvm_scan_refusal(parse_read_options({"path": "gs://b/d"})) == "a file system the scan does not read (gs://)"
    assert option_refusal({"path": str(mixed_dir), "pushFilters": "true"}) == "pushFilters"
    assert option_refusal({"path": str(mixed_dir), "Remote": "/store"}) == "remote"  # (no view made for it)
    assert option_refusal({"path": str(mixed_dir)}) is None
    groups = plan(opts)
    assert pieces_refusal(groups) is None
    big = [[dataclasses.replace(groups[0][0], end=1 << 31)]]
    assert pieces_refusal(big) == f"a segment larger than 2 GiB ({groups[0][0].name})"


def test_spark_jars_prints_the_spark_submit_arguments(capsys, monkeypatch, tmp_path):
    """``kafkalog spark jars``: kafkalog's jar for ``--jars`` and kafka-clients for ``--packages`` (or, with
    ``KAFKALOG_KAFKA_CLIENTS_JAR``, a jar for ``--jars``), human and ``--json``."""
    import json
    from pathlib import Path

    import jsonschema

    from kafkalog.tools.cli import main
    from kafkalog.tools.spark.jvm import KAFKA_CLIENTS_PACKAGE, scan_jar

    monkeypatch.delenv("KAFKALOG_KAFKA_CLIENTS_JAR", raising=False)
    jar = scan_jar()
    assert main(["spark", "jars"]) == 0
    assert capsys.readouterr().out == f"--jars {jar} --packages {KAFKA_CLIENTS_PACKAGE}\n"
    assert main(["spark", "jars", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == {"jars": [str(jar)], "packages": [KAFKA_CLIENTS_PACKAGE],
                   "args": ["--jars", str(jar), "--packages", KAFKA_CLIENTS_PACKAGE]}
    schema = Path(__file__).parents[2] / "docs" / "schemas" / "sparkJars.schema.json"
    jsonschema.validate(got, json.loads(schema.read_text()))
    clients = tmp_path / "kafka-clients-4.3.1.jar"
    clients.write_bytes(b"PK\x05\x06" + bytes(18))
    monkeypatch.setenv("KAFKALOG_KAFKA_CLIENTS_JAR", str(clients))
    assert main(["spark", "jars"]) == 0
    assert capsys.readouterr().out == f"--jars {jar},{clients}\n"
    monkeypatch.setenv("KAFKALOG_KAFKA_CLIENTS_JAR", str(tmp_path / "none.jar"))
    assert main(["spark", "jars"]) == 1
    assert "KAFKALOG_KAFKA_CLIENTS_JAR" in capsys.readouterr().err
    assert main(["spark", "jars", str(tmp_path)]) == 2


def test_the_package_build_says_why_it_has_no_jar(tmp_path, monkeypatch):
    """setup.py's step (``jar.build_for_package``): without a JDK, or without Spark's API jars, no jar and why."""
    from kafkalog.tools.spark import jar

    out = tmp_path / "jars" / "kafkalog-spark.jar"
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no javac
    why = jar.build_for_package(out)
    assert why is not None and why.startswith("no JDK: javac is not on PATH") and not out.exists()
    monkeypatch.setattr(jar, "spark_jars_dir", lambda: (_ for _ in ()).throw(jar.JarBuildError("no Spark API jars")))
    assert jar.build_for_package(out) == "no Spark API jars" and not out.exists()


def test_a_file_url_reads_as_its_local_path(jvm, mixed_dir):
    """``file://`` is a local path to the planner (``storage.io.fs.split_uri``), read as a local file."""
    a, b = _both(jvm, f"file://{mixed_dir}", topics="gz,legacy")
    assert _same(a, b) == 1500 + 15
    assert {r.segment for r in a.select("segment").collect()} == {r.segment for r in _read(
        jvm, "kafkalog", str(mixed_dir), {"topics": "gz,legacy"}).select("segment").collect()}


@pytest.fixture(scope="module")
def windows_dir(tmp_path_factory):
    """One 3.6 MB segment whose batches straddle the scan's 1 MiB local windows (``SegmentBatches.Local``), with a
    1.5 MiB batch (one record) larger than a window between them, null keys and headers with null values
    (:func:`generated_record`) in uneven batches; and an empty partition."""
    from kafkalog.storage.config.log_config import LogConfig
    from kafkalog.storage.engine.writer import LogWriter

    root = tmp_path_factory.mktemp("windows")
    pdir = root / "win-0"
    generated_partition(pdir, 2000, batch_records=37, value_size=700)
    big = LogConfig.from_topic_props({"max.message.bytes": str(4 << 20)})
    with LogWriter(pdir, big, leader_epoch=3, now_ms=BASE_TS, fsync=False) as w:
        w.append_records([generated_record(2000, headers=True, value_size=3 << 19)])
    generated_partition(pdir, 2000, batch_records=41, value_size=333, first=2001)
    generated_partition(root / "empty-0", 0)
    assert 3 << 20 < (pdir / "00000000000000000000.log").stat().st_size
    return root


@pytest.mark.parametrize("options", [{}, {"maxPartitionBytes": str(700 * 1024)}, {"verifyCrc": "false"},
                                     {"startingOffset": "1990", "endingOffset": "2010"}])
def test_batches_across_windows_and_pieces_read_the_same_rows(jvm, windows_dir, options):
    a, b = _both(jvm, str(windows_dir), **options)
    n = _same(a, b)
    assert n == (20 if "startingOffset" in options else 4001)
    if "maxPartitionBytes" in options:
        assert a.rdd.getNumPartitions() == b.rdd.getNumPartitions() > 2  # the segment splits: pieces start mid-window
    got = a.selectExpr("count(*) AS n", "sum(length(value)) AS bytes", "max(offset) AS o").collect()[0]
    assert (got.n, got.o) == (n, 2010 - 1 if "startingOffset" in options else 4000)


def test_the_bench_query_reads_column_vectors(jvm, windows_dir):
    """The scan hands Spark column vectors (``supportColumnarReads``: there is no row-at-a-time reader), which the
    benchmark's query reads in whole-stage generated code (``ColumnarToRow`` under a ``*(n)`` stage)."""
    q = jvm.read.format("kafkalog").option("maxPartitionBytes", str(700 * 1024)).load(str(windows_dir)).selectExpr(
        "count(*) AS n", "sum(length(value)) AS bytes", "max(offset) AS o")
    assert q.collect()[0].n == 4001
    plan = _plan(q)
    assert "isFinalPlan=true" in plan and "ColumnarToRow" in plan and "BatchScan" in plan, plan
    assert any("ColumnarToRow" in line and "*(" in line for line in plan.splitlines()), plan


def test_a_compressed_batch_that_cannot_be_inflated_fails_naming_segment_and_byte(jvm, tmp_path):
    """verifyCrc=false: the gzip batch whose payload is not gzip fails where Kafka's streaming iterator inflates
    it, with the segment and the batch's position."""
    from kafkalog.storage.records import iter_batches

    generated_partition(tmp_path / "t-0", 300, batch_records=50, codec=1)
    log = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    positions = [b.position for b in iter_batches(bytes(data))]
    data[positions[2] + 61] ^= 0xFF  # the first byte of the gzip stream, after the v2 batch header
    log.write_bytes(bytes(data))
    with pytest.raises(Exception) as ei:
        jvm.read.format("kafkalog").option("verifyCrc", "false").load(str(tmp_path)).count()
    assert f"{log}: byte {positions[2]}: the records of the batch cannot be decoded" in str(ei.value)


@pytest.mark.parametrize("where", ["windows", "mixed"])
def test_key_and_value_read_in_generated_code_as_the_python_source(jvm, windows_dir, mixed_dir, where):
    """``key`` and ``value`` read by Spark's generated code (hashes and lengths of their bytes, their nulls), while
    one batch of rows spans several of the scan's windows and over every codec, give the Python source's answer."""
    a, b = _both(jvm, str(windows_dir if where == "windows" else mixed_dir))
    query = ["count(*)", "count(key)", "count(value)", "sum(length(key))", "sum(length(value))", "sum(hash(key))",
             "sum(hash(value))", "max(xxhash64(value, offset))", "max(value)", "min(key)"]
    assert a.selectExpr(*query).collect() == b.selectExpr(*query).collect()
