"""``kafkalog verify`` and the library under it (:func:`verify_paths`): data dirs, partition dirs and single
files, serial and in a process pool, JSON Lines and the human table, exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import TOPIC_IDS, multi_partition_data_dir

from kafkalog.facts import render
from kafkalog.storage.files.partition_metadata import write_partition_metadata
from kafkalog.storage.log.paths import PathError
from kafkalog.storage.reports.verify import classify_path, verify_paths
from kafkalog.tools.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FIXTURE_DATA = sorted(FIXTURES.glob("*/data")) if FIXTURES.is_dir() else []


def corrupt(path: Path, at: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_clean_data_dir_serial_and_parallel_agree(tmp_path):
    root = multi_partition_data_dir(tmp_path / "data")
    serial = verify_paths([root], workers=1, deep=True)
    parallel = verify_paths([root], workers=2, deep=True)
    assert serial.ok and serial.errors == 0 and serial.warnings == 0
    assert serial.findings == parallel.findings
    s = parallel.stats
    assert (s.data_dirs, s.partitions, s.segments) == (1, 5, 5)
    assert s.bytes == sum(p.stat().st_size for p in root.glob("*/*.log"))


def test_progress_callbacks_cover_all_bytes(tmp_path):
    root = multi_partition_data_dir(tmp_path / "data")
    totals, advances = [], []
    verify_paths([root], workers=2, on_total=totals.append, on_advance=advances.append)
    assert totals == [sum(p.stat().st_size for p in root.glob("*/*.log"))] and sum(advances) == totals[0]


def test_crc_error_json_and_exit_code(tmp_path, capsys):
    root = multi_partition_data_dir(tmp_path / "data")
    log = root / "orders-2" / "00000000000000000000.log"
    corrupt(log, 300)
    rc = main(["verify", "--json", "--workers", "2", str(root)])
    out = capsys.readouterr()
    assert rc == 1
    findings = [json.loads(line) for line in out.out.splitlines()]
    assert all(set(f) == {"file", "position", "kind", "severity", "message"} for f in findings)
    crc = [f for f in findings if f["kind"] == "crc"]
    assert len(crc) == 1 and crc[0]["file"] == str(log) and crc[0]["severity"] == "error"
    assert crc[0]["position"] == max(p for p in range(0, 301, 1) if p in _batch_starts(log))
    assert "FAILED" in out.err and "1 errors" in out.err


def test_kafka_exact_is_deep(tmp_path, capsys):
    """``verify --kafka-exact`` (the name issue 31's certify gives it) is ``--deep``: the same findings."""
    root = multi_partition_data_dir(tmp_path / "data")
    corrupt(root / "orders-2" / "00000000000000000000.log", 300)
    outs = []
    for flag in ("--deep", "--kafka-exact"):
        assert main(["verify", "--json", "--no-progress", flag, str(root)]) == 1
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and '"kind":"crc"' in outs[0]


def _batch_starts(log: Path) -> set[int]:
    from kafkalog.storage.records import iter_batches

    return {b.position for b in iter_batches(log.read_bytes())}


def test_human_table_and_summary(tmp_path, capsys):
    root = multi_partition_data_dir(tmp_path / "data")
    assert main(["verify", str(root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK: 5 partitions, 5 segments") and "0 errors, 0 warnings" in out
    (root / "orders-1" / "00000000000000000000.index").write_bytes(b"\0\0\0\x05\0\0\0\x07")  # not a batch start
    assert main(["verify", "--no-progress", str(root)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["SEVERITY", "KIND", "FILE", "POSITION", "MESSAGE"]
    assert out[1].split()[:2] == ["error", "index"] and "not the start of a batch" in out[1]
    assert out[-1].startswith("FAILED")


def test_info_findings_only_with_flag(tmp_path, capsys):
    root = multi_partition_data_dir(tmp_path / "data")
    (root / "orders-0" / "00000000000000000000.log.deleted").write_bytes(b"")
    assert main(["verify", "--json", str(root)]) == 0
    assert capsys.readouterr().out == ""
    assert main(["verify", "--json", "--info", str(root)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(f["kind"], f["severity"]) for f in lines] == [("leftover", "info")]


def test_partition_dirs_and_single_files(tmp_path):
    root = multi_partition_data_dir(tmp_path / "data")
    part = root / "orders-3"
    assert classify_path(root) == "dataDir" and classify_path(part) == "partition"
    assert classify_path(part / "00000000000000000000.log") == "file"
    files = [part / "00000000000000000000.index", part / "00000000000000000026.snapshot",
             root / "meta.properties", root / "recovery-point-offset-checkpoint", part / "leader-epoch-checkpoint"]
    r = verify_paths([part, *files], workers=1)
    assert r.ok and r.findings == [] and (r.stats.partitions, r.stats.files, r.stats.segments) == (1, 5, 2)
    corrupt(part / "00000000000000000026.snapshot", 3)  # stored CRC
    (root / "recovery-point-offset-checkpoint").write_bytes(b"0\n1\norders x 5\n")
    r = verify_paths(files, workers=1)
    assert [(f.kind, Path(f.file).name) for f in r.findings] == [
        ("snapshot", "00000000000000000026.snapshot"), ("checkpoint", "recovery-point-offset-checkpoint")]
    assert r.errors == 2 and r.findings[0].position == 2
    with pytest.raises(PathError, match="missing.log: no such file or directory"):  # the one path contract
        verify_paths(files + [tmp_path / "missing.log"], workers=1)


def test_data_dirs_of_one_broker_vs_independent(tmp_path, capsys):
    a = multi_partition_data_dir(tmp_path / "a")
    b = multi_partition_data_dir(tmp_path / "b")  # same partitions: one broker would refuse to start
    r = verify_paths([a, b], workers=2)
    assert not r.ok and any("is also live" in render(f) for f in r.findings)
    assert verify_paths([a, b], workers=2, independent=True).ok
    assert main(["verify", "--independent", str(a), str(b)]) == 0
    capsys.readouterr()


def test_usage_errors(capsys):
    with pytest.raises(SystemExit) as e:
        main(["verify", "--workers", "0", "x"])
    assert e.value.code == 2
    capsys.readouterr()


def test_fixtures_are_present():
    assert FIXTURE_DATA, f"no fixture data dirs under {FIXTURES}"


@pytest.mark.parametrize("data", FIXTURE_DATA, ids=[p.parent.name for p in FIXTURE_DATA])
def test_real_broker_dirs_have_no_errors(data, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(data, copy, symlinks=True)
    r = verify_paths([copy], deep=True, workers=2)
    assert [str(f) for f in r.findings if f.severity == "error"] == []
    assert r.stats.partitions == sum(1 for p in copy.iterdir() if p.is_dir() and p.name != "remote-log-index-cache")
    assert r.stats.bytes > 0


def test_topic_id_disagreement_across_partitions(tmp_path):
    root = multi_partition_data_dir(tmp_path / "data")
    write_partition_metadata(root / "orders-2" / "partition.metadata", TOPIC_IDS[2])
    for workers in (1, 2):
        r = verify_paths([root], workers=workers)
        bad = [f for f in r.findings if f.severity == "error"]
        assert len(bad) == 1 and bad[0].kind == "metadata" and TOPIC_IDS[2] in render(bad[0])


def test_os_errors_and_bugs_are_one_line(tmp_path, capsys, monkeypatch):
    from kafkalog.tools import cli
    from kafkalog.tools import reindex as reindex_cmd

    def disk_full(args):
        raise OSError(28, "No space left on device", str(tmp_path / "x.log"))

    monkeypatch.setattr(reindex_cmd, "run", disk_full)
    assert cli.main(["reindex", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == f"kafkalog reindex: error: {tmp_path / 'x.log'}: No space left on device\n"

    def bug(args):
        raise AttributeError("'NoneType' object has no attribute 'x'")

    monkeypatch.setattr(reindex_cmd, "run", bug)
    assert cli.main(["reindex", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert err.startswith("kafkalog reindex: internal error") and "AttributeError" in err and err.count("\n") == 1
    monkeypatch.setenv("KAFKALOG_DEBUG", "1")
    with pytest.raises(AttributeError):
        cli.main(["reindex", str(tmp_path)])
