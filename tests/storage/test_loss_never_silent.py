"""Loss is never silent (issue 34): every reader stops at a torn batch anywhere but at the very end of the active
segment, doctor and verify report offsets the checkpoints remember but the logs no longer hold, the library and
the CLI agree about rows, and the messages say the true fact."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from builders import three_segment_data_dir

from kafkalog.storage.describe import describe_partition
from kafkalog.storage.diff import diff_paths
from kafkalog.storage.engine.export import iter_export_rows
from kafkalog.storage.errors import CorruptRecordError
from kafkalog.storage.groups import load_groups
from kafkalog.storage.log import PartitionLog
from kafkalog.storage.records import iter_batches
from kafkalog.storage.transactions import read_transaction_state
from kafkalog.tools import cli

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
KRAFT = FIXTURES / "kafka-4.3.1-kraft" / "data"


def _copy(tmp_path: Path, src: Path = KRAFT) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(src, dst)
    return dst


def _tear(seg: Path) -> int:
    """Cut ``seg`` in the middle of the batch that holds its middle byte; returns the batch's position."""
    data = seg.read_bytes()
    mid = len(data) // 2
    b = next(b for b in iter_batches(data) if b.position <= mid < b.position + b.size)
    pos = b.position
    del b
    os.truncate(seg, pos + 20)  # more than a header up to the magic byte: a partial batch
    return pos


# ------------------------------------------------------------------------------- 1. torn middle segment


@pytest.fixture
def torn_middle(tmp_path) -> tuple[Path, Path, int]:
    """The 4.3.1 fixture with its multi-segment-0 cut inside a batch of the middle (closed) segment."""
    d = _copy(tmp_path)
    seg = d / "multi-segment-0" / "00000000000000000044.log"
    return d, seg, _tear(seg)


def test_partition_log_raises_at_a_torn_closed_segment(torn_middle):
    d, seg, pos = torn_middle
    with PartitionLog(d / "multi-segment-0") as log, pytest.raises(CorruptRecordError) as ei:
        for _ in log.iter_batches():
            pass
    assert ei.value.path == str(seg) and ei.value.position == pos
    assert "partial batch" in ei.value.reason and "up to offset 119" in ei.value.reason


def test_a_torn_tail_of_the_active_segment_is_the_end_of_the_log(tmp_path):
    d = _copy(tmp_path)
    active = d / "multi-segment-0" / "00000000000000000120.log"
    pos = _tear(active)
    with PartitionLog(d / "multi-segment-0") as log:
        batches = [b.last_offset for _, b in log.iter_batches()]
    assert batches and batches[-1] < 150
    rows = list(iter_export_rows([d / "multi-segment-0"]))
    assert rows[-1]["offset"] < 150 and rows[-1]["position"] < pos


def test_export_library_and_cli_stop_at_a_torn_closed_segment(torn_middle, capsys):
    d, seg, pos = torn_middle
    with pytest.raises(CorruptRecordError):
        list(iter_export_rows([d]))
    assert cli.main(["export", str(d), "--out", os.devnull]) == 1
    err = capsys.readouterr().err
    assert f"{seg}: byte {pos}" in err and "not the active one" in err


def test_export_parquet_stops_at_a_torn_closed_segment(torn_middle, tmp_path, capsys):
    pytest.importorskip("pyarrow")
    d, seg, pos = torn_middle
    assert cli.main(["export", str(d / "multi-segment-0"), "--format", "parquet", "--out",
                     str(tmp_path / "pq")]) == 1
    assert f"{seg}: byte {pos}" in capsys.readouterr().err


def test_diff_stops_at_a_torn_closed_segment(torn_middle, capsys):
    d, seg, pos = torn_middle
    with pytest.raises(CorruptRecordError) as ei:
        diff_paths(d / "multi-segment-0", KRAFT / "multi-segment-0", level="records")
    assert ei.value.position == pos
    assert cli.main(["diff", str(d / "multi-segment-0"), str(KRAFT / "multi-segment-0")]) == 1
    assert f"{seg}: byte {pos}" in capsys.readouterr().err


def test_describe_reports_a_torn_closed_segment(torn_middle):
    d, seg, pos = torn_middle
    desc = describe_partition(d / "multi-segment-0")
    assert any(f"{seg}: byte {pos}" in e for e in desc.get("errors", ()))


def test_groups_and_transactions_stop_at_a_torn_closed_segment(tmp_path, capsys):
    d = three_segment_data_dir(tmp_path / "d")
    pdir = d / "orders-3"
    seg = pdir / "00000000000000000020.log"
    pos = _tear(seg)
    with PartitionLog(pdir) as log, pytest.raises(CorruptRecordError) as ei:
        read_transaction_state(log)
    assert ei.value.path == str(seg) and ei.value.position == pos
    offsets = tmp_path / "d" / "__consumer_offsets-0"
    shutil.copytree(pdir, offsets)
    report = load_groups([tmp_path / "d"])
    assert any(f"{offsets / seg.name}: byte {pos}" in e for e in report.errors)
    assert cli.main(["groups", str(tmp_path / "d")]) == 1
    assert f"{offsets / seg.name}: byte {pos}" in capsys.readouterr().err
