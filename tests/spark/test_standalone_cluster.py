"""The jobs and the data source on a real Spark standalone cluster (master + worker JVMs on this machine), not
only ``local[*]``: the same code with another master, as the design promises. Paths are given relative to the
driver's working directory, which the executors do not share."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from builders import BASE_TS, generated_partition
from standalone import standalone_cluster

from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.cleaner.manager import plan_compact
from kafkalog.storage.engine.plan import apply

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with standalone_cluster(tmp_path_factory.mktemp("spark-standalone")) as c:
        yield c


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def _executor_logs(work: Path) -> list[Path]:
    return sorted(work.glob("app-*/*/stderr"))


def test_verify_on_the_cluster_is_kafkalog_verify(cluster, tmp_path):
    url, work = cluster
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", tmp_path / "data")
    before = len(_executor_logs(work))
    p = _cli("spark", "verify", "data", "--master", url, "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [json.loads(x) for x in p.stdout.splitlines()]
    summary = rows.pop()["summary"]
    single = _cli("verify", "data", "--json", "--info", "--workers", "1", cwd=tmp_path)
    want = [json.loads(x) for x in single.stdout.splitlines() if x.startswith("{") and '"file"' in x]
    norm = lambda r: (os.path.abspath(tmp_path / r["file"]), r["position"], r["kind"], r["message"])  # noqa: E731
    assert sorted(map(norm, rows)) == sorted(map(norm, want))
    assert summary["partitions"] == 26 and summary["segments"] > 0 and summary["error"] == 0
    assert len(_executor_logs(work)) > before  # the tasks ran in the worker's executors


def test_data_source_reads_the_same_records(cluster, tmp_path):
    url, _ = cluster
    shutil.copytree(FIXTURES / "kafka-3.9.2-zk-v1" / "data", tmp_path / "data")
    script = ("import sys; from kafkalog.tools.spark import session\n"
              "s = session(sys.argv[1])\n"
              "rows = s.read.format('kafkalog').option('includeControlRecords', 'true').load('data').select('topic', 'partition', 'offset', 'value')"
              ".collect()\n"
              "print(len(rows), sum(hash((r.topic, r.partition, r.offset, bytes(r.value or b''))) for r in rows))\n"
              "s.stop()\n")
    got = {}
    for master in (url, "local[1]"):
        p = subprocess.run([sys.executable, "-c", script, master], capture_output=True, text=True, timeout=300,
                           cwd=tmp_path, env={**os.environ, "PYTHONHASHSEED": "0"})
        assert p.returncode == 0, p.stderr[-3000:]
        got[master] = p.stdout.split()[-2:]
    assert got[url] == got["local[1]"] and int(got[url][0]) > 0
    p = _cli("spark", "export", "data", "--out", "out.parquet", "--master", url, "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.splitlines()[-1])["summary"]["records"] == int(got[url][0])
    assert any((tmp_path / "out.parquet").rglob("*.parquet"))


def test_compact_on_the_cluster_equals_single_machine(cluster, tmp_path):
    url, _ = cluster
    root = tmp_path / "d"
    for p in range(3):
        generated_partition(root / f"c-{p}", 2000, batch_records=50, segment_bytes=1 << 18, value_size=300)
    twin = tmp_path / "twin"
    shutil.copytree(root, twin)
    now = BASE_TS + 10**8
    p = _cli("spark", "compact", "d", "--master", url, "--json", "--now", str(now), "--all", "--no-backup",
             "--config", "cleanup.policy=compact", cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    apply(plan_compact([twin], now_ms=now, resolver=ConfigResolver(None, None, {"cleanup.policy": "compact"}),
                       force=True), backup=False)
    for f in sorted(twin.rglob("*")):
        if f.is_file() and f.suffix in (".log", ".index", ".timeindex"):
            assert (root / f.relative_to(twin)).read_bytes() == f.read_bytes(), f
    ck = "cleaner-offset-checkpoint"
    assert sorted((root / ck).read_text().splitlines()) == sorted((twin / ck).read_text().splitlines())
