"""``spark.readStream.format("kafkalog")`` over a data dir grown between micro-batches: offsets, rate limit, torn
tails, restarts from the Spark checkpoint, data loss."""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from pathlib import Path

import pytest
from builders import batch_at, generated_partition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from kafkalog.storage.errors import ConfigError
from kafkalog.storage.records.dump import dump_log
from kafkalog.tools.spark.stream import DataLossError, KafkaLogStreamReader, rate_limit

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

    def __init__(self, spark, root: Path, checkpoint: Path, columns=("topic", "partition", "offset"), **options):
        self.spark, self.root, self.checkpoint, self.options = spark, root, checkpoint, options
        self.columns = list(columns)
        self.by_id: dict[int, list[tuple]] = {}
        self.replayed: list[bool] = []

    def _collect(self, df, batch_id):
        rows = [tuple(r) for r in df.select(*self.columns).collect()]
        if batch_id in self.by_id:  # a query stopped before its commit: Spark runs the batch again, same offsets
            self.replayed.append(sorted(self.by_id[batch_id]) == sorted(rows))
        if rows:  # a new query's first micro-batch may be empty
            self.by_id[batch_id] = rows

    @property
    def batches(self) -> list[list[tuple]]:
        """The micro-batches with rows, once each (foreachBatch is at-least-once: keyed by batch id)."""
        return [self.by_id[k] for k in sorted(self.by_id)]

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


def _delete_first_segment(pdir: Path) -> int:
    """What retention does (the broker's delete of the oldest segment): returns the new log start offset."""
    logs = sorted(pdir.glob("*.log"))
    for f in pdir.glob(logs[0].name[:-4] + ".*"):
        f.unlink()
    return int(logs[1].name[:-4])


def _tear(pdir: Path, base: int) -> bytes:
    """Half of a batch at ``base`` written at the end of the active segment (a broker in the middle of an append);
    returns the other half."""
    whole = batch_at(base, n=5)
    with open(sorted(pdir.glob("*.log"))[-1], "ab") as f:
        f.write(whole[: len(whole) // 2])
    return whole[len(whole) // 2:]


def _finish(pdir: Path, rest: bytes) -> None:
    with open(sorted(pdir.glob("*.log"))[-1], "ab") as f:
        f.write(rest)


# ------------------------------------------------------------------------------------- the reader, without Spark
def reader(root: Path, **options) -> KafkaLogStreamReader:
    return KafkaLogStreamReader(None, {"path": str(root), **options})


def test_offsets(tmp_path):
    root = tmp_path / "data"
    generated_partition(root / "a-0", 30, batch_records=4)
    generated_partition(root / "a-1", 10, batch_records=4)
    assert reader(root).initialOffset() == {"a": {"0": 0, "1": 0}}
    assert reader(root, startingOffsets="latest").initialOffset() == {"a": {"0": 30, "1": 10}}
    exact = reader(root, startingOffsets='{"a": {"0": 25, "1": -1}}')
    assert exact.initialOffset() == {"a": {"0": 25, "1": 10}}
    r = reader(root, maxOffsetsPerTrigger="8")
    start = r.initialOffset()
    assert r.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 30, "1": 10}}
    assert r.latestOffset(start, r.getDefaultReadLimit()) == {"a": {"0": 6, "1": 2}}  # 8 * 30/40, 8 * 10/40
    assert rate_limit(10, {("a", 0): 0, ("a", 1): 0}, {("a", 0): 1000, ("a", 1): 1}) == {("a", 0): 9, ("a", 1): 1}
    r.prepareForTriggerAvailableNow()  # availableNow: what is there now, nothing later
    rest = _tear(root / "a-0", 30)
    assert r.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 30, "1": 10}}  # the torn batch is not complete
    _finish(root / "a-0", rest)
    generated_partition(root / "a-2", 3)
    assert r.latestOffset(start, ReadMaxRows(100)) == {"a": {"0": 30, "1": 10}}
    assert reader(root).latestOffset(start, ReadAllAvailable()) == {"a": {"0": 35, "1": 10, "2": 3}}
    bad = bytearray(batch_at(35, n=5))
    bad[-3] ^= 0xFF  # a last batch failing its CRC: being written, as far as a reader can tell
    _finish(root / "a-0", bytes(bad))
    assert reader(root).latestOffset(start, ReadAllAvailable())["a"]["0"] == 35
    _finish(root / "a-0", batch_at(40, n=5))  # a whole batch after it: the bad one is corruption, for the scan
    assert reader(root).latestOffset(start, ReadAllAvailable())["a"]["0"] == 45
    with pytest.raises(ConfigError, match="startingOffsets"):
        reader(root, startingOffsets="{oops")
    with pytest.raises(ConfigError, match="for batch reads"):
        reader(root, startingOffset="3")


def test_data_loss_rule(tmp_path, caplog):
    root = tmp_path / "data"
    generated_partition(root / "t-0", 60, batch_records=10, segment_bytes=1500)
    generated_partition(root / "t-1", 5)
    start = {"t": {"0": 10, "1": 0}}
    new_start = _delete_first_segment(root / "t-0")
    end = reader(root).latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 60, "1": 5}}
    with pytest.raises(DataLossError, match=f'offsets 10 to {new_start} of t-0 .*"failOnDataLoss" to "false"'):
        reader(root).partitions(start, end)
    with caplog.at_level(logging.WARNING, "kafkalog.spark.stream"):
        parts = reader(root, failOnDataLoss="false").partitions(start, end)
    assert "failOnDataLoss" in caplog.text
    assert {(p.lo, p.hi) for p in parts} == {(new_start, 60), (0, 5)}
    shutil.rmtree(root / "t-1")
    with pytest.raises(DataLossError, match="t-1 is gone"):
        reader(root).partitions(start, reader(root).latestOffset(start, ReadAllAvailable()))


# ------------------------------------------------------------------------------------- through Spark
def test_grown_between_runs_restart_from_checkpoint(spark, tmp_path):
    """Rate-limited micro-batches; the broker goes on (a segment roll, a torn batch, a new partition) while the
    query is stopped; a new query from the same checkpoint reads exactly the rest, the torn batch once whole."""
    root = tmp_path / "data"
    generated_partition(root / "orders-0", 90, batch_records=10, segment_bytes=2000)
    generated_partition(root / "orders-1", 30, batch_records=10)
    run = Run(spark, root, tmp_path / "ckpt", maxOffsetsPerTrigger="60")
    first = run.available_now()
    assert len(first) == 2 and all(len(b) <= 60 for b in first)
    exactly_once(run.rows, log_offsets(root))
    generated_partition(root / "orders-0", 55, batch_records=10, segment_bytes=2000, first=90)
    generated_partition(root / "orders-2", 7, batch_records=3)
    rest = _tear(root / "orders-1", 30)
    run.available_now()
    exactly_once(run.rows, log_offsets(root))  # the torn batch is not in log_offsets either
    _finish(root / "orders-1", rest)
    run.available_now()
    exactly_once(run.rows, log_offsets(root))
    offsets = json.loads(max((tmp_path / "ckpt" / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
                         .read_text().splitlines()[-1])
    assert offsets == {"orders": {"0": 145, "1": 35, "2": 7}}


def test_data_loss_fails_the_query_then_goes_on(spark, tmp_path):
    root = tmp_path / "data"
    pdir = root / "t-0"
    generated_partition(pdir, 60, batch_records=10, segment_bytes=1500)
    run = Run(spark, root, tmp_path / "ckpt", maxOffsetsPerTrigger="10")
    q = run.start(processingTime="1 hour")  # one micro-batch, then stopped once Spark committed it
    while not run.batches or not (tmp_path / "ckpt" / "commits" / str(max(run.by_id))).exists():
        # (stopped before its commit, a restart would run batch 0 again from the stream's initial offsets)
        q.awaitTermination(0.2)
    q.stop()
    assert {o for _, _, o in run.rows} == set(range(10))
    new_start = _delete_first_segment(pdir)
    generated_partition(pdir, 10, batch_records=10, segment_bytes=1500, first=60)
    run.options = {}
    q = run.start()
    with pytest.raises(Exception) as e:  # noqa: B017 - a StreamingQueryException wrapping the Python error
        q.awaitTermination(120)
    assert "failOnDataLoss" in str(e.value) and f"offsets 10 to {new_start} of t-0" in str(e.value), \
        str(e.value)[-4000:]
    run.options = {"failOnDataLoss": "false"}
    run.available_now()
    exactly_once(run.rows, {("t", 0, o) for o in [*range(10), *range(new_start, 70)]})


def _two_topics(root: Path, first: int = 0, n: int = 40) -> None:
    """``plain`` (uncompressed, 2 partitions) and ``comp`` (zstd) grown by ``n`` records from ``first``, and a
    third topic the query does not ask for."""
    for p in (0, 1):
        generated_partition(root / f"plain-{p}", n, batch_records=10, segment_bytes=1500, first=first)
    generated_partition(root / "comp-0", n, batch_records=10, codec=4, first=first)
    generated_partition(root / "other-0", n, batch_records=10, first=first)


def _asked(root: Path) -> set[tuple[str, int, int]]:
    return {r for r in log_offsets(root) if r[0] in ("plain", "comp")}


def test_several_topics_static(spark, tmp_path):
    """A stream over two topics of a data dir (issue 30: each executor re-planned its partition with the query's
    topics on the partition's own dir, the topic check refused ``plain-0`` for ``comp``, and the stream reported
    the refusal as deleted data: ``DataLossError: offsets 0 to 40 of comp-0 were deleted``)."""
    root = tmp_path / "data"
    _two_topics(root)
    run = Run(spark, root, tmp_path / "ckpt", topics="plain,comp")
    run.available_now()
    exactly_once(run.rows, _asked(root))
    _two_topics(root, first=40, n=25)  # grown while the query is stopped: the restart reads exactly the rest
    run.available_now()
    exactly_once(run.rows, _asked(root))
    assert {t for t, _, _ in run.rows} == {"plain", "comp"}


def test_several_topics_live(spark, tmp_path):
    """The same, on a running query (a 200 ms trigger) while both topics grow and roll segments."""
    root = tmp_path / "data"
    _two_topics(root)
    run = Run(spark, root, tmp_path / "ckpt", topics="plain,comp", maxOffsetsPerTrigger="50")
    q = run.start(processingTime="200 milliseconds")
    try:
        for first in (40, 65, 90):
            _two_topics(root, first=first, n=25)
            time.sleep(0.3)
        want = _asked(root)
        deadline = time.monotonic() + 120
        while set(run.rows) != want:
            assert q.exception() is None, q.exception()
            assert time.monotonic() < deadline, f"{len(set(run.rows))} of {len(want)} rows after 120 s"
            time.sleep(0.2)
    finally:
        q.stop()
    assert q.exception() is None, q.exception()
    exactly_once(run.rows, want)


# ------------------------------------------------------------------------------------- a live broker
@pytest.mark.kafka
def test_live_broker(spark, broker_factory, tmp_path):
    """A producer writes to a 2-partition topic (segments rolling every second) while a stream with a 500 ms
    trigger reads the broker's data dir; the stream is restarted in the middle; at the end it holds exactly
    what a consumer reads."""
    from kafkalog.compat import jars
    from kafkalog.compat.clients import Record, consume, producer

    b = broker_factory(jars.LATEST_4, server_properties={"log.roll.ms": "1000", "log.segment.delete.delay.ms": "1000"})
    b.create_topic("live", partitions=2, config={"segment.ms": "1000"})
    b.wait_until(lambda: all((b.partition_dir("live", p) / "partition.metadata").exists() for p in (0, 1)), 30,
                 "the topic's partition dirs")
    n, chunk = 1600, 40
    errors: list[BaseException] = []
    restarted = threading.Event()  # the second half is produced while the restarted query runs

    def produce() -> None:
        try:
            with producer(b.bootstrap_servers) as p:
                for i in range(0, n, chunk):
                    if i == n // 2:
                        restarted.wait(120)
                    p.send_all("live", [Record(f"v{j}".encode() * 8, f"k{j}".encode(), partition=j % 2)
                                        for j in range(i, i + chunk)], 30)
                    time.sleep(0.1)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    run = Run(spark, b.data_dir, tmp_path / "ckpt", columns=("partition", "offset", "key", "value"), topics="live")

    def wait_rows(q, at_least: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while len(run.rows) < at_least:
            assert q.exception() is None, q.exception()
            assert time.monotonic() < deadline, f"{len(run.rows)} rows after {timeout} s"
            time.sleep(0.2)

    q = run.start(processingTime="500 milliseconds")
    wait_rows(q, 1)
    q.stop()  # in the middle of production
    q = run.start(processingTime="500 milliseconds")
    restarted.set()
    thread.join(120)
    assert not errors, errors
    wait_rows(q, n)
    q.stop()
    got = consume(b.bootstrap_servers, "live", count=n, timeout=60)
    want = {(c.partition, c.offset, c.key, c.value) for c in got}
    rows = [(p, o, bytes(k), bytes(v)) for p, o, k, v in run.rows]
    assert len(want) == n
    exactly_once(rows, want)
    assert all(run.replayed)
