"""repair and an unreadable partition.metadata: rewritten from --topic-id (or the KRaft metadata log), never
deleted; with no source the plan says what the broker would do and leaves the file."""

from kafkalog.facts import render
from kafkalog.storage.engine.plan import apply
from kafkalog.storage.engine.repair import plan_repair
from kafkalog.storage.engine.writer import LogWriter
from kafkalog.tools import cli
from kafkalog.tools.plan_output import worded_op

NOW = 1_700_000_000_000
TOPIC_ID = "l5y0MjLvQdypLcP9XmR7bw"


def _dir(tmp_path):
    data = tmp_path / "data"
    with LogWriter(data / "t-0", now_ms=NOW, topic_id=TOPIC_ID) as w:
        w.append_records([(None, NOW, b"k", b"v")])
    (data / "t-0" / "partition.metadata").write_bytes(b"")
    return data


def test_rewritten_from_topic_id_option(tmp_path):
    data = _dir(tmp_path)
    plan = plan_repair([data], now_ms=NOW, topic_ids={"t": TOPIC_ID})
    (act,) = [a for a in plan.ops() if a.kind == "write" and a.path.endswith("partition.metadata")]
    why = worded_op(act).why  # (a code and its facts, worded by kafkalog.facts)
    assert act.path.endswith("t-0/partition.metadata") and "--topic-id" in why
    assert "Error starting LogManager" in why
    apply(plan, backup=False)
    assert (data / "t-0" / "partition.metadata").read_bytes() == b"version: 0\ntopic_id: " + TOPIC_ID.encode()


def test_no_source_is_reported_not_deleted(tmp_path, capsys):
    data = _dir(tmp_path)
    plan = plan_repair([data], now_ms=NOW)
    assert not [a for a in plan.ops() if "partition.metadata" in a.path]
    (note,) = [text for p in plan.partitions for text in map(render, p.notes) if "partition.metadata" in text]
    assert "no topic id is known" in note and "stray" in note and "--topic-id" in note
    assert cli.main(["repair", "--no-backup", str(data), "--now", str(NOW)]) == 1
    assert (data / "t-0" / "partition.metadata").exists()
    assert (data / "t-0" / "partition.metadata").read_bytes() == b""
    assert cli.main(["repair", "--no-backup", str(data), "--now", str(NOW), "--topic-id", f"t={TOPIC_ID}"]) == 1
    assert (data / "t-0" / "partition.metadata").read_bytes().endswith(TOPIC_ID.encode())
    assert cli.main(["repair", "--no-backup", str(data), "--topic-id", "bad"]) == 2
