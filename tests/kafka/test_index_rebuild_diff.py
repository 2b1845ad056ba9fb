"""Index rebuilds against a real broker (issue 3).

Per Kafka version, one broker writes several small segments (``segment.bytes`` 6000, ``index.interval.bytes``
512) into an uncompressed, an lz4 and a transactional topic (commits and aborts, so the closed segments carry
``.txnindex`` files), and is stopped cleanly. The data dir is copied ("orig"); in the broker's own dir the
``.index``, ``.timeindex`` and ``.txnindex`` of every closed segment are deleted and the broker is started on it
again: at load it finds no offset index, recovers those segments and rebuilds all three indexes
(``LogLoader.loadSegmentFiles`` -> ``LogSegment.recover``), then it is stopped cleanly. kafkalog's
recovery-time rebuild of the same segments from "orig" (``PartitionLog.rebuild_segment_indexes``: the
per-batch rule plus producer state from the snapshots for the transaction index) must equal the broker's
files byte for byte.

Also: ``verify`` finds no error in the broker-written dir, the leader-written ``.index`` files equal the
recovery-time rebuild (one batch per leader append), and segments + indexes built by kafkalog pass
DumpLogSegments ``--verify-index-only`` (no mismatch, nothing "not found") and ``--index-sanity-check``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkalog.compat.conformance import compare_rebuilt_indexes, delete_closed_segment_indexes
from kafkalog.storage.codec.compression import GZIP, LZ4, NONE, ZSTD
from kafkalog.storage.log.segment import recover_segment, replay_appends
from kafkalog.storage.records import build_batch
from kafkalog.storage.records.builder import build_legacy
from kafkalog.storage.reports.verify import verify_paths

pytestmark = pytest.mark.kafka

SEGMENT = 6000
INTERVAL = 512
TOPICS = ("plain", "lz4", "txn")


@dataclass
class Run:
    version: str
    orig: Path  # the data dir as the broker left it after the first clean shutdown
    rebuilt: Path  # the broker's dir after it rebuilt the deleted indexes
    deleted: list[Path]  # index files deleted before the restart (paths relative to the data dir)
    broker_log: str


@pytest.fixture(scope="module")
def run(kafka_version: str, module_broker_factory, tmp_path_factory) -> Run:
    from kafkalog.compat import jars
    from kafkalog.compat.clients import Record, create_topic, produce

    work = tmp_path_factory.mktemp(f"rebuild-{kafka_version}")
    seg_key = "internal.segment.bytes" if jars.parse_version(kafka_version) >= (4, 1) else "segment.bytes"
    b = module_broker_factory(kafka_version, data_dir=work / "data")
    for t in TOPICS:
        create_topic(b.bootstrap_servers, t, partitions=1, config={seg_key: str(SEGMENT),
                                                                   "index.interval.bytes": str(INTERVAL)})
    recs = [Record(value=b"value-%05d-" % i + b"x" * (i % 120), key=b"k%d" % (i % 17),
                   headers=(("h", b"%d" % i),), partition=0) for i in range(500)]
    produce(b.bootstrap_servers, "plain", recs, flush_every=7)
    produce(b.bootstrap_servers, "lz4", recs, flush_every=11, compression="lz4")
    tx = dict(flush_every=9, client="confluent")
    produce(b.bootstrap_servers, "txn", recs[:90], transactional_id="t1", **tx)
    produce(b.bootstrap_servers, "txn", recs[90:180], transactional_id="t1", transaction="abort", **tx)
    produce(b.bootstrap_servers, "txn", recs[180:270], transactional_id="t2", **tx)
    produce(b.bootstrap_servers, "txn", recs[270:360], transactional_id="t2", transaction="abort", **tx)
    produce(b.bootstrap_servers, "txn", recs[360:450], transactional_id="t1", transaction="abort", **tx)
    b.stop()
    orig = work / "orig"
    shutil.copytree(b.data_dir, orig, symlinks=True)
    for t in TOPICS:
        logs = sorted((b.data_dir / f"{t}-0").glob("*.log"))
        assert len(logs) >= 3, f"{t}: expected several segments, found {len(logs)}"
    deleted = delete_closed_segment_indexes(b.data_dir, TOPICS)
    start = b.log_path.stat().st_size
    b.start()
    b.stop()
    with open(b.log_path, "rb") as f:
        f.seek(start)
        broker_log = f.read().decode("utf-8", "replace")
    return Run(kafka_version, orig, b.data_dir, deleted, broker_log)


def test_broker_rebuilt_the_deleted_indexes(run: Run):
    assert "rebuilding index files" in run.broker_log
    assert any(p.suffix == ".txnindex" for p in run.deleted), "the txn topic should have aborted transactions"
    for rel in run.deleted:
        if rel.suffix != ".txnindex":
            assert (run.rebuilt / rel).exists(), rel


@pytest.mark.parametrize("topic", TOPICS)
def test_recovery_rebuild_equals_kafka(run: Run, topic: str):
    # per closed segment: kafkalog's rebuild covers the whole segment, its .index/.timeindex/.txnindex equal
    # the broker's bytes, and (a leader writes one batch per append) so does the leader-written .index
    compared, problems = compare_rebuilt_indexes(run.orig / f"{topic}-0", run.rebuilt / f"{topic}-0",
                                                 index_interval_bytes=INTERVAL, check_leader_index=True)
    assert problems == []
    assert compared >= 2


def test_verify_finds_no_error_in_broker_dirs(run: Run):
    for d in (run.orig, run.rebuilt):
        report = verify_paths([d], deep=True, workers=2)
        assert [str(f) for f in report.findings if f.severity == "error"] == []
        assert report.stats.partitions >= len(TOPICS)


def _specs(base: int) -> dict[str, list[bytes]]:
    t0 = 1_700_000_000_000
    return {
        "v2-none": [build_batch([(o, t0 + o, b"k%d" % (o % 5), b"v" * (o % 300)) for o in range(i, i + 4)],
                                base_offset=i, codec=NONE) for i in range(base, base + 400, 4)],
        "v2-codecs": [build_batch([(o, t0 + (o * 7) % 50, None, b"w" * 200) for o in range(i, i + 9)],
                                  base_offset=i, codec=(NONE, GZIP, LZ4, ZSTD)[(i - base) // 9 % 4])
                      for i in range(base, base + 450, 9)],
        "v1": [build_legacy([(o, t0 + o, b"k", b"x" * 150) for o in range(i, i + 3)], magic=1, codec=GZIP,
                            base_offset=i) for i in range(base, base + 300, 3)]
        + [build_legacy([(o, t0 + o, b"k", b"x" * 150)], magic=1, base_offset=o) for o in range(base + 300, base + 400)],
        "v0": [build_legacy([(o, -1, b"k", b"y" * 150)], magic=0, base_offset=o) for o in range(base, base + 200)],
    }


def _kafkalog_segments(root: Path) -> list[Path]:
    """Segments written by kafkalog with indexes from both of Kafka's rules, v2 (all codecs) and v1/v0."""
    out = []
    base, base2 = 1000, 101_000
    for name, batches in _specs(base).items():
        d = root / f"{name}-0"
        d.mkdir(parents=True)
        log = b"".join(batches)
        (d / f"{base:020d}.log").write_bytes(log)
        r = recover_segment(log, base, index_interval_bytes=INTERVAL, on_overflow="stop")
        (d / f"{base:020d}.index").write_bytes(r.offset_index.to_bytes(trim=True))
        (d / f"{base:020d}.timeindex").write_bytes(r.time_index.to_bytes(trim=True))
        out += [d / f"{base:020d}.index", d / f"{base:020d}.timeindex"]
        # the append-time rule with multi-batch appends (a follower) in a second segment; its offset-index
        # entries carry the last offset of a 3-batch append, which DumpLogSegments counts as mismatches
        batches2 = _specs(base2)[name]
        log2 = b"".join(batches2)
        (d / f"{base2:020d}.log").write_bytes(log2)
        positions, pos = [], 0
        for b in batches2:
            positions.append(pos)
            pos += len(b)
        r = replay_appends(log2, base2, appends=positions[::3], index_interval_bytes=INTERVAL)
        (d / f"{base2:020d}.index").write_bytes(r.offset_index.to_bytes(trim=True))
        (d / f"{base2:020d}.timeindex").write_bytes(r.time_index.to_bytes(trim=True))
        out.append(d / f"{base2:020d}.timeindex")
    return out


def test_kafkalog_indexes_pass_dumplogsegments_checks(run: Run, tmp_path: Path):
    from kafkalog.compat.tools import dump_log_segments

    files = _kafkalog_segments(tmp_path)
    verify = dump_log_segments(run.version, files, deep=False, print_data=False, verify_index_only=True)
    assert verify.timeindex_not_found == []
    for f in verify.files:
        assert f.error is None and f.entries == [] and not f.unparsed, f.path
        assert f.index_mismatches == [] and f.timestamp_mismatches == [] and f.out_of_order_timestamps == [], f.path
    sanity = dump_log_segments(run.version, files, deep=False, print_data=False, index_sanity_check=True)
    for f in sanity.files:
        assert f.passed_sanity_check or f.empty, f.path
    # the broker-rebuilt indexes pass the same checks
    rebuilt = [run.rebuilt / r for r in run.deleted if r.suffix != ".txnindex"]
    check = dump_log_segments(run.version, rebuilt, deep=False, print_data=False, verify_index_only=True)
    assert check.timeindex_not_found == []
    assert all(f.index_mismatches == [] and f.timestamp_mismatches == [] for f in check.files)
