"""The compiled core's v0/v1 decoder (``legacy.rs``: ``legacy_records``, ``legacy_messages``, ``add_legacy``) from
many threads at once, with Kafka clients' threads alive in the same process: the guard for a reported SIGSEGV
(``compat/certify.py`` read legacy partitions while kafka-python and confluent-kafka consumed).

A child process (a crash must fail the test, not end the run) decodes every partition of the v0 and v1 broker
fixtures (plain messages and gzip, snappy and lz4 wrappers) through the public path -- ``PartitionLog.iter_batches``
then ``records()``, ``record_tuples()``, ``message_fields()``, and ``kafkalog.open(...).to_arrow()`` -- from six
long-lived threads and a stream of short-lived ones (each decodes one partition and exits: this thread's reused
decompression buffer is freed at its exit), while two threads allocate and free Python objects and collect
garbage, and a confluent-kafka ``Consumer`` and ``Producer`` (librdkafka's threads) and kafka-python's
``KafkaConsumer`` and ``KafkaProducer`` (its sender thread) poll a closed port. Every result is compared with the
pure-Python reference's (``backend("python")``), so a buffer reused too early shows as a wrong record, not only
as a crash. The child must exit 0.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.codec.native import core

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
STRESS_SECONDS = 12

pytestmark = pytest.mark.skipif(core is None and os.environ.get("CI") != "true",
                                reason="the compiled record core is not built")

CHILD = textwrap.dedent(r'''
    import faulthandler
    import gc
    import random
    import socket
    import sys
    import threading
    import time
    from pathlib import Path

    import confluent_kafka
    import kafka

    import kafkalog
    from kafkalog.storage.codec.native import active, backend
    from kafkalog.storage.log.partition import PartitionLog
    from kafkalog.storage.records.legacy import LegacyBatch

    faulthandler.enable()
    fixtures, seconds = Path(sys.argv[1]), float(sys.argv[2])
    DIRS = [fixtures / "kafka-3.9.2-zk-v0" / "data", fixtures / "kafka-3.9.2-zk-v1" / "data"]
    assert active().name == "native", active()
    PARTS = [p for d in DIRS for p in sorted(d.iterdir()) if p.is_dir() and not p.name.startswith("__")]


    def read(p):
        recs, tuples, fields, kinds = [], [], [], set()
        for seg, b in PartitionLog(p).iter_batches():
            recs.append([(r.offset, r.timestamp, r.key, r.value, r.crc, r.magic, r.attributes) for r in b.records()])
            tuples.append(b.record_tuples())
            if isinstance(b, LegacyBatch):  # (mixed-formats-0 has v2 batches too)
                kinds.add((b.magic, b.codec))
                fields.append(b.message_fields())
            seg.close()
        return (recs, tuples, fields), kinds


    def arrow(d):
        return kafkalog.open(d).to_arrow().read_all()


    with backend("python"):
        want = {p: read(p)[0] for p in PARTS}
        want_arrow = {d: arrow(d) for d in DIRS}
    kinds = set()
    for p in PARTS:
        got, k = read(p)
        assert got == want[p], p
        kinds |= k
    # every codec of v0/v1 (none, gzip, snappy, lz4) under both magics
    assert {(m, c) for m in (0, 1) for c in range(4)} <= kinds, kinds

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed = f"127.0.0.1:{s.getsockname()[1]}"
    s.close()
    quiet = {"bootstrap.servers": closed, "log_level": 0, "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 50}
    rd_consumer = confluent_kafka.Consumer({**quiet, "group.id": "stress"})
    rd_consumer.subscribe(["codec-gzip"])
    rd_producer = confluent_kafka.Producer(quiet)
    kp_consumer = kafka.KafkaConsumer(bootstrap_servers=closed, api_version=(2, 0), reconnect_backoff_ms=10,
                                      reconnect_backoff_max_ms=50)
    kp_consumer.assign([kafka.TopicPartition("codec-gzip", 0)])
    kp_producer = kafka.KafkaProducer(bootstrap_servers=closed, api_version=(2, 0), reconnect_backoff_ms=10)

    stop = threading.Event()
    failures = []
    counts = dict.fromkeys(("decode", "arrow", "short", "churn", "poll"), 0)


    def guarded(fn):
        def run(*args):
            try:
                fn(*args)
            except BaseException as e:
                import traceback
                traceback.print_exc()
                failures.append(repr(e))
                stop.set()
        return run


    @guarded
    def decoder(seed):
        rnd = random.Random(seed)
        while not stop.is_set():
            p = rnd.choice(PARTS)
            assert read(p)[0] == want[p], p
            counts["decode"] += 1
            if rnd.random() < 0.1:
                d = rnd.choice(DIRS)
                assert arrow(d).equals(want_arrow[d]), d
                counts["arrow"] += 1


    @guarded
    def short_lived(seed):
        rnd = random.Random(seed)
        while not stop.is_set():
            p, out = rnd.choice(PARTS), []
            t = threading.Thread(target=lambda: out.append(read(p)[0]))
            t.start()
            t.join()
            assert out == [want[p]], p
            counts["short"] += 1


    @guarded
    def churn(seed):
        rnd = random.Random(seed)
        held = []
        while not stop.is_set():
            held.append([bytes(rnd.randrange(1, 4096)) for _ in range(200)] + [{"k": [j, str(j)]} for j in range(500)])
            if len(held) > 20:
                del held[:rnd.randrange(1, 20)]
            if rnd.random() < 0.05:
                gc.collect()
            counts["churn"] += 1


    @guarded
    def poll_librdkafka():
        while not stop.is_set():
            rd_consumer.poll(0.05)
            rd_producer.poll(0)
            counts["poll"] += 1


    @guarded
    def poll_kafka_python():
        while not stop.is_set():
            kp_consumer.poll(timeout_ms=20)
            counts["poll"] += 1


    threads = [threading.Thread(target=decoder, args=(i,)) for i in range(6)]
    threads += [threading.Thread(target=short_lived, args=(100,))]
    threads += [threading.Thread(target=churn, args=(200 + i,)) for i in range(2)]
    threads += [threading.Thread(target=poll_librdkafka), threading.Thread(target=poll_kafka_python)]
    start = time.monotonic()
    for t in threads:
        t.start()
    while time.monotonic() - start < seconds and not stop.is_set():
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join()
    rd_consumer.close()
    kp_consumer.close()
    kp_producer.close(timeout=1)
    print("counts", counts, "failures", failures, flush=True)
    sys.exit(1 if failures else 0)
''')


def test_legacy_decoding_from_threads_with_kafka_clients_alive():
    require_modules("pyarrow", extra="spark")
    require_modules("confluent_kafka", "kafka", extra="test")
    env = {**os.environ, "KAFKALOG_NATIVE": "1"}
    r = subprocess.run([sys.executable, "-c", CHILD, str(FIXTURES), str(STRESS_SECONDS)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=STRESS_SECONDS + 150)
    # a crash is a negative exit code (-11: SIGSEGV); faulthandler's dump of every thread is in stderr
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-6000:])
    counts = re.search(r"counts (\{.*\}) failures \[\]", r.stdout)
    assert counts is not None, r.stdout
    got = ast.literal_eval(counts.group(1))
    assert all(n > 0 for n in got.values()), got
