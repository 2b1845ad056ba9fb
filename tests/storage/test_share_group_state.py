"""``__share_group_state`` decoding (kafkalog.storage.decoders.share_group_state) on bytes built from the
schemas (ShareSnapshotKey/Value, ShareUpdateKey/Value of Kafka 4.3.1) with the coordinator record framing; the
real records are checked against DumpLogSegments in test_dump_decoders_fixtures.py."""

from __future__ import annotations

import struct
import uuid

from kafkalog.storage.decoders import decode_share_group_state_record, format_share_group_state_record
from kafkalog.storage.decoders import share_group_state as sgs

TOPIC = uuid.UUID(int=1)


def _key(record_type: int) -> bytes:
    spec = sgs.SHARE_RECORD_TYPES[record_type]
    return struct.pack(">h", record_type) + spec.key.write({"groupId": "g", "topicId": TOPIC, "partition": 3}, 0)


def _value(record_type: int, data: dict) -> bytes:
    return struct.pack(">h", 0) + sgs.SHARE_RECORD_TYPES[record_type].value.write(data, 0)


BATCHES = [{"firstOffset": 0, "lastOffset": 4, "deliveryState": 2, "deliveryCount": 1},
           {"firstOffset": 5, "lastOffset": 7, "deliveryState": 4, "deliveryCount": 3}]


def test_snapshot_and_update() -> None:
    snap = _value(0, {"snapshotEpoch": 1, "stateEpoch": 2, "leaderEpoch": 0, "startOffset": 0,
                      "createTimestamp": 10, "writeTimestamp": 11, "stateBatches": BATCHES})
    d = decode_share_group_state_record(_key(0), snap)
    assert d["key"] == {"type": "0", "data": {"groupId": "g", "topicId": "AAAAAAAAAAAAAAAAAAAAAQ", "partition": 3},
                        "recordType": "ShareSnapshot"}
    assert [b["deliveryStateName"] for b in d["payload"]["data"]["stateBatches"]] == ["ACKNOWLEDGED", "ARCHIVED"]
    # deliveryCompleteCount is a tagged field (KIP-1226): printed only when set
    assert format_share_group_state_record(_key(0), snap, 0) == (
        'key: {"type":"0","data":{"groupId":"g","topicId":"AAAAAAAAAAAAAAAAAAAAAQ","partition":3}} payload: '
        '{"version":"0","data":{"snapshotEpoch":1,"stateEpoch":2,"leaderEpoch":0,"startOffset":0,'
        '"createTimestamp":10,"writeTimestamp":11,"stateBatches":[{"firstOffset":0,"lastOffset":4,"deliveryState":2,'
        '"deliveryCount":1},{"firstOffset":5,"lastOffset":7,"deliveryState":4,"deliveryCount":3}]}}')
    upd = _value(1, {"snapshotEpoch": 1, "leaderEpoch": 0, "startOffset": 5, "deliveryCompleteCount": 3,
                     "stateBatches": BATCHES[1:]})
    d = decode_share_group_state_record(_key(1), upd)
    assert d["key"]["recordType"] == "ShareUpdate" and d["payload"]["data"]["deliveryCompleteCount"] == 3


def test_tombstone_unknown_type_and_bad_version() -> None:
    assert decode_share_group_state_record(_key(1), None)["payload"] is None
    assert format_share_group_state_record(_key(1), None, 0).endswith("payload: <DELETE>")
    assert format_share_group_state_record(struct.pack(">h", 7), b"", 4) == (
        "key: Unknown record type 7 at offset 4, skipping.")
    bad = struct.pack(">h", 5) + b"\x00" * 8
    assert format_share_group_state_record(_key(0), bad, 9) == (
        "key: Error at offset 9, skipping. Found an unknown record version 5 for 0 type")
