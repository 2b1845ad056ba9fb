"""Kafka's .cleaned -> .swap -> replace protocol: every crash point recovers to old or new, nothing lost."""

import shutil
from pathlib import Path

import pytest
from builders import offset_batches, write_segment

from kafkalog.storage.engine.swap import (
    cleaned_path,
    recover_swap_files,
    replace_segments,
)
from kafkalog.storage.files.names import offset_file_name
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.records import iter_batches


class Crash(Exception):
    pass


def _offsets(d: Path) -> list[int]:
    out = []
    for log in sorted(d.glob("*.log")):
        out += [r.offset for b in iter_batches(log.read_bytes()) for r in b.records()]
    return out


@pytest.fixture
def partition(tmp_path: Path) -> Path:
    d = tmp_path / "topic-0"
    d.mkdir()
    write_segment(d, 0, offset_batches(list(range(0, 10))), empty_indexes=True)
    write_segment(d, 10, offset_batches(list(range(10, 20))), empty_indexes=True)
    (d / offset_file_name(10, ".snapshot")).write_bytes(b"snap")
    # the cleaned replacement of both segments: the last record of each key (keys k0,k1,k2)
    write_segment(d, 0, offset_batches([17, 18, 19]), suffix=".cleaned", empty_indexes=True)
    return d


def _steps(partition: Path, tmp_path: Path) -> list[str]:
    steps: list[str] = []
    probe = tmp_path / "probe"
    shutil.copytree(partition, probe)
    replace_segments(probe, [0], [0, 10], crash_hook=steps.append)
    return steps


def test_replace_segments_installs_new_segment(partition: Path):
    res = replace_segments(partition, [0], [0, 10])
    assert sorted(p.name for p in partition.glob("*.log")) == [offset_file_name(0, ".log")]
    assert _offsets(partition) == [17, 18, 19]
    assert not list(partition.glob("*.cleaned")) and not list(partition.glob("*.swap"))
    assert not list(partition.glob("*.deleted"))
    assert not (partition / offset_file_name(10, ".snapshot")).exists()
    assert offset_file_name(0, ".log") in res.installed


def test_keep_deleted(partition: Path):
    replace_segments(partition, [0], [0, 10], keep_deleted=True)
    assert (partition / (offset_file_name(10, ".log") + ".deleted")).exists()
    recover_swap_files(partition)
    assert not list(partition.glob("*.deleted"))


def test_every_crash_point_recovers(partition: Path, tmp_path: Path):
    steps = _steps(partition, tmp_path)
    assert len(steps) >= 8
    outcomes = set()
    for i, step in enumerate(steps):
        d = tmp_path / f"crash{i}"
        shutil.copytree(partition, d)

        def hook(s: str, _stop=step) -> None:
            if s == _stop:
                raise Crash(s)

        with pytest.raises(Crash):
            replace_segments(d, [0], [0, 10], crash_hook=hook)
        recover_swap_files(d)
        offsets = _offsets(d)
        assert offsets in (list(range(20)), [17, 18, 19]), (step, offsets)
        assert not list(d.glob("*.cleaned")) and not list(d.glob("*.swap")) and not list(d.glob("*.deleted"))
        outcomes.add(tuple(offsets))
    assert len(outcomes) == 2  # early crashes roll back, late ones complete


def test_stale_swap_above_cleaned_is_discarded(partition: Path):
    # an interrupted multi-segment split: a .swap whose base >= the smallest .cleaned base is incomplete
    write_segment(partition, 5, offset_batches([5]), suffix=".swap", empty_indexes=True)
    shutil.copy(cleaned_path(partition, 0, ".log"), cleaned_path(partition, 3, ".log"))
    rec = recover_swap_files(partition)
    assert offset_file_name(5, ".log") + ".swap" in rec.deleted
    assert _offsets(partition) == list(range(20))


def test_dry_run_changes_nothing(partition: Path):
    before = sorted(p.name for p in partition.iterdir())
    rec = recover_swap_files(DirView(partition))
    assert rec.changed
    assert sorted(p.name for p in partition.iterdir()) == before


def test_read_next_offset(partition: Path):
    assert Segment(partition / offset_file_name(10, ".log"), 10).read_next_offset() == 20
    empty = partition / offset_file_name(99, ".log")
    empty.write_bytes(b"")
    assert Segment(empty, 99).read_next_offset() == 99
