"""Lossless at every boundary (issue 13, points 1-3): what ``dump --json`` writes, ``append`` reads back byte for
byte; malformed input is refused with the line and the field; ``--topics`` naming a topic that is not there is
an error that lists the topics that are."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.storage.errors import LogDirError
from kafkalog.storage.io.jsonio import b64_field
from kafkalog.storage.records import build_batch, iter_batches

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "kafka-4.3.1-kraft" / "data"


def kafkalog(*args, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", *map(str, args)], capture_output=True,
                          text=True, input=stdin, timeout=120)


def _records(path: Path) -> list[tuple]:
    return [(r[0], r[1], r[2], r[3], tuple(r[4])) for b in iter_batches(path.read_bytes()) for r in b.record_tuples()]


@pytest.mark.parametrize("payload", ["utf8", "base64", "hex"])
def test_dump_json_then_append_round_trips_every_byte(tmp_path, payload):
    """Values that are not UTF-8 (and look like escapes) survive dump --json --payload utf8 | append."""
    vals = [bytes([i, 0xFF, 0xC3, 0x28]) + "é\\xff\\u0041".encode() for i in range(60)]
    recs = [(i, 1000 + i, b"k\xfe%d" % i, v, [("h\udcff", b"\x80\x81"), ("n", None)]) for i, v in enumerate(vals)]
    src = tmp_path / "src-0"
    src.mkdir()
    (src / f"{0:020d}.log").write_bytes(build_batch(recs, base_offset=0))
    d = kafkalog("dump", "--json", "--deep", "--payload", payload, src / f"{0:020d}.log")
    assert d.returncode == 0, d.stderr
    d.stdout.encode("utf-8")  # valid UTF-8 text, whatever the bytes
    if payload == "hex":  # hex is for people: append reads base64 or utf8
        return
    out = tmp_path / "dst"
    out.mkdir()
    a = kafkalog("append", out, "t-0", "--from", "-", "--payload", payload, "--keep-offsets", stdin=d.stdout)
    assert a.returncode == 0, a.stderr
    assert _records(out / "t-0" / f"{0:020d}.log") == _records(src / f"{0:020d}.log")


@pytest.mark.parametrize(("value", "why"), [
    ("***", "not valid base64"), ("dmFsdWU", "not valid base64"), ("dmFsdWV=", "not canonical"),
    ("dmFs dWU=", "not valid base64"), (5, "expected base64 text"),
])
def test_base64_is_strict(value, why):
    with pytest.raises(ValueError, match=why):
        b64_field(value, "value")
    assert b64_field("dmFsdWU=", "value") == b"value" and b64_field(None, "key") is None


@pytest.mark.parametrize("bad", [{"value": "***"}, {"key": "dmFsdWV="}, {"headers": [{"key": "h", "value": 3}]},
                                 {"timestamp": "soon"}])
def test_bad_append_line_names_line_and_field(tmp_path, bad):
    good = {"key": None, "value": "dmFsdWU=", "timestamp": 1}
    lines = [json.dumps(good)] * 7 + [json.dumps({**good, **bad})]
    data = tmp_path / "data"
    data.mkdir()
    r = kafkalog("append", data, "t-0", "--from", "-", stdin="\n".join(lines) + "\n")
    assert r.returncode == 1 and "internal error" not in r.stderr, r.stderr
    assert "line 8" in r.stderr, r.stderr
    field = next(iter(bad))
    assert field in r.stderr or "timestamp" in r.stderr, r.stderr
    assert not (data / "t-0").exists()


def test_bad_base64_in_import_names_line_and_field(tmp_path):
    out = tmp_path / "rows.jsonl"
    assert kafkalog("export", FIXTURE, "--topics", "compacted", "--out", out).returncode == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    rows[5]["value"] = "dmFsdWV="
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = kafkalog("import", out, tmp_path / "target")
    assert r.returncode == 1 and "line 6" in r.stderr and "'value'" in r.stderr, r.stderr
    assert not (tmp_path / "target").exists()


def test_unknown_topics_are_an_error_that_lists_the_topics(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(FIXTURE, data)
    for cmd in (["export", data, "--topics", "nosuchtopic", "--out", tmp_path / "x.jsonl"],
                ["retain", data, "--topics", "compacted,nosuchtopic", "--dry-run"],
                ["compact", data, "--topics", "nosuchtopic", "--dry-run"]):
        r = kafkalog(*cmd)
        assert r.returncode == 1, (cmd, r.stderr)
        assert "nosuchtopic" in r.stderr and "compacted" in r.stderr and "multi-segment" in r.stderr, r.stderr
    assert not (tmp_path / "x.jsonl").exists()


def test_the_spark_source_refuses_a_topic_pattern_that_matches_nothing():
    from kafkalog.tools.spark.options import ReadOptions
    from kafkalog.tools.spark.plan import discover

    assert discover(ReadOptions(paths=(str(FIXTURE),), topics=("compact*",)))
    with pytest.raises(LogDirError, match="nosuch.*the topics are: .*compacted"):
        discover(ReadOptions(paths=(str(FIXTURE),), topics=("nosuch*",)))
    # a pushed-down WHERE topic = 'x' that matches nothing is an empty result, as in SQL
    assert discover(ReadOptions(paths=(str(FIXTURE),), topic_in=frozenset({"nosuch"}))) == []


def test_version():
    r = kafkalog("--version")
    assert r.returncode == 0 and r.stdout.startswith("kafkalog ")
