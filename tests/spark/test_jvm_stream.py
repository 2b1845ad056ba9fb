"""``spark.readStream.format("kafkalog")`` with kafkalog's jar is the JVM stream (``KafkaLogMicroBatchStream.java``):
its micro-batches are the Python stream's (the same offsets, asked of the same reader on the driver) and their rows
are those the Python stream reads (``format("kafkalog_python")`` in the same session), decoded by the JVM segment
scan; a stream it does not take goes to the Python stream. ``test_stream.py`` runs the stream's semantics (restarts,
rate limit, torn tails, data loss, a live broker) through this default path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from builders import generated_partition
from test_jvm_scan import jvm as jvm  # the module-scoped fixture: a session with kafkalog's jar
from test_read import FIXTURES, partition_dirs, spark_rows
from test_read import mixed_dir as mixed_dir  # the module-scoped fixture: all codecs, v0/v1, producer ids
from test_stream import Run, _delete_first_segment

from kafkalog.compat.pytest_plugin import in_ci

pytestmark = pytest.mark.spark

JVM_STREAM = "kafkalog stream (JVM segment scan)"


def _stream(spark, fmt: str, path: str | None, checkpoint: Path, options: dict[str, str]):
    """One availableNow query: its micro-batches' rows (``spark_rows``) by batch id, and the source's
    description."""
    batches: dict[int, list[tuple]] = {}

    def collect(df, batch_id):
        # a record-level stream's rows as the batch tests compare them; a batch-level one's, every column
        rows = spark_rows(df) if "offset" in df.columns else sorted(map(tuple, df.collect()), key=repr)
        if rows:
            batches[batch_id] = rows

    reader = spark.readStream.format(fmt)
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load(path) if path is not None else reader.load()
    q = (df.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()
    progress = [p for p in q.recentProgress if p["sources"]]
    return [batches[k] for k in sorted(batches)], progress[-1]["sources"][0]["description"]


def _same_stream(spark, tmp_path: Path, path: str | None, **options: str) -> list[list[tuple]]:
    """The JVM stream and the Python stream over the same files: the same micro-batches, the same rows."""
    from kafkalog.tools.spark.jvm import PYTHON_NAME

    got, where = _stream(spark, "kafkalog", path, tmp_path / "jvm", options)
    assert where == JVM_STREAM
    want, where = _stream(spark, PYTHON_NAME, path, tmp_path / "python", options)
    assert where != JVM_STREAM
    assert [len(b) for b in got] == [len(b) for b in want]
    assert got == want
    return got


#: the fixtures CI streams (transactions and a killed broker's open one, v0 message sets); ``-m campaign``: all
CI_FIXTURES = ("kafka-2.8.2-zk-v0", "kafka-4.3.1-kraft", "kafka-4.3.1-kraft-killed")


@pytest.mark.parametrize("sample", [pytest.param(CI_FIXTURES, id="sample"),
                                    pytest.param(None, id="every", marks=pytest.mark.campaign)])
def test_every_fixture_streams_as_the_python_stream(jvm, tmp_path, sample):
    """Each fixture's data dir as a stream of its own (a stream's offsets name a topic-partition once: the
    fixtures' dirs together repeat them), with the transaction markers, rate-limited into several micro-batches;
    then one with transactions without its markers."""
    fixtures = sorted({p.parent for p in partition_dirs(FIXTURES)  # fixtures/<name>/data
                       if sample is None or p.parent.parent.name in sample})
    assert fixtures or not in_ci()
    total, markers = 0, None
    for root in fixtures:
        paths = ",".join(map(str, partition_dirs(root)))
        got = _same_stream(jvm, tmp_path / root.parent.name, None, paths=paths, includeControlRecords="true",
                           maxOffsetsPerTrigger="400")
        total += sum(map(len, got))
        if markers is None and any(r[13] for b in got for r in b):  # transaction markers (isControl)
            markers = paths
            assert len(got) > 1
    assert total > 1000 or not fixtures, total
    if fixtures:
        assert markers is not None
        plain = _same_stream(jvm, tmp_path / "plain", None, paths=markers)
        assert plain and not any(r[13] for b in plain for r in b)


def test_codecs_legacy_and_starting_offsets(jvm, mixed_dir, tmp_path):
    got = _same_stream(jvm, tmp_path / "a", str(mixed_dir), maxOffsetsPerTrigger="5000",
                       startingOffsets='{"plain": {"0": 1990, "1": -1}, "legacy": {"0": -2}}')
    assert len(got) > 1
    assert {r[15] for b in got for r in b} >= {"none", "gzip", "snappy", "lz4", "zstd"}  # codec
    assert {r[14] for b in got for r in b} == {0, 1, 2}  # magic: v0/v1 message sets and v2 batches
    _same_stream(jvm, tmp_path / "b", str(mixed_dir), startingOffsets="latest")  # nothing new: no rows


def test_what_it_does_not_stream_goes_to_the_python_stream(jvm, mixed_dir, tmp_path):
    got, where = _stream(jvm, "kafkalog", str(mixed_dir), tmp_path / "ckpt", {"topics": "zstd", "level": "batch"})
    assert where != JVM_STREAM and got


def test_a_restart_before_the_first_commit_keeps_the_initial_offsets(jvm, tmp_path):
    """A query stopped after its first micro-batch ran but before Spark committed it runs that micro-batch again
    from the stream's initial offsets (Spark's MicroBatchExecution): the JVM stream's are those it wrote in its
    checkpoint when the query was new (as Spark's Kafka source), not the log's earliest offset by then. Here
    retention deleted the first segment: batch 0, [0, 10), again finds offsets 0 to 20 gone (computed again, the
    initial offset would be 20: [20, 10), "offset was changed from 20 to 10", the Python stream's flake in
    test_data_loss_fails_the_query_then_goes_on)."""
    root = tmp_path / "data"
    pdir = root / "t-0"
    generated_partition(pdir, 60, batch_records=10, segment_bytes=1500)
    run = Run(jvm, root, tmp_path / "ckpt", maxOffsetsPerTrigger="10")  # format("kafkalog"): the JVM stream
    q = run.start(processingTime="1 hour")
    while not (run.checkpoint / "commits" / "0").exists():
        assert q.exception() is None, q.exception()
        q.awaitTermination(0.2)
    q.stop()
    assert {r[2] for r in run.rows} == set(range(10))
    for f in (run.checkpoint / "commits").glob("*0*"):  # as if stopped before its commit (and its .crc)
        f.unlink()
    new_start = _delete_first_segment(pdir)
    q = run.start()
    with pytest.raises(Exception) as e:  # noqa: B017 - a StreamingQueryException
        q.awaitTermination(120)
    assert f"offsets 0 to {new_start} of t-0" in str(e.value) and "changed from" not in str(e.value), \
        str(e.value)[-3000:]
    run.options = {"failOnDataLoss": "false"}
    run.available_now()
    assert {r[2] for r in run.rows} == {*range(10), *range(new_start, 60)}


def _deleted_while_planned(spark, fmt: str, root: Path, checkpoint: Path, **options: str):
    """An availableNow query over ``root`` (one partition, segments [0, 20), [20, 40), [40, 60)) in micro-batches
    of 10 offsets; retention deletes the first segment after the driver planned micro-batch 1, [10, 20), and before
    an executor reads it (in foreachBatch, before the micro-batch's rows are read). Returns the query and its
    offsets by batch id."""
    pdir = root / "t-0"
    generated_partition(pdir, 60, batch_records=10, segment_bytes=1500)
    by_id: dict[int, list[int]] = {}

    def collect(df, batch_id):
        if batch_id == 1 and (pdir / "00000000000000000000.log").exists():
            _delete_first_segment(pdir)
        by_id[batch_id] = sorted(r.offset for r in df.select("offset").collect())

    reader = spark.readStream.format(fmt).option("maxOffsetsPerTrigger", "10")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load(str(root)).writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    try:
        q.awaitTermination(300)
    except Exception:  # noqa: BLE001, S110 - a StreamingQueryException: the test reads q.exception()
        pass
    return q, by_id


@pytest.mark.parametrize("fail", ["true", "false"])
def test_a_segment_deleted_between_plan_and_read_is_data_loss(jvm, tmp_path, fail):
    """Spark's Kafka source, for records retention removed between planning a micro-batch and fetching it: with
    ``failOnDataLoss`` true the query fails with a data-loss message naming the offsets; false, the executor logs
    them and the query reads on. The JVM stream does the same for a segment deleted after the driver planned it
    (its plan names the segment; the Python stream plans again where it reads), naming the segment and the
    offsets; the Python stream over the same files loses the same offsets."""
    from kafkalog.tools.spark.jvm import PYTHON_NAME

    got: dict[str, tuple] = {}
    for fmt in ("kafkalog", PYTHON_NAME):
        q, by_id = _deleted_while_planned(jvm, fmt, tmp_path / fmt / "data", tmp_path / fmt / "ckpt",
                                          failOnDataLoss=fail)
        got[fmt] = (q.exception(), by_id)
        described = {p["sources"][0]["description"] for p in q.recentProgress if p["sources"]}
        assert (described == {JVM_STREAM}) == (fmt == "kafkalog"), described
    (jvm_error, jvm_rows), (py_error, py_rows) = got["kafkalog"], got[PYTHON_NAME]
    if fail == "true":
        assert jvm_error is not None and py_error is not None
        jvm_text, py_text = str(jvm_error), str(py_error)
        segment = str(tmp_path / "kafkalog" / "data" / "t-0" / "00000000000000000000.log")
        assert f"DataLossError: {segment} (offsets 10 to 20 of t-0) was deleted before it was read" in jvm_text, \
            jvm_text[-3000:]
        assert 'set the source option "failOnDataLoss" to "false"' in jvm_text
        assert "offsets 10 to 20 of t-0" in py_text, py_text[-3000:]
        assert jvm_rows == py_rows == {0: list(range(10))}  # batch 1 never completed
    else:
        assert jvm_error is None and py_error is None, (jvm_error, py_error)
        assert jvm_rows == py_rows
        assert sorted(o for b in jvm_rows.values() for o in b) == [*range(10), *range(20, 60)]
        assert jvm_rows[1] == []


def test_an_s3a_stream_without_hadoop_aws_is_the_python_stream(jvm, s3_endpoint, tmp_path):
    """The JVM stream reads ``s3a://`` through Hadoop (``test_jvm_s3a.py``); a session without hadoop-aws has no
    ``s3a://`` FileSystem, so its stream over the bucket is the Python stream (the reason, ``SegmentBatches.
    missingFileSystem``'s, logged once), with the micro-batches and rows of the same files streamed locally."""
    from test_jvm_s3a import KEYS, upload

    from kafkalog.tools.spark.jvm import missing_file_system

    assert missing_file_system(jvm, ["s3a"]) is not None, \
        "the tests' Spark session is built without hadoop-aws (test_jvm_s3a.py adds it through spark-submit)"
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    root = tmp_path / "data"
    generated_partition(root / "t-0", 60, batch_records=10, segment_bytes=1500)
    url = upload(s3_endpoint, root, "no-hadoop-aws")
    got, where = _stream(jvm, "kafkalog", url, tmp_path / "s3a", {**KEYS, "s3.endpoint": s3_endpoint,
                                                                    "maxOffsetsPerTrigger": "25"})
    assert where != JVM_STREAM
    local, where = _stream(jvm, "kafkalog", str(root), tmp_path / "local", {"maxOffsetsPerTrigger": "25"})
    assert where == JVM_STREAM
    assert [[r[:16] for r in b] for b in got] == [[r[:16] for r in b] for b in local]  # all but segment, position
    assert sum(map(len, got)) == 60 and len(got) == 3
