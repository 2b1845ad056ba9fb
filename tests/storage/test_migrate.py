"""kafkalog migrate / topic-id / checkpoints: what is rewritten, what is merged, what is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from engines import migrate

from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.engine.migrate import MigrateOptions
from kafkalog.storage.engine.offset_checkpoints import read_checkpoints
from kafkalog.storage.engine.topic_id import set_topic_id
from kafkalog.storage.engine.writer import LogWriter
from kafkalog.storage.errors import ConfigError, LockedError, LogDirError
from kafkalog.storage.files.checkpoints import write_offset_checkpoint
from kafkalog.storage.files.leader_epoch import EpochEntry, read_leader_epoch_checkpoint
from kafkalog.storage.files.meta_properties import read_meta_properties
from kafkalog.storage.files.offset_index import read_offset_index
from kafkalog.storage.files.partition_metadata import read_partition_metadata
from kafkalog.storage.io.lock import DirLock
from kafkalog.storage.records import build_batch
from kafkalog.storage.reports.diff import diff_paths
from kafkalog.storage.reports.partition_records import iter_partition_records
from kafkalog.tools.cli import main

T0 = 1_700_000_000_000
SRC_ID = "l5y0MjLvQdypLcP9XmR7bw"
DST_ID = "3rWq9ZbmQqW8DX6PNjy4uA"
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    d = tmp_path / "src"
    cfg = LogConfig.from_topic_props({"segment.bytes": 3000, "index.interval.bytes": 200})
    with LogWriter(d / "orders-0", cfg, topic_id=SRC_ID, leader_epoch=3, now_ms=T0) as w:
        for i in range(40):
            w.append(build_batch([(None, T0 + i, b"k%d" % i, b"v" * 50)]))
    with LogWriter(d / "orders-0", cfg, leader_epoch=5, now_ms=T0) as w:
        for i in range(20):
            w.append(build_batch([(None, T0 + 40 + i, b"k%d" % i, b"v" * 50)]))
    write_offset_checkpoint(d / "replication-offset-checkpoint", {("orders", 0): 58, ("other", 1): 7})
    write_offset_checkpoint(d / "cleaner-offset-checkpoint", {("orders", 0): 30})
    write_offset_checkpoint(d / "recovery-point-offset-checkpoint", {("orders", 0): 60})
    return d


def test_migrate_whole_partition(src: Path, tmp_path: Path):
    dst = tmp_path / "dst"
    dst.mkdir()
    write_offset_checkpoint(dst / "recovery-point-offset-checkpoint", {("keep", 0): 11})
    r = migrate(src / "orders-0", dst, MigrateOptions(topic_id=DST_ID, cluster_id=CLUSTER, node_id=2))
    (m,) = r.partitions
    assert (m.log_start_offset, m.log_end_offset, m.high_watermark, m.cleaner_offset) == (0, 60, 58, 30)
    assert r.created_meta_properties
    meta = read_meta_properties(dst / "meta.properties")
    assert (meta.version, meta.cluster_id, meta.node_id) == (1, CLUSTER, 2) and meta.directory_id
    assert read_partition_metadata(dst / "orders-0" / "partition.metadata").topic_id == DST_ID
    cps = read_checkpoints(dst)
    assert cps["recovery-point-offset-checkpoint"] == {("keep", 0): 11, ("orders", 0): 60}
    assert cps["replication-offset-checkpoint"] == {("orders", 0): 58}
    assert cps["cleaner-offset-checkpoint"] == {("orders", 0): 30}
    assert cps["log-start-offset-checkpoint"] == {}
    res = diff_paths(src / "orders-0", dst / "orders-0", level="bytes")
    assert [d.path for d in res.differences] == ["partition.metadata"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".kafkalog-migrate")]


def test_rename_and_range(src: Path, tmp_path: Path):
    dst = tmp_path / "dst"
    r = migrate(src / "orders-0", dst, MigrateOptions(topic="archive", partition=4, from_offset=27, to_offset=45,
                                                      cluster_id=CLUSTER, node_id=1))
    (m,) = r.partitions
    assert Path(m.dest).name == "archive-4" and (m.log_start_offset, m.log_end_offset) == (27, 45)
    offs = [x[0] for x in iter_partition_records(dst / "archive-4")]
    assert offs[-1] == 44 and 27 in offs and offs[0] <= 27
    cps = read_checkpoints(dst)
    assert cps["log-start-offset-checkpoint"] == {("archive", 4): 27}
    assert cps["recovery-point-offset-checkpoint"] == {("archive", 4): 45}
    assert cps["replication-offset-checkpoint"] == {("archive", 4): 45}
    assert cps["cleaner-offset-checkpoint"] == {("archive", 4): 30}
    epochs = read_leader_epoch_checkpoint(dst / "archive-4" / "leader-epoch-checkpoint").entries
    assert epochs == [EpochEntry(3, 27), EpochEntry(5, 40)]
    # the cut segment's index only points at copied batches
    last = sorted(dst.glob("archive-4/*.log"))[-1]
    idx = read_offset_index(last.with_suffix(".index"))
    assert all(e.position < last.stat().st_size and e.offset < 45 for e in idx)
    idx.close()
    assert max(int(p.name[:20]) for p in dst.glob("archive-4/*.snapshot")) <= 45


def test_refusals(src: Path, tmp_path: Path):
    dst = tmp_path / "dst"
    with pytest.raises(ConfigError, match="meta.properties"):
        migrate(src / "orders-0", dst)
    migrate(src / "orders-0", dst, MigrateOptions(cluster_id=CLUSTER, node_id=1))
    with pytest.raises(LogDirError, match="already exists"):
        migrate(src / "orders-0", dst)
    with pytest.raises(LogDirError, match="cluster"):
        migrate(src / "orders-0", dst, MigrateOptions(cluster_id="other", overwrite=True))
    with pytest.raises(ConfigError):
        migrate(src / "orders-0", dst, MigrateOptions(topic_id="AAAAAAAAAAAAAAAAAAAAAA", overwrite=True))
    with DirLock(dst):
        with pytest.raises(LockedError):
            migrate(src / "orders-0", dst, MigrateOptions(overwrite=True))
    r = migrate(src / "orders-0", dst, MigrateOptions(overwrite=True), backup_root=str(tmp_path / "bk"))
    assert r.partitions[0].replaced
    assert (tmp_path / "bk" / "dst" / "orders-0" / "00000000000000000000.log").exists()


def test_negative_offsets_are_refused(src: Path, tmp_path: Path):
    """An offset is never negative: --to-offset -5 copied nothing (an empty partition, exit 0) and --from-offset -5
    was the source's log start; both are now refused before anything is written."""
    dst = tmp_path / "dst"
    for opts, name in ((MigrateOptions(to_offset=-5), "--to-offset"), (MigrateOptions(from_offset=-5), "--from-offset")):
        opts.cluster_id, opts.node_id = CLUSTER, 1
        with pytest.raises(ConfigError, match=f"{name} -5 is negative: an offset is 0 or more"):
            migrate(src / "orders-0", dst, opts)
        assert not dst.exists()


def test_dry_run_changes_nothing(src: Path, tmp_path: Path):
    dst = tmp_path / "dst"
    r = migrate(src, dst, MigrateOptions(cluster_id=CLUSTER, node_id=1), dry_run=True)
    assert len(r.partitions) == 1 and not dst.exists()


def test_topic_id_and_checkpoints_cli(src: Path, capsys):
    assert main(["topic-id", str(src)]) == 0
    assert SRC_ID in capsys.readouterr().out
    assert main(["topic-id", str(src), "--set", DST_ID, "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["oldTopicId"] == SRC_ID
    assert read_partition_metadata(src / "orders-0" / "partition.metadata").topic_id == DST_ID
    assert main(["topic-id", str(src), "--set", "not-a-uuid"]) == 1
    capsys.readouterr()
    assert main(["checkpoints", str(src), "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert {"topic": "orders", "partition": 0, "recovery": 60, "logStart": None, "highWatermark": 58,
            "cleaner": 30} in rows
    assert main(["checkpoints", str(src), "--file", "high-watermark", "--set", "orders-0=60",
                 "--set", "other-1=none"]) == 0
    assert read_checkpoints(src)["replication-offset-checkpoint"] == {("orders", 0): 60}
    assert main(["checkpoints", str(src), "--set", "orders-0=1"]) == 2
    assert main(["checkpoints", str(src), "--file", "cleaner", "--set", "orders=1"]) == 2


def test_set_topic_id_atomic(src: Path):
    old = set_topic_id(src / "orders-0", DST_ID)
    assert old == SRC_ID
    assert (src / "orders-0" / "partition.metadata").read_bytes() == f"version: 0\ntopic_id: {DST_ID}".encode()
    assert not [n for n in os.listdir(src / "orders-0") if n.endswith(".tmp")]


def test_migrate_cli(src: Path, tmp_path: Path, capsys):
    assert main(["migrate", str(src / "orders-0"), str(tmp_path / "dst"), "--cluster-id", CLUSTER, "--node-id",
                 "1", "--topic", "o2", "--json"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["logEndOffset"] == 60 and row["dest"].endswith("o2-0")
    assert main(["migrate", str(src / "orders-0"), str(tmp_path / "dst"), "--topic", "o2"]) == 1
