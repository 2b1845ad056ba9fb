"""Planning and scanning without Spark: byte-based splits at batch boundaries, windowed remote reads."""

from __future__ import annotations

import pytest
from builders import generated_data_dir, generated_partition

from kafkalog.storage.files.offset_index import OffsetIndex
from kafkalog.storage.io import fs as fs_module
from kafkalog.storage.io.fs import FsSpec
from kafkalog.storage.records import build_batch
from kafkalog.tools.spark.options import parse_read_options
from kafkalog.tools.spark.plan import Piece, discover, plan
from kafkalog.tools.spark.scan import scan

pytestmark = pytest.mark.spark


def _offsets(groups, opts) -> list[int]:
    return [o for g in groups for rb in scan(g, opts) for o in rb.column("offset").to_pylist()]


def test_large_segments_split_at_index_positions_small_ones_packed(tmp_path):
    generated_data_dir(tmp_path / "big", {"big": 1}, 20000, value_size=200)
    for p in range(6):
        generated_partition(tmp_path / "small" / f"small-{p}", 20)
    opts = parse_read_options({"paths": f"{tmp_path / 'big'},{tmp_path / 'small'}",
                               "maxPartitionBytes": str(1 << 20), "openCostInBytes": "1024"})
    groups = plan(opts)
    big = [p for g in groups for p in g if p.topic == "big"]
    assert len(big) >= 4
    idx = {e.position for e in OffsetIndex.open(tmp_path / "big" / "big-0" / "00000000000000000000.index")}
    assert all(p.start in idx for p in big[1:]) and big[0].start == 0 and big[-1].end == big[-1].file_size
    assert all(a.end == b.start for a, b in zip(big, big[1:], strict=False))
    small_groups = [g for g in groups if any(p.topic == "small" for p in g)]
    assert len(small_groups) == 1 and sum(p.topic == "small" for p in small_groups[0]) == 6  # packed together
    assert sorted(_offsets([[p] for p in big], opts)) == list(range(20000))


def test_split_without_index_uses_batch_headers(tmp_path):
    generated_data_dir(tmp_path, {"noidx": 1}, 5000, value_size=200)
    (tmp_path / "noidx-0" / "00000000000000000000.index").unlink()
    opts = parse_read_options({"path": str(tmp_path), "maxPartitionBytes": str(200_000)})
    groups = plan(opts)
    assert len(groups) > 3
    assert sorted(_offsets(groups, opts)) == list(range(5000))


def test_windowed_reads_equal_mmap_reads(tmp_path, monkeypatch):
    pdir = tmp_path / "w-0"
    generated_partition(pdir, 3000, batch_records=30)
    log = pdir / "00000000000000000000.log"
    with open(log, "ab") as f:  # one batch far larger than a window
        f.write(build_batch([(3000 + i, 0, None, b"x" * 1000) for i in range(40)], base_offset=3000))
    opts = parse_read_options({"path": str(tmp_path)})
    [seg] = discover(opts)
    local = Piece(seg.spec, seg.path, "w", 0, 0, 0, seg.size, seg.size)
    remote = Piece(FsSpec("local"), seg.path, "w", 0, 0, 0, seg.size, seg.size)  # fsspec: the windowed path
    monkeypatch.setattr(fs_module, "REMOTE_WINDOW", 5000)  # storage's windowed scan
    a = [rb.to_pylist() for rb in scan([local], opts)]
    b = [rb.to_pylist() for rb in scan([remote], opts)]
    assert sum(map(len, a)) == 3040
    assert [r["offset"] for x in a for r in x] == [r["offset"] for x in b for r in x]
    assert [r["value"] for x in a for r in x] == [r["value"] for x in b for r in x]


def test_a_torn_large_batch_ends_a_windowed_read_as_a_mapped_one(tmp_path, monkeypatch):
    """A batch larger than a window, cut short at the end of the segment: the windowed read reports the partial batch
    where the mapped read does (it used to end the piece silently, the torn batch's bytes unreported)."""
    pdir = tmp_path / "w-0"
    generated_partition(pdir, 300, batch_records=30)
    big = build_batch([(300 + i, 0, None, b"x" * 1000) for i in range(40)], base_offset=300)
    with open(pdir / "00000000000000000000.log", "ab") as f:
        f.write(big[: len(big) - 100])
    opts = parse_read_options({"path": str(tmp_path), "mode": "PERMISSIVE"})
    [seg] = discover(opts)
    local = Piece(seg.spec, seg.path, "w", 0, 0, 0, seg.size, seg.size)
    remote = Piece(FsSpec("local"), seg.path, "w", 0, 0, 0, seg.size, seg.size)  # fsspec: the windowed path
    monkeypatch.setattr(fs_module, "REMOTE_WINDOW", 5000)
    a = [r for rb in scan([local], opts) for r in rb.to_pylist()]
    b = [r for rb in scan([remote], opts) for r in rb.to_pylist()]
    assert sorted(r["offset"] for r in a if r["offset"] is not None) == list(range(300))
    assert [r["_corrupt"] is not None for r in a].count(True) == 1  # the partial batch: a _corrupt row
    assert [(r["offset"], r["_corrupt"]) for r in a] == [(r["offset"], r["_corrupt"]) for r in b]


def test_bad_split_boundary_is_an_index_error(tmp_path):
    generated_partition(tmp_path / "x-0", 100, batch_records=10)
    opts = parse_read_options({"path": str(tmp_path)})
    [seg] = discover(opts)
    bad = Piece(seg.spec, seg.path, "x", 0, 0, 0, 700, seg.size)  # 700 is inside a batch
    with pytest.raises(Exception, match="not a batch boundary"):
        list(scan([bad], opts))
