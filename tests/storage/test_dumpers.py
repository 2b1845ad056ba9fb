"""storage/reports/dump/: DumpLogSegments-style dumps of .index/.timeindex/.txnindex/.snapshot, the text and
metadata files, KRaft snapshots and the internal-topic record decoders."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from builders import indexed_segment

from kafkalog.storage.files.checkpoints import write_offset_checkpoint
from kafkalog.storage.files.leader_epoch import EpochEntry, write_leader_epoch_checkpoint
from kafkalog.storage.files.meta_properties import MetaProperties, write_meta_properties
from kafkalog.storage.files.offset_index import OffsetIndex
from kafkalog.storage.files.partition_metadata import write_partition_metadata
from kafkalog.storage.files.producer_snapshot import ProducerSnapshot, ProducerSnapshotEntry
from kafkalog.storage.files.time_index import TimeIndex
from kafkalog.storage.files.txn_index import AbortedTxn, TransactionIndex
from kafkalog.storage.records.dump import dump_log
from kafkalog.storage.reports.dump import (
    FileDump,
    decrement_sequence,
    dump_file,
    dump_kind,
    dump_kraft_snapshot,
    dump_offset_index,
    dump_producer_snapshot,
    dump_time_index,
    dump_txn_index,
    record_decoder,
)
from kafkalog.storage.reports.dump.snapshot import INT32_MAX

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
BASE = 100


def test_offset_index_dump_matches_the_index(tmp_path):
    _, batches = indexed_segment(tmp_path)
    path = tmp_path / f"{BASE:020d}.index"
    idx = OffsetIndex.open(path)
    expected = [{"offset": e.offset, "position": e.position} for e in idx]
    idx.close()
    assert len(expected) >= 3
    d = dump_offset_index(path)
    assert d.ok and d.entries == expected
    assert d.lines == [f"offset: {e['offset']} position: {e['position']}" for e in expected]
    assert {(e["position"], e["offset"]) for e in expected} <= {(p, last) for p, last, _ in batches}
    only = dump_offset_index(path, verify_index_only=True)
    assert only.ok and only.entries == [] and only.lines == []
    sane = dump_offset_index(path, index_sanity_check=True)
    assert sane.passed_sanity_check is True and sane.lines == [f"{path} passed sanity check."]


def test_offset_index_mismatch_and_entry_past_the_log(tmp_path):
    log, batches = indexed_segment(tmp_path)
    path = tmp_path / f"{BASE:020d}.index"
    pos1, last1, _ = batches[1]
    pos2, last2, _ = batches[2]
    # entry 2 carries the last offset of a two-batch append (a follower write): a DumpLogSegments mismatch
    path.write_bytes(OffsetIndex.from_entries(BASE, [(last1, pos1), (last2 + 3, pos2), (last2 + 90, len(log) + 10)])
                     .to_bytes(trim=True))
    d = dump_offset_index(path)
    assert d.index_mismatches == [(last2 + 3, last2)]
    assert len(d.problems) == 1 and d.problems[0]["position"] == 16 and d.problems[0]["code"] == "dump.entryBeyondLog"
    assert d.problems[0]["facts"] == {"entry": 2, "offset": last2 + 90, "filePosition": len(log) + 10,
                                      "log": f"{BASE:020d}.log", "logBytes": len(log)}
    assert not d.ok and len(d.entries) == 3
    assert d.report_lines() == [f"Mismatches in :{path.absolute()}", f"  Index offset: {last2 + 3}, log offset: {last2}"]
    events = [o["event"] for o in d.json_objects() if "event" in o]
    assert events == ["info", "indexMismatch", "error"]


def test_offset_index_batch_larger_than_max_message_size(tmp_path):
    _, batches = indexed_segment(tmp_path)
    d = dump_offset_index(tmp_path / f"{BASE:020d}.index", max_message_size=50)
    assert d.problems and d.problems[0]["code"] == "dump.entryNoBatch" and d.problems[0]["facts"]["maxMessageSize"] == 50


def test_offset_index_sanity_check_failure_and_zero_padding(tmp_path):
    _, batches = indexed_segment(tmp_path)
    path = tmp_path / f"{BASE:020d}.index"
    path.write_bytes(struct.pack(">ii", -5, 0))  # last offset below the base offset
    d = dump_offset_index(path, index_sanity_check=True)
    assert d.passed_sanity_check is False and not d.ok and d.problems[0]["position"] == 0
    # an untrimmed index: real entries, then zero slots (crash / active segment) — the zero tail ends the dump
    pos, last, _ = batches[3]
    path.write_bytes(OffsetIndex.from_entries(BASE, [(last, pos)]).to_bytes(size=8 * 50))
    d = dump_offset_index(path)
    assert d.ok and d.entries == [{"offset": last, "position": pos}] and d.info["slots"] == 50
    # preallocated with no entry yet: empty, not a phantom (baseOffset, 0) entry
    path.write_bytes(bytes(4096))
    d = dump_offset_index(path)
    assert d.empty and d.lines == [f"{path} is empty."] and d.ok
    path.write_bytes(b"")
    assert dump_offset_index(path).empty


def test_offset_index_without_log(tmp_path):
    path = tmp_path / f"{BASE:020d}.index"
    path.write_bytes(OffsetIndex.from_entries(BASE, [(BASE + 5, 100)]).to_bytes(trim=True))
    d = dump_offset_index(path)
    assert not d.ok and d.problems[0] == {"position": None, "code": "dump.companionMissing",
                                          "facts": {"log": f"{BASE:020d}.log"}}
    assert d.entries == [{"offset": BASE + 5, "position": 100}]


def test_time_index_dump_and_checks(tmp_path):
    _, batches = indexed_segment(tmp_path)
    path = tmp_path / f"{BASE:020d}.timeindex"
    good = dump_time_index(path)
    assert good.ok and len(good.entries) >= 3
    assert good.lines == [f"timestamp: {e['timestamp']} offset: {e['offset']}" for e in good.entries]
    assert good.entries[-1] == {"timestamp": batches[-1][2], "offset": batches[-1][1]}  # final entry of a closed segment
    (_, l3, t3), (_, l5, t5), (_, l7, t7) = batches[3], batches[5], batches[7]
    entries = [(t3 + 1, l3), (t5, l5 - 1), (t7, l7)]
    raw = b"".join(struct.pack(">qi", t, o - BASE) for t, o in entries) + struct.pack(">qi", t3, l7 + 3 - BASE)
    path.write_bytes(raw)
    d = dump_time_index(path)
    assert d.timestamp_mismatches == [(t3 + 1, t3), (t3, batches[8][2])]  # l7 + 3 is batch 8's last offset
    assert d.offsets_not_found == [(l5 - 1, l5)]
    assert d.out_of_order_timestamps == [(t3, t7)]
    assert not d.ok and [e["timestamp"] for e in d.entries] == [t3 + 1, t5, t7, t3]
    assert d.report_lines()[0] == f"Found timestamp mismatch in :{path.absolute()}"
    assert "The following indexed offsets are not found in the log." in d.report_lines()
    # beyond the last batch: not found with log offset -1
    path.write_bytes(struct.pack(">qi", 5_000, 10_000))
    assert dump_time_index(path).offsets_not_found == [(BASE + 10_000, -1)]
    # sanity check: a zero tail after real entries makes the last timestamp 0 < the first
    path.write_bytes(TimeIndex.from_entries(BASE, [(t3, l3)]).to_bytes(size=12 * 10))
    assert dump_time_index(path, index_sanity_check=True).passed_sanity_check is False
    assert dump_time_index(path).entries == [{"timestamp": t3, "offset": l3}]


def test_txn_index_dump(tmp_path):
    path = tmp_path / f"{BASE:020d}.txnindex"
    txns = [AbortedTxn(7, 90, 104, 105), AbortedTxn(8, 101, 110, 95)]
    path.write_bytes(TransactionIndex.from_entries(BASE, txns).to_bytes() + b"\0" * 5)
    d = dump_txn_index(path)
    assert d.ok and d.info["trailingBytes"] == 5
    assert d.lines == ["version: 0 producerId: 7 firstOffset: 90 lastOffset: 104 lastStableOffset: 105",
                       "version: 0 producerId: 8 firstOffset: 101 lastOffset: 110 lastStableOffset: 95"]
    assert d.entries[1] == {"version": 0, "producerId": 8, "firstOffset": 101, "lastOffset": 110,
                            "lastStableOffset": 95}
    path.write_bytes(b"\x01" + TransactionIndex.from_entries(BASE, txns).to_bytes()[1:])  # version byte 1
    d = dump_txn_index(path)
    assert not d.ok and d.problems[0]["position"] == 0 and "version" in d.problems[0]["reason"]


def test_decrement_sequence_wraps():
    assert decrement_sequence(10, 3) == 7
    assert decrement_sequence(2, 5) == INT32_MAX - 3 + 1


def test_producer_snapshot_dump(tmp_path):
    path = tmp_path / f"{BASE:020d}.snapshot"
    snap = ProducerSnapshot([
        ProducerSnapshotEntry(5, 1, 9, 120, 3, 1234, 0, -1),
        ProducerSnapshotEntry(6, 0, 1, 130, 4, 1300, 2, 125),  # sequence wraps
        ProducerSnapshotEntry(7, 2, -1, -1, 0, 1400, 3, 140),  # no batch metadata, ongoing transaction
    ])
    path.write_bytes(snap.to_bytes())
    d = dump_producer_snapshot(path)
    assert d.ok and d.info["producers"] == 3
    assert d.lines == [
        "producerId: 5 producerEpoch: 1 coordinatorEpoch: 0 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1234 firstSequence: 6 lastSequence: 9 lastOffset: 120 offsetDelta: 3 timestamp: 1234",
        "producerId: 6 producerEpoch: 0 coordinatorEpoch: 2 currentTxnFirstOffset: OptionalLong[125] "
        f"lastTimestamp: 1300 firstSequence: {INT32_MAX - 2} lastSequence: 1 lastOffset: 130 offsetDelta: 4 "
        "timestamp: 1300",
        "producerId: 7 producerEpoch: 2 coordinatorEpoch: 3 currentTxnFirstOffset: OptionalLong[140] "
        "lastTimestamp: 1400 ",
    ]
    assert d.entries[2] == {"producerId": 7, "producerEpoch": 2, "coordinatorEpoch": 3,
                            "currentTxnFirstOffset": 140, "lastTimestamp": 1400}
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1
    path.write_bytes(bytes(raw))
    d = dump_producer_snapshot(path)
    assert not d.ok and d.entries == [] and d.problems[0]["position"] == 2 and "CRC" in d.problems[0]["reason"]


def test_text_file_dumps(tmp_path):
    write_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint", {("orders", 3): 40, ("a.b", 0): 7})
    write_leader_epoch_checkpoint(tmp_path / "leader-epoch-checkpoint", [EpochEntry(0, 0), EpochEntry(3, 50)])
    write_partition_metadata(tmp_path / "partition.metadata", "l5y0MjLvQdypLcP9XmR7bw")
    write_meta_properties(tmp_path / "meta.properties",
                          MetaProperties.new(version=1, cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=4, now=0))
    (tmp_path / ".kafka_cleanshutdown").write_bytes(b'{"version":0,"brokerEpoch":5}')
    (tmp_path / "cleaner-offset-checkpoint").write_bytes(b"0\n2\norders 3 7\n")  # count says 2, one entry

    d = dump_file(tmp_path / "recovery-point-offset-checkpoint")
    assert d.kind == "offsetCheckpoint" and d.ok
    assert sorted(json.dumps(e) for e in d.entries) == sorted(
        json.dumps(e) for e in [{"topic": "orders", "partition": 3, "offset": 40},
                                {"topic": "a.b", "partition": 0, "offset": 7}])
    assert "topic: orders partition: 3 offset: 40" in d.lines
    d = dump_file(tmp_path / "leader-epoch-checkpoint")
    assert d.entries == [{"epoch": 0, "startOffset": 0}, {"epoch": 3, "startOffset": 50}]
    d = dump_file(tmp_path / "partition.metadata")
    assert d.entries[0]["topicId"] == "l5y0MjLvQdypLcP9XmR7bw" and d.lines == ["version: 0 topicId: l5y0MjLvQdypLcP9XmR7bw"]
    d = dump_file(tmp_path / "meta.properties")
    assert {"key": "node.id", "value": "4"} in d.entries and d.info["nodeId"] == 4 and d.info["version"] == 1
    d = dump_file(tmp_path / ".kafka_cleanshutdown")
    assert d.entries == [{"version": 0, "brokerEpoch": 5, "json": True}]
    d = dump_file(tmp_path / "cleaner-offset-checkpoint")
    assert not d.ok and d.problems and d.entries == []


@pytest.mark.parametrize("name,kind", [
    ("00000000000000000000.log", "log"), ("00000000000000000000.index", "index"),
    ("00000000000000000000.timeindex", "timeindex"), ("00000000000000000000.txnindex", "txnindex"),
    ("00000000000000000042.snapshot", "snapshot"), ("00000000000000000032-0000000001.checkpoint", "kraftSnapshot"),
    ("bootstrap.checkpoint", "kraftSnapshot"), ("log-start-offset-checkpoint", "offsetCheckpoint"),
    ("leader-epoch-checkpoint", "leaderEpochCheckpoint"), ("partition.metadata", "partitionMetadata"),
    ("meta.properties", "metaProperties"), (".kafka_cleanshutdown", "cleanShutdown"), ("quorum-state", "quorumState"),
    ("00000000000000000000.log.deleted", None), ("README", None),
])
def test_dump_kind(name, kind):
    assert dump_kind(Path("/x") / name) == kind


def test_dump_file_rejects_logs(tmp_path):
    with pytest.raises(ValueError):
        dump_file(tmp_path / "00000000000000000000.log")


def test_file_dump_json_objects_carry_file_and_kind():
    d = FileDump("f.index", "index", entries=[{"offset": 1, "position": 2}], empty=False)
    assert list(d.json_objects()) == [{"file": "f.index", "kind": "index", "offset": 1, "position": 2}]


# ------------------------------------------------------------------------- real files: decoders, KRaft snapshots

FIXTURE_NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/data")) if FIXTURES.is_dir() else []
KRAFT = [n for n in FIXTURE_NAMES if "kraft" in n and "killed" not in n]


def test_fixtures_are_present():
    assert KRAFT, f"no KRaft fixture under {FIXTURES} (python -m kafkalog.compat.capture --out fixtures/)"


@pytest.mark.parametrize("name", KRAFT)
def test_kraft_snapshot_dump_decodes_records(name):
    snaps = sorted((FIXTURES / name / "data" / "__cluster_metadata-0").glob("*.checkpoint"))
    assert snaps
    batches = list(dump_kraft_snapshot(snaps[-1]))
    assert batches and all(b.get("event") is None for b in batches)
    first, last = batches[0], batches[-1]
    assert first["isControl"] and first["records"][0]["control"]["type"] == "SNAPSHOT_HEADER"
    assert first["records"][0]["controlText"].startswith("SnapshotHeader {")
    assert last["isControl"] and last["records"][-1]["control"]["type"] == "SNAPSHOT_FOOTER"
    types = {r["decoded"]["type"] for b in batches if not b["isControl"] for r in b["records"]}
    assert {"FEATURE_LEVEL_RECORD", "TOPIC_RECORD", "PARTITION_RECORD"} <= types
    texts = [r["decodedText"] for b in batches if not b["isControl"] for r in b["records"]]
    assert all(t.startswith('payload: {"type":"') for t in texts)


@pytest.mark.parametrize("name", KRAFT)
def test_offsets_and_transaction_decoders_on_fixture_logs(name):
    data = FIXTURES / name / "data"
    dec = record_decoder("offsets")
    records = [r for p in sorted(data.glob("__consumer_offsets-*/*.log"))
               for b in dump_log(p, deep=True, record_decoder=dec) if not b.get("isControl")
               for r in b.get("records", ())]
    assert records and all("decodeError" not in r for r in records)
    assert any(r["decoded"]["key"]["data"].get("group") for r in records)
    assert all(r["decodedText"].startswith("key: {") for r in records)
    dec = record_decoder("transaction")
    records = [r for p in sorted(data.glob("__transaction_state-*/*.log"))
               for b in dump_log(p, deep=True, record_decoder=dec) if not b.get("isControl")
               for r in b.get("records", ())]
    assert records and all("decodeError" not in r for r in records)
    assert any(r["decoded"]["payload"] and r["decoded"]["payload"]["state"] for r in records)
    with pytest.raises(ValueError):
        record_decoder("nope")
