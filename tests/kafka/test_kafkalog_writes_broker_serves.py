"""kafkalog writes, Kafka accepts and serves (issue 4, differential scenario 2), per Kafka version.

One broker per version (module scope) runs :func:`kafkalog.compat.conformance.kafkalog_writes_kafka_serves`:
two topics are created (CreateTime, and LogAppendTime) and the broker stopped; kafkalog's ``LogWriter``
appends into the broker's own partition dirs (same topic id, the broker's leader epoch) a mix of batches
(every codec, headers incl. null values, null keys, tombstones, an idempotent producer, a committed and an
aborted transaction with their markers) over several segments; ``kafkalog flush`` writes the checkpoints;
DumpLogSegments ``--verify-index-only`` and ``--index-sanity-check`` accept every index; the restarted broker
recovers nothing and serves exactly those records at the same offsets to kafka-python and confluent-kafka,
read_uncommitted and read_committed (aborted records hidden).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.compat.conformance import ScenarioResult, WrittenPartition, kafkalog_writes_kafka_serves
from kafkalog.storage.records.dump import dump_log

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def served(kafka_version: str, module_broker_factory, tmp_path_factory) -> ScenarioResult:
    work = tmp_path_factory.mktemp(f"kafkalog-writes-{kafka_version}")
    return kafkalog_writes_kafka_serves(module_broker_factory, work, kafka_version)


def _batches(wp: WrittenPartition) -> list[dict]:
    return [d for log in sorted(wp.partition_dir.glob("*.log")) for d in dump_log(log)]


def test_broker_accepts_and_serves_exactly_what_kafkalog_wrote(served: ScenarioResult):
    assert served.error is None
    assert served.problems == []
    assert served.passed


def test_every_client_and_isolation_level_read_everything(served: ScenarioResult):
    written: list[WrittenPartition] = served.artifacts["written"]
    assert len(written) == 2
    want = sum(2 * (len(wp.expected("read_uncommitted")) + len(wp.expected("read_committed"))) for wp in written)
    assert served.stats["records consumed"] == want
    assert served.stats["records written"] == sum(len(wp.records) for wp in written)
    assert served.stats["indexes checked"] >= 2 * sum(wp.segments for wp in written)  # .index + .timeindex


def test_the_written_partitions_cover_the_cases(served: ScenarioResult):
    """What the scenario claims to cover is on disk: segments, codecs, producer kinds, markers, timestamps."""
    for wp in served.artifacts["written"]:
        assert wp.segments >= 3 and len(list(wp.partition_dir.glob("*.log"))) == wp.segments
        batches = _batches(wp)
        assert {b["codec"] for b in batches} == {"none", "gzip", "snappy", "lz4", "zstd"}
        assert sum(b["isControl"] for b in batches) == wp.control_batches == 2
        assert any(b["isTransactional"] and not b["isControl"] for b in batches)
        assert any(b["producerId"] >= 0 and not b["isTransactional"] for b in batches)  # idempotent
        assert list(wp.partition_dir.glob("*.txnindex"))  # the aborted transaction
        offsets = [r.offset for r in wp.records]
        assert offsets == sorted(offsets) and wp.log_end_offset == batches[-1]["lastOffset"] + 1
        aborted = [r for r in wp.records if r.aborted]
        assert aborted and len(wp.expected("read_committed")) == len(wp.records) - len(aborted)
        assert any(r.key is None for r in wp.records) and any(r.value is None for r in wp.records)
        assert any(v is None for r in wp.records for _, v in r.headers)
        types = {b["timestampType"] for b in batches if not b["isControl"]}
        assert types == ({"LogAppendTime"} if wp.topic.endswith("appendtime") else {"CreateTime"})


def test_topic_id_and_checkpoints_are_the_brokers(served: ScenarioResult):
    from kafkalog.storage.files.checkpoints import read_offset_checkpoint

    for wp in served.artifacts["written"]:
        data = Path(wp.partition_dir).parent
        points = read_offset_checkpoint(data / "recovery-point-offset-checkpoint").to_dict()
        # written by `kafkalog flush` (and possibly rewritten by the restarted broker): kafkalog's log end offset
        assert points[(wp.topic, 0)] == wp.log_end_offset
        assert (wp.partition_dir / "partition.metadata").exists()
