"""The committed fixtures against the Kafka that wrote them: DumpLogSegments still reads them as stored in
``dumplogsegments.jsonl``, and a broker started on a copy of a clean KRaft fixture serves what was produced."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kafkalog.compat.capture import CAPTURE_PROPS, inline_b64
from kafkalog.compat.clients import consume
from kafkalog.compat.pytest_plugin import BrokerFactory
from kafkalog.compat.tiered import tiered_broker_kwargs, wait_for_remote_log_metadata
from kafkalog.compat.tools import dump_log_segments

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MANIFESTS = {p.parent.name: json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*/manifest.json"))}
RESTARTABLE = [n for n, m in MANIFESTS.items() if m["mode"] == "kraft" and m["shutdown"] == "clean"]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_stored_dump_is_what_dump_log_segments_prints(name: str, kafka_libs: dict[str, Path]) -> None:
    data = FIXTURES / name / "data"
    run = dump_log_segments(MANIFESTS[name]["kafka_version"], sorted(data.glob("*/*.log")))
    assert all(not f.unparsed and f.invalid_bytes == 0 for f in run.files)
    root = str(data.absolute()) + "/"
    live = [
        {**b, "file": b["file"].removeprefix(root),
         "records": [{**r, "key": inline_b64(r["key"]), "value": inline_b64(r["value"])} for r in b["records"]]}
        for b in run.batches()
    ]  # fmt: skip
    # a tiered fixture's jsonl also has the segments of remote/ (dumped from copies named <offset>.log)
    assert live == [b for b in _jsonl(FIXTURES / name / "dumplogsegments.jsonl") if not b["file"].startswith("remote/")]


@pytest.mark.parametrize("name", RESTARTABLE)
def test_broker_serves_a_copy_of_the_fixture(name: str, tmp_path: Path, broker_factory: BrokerFactory) -> None:
    manifest = MANIFESTS[name]
    shutil.copytree(FIXTURES / name / "data", tmp_path / "data", symlinks=True)
    # the settings the fixture was captured with: above all log.retention.ms=-1, as its records carry fixed 2025
    # timestamps that the default 7 days would expire (a tiered broker's expiration task deletes the remote-only
    # segments within a second of starting, racing the consumer)
    kwargs: dict[str, Any] = {"server_properties": CAPTURE_PROPS}
    tiered = (FIXTURES / name / "remote").is_dir()
    if tiered:  # tiered: the broker reads the remote-only segments from remote/
        shutil.copytree(FIXTURES / name / "remote", tmp_path / "remote", symlinks=True)
        kwargs = tiered_broker_kwargs(manifest["kafka_version"], tmp_path / "remote", server_properties=CAPTURE_PROPS)
    broker = broker_factory(manifest["kafka_version"], data_dir=tmp_path / "data", **kwargs)
    if tiered:
        wait_for_remote_log_metadata(broker)  # before it, a fetch below the local log start is an unknown error
    expected = _jsonl(FIXTURES / name / "expected.jsonl")
    for topic, desc in manifest["topics"].items():
        if "compact" in desc["config"].get("cleanup.policy", ""):
            continue
        want = sorted(
            (e["partition"], e["offset"], e["value"])
            for e in expected
            if e["topic"] == topic and e["transaction"] != "aborted" and not isinstance(e["value"], dict)
        )
        got = consume(broker.bootstrap_servers, topic, client="confluent", isolation_level="read_committed",
                      count=sum(1 for e in expected if e["topic"] == topic and e["transaction"] != "aborted"))  # fmt: skip
        got_small = sorted(
            (c.partition, c.offset, None if c.value is None else base64.b64encode(c.value).decode())
            for c in got
            if c.value is None or len(c.value) <= 4096
        )
        assert got_small == want, topic
    broker.stop()
