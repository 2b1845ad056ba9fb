"""kafkalog's remote store reader and ``rehydrate`` against a real Kafka 4.3.1 broker with tiered storage
(``LocalTieredStorage`` from kafka-storage's test jar, ``TopicBasedRemoteLogMetadataManager``).

One module-scoped run: a tiered broker (``remote.log.storage.system.enable=true``) gets a topic with
``remote.storage.enable=true``, 2 KiB segments and ``local.retention.bytes=1``; keyed records with headers are
produced (with an aborted and a committed transaction between them) until ``RemoteLogManager`` has uploaded the
segments past the transactions and the log retention deleted them locally. Consumers (read_uncommitted and
read_committed) read the topic from offset 0 through the broker (remote fetches included). Then:

* ``remote verify`` is clean and ``remote ls`` lists exactly the ``COPY_SEGMENT_FINISHED`` segments of
  ``__remote_log_metadata``;
* the records kafkalog reads from every remote segment equal the consumer's (offset, key, value, headers,
  timestamp);
* the partition rehydrated from the remote store alone, into a new cluster's broker with tiered storage off (the
  topic created there without ``remote.storage.enable``, ``--topic-id`` its id), is served to a consumer with the
  same records at the same offsets, and a ``read_committed`` consumer still skips the aborted transaction.

The tiered cluster itself is not restarted with tiered storage off: while its metadata holds a topic with
``remote.storage.enable=true``, ``LogConfig.validateRemoteStorageOnlyIfSystemEnabled`` rejects that config ("You
have to delete all topics with the property remote.storage.enable=true before disabling tiered storage
cluster-wide"; from Kafka's source, not exercised here).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkalog.compat import jars
from kafkalog.compat.clients import Record, consume, produce
from kafkalog.compat.tiered import TIERED_TOPIC_CONFIG, remote_storage_dir, tiered_broker_kwargs
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.remote import open_remote_store
from kafkalog.storage.remote.inspect import (
    iter_remote_segments,
    list_remote,
    read_remote_metadata,
    verify_remote,
)
from kafkalog.storage.remote.rehydrate import RehydrateOptions, rehydrate

pytestmark = pytest.mark.kafka

VERSION = jars.LATEST_4
N = 80


def _local_bases(pdir: Path) -> list[int]:
    return sorted(int(p.stem) for p in pdir.glob("*.log"))


def _row(offset, key, value, headers, ts):
    return (offset, key, value, tuple((k, bytes(v) if v is not None else None) for k, v in headers), ts)


@pytest.fixture(scope="module")
def tiered(module_broker_factory, tmp_path_factory):
    remote = tmp_path_factory.mktemp("remote")
    broker = module_broker_factory(VERSION, **tiered_broker_kwargs(VERSION, remote))
    broker.create_topic("tiered", config=TIERED_TOPIC_CONFIG | {"internal.segment.bytes": "2048",
                                                                "local.retention.bytes": "1"})
    records = [Record(b"v%d-" % i + b"x" * 90, key=b"k%d" % (i % 7), headers=(("h", b"%d" % i),))
               for i in range(N)]
    bs = broker.bootstrap_servers
    produce(bs, "tiered", records[:N // 2], flush_every=4)
    # an aborted and a committed transaction (a .txnindex and control batches in the uploaded segments)
    produce(bs, "tiered", records[:8], transactional_id="t1", transaction="abort", flush_every=4)
    produce(bs, "tiered", records[8:16], transactional_id="t1", transaction="commit", flush_every=4)
    produce(bs, "tiered", records[N // 2:], flush_every=4)
    pdir = broker.partition_dir("tiered")
    store = remote_storage_dir(remote)
    broker.wait_until(lambda: max((int(p.name.split("-")[0]) for p in store.glob("tiered-0-*/*.log")), default=0)
                      > N // 2 + 20 and _local_bases(pdir)[0] > 0, 90,
                      "upload the segments past the transactions and delete them locally")
    total = N + 16
    consumed = consume(bs, "tiered", count=total)
    committed = consume(bs, "tiered", count=total - 8, isolation_level="read_committed")
    broker.stop()
    return {"remote": remote, "broker": broker, "consumed": consumed, "committed": committed, "pdir": pdir}


def test_verify_clean_and_ls_matches_metadata(tiered):
    store = open_remote_store(tiered["remote"])
    data = tiered["broker"].data_dir
    assert any(s.files.get("txnindex") for s in store.all_segments()), "the aborted transaction's .txnindex"
    rep = verify_remote(store, [data], deep=True)
    assert rep.errors == [], rep.errors
    assert [f for f in rep.findings if f.severity == "warning"] == []
    md = read_remote_metadata([data])
    finished = {sid for sid, m in md.segments.items() if m.state == "COPY_SEGMENT_FINISHED"}
    rows = list_remote(store, [data], topic="tiered")
    assert {r.segment_id for r in rows if r.status == "present"} == finished and finished
    for r in rows:
        m = md.segments[r.segment_id]
        assert (r.start_offset, r.end_offset) == (m.start_offset, m.end_offset)


def test_remote_records_equal_consumer(tiered):
    store = open_remote_store(tiered["remote"])
    got = []
    for seg, p in iter_remote_segments(store, topic="tiered"):
        with Segment(p, seg.start_offset) as s:
            got += [_row(r.offset, r.key, r.value, r.headers, r.timestamp)
                    for b in s.iter_batches() if not b.is_control for r in b.records()]
    assert got and got[0][0] == 0
    want = {c.offset: _row(c.offset, c.key, c.value, c.headers, c.timestamp) for c in tiered["consumed"]}
    assert got == [want[o] for o in sorted(want) if o <= got[-1][0]]


def test_rehydrated_partition_is_served(tiered, module_broker_factory, tmp_path):
    broker = module_broker_factory(VERSION)  # a new cluster, tiered storage off
    broker.create_topic("tiered", config={"internal.segment.bytes": "2048"})
    pm = broker.partition_dir("tiered") / "partition.metadata"
    broker.wait_until(lambda: pm.exists() and "topic_id" in pm.read_text(), 30, "write partition.metadata")
    topic_id = pm.read_text().split("topic_id: ")[1].strip()
    broker.stop()
    shutil.rmtree(broker.partition_dir("tiered"))
    plan, _ = rehydrate(open_remote_store(tiered["remote"]), broker.data_dir,
                        RehydrateOptions(topic="tiered", topic_id=topic_id,
                                         metadata_dirs=[str(tiered["broker"].data_dir)]))
    assert not plan.errors
    leo = plan.partitions[0].facts["logEndOffset"]
    assert leo > 0
    broker.start()
    want = [_row(c.offset, c.key, c.value, c.headers, c.timestamp) for c in tiered["consumed"] if c.offset < leo]
    served = consume(broker.bootstrap_servers, "tiered", count=len(want))
    want_committed = [_row(c.offset, c.key, c.value, c.headers, c.timestamp) for c in tiered["committed"]
                      if c.offset < leo]
    committed = consume(broker.bootstrap_servers, "tiered", count=len(want_committed),
                        isolation_level="read_committed")
    broker.stop()
    assert [_row(c.offset, c.key, c.value, c.headers, c.timestamp) for c in served] == want
    # the aborted transaction stays aborted: the uploaded .txnindex came along
    assert [_row(c.offset, c.key, c.value, c.headers, c.timestamp) for c in committed] == want_committed
    assert len(want_committed) < len(want)
