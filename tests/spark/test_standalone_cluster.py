"""The jobs and the data source on a real Spark standalone cluster (a master and two worker JVMs on this machine),
not only ``local[*]``: the same code with another master, as the design promises. Paths are given relative to the
driver's working directory, which the executors do not share; ``spark-submit`` runs a job with the arguments
``kafkalog spark jars`` prints, as ``docs/commands/spark.md`` says."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from builders import BASE_TS, generated_partition
from standalone import spark_home, standalone_cluster

from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.cleaner.manager import plan_compact
from kafkalog.storage.engine.plan import apply

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with standalone_cluster(tmp_path_factory.mktemp("spark-standalone"), workers=2, cores=1) as c:
        yield c


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def _executor_logs(work: Path) -> list[Path]:
    return sorted(work.glob("w*/app-*/*/stderr"))


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


#: a job as a user submits it: ``format("kafkalog")`` on the session spark-submit made (kafkalog's jar on it)
SUBMITTED_JOB = """\
import hashlib, json, sys
from pyspark.sql import SparkSession
from kafkalog.tools.spark import register
spark = SparkSession.builder.appName("kafkalog-submitted").getOrCreate()
register(spark)
df = spark.read.format("kafkalog").options(**json.loads(sys.argv[2])).load(sys.argv[1])
plan = df._jdf.queryExecution().executedPlan().toString()
rows = sorted((r.topic, r.partition, r.offset, (r.value or b"").hex()) for r in
              df.select("topic", "partition", "offset", "value").collect())
print(json.dumps({"app": spark.sparkContext.applicationId, "scan": "kafkalog segment scan" in plan,
                  "rows": len(rows), "sha256": hashlib.sha256(repr(rows).encode()).hexdigest()}))
spark.stop()
"""


def local_rows(path: str, options: dict[str, str]) -> tuple[int, str]:
    """How many rows kafkalog reads under ``path`` in this process (planner and Python scan, no Spark), and the
    digest :data:`SUBMITTED_JOB` prints for the same rows."""
    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.plan import plan
    from kafkalog.tools.spark.scan import scan

    opts = parse_read_options({**options, "path": path})
    rows = []
    for group in plan(opts):
        for rb in scan(group, opts):
            d = rb.to_pydict()
            rows += [(t, p, o, (v or b"").hex()) for t, p, o, v in zip(d["topic"], d["partition"], d["offset"],
                                                                         d["value"], strict=True)]
    rows.sort()
    return len(rows), hashlib.sha256(repr(rows).encode()).hexdigest()


def spark_submit(url: str, script: str, args: list[str], *, cwd: Path, jars: list[str]) -> dict:
    """Runs ``script`` with ``spark-submit JARS --master URL job.py ARGS``; the JSON line it printed last."""
    job = cwd / "job.py"
    job.write_text(script)
    py = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    p = subprocess.run([str(spark_home() / "bin" / "spark-submit"), *jars, "--master", url, str(job), *args],
                       capture_output=True, text=True, timeout=400, cwd=cwd, env={**os.environ, **py})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    return json.loads(p.stdout.splitlines()[-1])


def test_spark_submit_reads_a_shared_path_through_the_jvm_scan_on_two_workers(cluster, tmp_path):
    """``spark-submit $(kafkalog spark jars) --master URL job.py``: ``format("kafkalog")`` is the JVM source and
    scan, its tasks run in executors on both workers, and the rows are kafkalog's local read of the same dir."""
    url, work = cluster
    data = tmp_path / "shared" / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", data)
    jars = _cli("spark", "jars", cwd=tmp_path)
    assert jars.returncode == 0, jars.stderr[-2000:]
    options = {"includeControlRecords": "true"}
    got = spark_submit(url, SUBMITTED_JOB, [str(data), json.dumps(options)], cwd=tmp_path,
                       jars=shlex.split(jars.stdout))
    assert got["scan"], "format('kafkalog') did not read through the JVM segment scan"
    assert (got["rows"], got["sha256"]) == local_rows(str(data), options) and got["rows"] > 1000
    ran = [w.name for w in sorted(work.glob("w*")) if (w / got["app"]).is_dir()]
    assert ran == ["w0", "w1"], f"the application's executors ran on {ran}"


@pytest.mark.campaign
def test_spark_submit_reads_s3_and_a_shared_path_on_two_workers(cluster, s3_endpoint, tmp_path, monkeypatch):
    """``spark-submit $(kafkalog spark jars --s3a) --master URL``: the same data dir on a shared path and uploaded to
    S3 (moto) reads through the JVM scan on both workers' executors (``s3a://`` through Hadoop's FileSystem), with
    the same rows, which are kafkalog's local read.

    Campaign, not CI: ``--packages`` hadoop-aws brings its AWS SDK bundle (686 MB of 690), and each executor copies
    every package jar from the driver into its work dir, 679 MB per executor, 1.4 GB for the two (135 s for this
    test at load 20). CI reads ``s3a://`` in ``test_jvm_s3a.py`` (one JVM) and a shared path on this cluster."""
    from test_jvm_s3a import check_same, pairs, submit, upload

    url, work = cluster
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    data = tmp_path / "shared" / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", data)
    s3 = upload(s3_endpoint, data, "cluster/kraft431")
    apps = {w.name: set(w.glob("app-*")) for w in work.glob("w*")}
    out = submit(pairs(s3_endpoint, "cluster", data, s3, includeControlRecords="true"), tmp_path, master=url)
    assert check_same(out, "cluster") == local_rows(str(data), {"includeControlRecords": "true"})[0]
    new = {w.name: set(w.glob("app-*")) - apps[w.name] for w in work.glob("w*")}
    assert all(len(v) == 1 for v in new.values()) and len(new) == 2, new  # one application, on both workers


#: a streaming job as a user submits it: ``readStream.format("kafkalog")`` into Parquet, ``availableNow``
STREAM_JOB = """\\
import json, sys
from pyspark.sql import SparkSession
from kafkalog.tools.spark import register
spark = SparkSession.builder.appName("kafkalog-stream-submitted").getOrCreate()
register(spark)
q = (spark.readStream.format("kafkalog").option("maxOffsetsPerTrigger", "400").load(sys.argv[1])
     .writeStream.format("parquet").option("path", sys.argv[2]).option("checkpointLocation", sys.argv[3])
     .trigger(availableNow=True).start())
q.awaitTermination()
print(json.dumps({"app": spark.sparkContext.applicationId, "source": q.lastProgress["sources"][0]["description"],
                  "batches": q.lastProgress["batchId"] + 1, "rows": spark.read.parquet(sys.argv[2]).count()}))
spark.stop()
"""


def test_spark_submit_streams_a_shared_path_through_the_jvm_stream_on_two_workers(cluster, tmp_path):
    """``readStream.format("kafkalog")`` submitted with ``kafkalog spark jars``: the JVM stream (micro-batches
    decoded by the JVM scan on both workers' executors) writes every record of the dir once, in several
    micro-batches (``maxOffsetsPerTrigger``)."""
    url, work = cluster
    data = tmp_path / "shared" / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", data)
    jars = shlex.split(_cli("spark", "jars", cwd=tmp_path).stdout)
    got = spark_submit(url, STREAM_JOB, [str(data), str(tmp_path / "out"), str(tmp_path / "chk")], cwd=tmp_path,
                       jars=jars)
    assert "JVM segment scan" in got["source"], got
    assert got["rows"] == local_rows(str(data), {})[0] and got["batches"] > 1, got
    ran = [w.name for w in sorted(work.glob("w*")) if (w / got["app"]).is_dir()]
    assert ran == ["w0", "w1"], f"the application's executors ran on {ran}"
