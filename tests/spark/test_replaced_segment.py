"""A segment replaced between the plan and the read (the log cleaner's swap, recovery's truncation, a rewrite under
the same name) is data loss, as a deleted one is: the plan carries each segment's file as planned (storage's
``FileStamp``: size, modification time, inode) and every reader checks it before reading a piece. With
``failOnDataLoss`` true the read fails naming the segment, the planned and the found file and the offsets; false,
the piece is skipped with a warning and the rest is read. The JVM scan (``format("kafkalog")`` and ``load``), the
Python source's reader and the JVM stream."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from builders import generated_partition, replace_segment
from test_jvm_scan import jvm as jvm  # the module-scoped fixture: a session with kafkalog's jar

from kafkalog.storage.io.file_stamp import FileStamp, local_stamp

pytestmark = pytest.mark.spark

HOWS = ["swap", "truncate", "rewrite"]


@pytest.fixture
def three_segments():
    """Makes the partition t-0 under a root, with segments [0, 20), [20, 40), [40, 60) (the shared builder), and
    gives its first segment."""

    def under(root: Path) -> Path:
        generated_partition(root / "t-0", 60, batch_records=10, segment_bytes=1500)
        return root / "t-0" / "00000000000000000000.log"

    return under


def _check_message(text: str, seg: Path, planned: FileStamp) -> None:
    found = local_stamp(seg.stat())
    assert (f"{seg} (offsets 0 to the end of t-0, bytes 0 to {planned.size}) was replaced after the read was "
            f"planned: planned {planned.size} bytes modified at {planned.mtime_ms} ms, found {found.size} bytes "
            f"modified at {found.mtime_ms} ms") in text, text[-3000:]
    assert "Re-run the query" in text


def _check_failure(text: str, seg: Path, planned: FileStamp) -> None:
    _check_message(text, seg, planned)
    assert 'set the source option "failOnDataLoss" to "false"' in text


def test_the_stamp_tells_the_planned_file_from_a_replaced_one(three_segments, tmp_path):
    """No Spark: storage's rule. The same file, or the same inode grown (a broker appending to its active
    segment), holds; a swapped, truncated or rewritten one does not."""
    seg = three_segments(tmp_path)
    planned = local_stamp(seg.stat())
    assert planned.holds(local_stamp(seg.stat()))
    with seg.open("ab") as f:
        f.write(b"x")
    assert planned.holds(local_stamp(seg.stat()))
    for how in HOWS:
        before = local_stamp(seg.stat())
        replace_segment(seg, how)
        assert not before.holds(local_stamp(seg.stat())), how
    url = FileStamp(100, 5)  # an object store's: no inode, so a longer object is another one
    assert url.holds(FileStamp(100, 5)) and not url.holds(FileStamp(101, 6)) and not url.holds(FileStamp(100, 6))


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("fail", ["true", "false"])
def test_the_python_source_s_reader(spark, three_segments, tmp_path, caplog, how, fail):
    """The Python data source's reader, as Spark calls it: ``partitions`` on the driver, the segment replaced,
    then ``read`` on an executor."""
    from pyspark.sql.types import StructType

    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.reader import KafkaLogReader
    from kafkalog.tools.spark.scan import DataLossError
    from kafkalog.tools.spark.schema import source_ddl

    seg = three_segments(tmp_path)
    options = {"path": str(tmp_path), "failOnDataLoss": fail}
    reader = KafkaLogReader(StructType.fromDDL(source_ddl(options)), parse_read_options(options))
    parts = reader.partitions()
    planned = local_stamp(seg.stat())
    replace_segment(seg, how)
    if fail == "true":
        with pytest.raises(DataLossError) as e:
            [rb for p in parts for rb in reader.read(p)]
        _check_failure(str(e.value), seg, planned)
        return
    with caplog.at_level(logging.WARNING, logger="kafkalog.spark.scan"):
        offsets = sorted(o for p in parts for rb in reader.read(p) for o in rb.column("offset").to_pylist())
    assert offsets == list(range(20, 60))
    _check_message(caplog.text, seg, planned)
    assert '"failOnDataLoss" is "false"' in caplog.text


@pytest.mark.parametrize("how", ["swap", "rewrite"])
@pytest.mark.parametrize("fail", ["true", "false"])
def test_the_jvm_scan(jvm, three_segments, tmp_path, how, fail):
    """``format("kafkalog")`` (the JVM source: planned when the query is) and ``load`` (planned in this process),
    the segment replaced after the plan, before the executors read it."""
    from kafkalog.tools.spark.jvm import load

    for name, make in (("source", lambda p: jvm.read.format("kafkalog").option("failOnDataLoss", fail).load(p)),
                       ("load", lambda p: load(jvm, p, {"failOnDataLoss": fail}))):
        root = tmp_path / name
        seg = three_segments(root)
        df = make(str(root)).select("offset")
        assert "kafkalog segment scan" in df._jdf.queryExecution().executedPlan().toString()  # planned now
        planned = local_stamp(seg.stat())
        replace_segment(seg, how)
        if fail == "true":
            with pytest.raises(Exception) as e:  # noqa: B017 - Spark's job failure (Py4JJavaError)
                df.collect()
            assert "DataLossError: " in str(e.value), str(e.value)[-3000:]
            _check_failure(str(e.value), seg, planned)
        else:
            assert sorted(r.offset for r in df.collect()) == list(range(20, 60)), name


@pytest.mark.parametrize("fail", ["true", "false"])
def test_the_jvm_stream(jvm, three_segments, tmp_path, fail):
    """The JVM stream plans a micro-batch on the driver and reads it on the executors: the segment of micro-batch
    1, [10, 20), swapped in by the cleaner after the plan and before the read fails the query (true) or loses
    those offsets with a warning (false), as a deleted one."""
    root = tmp_path / "data"
    seg = three_segments(root)
    planned: list[FileStamp] = []
    by_id: dict[int, list[int]] = {}

    def collect(df, batch_id):
        if batch_id == 1 and not planned:
            planned.append(local_stamp(seg.stat()))
            replace_segment(seg, "swap")
        by_id[batch_id] = sorted(r.offset for r in df.select("offset").collect())

    q = (jvm.readStream.format("kafkalog").option("maxOffsetsPerTrigger", "10").option("failOnDataLoss", fail)
         .load(str(root)).writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    try:
        q.awaitTermination(120)
    except Exception:  # noqa: BLE001, S110 - a StreamingQueryException: the test reads q.exception()
        pass
    described = {p["sources"][0]["description"] for p in q.recentProgress if p["sources"]}
    assert described == {"kafkalog stream (JVM segment scan)"}, described
    if fail == "true":
        text = str(q.exception())
        assert f"DataLossError: {seg} (offsets 10 to 20 of t-0, bytes " in text, text[-3000:]
        assert f"planned {planned[0].size} bytes modified at {planned[0].mtime_ms} ms" in text
        assert 'set the source option "failOnDataLoss" to "false"' in text
        assert by_id == {0: list(range(10))}
    else:
        assert q.exception() is None, q.exception()
        assert by_id[1] == [] and sorted(o for b in by_id.values() for o in b) == [*range(10), *range(20, 60)]
