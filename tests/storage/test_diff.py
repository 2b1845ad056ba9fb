"""kafkalog diff: files, batches and records levels; exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import write_segment

from kafkalog.storage.log.datadir import live_partition_name, resolve_partition_dirs
from kafkalog.storage.records import build_batch
from kafkalog.storage.reports.diff import diff_paths
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


# ------------------------------------------------------------------------------ -o / --offset (rpk grammar)

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "kafka-4.3.1-kraft" / "data"


def _spec(*texts: str):
    from kafkalog.storage.log.offset_spec import parse_offset_specs

    return parse_offset_specs(list(texts))


def test_offset_range_narrows_records_and_batches(tmp_path: Path):
    a = batches(6)  # offsets 0..11, two records per batch
    b = list(a)
    b[3] = build_batch([(6, T0 + 3, b"k", b"CHANGED"), (7, T0 + 3, b"k", b"v")])
    write_segment(tmp_path / "a" / "t-0", 0, a)
    write_segment(tmp_path / "b" / "t-0", 0, b)
    for level in ("records", "batches"):
        assert diff_paths(tmp_path / "a", tmp_path / "b", level=level, offset_spec=_spec(":6")).equal
        assert diff_paths(tmp_path / "a", tmp_path / "b", level=level, offset_spec=_spec("-4")).equal
        (d,) = diff_paths(tmp_path / "a", tmp_path / "b", level=level, offset_spec=_spec("5:7")).differences
        assert d.offset == 6
    # the record level compares only the range's records, even inside a batch that straddles its bounds
    assert diff_paths(tmp_path / "a", tmp_path / "b", offset_spec=_spec("7:9")).equal
    (d,) = diff_paths(tmp_path / "a", tmp_path / "b", level="batches", offset_spec=_spec("7:9")).differences
    assert d.kind == "batch"


def test_offset_range_is_the_union_of_both_sides(tmp_path: Path):
    write_segment(tmp_path / "a" / "t-0", 0, batches(6))  # 0..11
    write_segment(tmp_path / "b" / "t-0", 0, batches(4))  # 0..7
    # -2: A's last two offsets (10, 11) and B's (6, 7): offsets 8..11 are in A only, and that is reported
    r = diff_paths(tmp_path / "a", tmp_path / "b", offset_spec=_spec("-2"))
    (d,) = r.differences
    assert d.kind == "offsets-only-in-a" and d.a["ranges"] == [[8, 11]]
    assert diff_paths(tmp_path / "a", tmp_path / "b", offset_spec=_spec(":8")).equal
    assert diff_paths(tmp_path / "a", tmp_path / "b", offset_spec=_spec("end")).equal  # an empty range


@pytest.fixture
def fixture_pair(tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of multi-segment-0 (segments at 0, 44, 120; log end 150); B without its last segment."""
    a, b = tmp_path / "a" / "multi-segment-0", tmp_path / "b" / "multi-segment-0"
    shutil.copytree(FIXTURE / "multi-segment-0", a)
    shutil.copytree(FIXTURE / "multi-segment-0", b)
    for f in b.glob("00000000000000000120.*"):
        f.unlink()
    return a, b


def test_offset_range_on_fixture_copies(fixture_pair):
    a, b = fixture_pair
    (d,) = diff_paths(a, b).differences
    assert d.kind == "offsets-only-in-a" and d.a["ranges"] == [[120, 149]]
    for text in (":120", "50:100", "e@1750000086001"):
        assert diff_paths(a, b, offset_spec=_spec(text)).equal, text
        assert diff_paths(a, b, level="batches", offset_spec=_spec(text)).equal, text
    for text in ("-10", "+10", "100:", "s@1750000086001", "@1750000086001:end"):
        (d,) = diff_paths(a, b, offset_spec=_spec(text)).differences
        assert d.kind == "offsets-only-in-a" and d.a["ranges"] == [[120, 149]], text


def test_offset_range_starts_at_the_offset_index(fixture_pair):
    from kafkalog.storage.reports.partition_records import iter_partition_records, offset_window

    a, _b = fixture_pair
    assert offset_window(a, _spec("60:70")) == (60, 70)
    recs = list(iter_partition_records(a, (60, 70)))
    assert [r[0] for r in recs] == list(range(60, 70))
    assert recs[0][5] == "00000000000000000044.log" and recs[0][6] > 0  # not read from the segment's start
    assert offset_window(a, _spec("@1750000086001")) == (44, 150)  # the time index: ListOffsets' rule


def test_offset_range_cli(fixture_pair, capsys):
    a, b = fixture_pair
    assert main(["diff", str(a), str(b)]) == 1
    assert main(["diff", str(a), str(b), "-o", ":120"]) == 0
    assert main(["diff", str(a), str(b), "-o", "s@1750000000000", "-o", "e@1750000086001", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])["summary"]
    assert summary["equal"]
    assert main(["diff", str(a), str(b), "--offset", "-10", "--json"]) == 1
    assert main(["diff", str(a), str(b), "--level", "bytes", "-o", "5"]) == 1  # a range has no bytes level
    assert "not to --level bytes" in capsys.readouterr().err
    assert main(["diff", str(a), str(b), "-o", "5:x"]) == 1
    # two .log files: the range resolved on each segment
    seg = "00000000000000000044.log"
    assert main(["diff", str(a / seg), str(b / seg), "-o", "50:60"]) == 0
