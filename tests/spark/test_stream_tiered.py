"""``spark.readStream.format("kafkalog")`` over a tiered topic (KIP-405) with its store given as ``remote``: the
stream starts at the partition's log start offset (below its local segments), reads the offsets below the local
log start from the store and the others from the local segments, each once where the two tiers overlap, the same
rows as the batch source; without the store it starts at the local log start and says where the rest is."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from builders import generated_partition, local_tiered_storage, write_data_dir_files
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from test_s3 import scan_rows
from test_stream import Run, exactly_once

from kafkalog.storage.remote.layout import open_remote_store, remote_partition_view
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
