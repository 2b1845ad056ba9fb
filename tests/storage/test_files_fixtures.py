"""Real broker-written data dirs (``fixtures/<name>/data``, captured by ``kafkalog.compat.capture``).

For every fixture:

* every checkpoint / index / snapshot / metadata file round-trips byte-exactly through its module;
* ``verify_data_dir(deep=True)`` finds no error;
* the offset and time indexes equal Kafka's rebuild rules where the append boundaries are known: v2 data written
  by a single leader (one batch per append) gives the append-time rule and — for closed segments — the
  recovery-time rule too (docs/semantics.md#index-interval-rule). Legacy (v0/v1) uncompressed segments, whose multi-message appends are
  unknown, are only validated. Active segments of a killed broker are compared on their valid entries.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkalog.storage.files.checkpoints import DATA_DIR_CHECKPOINTS, OffsetCheckpoint
from kafkalog.storage.files.clean_shutdown import CLEAN_SHUTDOWN_FILE, CleanShutdownMarker
from kafkalog.storage.files.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpoint
from kafkalog.storage.files.meta_properties import META_PROPERTIES_FILE, MetaProperties
from kafkalog.storage.files.offset_index import OffsetIndex
from kafkalog.storage.files.partition_metadata import PARTITION_METADATA_FILE, PartitionMetadata
from kafkalog.storage.files.producer_snapshot import ProducerSnapshot
from kafkalog.storage.files.time_index import TimeIndex
from kafkalog.storage.files.txn_index import TransactionIndex
from kafkalog.storage.log.datadir import DataDir
from kafkalog.storage.log.segment import recover_segment, replay_appends
from kafkalog.storage.log.topic_partition import parse_topic_partition_name
from kafkalog.storage.reports.verify import verify_data_dir

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/data") if p.is_dir()) if FIXTURES.is_dir() else []


def manifest(name: str) -> dict:
    p = FIXTURES / name / "manifest.json"
    return json.loads(p.read_text()) if p.exists() else {}


def round_trip(path: Path) -> bytes | None:
    """What the owning module writes back for ``path``; None for files that are not ours to check."""
    raw = path.read_bytes()
    name = path.name
    if name in DATA_DIR_CHECKPOINTS:
        return OffsetCheckpoint.from_bytes(raw, path).to_bytes()
    if name == LEADER_EPOCH_CHECKPOINT:
        return LeaderEpochCheckpoint.from_bytes(raw, path).to_bytes()
    if name == PARTITION_METADATA_FILE:
        return PartitionMetadata.from_bytes(raw, path).to_bytes()
    if name == META_PROPERTIES_FILE:
        return MetaProperties.from_bytes(raw, path).to_bytes()
    if name == CLEAN_SHUTDOWN_FILE:
        return CleanShutdownMarker.from_bytes(raw, path).to_bytes()
    if name.endswith(".snapshot"):
        return ProducerSnapshot.from_bytes(raw, path).to_bytes()
    if name.endswith(".index"):
        return OffsetIndex.from_bytes(raw, 0).to_bytes()
    if name.endswith(".timeindex"):
        return TimeIndex.from_bytes(raw, 0).to_bytes()
    if name.endswith(".txnindex"):
        return TransactionIndex.from_bytes(raw, 0).to_bytes()
    return None


@pytest.mark.parametrize("name", NAMES)
def test_fixture_files_round_trip(name):
    checked = 0
    for path in sorted((FIXTURES / name / "data").rglob("*")):
        if not path.is_file():
            continue
        out = round_trip(path)
        if out is not None:
            assert out == path.read_bytes(), path
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("name", NAMES)
def test_fixture_verifies_clean(name):
    errors = [f for f in verify_data_dir(FIXTURES / name / "data", deep=True) if f.severity == "error"]
    assert errors == []


def interval_for(m: dict, topic: str) -> int:
    cfg = m.get("topics", {}).get(topic, {}).get("config", {})
    broker = m.get("server_properties", {})
    return int(cfg.get("index.interval.bytes", broker.get("log.index.interval.bytes", 4096)))


@pytest.mark.parametrize("name", NAMES)
def test_fixture_indexes_match_kafka_rules(name):
    m = manifest(name)
    killed = m.get("shutdown") == "SIGKILL"
    compared = 0
    with DataDir(FIXTURES / name / "data") as dd:
        for log in dd.partitions():
            topic = parse_topic_partition_name(log.path.name).topic
            interval = interval_for(m, topic)
            for i, seg in enumerate(log.segments):
                if not seg.has_offset_index or not seg.has_time_index:
                    continue
                active = i == len(log.segments) - 1
                magics = {b.magic for b in seg.iter_batches()}
                if magics - {2}:
                    continue  # legacy multi-message appends: boundaries unknown, validated by verify
                app = replay_appends(seg.buf, seg.base_offset, index_interval_bytes=interval,
                                             close=not (killed and active))
                idx, tidx = seg.offset_index, seg.time_index
                if idx.is_trimmed and tidx.is_trimmed:
                    assert seg.index_path.read_bytes() == app.offset_index.to_bytes(), seg.index_path
                    assert seg.time_index_path.read_bytes() == app.time_index.to_bytes(), seg.time_index_path
                else:  # preallocated indexes of a running/killed broker: the entries, then zeros
                    assert idx.entries_bytes() == app.offset_index.to_bytes(), seg.index_path
                    assert tidx.entries_bytes() == app.time_index.to_bytes(), seg.time_index_path
                    assert idx.padding_is_zero() and tidx.padding_is_zero()
                if not active:
                    rec = recover_segment(seg.buf, seg.base_offset, index_interval_bytes=interval, on_overflow="stop")
                    assert rec.stop_reason is None and rec.valid_bytes == seg.size
                    assert seg.index_path.read_bytes() == rec.offset_index.to_bytes(), seg.index_path
                    assert seg.time_index_path.read_bytes() == rec.time_index.to_bytes(), seg.time_index_path
                compared += 1
                seg.close()
    assert compared > 0 or m.get("message_format", 2) < 2


def compacted(m: dict, topic: str) -> bool:
    if topic in ("__consumer_offsets", "__transaction_state"):
        return True
    cfg = m.get("topics", {}).get(topic, {}).get("config", {})
    return "compact" in cfg.get("cleanup.policy", m.get("server_properties", {}).get("log.cleanup.policy", "delete"))


@pytest.mark.parametrize("name", NAMES)
def test_fixture_txn_indexes_and_epochs_match_recovery(name):
    """The aborted-transaction index and the leader epochs that recovery derives (with producer state replayed
    from snapshots / earlier segments) equal what the broker wrote."""
    m = manifest(name)
    with DataDir(FIXTURES / name / "data") as dd:
        for log in dd.partitions():
            topic = parse_topic_partition_name(log.path.name).topic
            if compacted(m, topic):
                continue  # the cleaner rewrites .txnindex from its own state (docs/semantics.md#log-cleaner): not a recovery result
            epochs: list[tuple[int, int]] = []
            for seg in log.segments:
                r = log.rebuild_segment_indexes(seg, index_interval_bytes=interval_for(m, topic))
                stored = seg.txn_index.all_aborted_txns() if seg.has_txn_index else []
                assert r.txn_index.all_aborted_txns() == stored, seg.txn_index_path
                epochs += [e for e in r.leader_epochs if not epochs or e[0] > epochs[-1][0]]
                seg.close()
            ckpt = [(e.epoch, e.start_offset) for e in log.leader_epochs]
            # the checkpoint may start later (truncated from the start) but agrees on every epoch it keeps; a tiered
            # partition's cache starts at its log start offset (the checkpoint's), below the local segments
            starts = (log.log_start_offset, log.log_start_offset_checkpoint)
            for epoch, start in ckpt:
                found = dict(epochs).get(epoch)
                assert found is None or found == start or start in starts, (log.path, epoch)
