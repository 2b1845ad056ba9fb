"""``spark.readStream.format("kafkalog")`` over a tiered topic (KIP-405) with its store given as ``remote``: the
stream starts at the partition's log start offset (below its local segments), reads the offsets below the local
log start from the store and the others from the local segments, each once where the two tiers overlap, the same
rows as the batch source; without the store it starts at the local log start and says where the rest is. The views
of the store a micro-batch reads are removed once no micro-batch needs them (at commit, at stop), and a store on S3
is listed and read as a local one."""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from builders import generated_partition, local_tiered_storage, write_data_dir_files
from builders import s3_upload as upload
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from test_s3 import scan_rows
from test_stream import Run, exactly_once

from kafkalog.storage.remote.layout import ROOT_STORAGE_DIR_NAME, open_remote_store, remote_partition_view
from kafkalog.tools.spark.stream import DataLossError, KafkaLogStreamReader

pytestmark = pytest.mark.spark

N = 400  # records of tt-0, 50 a segment


def _drop_local(pdir: Path, below: int) -> int:
    """What local retention of a tiered topic does (the segments below ``below``, uploaded, deleted locally);
    returns the new local log start."""
    for log in sorted(pdir.glob("*.log")):
        if int(log.name[:-4]) < below:
            for f in pdir.glob(log.name[:-4] + ".*"):
                f.unlink()
    return min(int(p.name[:-4]) for p in pdir.glob("*.log"))


@pytest.fixture
def tiered(tmp_path: Path) -> tuple[Path, Path]:
    """``tt-0``: 400 records, every segment but the active one uploaded to a LocalTieredStorage store; locally
    only the segments from offset 150 (150 to 349 are in both tiers); log-start-offset-checkpoint at 0."""
    data = tmp_path / "data"
    generated_partition(data / "tt-0", N, segment_bytes=8192, value_size=100)
    store = tmp_path / "remote"
    assert [s[1] for s in local_tiered_storage(store, data / "tt-0")] == [0, 50, 100, 150, 200, 250, 300]
    assert _drop_local(data / "tt-0", 150) == 150
    write_data_dir_files(data, log_start={("tt", 0): 0}, replication={("tt", 0): N})
    return data, store


def reader(data: Path, **options) -> KafkaLogStreamReader:
    return KafkaLogStreamReader(None, {"path": str(data), **options})


def test_offsets_and_tiers(tiered):
    data, store = tiered
    r = reader(data, remote=str(store))
    start = r.initialOffset()
    assert start == {"tt": {"0": 0}}  # the partition's log start offset, in the store
    end = r.latestOffset(start, ReadMaxRows(200))
    assert end == {"tt": {"0": 200}}
    parts = r.partitions(start, end)  # one input partition per tier: [0, 150) remote, [150, 200) local
    assert [(p.lo, p.hi) for p in parts] == [(0, 150), (150, 200)]
    assert parts[0].path != parts[1].path and parts[1].path == str(data / "tt-0")
    assert r.latestOffset(start, ReadAllAvailable()) == {"tt": {"0": N}}
    assert [(p.lo, p.hi) for p in r.partitions(end, {"tt": {"0": N}})] == [(200, N)]  # all local


def test_without_the_store_says_where_the_rest_is(tiered, caplog):
    data, _store = tiered
    with caplog.at_level(logging.WARNING, "kafkalog.spark.stream"):
        r = reader(data)
        assert r.initialOffset() == {"tt": {"0": 150}}  # the local log start, as before
        r.initialOffset()
    lines = [m for m in caplog.messages if "remote store" in m]
    assert len(lines) == 1 and "offsets 0 to 150 of tt-0" in lines[0] and "option remote" in lines[0], lines
    # a checkpointed offset below the local segments: not "no longer on disk", but where it is
    with pytest.raises(DataLossError, match="offsets 20 to 150 of tt-0 are below its local segments: in its remote "
                                            "store if the topic is tiered"):
        r.partitions({"tt": {"0": 20}}, {"tt": {"0": 300}})


def test_the_view_beside_local_segments_holds_each_offset_once(tmp_path):
    """A remote segment reaching past the local log start (another replica's segment boundaries) is cut at the
    first batch the local log holds (storage.remote.tiered.by_tier); one at or above it is left out."""
    data = tmp_path / "data"
    generated_partition(data / "tt-0", N, segment_bytes=16384, value_size=100)  # 100 a segment
    store = tmp_path / "remote"
    local_tiered_storage(store, data / "tt-0")
    with open_remote_store(store) as s:
        view = remote_partition_view(s, tmp_path / "view", local_starts={("tt", 0): 150})
    assert sorted(p.name for p in (view / "tt-0").glob("*.log")) == [f"{0:020d}.log", f"{100:020d}.log"]
    assert {o for _t, _p, o, _k, _v in scan_rows({"path": str(view)})} == set(range(150))


def test_batch_source_reads_each_offset_once(tiered):
    """The batch source with a data dir and its store: the offsets both tiers hold, once (they were read twice)."""
    data, store = tiered
    rows = scan_rows({"path": str(data), "remote": str(store)})
    assert [o for _t, _p, o, _k, _v in rows] == list(range(N))


def test_stream_reads_what_the_batch_source_reads(spark, tiered, tmp_path):
    """Rate-limited micro-batches from the log start in the store, a restart from the Spark checkpoint after local
    retention moved the local log start past the stream and the broker appended: the stream's rows (value
    included) are exactly the batch source's, each once."""
    data, store = tiered
    run = Run(spark, data, tmp_path / "ckpt", columns=("topic", "partition", "offset", "key", "value"),
              remote=str(store), maxOffsetsPerTrigger="100")
    q = run.start(processingTime="1 hour")  # one micro-batch, then stopped
    while not run.batches:
        assert q.exception() is None, q.exception()
        q.awaitTermination(0.2)
    q.stop()
    assert [r[2] for r in run.rows] == list(range(100))  # from the store
    assert _drop_local(data / "tt-0", 250) == 250  # the next offset, 100, is in the store only now
    generated_partition(data / "tt-0", 60, segment_bytes=8192, value_size=100, first=N)
    run.options = {"remote": str(store), "maxOffsetsPerTrigger": "120"}
    batches = run.available_now()
    assert len(batches) >= 2 and all(len(b) <= 120 for b in batches)
    want = [tuple(r) for r in scan_rows({"path": str(data), "remote": str(store)})]
    assert [r[2] for r in want] == list(range(N + 60))
    got = [tuple(bytes(x) if isinstance(x, bytearray) else x for x in r) for r in run.rows]
    exactly_once(got, set(want))


def upload_active(store: Path, pdir: Path, tmp: Path) -> None:
    """The active segment of ``pdir`` uploaded to ``store`` (its own segment id, as the broker uploads it once rolled)."""
    import base64
    import shutil

    active = sorted(pdir.glob("*.log"))[-1]
    copy = tmp / "active" / pdir.name
    copy.mkdir(parents=True)
    for f in [*pdir.glob(active.name[:-4] + ".*"), pdir / "leader-epoch-checkpoint"]:
        shutil.copy(f, copy / f.name)
    sid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    local_tiered_storage(store, copy, skip_last=False, segment_ids=[sid])
    shutil.rmtree(copy.parent)


def views(tmp: Path, topic: str = "tt") -> int:
    """How many data dir views of the store hold the partition under ``tmp`` (the temporary directory)."""
    return len(list(tmp.glob(f"kafkalog-spark-stream-remote-*/**/{topic}-0")))


def triggers(r: KafkaLogStreamReader, start: dict, limit: int, before_plan=lambda i: None):
    """Micro-batches as Spark runs them (the offsets of the next, the previous one committed, then its partitions);
    yields ``(micro-batch, start, end, its input partitions)`` after each is planned, until nothing is left."""
    prev, i = None, 0
    while True:
        end = r.latestOffset(start, ReadMaxRows(limit))
        if end == start:
            return
        if prev is not None:
            r.commit(prev)
        before_plan(i)
        parts = r.partitions(start, end)
        yield i, start, end, parts
        prev, start, i = end, end, i + 1


def test_views_are_released_once_no_micro_batch_needs_them(tiered, tmp_path, monkeypatch):
    """The store's view a micro-batch reads is reused by the next ones while the store's listing stays the same, a new
    listing (a segment uploaded between triggers) gets a new view and the old one goes once its micro-batch is
    committed; once the stream is past the local log start no view is left, and stop removes what commit kept. They
    stayed until the driver exited: one more per listing, for as long as the stream ran."""
    data, store = tiered
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    r = reader(data, remote=str(store))
    seen = []

    def upload(i: int) -> None:
        if i == 1:  # between the first and the second micro-batch: the active segment uploaded too
            upload_active(store, data / "tt-0", tmp_path)

    for i, _lo, _hi, parts in triggers(r, r.initialOffset(), 60, upload):
        seen.append((i, [(p.lo, p.hi) for p in parts], views(tmp)))
    assert seen == [
        (0, [(0, 60)], 1),
        (1, [(60, 120)], 2),  # a new listing: a new view; the first one's micro-batch is not committed yet
        (2, [(120, 150), (150, 180)], 1),  # the first view released at the commit of its micro-batch
        (3, [(180, 240)], 0),  # committed past the local log start (150): the store serves nothing more
        (4, [(240, 300)], 0), (5, [(300, 360)], 0), (6, [(360, 400)], 0)]
    assert len(r.remote_views) == 0
    r.stop()

    r2 = reader(data, remote=str(store))  # stopped while a view is still needed: stop removes it
    start = r2.initialOffset()
    end = r2.latestOffset(start, ReadMaxRows(60))
    r2.partitions(start, end)
    r2.commit(end)
    assert views(tmp) == 1
    r2.stop()
    assert views(tmp) == 0 and not list(tmp.iterdir())


def test_the_stream_lists_and_reads_a_store_on_s3(tiered, s3_endpoint, tmp_path, monkeypatch):
    """The remote option takes a store on S3 (the s3.* options): each trigger lists it there (a segment uploaded
    between triggers is seen at the next), and the stream plans the same offsets and tiers and reads the same rows
    through its views as with the same store on a local disk; the views and the copies fetched from S3 for them are
    removed at commit and stop."""
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    data, store = tiered
    url = upload(store, s3_endpoint, f"tiered/{uuid.uuid4().hex}")
    s3 = {"s3.endpoint": s3_endpoint, "s3.accessKey": "test", "s3.secretKey": "test", "s3.region": "us-east-1"}
    here, there = reader(data, remote=str(store)), reader(data, remote=url, **s3)
    plans = {}
    for name, r in (("local", here), ("s3", there)):
        rows, out = [], []
        for _i, lo, hi, parts in triggers(r, r.initialOffset(), 100):
            out.append((lo, hi, [(p.lo, p.hi, p.path == str(data / "tt-0")) for p in parts]))
            for p in parts:  # what each input partition's dir holds at its offsets (the view, or the local dir)
                rows += [x for x in scan_rows({"path": str(Path(p.path).parent)}) if p.lo <= x[2] < p.hi]
        plans[name] = (out, sorted(rows))
        assert views(tmp) == 0  # committed past the store: released (the last commit: stop)
        r.stop()
    assert plans["s3"] == plans["local"]
    assert [o for _t, _p, o, _k, _v in plans["s3"][1]] == list(range(N))
    assert plans["s3"][0][0][2] == [(0, 100, False)]  # the first micro-batch from the store's view
    fetched = [p for p in tmp.glob("kafkalog-remote-*/*") if p.is_dir()]
    assert fetched == []  # the copies of the S3 store's files went with the partition's last view

    # listed at each trigger: a segment uploaded to the S3 store is in the next trigger's listing
    r = reader(data, remote=url, **s3)
    before = r.view.partitions()[("tt", 0)].remote
    assert before is not None and len(before.segments) == 7
    extra = tmp_path / "extra"
    upload_active(extra, data / "tt-0", tmp_path)
    upload(extra / ROOT_STORAGE_DIR_NAME, s3_endpoint, f"{url.removeprefix('s3://logs/')}/{ROOT_STORAGE_DIR_NAME}")
    after = r.view.partitions()[("tt", 0)].remote
    assert after is not None and len(after.segments) == 8


def test_a_query_keeps_no_view_it_no_longer_needs(spark, tmp_path):
    """A Spark query reading a tiered topic from its store: while a micro-batch reads offsets from the store its view
    is there; the micro-batches after the query passed the local log start find none (released at the commit), and
    the stopped query leaves none behind. The views stayed for as long as the stream ran."""
    topic = f"views{uuid.uuid4().hex[:8]}"
    data = tmp_path / "data"
    generated_partition(data / f"{topic}-0", N, segment_bytes=8192, value_size=100)
    store = tmp_path / "remote"
    local_tiered_storage(store, data / f"{topic}-0")
    assert _drop_local(data / f"{topic}-0", 150) == 150
    write_data_dir_files(data, log_start={(topic, 0): 0}, replication={(topic, 0): N})
    tmp = Path(tempfile.gettempdir())

    class Counting(Run):
        counts: dict[int, int] = {}

        def _collect(self, df, batch_id):
            super()._collect(df, batch_id)
            self.counts[batch_id] = views(tmp, topic)  # (foreachBatch runs as the micro-batch is read)

    run = Counting(spark, data, tmp_path / "ckpt", remote=str(store), maxOffsetsPerTrigger="100")
    batches = run.available_now()
    assert [sorted(r[2] for r in b) for b in batches] == [list(range(i, i + 100)) for i in range(0, N, 100)]
    assert [run.counts[i] for i in sorted(run.counts)] == [1, 1, 0, 0]  # [0, 100) and [100, 200) read the store
    deadline = time.monotonic() + 60  # (the stop reaches the stream's Python process after the query ends)
    while views(tmp, topic) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert views(tmp, topic) == 0
