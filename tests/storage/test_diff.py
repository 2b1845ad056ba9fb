"""kafkalog diff: files, batches and records levels; exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import write_segment

from kafkalog.storage.diff import diff_paths
from kafkalog.storage.logdir import live_partition_name, resolve_partition_dirs
from kafkalog.storage.records import build_batch
from kafkalog.tools.cli import main

T0 = 1_700_000_000_000


def batches(n: int, value: bytes = b"v", start: int = 0) -> list[bytes]:
    return [build_batch([(start + i * 2 + j, T0 + i, b"k", value) for j in range(2)]) for i in range(n)]


def test_equal(tmp_path: Path):
    write_segment(tmp_path / "a" / "t-0", 0, batches(5))
    write_segment(tmp_path / "b" / "t-0", 0, batches(5))
    for level in ("bytes", "batches", "records"):
        r = diff_paths(tmp_path / "a", tmp_path / "b", level=level)
        assert r.equal, (level, r.differences)
    assert diff_paths(tmp_path / "a", tmp_path / "b").partitions_compared == 1


def test_first_differing_batch_and_record(tmp_path: Path):
    a = batches(5)
    b = list(a)
    b[3] = build_batch([(6, T0 + 3, b"k", b"CHANGED"), (7, T0 + 3, b"k", b"v")])
    write_segment(tmp_path / "a" / "t-0", 0, a)
    write_segment(tmp_path / "b" / "t-0", 0, b)
    r = diff_paths(tmp_path / "a", tmp_path / "b", level="batches")
    (d,) = r.differences
    assert d.kind == "batch" and d.offset == 6 and "crc" in d.a["fields"] and "records" in d.a["fields"]
    r = diff_paths(tmp_path / "a", tmp_path / "b", level="records")
    (d,) = r.differences
    assert d.kind == "record" and d.offset == 6 and d.a["fields"] == ["value"]
    r = diff_paths(tmp_path / "a", tmp_path / "b", level="bytes")
    (d,) = r.differences
    assert d.kind == "file" and d.a["position"] == sum(len(x) for x in a[:3]) + 11  # the batchLength field


def test_offsets_on_one_side(tmp_path: Path):
    write_segment(tmp_path / "a" / "t-0", 0, batches(6))
    write_segment(tmp_path / "b" / "t-0", 0, batches(4))
    write_segment(tmp_path / "b" / "u-0", 0, batches(1))
    r = diff_paths(tmp_path / "a", tmp_path / "b")
    kinds = {d.kind: d for d in r.differences}
    assert kinds["offsets-only-in-a"].a == {"count": 4, "ranges": [[8, 11]]}
    assert kinds["only-in-b"].path == "u-0"
    r = diff_paths(tmp_path / "a" / "t-0", tmp_path / "b" / "t-0", level="batches")
    assert [d.kind for d in r.differences] == ["batch-only-in-a", "batch-only-in-a"]


def test_segment_files_and_layout(tmp_path: Path):
    pa = write_segment(tmp_path / "a" / "t-0", 0, batches(3)).parent
    pb = write_segment(tmp_path / "b" / "t-0", 0, batches(3, b"x")).parent
    r = diff_paths(pa / "00000000000000000000.log", pb / "00000000000000000000.log")
    assert r.differences[0].kind == "record"
    assert live_partition_name("a-b-12").name == "a-b-12"
    assert (live_partition_name("a-b-12").topic, live_partition_name("a-b-12").partition) == ("a-b", 12)
    assert live_partition_name("t-0.0123456789abcdef0123456789abcdef-delete") is None
    assert live_partition_name("lost+found") is None
    (tmp_path / "a" / "lost+found").mkdir()
    assert [p.name for p in resolve_partition_dirs(tmp_path / "a")] == ["t-0"]


def test_cli_exit_codes(tmp_path: Path, capsys):
    write_segment(tmp_path / "a" / "t-0", 0, batches(3))
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "equal" in capsys.readouterr().out
    write_segment(tmp_path / "b" / "t-0", 0, batches(3, b"x"))
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 1
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["kind"] == "record" and lines[-1]["summary"]["equal"] is False
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "missing")]) == 1
    with pytest.raises(SystemExit) as e:
        main(["diff", str(tmp_path / "a"), str(tmp_path / "b"), "--level", "nope"])
    assert e.value.code == 2
