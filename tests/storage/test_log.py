"""PartitionLog, DataDir/DataDirs, verify and describe over hand-built directories."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from builders import numbered_batches, three_segment_data_dir, three_segment_partition, write_segment
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.facts import line, render
from kafkalog.storage.errors import LogDirError
from kafkalog.storage.files.checkpoints import write_offset_checkpoint
from kafkalog.storage.files.leader_epoch import EpochEntry, write_leader_epoch_checkpoint
from kafkalog.storage.files.meta_properties import MetaProperties, write_meta_properties
from kafkalog.storage.files.names import log_file_name, snapshot_file_name
from kafkalog.storage.files.partition_metadata import write_partition_metadata
from kafkalog.storage.io.lock import DirLock
from kafkalog.storage.log.datadir import DataDir, DataDirs
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.topic_partition import TopicPartitionDir, parse_topic_partition_name
from kafkalog.storage.records import build_batch
from kafkalog.storage.reports.describe import describe_partition
from kafkalog.storage.reports.verify import verify_data_dir, verify_data_dirs, verify_partition

TOPIC_ID = "l5y0MjLvQdypLcP9XmR7bw"

# ------------------------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "name,expected",
    [
        ("orders-0", ("orders", 0, "live", None)),
        ("__consumer_offsets-49", ("__consumer_offsets", 49, "live", None)),
        ("my.topic-with-dashes-12", ("my.topic-with-dashes", 12, "live", None)),
        ("t--1", ("t-", 1, "live", None)),
        ("t-+3", ("t", 3, "live", None)),  # Integer.parseInt accepts a sign
        ("orders-1.6d7f1c0b9e0d4a8c8b5f2f6a3c1e9d04-delete", ("orders", 1, "delete",
                                                              "6d7f1c0b9e0d4a8c8b5f2f6a3c1e9d04")),
        ("a.b-c-2.0123456789abcdef0123456789abcdef-future", ("a.b-c", 2, "future",
                                                             "0123456789abcdef0123456789abcdef")),
        ("t-0.x-stray", ("t", 0, "stray", "x")),
        ("__cluster_metadata-0", ("__cluster_metadata", 0, "live", None)),
    ],
)
def test_parse_topic_partition_name(name, expected):
    assert parse_topic_partition_name(name) == TopicPartitionDir(*expected)


@pytest.mark.parametrize(
    "name",
    ["", "lost+found", "orders", "-1", "t-", "t-x", "t-1-delete", "t -1.u-delete", "t-1.u-delete-", "t-2147483648",
     "t-1.-future", ".-stray"],
)
def test_parse_topic_partition_name_rejects(name):
    with pytest.raises(LogDirError):
        parse_topic_partition_name(name)


# ------------------------------------------------------------------------------------------- PartitionLog


def test_partition_log_loads(tmp_path):
    d = three_segment_partition(tmp_path)
    with PartitionLog(d) as log:
        assert (log.topic, log.partition, log.dir_kind) == ("orders", 3, "live")
        assert [s.base_offset for s in log.segments] == [0, 20, 40]
        assert log.log_start_offset == 0 and log.log_end_offset == 50
        assert log.leader_epochs == [EpochEntry(0, 0), EpochEntry(1, 30)]
        assert log.topic_id == TOPIC_ID
        assert log.snapshot_offsets() == [40, 50]
        assert log.findings == [] and log.temp_files == []
        assert log.size == sum(os.path.getsize(s.path) for s in log.segments)
        assert log.floor_segment(19).base_offset == 0 and log.floor_segment(20).base_offset == 20
        assert log.floor_segment(10**9).base_offset == 40


def test_partition_log_lookup_as_broker(tmp_path):
    d = three_segment_partition(tmp_path)
    with PartitionLog(d) as log:
        for offset in range(50):
            seg, pos = log.lookup(offset)
            batch = seg.read_at(pos.position)
            assert batch.base_offset <= offset <= batch.last_offset
            assert seg.base_offset <= offset
        assert log.lookup(50) is None
        assert log.lookup_timestamp(3003) == (3003, 33)
        assert log.lookup_timestamp(10**15) is None
        assert [b.base_offset for _, b in log.iter_batches(37)][:2] == [36, 38]
        assert len(list(log.iter_batches())) == 25


def test_partition_log_start_offset_checkpoint_and_gaps(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    # compaction/retention: first batch above the base offset
    write_segment(d, 100, numbered_batches(152, 3), rebuild_indexes=True, interval=200)
    with PartitionLog(d, log_start_offset_checkpoint=155) as log:
        assert log.log_start_offset == 155 and log.log_end_offset == 158
        seg, pos = log.lookup(120)
        assert pos.position == 0
    with PartitionLog(d, log_start_offset_checkpoint=50) as log:
        assert log.log_start_offset == 100


def test_partition_log_findings_and_leftovers(tmp_path):
    d = three_segment_partition(tmp_path)
    (d / "00000000000000000000.log.deleted").write_bytes(b"")
    (d / "00000000000000000060.log.cleaned").write_bytes(b"")
    (d / "00000000000000000040.log.swap").write_bytes(b"")
    (d / "leader-epoch-checkpoint.tmp").write_bytes(b"")
    (d / "00000000000000000099.index").write_bytes(b"")  # orphaned index
    (d / "abc.log").write_bytes(b"")
    (d / "notes.txt").write_bytes(b"")
    outside = tmp_path / "elsewhere.log"
    outside.write_bytes(b"")
    (d / "00000000000000000070.log").symlink_to(outside)
    with PartitionLog(d) as log:
        assert [s.base_offset for s in log.segments] == [0, 20, 40]
        left = log.leftover_files()
        assert [p.name for p in left[".swap"]] == ["00000000000000000040.log.swap"]
        assert [p.name for p in left[".cleaned"]] == ["00000000000000000060.log.cleaned"]
        assert [p.name for p in left[".deleted"]] == ["00000000000000000000.log.deleted"]
        assert [p.name for p in left[".tmp"]] == ["leader-epoch-checkpoint.tmp"]
        msgs = {Path(f.file).name: f for f in log.findings}
        assert msgs["00000000000000000099.index"].kind == "index"
        assert msgs["abc.log"].severity == "error"
        assert msgs["notes.txt"].severity == "info"
        assert "symlink" in render(msgs["00000000000000000070.log"])


def test_partition_log_empty_dir_and_errors(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    with PartitionLog(d, log_start_offset_checkpoint=7) as log:
        assert log.segments == [] and log.log_start_offset == 7 and log.log_end_offset == 7
        assert log.lookup(0) is None and log.topic_id is None and log.leader_epochs == []
    with pytest.raises(LogDirError):
        PartitionLog(tmp_path / "missing-0")
    (tmp_path / "bad").mkdir()
    with pytest.raises(LogDirError):
        PartitionLog(tmp_path / "bad")


# ------------------------------------------------------------------------------------------- DataDir


def test_data_dir_loads(tmp_path):
    root = three_segment_data_dir(tmp_path / "kafka-logs")
    (root / "remote-log-index-cache").mkdir()
    (root / "lost+found").mkdir()
    (root / "recovery-point-offset-checkpoint.tmp").write_bytes(b"0\n")
    three_segment_partition(root, "orders-1.6d7f1c0b9e0d4a8c8b5f2f6a3c1e9d04-delete")
    with DataDir(root) as dd:
        assert dd.meta_properties.node_id == 1
        assert dd.recovery_points == {("orders", 3): 40}
        assert dd.log_start_offsets == {("orders", 3): 4}
        assert dd.high_watermarks == {("orders", 3): 50} and dd.clean_points == {}
        assert dd.had_clean_shutdown and dd.clean_shutdown.broker_epoch == 5
        kinds = sorted((tp.name, tp.kind) for tp in dd.partition_dirs.values())
        assert kinds == [("orders-1", "delete"), ("orders-3", "live")]
        log = dd.partition("orders", 3)
        assert log.log_start_offset == 4 and log.recovery_point == 40 and log.high_watermark == 50
        assert dd.partition("orders", 1, "delete") is not None and dd.partition("nope", 0) is None
        assert [p.name for p in dd.leftover_tmp_files] == ["recovery-point-offset-checkpoint.tmp"]
        found = {Path(f.file).name: f for f in dd.findings}
        assert found["lost+found"].severity == "error"  # Kafka refuses to load such a dir
        assert "remote-log-index-cache" not in found
        assert not dd.lock_status().held
        with DirLock(root):
            assert dd.lock_status().held


def test_data_dir_corrupt_checkpoint_is_a_finding(tmp_path):
    root = three_segment_data_dir(tmp_path / "d")
    (root / "recovery-point-offset-checkpoint").write_bytes(b"0\n1\nbroken\n")
    with DataDir(root) as dd:
        assert dd.recovery_points == {}  # Kafka treats it as empty
        f = [f for f in dd.findings if f.kind == "checkpoint"]
        assert f and "line 3" in f[0].message and f[0].position == 4


def test_data_dirs_ensemble(tmp_path):
    a = three_segment_data_dir(tmp_path / "a")
    b = three_segment_data_dir(tmp_path / "b")  # same partition live in both: fatal for Kafka
    write_meta_properties(b / "meta.properties", MetaProperties.new(version=1, cluster_id="other", node_id=2, now=0))
    with DataDirs([a, b]) as dirs:
        msgs = [render(f) for f in dirs.ensemble_findings()]
        assert any("cluster.id" in m for m in msgs)
        assert any("node id" in m for m in msgs)
        assert any("also live" in m for m in msgs)
        assert len(list(dirs.partitions())) == 2


# ------------------------------------------------------------------------------------------- verify


def kinds(findings, severity=None):
    return sorted({f.kind for f in findings if severity is None or f.severity == severity})


def test_verify_clean_partition(tmp_path):
    root = three_segment_data_dir(tmp_path / "d")
    findings = verify_partition(root / "orders-3", deep=True)
    assert [f for f in findings if f.severity != "info"] == [], findings
    assert [f for f in verify_data_dir(root, deep=True) if f.severity != "info"] == []


def test_verify_crc_and_truncation(tmp_path):
    root = three_segment_data_dir(tmp_path / "d")
    seg = root / "orders-3" / log_file_name(20)
    data = bytearray(seg.read_bytes())
    data[300] ^= 0x01
    seg.write_bytes(bytes(data) + b"\0" * 10)
    findings = verify_partition(root / "orders-3")
    crc = [f for f in findings if f.kind == "crc"]
    assert len(crc) == 1 and crc[0].severity == "error" and crc[0].file == str(seg)
    assert crc[0].position == 300 - 300 % 97 or crc[0].position < 300
    assert any(f.kind == "batch" and "torn tail" in render(f) for f in findings)


def test_verify_offsets_and_indexes(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    bs = numbered_batches(10, 6)
    write_segment(d, 10, bs, rebuild_indexes=True, interval=200)
    # an index entry pointing into the middle of a batch, one with a wrong offset, one beyond the log
    size = len(bs[0])
    (d / "00000000000000000010.index").write_bytes(
        struct.pack(">6i", 3, size * 1 + 5, 4, size * 2, 100, size * 100))
    # a batch below the base offset in the next segment, and non-increasing offsets
    write_segment(d, 30, [build_batch([(25, 1, b"k", b"v")], base_offset=25),
                          build_batch([(31, 1, b"k", b"v")], base_offset=31),
                          build_batch([(31, 1, b"k", b"v")], base_offset=31)], rebuild_indexes=True, interval=200)
    findings = verify_partition(d, checkpoints={})
    msgs = [render(f) for f in findings if f.severity == "error"]
    assert any("not the start of a batch" in m for m in msgs)
    assert any(f.severity == "warning" and "offset inside the batch" in render(f) for f in findings)
    assert any("beyond the end of the log" in m or "not at a batch start" in m for m in msgs)
    assert any("below the segment base offset" in m for m in msgs)
    assert any("do not increase" in m for m in msgs)


def test_verify_follower_index_is_info_and_deep_time_offsets(tmp_path):
    from kafkalog.storage.log.segment import replay_appends as rebuild_indexes_append

    d = tmp_path / "t-0"
    d.mkdir()
    bs = numbered_batches(0, 10, per=3)
    log = b"".join(bs)
    (d / log_file_name(0)).write_bytes(log)
    size = len(bs[0])
    r = rebuild_indexes_append(log, 0, appends=[0, 3 * size, 6 * size], index_interval_bytes=100)
    (d / "00000000000000000000.index").write_bytes(r.offset_index.to_bytes())
    deep = rebuild_indexes_append(log, 0, index_interval_bytes=100, deep_time_offsets=True)
    (d / "00000000000000000000.timeindex").write_bytes(deep.time_index.to_bytes())
    findings = verify_partition(d, checkpoints={})
    assert [f for f in findings if f.severity == "error"] == []
    assert any(f.kind == "index" and "multi-batch append" in render(f) for f in findings)
    # deep offsets (pre-3.8 leaders): the max-timestamp record is the last one here, so offsets equal
    assert not any(f.kind == "timeindex" and f.severity != "info" for f in findings)


def test_verify_time_index_missing_final_entry_and_untrimmed(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    # closed segment left untrimmed (crash)
    write_segment(d, 0, numbered_batches(0, 10), trim=False, rebuild_indexes=True, interval=200,
                  preallocate=(800, 1200))
    write_segment(d, 20, numbered_batches(20, 2), rebuild_indexes=True, interval=200)
    tpath = d / "00000000000000000000.timeindex"
    tpath.write_bytes(tpath.read_bytes()[:12])  # drop the final entries
    findings = verify_partition(d, checkpoints={})
    assert any(f.kind == "timeindex" and "final entry" in render(f) for f in findings)
    assert any(f.kind == "index" and "not trimmed" in render(f) and f.severity == "warning" for f in findings)


def test_verify_checkpoints_metadata_snapshots(tmp_path):
    root = three_segment_data_dir(tmp_path / "d")
    write_offset_checkpoint(root / "log-start-offset-checkpoint", {("orders", 3): 99})
    write_offset_checkpoint(root / "replication-offset-checkpoint", {("orders", 3): 70, ("gone", 0): 1})
    write_offset_checkpoint(root / "cleaner-offset-checkpoint", {("orders", 3): 500})
    d = root / "orders-3"
    (d / "partition.metadata").unlink()
    (d / snapshot_file_name(60)).write_bytes(b"\0\1garbage")
    (d / "00000000000000000040.log.swap").write_bytes(b"")
    findings = verify_data_dir(root)
    text = "\n".join(line(f) for f in findings)
    assert "deletes every segment" in text
    assert "high watermark 70" in text
    assert "first dirty offset 500" in text
    assert "gone-0" in text
    assert "no topic id" in text
    assert "Kafka deletes it and falls back" in text
    assert any(f.kind == "leftover" for f in findings)


def test_verify_leader_epochs(tmp_path):
    root = three_segment_data_dir(tmp_path / "d")
    d = root / "orders-3"
    write_leader_epoch_checkpoint(d / "leader-epoch-checkpoint", [EpochEntry(0, 0), EpochEntry(1, 28), EpochEntry(4, 77)])
    text = "\n".join(line(f) for f in verify_partition(d))
    assert "epoch 1 recorded at 28, first batch of that epoch starts at 30" in text
    assert "epoch 4 starts at 77, after the log end offset 50" in text
    write_leader_epoch_checkpoint(d / "leader-epoch-checkpoint", [EpochEntry(0, 0)])
    assert "epoch 1 (first batch at offset 30) is missing" in "\n".join(line(f) for f in verify_partition(d))


def test_verify_topic_id_consistency_and_lock(tmp_path):
    root = three_segment_data_dir(tmp_path / "d")
    other = three_segment_partition(root, "orders-4")
    write_partition_metadata(other / "partition.metadata", "AAAAAAAAAAAAAAAAAAAAAQ")
    with DirLock(root):
        findings = verify_data_dir(root)
    assert any(f.kind == "metadata" and "differs" in render(f) for f in findings)
    assert any(f.kind == "lock" for f in findings)
    assert any("not in recovery-point-offset-checkpoint" in render(f) for f in findings)


def test_verify_data_dirs(tmp_path):
    a = three_segment_data_dir(tmp_path / "a")
    b = three_segment_data_dir(tmp_path / "b")
    findings = verify_data_dirs([a, b])
    assert any("also live" in render(f) for f in findings)
    assert verify_partition(tmp_path / "nope-0")[0].kind == "layout"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400), st.binary(max_size=40), st.binary(max_size=40), st.binary(max_size=60))
def test_verify_never_raises_on_garbage(tmp_path_factory, log, index, timeindex, txnindex):
    d = tmp_path_factory.mktemp("g") / "t-0"
    d.mkdir()
    (d / log_file_name(0)).write_bytes(bytes(build_batch([(0, 1, b"k", b"v")], base_offset=0)) + log)
    (d / "00000000000000000000.index").write_bytes(index)
    (d / "00000000000000000000.timeindex").write_bytes(timeindex)
    (d / "00000000000000000000.txnindex").write_bytes(txnindex)
    (d / "leader-epoch-checkpoint").write_bytes(log[:30])
    (d / "partition.metadata").write_bytes(log[:30])
    (d / snapshot_file_name(0)).write_bytes(log[:50])
    for deep in (False, True):
        findings = verify_partition(d, deep=deep, checkpoints={})
        assert all(f.severity in ("error", "warning", "info") for f in findings)
    describe_partition(d, checkpoints={})


# ------------------------------------------------------------------------------------------- describe


def test_describe_partition(tmp_path):
    root = three_segment_data_dir(tmp_path / "d")
    desc = describe_partition(root / "orders-3")
    assert desc["dataDir"] == str(root) and desc["topic"] == "orders" and desc["partition"] == 3
    assert desc["logStartOffset"] == 4 and desc["logEndOffset"] == 50
    assert desc["recoveryPoint"] == 40 and desc["highWatermark"] == 50 and desc["cleanPoint"] is None
    assert desc["leaderEpochs"] == [[0, 0], [1, 30]] and desc["topicId"] == TOPIC_ID
    assert desc["magics"] == [2] and desc["codecs"] == ["none"]
    assert [s["baseOffset"] for s in desc["segments"]] == [0, 20, 40]
    assert [s["nextOffset"] for s in desc["segments"]] == [20, 40, 50]
    assert desc["size"] == sum(s["size"] for s in desc["segments"])
    assert desc["producerSnapshots"] == [40, 50] and desc["leftovers"] == []
    assert "errors" not in desc


def test_special_files_do_not_block_or_crash(tmp_path):
    root = three_segment_data_dir(tmp_path / "d")
    d = root / "orders-3"
    os.mkfifo(d / "00000000000000000090.log")
    os.mkfifo(d / "leader-epoch-checkpoint.fifo")
    (d / "partition.metadata").unlink()
    os.mkfifo(d / "partition.metadata")
    (root / "cleaner-offset-checkpoint").unlink()
    os.mkfifo(root / "cleaner-offset-checkpoint")
    (root / ".kafka_cleanshutdown").unlink()
    (root / ".kafka_cleanshutdown").mkdir()
    (d / "dangling.index").symlink_to(d / "nowhere")
    findings = verify_data_dir(root, deep=True)
    text = "\n".join(line(f) for f in findings)
    assert "not a regular file" in text
    with DataDir(root) as dd:
        assert dd.had_clean_shutdown  # a directory named like the marker still counts for Kafka
        log = dd.partition("orders", 3)
        assert [s.base_offset for s in log.segments] == [0, 20, 40]
    assert describe_partition(d, checkpoints={})["topicId"] is None
