"""Differential tests against Apache Kafka itself (marker ``kafka``):

* kafkalog writes a segment with every batch kind (v2 x every codec, idempotent, transactional, COMMIT/ABORT
  markers, a KRaft control record, a delete-horizon batch, a retained empty batch, v0/v1 messages and
  wrappers x codecs); Kafka's own DumpLogSegments reads it -- every batch header and every record must be what
  ``kafkalog dump`` reports;
* a real broker writes (producers with every codec, idempotent and transactional, commit and abort, a
  LogAppendTime topic); kafkalog reads the broker's segments: identical to DumpLogSegments, every CRC valid and
  every batch rebuilt byte-exactly from its parsed fields.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from kafkalog.storage.records import build_batch, build_end_txn_marker, build_legacy, iter_batches, rebuild
from kafkalog.storage.records.builder import build_empty_batch_header
from kafkalog.storage.records.control import LEADER_CHANGE, control_key
from kafkalog.storage.records.dump import dump_log

pytestmark = pytest.mark.kafka

VERSION = "4.3.1"
# LeaderChangeMessage v0 (flexible): version 0, leaderId 1, voters [1], grantingVoters [], no tagged fields
LEADER_CHANGE_V0 = bytes.fromhex("0000 00000001 02 00000001 00 01 00")
TS = 1_700_000_000_000
BATCH_KEYS = ("baseOffset", "lastOffset", "count", "position", "size", "magic", "codec", "crc", "isValid",
              "timestampType", "maxTimestamp", "producerId", "producerEpoch", "baseSequence",
              "partitionLeaderEpoch", "isTransactional", "isControl", "deleteHorizonMs")


def _b64(b):
    return None if b is None else base64.b64encode(b).decode()


def _ours(path: Path) -> list[dict]:
    out = []
    for d in dump_log(path, deep=True):
        assert "event" not in d and "error" not in d, d
        b = {k: d[k] for k in BATCH_KEYS}
        b["records"] = [(r["offset"], r["timestamp"], _b64(r["key"]) if not d["isControl"] else None,
                         _b64(r["value"]) if not d["isControl"] else None, [h for h, _ in r["headers"]])
                        for r in d["records"]]
        out.append(b)
    return out


def _kafkas(path: Path) -> list[dict]:
    from kafkalog.compat.tools import dump_log_segments
    run = dump_log_segments(VERSION, [path], deep=True, print_data=True)
    out = []
    for d in run.batches():
        b = {k: d[k] for k in BATCH_KEYS}
        b["records"] = [(r["offset"], r["timestamp"], r.get("key"), r.get("value"),
                         [h[0] for h in r.get("headers") or []]) for r in d.get("records", [])]
        out.append(b)
    return out


def _compare(path: Path) -> None:
    ours, kafkas = _ours(path), _kafkas(path)
    assert len(ours) == len(kafkas)
    for a, b in zip(ours, kafkas, strict=True):
        if a["magic"] < 2 and b["baseOffset"] is None:
            b["baseOffset"], b["count"] = a["baseOffset"], a["count"]  # not printed for wrappers
        assert a == b


def _v2_segment() -> bytes:
    parts = []
    off = 0
    for codec in (0, 1, 2, 3, 4):
        recs = [(off + i, TS + 7 * i, b"k%d" % i if i % 3 else None, (b"value %d " % i) * i if i % 5 else None,
                 [("h1", b"x"), ("h2", None)] if i % 2 else []) for i in range(40)]
        parts.append(build_batch(recs, codec=codec, partition_leader_epoch=codec, producer_id=1000 + codec,
                                 producer_epoch=codec, base_sequence=0, is_transactional=codec % 2 == 1))
        off += 40
    parts.append(build_end_txn_marker(offset=off, producer_id=1001, producer_epoch=1, coordinator_epoch=3,
                                      commit=True, timestamp=TS + 1))
    parts.append(build_end_txn_marker(offset=off + 1, producer_id=1003, producer_epoch=3, coordinator_epoch=4,
                                      commit=False, timestamp=TS + 2))
    parts.append(build_batch([(off + 2, TS, control_key(LEADER_CHANGE), LEADER_CHANGE_V0)],
                             is_control=True, partition_leader_epoch=5))
    parts.append(build_batch([(off + 3, TS, b"gone", None), (off + 5, TS + 9, b"kept", b"v")],
                             delete_horizon_ms=TS + 86_400_000, timestamp_type=0))
    (src,) = iter_batches(build_batch([(off + 6, TS, b"a", b"b"), (off + 8, TS + 1, b"c", b"d")], producer_id=9,
                                      producer_epoch=0, base_sequence=5, timestamp_type=1, log_append_time=TS + 3))
    parts.append(build_empty_batch_header(src))
    return b"".join(parts)


def _legacy_segment() -> bytes:
    parts = []
    off = 0
    for magic in (0, 1):
        for codec in (0, 1, 2, 3):
            recs = [(off + i, TS + i, b"k%d" % i if i % 2 else None, b"v%d" % i) for i in range(4)]
            parts.append(build_legacy(recs, magic=magic, codec=codec))
            off += 4
    parts.append(build_legacy([(off, TS, None, b"lat"), (off + 1, TS, b"k", b"lat2")], magic=1, codec=1,
                              timestamp_type=1, log_append_time=TS + 99))
    return b"".join(parts)


@pytest.mark.timeout(600)
def test_kafka_dump_log_segments_reads_what_kafkalog_writes(tmp_path):
    for name, data in (("00000000000000000000.log", _v2_segment()), ("00000000000000000100.log", _legacy_segment())):
        p = tmp_path / name
        p.write_bytes(data)
        _compare(p)


@pytest.mark.timeout(900)
def test_kafkalog_reads_what_the_broker_writes(tmp_path):
    from kafkalog.compat.broker import make_broker
    from kafkalog.compat.clients import Record, produce

    records = [Record(value=(b"value-%d " % i) * (i % 13) if i % 17 else None, key=b"key-%d" % (i % 50)
                      if i % 7 or i % 17 == 0 else None, headers=(("h", b"x"),) if i % 3 == 0 else (), timestamp=TS + i)
               for i in range(300)]
    topics = []
    with make_broker(VERSION, data_dir=tmp_path / "data") as broker:
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            t = f"codec-{codec}"
            broker.create_topic(t)
            produce(broker.bootstrap_servers, t, records, compression=codec, flush_every=37, idempotent=True)
            topics.append(t)
        broker.create_topic("txn")
        produce(broker.bootstrap_servers, "txn", records[:50], compression="lz4", flush_every=20,
                transactional_id="tx-1", transaction="commit")
        produce(broker.bootstrap_servers, "txn", records[50:90], flush_every=20, transactional_id="tx-1",
                transaction="abort")
        topics.append("txn")
        broker.create_topic("append-time", config={"message.timestamp.type": "LogAppendTime",
                                                   "compression.type": "gzip"})
        produce(broker.bootstrap_servers, "append-time", records[:80], compression="snappy", flush_every=25)
        topics.append("append-time")
        broker.stop()
    logs = [p for t in topics for p in sorted((tmp_path / "data" / f"{t}-0").glob("*.log"))]
    assert logs
    seen_control = 0
    for log in logs:
        data = log.read_bytes()
        batches = list(iter_batches(data))
        assert batches, log
        for b in batches:
            assert b.is_valid(), (log, b)
            assert rebuild(b) == bytes(b.buf), (log, b)  # byte-exact from the parsed fields
            seen_control += b.is_control
        _compare(log)
    assert seen_control >= 2  # the commit and abort markers


def _ascii_segment() -> bytes:
    """Printable keys/values (DumpLogSegments' StringDecoder and kafkalog's utf8 rendering agree on them)."""
    parts = [build_batch([(i, TS + i, b"key-%d" % i if i % 2 else None, b"value %d" % i, [("h", b"1")])
                          for i in range(5)], codec=3, producer_id=3, producer_epoch=0, base_sequence=0)]
    parts.append(build_end_txn_marker(offset=5, producer_id=3, producer_epoch=0, coordinator_epoch=1,
                                      commit=False, timestamp=TS))
    parts.append(build_batch([(6, TS, control_key(LEADER_CHANGE), LEADER_CHANGE_V0)], is_control=True))
    parts.append(build_legacy([(7, TS, b"k", b"legacy"), (8, TS, None, b"v")], magic=1, codec=2))
    parts.append(build_legacy([(9, -1, b"k0", b"v0")], magic=0))
    return b"".join(parts)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("flags", [["--deep-iteration"], ["--print-data-log"], []])
def test_human_output_equals_dump_log_segments_stdout(tmp_path, capsys, flags):
    """``kafkalog dump`` prints the very lines kafka-dump-log.sh prints (v2, markers, KRaft control, v0/v1)."""
    from kafkalog.compat.tools import dump_class, run_tool
    from kafkalog.tools.cli import main

    files = [(tmp_path / "00000000000000000000.log").absolute()]
    files[0].write_bytes(_ascii_segment())
    if "--print-data-log" not in flags:  # binary keys/values: only without data
        files.append((tmp_path / "00000000000000000100.log").absolute())
        files[1].write_bytes(_v2_segment() + _legacy_segment())
    proc = run_tool(VERSION, dump_class(VERSION), [*flags, "--files", ",".join(map(str, files))])
    assert proc.returncode == 0, proc.stderr
    ours = {"--deep-iteration": ["--deep"], "--print-data-log": ["--print-data-log"]}
    rc = main(["dump", *[o for f in flags for o in ours[f]], *map(str, files)])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.splitlines() == proc.stdout.splitlines()
