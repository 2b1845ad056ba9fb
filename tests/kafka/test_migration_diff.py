"""Differential tests of convert / migrate / export-import against real brokers.

* A real Kafka 3.9 ZooKeeper broker writes v0 and v1 segments (uncompressed and compressed); `convert` rewrites
  them as v2; the partition is migrated (with the destination's topic id) into a Kafka 4.x KRaft broker's
  data dir; that broker serves exactly the original records at the original offsets to kafka-python and
  confluent-kafka consumers.
* Kafka 4.x's own cleaner converts a compacted legacy partition (KAFKA-13093); kafkalog's conversion of the same
  input gives the same batches byte for byte (uncompressed data).
* A v2 partition migrated under another topic name/id is served with the same offsets and records.
* export -> import into the 4.x broker's dir is served identically; export of the import is identical.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from engines import convert, migrate

from kafkalog.compat import jars
from kafkalog.compat.broker import LEGACY_V0_PROPS, LEGACY_V1_PROPS, Broker
from kafkalog.compat.clients import Record, consume, produce
from kafkalog.storage.engine.convert import ConvertOptions
from kafkalog.storage.engine.export import export_jsonl, iter_export_rows
from kafkalog.storage.engine.import_ import import_files
from kafkalog.storage.engine.message_format import audit
from kafkalog.storage.engine.migrate import MigrateOptions
from kafkalog.storage.files.partition_metadata import read_partition_metadata
from kafkalog.storage.reports.diff import diff_paths
from kafkalog.storage.reports.partition_records import iter_partition_batches, iter_partition_records

pytestmark = pytest.mark.kafka

T0 = 1_700_000_000_000


def _records(n: int, tag: str, keyed: bool = True) -> list[Record]:
    return [Record(value=f"{tag}-value-{i}".encode() * 3, key=(f"{tag}-k{i}".encode() if keyed else None),
                   timestamp=T0 + i) for i in range(n)]


def _legacy_partition(props: dict[str, str], topic: str, out: Path) -> Path:
    """Produce uncompressed + gzip + lz4 data through a real 3.9 ZK broker writing legacy formats."""
    with Broker(jars.LATEST_3, mode="zk", server_properties=props) as b:
        b.create_topic(topic)
        produce(b.bootstrap_servers, topic, _records(30, "plain"), flush_every=1)
        produce(b.bootstrap_servers, topic, _records(20, "gz"), compression="gzip", flush_every=5)
        produce(b.bootstrap_servers, topic, _records(20, "lz"), compression="lz4", flush_every=4)
        b.stop()
        shutil.copytree(b.partition_dir(topic), out / f"{topic}-0")
    return out / f"{topic}-0"


@pytest.fixture(scope="module")
def legacy(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("legacy")
    return {"v0": _legacy_partition(LEGACY_V0_PROPS, "legacy0", root / "v0"),
            "v1": _legacy_partition(LEGACY_V1_PROPS, "legacy1", root / "v1")}


@pytest.fixture(scope="module")
def broker4(tmp_path_factory):
    b = Broker(jars.LATEST_4, data_dir=tmp_path_factory.mktemp("k4") / "data",
               server_properties={"log.cleaner.backoff.ms": "200", "log.retention.check.interval.ms": "600000"})
    b.start()
    yield b
    b.close()


def _served(b: Broker, topic: str, n: int) -> dict[str, list[tuple]]:
    out = {}
    for client in ("kafka-python", "confluent"):
        got = consume(b.bootstrap_servers, topic, client=client, count=n, timeout=60)
        out[client] = [(c.offset, c.key, c.value, c.timestamp) for c in got]
    return out


def _install(b: Broker, src_partition: Path, topic: str, opts: MigrateOptions | None = None, **create) -> None:
    """Create ``topic`` on the running broker, stop it, migrate ``src_partition`` in with its topic id."""
    b.create_topic(topic, **create)
    deadline = time.monotonic() + 30
    while not (b.partition_dir(topic) / "partition.metadata").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    b.stop()
    topic_id = read_partition_metadata(b.partition_dir(topic) / "partition.metadata").topic_id
    o = opts or MigrateOptions()
    o.topic, o.topic_id, o.overwrite, o.backup = topic, topic_id, True, False
    migrate(src_partition, b.data_dir, o)
    b.start()


@pytest.mark.parametrize("fmt", ["v0", "v1"])
def test_converted_legacy_served_by_kafka4(legacy, broker4, tmp_path: Path, fmt: str):
    src = legacy[fmt]
    orig = [(o, k, v, ts) for o, ts, k, v, *_ in iter_partition_records(src)]
    assert len(orig) == 70 and {b.magic for b in iter_partition_batches(src)} == {0 if fmt == "v0" else 1}
    work = tmp_path / "work" / src.name
    shutil.copytree(src, work)
    convert([work], backup=False)
    assert list(audit([work])) == []
    assert diff_paths(src, work).equal
    topic = f"converted-{fmt}"
    _install(broker4, work, topic)
    served = _served(broker4, topic, len(orig))
    for client, got in served.items():
        assert [(o, k, v) for o, k, v, _ in got] == [(o, k, v) for o, k, v, _ in orig], client
        want_ts = [-1 if fmt == "v0" else ts for *_, ts in orig]
        assert [ts if ts is not None else -1 for *_, ts in got] == want_ts, client


def test_kafka4_cleaner_conversion_is_byte_identical(legacy, broker4, tmp_path: Path):
    """Kafka 4's cleaner rewrites legacy batches as v2 (KAFKA-13093): same bytes as `kafkalog convert`."""
    src = tmp_path / "plain" / "legacy1-0"
    src.mkdir(parents=True)
    # the uncompressed part of the v1 partition, split into two segments so the cleaner has a non-active one
    batches = [b for b in iter_partition_batches(legacy["v1"]) if b.data[17] & 0x07 == 0]
    assert len(batches) == 30
    (src / "00000000000000000000.log").write_bytes(b"".join(b.data for b in batches[:20]))
    (src / "00000000000000000020.log").write_bytes(b"".join(b.data for b in batches[20:]))
    ours = tmp_path / "ours" / "legacy1-0"
    shutil.copytree(src, ours)
    convert([ours], backup=False)
    topic = "cleaned-v1"
    _install(broker4, src, topic, config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                          "segment.bytes": "1048576"})
    pdir = broker4.partition_dir(topic)
    deadline = time.monotonic() + 90
    cleaned = []
    while time.monotonic() < deadline:
        cleaned = [b for b in iter_partition_batches(pdir) if b.base_offset < 20]
        if cleaned and all(b.magic == 2 for b in cleaned):
            break
        time.sleep(0.5)
    assert cleaned and all(b.magic == 2 for b in cleaned), "the broker's cleaner did not run"
    mine = [b for b in iter_partition_batches(ours) if b.base_offset < 20]
    assert [b.data for b in cleaned] == [b.data for b in mine]


def test_migrated_v2_partition_served_with_same_offsets(broker4, tmp_path: Path):
    broker4.create_topic("v2src")
    produce(broker4.bootstrap_servers, "v2src", _records(40, "a"), flush_every=7)
    produce(broker4.bootstrap_servers, "v2src", _records(25, "z"), compression="zstd", flush_every=5)
    broker4.stop()
    snap = tmp_path / "src" / "v2src-0"
    shutil.copytree(broker4.partition_dir("v2src"), snap)
    broker4.start()
    want = [(o, k, v, ts) for o, ts, k, v, *_ in iter_partition_records(snap)]
    _install(broker4, snap, "v2dst")
    served = _served(broker4, "v2dst", len(want))
    for client, got in served.items():
        assert got == want, client
    # nothing stray: the source topic is still served as before
    assert [(c.offset, c.value) for c in consume(broker4.bootstrap_servers, "v2src", count=len(want))] == \
        [(o, v) for o, _, v, _ in want]

    # export -> import -> served, and export of the import is identical (uncompressed part byte-identical)
    export_jsonl([snap], tmp_path / "e.jsonl")
    imp = tmp_path / "imp"
    import_files([tmp_path / "e.jsonl"], imp)
    a = [{k: v for k, v in r.items() if k != "position"} for r in iter_export_rows([snap])]
    b = [{k: v for k, v in r.items() if k != "position"} for r in iter_export_rows([imp])]
    assert a == b
    first_zstd = next(i for i, r in enumerate(iter_export_rows([snap])) if r["codec"] == "zstd")
    assert list(iter_export_rows([snap]))[:first_zstd] == list(iter_export_rows([imp]))[:first_zstd]
    _install(broker4, imp / "v2src-0", "imported")
    served = _served(broker4, "imported", len(want))
    for client, got in served.items():
        assert got == want, client


def test_convert_options_group_and_codec_served(legacy, broker4, tmp_path: Path):
    work = tmp_path / "g" / "legacy1-0"
    shutil.copytree(legacy["v1"], work)
    convert([work], ConvertOptions(group_uncompressed=True, codec="zstd"), backup=False)
    assert diff_paths(legacy["v1"], work).equal
    n = sum(1 for _ in iter_partition_records(work))
    _install(broker4, work, "grouped")
    served = _served(broker4, "grouped", n)
    want = [(o, k, v) for o, _, k, v, *_ in iter_partition_records(legacy["v1"])]
    for client, got in served.items():
        assert [(o, k, v) for o, k, v, _ in got] == want, client
