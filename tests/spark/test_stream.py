"""``spark.readStream.format("kafkalog")`` over a data dir grown between micro-batches: offsets, rate limit, torn
tails, restarts from the Spark checkpoint, data loss."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import batch_at, generated_partition

from kafkalog.storage.records.dump import dump_log

pytestmark = pytest.mark.spark


def log_offsets(root: Path) -> set[tuple[str, int, int]]:
    """Every (topic, partition, offset) of the data dir, from the records layer."""
    out = set()
    for log in root.rglob("*.log"):
        topic, _, part = log.parent.name.rpartition("-")
        for d in dump_log(str(log), deep=True):
            if d.get("event") is None and d.get("isValid") and "error" not in d:
                out.update((topic, int(part), r["offset"]) for r in d["records"])
    return out


class Run:
    """One streaming query over ``root`` collecting (topic, partition, offset) per micro-batch."""

    def __init__(self, spark, root: Path, checkpoint: Path, **options):
        self.spark, self.root, self.checkpoint, self.options = spark, root, checkpoint, options
        self.batches: list[list[tuple[str, int, int]]] = []

    def _collect(self, df, batch_id):
        rows = [(r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect()]
        if rows:  # a new query's first micro-batch may be empty
            self.batches.append(rows)

    def start(self, **trigger):
        reader = self.spark.readStream.format("kafkalog")
        for k, v in self.options.items():
            reader = reader.option(k, v)
        df = reader.load(str(self.root))
        return (df.writeStream.foreachBatch(self._collect).option("checkpointLocation", str(self.checkpoint))
                .trigger(**(trigger or {"availableNow": True})).start())

    def available_now(self) -> list[list[tuple[str, int, int]]]:
        """One availableNow run: the non-empty micro-batches it read."""
        before = len(self.batches)
        q = self.start()
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()
        return self.batches[before:]

    @property
    def rows(self) -> list[tuple[str, int, int]]:
        return [r for b in self.batches for r in b]


def exactly_once(rows: list, expected: set) -> None:
    assert len(rows) == len(set(rows)), "duplicates"
    assert set(rows) == expected


def test_grown_between_runs_restart_from_checkpoint(spark, tmp_path):
    root = tmp_path / "data"
    generated_partition(root / "orders-0", 120, batch_records=10, segment_bytes=2000)
    generated_partition(root / "orders-1", 30, batch_records=10)
    run = Run(spark, root, tmp_path / "ckpt", maxOffsetsPerTrigger="40")
    first = run.available_now()
    assert len(first) >= 4 and all(len(b) <= 40 + 2 for b in first)  # Spark Kafka's rounding: + partitions
    exactly_once(run.rows, log_offsets(root))
    # the broker goes on (a segment roll included) and a new partition appears: a new query, same checkpoint
    generated_partition(root / "orders-0", 55, batch_records=10, segment_bytes=2000, first=120)
    generated_partition(root / "orders-2", 7, batch_records=3)
    run.available_now()
    exactly_once(run.rows, log_offsets(root))
    assert run.available_now() == []  # nothing new: no micro-batch
    offsets = json.loads((tmp_path / "ckpt" / "offsets" / str(len(run.batches) - 1)).read_text().splitlines()[-1])
    assert offsets == {"orders": {"0": 175, "1": 30, "2": 7}}


def test_torn_tail_waits_for_the_whole_batch(spark, tmp_path):
    root = tmp_path / "data"
    pdir = root / "t-0"
    generated_partition(pdir, 20, batch_records=5)
    run = Run(spark, root, tmp_path / "ckpt")
    run.available_now()
    whole = batch_at(20, n=5)
    log = next(pdir.glob("*.log"))
    with open(log, "ab") as f:  # a broker in the middle of an append
        f.write(whole[: len(whole) // 2])
    assert run.available_now() == []
    with open(log, "ab") as f:
        f.write(whole[len(whole) // 2:])
    run.available_now()
    assert sorted(o for _, _, o in run.rows) == list(range(25))


def test_starting_offsets(spark, tmp_path):
    root = tmp_path / "data"
    generated_partition(root / "a-0", 30, batch_records=4)
    generated_partition(root / "a-1", 10, batch_records=4)
    latest = Run(spark, root, tmp_path / "c1", startingOffsets="latest")
    assert latest.available_now() == []
    exact = Run(spark, root, tmp_path / "c2", startingOffsets=json.dumps({"a": {"0": 25, "1": -2}}))
    exact.available_now()
    generated_partition(root / "a-0", 5, batch_records=4, first=30)
    latest.available_now()
    exact.available_now()
    assert sorted(latest.rows) == [("a", 0, o) for o in range(30, 35)]
    exactly_once(exact.rows, {("a", 0, o) for o in range(25, 35)} | {("a", 1, o) for o in range(10)})


def _delete_first_segment(pdir: Path) -> int:
    """What retention does (the broker's delete of the oldest segment): returns the new log start offset."""
    logs = sorted(pdir.glob("*.log"))
    for f in pdir.glob(logs[0].name[:-4] + ".*"):
        f.unlink()
    return int(logs[1].name[:-4])


@pytest.mark.parametrize("fail", [True, False])
def test_data_loss(spark, tmp_path, fail):
    root = tmp_path / "data"
    pdir = root / "t-0"
    generated_partition(pdir, 60, batch_records=10, segment_bytes=1500)
    run = Run(spark, root, tmp_path / "ckpt", maxOffsetsPerTrigger="10", failOnDataLoss=str(fail).lower())
    q = run.start(processingTime="10 seconds")  # one micro-batch, then stopped
    while not run.batches:
        q.awaitTermination(0.2)
    q.stop()
    read = {o for _, _, o in run.rows}
    assert read == set(range(10))
    new_start = _delete_first_segment(pdir)
    assert new_start > 10
    generated_partition(pdir, 10, batch_records=10, segment_bytes=1500, first=60)
    if fail:
        q = run.start()
        with pytest.raises(Exception) as e:  # noqa: B017 - a StreamingQueryException wrapping the Python error
            q.awaitTermination(120)
        msg = str(e.value)
        assert "failOnDataLoss" in msg and f"offsets 10 to {new_start} of t-0" in msg, msg
        return
    run.available_now()
    exactly_once(run.rows, {("t", 0, o) for o in [*range(10), *range(new_start, 70)]})


def test_partition_dir_deleted(spark, tmp_path):
    root = tmp_path / "data"
    generated_partition(root / "t-0", 10)
    generated_partition(root / "t-1", 10)
    run = Run(spark, root, tmp_path / "ckpt", failOnDataLoss="false")
    run.available_now()
    shutil.rmtree(root / "t-1")
    generated_partition(root / "t-0", 5, first=10)
    run.available_now()
    exactly_once(run.rows, {("t", 0, o) for o in range(15)} | {("t", 1, o) for o in range(10)})
