"""ContainerBroker (apache/kafka image via testcontainers): runs only where a Docker engine answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.compat import jars
from kafkalog.compat.broker import ContainerBroker, docker_available
from kafkalog.compat.clients import Record, consume, produce

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(600),
    pytest.mark.skipif(not docker_available(), reason="no Docker engine reachable (the JVM Broker is the default)"),
]


def test_container_broker_round_trip_and_restart(tmp_path: Path) -> None:
    broker = ContainerBroker(jars.LATEST_4, data_dir=tmp_path / "data")
    try:
        broker.start()
        broker.create_topic("c", 1)
        sent = produce(broker.bootstrap_servers, "c", [Record(b"v%d" % i, b"k") for i in range(10)], flush_every=5)
        broker.stop()
        assert broker.clean_shutdown_marker.exists()
        broker.start()
        got = consume(broker.bootstrap_servers, "c", client="confluent", count=10)
        assert [(c.offset, c.value) for c in got] == [(p.offset, p.value) for p in sent]
        assert (broker.data_dir / "c-0" / "00000000000000000000.log").is_file()
    finally:
        broker.close()
