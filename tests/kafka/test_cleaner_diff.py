"""Differential tests: the real broker's log cleaner and retention vs ``kafkalog compact`` / ``kafkalog retain``
on copies of the same data dir (issue 6).

Recipe per Kafka version: produce keyed data (updates, tombstones, several producers and codecs, idempotent,
committed and aborted transactions) into a broker with the cleaner off, plus three delete-policy topics for
time-, size- and start-offset retention; stop it; copy the data dir (copy B). Restart the broker on copy A with a
prompt cleaner and retention and wait for one pass; read what a consumer sees; stop it. Run kafkalog on copy B
with the same config and the broker's ``now`` (recovered from the delete horizons the broker wrote), start a
broker on B and read again. Compare segment files and bytes (every codec byte-identical with the compiled core,
which compresses lz4, snappy and zstd as Kafka's libraries do; without it uncompressed and gzip byte-identical and
lz4, snappy and zstd the same records, offsets and batch boundaries), index files, the cleaner checkpoint,
retention's surviving segments and log start offsets, and what consumers read.
"""

from __future__ import annotations

import functools
import random
import shutil
import time
from pathlib import Path

import pytest
from engines import clean_points, compact, retain

from kafkalog.compat import clients, jars
from kafkalog.compat.broker import Broker, make_broker
from kafkalog.compat.pytest_plugin import container_image
from kafkalog.storage.codec.native import core
from kafkalog.storage.config.log_config import CleanerConfig, LogConfig
from kafkalog.storage.files.checkpoints import read_offset_checkpoint, write_offset_checkpoint
from kafkalog.storage.log.segment import SegmentIndexer
from kafkalog.storage.records import build_batch, iter_batches

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
# codecs whose recompressed batches must equal the broker's byte for byte (all of them with the compiled core)
BYTE_IDENTICAL_CODECS = (0, 1, 2, 3, 4) if core is not None else (0, 1)


def keyed_records(rnd: random.Random, n: int, space: str, keys: int, *, tomb_every: int = 0,
                  size: int = 100) -> list:
    """``n`` records keyed at random from the key space ``space`` (``keys`` keys), every ``tomb_every``-th a
    tombstone, the others ``size`` random bytes. Random keys from a per-producer key space: most batches keep some
    records and are rebuilt with their codec; random values keep compressed batches large enough to fill several
    segments."""
    return [clients.Record(None if tomb_every and i % tomb_every == tomb_every - 1 else rnd.randbytes(size),
                           key=b"%s-%d" % (space.encode(), rnd.randrange(keys))) for i in range(n)]


def _produce(bs: str) -> None:
    now = int(time.time() * 1000)
    R = clients.Record
    rnd = random.Random(6)
    keyed = functools.partial(keyed_records, rnd)

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


# The JVM backend on both Kafka lines, and the 4.x broker in a container (the image built here by
# kafkalog.compat.image): the same recipe and the same comparisons must pass on every backend. CI runs the JVM
# backend on 4.x (test_kafka_container and certify's container test run the container there); the 3.x run and the
# container run of this recipe are under -m campaign (make campaign).
@pytest.fixture(scope="module", params=[(jars.LATEST_4, "jvm"), pytest.param((jars.LATEST_3, "jvm"), marks=pytest.mark.campaign),
                                        pytest.param((jars.LATEST_4, "container"), marks=pytest.mark.campaign)],
                ids=lambda p: p[0] if p[1] == "jvm" else f"{p[0]}-container")
def runs(request, tmp_path_factory):
    version, backend = request.param
    image = container_image(version) if backend == "container" else None

    def broker(data_dir: Path):
        return make_broker(version, backend=backend, image=image, data_dir=data_dir,
                           server_properties={"log.cleaner.enable": "false"})

    root = tmp_path_factory.mktemp(f"cleaner-{version}-{backend}")
    a = broker(root / "a" / "data")
    try:
        a.start()
        a.create_topic("cmp", config=CMP_CONFIG)
        for t, cfg in RET_CONFIGS.items():
            a.create_topic(t, config=cfg)
        _produce(a.bootstrap_servers)
        # a restart bumps the leader epoch: the retention topics get data under a second epoch, so that the
        # leader-epoch-checkpoint retention truncates holds several entries
        a.stop()
        a.start()
        now = int(time.time() * 1000)
        for t in RET_CONFIGS:
            clients.produce(a.bootstrap_servers, t, [clients.Record(b"e" * 200, key=b"%d" % i, timestamp=now - 500)
                                                     for i in range(2000)], client="confluent", flush_every=500)
        a.stop()
        b_dir = root / "b" / "data"
        shutil.copytree(a.data_dir, b_dir)  # copy2: mtimes preserved (the cleaner's legacy horizon uses them)
        shutil.copytree(a.data_dir, root / "orig" / "data")  # the input, for diagnosing a failure

        # kafkalog retention on B (the prediction is also what we wait for on A)
        retention = {}
        for t, cfg in RET_CONFIGS.items():
            plan = retain(b_dir / f"{t}-0", LogConfig.defaults().with_overrides(cfg), int(time.time() * 1000))
            retention[t] = plan
        # kafkalog's snapshots as retention leaves them (broker B's own start-up later prunes them again)
        snapshots = {t: {p.name: p.read_bytes() for p in (b_dir / f"{t}-0").glob("*.snapshot")} for t in RET_CONFIGS}

        # broker pass on A
        a.extra_properties.update(PROMPT)
        expected_clean = _segments(a.partition_dir("cmp"))[-1]
        a.start()

        def done() -> bool:
            ck = a.data_dir / "cleaner-offset-checkpoint"
            if not ck.exists() or read_offset_checkpoint(ck).get("cmp", 0) != expected_clean:
                return False
            return all(_segments(a.partition_dir(t)) == _segments(b_dir / f"{t}-0") for t in RET_CONFIGS)

        a.wait_until(done, 90, "clean cmp-0 and apply retention")
        consumed_a = _consume(a.bootstrap_servers)
        a.stop()

        # kafkalog compaction on B, at the broker's cleaning time
        horizons = [b.delete_horizon_ms for p in a.partition_dir("cmp").glob("*.log")
                    for b in iter_batches(p.read_bytes()) if b.has_delete_horizon]
        assert horizons, "the broker's pass set no delete horizon (no tombstone kept?)"
        broker_now = min(horizons) - DELETE_RETENTION
        cfg = LogConfig.defaults().with_overrides(CMP_CONFIG)
        kv = tuple(int(x) for x in version.split(".")[:2])
        outcome = compact(b_dir / "cmp-0", cfg, CleanerConfig(dedupe_buffer_size=DEDUPE), broker_now,
                          kafka_version=kv)  # type: ignore[arg-type]
        assert outcome.eligible, outcome.notes

        b = broker(b_dir)
        try:
            b.start()
            consumed_b = _consume(b.bootstrap_servers)
            b.stop()
        finally:
            b.close()
        yield {"version": version, "a": a.data_dir, "b": b_dir, "consumed": (consumed_a, consumed_b),
               "retention": retention, "outcome": outcome, "snapshots": snapshots}
    finally:
        a.close()


def _index_offsets(p: Path) -> list[int]:
    data = p.read_bytes()
    return [int.from_bytes(data[i:i + 4], "big") for i in range(0, len(data), 8)]


def _batch_view(b) -> tuple:
    return (b.base_offset, b.last_offset, b.magic, b.codec, b.is_transactional, b.is_control,
            b.has_delete_horizon, b.base_timestamp, b.max_timestamp, b.producer_id, b.producer_epoch,
            b.base_sequence, b.partition_leader_epoch, b.records_count,
            [(r[0], r[1], r[2], r[3], r[4]) for r in b.record_tuples()])


def compare_cleaned(pa: Path, pb: Path, *, active_may_grow: bool = False, rebuilt_timeindex: bool = True) -> int:
    """Assert that two cleaned partition dirs hold the same segments, batches, indexes and mtimes; returns how
    many batches were compared byte for byte. ``active_may_grow``: the broker's active segment may hold more
    batches than kafkalog's (a group coordinator may append while the broker runs its pass). kafkalog's index rule
    applied to the broker's own cleaned bytes must give the broker's offset index (and, ``rebuilt_timeindex``, its
    time index)."""
    assert _segments(pa) == _segments(pb)
    exact = 0
    for base in _segments(pa):
        name = f"{base:020d}"
        la, lb = (pa / f"{name}.log").read_bytes(), (pb / f"{name}.log").read_bytes()
        ba, bb = list(iter_batches(la)), list(iter_batches(lb))
        if active_may_grow and base == _segments(pa)[-1]:
            ba = ba[:len(bb)]
        assert [x.base_offset for x in ba] == [x.base_offset for x in bb], name
        for x, y in zip(ba, bb, strict=True):
            if x.codec in BYTE_IDENTICAL_CODECS:
                assert bytes(x.buf) == bytes(y.buf), (name, x.base_offset, x.codec_name)
                exact += 1
            else:
                assert _batch_view(x) == _batch_view(y), (name, x.base_offset, x.codec_name)
        if base == _segments(pa)[-1]:
            continue  # the active segment's indexes are the broker's own business
        # the cleaned segment takes the last source segment's mtime, in milliseconds (File.setLastModified)
        assert (pa / f"{name}.log").stat().st_mtime_ns == (pb / f"{name}.log").stat().st_mtime_ns, name
        for suffix in (".index", ".timeindex", ".txnindex"):
            fa, fb = pa / (name + suffix), pb / (name + suffix)
            assert fa.exists() == fb.exists(), name + suffix
            if not fa.exists():
                continue
            if suffix == ".index" and la != lb:
                # without the compiled core lz4/snappy/zstd bytes may differ from the JVM's, so positions do
                assert core is None and _index_offsets(fa) == _index_offsets(fb), name + suffix
            else:
                assert fa.read_bytes() == fb.read_bytes(), name + suffix
        ix = SegmentIndexer(base, 4096)
        ix.append_batches(la, 0)
        oi, ti = ix.close()
        assert oi.to_bytes(trim=True) == (pa / f"{name}.index").read_bytes(), name
        if rebuilt_timeindex:
            assert ti.to_bytes(trim=True) == (pa / f"{name}.timeindex").read_bytes(), name
    return exact


def test_compacted_segments_equal_the_brokers(runs):
    assert compare_cleaned(runs["a"] / "cmp-0", runs["b"] / "cmp-0") > 0


def test_cleaner_checkpoint_equals_the_brokers(runs):
    ca = clean_points(runs["a"])[("cmp", 0)]
    cb = clean_points(runs["b"])[("cmp", 0)]
    assert ca == cb == runs["outcome"].result.end_offset


def test_consumers_read_the_same_records(runs):
    consumed_a, consumed_b = runs["consumed"]
    assert consumed_a and consumed_a == consumed_b


@pytest.mark.parametrize("topic", sorted(RET_CONFIGS))
def test_retention_deletes_what_the_broker_deletes(runs, topic):
    pa, pb = runs["a"] / f"{topic}-0", runs["b"] / f"{topic}-0"
    assert runs["retention"][topic].partitions[0].losses, "the scenario must delete something"
    assert _segments(pa) == _segments(pb)
    for base in _segments(pa)[:-1]:
        name = f"{base:020d}"
        for suffix in (".log", ".index", ".timeindex"):
            assert (pa / (name + suffix)).read_bytes() == (pb / (name + suffix)).read_bytes(), name + suffix
    lso_a = read_offset_checkpoint(runs["a"] / "log-start-offset-checkpoint").get(topic, 0)
    lso_b = read_offset_checkpoint(runs["b"] / "log-start-offset-checkpoint").get(topic, 0)
    assert lso_a == lso_b


@pytest.mark.parametrize("topic", sorted(RET_CONFIGS))
def test_retention_moves_the_leader_epochs_like_the_broker(runs, topic):
    """UnifiedLog.maybeIncrementLogStartOffset -> LeaderEpochFileCache.truncateFromStart: after retention (and
    delete-records, for ret-start) the first epoch entry starts at the new log start offset, in the broker's
    file and in kafkalog's, byte for byte."""
    pa, pb = runs["a"] / f"{topic}-0", runs["b"] / f"{topic}-0"
    ea, eb = (pa / "leader-epoch-checkpoint").read_text(), (pb / "leader-epoch-checkpoint").read_text()
    assert ea == eb
    entries = [line.split() for line in ea.splitlines()[2:]]
    assert len(entries) >= 2, "the scenario must hold several leader epochs"
    first = _segments(pa)[0]
    lso = read_offset_checkpoint(runs["a"] / "log-start-offset-checkpoint").get(topic, 0) or first
    assert int(entries[0][1]) == max(lso, first) > 0, "the broker did not move the first epoch entry"
    # producer snapshots: broker A's (after its retention pass) against kafkalog's right after `retain` on B.
    # Broker A's start-up before the pass removed the stray snapshots (ProducerStateManager.removeStraySnapshots:
    # not a segment base offset and not the newest); kafkalog's retention leaves those alone, as the broker's
    # retention does. Everything else is the same set of files, byte for byte, the new log start's included.
    mine = runs["snapshots"][topic]
    theirs = {p.name: p.read_bytes() for p in pa.glob("*.snapshot")}
    bases = set(_segments(pa))
    newest = max(mine) if mine else None
    assert theirs, "the broker kept no snapshot"
    for name, data in sorted(theirs.items()):
        assert mine.get(name) == data, name
    for name in sorted(set(mine) - set(theirs)):
        assert int(name[:-9]) not in bases and name != newest, f"kafkalog kept {name}, the broker did not"
    start_snap = f"{first:020d}.snapshot"
    assert (start_snap in theirs) == (start_snap in mine), start_snap


# ------------------------------------------------------------------------------------------------------------
# Message format v0/v1 input: Kafka 4 rewrites legacy batches as v2 when cleaning (KAFKA-13093), Kafka 3.9 keeps
# their format. The segments are written by kafkalog's builder and put into a stopped broker's partition dir.


def _legacy_segments(pdir: Path, now: int) -> int:
    from kafkalog.storage.records import build_legacy

    rnd = random.Random(9)

    def recs(start: int, n: int, ts: int | None, tomb: int = 0, keys: int = 150) -> list:
        return [(start + i, NO_TS if ts is None else ts + i, b"k%d" % rnd.randrange(keys),
                 None if tomb and i % tomb == tomb - 1 else rnd.randbytes(80)) for i in range(n)]

    NO_TS = -1
    off, out = 0, []
    for magic, codec, lat, n in [(0, 0, False, 1), (0, 0, False, 1), (0, 1, False, 30), (0, 2, False, 20),
                                 (1, 0, False, 1), (1, 0, False, 1), (1, 1, False, 40), (1, 3, False, 25),
                                 (1, 2, False, 25), (1, 1, True, 30), (1, 0, True, 1)]:
        rs = recs(off, n, None if magic == 0 else now - 50_000, tomb=7)
        out.append(build_legacy(rs, magic=magic, codec=codec, base_offset=off, timestamp_type=1 if lat else 0,
                                log_append_time=now - 40_000 if lat else None))
        off += n
    for codec in (0, 1, 0):
        out.append(build_batch(recs(off, 30, now - 30_000, tomb=5, keys=30), base_offset=off, codec=codec))
        off += 30
    (pdir / f"{0:020d}.log").write_bytes(b"".join(out))
    (pdir / f"{off:020d}.log").write_bytes(build_batch([(off, now, b"fresh", b"v")], base_offset=off))
    return off + 1


@pytest.fixture(scope="module", params=[jars.LATEST_4, jars.LATEST_3])
def legacy_runs(request, tmp_path_factory):
    version = request.param
    root = tmp_path_factory.mktemp(f"legacy-{version}")
    a = Broker(version, data_dir=root / "a" / "data", server_properties={"log.cleaner.enable": "false"})
    try:
        a.start()
        a.create_topic("leg", config=CMP_CONFIG)
        a.stop()
        pdir = a.partition_dir("leg")
        for f in pdir.iterdir():
            if f.suffix in (".log", ".index", ".timeindex", ".snapshot", ".txnindex"):
                f.unlink()
        leo = _legacy_segments(pdir, int(time.time() * 1000))
        for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
            ck = read_offset_checkpoint(a.data_dir / name).to_dict()
            ck[("leg", 0)] = leo
            write_offset_checkpoint(a.data_dir / name, ck)
        b_dir = root / "b" / "data"
        shutil.copytree(a.data_dir, b_dir)
        a.extra_properties.update(PROMPT)
        a.start()
        active = leo - 1
        a.wait_until(lambda: (a.data_dir / "cleaner-offset-checkpoint").exists()
                     and read_offset_checkpoint(a.data_dir / "cleaner-offset-checkpoint").get("leg", 0) == active,
                     90, "clean leg-0")
        a.stop()
        horizons = [b.delete_horizon_ms for b in iter_batches((pdir / f"{0:020d}.log").read_bytes())
                    if b.magic == 2 and b.has_delete_horizon]
        assert horizons
        kv = tuple(int(x) for x in version.split(".")[:2])
        out = compact(b_dir / "leg-0", LogConfig.defaults().with_overrides(CMP_CONFIG),
                      CleanerConfig(dedupe_buffer_size=DEDUPE), min(horizons) - DELETE_RETENTION,
                      kafka_version=kv)  # type: ignore[arg-type]
        assert out.eligible, out.notes
        yield {"version": version, "a": a.data_dir, "b": b_dir}
    finally:
        a.close()


def _any_view(b) -> tuple:
    return (b.base_offset, b.last_offset, b.magic, b.codec, b.timestamp_type, b.max_timestamp,
            [(r[0], r[1], r[2], r[3]) for r in b.iter_record_tuples()])


def test_legacy_batches_cleaned_as_the_broker_cleans_them(legacy_runs):
    pa, pb = legacy_runs["a"] / "leg-0", legacy_runs["b"] / "leg-0"
    assert _segments(pa) == _segments(pb) == [0, _segments(pa)[-1]]
    la, lb = (pa / f"{0:020d}.log").read_bytes(), (pb / f"{0:020d}.log").read_bytes()
    ba, bb = list(iter_batches(la)), list(iter_batches(lb))
    magics = {x.magic for x in ba}
    if legacy_runs["version"].startswith("4"):
        assert magics == {2}  # every legacy batch rewritten as v2
    else:
        assert magics & {0, 1}  # legacy batches keep their format
    assert len(ba) == len(bb)
    for x, y in zip(ba, bb, strict=True):
        if x.codec in BYTE_IDENTICAL_CODECS:
            assert bytes(x.buf) == bytes(y.buf), (x.base_offset, x.magic, x.codec_name)
        else:
            assert _any_view(x) == _any_view(y), (x.base_offset, x.magic, x.codec_name)
    for suffix in (".timeindex",) + ((".index",) if la == lb else ()):
        assert (pa / f"{0:020d}{suffix}").read_bytes() == (pb / f"{0:020d}{suffix}").read_bytes(), suffix
