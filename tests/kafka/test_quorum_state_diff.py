"""``quorum-state`` against the broker: every quorum-state kafkalog calls fatal stops a real KRaft broker
(4.3.1 and 3.9.2) from starting, and the one it only warns about (an epoch below the metadata log's) starts
with the broker's own warning. A copy of the committed clean KRaft fixture is the data dir."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.compat.errors import BrokerError

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
V0 = b'{"clusterId":"","leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}'  # noqa: E501
CASES = {  # name -> (quorum-state bytes, what kafkalog verify says: "error" (the broker must refuse to
    # start), "warning" (it starts and logs "Epoch from quorum store file") or None (it starts, nothing to say))
    "truncated": (V0[:36], "error"),
    "empty": (b"", "error"),
    "data-version-2": (V0.replace(b'"data_version":0', b'"data_version":2'), "error"),
    "no-leader-epoch": (V0.replace(b'"leaderEpoch":1,', b""), "error"),
    "null-voters": (V0.replace(b'[{"voterId":1}]', b"null"), "error"),  # NullPointerException in the broker
    "leader-id-string": (V0.replace(b'"leaderId":1', b'"leaderId":"1"'), "error"),
    "epoch-below-log": (V0.replace(b'"leaderEpoch":1', b'"leaderEpoch":0'), "warning"),
    "v1-voted": (b'{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ",'
                 b'"data_version":1}', None),
}


def _verify(pdir: Path) -> list[dict]:
    import json

    p = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "verify", "--json", "--info", str(pdir)],
                       capture_output=True, text=True, timeout=120)
    return [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]


@pytest.mark.parametrize("version", ["4.3.1", "3.9.2"])
def test_broker_agrees_with_verify(version: str, tmp_path: Path, kafka_libs) -> None:
    from kafkalog.compat.broker import Broker

    for name, (content, verdict) in CASES.items():
        data = tmp_path / name / "data"
        shutil.copytree(FIXTURES / f"kafka-{version}-kraft" / "data", data, symlinks=True)
        q = data / "__cluster_metadata-0" / "quorum-state"
        q.write_bytes(content)
        findings = [f for f in _verify(data / "__cluster_metadata-0") if f["file"] == str(q)]
        assert [f["severity"] for f in findings] == ([verdict] if verdict else []), (name, findings)
        broker = Broker(version, data_dir=data)
        if verdict != "error":
            broker.start(timeout=120)
            broker.stop()
            warned = "Epoch from quorum store file" in broker.log_path.read_text(errors="replace")
            assert warned == (verdict == "warning"), name
        else:
            with pytest.raises(BrokerError):
                broker.start(timeout=120)
            log = broker.log_path.read_text(errors="replace")
            assert "Got exception while starting SharedServer" in log and "QuorumState" in log, (name, log[-3000:])
