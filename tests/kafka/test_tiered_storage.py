"""Tiered storage (KIP-405) on a real Kafka 4.3.1 broker through the harness (:mod:`kafkalog.compat.tiered`):
``LocalTieredStorage`` from kafka-storage's test jar rooted at a dir of the test, ``TopicBasedRemoteLogMetadataManager``.
A topic with ``remote.storage.enable=true``, tiny segments and ``local.retention.bytes=1`` gets its rolled segments
uploaded (files under the remote root, in LocalTieredStorage's own layout) and then deleted locally; the
``__remote_log_metadata`` records kafkalog decodes describe exactly the uploaded segments."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.compat import jars
from kafkalog.compat.clients import Record, produce
from kafkalog.compat.tiered import TIERED_TOPIC_CONFIG, remote_storage_dir, tiered_broker_kwargs
from kafkalog.storage.remote.metadata import iter_remote_log_metadata

pytestmark = pytest.mark.kafka

VERSION = jars.LATEST_4


def _local_bases(pdir: Path) -> list[int]:
    return sorted(int(p.stem) for p in pdir.glob("*.log"))


def test_segments_are_uploaded_and_deleted_locally(broker_factory, tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    broker = broker_factory(VERSION, **tiered_broker_kwargs(VERSION, remote))
    broker.create_topic("tiered", config=TIERED_TOPIC_CONFIG | {"internal.segment.bytes": "2048",
                                                                "local.retention.bytes": "1"})
    produce(broker.bootstrap_servers, "tiered", [Record(b"k%d" % i, b"v" * 100) for i in range(60)], flush_every=3)
    pdir = broker.partition_dir("tiered")
    store = remote_storage_dir(remote)
    broker.wait_until(lambda: len(list(store.glob("tiered-0-*/*.log"))) >= 3 and _local_bases(pdir)[0] > 0, 90,
                      "upload segments and delete them locally")
    broker.stop()

    (tp_dir,) = store.glob("tiered-0-*")
    topic_id = (pdir / "partition.metadata").read_text().split("topic_id: ")[1].strip()
    assert tp_dir.name == f"tiered-0-{topic_id}"
    uploaded = sorted(int(p.name.split("-")[0]) for p in tp_dir.glob("*.log"))
    for base in uploaded:
        kinds = {p.name.split(".", 1)[1] for p in tp_dir.glob(f"{base:020d}-*")}
        assert {"log", "index", "timeindex", "snapshot", "leader_epoch_checkpoint"} <= kinds
    assert uploaded[0] == 0 and _local_bases(pdir)[0] > 0  # the first segments exist only remotely

    finished = {r["remoteLogSegmentId"]["id"] for _, _, _, r in iter_remote_log_metadata([broker.data_dir])
                if r["type"] == "RemoteLogSegmentMetadataUpdate" and r["remoteLogSegmentState"] == "COPY_SEGMENT_FINISHED"}
    on_disk = {p.stem.split("-", 1)[1] for p in tp_dir.glob("*.log")}
    assert finished == on_disk
