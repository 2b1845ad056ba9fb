"""``kafkalog dump --remote-log-metadata-decoder`` / ``--share-group-state-decoder`` on the real broker's
``__remote_log_metadata`` and ``__share_group_state`` segments of ``fixtures/kafka-4.3.1-tiered`` print exactly
what Kafka 4.3.1's DumpLogSegments printed at capture time (``dumplogsegments-<decoder>.txt``, no JVM; the live
comparison is tests/kafka/test_dump_decoders_parity.py), and ``dump --json`` carries the decoded records."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kafkalog.storage.remote.metadata import iter_remote_log_metadata
from kafkalog.tools.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TIERED = FIXTURES / "kafka-4.3.1-tiered"
DECODERS = {"remote-log-metadata": "__remote_log_metadata", "share-group-state": "__share_group_state"}

# the real-Kafka fixtures are committed: a missing one is a failure, not a skip
assert (TIERED / "manifest.json").is_file(), f"missing fixture {TIERED}"


def _segments(topic: str) -> list[str]:
    return sorted(str(p.relative_to(TIERED / "data")) for p in (TIERED / "data").glob(f"{topic}-*/*.log"))


@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_text_is_dump_log_segments(decoder: str, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TIERED / "data")
    assert main(["dump", f"--{decoder}-decoder", *_segments(DECODERS[decoder])]) == 0
    ours = capsys.readouterr().out.splitlines()
    theirs = (TIERED / f"dumplogsegments-{decoder}.txt").read_text().splitlines()
    assert ours == theirs
    assert sum("payload: " in line for line in ours) >= 9


def test_json_carries_the_decoded_records(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TIERED / "data")
    assert main(["dump", "--json", "--share-group-state-decoder", *_segments("__share_group_state")]) == 0
    records = [r for line in capsys.readouterr().out.splitlines() for r in json.loads(line).get("records", ())]
    kinds = {r["decoded"]["key"]["recordType"] for r in records}
    assert kinds == {"ShareSnapshot", "ShareUpdate"}
    states = {b["deliveryStateName"] for r in records for b in r["decoded"]["payload"]["data"]["stateBatches"]}
    assert {"AVAILABLE", "ACKNOWLEDGED", "ARCHIVED"} <= states
    assert main(["dump", "--json", "--remote-log-metadata-decoder", *_segments("__remote_log_metadata")]) == 0
    records = [r for line in capsys.readouterr().out.splitlines() for r in json.loads(line).get("records", ())]
    assert {r["decoded"]["type"] for r in records} == {"RemoteLogSegmentMetadata", "RemoteLogSegmentMetadataUpdate"}


def test_remote_log_metadata_matches_the_remote_store() -> None:
    """Every segment the RLMM says COPY_SEGMENT_FINISHED is in remote/ under LocalTieredStorage's layout."""
    finished = {(r["remoteLogSegmentId"]["topicIdPartition"]["name"], r["remoteLogSegmentId"]["topicIdPartition"]["partition"],
                 r["remoteLogSegmentId"]["id"])
                for _, _, _, r in iter_remote_log_metadata([TIERED / "data"])
                if r["type"] == "RemoteLogSegmentMetadataUpdate" and r["remoteLogSegmentState"] == "COPY_SEGMENT_FINISHED"}
    stored = set()
    for p in (TIERED / "remote" / "kafka-tiered-storage").glob("*/*.log"):
        topic, _, partition = p.parent.name[:-23].rpartition("-")
        stored.add((topic, int(partition), p.stem.split("-", 1)[1]))
    assert finished == stored and len(stored) >= 6
    assert os.path.isdir(TIERED / "data" / "tiered-0")
