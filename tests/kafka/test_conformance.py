"""``kafkalog conformance`` and :mod:`kafkalog.compat.conformance`.

* The CLI runs every scenario against Kafka 4.3.1 (``--json``): each must pass.
* One scenario through the library on Kafka 3.9.2.
* The comparisons can fail: negative controls on copies of a real fixture data dir (no JVM needed), the
  scenario wrapper turns exceptions into failed results, and the CLI's usage errors exit 2.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.compat import conformance
from kafkalog.compat.conformance import (
    SCENARIOS,
    Check,
    Scenario,
    compare_rebuilt_indexes,
    compare_recovered_dirs,
    describe_difference,
)

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "kafka-4.3.1-kraft" / "data"


def _cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "conformance", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


# ----------------------------------------------------------------------------------------- real Kafka


@pytest.mark.kafka
@pytest.mark.timeout(900)
def test_cli_every_scenario_passes_on_kafka_4(kafka_libs, tmp_path: Path):
    proc = _cli("--kafka", "4.3.1", "--json", "--workdir", str(tmp_path / "work"))
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    failed = [r for r in rows if r["status"] != "pass"]
    assert failed == [], json.dumps(failed, indent=1)[:6000]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["scenario"] for r in rows] == list(SCENARIOS)
    for r in rows:
        assert r["kafkaVersion"] == "4.3.1" and r["mode"] == "kraft" and r["stats"], r
        assert r["problems"] == [] and r["error"] is None
    stats = {r["scenario"]: r["stats"] for r in rows}
    assert stats["kafka-writes-kafkalog-reads"]["records"] == 302
    assert stats["kafka-writes-kafkalog-reads"]["controlBatches"] == 4
    assert stats["index-rebuild"]["segmentsCompared"] >= 6
    assert stats["recovery"]["filesCompared"] > 20


@pytest.mark.kafka
@pytest.mark.timeout(600)
def test_library_scenario_on_kafka_3_9(broker_factory, tmp_path: Path):
    result = conformance.kafka_writes_kafkalog_reads(broker_factory, tmp_path, "3.9.2")
    assert result.error is None and result.problems == [], result.detail
    assert result.passed and result.status == "pass"
    assert result.stats["records"] == 302 and result.stats["batches"] >= 40
    assert result.to_json()["kafkaVersion"] == "3.9.2"
    assert not any(b.running for b in broker_factory.brokers)  # the scenario frees its broker


# ----------------------------------------------------------------------------------------- negative controls


def _copy(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name / "data"
    shutil.copytree(FIXTURE, dst, symlinks=True)
    return dst


def test_compare_recovered_dirs_finds_a_flipped_byte_and_a_missing_file(tmp_path: Path):
    a, b = _copy(tmp_path, "a"), _copy(tmp_path, "b")
    assert compare_recovered_dirs(a, b) == []
    # entry order in checkpoints does not matter; bytes of a segment do
    cp = b / "recovery-point-offset-checkpoint"
    lines = cp.read_text().splitlines(keepends=True)
    cp.write_text("".join(lines[:2] + lines[2:][::-1]))
    log = b / "multi-segment-0" / "00000000000000000000.log"
    raw = bytearray(log.read_bytes())
    raw[100] ^= 0xFF
    log.write_bytes(bytes(raw))
    (b / "codec-lz4-0" / "00000000000000000000.timeindex").unlink()
    problems = compare_recovered_dirs(a, b)
    assert problems == ["only in broker's copy: codec-lz4-0/00000000000000000000.timeindex",
                        f"multi-segment-0/00000000000000000000.log: bytes differ ({len(raw)} vs {len(raw)})"]


def test_compare_rebuilt_indexes_finds_a_changed_index(tmp_path: Path):
    orig = tmp_path / "orig" / "multi-segment-0"
    rebuilt = tmp_path / "rebuilt" / "multi-segment-0"
    shutil.copytree(FIXTURE / "multi-segment-0", orig)
    shutil.copytree(FIXTURE / "multi-segment-0", rebuilt)
    compared, problems = compare_rebuilt_indexes(orig, rebuilt, index_interval_bytes=512)
    assert compared == 2 and problems == []
    ti = rebuilt / "00000000000000000044.timeindex"
    ti.write_bytes(ti.read_bytes()[:-12])
    compared, problems = compare_rebuilt_indexes(orig, rebuilt, index_interval_bytes=512)
    assert compared == 2 and len(problems) == 1 and "00000000000000000044.timeindex" in problems[0], problems


def test_scenario_wrapper_reports_errors_and_differences(tmp_path: Path):
    def body(factory, workdir, version, mode, check: Check) -> None:
        check.equal("records", [1, 2, 3], [1, 2, 4])
        check.count("records", 3)
        raise RuntimeError("broker went away")

    s = Scenario("demo", "nothing", body)
    r = s(lambda *a, **k: None, tmp_path, "4.3.1")  # type: ignore[arg-type]
    assert not r.passed and r.status == "FAIL" and r.error is not None and "RuntimeError: broker went away" in r.error
    assert r.problems == ["records: first difference at #2: 3 != 4 (lengths 3 vs 3)"]
    assert r.stats == {"records": 3} and r.summary() == "nothing (3 records)"
    assert json.loads(json.dumps(r.to_json()))["status"] == "FAIL"
    only_kraft = Scenario("k", "nothing", body, modes=("kraft",), skip_reason="KRaft only")
    skipped = only_kraft(lambda *a, **k: None, tmp_path, "3.9.2", "zk")  # type: ignore[arg-type]
    assert skipped.status == "skip" and skipped.detail == "KRaft only"


def test_describe_difference():
    assert describe_difference([1, 2], [1, 2, 3]) == "lengths 2 vs 3; extra: [3]"
    assert describe_difference({"a": 1, "b": 2}, {"a": 1, "b": 3}) == "['b'] 2 != 3"
    assert describe_difference(b"x", b"y") == "b'x' != b'y'"


@pytest.mark.parametrize("args, message", [
    (["--kafka", "4.x"], "not a Kafka release version"),
    (["--kafka", "4.3.1", "--mode", "zk"], "no ZooKeeper mode"),
    (["--kafka", "4.3.1", "--scenario", "nope"], "unknown scenario 'nope'"),
])
def test_cli_usage_errors(args: list[str], message: str):
    proc = _cli(*args, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr and proc.stdout == ""


def test_cli_list():
    proc = _cli("--list", "--json", timeout=60)
    assert proc.returncode == 0
    assert [json.loads(line)["scenario"] for line in proc.stdout.splitlines()] == list(SCENARIOS)
    human = _cli("--list", timeout=60)
    assert human.returncode == 0 and all(name in human.stdout for name in SCENARIOS)
