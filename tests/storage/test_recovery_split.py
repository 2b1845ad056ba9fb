"""Offset-overflow segments (KAFKA-6264, docs/semantics.md#offset-overflow-segments): a segment holding offsets more than
2^31-1 above its base offset is split into segments that fit, then loaded (and recovered) again."""

import os

import pytest
from builders import batch_at
from engines import recover

from kafkalog.facts import render
from kafkalog.storage.engine.reindex import plan_reindex
from kafkalog.storage.engine.split import plan_overflow_split, split_overflowed_segment
from kafkalog.storage.files.offset_index import read_offset_index
from kafkalog.storage.io import fileops
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.io.ops import run_ops
from kafkalog.storage.records import build_batch, iter_batches

NOW = 1_700_000_000_000
HIGH = 2**31 + 100  # beyond base 0 + Int.MaxValue


def _overflowed(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    data = b"".join([batch_at(0), batch_at(5), batch_at(HIGH), batch_at(HIGH + 5), batch_at(HIGH + 10)])
    (d / "00000000000000000000.log").write_bytes(data)
    return d, data


def _names(d):
    return sorted(os.listdir(d))


def test_plan_overflow_split_cuts_where_offsets_stop_fitting(tmp_path):
    _, data = _overflowed(tmp_path)
    sizes = [b.size for b in iter_batches(data)]
    parts = plan_overflow_split(memoryview(data), 0)
    assert [(p.base_offset, p.start, p.end, p.appends) for p in parts] == [
        (0, 0, sizes[0] + sizes[1], [0]),
        (HIGH, sizes[0] + sizes[1], len(data), [0]),
    ]


def test_recovery_splits_the_segment_and_loads_again(tmp_path):
    d, data = _overflowed(tmp_path)
    preview = recover(d, now_ms=NOW, dry_run=True)
    assert any("KAFKA-6264" in n and str(HIGH) in n for n in map(render, preview.notes))
    assert _names(d) == ["00000000000000000000.log"]  # the dry run changed nothing

    r = recover(d, now_ms=NOW)
    high = f"{HIGH:020d}"
    assert f"{high}.log" in _names(d)
    assert not [n for n in _names(d) if n.endswith((".cleaned", ".swap", ".deleted"))]
    first = (d / "00000000000000000000.log").read_bytes()
    second = (d / f"{high}.log").read_bytes()
    assert first + second == data  # bytes copied, nothing lost or reordered
    assert r.log_end_offset == HIGH + 15 and not r.truncated
    assert any("KAFKA-6264" in n for n in map(render, r.notes))
    # every segment fits its relative offset range and has indexes built by recovery
    for name in (f"{0:020d}", high):
        assert (d / f"{name}.index").exists() and (d / f"{name}.timeindex").exists()
        with read_offset_index(d / f"{name}.index") as idx:
            assert all(0 <= e.offset - int(name) <= 2**31 - 1 for e in idx)
    assert (d / f"{HIGH + 15:020d}.snapshot").exists()
    # the split result is stable: a second recovery changes no .log
    r2 = recover(d, now_ms=NOW)
    assert not r2.truncated and not [p for p in r2.deleted if p.endswith(".log")]


def test_split_is_crash_safe(tmp_path):
    d, data = _overflowed(tmp_path)

    def crash(kind: str, path: str, _target) -> None:
        if kind == "rename" and path.endswith(".swap"):  # the first .swap -> final rename
            raise RuntimeError("crash")

    view = DirView(d)
    split_overflowed_segment(view, 0)
    with pytest.raises(RuntimeError), fileops.observe(crash):
        run_ops(view.ops)
    # the broker's (and repair's) temp-file handling completes the swap; nothing is lost
    recover(d, now_ms=NOW)
    logs = [n for n in _names(d) if n.endswith(".log")]
    assert logs == ["00000000000000000000.log", f"{HIGH:020d}.log"]
    assert b"".join((d / n).read_bytes() for n in logs) == data


def test_reindex_refuses_an_overflowed_segment(tmp_path):
    d, _ = _overflowed(tmp_path)
    (problem,) = plan_reindex([d]).errors
    assert problem.kind == "reindex.mustSplit" and problem.file == str(d)
    assert problem.facts == {"segment": str(d / "00000000000000000000.log"), "baseOffset": 0,
                             "position": problem.facts["position"], "error": problem.facts["error"]}
    assert render(problem) == f"{problem.facts['error']}: the segment must be split (KAFKA-6264); run repair"
    assert problem.facts["error"] == f"offset {HIGH + 4} cannot be stored relative to the segment base offset 0"


def test_split_copies_in_chunks_of_at_most_one_mebibyte(tmp_path):
    big = [build_batch([(None, NOW, b"k", os.urandom(80_000)) for _ in range(5)], base_offset=5 * i)
           for i in range(5)]
    data = b"".join(big) + batch_at(HIGH)
    s = len(big[0])
    assert all(len(b) == s for b in big) and 2 * s < 1024 * 1024 < 3 * s
    parts = plan_overflow_split(memoryview(data), 0)
    assert [(p.base_offset, p.appends) for p in parts] == [(0, [0, 2 * s, 4 * s]), (HIGH, [0])]
    d = tmp_path / "t-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(data)
    view = DirView(d)
    assert split_overflowed_segment(view, 0, index_interval_bytes=1000) == [0, HIGH]
    run_ops(view.ops)
    # append rule per chunk: entries (last offset of the chunk, chunk position) after the first chunk
    with read_offset_index(d / "00000000000000000000.index") as idx:
        assert [(e.offset, e.position) for e in idx] == [(19, 2 * s), (24, 4 * s)]
