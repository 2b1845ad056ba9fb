"""``__remote_log_metadata`` decoding (kafkalog.storage.decoders.remote_log_metadata): Kafka's
``RemoteLogMetadataSerde`` framing and the four record types of storage/src/main/resources/message/*.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.storage.decoders.remote_log_metadata import (
    decode_remote_log_metadata,
    format_remote_log_metadata,
    parse_remote_log_metadata,
)
from kafkalog.storage.errors import CorruptRecordError, KafkaLogError
from kafkalog.storage.remote.metadata import iter_remote_log_metadata
from tests.builders import (
    RLM_SEGMENT_ID,
    TOPIC_ID,
    TS,
    remote_log_metadata_partition,
    remote_log_metadata_values,
)

TIP = {"name": "tiered", "id": TOPIC_ID, "partition": 0}
EPOCHS = [{"leaderEpoch": 0, "offset": 0}, {"leaderEpoch": 2, "offset": 7}]


def test_frame_is_the_metadata_serde_frame() -> None:
    """``BytesApiMessageSerde``: uvarint frame version 1, uvarint api key, uvarint version, then the message;
    a flexible v0 ``RemotePartitionDeleteMetadataRecord`` written field by field."""
    value = (bytes([1, 2, 0]) + bytes([3]) + b"tp" + bytes.fromhex("00" * 15 + "01") + (5).to_bytes(4, "big")
             + bytes([0]) + (7).to_bytes(4, "big") + (99).to_bytes(8, "big") + bytes([2]) + bytes([0]))
    assert decode_remote_log_metadata(None, value) == {
        "type": "RemotePartitionDeleteMetadata", "version": 0,
        "topicIdPartition": {"name": "tp", "id": "AAAAAAAAAAAAAAAAAAAAAQ", "partition": 5},
        "brokerId": 7, "eventTimestampMs": 99, "remotePartitionDeleteState": "DELETE_PARTITION_FINISHED"}


def test_every_record_type() -> None:
    seg, upd, dele, snap = (decode_remote_log_metadata(None, v) for v in remote_log_metadata_values())
    sid = {"topicIdPartition": TIP, "id": RLM_SEGMENT_ID}
    assert seg == {"type": "RemoteLogSegmentMetadata", "version": 0, "remoteLogSegmentId": sid, "startOffset": 0,
                   "endOffset": 9, "brokerId": 1, "maxTimestampMs": TS + 9, "eventTimestampMs": TS + 100,
                   "segmentLeaderEpochs": EPOCHS, "segmentSizeInBytes": 1234, "customMetadata": None,
                   "remoteLogSegmentState": "COPY_SEGMENT_STARTED", "txnIndexEmpty": True}
    assert list(seg) == ["type", "version", "remoteLogSegmentId", "startOffset", "endOffset", "brokerId",
                         "maxTimestampMs", "eventTimestampMs", "segmentLeaderEpochs", "segmentSizeInBytes",
                         "customMetadata", "remoteLogSegmentState", "txnIndexEmpty"]
    assert upd == {"type": "RemoteLogSegmentMetadataUpdate", "version": 0, "remoteLogSegmentId": sid, "brokerId": 1,
                   "eventTimestampMs": TS + 200, "customMetadata": "AQI=",
                   "remoteLogSegmentState": "COPY_SEGMENT_FINISHED"}
    assert dele == {"type": "RemotePartitionDeleteMetadata", "version": 0, "topicIdPartition": TIP, "brokerId": 3000,
                    "eventTimestampMs": TS + 300, "remotePartitionDeleteState": "DELETE_PARTITION_MARKED"}
    assert snap["type"] == "RemoteLogSegmentMetadataSnapshot" and snap["segmentId"] == RLM_SEGMENT_ID
    assert snap["remoteLogSegmentState"] == "COPY_SEGMENT_FINISHED" and snap["txnIndexEmpty"] is False


def test_txn_index_empty_is_a_tagged_field() -> None:
    seg = remote_log_metadata_values()[0]
    # txnIndexEmpty=True is written as tagged field 0 at the end: count 1, tag 0, size 1, value 1
    assert seg.endswith(bytes([1, 0, 1, 1]))
    assert parse_remote_log_metadata(seg)[2]["txnIndexEmpty"] is True


@pytest.mark.parametrize("value, message", [
    (bytes([0, 0, 0]), "frame version 0"),
    (bytes([2, 0, 0]), "unknown frame version 2"),
    (bytes([1, 9, 0]), "Unknown metadata id 9"),
    (bytes([1, 2, 0, 3]), "Failed to deserialize record with type 2"),
])
def test_bad_values(value: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decode_remote_log_metadata(None, value)


def test_garbage_after_the_message() -> None:
    with pytest.raises(CorruptRecordError, match="1 byte\\(s\\) of garbage after 1") as e:
        decode_remote_log_metadata(None, remote_log_metadata_values()[1] + b"\x00")
    assert e.value.position == len(remote_log_metadata_values()[1])


def test_iter_over_data_dirs(tmp_path: Path) -> None:
    values = remote_log_metadata_values()[:3]
    remote_log_metadata_partition(tmp_path, 3, values)
    remote_log_metadata_partition(tmp_path, 1, values[:1])
    (tmp_path / "other-0").mkdir()
    got = [(n, p, o, r["type"]) for n, p, o, r in iter_remote_log_metadata([tmp_path])]
    assert got == [("__remote_log_metadata-1", 1, 0, "RemoteLogSegmentMetadata"),
                   ("__remote_log_metadata-3", 3, 0, "RemoteLogSegmentMetadata"),
                   ("__remote_log_metadata-3", 3, 1, "RemoteLogSegmentMetadataUpdate"),
                   ("__remote_log_metadata-3", 3, 2, "RemotePartitionDeleteMetadata")]
    # a partition dir is accepted too
    assert len(list(iter_remote_log_metadata([tmp_path / "__remote_log_metadata-3"]))) == 3


def test_iter_error_names_file_and_position(tmp_path: Path) -> None:
    good = remote_log_metadata_values()[0]
    remote_log_metadata_partition(tmp_path, 0, [good, b"\x01\x07\x00"])
    it = iter_remote_log_metadata([tmp_path])
    next(it)
    with pytest.raises(KafkaLogError) as e:
        next(it)
    assert e.value.path is not None and e.value.path.endswith("00000000000000000000.log")
    assert e.value.position is not None and e.value.position > 0
    assert "offset 1" in str(e.value) and "Unknown metadata id 7" in str(e.value)


def test_dump_log_segments_text() -> None:
    """``RemoteLogMetadataSerde.deserialize(...).toString()`` as DumpLogSegments prints it (verified against Kafka
    4.3.1 on real records by tests/kafka/test_tiered_storage.py and the fixture parity test)."""
    seg, upd, dele, snap = remote_log_metadata_values()
    sid = f"RemoteLogSegmentId{{topicIdPartition={TOPIC_ID}:tiered-0, id={RLM_SEGMENT_ID}}}"
    assert format_remote_log_metadata(seg, 0) == (
        f"payload: RemoteLogSegmentMetadata{{remoteLogSegmentId={sid}, startOffset=0, endOffset=9, brokerId=1, "
        f"maxTimestampMs={TS + 9}, eventTimestampMs={TS + 100}, segmentLeaderEpochs={{0=0, 2=7}}, "
        "segmentSizeInBytes=1234, customMetadata=Optional.empty, state=COPY_SEGMENT_STARTED, txnIdxEmpty=true}")
    assert format_remote_log_metadata(upd, 1) == (
        f"payload: RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={sid}, customMetadata=Optional[CustomMetadata"
        f"{{2 bytes}}], state=COPY_SEGMENT_FINISHED, eventTimestampMs={TS + 200}, brokerId=1}}")
    assert format_remote_log_metadata(dele, 2) == (
        f"payload: RemotePartitionDeleteMetadata{{topicPartition={TOPIC_ID}:tiered-0, state=DELETE_PARTITION_MARKED, "
        f"eventTimestampMs={TS + 300}, brokerId=3000}}")
    assert format_remote_log_metadata(snap, 3).startswith(
        f"payload: RemoteLogSegmentMetadataSnapshot{{segmentId={RLM_SEGMENT_ID}, startOffset=0, endOffset=9, ")
    assert format_remote_log_metadata(bytes([1, 9, 0]), 5) == (
        "payload: Error at offset 5, skipping. org.apache.kafka.common.errors.UnsupportedVersionException: "
        "Unknown metadata id 9")
    assert format_remote_log_metadata(bytes([1, 2, 0, 3]), 6) == (
        "payload: Error at offset 6, skipping. Failed to deserialize record with type 2")
    assert format_remote_log_metadata(None, 7) == "payload: Error at offset 7, skipping. null"
