"""Engine-core differential tests: a real broker and kafkalog run the same operation on copies of the same
input, and every file of the partition dirs is compared byte for byte afterwards (segments, indexes, producer
snapshots, ``leader-epoch-checkpoint``, ``partition.metadata``), with the data dir's checkpoint entries.

* (a) ``internal.segment.bytes`` (Kafka 4.1+, an internal topic config): the broker rolls the topic's segments by
  it and its cleaner groups segments by it. kafkalog reads it from the KRaft metadata, compacts and retains the
  same way. Kafka 3.9 refuses the name at topic creation.
* (c) a KRaft dir whose ``__cluster_metadata`` log the broker itself trimmed below its latest snapshot (small
  metadata segments, short metadata retention, frequent snapshots): the topics' configs (a compacted topic with
  old timestamps, a topic with ``retention.bytes``) survive only in the snapshot ``.checkpoint``. kafkalog must
  find them there: reading only the log, it would delete every segment of the compacted topic under the 7-day
  default and apply no size retention.

Recipe: broker A (cleaner off, retention idle) gets the topics and data, stops; its dir is copied to B. A starts
again with a prompt cleaner and retention and is stopped once they acted (and their deleted files are gone), then
starts and stops once more, quiet; kafkalog runs ``retain`` and ``compact`` (at the broker's cleaning time,
recovered from the delete horizons it wrote) on B, then a broker starts and stops twice on B, so that both dirs
had two broker starts after the copy (each moves the leader epoch) and one after their retention and cleaning.
(b), retention by time, size and delete-records with ``leader-epoch-checkpoint``, is in ``test_cleaner_diff``.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import shutil
import time
from pathlib import Path

import pytest

from kafkalog.compat import clients, jars
from kafkalog.compat.broker import Broker
from kafkalog.storage.config.resolver import ConfigResolver, read_cluster_metadata
from kafkalog.storage.files.checkpoints import read_offset_checkpoint
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.records import iter_batches
from kafkalog.tools.cli import main as kafkalog_main

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]

DAY = 86_400_000
DELETE_RETENTION = DAY
QUIET = {"log.cleaner.enable": "false", "log.retention.check.interval.ms": "3600000",
         "log.initial.task.delay.ms": "3600000"}  # no retention pass before the copy (the default runs one at 30 s)
PROMPT = {"log.cleaner.enable": "true", "log.cleaner.backoff.ms": "200", "log.retention.check.interval.ms": "500",
          "log.initial.task.delay.ms": "0", "file.delete.delay.ms": "0", "log.cleaner.dedupe.buffer.size":
          str(16 * 1024 * 1024)}
COMPACT = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0",
           "delete.retention.ms": str(DELETE_RETENTION)}


def _segments(pdir: Path) -> list[int]:
    return sorted(int(p.name[:-4]) for p in pdir.glob("*.log"))


def _keyed(rnd: random.Random, n: int, keys: int, *, tomb_every: int = 0, ts: int | None = None,
           size: int = 200) -> list[clients.Record]:
    return [clients.Record(None if tomb_every and i % tomb_every == tomb_every - 1 else rnd.randbytes(size),
                           key=b"key-%d" % rnd.randrange(keys), timestamp=ts) for i in range(n)]


def _kafkalog(*args: str) -> list[dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = kafkalog_main([*args, "--no-backup", "--json"])
    assert rc == 0, out.getvalue()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _broker_now(pdir: Path) -> int:
    """The broker's cleaning time, from the delete horizons its round wrote (horizon = now + delete.retention.ms)."""
    horizons = [b.delete_horizon_ms for p in pdir.glob("*.log") for b in iter_batches(p.read_bytes())
                if b.magic >= 2 and b.has_delete_horizon]
    assert horizons, f"the broker's cleaning of {pdir.name} set no delete horizon (no tombstone kept?)"
    return min(horizons) - DELETE_RETENTION


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _compare_partition(pa: Path, pb: Path) -> int:
    """Every file of two partition dirs, byte for byte (names first). Returns the number of files compared."""
    na = sorted(p.name for p in pa.iterdir() if p.is_file())
    nb = sorted(p.name for p in pb.iterdir() if p.is_file())
    assert na == nb, f"{pa.name}: the broker left {na}, kafkalog {nb}"
    for name in na:
        a, b = (pa / name).read_bytes(), (pb / name).read_bytes()
        assert a == b, (f"{pa.name}/{name}: {len(a)} bytes from the broker, {len(b)} from kafkalog, first "
                        f"difference at byte {_first_difference(a, b)}")
    return len(na)


def _entries(d: Path, name: str, topics: set[str]) -> dict:
    p = d / name
    if not p.exists():
        return {}
    return {k: v for k, v in read_offset_checkpoint(p).to_dict().items() if k[0] in topics}


def _run(version: str, root: Path, topics: dict[str, dict[str, str]], produce, server: dict[str, str],
         before_copy=None) -> dict:
    """The recipe of the module doc. Returns the two data dirs and what kafkalog planned."""
    a = Broker(version, data_dir=root / "a" / "data", server_properties={**QUIET, **server})
    b_broker = None
    try:
        a.start()
        for t, cfg in topics.items():
            a.create_topic(t, config=cfg)
        produce(a.bootstrap_servers)
        extra = before_copy(a) if before_copy else {}
        a.stop()
        b_dir = root / "b" / "data"
        shutil.copytree(a.data_dir, b_dir)  # copy2: mtimes kept (retention and the cleaner's horizon use them)
        compacted = [t for t, c in topics.items() if "compact" in c.get("cleanup.policy", "")]
        # kafkalog retention on B first: its prediction is what we wait for on A
        retain = _kafkalog("retain", str(b_dir), "--now", str(int(time.time() * 1000)))
        expected_clean = {t: _segments(a.partition_dir(t))[-1] for t in compacted}
        a.extra_properties.update(PROMPT)
        a.start()

        def done() -> bool:
            ck = _entries(a.data_dir, "cleaner-offset-checkpoint", set(compacted))
            if any(ck.get((t, 0)) != expected_clean[t] for t in compacted):
                return False
            if any(any(a.partition_dir(t).glob("*.deleted")) for t in topics):
                return False  # the broker's asynchronous deletion of replaced segments has not run yet
            return all(_segments(a.partition_dir(t)) == _segments(b_dir / f"{t}-0") for t in topics
                       if t not in compacted)

        a.wait_until(done, 120, "clean and apply retention")
        a.stop()
        # one more start, quiet: B starts once after kafkalog's retention and cleaning, so A starts once after the
        # broker's (a start after retention deletes the producer snapshot at the new log start, for one)
        a.extra_properties.update(QUIET)
        a.start()
        a.stop()
        compact = []
        for t in compacted:
            compact += _kafkalog("compact", str(b_dir / f"{t}-0"), "--now", str(_broker_now(a.partition_dir(t))))
        b_broker = Broker(version, data_dir=b_dir, server_properties={**QUIET, **server},
                          cluster_id=a.cluster_id)
        for _ in range(2):  # as many starts as A had after the copy: each start moves the leader epoch
            b_broker.start()
            b_broker.stop()
        return {"a": a.data_dir, "b": b_dir, "retain": retain, "compact": compact, "topics": set(topics),
                **extra}
    finally:
        a.close()
        if b_broker is not None:
            b_broker.close()


# ------------------------------------------------------------------------------------ (a) internal.segment.bytes
ISB = 16384
ISB_TOPICS = {
    "isb-c": {**COMPACT, "internal.segment.bytes": str(ISB)},
    "isb-r": {"internal.segment.bytes": str(ISB), "retention.bytes": "100000", "retention.ms": "-1"},
}


def _produce_isb(bs: str) -> None:
    rnd = random.Random(11)
    clients.produce(bs, "isb-c", _keyed(rnd, 2500, 300, tomb_every=17), client="kafka-python", flush_every=10)
    clients.produce(bs, "isb-r", _keyed(rnd, 2500, 10_000), client="kafka-python", flush_every=10)


@pytest.fixture(scope="module")
def isb(tmp_path_factory):
    return _run(jars.LATEST_4, tmp_path_factory.mktemp("isb"), ISB_TOPICS, _produce_isb, {})


# the broker run of internal.segment.bytes (about 80 s of CI) under -m campaign (make campaign)
@pytest.mark.campaign
def test_internal_segment_bytes_rolls_compacts_and_retains_like_the_broker(isb):
    for t in ISB_TOPICS:
        pa, pb = isb["a"] / f"{t}-0", isb["b"] / f"{t}-0"
        assert len(_segments(pa)) > 5, f"{t}: the broker did not roll by internal.segment.bytes"
        assert _compare_partition(pa, pb) > 0
    # the cleaner grouped by internal.segment.bytes: no cleaned segment is larger than it
    assert all((isb["a"] / "isb-c-0" / f"{s:020d}.log").stat().st_size <= ISB for s in _segments(isb["a"] / "isb-c-0"))
    for name in ("log-start-offset-checkpoint", "cleaner-offset-checkpoint", "recovery-point-offset-checkpoint"):
        assert _entries(isb["a"], name, isb["topics"]) == _entries(isb["b"], name, isb["topics"]), name
    cleaned = [r for r in isb["compact"] if r.get("cleaned")]
    assert cleaned and cleaned[0]["segmentsOut"] > 1
    assert any(r.get("partition") == "isb-r-0" and r.get("losses") for r in isb["retain"])


@pytest.mark.campaign
def test_internal_segment_bytes_is_read_from_the_metadata(isb):
    cfg = ConfigResolver().log_config(isb["b"], "isb-c")
    assert cfg.segment_size == ISB and cfg.segment_bytes == 1073741824
    assert "__cluster_metadata" in cfg.source("internal.segment.bytes")


def test_kafka_3_9_refuses_internal_segment_bytes(tmp_path):
    b = Broker(jars.LATEST_3, data_dir=tmp_path / "data", server_properties=QUIET)
    try:
        b.start()
        with pytest.raises(Exception, match="internal.segment.bytes"):
            b.create_topic("isb", config={"internal.segment.bytes": str(ISB)})
        b.stop()
    finally:
        b.close()


# ---------------------------------------------------------------------------- (c) metadata trimmed below a snapshot
TRIM_TOPICS = {
    "mc": {**COMPACT, "segment.bytes": str(1 << 20)},
    "mr": {"segment.bytes": str(1 << 20), "retention.bytes": "1500000"},
}


def _metadata_server(version: str) -> dict[str, str]:
    small = {"metadata.log.max.snapshot.interval.ms": "1000", "metadata.log.max.record.bytes.between.snapshots": "512",
             "metadata.max.retention.ms": "1000", "metadata.max.retention.bytes": "1",
             "metadata.max.idle.interval.ms": "100"}
    if version.startswith("3."):
        return {**small, "metadata.log.segment.min.bytes": "4096", "metadata.log.segment.bytes": "4096"}
    return {**small, "internal.metadata.log.segment.bytes": "4096"}


def _produce_trim(bs: str) -> None:
    rnd = random.Random(12)
    old = int(time.time() * 1000) - 10 * DAY  # older than the 7-day default: retention by it would delete them
    clients.produce(bs, "mc", _keyed(rnd, 12_000, 2_000, tomb_every=23, ts=old, size=250), client="confluent",
                    flush_every=200)
    clients.produce(bs, "mr", _keyed(rnd, 12_000, 100_000, size=250), client="confluent", flush_every=200)


def _metadata_end(data: Path) -> int:
    mdir = data / "__cluster_metadata-0"
    last = sorted(mdir.glob("*.log"))[-1]
    with Segment(last) as seg:
        return seg.read_next_offset()


def _wait_trimmed(a: Broker) -> dict:
    """Wait until the broker deleted every metadata segment holding the topics' config records."""
    configs_end = _metadata_end(a.data_dir)  # the topics and their configs were created before this offset
    mdir = a.data_dir / "__cluster_metadata-0"

    def trimmed() -> bool:
        bases = sorted(int(p.name[:20]) for p in mdir.glob("*.log"))
        snaps = [int(p.name[:20]) for p in mdir.glob("*.checkpoint")]
        return bool(bases) and bases[0] > configs_end and bool(snaps) and max(snaps) > configs_end

    a.wait_until(trimmed, 120, "trim its metadata log below a snapshot")
    return {"configs_end": configs_end}


# the trimmed metadata log under -m campaign (make campaign): a broker that snapshots and trims takes minutes (about
# 130 s of CI each); offline, configs only in a metadata snapshot are tests/storage/test_plan_apply.py's
@pytest.fixture(scope="module", params=[pytest.param(v, marks=pytest.mark.campaign) for v in (jars.LATEST_4, jars.LATEST_3)])
def trimmed(request, tmp_path_factory):
    version = request.param
    return _run(version, tmp_path_factory.mktemp(f"trim-{version}"), TRIM_TOPICS, _produce_trim,
                _metadata_server(version), before_copy=_wait_trimmed) | {"version": version}


def test_the_metadata_log_was_trimmed_below_the_snapshot(trimmed):
    mdir = trimmed["b"] / "__cluster_metadata-0"
    first = min(int(p.name[:20]) for p in mdir.glob("*.log"))
    assert first > trimmed["configs_end"], "the config records are still in the metadata log: nothing is proven"
    md = read_cluster_metadata(mdir)
    assert md.snapshot is not None
    assert md.topic_configs["mc"]["cleanup.policy"][0] == "compact"
    assert "snapshot" in md.topic_configs["mc"]["cleanup.policy"][1]


def test_configs_only_in_the_snapshot_decide_like_the_broker(trimmed):
    for t in TRIM_TOPICS:
        pa, pb = trimmed["a"] / f"{t}-0", trimmed["b"] / f"{t}-0"
        assert _compare_partition(pa, pb) > 0
    for name in ("log-start-offset-checkpoint", "cleaner-offset-checkpoint", "recovery-point-offset-checkpoint"):
        assert _entries(trimmed["a"], name, trimmed["topics"]) == _entries(trimmed["b"], name, trimmed["topics"])
    mc = next(r for r in trimmed["retain"] if r.get("partition") == "mc-0") if any(
        r.get("partition") == "mc-0" for r in trimmed["retain"]) else {}
    assert not mc.get("operations"), "kafkalog would have deleted segments of the compacted topic"
    assert any(r.get("partition") == "mr-0" and r.get("losses") for r in trimmed["retain"]), \
        "kafkalog missed retention.bytes of mr (it lives only in the metadata snapshot)"
    assert any(r.get("cleaned") for r in trimmed["compact"])
