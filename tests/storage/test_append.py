"""`kafkalog append`: the library path (batch_from_json + LogWriter) and the CLI, read back with the scanner."""

import base64
import json

from kafkalog.facts import render
from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.engine.repair import plan_repair
from kafkalog.storage.engine.writer import LogWriter
from kafkalog.storage.files.offset_index import read_offset_index
from kafkalog.storage.records import iter_batches
from kafkalog.tools import cli
from kafkalog.tools.append import batch_from_json

NOW = 1_700_000_000_000
TOPIC_ID = "l5y0MjLvQdypLcP9XmR7bw"


def _b64(b):
    return base64.b64encode(b).decode()


def _read(pdir):
    out = []
    for log in sorted(pdir.glob("*.log")):
        for b in iter_batches(log.read_bytes()):
            out += [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in b.records()]
    return out


def test_library_batch_objects_and_single_records(tmp_path):
    d = tmp_path / "orders-0"
    batch = {"baseOffset": 40, "codec": "lz4", "producerId": 7, "producerEpoch": 0, "baseSequence": 0,
             "records": [{"offset": 40 + i, "timestamp": NOW + i, "key": _b64(b"k%d" % i),
                          "value": _b64(b"v" * 50), "headers": [{"key": "h", "value": _b64(b"x")}]}
                         for i in range(5)]}
    single = {"key": None, "value": _b64(b"alone"), "timestamp": NOW + 9}
    with LogWriter(d, LogConfig(), now_ms=NOW, topic_id=TOPIC_ID) as w:
        a = w.append(batch_from_json(batch))
        b = w.append(batch_from_json(single))
    assert (a.first_offset, a.last_offset, b.first_offset) == (0, 4, 5)  # leader: offsets from the LEO
    recs = _read(d)
    assert [r[0] for r in recs] == list(range(6))
    assert recs[0] == (0, NOW, b"k0", b"v" * 50, [("h", b"x")])
    assert recs[5] == (5, NOW + 9, None, b"alone", [])
    first = next(iter_batches((d / "00000000000000000000.log").read_bytes()))
    assert (first.codec_name, first.producer_id, first.base_sequence) == ("lz4", 7, 0)
    assert (d / "00000000000000000006.snapshot").exists()  # producer state at the LEO on close


def test_cli_append_then_repair_has_nothing_to_do(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"key": _b64(b"k%d" % i), "value": _b64(b"v" * 300), "timestamp": NOW + i})
                           + "\n" for i in range(40)) + "\n")
    rc = cli.main(["append", str(data), "t-0", "--from", str(src), "--now", str(NOW),
                   "--config", "index.interval.bytes=1000", "--topic-id", TOPIC_ID])
    assert rc == 0
    assert "appended 40 batches; log end offset 40" in capsys.readouterr().err
    recs = _read(data / "t-0")
    assert [(r[0], r[1], r[2]) for r in recs] == [(i, NOW + i, b"k%d" % i) for i in range(40)]
    with read_offset_index(data / "t-0" / "00000000000000000000.index") as idx:
        assert len(list(idx)) > 5  # one entry per ~1000 bytes (append-time rule)
    assert cli.main(["flush", str(data), "--now", str(NOW)]) == 0
    capsys.readouterr()
    plan = plan_repair([data], now_ms=NOW, strict_indexes=True)
    assert not plan.changes and not any(p.notes for p in plan.partitions)


def test_cli_append_keep_offsets_rejects_going_backwards(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    src = tmp_path / "in.jsonl"
    lines = [{"baseOffset": 10, "records": [{"offset": 10, "timestamp": NOW, "key": None, "value": _b64(b"a")}]},
             {"baseOffset": 5, "records": [{"offset": 5, "timestamp": NOW, "key": None, "value": _b64(b"b")}]}]
    src.write_text("\n".join(json.dumps(x) for x in lines))
    rc = cli.main(["append", str(data), "t-0", "--from", str(src), "--keep-offsets", "--now", str(NOW)])
    assert rc == 1
    assert "unexpected append offset 5" in capsys.readouterr().err
    # all or nothing: the new partition (first batch included) is not published
    assert sorted(p.name for p in data.iterdir()) == [".lock"]


def test_repair_leaves_delete_dirs_alone(tmp_path):
    data = tmp_path / "data"
    gone = data / "t-0.0123456789abcdef0123456789abcdef-delete"
    gone.mkdir(parents=True)
    (gone / "00000000000000000000.log").write_bytes(b"\x00" * 30)  # garbage: never recovered
    plan = plan_repair([data], now_ms=NOW)
    assert any("-delete" in n and "left as is" in n for n in map(render, plan.data_dirs[0].notes))
    assert all("-delete" not in op.path for op in plan.ops())


def test_cli_append_hostile_json_is_one_line(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    src = tmp_path / "in.jsonl"
    src.write_text("[" * 100_000 + "\n")
    assert cli.main(["append", str(data), "t-0", "--from", str(src), "--now", str(NOW)]) == 1
    err = capsys.readouterr().err
    assert "line 1: not JSON (JSON nested too deeply)" in err and "Traceback" not in err


def test_cli_append_refuses_keys_that_are_not_camel_case(tmp_path, capsys):
    """The keys are as `dump --json` prints them (docs/json.md): a snake_case key is an error naming the right
    one, not a field silently left at its default."""
    data = tmp_path / "data"
    data.mkdir()
    src = tmp_path / "in.jsonl"
    for line, want in [({"producer_id": 7, "records": [{"timestamp": NOW, "key": None, "value": _b64(b"a")}]},
                        "line 1: key 'producer_id' is not camelCase (the keys are as `kafkalog dump --json` prints "
                        "them: 'producerId')"),
                       ({"records": [{"timestamp": NOW, "key_size": 1, "key": None, "value": None}]},
                        "line 1: records[0]: key 'key_size' is not camelCase"),
                       ({"timestamp": NOW, "key": None, "value": None, "headers": [{"key": "h", "Value": None}]},
                        "line 1: headers[0]: key 'Value' is not camelCase")]:
        src.write_text(json.dumps(line) + "\n")
        assert cli.main(["append", str(data), "t-0", "--from", str(src), "--now", str(NOW)]) == 1
        err = capsys.readouterr().err
        assert want in err and "Traceback" not in err
    assert sorted(p.name for p in data.iterdir()) in ([], [".lock"])


def test_cli_append_a_line_that_is_not_an_object_says_so(tmp_path, capsys):
    """A JSON line that is not an object (a list, a string, null) is the error that says an object is expected,
    not Python's "'list' object has no attribute 'get'"."""
    data = tmp_path / "data"
    data.mkdir()
    src = tmp_path / "in.jsonl"
    for line in ("[1, 2]", '"text"', "null", "7"):
        src.write_text(json.dumps({"timestamp": NOW, "key": None, "value": None}) + "\n" + line + "\n")
        assert cli.main(["append", str(data), "t-0", "--from", str(src), "--now", str(NOW)]) == 1
        err = capsys.readouterr().err
        assert f"{src}: line 2: expected a JSON object" in err and "attribute" not in err, err
    assert sorted(p.name for p in data.iterdir()) in ([], [".lock"])


def test_cli_append_bytes_that_are_not_utf8_are_named_by_line_and_byte(tmp_path, capsys):
    """A byte that is not UTF-8 deep in the input is named by its line and its byte in the file, not by its
    position inside the text decoder's read buffer (which said "position 1024" for a byte at 17,400)."""
    data = tmp_path / "data"
    data.mkdir()
    good = (json.dumps({"timestamp": NOW, "key": None, "value": None}) + "\n").encode()
    src = tmp_path / "in.jsonl"
    src.write_bytes(good * 300 + b'{"key": "\xff"}\n')
    at = len(good) * 300 + len(b'{"key": "')
    for dry in ([], ["--dry-run"]):
        assert cli.main(["append", str(data), "t-0", "--from", str(src), "--now", str(NOW), *dry]) == 1
        err = capsys.readouterr().err
        assert f"{src}: line 301: not UTF-8 text (byte 0xff at byte {at} of the file)" in err, err
    assert sorted(p.name for p in data.iterdir()) in ([], [".lock"])


def test_cli_append_refuses_a_leader_epoch_or_topic_id_kafka_would_not_take(tmp_path, capsys):
    """``--leader-epoch -5`` was stamped into the batch (verify then said OK); ``--topic-id`` that is not a topic
    id, or not the partition's own (its partition.metadata), was ignored, exit 0. Kafka's rules: a leader epoch is
    an Int32 from 0, ``UnifiedLog.assignTopicId`` refuses an inconsistent topic id. Apply and --dry-run alike."""
    data = tmp_path / "data"
    data.mkdir()
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"timestamp": NOW, "key": None, "value": None}) + "\n")
    base = ["append", str(data), "t-0", "--from", str(src), "--now", str(NOW)]
    assert cli.main([*base, "--topic-id", TOPIC_ID]) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in (data / "t-0").iterdir()}
    other = "AAAAAAAAAAAAAAAAAAAAAQ"
    for extra, words in ((["--leader-epoch", "-5"], "leader epoch -5: a leader's epoch is 0 to 2147483647"),
                         (["--leader-epoch", str(2**31)], "a leader's epoch is 0 to 2147483647"),
                         (["--topic-id", "xx"], "invalid topic id 'xx'"),
                         (["--topic-id", other], f"topic id {other} is not the partition's: its partition.metadata "
                                                 f"holds {TOPIC_ID}")):
        for dry in ([], ["--dry-run"]):
            assert cli.main([*base, *extra, *dry]) == 1, (extra, dry)
            err = capsys.readouterr().err
            assert words in err and "Traceback" not in err, (extra, dry, err)
    assert {p.name: p.read_bytes() for p in (data / "t-0").iterdir()} == before
    assert cli.main([*base, "--topic-id", TOPIC_ID, "--leader-epoch", "7"]) == 0  # its own id: appended
