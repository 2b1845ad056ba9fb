"""Parsing DumpLogSegments output (no JVM): line formats of 3.x and 4.x, legacy messages, control records,
decoders, index dumps and the stderr reports."""

from __future__ import annotations

from kafkalog.compat.tools import BATCH_KEYS, dumpable, kafkalog_batches, parse_dump_output

V2 = (
    "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 0 lastSequence: 2 producerId: 7 producerEpoch: 1 "
    "partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 0 "
    "CreateTime: 1750000002000 size: 120 magic: 2 compresscodec: zstd crc: 4294967295 isvalid: true"
)


def test_v2_batch_and_records_base64() -> None:
    out = "\n".join([
        "Dumping /d/t-0/00000000000000000000.log",
        "Log starting offset: 0",
        V2,
        "| offset: 0 CreateTime: 1750000000000 keySize: 2 valueSize: 3 sequence: 0 headerKeys: [a,null-value] key: azA= payload: djAw",
        "| offset: 1 CreateTime: 1750000001000 keySize: -1 valueSize: 0 sequence: 1 headerKeys: [] payload: ",
        "| offset: 2 CreateTime: 1750000002000 keySize: 0 valueSize: -1 sequence: 2 headerKeys: [] key: ",
    ])  # fmt: skip
    run = parse_dump_output(out)
    (f,) = run.files
    assert f.kind == "log" and f.header == "Log starting offset: 0" and not f.unparsed
    (b,) = f.batches
    assert list(b)[: len(BATCH_KEYS)] == list(BATCH_KEYS)
    assert (b["baseOffset"], b["lastOffset"], b["count"], b["codec"], b["crc"], b["deleteHorizonMs"]) == (0, 2, 3, "zstd", 4294967295, None)
    assert b["isTransactional"] is True and b["isControl"] is False and b["producerId"] == 7
    r0, r1, r2 = b["records"]
    assert (r0["key"], r0["value"], r0["headers"], r0["sequence"]) == ("azA=", "djAw", [["a", None], ["null-value", None]], 0)
    assert (r1["key"], r1["value"]) == (None, "")  # null key, empty value
    assert (r2["key"], r2["value"]) == ("", None)  # empty key, tombstone
    assert kafkalog_batches(run)[0]["records"][0] == {
        "offset": 0, "timestamp": 1750000000000, "key": "azA=", "value": "djAw", "headers": [["a", None], ["null-value", None]],
    }  # fmt: skip


def test_delete_horizon_and_control_records_of_both_versions() -> None:
    out = "\n".join([
        "Dumping /d/t-0/00000000000000000010.log",
        "Log starting offset: 10",
        V2.replace("deleteHorizonMs: OptionalLong.empty", "deleteHorizonMs: OptionalLong[1750086400000]")
          .replace("isControl: false", "isControl: true"),
        "| offset: 10 CreateTime: 1750000000000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 3",
        "| offset: 11 CreateTime: 1750000000000 keySize: 4 valueSize: 19 sequence: -1 headerKeys: [] controlType: LEADER_CHANGE(2)",
        "| offset: 12 CreateTime: 1750000000000 keySize: 4 valueSize: 19 sequence: -1 headerKeys: [] LeaderChange: "
        '{"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}',
    ])  # fmt: skip
    (b,) = parse_dump_output(out).batches()
    assert b["deleteHorizonMs"] == 1750086400000 and b["isControl"]
    controls = [r["control"] for r in b["records"]]
    assert controls[0] == "endTxnMarker: ABORT coordinatorEpoch: 3"
    assert controls[1] == "controlType: LEADER_CHANGE(2)"
    assert controls[2].startswith("LeaderChange: {") and controls[2].endswith("}]}")
    assert all(r["key"] is None and r["value"] is None for r in b["records"])


def test_legacy_wrappers_get_base_offset_and_count_from_inner_messages() -> None:
    out = "\n".join([
        "Dumping /d/t-0/00000000000000000000.log",
        "Log starting offset: 0",
        "offset: 0 position: 0 NoTimestampType: -1 size: 40 magic: 0 compresscodec: none crc: 12 isvalid: true",
        "| offset: 0 NoTimestampType: -1 keySize: -1 valueSize: 6 isValid: true crc: 12} payload: djAwMDAw",
        "offset: 3 position: 40 CreateTime: 1750000003000 size: 90 magic: 1 compresscodec: lz4 crc: 99 isvalid: true",
        "| offset: 1 CreateTime: 1750000001000 keySize: 1 valueSize: 1 isValid: true crc: 5} key: aw== payload: dg==",
        "| offset: 2 CreateTime: 1750000002000 keySize: 1 valueSize: 1 isValid: true crc: 6} key: aw== payload: dg==",
        "| offset: 3 CreateTime: 1750000003000 keySize: 1 valueSize: 1 isValid: false crc: 7} key: aw== payload: dg==",
        "Found 5 invalid bytes at the end of 00000000000000000000.log",
    ])  # fmt: skip
    (f,) = parse_dump_output(out).files
    plain, wrapper = f.batches
    assert (plain["baseOffset"], plain["lastOffset"], plain["count"], plain["magic"], plain["timestampType"]) == (0, 0, 1, 0, "NoTimestampType")
    assert plain["records"][0]["crc"] == 12 and plain["records"][0]["key"] is None
    assert (wrapper["baseOffset"], wrapper["lastOffset"], wrapper["count"], wrapper["codec"]) == (1, 3, 3, "lz4")
    assert wrapper["producerId"] == -1 and wrapper["deleteHorizonMs"] is None
    assert [r["isValid"] for r in wrapper["records"]] == [True, True, False]
    assert f.invalid_bytes == 5


def test_shallow_legacy_wrapper_has_unknown_base_offset() -> None:
    out = "Dumping /d/a.log\nLog starting offset: 0\noffset: 9 position: 0 CreateTime: 5 size: 90 magic: 1 compresscodec: gzip crc: 1 isvalid: true"
    (b,) = parse_dump_output(out).batches()
    assert b["baseOffset"] is None and b["count"] is None and b["lastOffset"] == 9


def test_decoder_output_keeps_text() -> None:
    out = "\n".join([
        "Dumping /d/__consumer_offsets-0/00000000000000000000.log",
        "Log starting offset: 0",
        V2,
        '| offset: 0 CreateTime: 1 keySize: 10 valueSize: 20 sequence: -1 headerKeys: [] key: {"type":"2","data":{"group":"g 1"}} payload: {"version":"3","data":{"protocolType":"consumer"}}',
        '| offset: 1 CreateTime: 1 keySize: 10 valueSize: -1 sequence: -1 headerKeys: [] key: {"type":"1","data":{}} payload: <DELETE>',
    ])  # fmt: skip
    r0, r1 = parse_dump_output(out, base64_data=False).batches()[0]["records"]
    assert r0["keyText"] == '{"type":"2","data":{"group":"g 1"}}'
    assert r0["valueText"] == '{"version":"3","data":{"protocolType":"consumer"}}'
    assert r1["valueText"] == "<DELETE>" and r0["key"] is None


def test_indexes_snapshots_and_stderr_reports() -> None:
    out = "\n".join([
        "Dumping /d/t-0/00000000000000000000.index",
        "offset: 5 position: 4100",
        "offset: 9 position: 8300",
        "Dumping /d/t-0/00000000000000000000.timeindex",
        "timestamp: 1750000005000 offset: 5",
        "Dumping /d/t-0/00000000000000000009.index",
        "/d/t-0/00000000000000000009.index is empty.",
        "Dumping /d/t-0/00000000000000000009.timeindex",
        "/d/t-0/00000000000000000009.timeindex passed sanity check.",
        "Dumping /d/t-0/00000000000000000000.txnindex",
        "version: 0 producerId: 4 firstOffset: 6 lastOffset: 10 lastStableOffset: 11",
        "Dumping /d/t-0/00000000000000000035.snapshot",
        "producerId: 2 producerEpoch: 1 coordinatorEpoch: 0 currentTxnFirstOffset: OptionalLong.empty lastTimestamp: 17 "
        "firstSequence: 0 lastSequence: 3 lastOffset: 9 offsetDelta: 3 timestamp: 17",
        "Dumping /d/t-0/leader-epoch-checkpoint.bak",
    ])  # fmt: skip
    err = "\n".join([
        "Ignoring unknown file /d/t-0/leader-epoch-checkpoint.bak",
        "Mismatches in :/d/t-0/00000000000000000000.index",
        "  Index offset: 9, log offset: 8",
        "  Index offset: 5, log offset: 4",
        "Non-consecutive offsets in /d/t-0/00000000000000000000.log",
        "  7 is followed by 9",
        "Found timestamp mismatch in :/d/t-0/00000000000000000000.timeindex",
        "  Index timestamp: 10, log timestamp: 9",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 12, found log offset: -1",
    ])  # fmt: skip
    run = parse_dump_output(out, err)
    idx, tidx, empty, sane, txn, snap, unknown = run.files
    assert idx.entries == [{"offset": 5, "position": 4100}, {"offset": 9, "position": 8300}]
    assert idx.index_mismatches == [(5, 4), (9, 8)]  # back in discovery order
    assert tidx.entries == [{"timestamp": 1750000005000, "offset": 5}] and tidx.timestamp_mismatches == [(10, 9)]
    assert empty.empty and not empty.entries and sane.passed_sanity_check
    assert txn.entries == [{"version": 0, "producerId": 4, "firstOffset": 6, "lastOffset": 10, "lastStableOffset": 11}]
    assert snap.entries[0]["currentTxnFirstOffset"] is None and snap.entries[0]["offsetDelta"] == 3
    assert unknown.kind == "unknown"
    assert run.timeindex_not_found == [(12, -1)]
    assert all(not f.unparsed for f in run.files)


def test_dumpable_names() -> None:
    assert dumpable("00000000000000000000.log") and dumpable("bootstrap.checkpoint") and dumpable("x/1.txnindex")
    assert not dumpable("quorum-state") and not dumpable("partition.metadata") and not dumpable("a.log.deleted")
