"""Differential recovery tests: the real broker's startup recovery versus ``kafkalog repair`` (issue 5).

Per Kafka version, one broker writes a data dir (small segments, idempotent and transactional producers,
``index.interval.bytes=512``) and is SIGKILLed while a producer is still sending: the "crash" state
(unflushed segments, preallocated active indexes, no clean-shutdown marker, recovery points that lag).
Damaged copies of that dir are made, each twice: the broker starts on copy A, recovers it and is stopped
cleanly; ``kafkalog repair --kafka-exact`` runs on copy B. Every file is then compared byte for byte except
where the broker's bytes cannot be reproduced offline, which are compared semantically:

* ``.kafka_cleanshutdown``: the broker writes its broker epoch (from the controller); kafkalog keeps -1;
* ``recovery-point-offset-checkpoint``/``log-start-offset-checkpoint``: same version and entries, but the
  broker writes them in Scala hash-map order;
* ``leader-epoch-checkpoint``: becoming leader after the restart appends ``(new epoch, log end offset)``;
  everything before that entry must be equal;
* ``replication-offset-checkpoint`` (high watermarks) and ``__cluster_metadata-0`` belong to the replica
  manager and the controller, which kafkalog does not emulate;
* ``*.deleted`` files the broker leaves behind (deleted ``file.delete.delay.ms`` later, or at its next
  load) count as absent: kafkalog deletes at once.

Dirs: "crash" (torn last batch, CRC flipped in the active segment, truncated active ``.index``, deleted
``.timeindex`` below the recovery point, leftover ``.cleaned``/``.swap`` from an interrupted compaction,
SIGKILL during produce, untrimmed preallocated indexes), "checkpoint" (a corrupt recovery-point line, so
everything is recovered, plus a CRC flipped in the middle of the first segment: truncation there and every
later segment deleted) and "metadata" (zero-length ``partition.metadata``, on which the broker fails).
A broker started on the repaired + flushed "crash" copy performs no recovery and serves the same records.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkalog.compat.conformance import compare_recovered_dirs as compare_dirs
from kafkalog.compat.conformance import kill_during_produce
from kafkalog.compat.errors import BrokerError
from kafkalog.storage.records import LogScanner

pytestmark = pytest.mark.kafka

VERSIONS = ("4.3.1", "3.9.2")
SEGMENT = 6000
TOPICS = {  # topic -> partitions
    "killed": 2, "txn": 1, "torn": 1, "crc": 1, "index": 1, "timeindex": 1, "swap": 1, "meta": 1,
}
BROKER_PROPS = {
    "log.initial.task.delay.ms": "0",
    "log.flush.offset.checkpoint.interval.ms": "500",
    "log.flush.start.offset.checkpoint.interval.ms": "500",
}
RECOVERY_LINES = ("Recovering unflushed segment", "no clean shutdown file was found")


def _broker(version: str, data_dir: Path):
    from kafkalog.compat.broker import Broker

    return Broker(version, data_dir=data_dir, server_properties=BROKER_PROPS)


def _kafkalog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", *args], capture_output=True, text=True,
                          timeout=300)


# ------------------------------------------------------------------------------------------ the crash


def _produce_and_kill(version: str, work: Path) -> Path:
    from kafkalog.compat import jars
    from kafkalog.compat.clients import Record, consume, create_topic, produce

    seg_key = "internal.segment.bytes" if jars.parse_version(version) >= (4, 1) else "segment.bytes"
    b = _broker(version, work / "data").start()
    try:
        for t, n in TOPICS.items():
            create_topic(b.bootstrap_servers, t, partitions=n,
                         config={seg_key: str(SEGMENT), "index.interval.bytes": "512"})
        recs = [Record(value=b"value-%05d-" % i + b"x" * (i % 90), key=b"k%d" % (i % 13),
                       headers=(("h", b"%d" % i),), partition=0) for i in range(600)]
        for t in ("torn", "crc", "index", "timeindex", "swap", "meta"):
            produce(b.bootstrap_servers, t, recs, flush_every=12, idempotent=True)
        produce(b.bootstrap_servers, "killed", [Record(r.value, r.key, r.headers, partition=i % 2)
                                                for i, r in enumerate(recs)], flush_every=10, idempotent=True)
        tx = dict(flush_every=10, client="confluent")
        produce(b.bootstrap_servers, "txn", recs[:100], transactional_id="t1", **tx)
        produce(b.bootstrap_servers, "txn", recs[100:200], transactional_id="t1", transaction="abort", **tx)
        produce(b.bootstrap_servers, "txn", recs[200:300], transactional_id="t2", **tx)
        produce(b.bootstrap_servers, "txn", recs[300:400], transactional_id="t2", transaction="abort", **tx)
        produce(b.bootstrap_servers, "txn", recs[400:450], idempotent=True, flush_every=10)
        consume(b.bootstrap_servers, "torn", client="confluent", group_id="g1", commit=True, count=600)
        time.sleep(2.0)  # recovery-point checkpoints written (every 500 ms)
        kill_during_produce(b, "killed", partitions=2, seconds=1.5)
    finally:
        b.close()
    (work / "data" / ".lock").unlink(missing_ok=True)
    return work / "data"


def _segments(pdir: Path) -> list[Path]:
    return sorted(pdir.glob("*.log"))


def _batch_positions(log: Path) -> list[tuple[int, int]]:
    data = log.read_bytes()
    return [(b.position, b.size) for b in LogScanner(memoryview(data))]


def _damage_crash(d: Path) -> None:
    # torn last batch: the last segment ends in the middle of its last batch
    last = _segments(d / "torn-0")[-1]
    pos, size = _batch_positions(last)[-1]
    os.truncate(last, pos + size // 2)
    # CRC flipped in the middle of the active segment (a record byte of a middle batch)
    last = _segments(d / "crc-0")[-1]
    batches = _batch_positions(last)
    pos, size = batches[len(batches) // 2]
    with open(last, "r+b") as f:
        f.seek(pos + size - 5)
        byte = f.read(1)
        f.seek(pos + size - 5)
        f.write(bytes([byte[0] ^ 0xFF]))
    # truncated .index of the active segment (the broker's kill left it preallocated)
    last = _segments(d / "index-0")[-1]
    os.truncate(last.with_suffix(".index"), 13)
    # deleted .timeindex of the first segment (below the recovery point: created empty, not rebuilt)
    _segments(d / "timeindex-0")[0].with_suffix(".timeindex").unlink()
    # interrupted compaction of segments 1-2 into one: a complete .swap, and a .cleaned of a later one
    segs = _segments(d / "swap-0")
    assert len(segs) >= 5, segs
    swap = segs[1].with_name(segs[1].name + ".swap")
    swap.write_bytes(segs[1].read_bytes() + segs[2].read_bytes())
    idx = segs[1].with_suffix(".index")
    shutil.copy(idx, idx.with_name(idx.name + ".swap"))
    cleaned = segs[3].with_name(segs[3].name + ".cleaned")
    cleaned.write_bytes(segs[3].read_bytes()[:1000])


def _damage_checkpoint(d: Path) -> None:
    cp = d / "recovery-point-offset-checkpoint"
    lines = cp.read_text().splitlines()
    assert len(lines) > 3, lines
    lines[3] = "crc 0 not-a-number"
    cp.write_text("\n".join(lines) + "\n")
    first = _segments(d / "crc-0")[0]
    batches = _batch_positions(first)
    pos, size = batches[len(batches) // 2]
    with open(first, "r+b") as f:
        f.seek(pos + 30)
        byte = f.read(1)
        f.seek(pos + 30)
        f.write(bytes([byte[0] ^ 0x01]))


def _damage_metadata(d: Path) -> None:
    (d / "meta-0" / "partition.metadata").write_bytes(b"")


DAMAGES = {"crash": _damage_crash, "checkpoint": _damage_checkpoint, "metadata": _damage_metadata}


# ------------------------------------------------------------------------------------------ comparing


def _read_all(bootstrap: str) -> dict[str, list[tuple]]:
    """Every record of the data topics (read_uncommitted and read_committed offsets) as consumers see them."""
    from confluent_kafka import Consumer, TopicPartition

    out: dict[str, list[tuple]] = {}
    for isolation in ("read_uncommitted", "read_committed"):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkalog-diff", "enable.auto.commit": False,
                      "isolation.level": isolation, "log_level": 0, "fetch.wait.max.ms": 50})
        try:
            tps = [TopicPartition(t, p, 0) for t, n in TOPICS.items() for p in range(n)]
            ends = {(tp.topic, tp.partition): c.get_watermark_offsets(tp, timeout=20)[1] for tp in tps}
            want = {k: v for k, v in ends.items() if v > 0}
            c.assign([tp for tp in tps if (tp.topic, tp.partition) in want])
            got: dict[tuple[str, int], list[tuple]] = {k: [] for k in want}
            pos = dict.fromkeys(want, 0)
            deadline = time.monotonic() + 60
            while any(pos[k] < want[k] for k in want) and time.monotonic() < deadline:
                for m in c.consume(500, 0.5):
                    if m.error():
                        continue
                    k = (m.topic(), m.partition())
                    got[k].append((m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()))
                    pos[k] = m.offset() + 1
                # read_committed stops at the LSO; aborted/control offsets are skipped
                for tp in c.position([TopicPartition(t, p) for t, p in want]):
                    pos[(tp.topic, tp.partition)] = max(pos[(tp.topic, tp.partition)], tp.offset)
            for (t, p), recs in got.items():
                out[f"{isolation}:{t}-{p}"] = recs
        finally:
            c.close()
    return out


# ------------------------------------------------------------------------------------------ fixtures


def _served(version: str, data_dir: Path) -> tuple[dict[str, list[tuple]], str]:
    """Start a broker on ``data_dir``: every record it serves (:func:`_read_all`) and its log once stopped."""
    broker = _broker(version, data_dir).start()
    try:
        reads = _read_all(broker.bootstrap_servers)
    finally:
        broker.stop()
    return reads, broker.log_path.read_text(errors="replace")


# 3.9.2's recovery under -m campaign (make campaign); CI runs 4.3.1's (the recovery rules are the same code in
# both lines' LogLoader)
@pytest.fixture(scope="module", params=[VERSIONS[0], *(pytest.param(v, marks=pytest.mark.campaign) for v in VERSIONS[1:])])
def crashed(request, tmp_path_factory):
    version = request.param
    root = tmp_path_factory.mktemp(f"recovery-{version}")
    base = _produce_and_kill(version, root / "base")
    return version, root, base


def _copies(root: Path, base: Path, name: str) -> tuple[Path, Path]:
    out = []
    for side in ("A", "B"):
        d = root / f"{name}-{side}" / "data"
        shutil.copytree(base, d, symlinks=True)
        DAMAGES[name](d)
        out.append(d)
    return out[0], out[1]


# ------------------------------------------------------------------------------------------ tests


def test_crash_scenarios_equal_broker_recovery(crashed):
    version, root, base = crashed
    a, b = _copies(root, base, "crash")
    dry = _kafkalog("repair", "--dry-run", "--kafka-exact", "--json", str(b))
    assert dry.returncode == 1, dry.stderr
    plan = [json.loads(line) for line in dry.stdout.splitlines()]
    kinds = {(op["op"], Path(op["path"]).parent.name) for p in plan for op in p.get("operations", [])}
    # every truncation is a reported loss, with its offsets and reason
    losses = {p["partition"]: p["losses"] for p in plan if p.get("losses")}
    assert {"torn-0", "crc-0"} <= set(losses), losses
    assert all(loss["damage"] and loss["reason"] and loss["bytes"] > 0 for ls in losses.values() for loss in ls)
    assert ("truncate", "torn-0") in kinds and ("truncate", "crc-0") in kinds, plan
    assert any(k == "rename" and part == "swap-0" for k, part in kinds), plan
    assert not (b / ".kafka_cleanshutdown").exists()

    recovered_reads, log = _served(version, a)
    assert "Recovering unflushed segment" in log

    rep = _kafkalog("repair", "--no-backup", "--kafka-exact", str(b))
    assert rep.returncode == 1, rep.stdout + rep.stderr
    flush = _kafkalog("flush", str(b))
    assert flush.returncode == 0, flush.stdout + flush.stderr
    assert compare_dirs(a, b) == []
    # what repair did, seen from the files
    assert not list((b / "swap-0").glob("*.swap")) and not list((b / "swap-0").glob("*.cleaned"))
    assert (b / "timeindex-0" / _segments(b / "timeindex-0")[0].with_suffix(".timeindex").name).stat().st_size == 0

    # a broker on the repaired + flushed copy recovers nothing and serves the same records
    repaired_reads, log_b = _served(version, b)
    assert not [line for line in log_b.splitlines() if any(s in line for s in RECOVERY_LINES)
                and "__cluster_metadata" not in line]
    assert repaired_reads == recovered_reads
    assert repaired_reads["read_committed:txn-0"] != repaired_reads["read_uncommitted:txn-0"]
    assert len(repaired_reads["read_uncommitted:torn-0"]) < 600  # the torn batch is gone


def test_corrupt_checkpoint_and_mid_log_crc_equal_broker_recovery(crashed):
    version, root, base = crashed
    a, b = _copies(root, base, "checkpoint")
    broker = _broker(version, a).start()
    broker.stop()
    assert "Recovering unflushed segment" in broker.log_path.read_text(errors="replace")
    rep = _kafkalog("repair", "--no-backup", "--kafka-exact", str(b))
    assert rep.returncode == 1
    assert "recovery-point-offset-checkpoint" in rep.stdout  # says why everything is recovered
    assert compare_dirs(a, b) == []
    assert len(_segments(b / "crc-0")) == 1  # later segments deleted after the truncated one


def test_zero_length_partition_metadata(crashed):
    version, root, base = crashed
    a, b = _copies(root, base, "metadata")

    broker = _broker(version, a)
    with pytest.raises(BrokerError):  # the broker refuses to start
        broker.start(timeout=90)
    log = broker.log_path.read_text(errors="replace")
    assert "Error starting LogManager" in log or "partition.metadata" in log, log[-3000:]

    dry = _kafkalog("repair", "--dry-run", "--kafka-exact", str(b))
    # the plan groups operations under their partition: meta-0's block names the rewrite and why
    lines = dry.stdout.splitlines()
    start = lines.index("  meta-0")
    block = "\n".join(itertools.takewhile(lambda line: line.startswith("    "), lines[start + 1:]))
    assert "rewrite partition.metadata" in block and "rewritten with topic id" in block, dry.stdout
    assert "Error starting LogManager" in dry.stdout  # says why the broker refuses
    rep = _kafkalog("repair", "--no-backup", "--kafka-exact", str(b))
    assert rep.returncode == 1, rep.stdout + rep.stderr
    text = (b / "meta-0" / "partition.metadata").read_text()
    assert text == (base / "meta-0" / "partition.metadata").read_text()
    broker_b = _broker(version, b).start()
    broker_b.stop()
    log_b = broker_b.log_path.read_text(errors="replace")
    assert not [line for line in log_b.splitlines() if any(s in line for s in RECOVERY_LINES)
                and "__cluster_metadata" not in line]
