"""The compiled core's v0/v1 decoder (``storage/native/src/legacy.rs``) against a real broker.

One Kafka 3.9 ZooKeeper broker writing message format v1 (``LEGACY_V1_PROPS``; one topic at v0 through its
``message.format.version``) takes records uncompressed, gzip, snappy and lz4 (the broker writes v0/v1 wrappers
and, for a LogAppendTime topic, stamps them), serves them to a consumer, and stops. kafkalog then reads the
partition dirs through the public API with the core (``records()``, ``record_tuples()``, ``iter_arrow``) and
without it (``backend("python")``): the same records as each other and as the broker served them
(``FetchResponse`` decoded by confluent-kafka's librdkafka: offsets, keys, values, timestamps).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkalog.compat import jars
from kafkalog.compat.broker import LEGACY_V1_PROPS
from kafkalog.compat.clients import Record, consume, produce
from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.codec.native import backend, core
from kafkalog.storage.records import LegacyBatch, iter_arrow, iter_batches

pytestmark = pytest.mark.kafka

T0 = 1_700_000_000_000
TOPICS = {"fmt1": {}, "fmt0": {"message.format.version": "0.9.0"},
          "fmt1-lat": {"message.timestamp.type": "LogAppendTime"}}
N = 4 * 15


def _records(tag: str) -> list[Record]:
    return [Record(value=(f"{tag}-{i}-".encode() * (1 + i % 7)) if i % 11 != 5 else None,
                   key=f"k{i}".encode() if i % 3 else None, timestamp=T0 + i) for i in range(15)]


@pytest.fixture(scope="module")
def served(module_broker_factory, tmp_path_factory) -> dict[str, tuple[Path, list[tuple]]]:
    """Per topic: a copy of its partition dir and what the broker served."""
    b = module_broker_factory(jars.LATEST_3, mode="zk", server_properties=LEGACY_V1_PROPS)
    out = {}
    for topic, config in TOPICS.items():
        b.create_topic(topic, config=config)
        for codec in ("none", "gzip", "snappy", "lz4"):
            produce(b.bootstrap_servers, topic, _records(f"{topic}-{codec}"), compression=codec, flush_every=5)
    for topic in TOPICS:
        got = consume(b.bootstrap_servers, topic, client="confluent", count=N, timeout=60)
        # a v0 message has no timestamp: the client reports no timestamp type (and librdkafka 0)
        out[topic] = [(c.offset, c.key, c.value, -1 if c.timestamp_type is None else c.timestamp) for c in got]
    b.stop()
    root = tmp_path_factory.mktemp("legacy-native")
    return {t: (Path(shutil.copytree(b.partition_dir(t), root / f"{t}-0")), recs) for t, recs in out.items()}


def _segments(pdir: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(pdir.glob("*.log"))]


def _records_of(pdir: Path, full: bool) -> list[tuple]:
    out = []
    for data in _segments(pdir):
        for b in iter_batches(memoryview(data)):
            for r in (b.records() if full else b.record_tuples()):
                out.append((r.offset, r.timestamp, r.key, r.value, r.magic, r.crc) if full else tuple(r))
    return out


@pytest.mark.parametrize("topic", list(TOPICS))
def test_native_legacy_records_are_what_the_broker_serves(served, topic: str):
    assert core is not None, "the compiled core is not built"
    pdir, consumed = served[topic]
    assert len(consumed) == N
    batches = [b for data in _segments(pdir) for b in iter_batches(memoryview(data))]
    assert batches and all(isinstance(b, LegacyBatch) for b in batches)
    assert {b.magic for b in batches} == {0 if topic == "fmt0" else 1}
    assert {b.codec_name for b in batches} == {"none", "gzip", "snappy", "lz4"}
    native_full, native_tuples = _records_of(pdir, True), _records_of(pdir, False)
    with backend("python"):
        assert _records_of(pdir, True) == native_full
        assert _records_of(pdir, False) == native_tuples
    assert [(o, k, v, ts) for o, ts, k, v, _ in native_tuples] == consumed
    if topic == "fmt1-lat":  # the broker's append time on every message, the wrappers' inner ones included
        assert all(b.timestamp_type == 1 for b in batches)
        assert all(ts > T0 + 10**9 for _, ts, *_ in native_tuples)


@pytest.mark.parametrize("topic", list(TOPICS))
def test_native_legacy_arrow_is_the_python_path(served, topic: str):
    require_modules("pyarrow", extra="spark")
    import pyarrow as pa

    pdir, consumed = served[topic]
    for data in _segments(pdir):
        got = pa.Table.from_batches(list(iter_arrow(data, topic=topic, partition=0, segment="s.log", rows=7)))
        with backend("python"):
            want = pa.Table.from_batches(list(iter_arrow(data, topic=topic, partition=0, segment="s.log", rows=7,
                                                         native=False)))
        assert got.equals(want)
        rows = list(zip(got.column("offset").to_pylist(), got.column("key").to_pylist(),
                        got.column("value").to_pylist(), got.column("timestampMs").to_pylist(), strict=True))
        assert rows == [c for c in consumed if c[0] in set(got.column("offset").to_pylist())]
