"""Differential tests: the real broker's log cleaner and retention vs ``kafkalog compact`` / ``kafkalog retain``
on copies of the same data dir (issue 6).

Recipe per Kafka version: produce keyed data (updates, tombstones, several producers and codecs, idempotent,
committed and aborted transactions) into a broker with the cleaner off, plus three delete-policy topics for
time-, size- and start-offset retention; stop it; copy the data dir (copy B). Restart the broker on copy A with a
prompt cleaner and retention and wait for one pass; read what a consumer sees; stop it. Run kafkalog on copy B
with the same config and the broker's ``now`` (recovered from the delete horizons the broker wrote), start a
broker on B and read again. Compare segment files and bytes (uncompressed and gzip byte-identical; lz4, snappy
and zstd: same records, offsets and batch boundaries), index files, the cleaner checkpoint, retention's
surviving segments and log start offsets, and what consumers read.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path

import pytest

from kafkalog.compat import clients, jars
from kafkalog.compat.broker import Broker
from kafkalog.storage.config import CleanerConfig, LogConfig
from kafkalog.storage.engine.cleaner import compact_partition, read_cleaner_checkpoint
from kafkalog.storage.engine.retention import apply_retention, retention_plan
from kafkalog.storage.files.checkpoints import read_offset_checkpoint
from kafkalog.storage.records import iter_batches

pytestmark = pytest.mark.kafka

SEGMENT = 1048576  # the smallest segment.bytes Kafka 4 accepts
DELETE_RETENTION = 86_400_000
DAY = 86_400_000
CMP_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT), "min.cleanable.dirty.ratio": "0.01",
              "delete.retention.ms": str(DELETE_RETENTION), "min.compaction.lag.ms": "0"}
RET_CONFIGS = {
    "ret-time": {"retention.ms": str(DAY), "segment.bytes": str(SEGMENT)},
    "ret-size": {"retention.bytes": "2400000", "segment.bytes": str(SEGMENT), "retention.ms": "-1"},
    "ret-start": {"retention.ms": "-1", "segment.bytes": str(SEGMENT)},
}
PROMPT = {"log.cleaner.enable": "true", "log.cleaner.backoff.ms": "200", "log.retention.check.interval.ms": "500",
          "log.initial.task.delay.ms": "0", "file.delete.delay.ms": "0"}
DEDUPE = 16 * 1024 * 1024  # the harness's log.cleaner.dedupe.buffer.size


def _produce(bs: str) -> None:
    now = int(time.time() * 1000)
    R = clients.Record
    rnd = random.Random(6)

    def keyed(n: int, space: str, keys: int, tomb_every: int = 0) -> list:
        # random keys from a per-producer key space: most batches keep some records and are rebuilt with their
        # codec; random values keep compressed batches large enough to fill several 1 MiB segments
        return [R(None if tomb_every and i % tomb_every == tomb_every - 1 else rnd.randbytes(100),
                  key=b"%s-%d" % (space.encode(), rnd.randrange(keys))) for i in range(n)]

    # every kind of batch first, so that they land in the cleanable segments, then a plain tail
    clients.produce(bs, "cmp", keyed(3000, "n", 800, tomb_every=17), client="kafka-python", flush_every=300)
    clients.produce(bs, "cmp", keyed(4000, "g", 1500, tomb_every=29), client="confluent", compression="gzip",
                    flush_every=250)
    clients.produce(bs, "cmp", keyed(3000, "l", 1500, tomb_every=23), client="confluent", compression="lz4",
                    idempotent=True, flush_every=200)
    clients.produce(bs, "cmp", keyed(400, "tc", 300), client="confluent", transactional_id="tx-commit",
                    transaction="commit", flush_every=100)
    clients.produce(bs, "cmp", keyed(400, "ta", 300), client="kafka-python", transactional_id="tx-abort",
                    transaction="abort", flush_every=100)
    clients.produce(bs, "cmp", keyed(3000, "z", 1500, tomb_every=31), client="confluent", compression="zstd",
                    flush_every=300)
    clients.produce(bs, "cmp", keyed(2000, "s", 1000, tomb_every=19), client="kafka-python", compression="snappy",
                    flush_every=250)
    clients.produce(bs, "cmp", keyed(6000, "n", 800, tomb_every=13), client="kafka-python", flush_every=300)
    clients.produce(bs, "cmp", keyed(3000, "g", 1500, tomb_every=11), client="confluent", compression="gzip",
                    flush_every=300)
    clients.produce(bs, "cmp", keyed(3000, "tail", 3000), client="kafka-python", flush_every=300)
    old = [R(b"o" * 200, key=b"%d" % i, timestamp=now - 10 * DAY + i) for i in range(12000)]
    new = [R(b"n" * 200, key=b"%d" % i, timestamp=now - 1000) for i in range(4000)]
    clients.produce(bs, "ret-time", old + new, client="confluent", flush_every=500)
    clients.produce(bs, "ret-size", old + new, client="confluent", flush_every=500)
    produced = clients.produce(bs, "ret-start", old + new, client="confluent", flush_every=500)
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    target = produced[len(produced) // 2].offset
    admin = AdminClient({"bootstrap.servers": bs})  # keep a reference while the futures are pending
    futs = admin.delete_records([TopicPartition("ret-start", 0, target)], request_timeout=30)
    for f in futs.values():
        f.result(60)


def _segments(pdir: Path) -> list[int]:
    return sorted(int(p.name[:-4]) for p in pdir.glob("*.log"))


def _consume(bs: str) -> list[tuple]:
    got = clients.consume(bs, "cmp", client="confluent", isolation_level="read_committed", idle=4.0, timeout=60)
    return sorted((m.offset, m.key, m.value, m.headers, m.timestamp) for m in got)


def _wait(cond, timeout: float, what: str, broker: Broker) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.3)
    raise AssertionError(f"broker did not {what} within {timeout:.0f}s; log: {broker.log_path}")


@pytest.fixture(scope="module", params=[jars.LATEST_4, jars.LATEST_3])
def runs(request, tmp_path_factory):
    version = request.param
    root = tmp_path_factory.mktemp(f"cleaner-{version}")
    a = Broker(version, data_dir=root / "a" / "data", server_properties={"log.cleaner.enable": "false"})
    try:
        a.start()
        a.create_topic("cmp", config=CMP_CONFIG)
        for t, cfg in RET_CONFIGS.items():
            a.create_topic(t, config=cfg)
        _produce(a.bootstrap_servers)
        a.stop()
        b_dir = root / "b" / "data"
        shutil.copytree(a.data_dir, b_dir)  # copy2: mtimes preserved (the cleaner's legacy horizon uses them)
        shutil.copytree(a.data_dir, root / "orig" / "data")  # the input, for diagnosing a failure

        # kafkalog retention on B (the prediction is also what we wait for on A)
        retention = {}
        for t, cfg in RET_CONFIGS.items():
            plan = retention_plan(b_dir / f"{t}-0", LogConfig.defaults().with_overrides(cfg),
                                  int(time.time() * 1000))
            apply_retention(plan)
            retention[t] = plan

        # broker pass on A
        a.extra_properties.update(PROMPT)
        expected_clean = _segments(a.partition_dir("cmp"))[-1]
        a.start()

        def done() -> bool:
            ck = a.data_dir / "cleaner-offset-checkpoint"
            if not ck.exists() or read_offset_checkpoint(ck).get("cmp", 0) != expected_clean:
                return False
            return all(_segments(a.partition_dir(t)) == _segments(b_dir / f"{t}-0") for t in RET_CONFIGS)

        _wait(done, 90, "clean cmp-0 and apply retention", a)
        consumed_a = _consume(a.bootstrap_servers)
        a.stop()

        # kafkalog compaction on B, at the broker's cleaning time
        horizons = [b.delete_horizon_ms for p in a.partition_dir("cmp").glob("*.log")
                    for b in iter_batches(p.read_bytes()) if b.has_delete_horizon]
        assert horizons, "the broker's pass set no delete horizon (no tombstone kept?)"
        broker_now = min(horizons) - DELETE_RETENTION
        cfg = LogConfig.defaults().with_overrides(CMP_CONFIG)
        kv = tuple(int(x) for x in version.split(".")[:2])
        outcome = compact_partition(b_dir / "cmp-0", cfg, CleanerConfig(dedupe_buffer_size=DEDUPE), broker_now,
                                    kafka_version=kv)  # type: ignore[arg-type]
        assert outcome.eligible, outcome.reason

        b = Broker(version, data_dir=b_dir, server_properties={"log.cleaner.enable": "false"})
        try:
            b.start()
            consumed_b = _consume(b.bootstrap_servers)
            b.stop()
        finally:
            b.close()
        yield {"version": version, "a": a.data_dir, "b": b_dir, "consumed": (consumed_a, consumed_b),
               "retention": retention, "outcome": outcome}
    finally:
        a.close()


def _batch_view(b) -> tuple:
    return (b.base_offset, b.last_offset, b.magic, b.codec, b.is_transactional, b.is_control,
            b.has_delete_horizon, b.base_timestamp, b.max_timestamp, b.producer_id, b.producer_epoch,
            b.base_sequence, b.partition_leader_epoch, b.records_count,
            [(r[0], r[1], r[2], r[3], r[4]) for r in b.record_tuples()])


def test_compacted_segments_equal_the_brokers(runs):
    pa, pb = runs["a"] / "cmp-0", runs["b"] / "cmp-0"
    assert _segments(pa) == _segments(pb)
    exact = 0
    for base in _segments(pa):
        name = f"{base:020d}"
        la, lb = (pa / f"{name}.log").read_bytes(), (pb / f"{name}.log").read_bytes()
        ba, bb = list(iter_batches(la)), list(iter_batches(lb))
        assert [x.base_offset for x in ba] == [x.base_offset for x in bb], name
        for x, y in zip(ba, bb, strict=True):
            if x.codec in (0, 1):  # none, gzip: byte-identical
                assert bytes(x.buf) == bytes(y.buf), (name, x.base_offset, x.codec_name)
                exact += 1
            else:
                assert _batch_view(x) == _batch_view(y), (name, x.base_offset, x.codec_name)
        if la == lb:
            for suffix in (".index", ".timeindex", ".txnindex"):
                fa, fb = pa / (name + suffix), pb / (name + suffix)
                if base != _segments(pa)[-1]:  # the active segment's indexes are the broker's own business
                    assert fa.exists() == fb.exists(), name + suffix
                    if fa.exists():
                        assert fa.read_bytes() == fb.read_bytes(), name + suffix
    assert exact > 0


def test_cleaner_checkpoint_equals_the_brokers(runs):
    ca = read_cleaner_checkpoint(runs["a"])[("cmp", 0)]
    cb = read_cleaner_checkpoint(runs["b"])[("cmp", 0)]
    assert ca == cb == runs["outcome"].result.end_offset


def test_consumers_read_the_same_records(runs):
    consumed_a, consumed_b = runs["consumed"]
    assert consumed_a and consumed_a == consumed_b


@pytest.mark.parametrize("topic", sorted(RET_CONFIGS))
def test_retention_deletes_what_the_broker_deletes(runs, topic):
    pa, pb = runs["a"] / f"{topic}-0", runs["b"] / f"{topic}-0"
    assert runs["retention"][topic].deletions, "the scenario must delete something"
    assert _segments(pa) == _segments(pb)
    for base in _segments(pa)[:-1]:
        name = f"{base:020d}"
        for suffix in (".log", ".index", ".timeindex"):
            assert (pa / (name + suffix)).read_bytes() == (pb / (name + suffix)).read_bytes(), name + suffix
    lso_a = read_offset_checkpoint(runs["a"] / "log-start-offset-checkpoint").get(topic, 0)
    lso_b = read_offset_checkpoint(runs["b"] / "log-start-offset-checkpoint").get(topic, 0)
    assert lso_a == lso_b
