"""KRaft quorum-state: Kafka's v0 and v1 forms, every malformation named, verify and dump."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kafkalog import facts
from kafkalog.storage.errors import CorruptCheckpointError
from kafkalog.storage.files.quorum_state import QuorumState, read_quorum_state
from kafkalog.storage.reports.dump import dump_file
from kafkalog.storage.reports.verify import verify_partition

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
KRAFT = sorted(FIXTURES.glob("*-kraft/data/__cluster_metadata-0/quorum-state"))
V0 = b'{"clusterId":"","leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}'  # noqa: E501
V1 = b'{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}'


@pytest.mark.parametrize("path", KRAFT, ids=lambda p: p.parts[-4])
def test_fixtures_written_by_kafka(path: Path):
    st = read_quorum_state(path)
    assert st.data_version == 0 and st.leader_id == 1 and st.leader_epoch >= 1 and st.current_voters == [1]
    assert st.validate() == []


def test_kafka_examples():
    v0 = QuorumState.from_bytes(V0)
    assert (v0.cluster_id, v0.applied_offset, v0.has_leader, v0.has_voted) == ("", 0, True, False)
    v1 = QuorumState.from_bytes(V1 + b"\n")
    assert v1.data_version == 1 and v1.voted_directory_id == "J8aAPcfLQt2bqs1JT_rMgQ" and v1.has_voted
    assert v1.to_dict()["votedDirectoryId"] == "J8aAPcfLQt2bqs1JT_rMgQ"
    # only the first line is read; unknown fields are ignored
    assert QuorumState.from_bytes(V1[:-1] + b',"extra":true}\r\ngarbage').leader_epoch == 2


@pytest.mark.parametrize("data,reason,position", [
    (b"", "empty file", None),
    (b'{"clusterId":"","leaderId":1', "not JSON", 28),
    (b"[1,2]", "expected a JSON object", 0),
    (V0.replace(b',"data_version":0', b""), "no data_version", 0),
    (V0.replace(b'"data_version":0', b'"data_version":2'), "data_version 2 is not within", 0),
    (V0.replace(b'"leaderEpoch":1,', b""), "'leaderEpoch' is mandatory in version 0", 0),
    (V1.replace(b'"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ",', b""), "'votedDirectoryId' is mandatory", 0),
    (V0.replace(b'"leaderId":1', b'"leaderId":"1"'), "'leaderId' is '1'", 0),
    (V0.replace(b'"leaderId":1', b'"leaderId":4294967296'), "not a 32-bit integer", 0),
    (V1.replace(b"J8aAPcfLQt2bqs1JT_rMgQ", b"nope"), "not a Uuid", 0),
    (V0.replace(b'[{"voterId":1}]', b"[1]"), "currentVoters", 0),
    (b"\xff\xfe", "invalid UTF-8", 0),
])
def test_malformed_is_named(data: bytes, reason: str, position: int | None):
    with pytest.raises(CorruptCheckpointError) as e:
        QuorumState.from_bytes(data, "q")
    assert reason in e.value.reason and e.value.position == position and e.value.path == "q"
    assert "does not start" in e.value.reason


def test_validate():
    [null] = QuorumState.from_bytes(V0.replace(b'[{"voterId":1}]', b"null")).validate()
    assert null.code == "quorumState.nullVoters" and "NullPointerException" in _words(null)
    [low] = QuorumState.from_bytes(V0).validate(log_end_epoch=3)
    assert (low.code, dict(low.facts)) == ("quorumState.epochBelowLog", {"leaderEpoch": 1, "logEndEpoch": 3})
    assert _words(low) == ("leaderEpoch 1 is below the last epoch 3 written in the metadata log: the broker starts "
                           "unattached at that epoch (it logs a warning)")


def _words(d) -> str:
    return facts.render(d.finding("quorum-state", "metadata", "warning"))


@pytest.fixture
def metadata_partition(tmp_path: Path) -> Path:
    src = FIXTURES / "kafka-4.3.1-kraft" / "data" / "__cluster_metadata-0"
    dst = tmp_path / "data" / "__cluster_metadata-0"
    shutil.copytree(src, dst)
    return dst


def test_verify_reports_quorum_state(metadata_partition: Path):
    q = metadata_partition / "quorum-state"
    assert not [f for f in verify_partition(metadata_partition) if f.file == str(q)]
    q.write_bytes(b'{"clusterId":"","leaderId":1,"leader')
    [f] = [f for f in verify_partition(metadata_partition) if f.file == str(q)]
    assert f.severity == "error" and f.position == 29 and "not JSON" in facts.render(f)
    q.write_bytes(V0.replace(b'"leaderEpoch":1', b'"leaderEpoch":0'))
    [f] = [f for f in verify_partition(metadata_partition) if f.file == str(q)]
    assert f.severity == "warning" and f.code == "quorumState.epochBelowLog" and f.facts["logEndEpoch"] == 1
    assert facts.render(f).startswith("leaderEpoch 0 is below the last epoch 1 written in the metadata log")
    q.unlink()
    [f] = [f for f in verify_partition(metadata_partition) if f.file == str(q)]
    assert f.severity == "info" and "missing" in facts.render(f)


def test_dump(metadata_partition: Path):
    d = dump_file(metadata_partition / "quorum-state")
    assert d.kind == "quorumState" and d.ok
    assert json.loads(json.dumps(d.entries))[0]["leaderEpoch"] == 1
