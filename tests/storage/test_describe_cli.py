"""``kafkalog describe`` and :func:`describe_paths`: per-partition facts from hand-built and real data dirs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import TOPIC_ID, mixed_format_data_dir

from kafkalog.storage.reports.describe import describe_paths
from kafkalog.tools.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FIXTURE_DATA = sorted(FIXTURES.glob("*/data")) if FIXTURES.is_dir() else []
REQUIRED = {"dataDir", "topic", "partition", "size", "segments", "logStartOffset", "logEndOffset", "recoveryPoint",
            "cleanPoint", "topicId", "magics", "codecs", "leaderEpochs"}


def test_describe_paths(tmp_path):
    root = mixed_format_data_dir(tmp_path / "data")
    (d,) = list(describe_paths([root]))
    assert REQUIRED <= set(d) and "errors" not in d
    assert (d["topic"], d["partition"], d["dataDir"]) == ("orders", 7, str(root))
    assert (d["logStartOffset"], d["logEndOffset"], d["recoveryPoint"], d["cleanPoint"], d["highWatermark"]) == \
        (1, 11, 10, 4, 11)
    assert d["size"] == sum(p.stat().st_size for p in root.glob("orders-7/*.log"))
    assert [s["baseOffset"] for s in d["segments"]] == [0, 10] and d["segments"][0]["batches"] == 3
    assert d["magics"] == [1, 2] and d["codecs"] == ["none", "gzip", "zstd"]
    assert d["leaderEpochs"] == [[3, 2], [5, 10]] and d["topicId"] == TOPIC_ID
    # the same partition given directly (checkpoints read from its parent); --fast skips the header scan
    (p,) = list(describe_paths([root / "orders-7"], scan=False))
    assert p["recoveryPoint"] == 10 and p["magics"] == [] and p["logEndOffset"] == 11


def test_describe_cli_json_and_table(tmp_path, capsys):
    root = mixed_format_data_dir(tmp_path / "data")
    assert main(["describe", "--json", str(root)]) == 0
    (obj,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert obj["logEndOffset"] == 11 and obj["codecs"] == ["none", "gzip", "zstd"]
    assert main(["describe", "--segments", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert obj["size"] < 1024 and out[0] == f"Data dir {root}: 1 partitions, {obj['size']} B"
    assert out[1].split()[:5] == ["PARTITION", "SIZE", "SEGMENTS", "START", "END"]
    assert out[2].split() == ["orders-7", str(obj["size"]), "B", "2", "1", "11", "10", "11", "4", "5@10", TOPIC_ID,
                              "v1,v2", "none,gzip,zstd"]
    assert any(line.startswith("00000000000000000010.log") for line in out)


def test_describe_bad_paths(tmp_path, capsys):
    (tmp_path / "file.txt").write_text("x")
    assert main(["describe", str(tmp_path / "file.txt")]) == 1
    assert f"{tmp_path / 'file.txt'}: not a directory" in capsys.readouterr().err  # the one path contract
    part = tmp_path / "data" / "orders-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(b"\0" * 8 + b"\0\0\0\x05" + b"\0" * 20)  # size field 5 < 14
    assert main(["describe", "--json", str(tmp_path / "data")]) == 1
    (obj,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert obj["errors"] and "smaller than minimum record overhead" in obj["errors"][0]


def test_describe_unreadable_checkpoint_is_an_error(tmp_path, capsys):
    """A data-dir checkpoint that does not parse is not an unknown value: describe says which file and line, exit 1
    (it showed RECOVERY "-" for every partition and exited 0)."""
    root = mixed_format_data_dir(tmp_path / "data")
    ckpt = root / "recovery-point-offset-checkpoint"
    ckpt.write_text("0\n2\nfoo 0\n")
    assert main(["describe", "--json", str(root)]) == 1
    (obj,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert obj["recoveryPoint"] is None and obj["logEndOffset"] == 11
    assert len(obj["errors"]) == 1 and obj["errors"][0] == f"{ckpt}: line 3: malformed line 'foo 0' (expected 3 fields, found 2)"
    assert main(["describe", str(root)]) == 1
    assert f"error: orders-7: {ckpt}: line 3: malformed line" in capsys.readouterr().out
    assert main(["describe", "--json", str(root / "orders-7")]) == 1  # a partition dir: its parent's checkpoints
    (alone,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert alone["errors"] == obj["errors"] and alone["recoveryPoint"] is None


def test_fixtures_are_present():
    assert FIXTURE_DATA, f"no fixture data dirs under {FIXTURES}"


@pytest.mark.parametrize("data", FIXTURE_DATA, ids=[p.parent.name for p in FIXTURE_DATA])
def test_real_broker_dirs(data):
    descs = list(describe_paths([data]))
    assert len(descs) == sum(1 for p in data.iterdir() if p.is_dir() and p.name != "remote-log-index-cache")
    manifest = json.loads((data.parent / "manifest.json").read_text())
    for d in descs:
        assert REQUIRED <= set(d) and "errors" not in d, d
        assert d["logEndOffset"] >= d["logStartOffset"]
        if d["size"] and not manifest.get("shutdown") == "SIGKILL":
            assert d["recoveryPoint"] == d["logEndOffset"] or d["topic"] == "__cluster_metadata"
        if d["size"] and d["topic"] != "__cluster_metadata":
            assert manifest["message_format"] in d["magics"] or d["topic"].startswith("__")
