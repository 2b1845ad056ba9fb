"""Issue 34, items 4, 6, 9 and 11: one contract for what every command says and writes.

* 4: a missing optional package (pyarrow, pyspark) is one line saying what to install, exit 1 (not exit 3, not
  a bare ModuleNotFoundError from the library);
* 6: output directories: Parquet never goes to ``--out -``; a non-empty directory is refused unless
  ``--overwrite``, which replaces it whole (nothing of the earlier export is left beside the new one);
* 9: a ZooKeeper-mode data dir without topic ids gets one warning about a KRaft migration, not one per partition;
* 11: ``--now`` takes the time grammar of ``-o @T``; ``export --payload``; ``describe`` sorts partitions
  numerically and takes ``--topics``; the top-level help lists every exit code; an unknown option prints the
  command's usage.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from builders import multi_partition_data_dir

from kafkalog.facts import render
from kafkalog.storage.reports.describe import describe_paths
from kafkalog.storage.reports.verify import verify_paths
from kafkalog.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


def _without(modules: list[str], code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter where ``modules`` cannot be imported (as on a base install)."""
    hide = "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
    return subprocess.run([sys.executable, "-c", f"import sys\n{hide}{code}"], capture_output=True, text=True,
                          timeout=120)


def _cli(args: list[str]) -> str:
    return f"from kafkalog.tools.cli import main\nsys.exit(main({args!r}))"


# ------------------------------------------------------------------------------------- 4: optional packages


def test_optional_packages_table_matches_pyproject():
    from kafkalog.storage.errors import OPTIONAL_PACKAGES

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, extra in OPTIONAL_PACKAGES.items():
        names = [r.split(">")[0].split("[")[0].split("=")[0].strip() for r in extras[extra]]
        assert module in names, (module, extra)


def test_require_names_the_extra(monkeypatch):
    from kafkalog.storage.errors import MissingDependencyError, require

    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(MissingDependencyError) as e:
        require("pyspark", feature="Spark")
    assert e.value.module == "pyspark" and e.value.extra == "spark"
    assert "pip install 'kafkalog[spark]'" in str(e.value) and "Spark needs" in str(e.value)
    assert require("json") is json


def test_export_parquet_without_pyarrow(tmp_path):
    data = multi_partition_data_dir(tmp_path / "data", partitions=1)
    out = tmp_path / "pq"
    r = _without(["pyarrow"], _cli(["export", str(data), "--format", "parquet", "--out", str(out)]))
    assert r.returncode == 1, r.stderr
    assert "pip install 'kafkalog[spark]'" in r.stderr and "pyarrow" in r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()  # nothing half-written


def test_spark_without_pyspark(tmp_path):
    data = multi_partition_data_dir(tmp_path / "data", partitions=1)
    r = _without(["pyspark"], _cli(["spark", "verify", str(data)]))
    assert r.returncode == 1, r.stderr
    assert "pip install 'kafkalog[spark]'" in r.stderr and "'pyspark'" in r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr


def test_to_arrow_without_pyarrow(tmp_path):
    seg = next((FIXTURES / "kafka-4.3.1-kraft" / "data" / "codec-none-0").glob("*.log"))
    r = _without(["pyarrow"], "from kafkalog.storage.errors import MissingDependencyError\n"
                              "from kafkalog.storage.records import to_arrow\n"
                              f"try:\n    to_arrow(open({str(seg)!r}, 'rb').read())\n"
                              "except MissingDependencyError as e:\n    print(e.extra, e)\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("spark ") and "pip install 'kafkalog[spark]'" in r.stdout


# ------------------------------------------------------------------------------------------ 6: output paths


def test_parquet_to_stdout_is_refused(tmp_path, capsys, monkeypatch):
    data = multi_partition_data_dir(tmp_path / "data", partitions=1)
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(data), "--format", "parquet", "--out", "-"]) == 2
    assert "cannot go to stdout" in capsys.readouterr().err
    assert not (tmp_path / "-").exists()


def test_parquet_into_a_non_empty_dir(tmp_path, capsys):
    data = multi_partition_data_dir(tmp_path / "data", partitions=3)
    out = tmp_path / "pq"
    assert main(["export", str(data), "--format", "parquet", "--out", str(out)]) == 0
    assert "new directory" in capsys.readouterr().out
    first = sorted(p.name for p in out.iterdir())
    assert first == ["orders-0.parquet", "orders-1.parquet", "orders-2.parquet", "payments.v1-0.parquet"]
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    # a second export into the same dir: refused, the earlier export untouched
    assert main(["export", str(data), "--topics", "payments.v1", "--format", "parquet", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "not empty" in err and "--overwrite" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # --overwrite: only the new export's files are there, and the summary says it replaced the earlier one
    assert main(["export", str(data), "--topics", "payments.v1", "--format", "parquet", "--out", str(out),
                 "--overwrite", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["replaced"] is True and summary["out"] == str(out)
    assert sorted(p.name for p in out.iterdir()) == ["payments.v1-0.parquet"]
    assert summary["files"] == [str(out / "payments.v1-0.parquet")]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".pq")] == []  # no staging dir left
    # an empty existing dir is simply used
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["export", str(data), "--topics", "payments.v1", "--format", "parquet", "--out", str(empty)]) == 0
    assert [p.name for p in empty.iterdir()] == ["payments.v1-0.parquet"]


def test_a_failed_parquet_export_leaves_the_earlier_one(tmp_path, capsys):
    data = multi_partition_data_dir(tmp_path / "data", partitions=1)
    out = tmp_path / "pq"
    assert main(["export", str(data), "--format", "parquet", "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    # a torn batch in the middle of orders-0's first segment: the export stops with an error
    seg = sorted((data / "payments.v1-0").glob("*.log"))[0]
    with open(seg, "r+b") as f:
        f.seek(61)
        f.write(b"\xff" * 8)
    rc = main(["export", str(data), "--format", "parquet", "--out", str(out), "--overwrite"])
    capsys.readouterr()
    assert rc == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".pq")] == []


def test_spark_export_refuses_before_spark_starts(tmp_path, capsys):
    data = multi_partition_data_dir(tmp_path / "data", partitions=1)
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-00000.parquet").write_bytes(b"earlier")
    assert main(["spark", "export", str(data), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "not empty" in err and "--overwrite" in err
    assert main(["spark", "export", str(data), "--out", "-"]) == 2
    assert "cannot go to stdout" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ 9: ZooKeeper topic ids


def _zk_dir_without_topic_ids(tmp_path: Path) -> Path:
    data = tmp_path / "zk"
    shutil.copytree(FIXTURES / "kafka-3.9.2-zk-v0" / "data", data)
    for f in data.glob("*/partition.metadata"):  # as a 0.10 / 2.x ZooKeeper broker left them
        f.unlink()
    return data


def test_zookeeper_dir_one_warning_about_topic_ids(tmp_path, capsys):
    data = _zk_dir_without_topic_ids(tmp_path)
    partitions = len([p for p in data.iterdir() if p.is_dir()])
    report = verify_paths([data], workers=1)
    warnings = [f for f in report.findings if f.severity == "warning"]
    assert len(warnings) == 1, warnings
    (w,) = warnings
    assert w.file == str(data) and w.kind == "metadata"
    assert "ZooKeeper" in render(w) and "KRaft" in render(w) and f"{partitions} partitions" in render(w)
    assert f"kafkalog topic-id {data} --topics TOPIC --set" in render(w)
    # the per-partition fact stays, as info
    infos = [f for f in report.findings if f.file.endswith("partition.metadata") and "no topic id" in f.message]
    assert len(infos) == partitions and {f.severity for f in infos} == {"info"}
    # the command it names is real: it assigns the ids, and then the warning is gone
    topic = sorted(p.name.rsplit("-", 1)[0] for p in data.iterdir() if p.is_dir())[0]
    assigned = len(list(data.glob(f"{topic}-*")))
    assert main(["topic-id", str(data), "--topics", topic, "--set", "random", "--no-backup"]) == 0
    capsys.readouterr()
    report = verify_paths([data], workers=1)
    (w,) = [f for f in report.findings if f.severity == "warning"]
    assert f"{partitions - assigned} partitions" in render(w)
    # human output: one warning line
    assert main(["verify", str(data)]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()].count("warning") == 1 and out.count("ZooKeeper-mode") == 1


def test_kraft_dir_still_warns_per_partition(tmp_path):
    data = tmp_path / "kraft"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", data)
    (data / "codec-gzip-0" / "partition.metadata").unlink()
    report = verify_paths([data], workers=1)
    (w,) = [f for f in report.findings if f.severity == "warning"]
    assert w.file == str(data / "codec-gzip-0" / "partition.metadata") and "stray" in render(w)


# --------------------------------------------------------------------------------------- 11: conventions


def test_now_takes_the_time_grammar(tmp_path, capsys):
    from kafkalog.storage.log.offset_spec import parse_timestamp

    day = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
    assert parse_timestamp("2026-01-01") == day == parse_timestamp(str(day)) == parse_timestamp(str(day // 1000))
    assert parse_timestamp("-1d", now_ms=day) == day - 86_400_000
    data = multi_partition_data_dir(tmp_path / "data", partitions=1)
    outs = []
    for now in (str(day), "2026-01-01", "2026-01-01T00:00:00Z", str(day // 1000)):
        assert main(["retain", str(data), "--now", now, "--dry-run", "--json"]) == 0
        outs.append(capsys.readouterr().out)
    assert len(set(outs)) == 1
    assert main(["retain", str(data), "--now=-1d", "--dry-run"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["retain", str(data), "--now", "yesterday", "--dry-run"])
    assert e.value.code == 2
    assert "cannot read 'yesterday' as a timestamp" in capsys.readouterr().err
    # export's --from-time / --to-time: the same grammar (they took epoch ms or a local-time ISO string)
    for bounds in (["--from-time", "1970-01-01", "--to-time", "2100-01-01T00:00:00Z"], ["--from-time=-36500d"]):
        assert main(["export", str(data), "--out", str(tmp_path / "all.jsonl"), *bounds]) == 0
        assert (tmp_path / "all.jsonl").read_text().count("\n") > 0
    capsys.readouterr()
    for cmd in (["compact", str(data)], ["repair", str(data)], ["flush", str(data)], ["doctor", str(data)],
                ["transactions", str(data)]):
        with pytest.raises(SystemExit) as e:
            main([*cmd, "--now", "soon"])
        assert e.value.code == 2 and "--now" in capsys.readouterr().err, cmd


def test_export_payload(tmp_path, capsys):
    data = multi_partition_data_dir(tmp_path / "data", partitions=1)
    rows = {}
    for payload in ("base64", "utf8", "hex"):
        out = tmp_path / f"{payload}.jsonl"
        assert main(["export", str(data), "--topics", "orders", "--out", str(out), "--payload", payload]) == 0
        rows[payload] = [json.loads(line) for line in out.read_text().splitlines()]
    capsys.readouterr()
    assert len(rows["base64"]) > 0
    for b, u, h in zip(rows["base64"], rows["utf8"], rows["hex"], strict=True):
        for k in ("key", "value"):
            raw = None if b[k] is None else base64.b64decode(b[k])
            assert (None if u[k] is None else u[k].encode("utf-8", "surrogateescape")) == raw
            assert (None if h[k] is None else bytes.fromhex(h[k])) == raw
    # the same rendering as dump --payload (one implementation)
    seg = sorted((data / "orders-0").glob("*.log"))[0]
    assert main(["dump", "--json", "--deep", "--payload", "hex", str(seg)]) == 0
    dumped = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    values = [r["value"] for b in dumped for r in b.get("records", [])]
    assert values[:len(rows["hex"])] == [r["value"] for r in rows["hex"]][:len(values)]
    assert main(["export", str(data), "--format", "parquet", "--out", str(tmp_path / "p"), "--payload", "hex"]) == 2


def test_describe_sorts_partitions_numerically_and_filters_topics(tmp_path, capsys):
    data = multi_partition_data_dir(tmp_path / "data", partitions=12)
    names = [d["dir"] for d in describe_paths([data], scan=False)]
    assert names == [f"orders-{p}" for p in range(12)] + ["payments.v1-0"]
    assert main(["describe", str(data), "--fast"]) == 0
    table = capsys.readouterr().out
    assert table.index("orders-2 ") < table.index("orders-10 ")
    assert main(["describe", str(data), "--json", "--topics", "payments.v1"]) == 0
    assert [json.loads(x)["dir"] for x in capsys.readouterr().out.splitlines()] == ["payments.v1-0"]
    assert main(["describe", str(data), "--topics", "nope"]) == 1
    assert "no partition of topic nope" in capsys.readouterr().err


def test_top_level_help_lists_every_exit_code(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for code in ("0 ok", "1 findings", "2 usage", "3 internal error", "4 `doctor`"):
        assert code in text, code


def test_unknown_option_prints_the_commands_usage(tmp_path):
    data = multi_partition_data_dir(tmp_path / "data", partitions=1)
    env = {k: v for k, v in os.environ.items() if k != "KAFKALOG_DEBUG"}
    r = subprocess.run([sys.executable, "-m", "kafkalog", "export", str(data), "--out", "-", "--bogus"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2
    assert r.stderr.startswith("usage: kafkalog export ") and "unrecognized arguments: --bogus" in r.stderr
    assert "COMMAND" not in r.stderr
    assert r.stdout == ""


@pytest.mark.spark
def test_spark_export_overwrite_replaces_the_directory(tmp_path):
    data = multi_partition_data_dir(tmp_path / "data", partitions=1)
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-00000-earlier.parquet").write_bytes(b"an earlier export")
    r = subprocess.run([sys.executable, "-m", "kafkalog", "spark", "export", str(data), "--topics", "orders",
                        "--out", str(out), "--overwrite", "--master", "local[1]", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.splitlines()[-1])["summary"]
    assert summary["replaced"] is True and summary["out"] == str(out) and summary["records"] > 0
    assert not (out / "part-00000-earlier.parquet").exists()
    assert {p.name for p in out.iterdir()} >= {"_SUCCESS", "topic=orders"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out"]  # no staging dir left beside it
