"""``kafkalog doctor`` on damaged copies of the real broker fixtures: one test per class of prediction (healthy,
recovery with truncation, will not start with the broker's own message, strays and other dirs), and the CLI's
verdict line and exit codes. ``tests/kafka/test_doctor_broker.py`` checks the predictions against real brokers."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from damage import FIXTURES, NOW, damaged_copy

from kafkalog.facts import render
from kafkalog.storage.engine.repair import plan_repair
from kafkalog.storage.reports.doctor import diagnose
from kafkalog.storage.reports.startup_gate import java_sorted
from kafkalog.tools.cli import main

KRAFT = "kafka-4.3.1-kraft"


def _copy(tmp_path: Path, fixture: str = KRAFT, damages: tuple[str, ...] = (), name: str = "data") -> Path:
    d = tmp_path / name
    damaged_copy(fixture, d, damages)
    return d


def _set_meta(d: Path, **changes: str) -> None:
    mp = d / "meta.properties"
    lines = []
    for line in mp.read_text().splitlines():
        key = line.split("=", 1)[0]
        lines.append(f"{key}={changes[key.replace('.', '_')]}" if key.replace(".", "_") in changes else line)
    mp.write_text("\n".join(lines) + "\n")


def _cli(capsys, *argv: str) -> tuple[int, str]:
    rc = main(["doctor", *argv])
    return rc, capsys.readouterr().out


@pytest.mark.parametrize("fixture", ["kafka-4.3.1-kraft", "kafka-3.9.2-kraft"])
def test_a_cleanly_stopped_fixture_is_healthy(fixture: str) -> None:
    diag = diagnose([FIXTURES / fixture / "data"], now_ms=NOW)
    assert diag.verdict == "healthy" and diag.exit_code == 0, [p.message for p in diag.problems]
    assert render(diag.headline_note()) == "HEALTHY" and diag.bytes_to_scan == 0 and diag.partitions > 10


def test_torn_tail_predicts_recovery_and_the_truncation_of_the_repair_plan(tmp_path: Path) -> None:
    d = _copy(tmp_path, "kafka-4.3.1-kraft-killed", ("torn_tail",))
    diag = diagnose([d], now_ms=NOW)
    assert diag.verdict == "recovery" and diag.exit_code == 1
    assert render(diag.headline_note()).startswith("WILL START, RECOVERING 13 PARTITIONS")
    loss = next(p for p in diag.problems if p.kind == "truncation")
    assert loss.severity == "loss" and loss.partition == "killed-0" and "torn tail" in render(loss.note)
    # the same plan as `repair --dry-run --kafka-exact`: the log end offset after recovery is where the loss begins
    plan = plan_repair([d], now_ms=NOW, strict_indexes=False)
    pp = next(p for p in plan.partitions if p.name == "killed-0")
    assert loss.first_offset == pp.facts["logEndOffset"]
    rec = next(p for p in diag.problems if p.kind == "recovery" and p.partition == "killed-0")
    assert rec.last_offset == pp.facts["logEndOffset"] and rec.bytes == pp.facts["bytesScanned"] > 0
    assert diag.bytes_to_scan == sum(p.facts["bytesScanned"] for p in plan.partitions)
    assert diag.scan_rate_source == "constant" and diag.estimate_seconds > 0
    # nothing changed on disk
    assert not (d / ".kafka_cleanshutdown").exists()


def test_mid_log_crc_below_the_recovery_point_is_not_seen_by_the_broker(tmp_path: Path) -> None:
    d = _copy(tmp_path, damages=("crc_mismatch",))
    diag = diagnose([d], now_ms=NOW)  # clean shutdown: the broker recovers nothing, and serves the bad batch
    assert {p.kind for p in diag.problems} == {"corruptBatch"} and diag.verdict == "recovery"  # (issue 34)


def test_zero_length_partition_metadata_will_not_start(tmp_path: Path) -> None:
    d = _copy(tmp_path, damages=("bad_partition_metadata",))
    diag = diagnose([d], now_ms=NOW)
    assert diag.verdict == "fatal" and diag.exit_code == 4
    f = diag.fatal[0]
    assert f.broker_message == "Error starting LogManager"  # the broker's fatal fault (tests/kafka/test_doctor_broker)
    assert f.path == str(d / "idempotent-1" / "partition.metadata") and f.cause == "java.lang.NullPointerException"
    assert render(diag.headline_note()) == "WILL NOT START: Error starting LogManager"


def test_corrupt_leader_epoch_checkpoint_will_not_start(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    (d / "idempotent-0" / "leader-epoch-checkpoint").write_text("0\n1\nnot an entry\n")
    diag = diagnose([d], now_ms=NOW)
    assert diag.verdict == "fatal"
    # a KafkaStorageException: the log dir goes offline, and with every log dir offline the broker stops
    assert [p.broker_message for p in diag.fatal] == [f"Shutdown broker because all log dirs in {d} have failed"]
    assert diag.fatal[0].cause == f"Error while reading checkpoint file {d / 'idempotent-0' / 'leader-epoch-checkpoint'}"
    # with a second, healthy log dir the broker starts without that dir
    d2 = tmp_path / "data2"
    d2.mkdir()
    shutil.copy(d / "meta.properties", d2 / "meta.properties")
    _set_meta(d2, directory_id="BBBBBBBBBBBBBBBBBBBBBg")
    diag = diagnose([d, d2], now_ms=NOW)
    assert diag.verdict == "recovery" and [p.kind for p in diag.problems if p.severity == "warning"] == ["offlineDir"]


def test_cluster_id_mismatch_between_log_dirs_will_not_start(tmp_path: Path) -> None:
    a = _copy(tmp_path)
    b = tmp_path / "data2"
    b.mkdir()
    shutil.copy(a / "meta.properties", b / "meta.properties")
    _set_meta(b, cluster_id="AAAAAAAAAAAAAAAAAAAAAg", directory_id="BBBBBBBBBBBBBBBBBBBBBg")
    diag = diagnose([a, b], now_ms=NOW)
    assert diag.verdict == "fatal"
    msg = diag.fatal[0].broker_message
    assert re.fullmatch(r"Invalid cluster\.id in: .*/meta\.properties\. Expected \S+, but read \S+", msg), msg
    assert {"9AJLq5-eXw21a432plhqFA", "AAAAAAAAAAAAAAAAAAAAAg"} == set(re.findall(r"Expected (\S+), but read (\S+)",
                                                                                     msg)[0])


def test_node_id_and_missing_meta_properties(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    diag = diagnose([d], now_ms=NOW, node_id=2)
    assert diag.fatal[0].broker_message.startswith(
        f"Stored node id 1 doesn't match previous node id 2 in {d / 'meta.properties'}.")
    (d / "meta.properties").unlink()
    msgs = [p.broker_message for p in diagnose([d], now_ms=NOW).fatal]
    assert msgs[0] == "No readable meta.properties files found."
    assert f"No `meta.properties` found in {d} (have you run `kafka-storage.sh` to format the directory?)" in msgs


def test_a_partition_live_in_two_dirs_will_not_start(tmp_path: Path) -> None:
    a = _copy(tmp_path)
    b = tmp_path / "data2"
    b.mkdir()
    shutil.copy(a / "meta.properties", b / "meta.properties")
    _set_meta(b, directory_id="BBBBBBBBBBBBBBBBBBBBBg")
    shutil.copytree(a / "codec-none-0", b / "codec-none-0")
    diag = diagnose([a, b], now_ms=NOW)
    assert [p.broker_message.split(". ")[0] for p in diag.fatal] == [
        f"Duplicate log directories for codec-none-0 are found in both {b / 'codec-none-0'} and {a / 'codec-none-0'}"]


def test_topic_id_mismatch_and_other_dirs(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    pm = d / "codec-none-0" / "partition.metadata"
    pm.write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAg\n")
    shutil.copytree(d / "codec-gzip-0", d / "codec-gzip-0.0123456789abcdef0123456789abcdef-delete")
    diag = diagnose([d], now_ms=NOW)
    assert diag.verdict == "recovery" and diag.exit_code == 1
    stray = [p for p in diag.problems if p.kind == "topicId"]
    assert len(stray) == 1 and stray[0].partition == "codec-none-0" and "-stray" in render(stray[0].note)
    assert any(p.kind == "dirs" and p.path.endswith("-delete") and p.severity == "info" for p in diag.problems)


def test_legacy_formats_are_reported(tmp_path: Path) -> None:
    diag = diagnose([FIXTURES / "kafka-3.9.2-zk-v1" / "data"], now_ms=NOW)
    legacy = [p for p in diag.problems if p.kind == "legacyFormat"]
    assert legacy and all(p.severity == "info" and p.bytes for p in legacy)
    assert not diag.kraft and diag.verdict == "healthy"


def test_log_dirs_in_java_string_order() -> None:
    assert java_sorted(["/b", "/a/x", "/a"]) == ["/a", "/a/x", "/b"]
    assert java_sorted(["\U0001F600", "\uffff"]) == ["\U0001F600", "\uffff"]  # surrogates sort below U+FFFF


def test_cli_verdicts_and_exit_codes(tmp_path: Path, capsys) -> None:
    rc, out = _cli(capsys, str(FIXTURES / KRAFT / "data"))
    assert rc == 0 and out.splitlines()[0] == "HEALTHY"
    d = _copy(tmp_path, "kafka-4.3.1-kraft-killed", ("torn_tail",))
    rc, out = _cli(capsys, str(d))
    assert rc == 1 and out.splitlines()[0].startswith("WILL START, RECOVERING 13 PARTITIONS")
    assert "SEVERITY" in out and "torn tail" in out
    bad = _copy(tmp_path, damages=("bad_partition_metadata",), name="bad")
    rc, out = _cli(capsys, "--json", str(bad))
    lines = [json.loads(x) for x in out.splitlines()]
    assert rc == 4 and lines[-1]["type"] == "summary" and lines[-1]["verdict"] == "fatal"
    assert lines[0]["severity"] == "fatal" and lines[0]["brokerMessage"] == "Error starting LogManager"
    assert main(["doctor", str(tmp_path / "missing")]) == 1  # the one path contract (issue 34)


def test_hostile_dirs_give_a_verdict_not_a_crash(tmp_path: Path, capsys) -> None:
    import os

    d = _copy(tmp_path)
    (d / "loop1").symlink_to("loop2")
    (d / "loop2").symlink_to("loop1")
    (d / "compacted-0" / "self").symlink_to("self")
    (d / "looped-0").symlink_to("looped-0")
    pm = d / "codec-zstd-0" / "partition.metadata"
    pm.unlink()
    os.mkfifo(pm)
    os.mkdir(os.path.join(os.fsencode(d), b"\xffx-0"))
    os.mkdir(d / "sp ace-0")
    (d / "idempotent-0" / "partition.metadata").write_bytes(b"version: 0\ntopic_id: " + b"x" * 5_000_000)
    for args in ([], ["--json"]):
        rc = main(["doctor", *args, str(d)])
        out = capsys.readouterr()
        assert rc in (0, 1, 4) and "internal error" not in out.err, out.err


@pytest.mark.parametrize(("content", "cause", "offline"), [
    (b"", "java.lang.NullPointerException", False),
    (b"version: 0\n", "java.lang.NullPointerException", False),
    (b"version: 0\ntopic_id: not-a-topic-id\n", "java.lang.IllegalArgumentException: Input string `not-a-topic-id` "
     "decoded as 10 bytes, which is not equal to the expected 16 bytes of a base64-encoded UUID", False),
    (b"version: 0\ntopic_id: " + b"A" * 30, "java.lang.IllegalArgumentException: Input string with prefix "
     "`" + "A" * 24 + "` is too long to be decoded as a base64 UUID", False),
    (b"version: x\ntopic_id: AAAAAAAAAAAAAAAAAAAAAg", "Error while reading partition metadata file", True),
    (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "Error while reading partition metadata file", True),
    (b"\xff\xfe", "Error while reading partition metadata file", True),
])
def test_malformed_partition_metadata_fails_as_the_broker_reads_it(tmp_path: Path, content, cause, offline) -> None:
    # a bad topic id is Uuid.fromString's IllegalArgumentException: the broker stops (tests/kafka/test_doctor_broker)
    d = _copy(tmp_path)
    (d / "codec-none-0" / "partition.metadata").write_bytes(content)
    diag = diagnose([d], now_ms=NOW)
    f = diag.fatal[0]
    assert diag.verdict == "fatal" and f.path.endswith("codec-none-0/partition.metadata") and f.cause.startswith(cause)
    assert f.broker_message == (f"Shutdown broker because all log dirs in {d} have failed" if offline
                                else "Error starting LogManager")


def test_progress_counts_every_partition_step_and_log_dirs_are_planned_together(tmp_path: Path) -> None:
    a = _copy(tmp_path, "kafka-4.3.1-kraft-killed", ("torn_tail",))
    b = tmp_path / "data2"
    b.mkdir()
    shutil.copy(a / "meta.properties", b / "meta.properties")
    _set_meta(b, directory_id="BBBBBBBBBBBBBBBBBBBBBg")
    shutil.move(a / "killed-0", b / "killed-0")
    totals, done = [], []
    one = diagnose([a, b], now_ms=NOW, on_total=totals.append, progress=done.append)
    assert len(totals) == 1 and sum(done) == totals[0] == 2 * one.partitions and one.partitions == 13
    two = diagnose([a, b], now_ms=NOW, workers=2)
    assert [p.to_dict() for p in two.problems] == [p.to_dict() for p in one.problems]
    assert any(p.partition == "killed-0" and p.kind == "truncation" for p in two.problems)
    # the partitions of both log dirs go to the runner in one call: planned in parallel, not one dir after another
    calls = []

    def runner(fn, tasks):
        calls.append({t[0] for t in tasks})
        return [fn(t) for t in tasks]

    plan = plan_repair([a, b], now_ms=NOW, strict_indexes=False, runner=runner)
    assert calls == [{str(a), str(b)}] and [len(d.partitions) for d in plan.data_dirs] == [12, 1]


def test_cli_no_progress(capsys) -> None:
    rc, out = _cli(capsys, "--no-progress", "--workers", "2", str(FIXTURES / KRAFT / "data"))
    assert rc == 0 and out.startswith("HEALTHY")


@pytest.mark.parametrize(("did", "reserved"), [("AAAAAAAAAAAAAAAAAAAAAA", True), ("AAAAAAAAAAAAAAAAAAAAYw", True),
                                               ("AAAAAAAAAAAAAAAAAAAAZA", False), ("AAAAAAAAAAD__________w", True),
                                               ("BBBBBBBBBBBBBBBBBBBBBg", False)])
def test_reserved_directory_ids_will_not_start(tmp_path: Path, did: str, reserved: bool) -> None:
    # DirectoryId.reserved: msb 0 and lsb < 100 as a signed long (ids 0..99 and every negative lsb)
    d = _copy(tmp_path)
    _set_meta(d, directory_id=did)
    msgs = [p.broker_message for p in diagnose([d], now_ms=NOW).fatal]
    assert msgs == ([f"Invalid reserved directory ID {did} found in {d}"] if reserved else []), msgs
