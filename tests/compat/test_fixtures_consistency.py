"""The captured fixtures agree with themselves (no JVM): what the producers sent (``expected.jsonl``) is what
Kafka's DumpLogSegments saw on disk (``dumplogsegments.jsonl``), batches tile their files, and the fixtures
stay small. A failure here means a broken capture (or parser), not a kafkalog bug."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/manifest.json"))
INTERNAL = ("__consumer_offsets", "__transaction_state", "__cluster_metadata", "__remote_log_metadata",
            "__share_group_state")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _topic_partition(file: str) -> tuple[str, int]:
    """Of ``<topic>-<partition>/<file>`` (under ``data/``) or, for a tiered fixture's uploaded segments,
    ``remote/kafka-tiered-storage/<topic>-<partition>-<topicId>/<file>`` (LocalTieredStorage's layout)."""
    parts = file.split("/")
    name = parts[2][:-23] if parts[0] == "remote" else parts[0]  # "-" + the 22-character topic id
    topic, _, partition = name.rpartition("-")
    return topic, int(partition)


def test_fixtures_exist_and_are_listed() -> None:
    assert len(NAMES) >= 5, "run: python -m kafkalog.compat.capture --out fixtures/"
    readme = (FIXTURES / "README.md").read_text()
    for name in NAMES:
        assert f"[`{name}`]" in readme
        for f in ("CAPTURE.md", "expected.jsonl", "dumplogsegments.jsonl", "data/meta.properties"):
            assert (FIXTURES / name / f).is_file(), f"{name}/{f}"


@pytest.mark.parametrize("name", NAMES)
def test_fixture_is_small(name: str) -> None:
    files = [p for p in (FIXTURES / name).rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 1536 * 1024
    assert max(p.stat().st_size for p in files) < 512 * 1024


@pytest.mark.parametrize("name", NAMES)
def test_batches_tile_their_files_and_are_valid(name: str) -> None:
    by_file: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for b in _jsonl(FIXTURES / name / "dumplogsegments.jsonl"):
        by_file[b["file"]].append(b)
    data = FIXTURES / name / "data"
    for file, batches in by_file.items():
        assert all(b["isValid"] for b in batches), file
        assert [b["position"] for b in batches] == [sum(x["size"] for x in batches[:i]) for i in range(len(batches))]
        path = FIXTURES / name / file if file.startswith("remote/") else data / file
        assert sum(b["size"] for b in batches) == path.stat().st_size, file
        offsets = [b["lastOffset"] for b in batches]
        assert offsets == sorted(offsets), file


@pytest.mark.parametrize("name", NAMES)
def test_disk_matches_what_the_producers_sent(name: str) -> None:
    manifest = json.loads((FIXTURES / name / "manifest.json").read_text())
    on_disk: dict[tuple[str, int, int], tuple[dict[str, Any], dict[str, Any]]] = {}
    for b in _jsonl(FIXTURES / name / "dumplogsegments.jsonl"):
        topic, partition = _topic_partition(b["file"])
        if topic.startswith(INTERNAL) or b["isControl"]:
            continue
        for r in b["records"]:
            on_disk[(topic, partition, r["offset"])] = (b, r)
    expected = _jsonl(FIXTURES / name / "expected.jsonl")
    compacted = {t for t, d in manifest["topics"].items() if "compact" in d["config"].get("cleanup.policy", "")}
    latest: dict[tuple[str, int, str], dict[str, Any]] = {}
    found: set[tuple[str, int, int]] = set()
    for e in expected:
        pos = (e["topic"], e["partition"], e["offset"])
        if e["topic"] in compacted:
            if e["transaction"] != "aborted" and e["key"] is not None:
                latest[(e["topic"], e["partition"], json.dumps(e["key"]))] = e
            if pos not in on_disk:
                continue  # cleaned away
        assert pos in on_disk, f"{pos} missing on disk"
        batch, r = on_disk.pop(pos)
        found.add(pos)
        assert (r["key"], r["value"]) == (e["key"], e["value"]), pos
        if batch["magic"] >= 2:
            assert [h for h, _ in r["headers"]] == [h for h, _ in e["headers"]], pos
        if batch["magic"] == 0:
            assert r["timestamp"] == -1
        elif batch["timestampType"] == "LogAppendTime":
            assert r["timestamp"] == e["ackTimestamp"], pos
        else:
            assert r["timestamp"] == e["timestamp"], pos
    assert found
    assert not on_disk, f"records on disk nobody produced: {sorted(on_disk)[:5]}"
    # compaction keeps the latest value of every key (tombstones may still be inside their delete horizon)
    for e in latest.values():
        if e["value"] is not None:
            assert (e["topic"], e["partition"], e["offset"]) in found, f"latest value of {e['key']} cleaned away"
    if manifest["message_format"] >= 2 and manifest["shutdown"] == "clean" and "transactions" in manifest["topics"]:
        markers = [
            r["control"].split()[1]
            for b in _jsonl(FIXTURES / name / "dumplogsegments.jsonl")
            if b["isControl"] and b["file"].startswith("transactions-")
            for r in b["records"]
        ]
        assert markers.count("COMMIT") >= 2 and markers.count("ABORT") >= 3
