"""Each Kafka rule exists once (issue 30): patch the one implementation of the log start offset, the high watermark,
segment listing and the index lookup, and every reader changes with it: the Spark source's planning and the stream
over a local dir and over ``s3://`` (a local moto server), ``kafkalog.open`` over ``s3://``, tiered reading (a remote
store's segments read through a data dir view), ``describe``, ``dump`` and the engines (retention, the loader).

A reader with a rule of its own would not change with the patch: that is what these tests catch."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import generated_partition, local_tiered_storage, write_data_dir_files

import kafkalog
from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.engine.repair import plan_repair
from kafkalog.storage.engine.retention import plan_retention
from kafkalog.storage.files.offset_index import OffsetIndex
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.log import partition as storage_log
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.remote.layout import open_remote_store, remote_partition_view
from kafkalog.storage.reports.describe import describe_partition
from kafkalog.tools.cli import main

require_modules("pyspark", "pyarrow", extra="spark")  # skipped without the spark extra, a failure under CI=true

from pyspark.sql.streaming.datasource import ReadAllAvailable  # noqa: E402

from kafkalog.tools.spark.options import parse_read_options  # noqa: E402
from kafkalog.tools.spark.plan import discover, plan  # noqa: E402
from kafkalog.tools.spark.stream import KafkaLogStreamReader  # noqa: E402

pytestmark = pytest.mark.spark  # the Spark source and stream (no JVM is started)

N = 300


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """``t-0``: 300 records in three segments with offset index entries; a high watermark at the end."""
    root = tmp_path / "data"
    generated_partition(root / "t-0", N, batch_records=10, segment_bytes=8000)
    write_data_dir_files(root, replication={("t", 0): N})
    return root


def bases(root: Path) -> list[int]:
    return sorted(int(p.name[:-4]) for p in (root / "t-0").glob("*.log"))


def stream_start(root: Path, **options: str) -> int:
    return KafkaLogStreamReader(None, {"path": str(root), **options}).initialOffset()["t"]["0"]


def stream_end(root: Path, **options: str) -> int:
    r = KafkaLogStreamReader(None, {"path": str(root), **options})
    return r.latestOffset(r.initialOffset(), ReadAllAvailable())["t"]["0"]


def planned_window_start(root: Path) -> int:
    """The Spark source's ``offset=start`` resolved for t-0 (``start`` is the log start offset)."""
    groups = plan(parse_read_options({"path": str(root), "offset": "start"}))
    return min(p.window[0] for g in groups for p in g)


def retention_log_start(root: Path) -> int:
    (pp,) = [p for p in plan_retention([root], now_ms=0).partitions if p.topic == "t"]
    return pp.facts["oldLogStartOffset"]  # the log start offset the engine loaded


def hide_the_first_segment(monkeypatch) -> None:
    """Patch the one segment listing (``list_partition_files``, as PartitionLog calls it): the first segment is not
    listed."""
    listed = storage_log.list_partition_files

    def without_the_first(*args, **kw):
        files = listed(*args, **kw)
        files.segments = files.segments[1:]
        return files

    monkeypatch.setattr(storage_log, "list_partition_files", without_the_first)


def spy_on_lookup(monkeypatch) -> list[tuple[int, int]]:
    """Every call of the one index lookup (``OffsetIndex.lookup``) from now on: ``(base offset, target)``."""
    calls: list[tuple[int, int]] = []
    lookup = OffsetIndex.lookup

    def spy(self, target_offset):
        calls.append((self.base_offset, target_offset))
        return lookup(self, target_offset)

    monkeypatch.setattr(OffsetIndex, "lookup", spy)
    return calls


def test_log_start_offset(data_dir, monkeypatch):
    second = bases(data_dir)[1]
    assert (stream_start(data_dir), planned_window_start(data_dir), describe_partition(data_dir / "t-0")
            ["logStartOffset"], retention_log_start(data_dir)) == (0, 0, 0, 0)
    monkeypatch.setattr(storage_log, "log_start_offset", lambda checkpoint, first, remote=False: second)
    assert stream_start(data_dir) == second
    assert planned_window_start(data_dir) == second
    assert describe_partition(data_dir / "t-0")["logStartOffset"] == second
    assert retention_log_start(data_dir) == second


def test_high_watermark(data_dir, monkeypatch):
    assert stream_end(data_dir, boundedByHighWatermark="true") == N
    monkeypatch.setattr(PartitionLog, "high_watermark", property(lambda self: 25))
    assert stream_end(data_dir, boundedByHighWatermark="true") == 25
    with PartitionLog(data_dir / "t-0") as plog:
        assert plog.last_stable_offset(0, 1 << 40) == 25


def test_segment_listing(data_dir, tmp_path, monkeypatch):
    store = tmp_path / "remote"
    local_tiered_storage(store, data_dir / "t-0")  # every segment but the active one
    all_bases = bases(data_dir)

    def tiered_bases() -> list[int]:
        with open_remote_store(store) as s:
            view = remote_partition_view(s, tmp_path / f"view{len(list(tmp_path.glob('view*')))}")
        return [seg.base_offset for seg in discover(parse_read_options({"path": str(view)}))]

    def everyone() -> tuple:
        return ([s.base_offset for s in discover(parse_read_options({"path": str(data_dir)}))],
                stream_start(data_dir),
                [s["baseOffset"] for s in describe_partition(data_dir / "t-0", scan=False)["segments"]],
                retention_log_start(data_dir), tiered_bases())

    assert everyone() == (all_bases, 0, all_bases, 0, all_bases[:-1])
    hide_the_first_segment(monkeypatch)
    rest = all_bases[1:]
    assert everyone() == (rest, rest[0], rest, rest[0], rest[:-1])


def test_index_lookup(data_dir, monkeypatch):
    lookup = OffsetIndex.lookup
    calls = spy_on_lookup(monkeypatch)
    target = bases(data_dir)[1] + 100  # past the segment's first index entry
    groups = plan(parse_read_options({"path": str(data_dir), "startingOffset": str(target)}))
    assert groups and (bases(data_dir)[1], target) in calls  # the Spark source's planning
    calls.clear()
    with PartitionLog(data_dir / "t-0") as plog:  # dump, export and the engines find an offset through it
        assert plog.lookup(target) is not None
    assert (bases(data_dir)[1], target) in calls

    def first_piece_start() -> int:
        (piece,) = [p for g in plan(parse_read_options({"path": str(data_dir), "startingOffset": str(target)}))
                    for p in g if p.base_offset == bases(data_dir)[1]]
        return piece.start

    assert first_piece_start() > 0
    monkeypatch.setattr(OffsetIndex, "lookup", lambda self, t: type(lookup(self, t))(self.base_offset, 0))
    assert first_piece_start() == 0  # the patched lookup decides where the read starts


def test_seek_index(data_dir, monkeypatch):
    """The offset-index entries a read may start at or be cut at are the segment's (``Segment.seek_index``): the
    Spark planner's start and the stream's tail ask it."""
    seek_index = Segment.seek_index
    asked: list[int] = []

    def spy(self, size=None):
        asked.append(self.base_offset)
        return seek_index(self, size)

    monkeypatch.setattr(Segment, "seek_index", spy)
    second = bases(data_dir)[1]
    opts = parse_read_options({"path": str(data_dir), "startingOffset": str(second + 100)})

    def first_piece_start() -> int:
        return next(p.start for g in plan(opts) for p in g if p.base_offset == second)

    assert first_piece_start() > 0 and second in asked  # the Spark source's planning
    asked.clear()
    assert stream_end(data_dir) == N and bases(data_dir)[-1] in asked  # the stream's tail of the last segment
    monkeypatch.setattr(Segment, "seek_index", lambda self, size=None: OffsetIndex.from_entries(self.base_offset, []))
    assert first_piece_start() == 0  # no entry to start at: the read starts at the segment's first byte


def test_end_cut_and_split_positions(tmp_path, monkeypatch):
    """Where a read of the offsets below an end offset stops (``Segment.end_position``) and where a segment may be
    split (``Segment.split_positions``) are the segment's rules: the Spark source's planning (and the stream's,
    which plans with it) cuts where they say, with no bisect or header walk of its own."""
    generated_partition(tmp_path / "t-0", 2000, batch_records=10)  # one segment, an index entry every 4 KiB
    size = (tmp_path / "t-0" / f"{0:020d}.log").stat().st_size
    ending = parse_read_options({"path": str(tmp_path), "endingOffset": "500"})
    split = parse_read_options({"path": str(tmp_path), "maxPartitionBytes": "10000"})

    def pieces(opts) -> list[tuple[int, int]]:
        return [(p.start, p.end) for g in plan(opts) for p in g]

    ((start, end),) = pieces(ending)
    assert start == 0 and 0 < end < size  # cut through the offset index
    assert len(pieces(split)) > 3  # at its index entries
    monkeypatch.setattr(Segment, "end_position", lambda self, index, end_offset, size: 1234)
    quarter, half = size // 4, size // 2
    monkeypatch.setattr(Segment, "split_positions",
                        lambda self, start, end, size=None: [p for p in (quarter, half) if start < p < end])
    assert pieces(ending) == [(0, 1234)]
    assert pieces(split) == [(0, quarter), (quarter, half), (half, size)]


# ---- over a URL (s3://, a local moto server), the loader and dump: the same one rule each time ----------------------
@pytest.fixture
def s3_dir(data_dir, s3_endpoint, monkeypatch) -> tuple[str, dict[str, str]]:
    """``data_dir`` uploaded to S3 (as tests/spark/test_s3.py uploads): its URL and the source's S3 options."""
    import pyarrow.fs as pafs

    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    fs = pafs.S3FileSystem(endpoint_override=s3_endpoint.removeprefix("http://"), scheme="http", access_key="test",
                           secret_key="test", region="us-east-1", allow_bucket_creation=True)
    fs.create_dir("rules")
    key = f"rules/{data_dir.parent.name}"
    pafs.copy_files(str(data_dir), key, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    return f"s3://{key}", {"s3.endpoint": s3_endpoint, "s3.accessKey": "test", "s3.secretKey": "test",
                           "s3.region": "us-east-1"}


def opened_partition(url: str, opts: dict[str, str]):
    """``kafkalog.open(url)``'s t-0 (closed when the data dir object goes)."""
    return kafkalog.open(url, filesystem_options=opts).partition("t", 0)


def planned_window_start_at(path: str, opts: dict[str, str]) -> int:
    groups = plan(parse_read_options({"path": path, "offset": "start", **opts}))
    return min(p.window[0] for g in groups for p in g)


def repair_log_start(root: Path) -> int:
    """The log start offset the loader (``storage/engine/loader.py``, run by repair) loads for t-0."""
    (pp,) = [p for p in plan_repair([root], now_ms=0).partitions if p.topic == "t"]
    return pp.facts["logStartOffset"]


def dumped_segments(root: Path, capsys) -> list[str]:
    """The segment files ``kafkalog dump`` of the partition dir reads, in order."""
    capsys.readouterr()
    assert main(["dump", str(root / "t-0")]) == 0
    out = capsys.readouterr().out
    return sorted({Path(w).name for w in out.replace(":", " ").split() if w.endswith(".log")}, key=out.index)


def test_log_start_offset_over_s3_and_in_the_loader(data_dir, s3_dir, monkeypatch):
    url, opts = s3_dir
    second = bases(data_dir)[1]

    def everyone() -> tuple:
        return (stream_start(url, **opts), planned_window_start_at(url, opts), opened_partition(url, opts)
                .log_start_offset, kafkalog.open(url, filesystem_options=opts).describe(scan=False)[0]
                ["logStartOffset"], repair_log_start(data_dir))

    assert everyone() == (0, 0, 0, 0, 0)
    monkeypatch.setattr(storage_log, "log_start_offset", lambda checkpoint, first, remote=False: second)
    assert everyone() == (second,) * 5


def test_high_watermark_over_s3(data_dir, s3_dir, monkeypatch):
    url, opts = s3_dir
    assert (stream_end(url, boundedByHighWatermark="true", **opts), opened_partition(url, opts).high_watermark) \
        == (N, N)
    monkeypatch.setattr(PartitionLog, "high_watermark", property(lambda self: 25))
    assert (stream_end(url, boundedByHighWatermark="true", **opts), opened_partition(url, opts).high_watermark) \
        == (25, 25)


def test_segment_listing_over_s3_and_in_dump(data_dir, s3_dir, monkeypatch, capsys):
    url, opts = s3_dir
    all_bases = bases(data_dir)
    names = [f"{b:020d}.log" for b in all_bases]

    def everyone() -> tuple:
        return ([s.base_offset for s in discover(parse_read_options({"path": url, **opts}))], stream_start(url, **opts),
                [s.base_offset for s in opened_partition(url, opts).segments], dumped_segments(data_dir, capsys))

    assert everyone() == (all_bases, 0, all_bases, names)
    hide_the_first_segment(monkeypatch)
    rest = all_bases[1:]
    assert everyone() == (rest, rest[0], rest, names[1:])


def test_index_lookup_over_s3_and_in_dump(data_dir, s3_dir, monkeypatch, capsys):
    url, opts = s3_dir
    calls = spy_on_lookup(monkeypatch)
    second = bases(data_dir)[1]
    target = second + 100  # past the segment's first index entry
    assert plan(parse_read_options({"path": url, "startingOffset": str(target), **opts}))  # the Spark source
    assert (second, target) in calls
    calls.clear()
    first = next(opened_partition(url, opts).records(f"{target}:{target + 1}"))  # the library over S3
    assert first["offset"] == target and (second, target) in calls
    calls.clear()
    capsys.readouterr()
    assert main(["dump", "-o", f"{target}:{target + 1}", str(data_dir / "t-0" / f"{second:020d}.log")]) == 0
    assert (second, target) in calls  # dump starts its read where the index says
