"""DataFrame -> data dir (through the write path) -> DataFrame."""

from __future__ import annotations

import pytest
from builders import generated_data_dir

from kafkalog.storage.files.offset_index import OffsetIndex
from kafkalog.storage.log.partition import PartitionLog

pytestmark = pytest.mark.spark

COLS = ["topic", "partition", "key", "value", "headers", "timestamp"]


def _content(df):
    return sorted((r.topic, r.partition, r.offset, r.timestamp, r.key and bytes(r.key), r.value and bytes(r.value),
                   [(h.key, h.value and bytes(h.value)) for h in r.headers or []])
                  for r in df.select("offset", *COLS).collect())


def test_round_trip_assigning_offsets(spark, tmp_path):
    src = generated_data_dir(tmp_path / "src", {"a": 2, "b": 1}, 3000, value_size=600)
    df = spark.read.format("kafkalog").load(str(src))
    # one Spark partition per topic partition keeps each partition's order, so offsets come out the same
    ordered = df.repartition(3, "topic", "partition").sortWithinPartitions("topic", "partition", "offset")
    dst = tmp_path / "dst"
    (ordered.select(*COLS).write.format("kafkalog").mode("append")
     .option("config.segment.bytes", str(1 << 20)).save(str(dst)))
    assert not (tmp_path / ".dst.kafkalog-staging").exists()
    back = spark.read.format("kafkalog").load(str(dst))
    assert _content(back) == _content(df)
    # the write path made a loadable partition: indexes, rolls, checkpoints
    with PartitionLog.open(dst / "a-0") as log:
        assert log.log_end_offset == 3000
        assert len(log.segments) >= 2
    idx = sorted((dst / "a-0").glob("*.index"))
    assert idx and OffsetIndex.open(idx[0]).valid_entries > 0
    assert (dst / "recovery-point-offset-checkpoint").read_text().startswith("0\n")


def test_round_trip_keeping_offsets(spark, tmp_path):
    src = generated_data_dir(tmp_path / "src", {"k": 1}, 2000)
    df = spark.read.format("kafkalog").load(str(src)).filter("offset % 3 = 0")  # gaps, as after compaction
    dst = tmp_path / "dst"
    (df.repartition(1).sortWithinPartitions("offset").select("offset", *COLS)
     .write.format("kafkalog").mode("append").option("offsets", "keep").option("codec", "lz4").save(str(dst)))
    back = spark.read.format("kafkalog").load(str(dst))
    assert _content(back) == _content(df)
    assert {r.codec for r in back.select("codec").distinct().collect()} == {"lz4"}
    # appending again continues from the log end offset
    df.limit(5).select(*COLS).write.format("kafkalog").mode("append").save(str(dst))
    offs = [r.offset for r in spark.read.format("kafkalog").load(str(dst)).orderBy("offset").collect()]
    assert offs[-5:] == list(range(1999, 2004))


def test_overlapping_kept_offsets_are_refused(spark, tmp_path):
    src = generated_data_dir(tmp_path / "src", {"k": 1}, 100)
    df = spark.read.format("kafkalog").load(str(src))
    both = df.union(df).repartition(2).select("offset", *COLS)
    with pytest.raises(Exception, match="overlap"):
        both.write.format("kafkalog").mode("append").option("offsets", "keep").save(str(tmp_path / "dst"))
    assert not (tmp_path / "dst" / "k-0").exists()


def test_overwrite_is_refused(spark, tmp_path):
    src = generated_data_dir(tmp_path / "src", {"k": 1}, 10)
    df = spark.read.format("kafkalog").load(str(src)).select(*COLS)
    with pytest.raises(Exception, match="overwrite"):
        df.write.format("kafkalog").mode("overwrite").save(str(tmp_path / "dst"))
