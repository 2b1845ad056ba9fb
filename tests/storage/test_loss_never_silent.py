"""Loss is never silent (issue 34): every reader stops at a torn batch anywhere but at the very end of the active
segment, doctor and verify report offsets the checkpoints remember but the logs no longer hold, the library and
the CLI agree about rows, and the messages say the true fact."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from builders import offset_batches, three_segment_data_dir, write_segment
from damage import crc_active_segment, crc_closed_segment

from kafkalog.facts import render
from kafkalog.storage.engine.export import ExportFilter, iter_export_rows
from kafkalog.storage.errors import CorruptRecordError, LogDirError
from kafkalog.storage.files.checkpoints import RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from kafkalog.storage.log.loss import PRODUCER_SNAPSHOT
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.segment_check import segment_crc_failures, segment_holes, segment_torn_end
from kafkalog.storage.records import RECORD_COLUMNS, iter_batches, to_arrow
from kafkalog.storage.reports.describe import describe_partition
from kafkalog.storage.reports.diff import diff_paths
from kafkalog.storage.reports.doctor import diagnose
from kafkalog.storage.reports.groups import load_groups
from kafkalog.storage.reports.transactions import read_transaction_state
from kafkalog.storage.reports.verify import verify_paths
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
    """A batch the broker was appending when it died (past the high watermark): the log ends before it."""
    d = _copy(tmp_path)
    active = d / "multi-segment-0" / "00000000000000000120.log"
    size = active.stat().st_size
    with open(active, "ab") as f:
        f.write(active.read_bytes()[:40])  # the first 40 bytes of a batch: a partial batch
    with PartitionLog(d / "multi-segment-0") as log:
        batches = [b.last_offset for _, b in log.iter_batches()]
    assert batches[-1] == 149
    rows = list(iter_export_rows([d / "multi-segment-0"]))
    assert rows[-1]["offset"] == 149 and rows[-1]["position"] < size


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
    assert any(f"{offsets / seg.name}: byte {pos}" in render(e) for e in report.errors)
    assert cli.main(["groups", str(tmp_path / "d")]) == 1
    assert f"{offsets / seg.name}: byte {pos}" in capsys.readouterr().err


def test_doctor_reports_a_hole_the_broker_serves(torn_middle, capsys):
    d, seg, pos = torn_middle  # a clean shutdown: the broker does not recover the segment
    with PartitionLog(d / "multi-segment-0") as log:
        [hole] = segment_holes(log, log.segments_unchecked_at_load(True))
    assert (hole.file, hole.position, hole.first_offset, hole.last_offset) == (str(seg), pos, 75, 119)
    diag = diagnose([d], now_ms=1_800_000_000_000, legacy=False)
    [lost] = [p for p in diag.problems if p.kind == "lostOffsets"]
    assert (lost.path, lost.first_offset, lost.last_offset, diag.exit_code) == (str(seg), 75, 119, 1)
    assert cli.main(["doctor", str(d)]) == 1
    assert "HEALTHY" not in capsys.readouterr().out
    with PartitionLog(KRAFT / "multi-segment-0") as log:
        assert segment_holes(log, log.segments) == []


# ------------------------------------------------------------------- 3. offsets remembered past the log end


@pytest.fixture
def logs_removed(tmp_path) -> Path:
    """The 4.3.1 fixture with multi-segment-0's .log files deleted (checkpoints, snapshots and a consumer group
    remember offsets 0..149 of it)."""
    d = _copy(tmp_path)
    for f in (d / "multi-segment-0").glob("*.log"):
        f.unlink()
    return d


def test_partition_log_remembers_offsets_past_its_end(logs_removed):
    with PartitionLog(logs_removed / "multi-segment-0", high_watermark=150, recovery_point=150) as log:
        found = {r.source: r for r in log.remembered_beyond_end()}
    assert set(found) == {REPLICATION_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, PRODUCER_SNAPSHOT}
    hw = found[REPLICATION_OFFSET_CHECKPOINT]
    assert (hw.offset, hw.log_end_offset, hw.first_missing, hw.last_missing, hw.missing) == (150, 0, 0, 149, 150)
    assert Path(found[PRODUCER_SNAPSHOT].file).name == "00000000000000000150.snapshot"
    with PartitionLog(KRAFT / "multi-segment-0", high_watermark=150, recovery_point=150) as log:
        assert log.remembered_beyond_end() == []


def test_doctor_reports_the_lost_offsets(logs_removed, capsys):
    diag = diagnose([logs_removed], now_ms=1_800_000_000_000, legacy=False)
    lost = [p for p in diag.problems if p.kind == "lostOffsets"]
    assert len(lost) == 1 and lost[0].severity == "loss" and lost[0].partition == "multi-segment-0"
    assert (lost[0].first_offset, lost[0].last_offset) == (0, 149)
    assert "high watermark 150" in render(lost[0].note) and "group-consumer-protocol" in render(lost[0].note)
    assert diag.verdict != "healthy" and diag.exit_code == 1
    assert cli.main(["doctor", str(logs_removed)]) == 1
    out = capsys.readouterr().out
    assert "HEALTHY" not in out and "0..149" in out
    assert diagnose([KRAFT], now_ms=1_800_000_000_000, legacy=False).verdict == "healthy"


def test_verify_reports_the_lost_offsets(logs_removed, capsys):
    findings = [f for f in verify_paths([logs_removed], workers=1).findings if f.kind == "loss"]
    assert {f.file for f in findings} == {str(logs_removed / "multi-segment-0")}
    assert all(f.severity == "error" and "offsets 0..149 are gone" in render(f) for f in findings)
    assert any("committed offset 150" in render(f) for f in findings)
    assert cli.main(["verify", str(logs_removed)]) == 1
    assert "offsets 0..149 are gone" in capsys.readouterr().out
    assert not [f for f in verify_paths([KRAFT], workers=1).findings if f.kind == "loss"]


def test_groups_report_committed_offsets_past_the_log_end(logs_removed, capsys):
    report = load_groups([logs_removed])
    [r] = report.beyond_end
    assert (r.group, r.offset, r.log_end_offset, Path(r.file).name) == (
        "group-consumer-protocol", 150, 0, "multi-segment-0")
    assert cli.main(["groups", str(logs_removed)]) == 0
    err = capsys.readouterr().err
    assert "committed offset 150 in multi-segment-0, past its log end offset 0" in err
    assert load_groups([KRAFT]).beyond_end == []


# ------------------------------------------------------------------------------ 8. messages that were wrong


def test_compact_says_only_the_active_segment_holds_data(tmp_path, capsys):
    d = _copy(tmp_path)
    pdir = d / "__consumer_offsets-3"
    assert cli.main(["compact", "--dry-run", str(pdir)]) == 0
    out = capsys.readouterr().out
    size = (pdir / "00000000000000000000.log").stat().st_size
    assert "empty log" not in out
    assert f"only the active segment holds data ({size} bytes, offsets 0..14)" in out
    assert "never cleans the active segment" in out


@pytest.mark.parametrize("args", [["-o", "5:3"], ["-o", "5:5"], ["--from-offset", "9", "--to-offset", "2"]])
def test_export_of_an_empty_range_is_a_usage_error(args, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert cli.main(["export", str(KRAFT / "codec-none-0"), *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "empty range" in err and (args[1] in err or "--to-offset 2" in err)
    assert not out.exists()


def test_diff_refuses_to_align_offsets_out_of_order(tmp_path, capsys):
    a, b = tmp_path / "a" / "t-0", tmp_path / "b" / "t-0"
    write_segment(a, 0, offset_batches([0, 1, 2, 5, 3, 4]))
    write_segment(b, 0, offset_batches([0, 1, 2, 3, 4, 5]))
    for level in ("records", "batches"):
        with pytest.raises(CorruptRecordError) as ei:
            diff_paths(a, b, level=level)
        assert "offset 3 follows offset 5" in ei.value.reason
        assert cli.main(["diff", "--level", level, str(a), str(b)]) == 1
        captured = capsys.readouterr()
        assert "only in" not in captured.out and "offset 3 follows offset 5" in captured.err


def test_describe_prints_an_error_once(tmp_path, capsys):
    pdir = tmp_path / "t-0"
    write_segment(pdir, 0, b"\x00" * 8 + b"\x00\x00\x00\x05" + bytes(range(200)))
    desc = describe_partition(pdir)
    assert len(desc["errors"]) == 1 and "smaller than minimum record overhead" in desc["errors"][0]
    assert cli.main(["describe", str(pdir)]) == 1
    assert capsys.readouterr().out.count("smaller than minimum record overhead") == 1


# ------------------------------------------------------------------------- 10. one row schema, one default


NAMES = [n for n, _ in RECORD_COLUMNS]


def test_library_and_cli_rows_agree(tmp_path):
    """The transactions fixture holds markers: the library's rows, to_arrow and the CLI's export give the same
    records (no markers by default) with the same 19 columns in RECORD_COLUMNS' order."""
    pdir = KRAFT / "transactions-0"
    rows = list(iter_export_rows([pdir]))
    assert rows and list(rows[0]) == NAMES and not any(r["isControl"] for r in rows)
    assert all(r["timestamp"] == r["timestampMs"] for r in rows)
    every = list(iter_export_rows([pdir], ExportFilter(include_control=True)))
    assert any(r["isControl"] for r in every) and len(every) > len(rows)
    out = tmp_path / "t.jsonl"
    assert cli.main(["export", str(pdir), "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [o["offset"] for o in lines] == [r["offset"] for r in rows] and list(lines[0]) == NAMES
    pytest.importorskip("pyarrow")
    data = b"".join(p.read_bytes() for p in sorted(pdir.glob("*.log")))
    for native in (True, False):
        table = to_arrow(data, topic="transactions", partition=0, native=native)
        assert table.schema.names == NAMES
        assert table.column("offset").to_pylist() == [r["offset"] for r in rows]
        marked = to_arrow(data, topic="transactions", partition=0, native=native, include_control=True)
        assert marked.column("offset").to_pylist() == [r["offset"] for r in every]
    assert cli.main(["export", str(pdir), "--format", "parquet", "--out", str(tmp_path / "pq")]) == 0
    import pyarrow.parquet as pq

    assert pq.read_schema(tmp_path / "pq" / "transactions-0.parquet").names == NAMES


def test_import_reads_exports_with_and_without_timestamp_ms(tmp_path):
    pdir = KRAFT / "transactions-0"
    out = tmp_path / "t.jsonl"
    assert cli.main(["export", str(pdir), "--print-control-records", "--out", str(out)]) == 0
    old = tmp_path / "old.jsonl"  # as export wrote it before timestampMs
    old.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "timestampMs"}) + "\n"
                           for line in out.read_text().splitlines()))
    for i, f in enumerate((out, old)):
        dest = tmp_path / f"imp{i}"
        assert cli.main(["import", str(f), str(dest)]) == 0
        assert diff_paths(pdir, dest / "transactions-0", level="records").equal


def test_export_stops_at_a_partition_that_lost_offsets(logs_removed, tmp_path, capsys):
    with pytest.raises(LogDirError, match=r"offsets 0\.\.149 are gone"):
        list(iter_export_rows([logs_removed / "multi-segment-0"]))
    assert cli.main(["export", str(logs_removed), "--out", str(tmp_path / "o.jsonl")]) == 1
    assert "offsets 0..149 are gone" in capsys.readouterr().err


def test_doctor_reports_a_crc_failure_in_a_closed_segment(tmp_path, capsys):
    d = _copy(tmp_path)
    seg = d / "multi-segment-0" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    b = list(iter_batches(bytes(data)))[1]
    pos, first, last = b.position, b.base_offset, b.last_offset
    data[pos + b.size - 3] ^= 0x5A
    del b
    seg.write_bytes(bytes(data))
    with PartitionLog(d / "multi-segment-0") as log:
        [bad] = segment_crc_failures(log.segments_unchecked_at_load(True))
    assert (bad.file, bad.position, bad.first_offset, bad.last_offset) == (str(seg), pos, first, last)
    diag = diagnose([d], now_ms=1_800_000_000_000)
    [p] = [p for p in diag.problems if p.kind == "corruptBatch"]
    assert (p.path, p.first_offset, p.last_offset, diag.exit_code) == (str(seg), first, last, 1)
    assert not [p for p in diagnose([d], now_ms=1_800_000_000_000, legacy=False).problems
                if p.kind == "corruptBatch"]  # (--no-format-check reads no batch)
    assert cli.main(["doctor", str(d)]) == 1


def _bad_batch(seg: Path) -> tuple[int, int, int]:
    """(position, first offset, last offset) of the one batch of ``seg`` that fails its CRC."""
    [(pos, first, last)] = [(b.position, b.base_offset, b.last_offset) for b in iter_batches(seg.read_bytes())
                            if not b.is_valid()]
    return pos, first, last


def test_doctor_reports_a_crc_failure_in_the_active_segment_after_a_clean_shutdown(tmp_path, capsys):
    d = _copy(tmp_path)  # a clean shutdown: LogLoader.recoverLog checks no segment, the active one included
    assert (d / ".kafka_cleanshutdown").is_file()
    pdir = d / "multi-segment-0"
    crc_active_segment(pdir)
    seg = pdir / "00000000000000000120.log"
    pos, first, last = _bad_batch(seg)
    diag = diagnose([d], now_ms=1_800_000_000_000)
    [p] = [p for p in diag.problems if p.kind == "corruptBatch"]
    assert (p.path, p.partition, p.first_offset, p.last_offset) == (str(seg), "multi-segment-0", first, last)
    assert f"byte {pos}" in render(p.note) and p.severity == "loss"
    assert p.serving is not None and (p.serving.cut_first_offset, p.serving.cut_last_offset) == (first, 149)
    assert p.serving.served_to["javaConsumer"] == "fails" and p.serving.served_to["follower"] == "fails"
    assert (diag.verdict, diag.exit_code) == ("recovery", 1)
    assert cli.main(["doctor", str(d)]) == 1
    out = capsys.readouterr().out
    assert "HEALTHY" not in out and seg.name in out and f"byte {pos}" in out


def test_doctor_without_a_clean_shutdown_reports_the_crc_failure_below_the_recovery_point(tmp_path):
    """Without the marker the broker recovers from the floor segment of the recovery point (150: segment 120) on,
    and truncates at its CRC failure (the plan's loss); the CRC failure in segment 0, below the recovery point, is
    served as it is. One finding each: the recovered segment is not reported twice."""
    d = _copy(tmp_path)
    (d / ".kafka_cleanshutdown").unlink()
    pdir = d / "multi-segment-0"
    crc_closed_segment(pdir)
    crc_active_segment(pdir)
    first_seg, active = pdir / "00000000000000000000.log", pdir / "00000000000000000120.log"
    diag = diagnose([d], now_ms=1_800_000_000_000)
    mine = [p for p in diag.problems if p.partition == "multi-segment-0" and p.severity == "loss"]
    [cut] = [p for p in mine if p.kind == "truncation"]
    [bad] = [p for p in mine if p.kind == "corruptBatch"]
    assert (cut.path, cut.first_offset) == (str(active), _bad_batch(active)[1])
    pos, first, last = _bad_batch(first_seg)
    assert (bad.path, bad.first_offset, bad.last_offset) == (str(first_seg), first, last)
    assert f"byte {pos}" in render(bad.note) and bad.serving is not None


def test_a_torn_active_segment_after_a_clean_shutdown_is_the_log_end_not_a_hole(tmp_path):
    """After a clean shutdown the broker computes its log end at the last complete batch of the active segment,
    as every reader stops there (PartitionLog.segment_end_error): not a hole in the segment, nor a CRC failure. But
    it keeps the torn bytes and appends after them (issue 31): a tornEnd loss at their byte, from the log end on."""
    d = _copy(tmp_path)
    pdir = d / "multi-segment-0"
    seg = pdir / "00000000000000000120.log"
    pos = _tear(seg)
    with PartitionLog(pdir) as log:
        unchecked = log.segments_unchecked_at_load(True)
        assert [s.base_offset for s in unchecked] == [0, 44, 120]
        assert segment_holes(log, unchecked) == [] and segment_crc_failures(unchecked) == []
        torn = segment_torn_end(log, unchecked)
        assert torn is not None and (torn.file, torn.position, torn.bytes, torn.first_offset) == (str(seg), pos, 20, 130)
        assert torn.declared_bytes == 584 and torn.compressed is None  # its size, from its header; not its codec
        assert segment_torn_end(log, unchecked[:2]) is None  # (recovered at load without a clean shutdown)
    diag = diagnose([d], now_ms=1_800_000_000_000)
    # the offsets the cut removed are a loss through what remembers them (the high watermark, recovery point and
    # snapshot at 150), named on the partition dir, not a hole in the segment
    lost = {p.kind: p for p in diag.problems if p.partition == "multi-segment-0" and p.severity == "loss"}
    assert sorted(lost) == ["lostOffsets", "tornEnd"]
    gone = lost["lostOffsets"]
    assert (gone.path, gone.first_offset, gone.last_offset) == (str(pdir), 130, 149)
    end = lost["tornEnd"]
    assert (end.path, end.first_offset, end.last_offset, end.bytes) == (str(seg), 130, None, 20)
    assert end.note is not None and end.note.facts["position"] == pos and f"from byte {pos}" in render(end.note)
    assert end.serving is not None and set(end.serving.served_to.values()) == {"stalls"}
    assert end.serving.follower_in_isr and (end.serving.cut_first_offset, end.serving.cut_last_offset) == (None, None)
    assert end.serving.span_bytes == 564 and end.serving.served_to_once_spanned == {
        "javaConsumer": "fails", "kafkaPython": "fails", "librdkafka": "stalls", "librdkafkaCheckCrcs": "fails",
        "follower": "fails"}


def test_a_torn_active_end_is_recovered_without_a_clean_shutdown(tmp_path):
    """Without the marker the broker recovers the active segment and truncates the torn bytes itself: the plan's
    truncation, no tornEnd."""
    d = _copy(tmp_path)
    (d / ".kafka_cleanshutdown").unlink()
    seg = d / "multi-segment-0" / "00000000000000000120.log"
    pos = _tear(seg)
    mine = [p for p in diagnose([d], now_ms=1_800_000_000_000).problems if p.partition == "multi-segment-0"]
    assert "tornEnd" not in {p.kind for p in mine}
    assert [(p.path, p.first_offset, p.note.facts["position"]) for p in mine if p.kind == "truncation" and p.note] == [
        (str(seg), 130, pos)]


def test_a_hole_carries_its_serving(torn_middle):
    d, seg, pos = torn_middle
    [p] = [p for p in diagnose([d], now_ms=1_800_000_000_000).problems if p.kind == "lostOffsets"
           and p.path == str(seg)]
    assert p.serving is not None and p.serving.damage == "hole"
    assert set(p.serving.served_to.values()) == {"skips"} and p.serving.follower_in_isr
    assert (p.serving.cut_first_offset, p.serving.cut_last_offset) == (75, 149)


def test_segments_unchecked_at_load_follow_the_recovery_point(tmp_path):
    d = _copy(tmp_path)
    with PartitionLog(d / "multi-segment-0", recovery_point=150) as log:
        assert [s.base_offset for s in log.segments_unchecked_at_load(False)] == [0, 44]
    with PartitionLog(d / "multi-segment-0", recovery_point=44) as log:
        assert [s.base_offset for s in log.segments_unchecked_at_load(False)] == [0]
    with PartitionLog(d / "multi-segment-0") as log:  # no checkpoint entry: every segment is recovered
        assert log.segments_unchecked_at_load(False) == []


def test_doctor_words_how_a_hole_and_a_torn_end_are_served(tmp_path, capsys):
    """The command words the serving facts of a hole (every reader skips it) and of a torn end (every reader
    stalls at the log end; the cut removes the torn bytes only)."""
    d = _copy(tmp_path)
    hole = _tear(d / "multi-segment-0" / "00000000000000000044.log")
    torn = _tear(d / "multi-segment-1" / "00000000000000000140.log")
    assert cli.main(["doctor", "--no-progress", str(d)]) == 1
    out = capsys.readouterr().out
    assert "multi-segment-0 offsets 75..119: the broker serves the log with this hole" in out
    assert "  skip its offsets without an error, receiving the records before and after it: the Java consumer" in out
    assert "truncates the log at the hole (offsets 75..149 are lost)" in out
    assert "multi-segment-1 offsets 140..: the broker keeps the torn bytes at the end of its log" in out
    assert "  stall at offset 140 without an error" in out and f"truncates the log at byte {torn}" in out
    assert "removes the 20 torn bytes (no record)" in out and "until the broker has appended " in out
    assert "then the torn batch fails its CRC at offset 140: the Java consumer, kafka-python, librdkafka with " in out
    assert cli.main(["doctor", "--json", "--no-progress", str(d)]) == 1
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    [end] = [x for x in lines if x.get("kind") == "tornEnd"]
    [gap] = [x for x in lines if x.get("code") == "doctor.hole"]
    assert (end["firstOffset"], end["bytes"], end["facts"]["position"]) == (140, 20, torn)
    assert gap["facts"]["position"] == hole and gap["serving"]["servedTo"]["follower"] == "skips"
    assert end["serving"]["damage"] == "tornEnd" and end["serving"]["cut"]["firstOffset"] is None
