"""The container backend: a Kafka image built on this machine (Debian + OpenJDK 17 + the Maven Central jars,
:mod:`kafkalog.compat.image`) run by :class:`ContainerBroker` through testcontainers with host networking.

Without a Docker engine these tests skip on a developer machine and fail under ``CI=true`` (``.ci/run``
installs docker.io and starts dockerd). The same suite runs against another image, e.g. the official one,
with ``KAFKALOG_IMAGE=apache/kafka:4.3.1``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.compat import jars
from kafkalog.compat.broker import ContainerBroker, make_broker
from kafkalog.compat.clients import Record, consume, produce
from kafkalog.compat.conformance import SCENARIOS
from kafkalog.compat.pytest_plugin import container_image
from kafkalog.storage.records.reader import iter_batches

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]

VERSION = jars.LATEST_4


@pytest.fixture(scope="module")
def image() -> str:
    return container_image(VERSION)


def _host_addresses() -> list[str]:
    """This machine's IPv4 addresses other than loopback (from the routing table's view of the world)."""
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False).stdout.split()
    return [a for a in out if "." in a and not a.startswith("127.")]


def _records(data_dir: Path, topic: str) -> list[tuple[int, bytes | None]]:
    pdir = data_dir / f"{topic}-0"
    out = []
    for log in sorted(pdir.glob("*.log")):
        for b in iter_batches(log.read_bytes()):
            if not b.is_control:
                out += [(r.offset, r.value) for r in b.records()]
    return out


def test_image_is_built_here_from_debian_packages_and_maven_jars(image: str) -> None:
    import docker

    if os.environ.get("KAFKALOG_IMAGE"):
        pytest.skip("KAFKALOG_IMAGE names an image built elsewhere")
    client = docker.from_env()
    img = client.images.get(image)
    assert img.labels["org.kafkalog.kafka-version"] == VERSION
    base = client.images.get("kafkalog/debian-jre:bookworm-17")
    assert len(base.labels["org.kafkalog.rootfs-sha256"]) == 64
    out = client.containers.run(image, entrypoint=["sh", "-c", "java -version 2>&1; cat /etc/debian_version; "
                                                   "ls /opt/kafka/libs"], network_mode="host", remove=True)
    text = out.decode()
    assert 'openjdk version "17.' in text and "-Debian)" in text
    assert any(line.startswith("12.") for line in text.splitlines())  # /etc/debian_version: bookworm
    assert set(text.split()) >= {p.name for p in jars.ensure_kafka(VERSION).glob("*.jar")}
    # built once, then reused: a second ensure_image finds the same image
    from kafkalog.compat.image import ensure_image

    assert client.images.get(ensure_image(VERSION)).id == img.id


def test_round_trip_clean_stop_and_restart(image: str, tmp_path: Path) -> None:
    broker = ContainerBroker(VERSION, data_dir=tmp_path / "data", image=image)
    try:
        broker.start()
        wrapped = broker._container.get_wrapped_container()
        assert wrapped.attrs["HostConfig"]["NetworkMode"] == "host"
        broker.create_topic("c", 1)
        sent = produce(broker.bootstrap_servers, "c", [Record(b"v%d" % i, b"k") for i in range(10)], flush_every=5)
        broker.stop()
        assert broker.clean_shutdown_marker.exists()
        # the broker's own files, in the bind-mounted data dir, owned by the calling user, read by kafkalog
        log = broker.data_dir / "c-0" / "00000000000000000000.log"
        assert log.stat().st_uid == os.getuid()
        assert _records(broker.data_dir, "c") == [(p.offset, p.value) for p in sent]
        broker.start()
        got = consume(broker.bootstrap_servers, "c", client="confluent", count=10)
        assert [(c.offset, c.value) for c in got] == [(p.offset, p.value) for p in sent]
        broker.stop()
        text = broker.log_path.read_text(errors="replace")
        assert text.count("Kafka Server started") >= 2 or text.count("Kafka startTimeMs") >= 2, text[-2000:]
    finally:
        broker.close()


def test_sigkill_then_recovery_at_restart(image: str, tmp_path: Path) -> None:
    broker = ContainerBroker(VERSION, data_dir=tmp_path / "data", image=image)
    try:
        broker.start()
        broker.create_topic("k", 1)
        sent = produce(broker.bootstrap_servers, "k", [Record(b"x%d" % i) for i in range(50)], flush_every=10)
        broker.kill()
        assert not broker.running and not broker.clean_shutdown_marker.exists()
        # kafkalog sees an unclean dir: the partition needs recovery
        proc = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "repair", "--dry-run", "--json",
                               str(broker.data_dir)], capture_output=True, text=True, check=False)
        assert proc.returncode in (0, 1), proc.stderr[-2000:]
        broker.start()
        got = consume(broker.bootstrap_servers, "k", client="confluent", count=50)
        assert [(c.offset, c.value) for c in got] == [(p.offset, p.value) for p in sent]
        broker.stop()
        # LogManager.loadLogs: the broker itself saw the unclean shutdown
        assert "since no clean shutdown file was found" in broker.log_path.read_text(errors="replace")
    finally:
        broker.close()


def test_listens_on_loopback_only(image: str, tmp_path: Path) -> None:
    broker = make_broker(VERSION, backend="container", image=image, data_dir=tmp_path / "data")
    try:
        broker.start()
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5):
            pass
        addresses = _host_addresses()
        assert addresses, "no non-loopback address to check (hostname -I)"
        for addr in addresses:
            with pytest.raises(OSError), socket.create_connection((addr, broker.port), timeout=3):
                pass
    finally:
        broker.close()


# the four scenarios again on 4.3.1, in a container, under -m campaign (make campaign): CI runs them on the JVM
# backend (test_conformance.py) and the container backend in the tests above and certify's
@pytest.mark.campaign
def test_conformance_table_on_the_container_backend(image: str, tmp_path: Path) -> None:
    """`kafkalog conformance --backend container`: every scenario passes, with the JVM run's counts."""
    args = [sys.executable, "-m", "kafkalog.tools.cli", "conformance", "--kafka", VERSION, "--backend", "container",
            "--json", "--workdir", str(tmp_path / "work")]
    if os.environ.get("KAFKALOG_IMAGE"):
        args += ["--image", os.environ["KAFKALOG_IMAGE"]]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False)
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    failed = [r for r in rows if r["status"] != "pass"]
    assert failed == [], json.dumps(failed, indent=1)[:6000]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["scenario"] for r in rows] == list(SCENARIOS)
    stats = {r["scenario"]: r["stats"] for r in rows}
    # the same numbers test_conformance.py asserts for the JVM backend
    assert stats["kafka-writes-kafkalog-reads"]["records"] == 302
    assert stats["kafka-writes-kafkalog-reads"]["controlBatches"] == 4
    assert stats["index-rebuild"]["segmentsCompared"] >= 6
    assert stats["recovery"]["filesCompared"] > 20


def test_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="KRaft"):
        ContainerBroker(jars.LATEST_3, mode="zk", data_dir=tmp_path / "d")
    proc = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "conformance", "--image", "x:1"],
                          capture_output=True, text=True, check=False, env={**os.environ, "KAFKALOG_BROKER": "jvm"})
    assert proc.returncode == 2 and "--backend container" in proc.stderr
