"""The internal-topic decoders on the real brokers' data dirs in ``fixtures/`` (no JVM): every record of
``__consumer_offsets``, ``__transaction_state`` and ``__cluster_metadata`` (log and KRaft checkpoints) decodes,
control records print as in the fixture's ``dumplogsegments.jsonl``, and replaying the metadata log finds the
topics, ids, configs and groups the capture created (``manifest.json``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.storage.decoders import (
    MetadataState,
    decode_control_record,
    decode_metadata_record,
    decode_offsets_record,
    decode_transaction_record,
    format_control_record,
    format_metadata_record,
    format_offsets_record,
    format_transaction_record,
    parse_metadata_record,
    topic_configs,
    topic_ids,
)
from kafkalog.storage.records import iter_batches

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ALL = sorted(p for p in FIXTURES.glob("kafka-*") if (p / "manifest.json").is_file())
KRAFT = [p for p in ALL if json.loads((p / "manifest.json").read_text())["mode"] == "kraft"]
# fixtures whose KRaft metadata log is in the data dir (a separate metadata.log.dir is not captured)
METADATA_LOG = [p for p in KRAFT if (p / "data" / "__cluster_metadata-0").is_dir()]

# the real-Kafka fixtures are committed (fixtures/README.md): missing ones are a failure, not a skip
assert ALL, f"no captured fixtures under {FIXTURES}"


def _dialect(fx: Path) -> str:
    return "3.9" if json.loads((fx / "manifest.json").read_text())["kafka_version"].startswith("3.") else "4.3"


def _files(fx: Path, prefix: str) -> list[Path]:
    files = sorted(p for d in (fx / "data").glob(prefix + "*") for p in d.iterdir()
                   if p.suffix in (".log", ".checkpoint") and p.stat().st_size > 0)
    bootstrap = fx / "data" / "bootstrap.checkpoint"
    if prefix == "__cluster_metadata-" and bootstrap.is_file():
        files.append(bootstrap)
    return files


def _has_transactions(fx: Path) -> bool:
    return "transactions" in json.loads((fx / "manifest.json").read_text())["topics"]


def _records(path: Path) -> Iterator[tuple]:
    for b in iter_batches(path.read_bytes()):
        for r in b.records():
            yield b, r


@pytest.mark.parametrize("fx", ALL, ids=[p.name for p in ALL])
def test_every_internal_record_decodes(fx: Path):
    dialect = _dialect(fx)
    counts = {"offsets": 0, "txn": 0, "meta": 0, "control": 0}
    for path in _files(fx, "__consumer_offsets-"):
        for b, r in _records(path):
            if b.is_control:
                decode_control_record(r.key, r.value)
                counts["control"] += 1
                continue
            rec = decode_offsets_record(r.key, r.value)
            assert not rec["key"].get("unknownRecordType"), rec
            assert not format_offsets_record(r.key, r.value, r.offset, dialect=dialect).startswith("key: Error")
            counts["offsets"] += 1
    for path in _files(fx, "__transaction_state-"):
        for b, r in _records(path):
            assert not b.is_control
            rec = decode_transaction_record(r.key, r.value)
            assert rec["payload"] is None or rec["payload"]["state"] is not None
            format_transaction_record(r.key, r.value, r.offset, dialect=dialect)
            counts["txn"] += 1
    for path in _files(fx, "__cluster_metadata-"):
        for b, r in _records(path):
            if b.is_control:
                decode_control_record(r.key, r.value)
                counts["control"] += 1
            else:
                assert decode_metadata_record(r.value)["type"] != "UnknownRecord"
                assert not format_metadata_record(r.value, r.offset).startswith("payload: Error")
                counts["meta"] += 1
    assert counts["offsets"] > 0
    assert counts["txn"] > 0 or not _has_transactions(fx)
    assert (counts["meta"] > 0) == (fx in KRAFT)


@pytest.mark.parametrize("fx", ALL, ids=[p.name for p in ALL])
def test_control_records_match_dump_log_segments(fx: Path):
    dialect = _dialect(fx)
    checked = 0
    for line in (fx / "dumplogsegments.jsonl").read_text().splitlines():
        batch = json.loads(line)
        if not batch.get("isControl") or "records" not in batch:
            continue
        ours = [format_control_record(r.key, r.value, dialect=dialect)
                for b in iter_batches((fx / "data" / batch["file"]).read_bytes())
                if b.base_offset == batch["baseOffset"] for r in b.records()]
        assert ours == [r["control"] for r in batch["records"]], batch["file"]
        checked += 1
    assert checked > 0 or not _has_transactions(fx)


@pytest.mark.parametrize("fx", METADATA_LOG, ids=[p.name for p in METADATA_LOG])
def test_metadata_replay_finds_the_captured_topics(fx: Path):
    manifest = json.loads((fx / "manifest.json").read_text())
    logs = [p for p in _files(fx, "__cluster_metadata-") if p.suffix == ".log"]
    values = [r.value for p in logs for b, r in _records(p) if not b.is_control]
    configs = topic_configs(values)
    ids = topic_ids(values)
    for topic, spec in manifest["topics"].items():
        assert configs[topic] == spec["config"], topic
        for p in range(spec["partitions"]):
            meta = (fx / "data" / f"{topic}-{p}" / "partition.metadata").read_text()
            assert f"topic_id: {ids[topic]}" in meta
    # a KRaft snapshot plus the log after it replays to the same state as the whole log
    checkpoints = [p for p in _files(fx, "__cluster_metadata-") if p.suffix == ".checkpoint" and p.name[:20].isdigit()]
    for cp in checkpoints:
        end = int(cp.name.split("-")[0])
        state = MetadataState()
        for b, r in _records(cp):
            if not b.is_control:
                state.replay(parse_metadata_record(r.value))
        state.replay_all(r.value for p in logs for b, r in _records(p) if not b.is_control and r.offset >= end)
        assert state.topic_ids == ids and state.topic_configs() == configs, cp.name


@pytest.mark.parametrize("fx", ALL, ids=[p.name for p in ALL])
def test_consumer_groups_are_in_the_offsets_topic(fx: Path):
    manifest = json.loads((fx / "manifest.json").read_text())
    committed: set[tuple[str, str]] = set()
    groups: dict[str, str] = {}
    for path in _files(fx, "__consumer_offsets-"):
        for b, r in _records(path):
            if b.is_control:
                continue
            k = decode_offsets_record(r.key, r.value)["key"]
            data = k["data"]
            if k["type"] in ("0", "1"):
                committed.add((data["group"], data["topic"]))
            elif k["type"] == "2":
                groups[data["group"]] = "classic"
            elif k["type"] == "3":
                groups[data["groupId"]] = "consumer"
    for g in manifest["groups"]:
        if g["protocol"] == "share":
            continue  # a share group's progress is in __share_group_state (test_dump_decoders_fixtures.py)
        assert (g["group"], g["topic"]) in committed
        assert groups.get(g["group"]) == g["protocol"]
