"""The JVM segment scan reads a data dir uploaded to S3 (a local moto server) through Hadoop's ``s3a://``
FileSystem, with the rows of the same data dir read locally; the planner (kafkalog's, through its filesystem seam)
plans the same pieces for ``s3a://`` and ``s3://``.

Run as a user runs a job: ``spark-submit $(kafkalog spark jars --s3a) read_job.py`` (hadoop-aws in the version of
pyspark's Hadoop, and its AWS SDK bundle, resolved by Spark's Ivy from Maven Central: about 690 MB the first time
on a machine, kept in Ivy's cache). CI reads a sample (the 4.3.1 fixture, a generated dir whose 1 MiB segments are
split and read in windows, a planning option, a corrupt batch); every fixture under ``-m campaign``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from builders import corrupt_generated_partition, generated_data_dir
from standalone import spark_home
from test_read import FIXTURES

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

HERE = Path(__file__).resolve().parent
BUCKET = "kafkalog-s3a"
KEYS = {"s3.accessKey": "test", "s3.secretKey": "test", "s3.region": "us-east-1"}


def submit(cases: list[dict], tmp: Path, master: str = "local[2]", extra: list[str] | None = None, s3a: bool = True,
           env: dict[str, str] | None = None) -> dict[str, dict]:
    """``spark-submit $(kafkalog spark jars --s3a) --master MASTER read_job.py`` over ``cases`` (without ``--s3a``
    when ``s3a`` is false; ``env``: more environment, ``HADOOP_CONF_DIR``): their answers by name (and the run's
    seconds under ``"_seconds"``)."""
    from kafkalog.tools.spark.jvm import submit_args

    found = submit_args(s3a=s3a)
    spec = tmp / f"cases-{time.monotonic_ns()}.json"
    spec.write_text(json.dumps(cases))
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--jars", ",".join(found["jars"]),
           *(["--packages", ",".join(found["packages"])] if found["packages"] else []), "--master", master,
           "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.ui.enabled=false", *(extra or []),
           str(HERE / "read_job.py"), str(spec)]  # fmt: skip
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "AWS_EC2_METADATA_DISABLED": "true", **(env or {})}
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=800, env=env, cwd=tmp)
    seconds = time.monotonic() - t0
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    out = {r["name"]: r for r in (json.loads(x[5:]) for x in p.stdout.splitlines() if x.startswith("READ "))}
    assert set(out) == {c["name"] for c in cases}, p.stderr[-4000:]
    out["_seconds"] = {"seconds": seconds}
    return out


def upload(endpoint: str, local: Path, key: str) -> str:
    """``local`` copied under ``s3://kl/key`` on the moto server; the ``s3a://`` URL."""
    import pyarrow.fs as pafs

    fs = pafs.S3FileSystem(endpoint_override=endpoint.removeprefix("http://"), scheme="http", access_key="test",
                           secret_key="test", region="us-east-1", allow_bucket_creation=True)
    fs.create_dir(BUCKET)
    pafs.copy_files(str(local), f"{BUCKET}/{key}", source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    return f"s3a://{BUCKET}/{key}"


def pairs(endpoint: str, name: str, local: Path, url: str, **options: str) -> list[dict]:
    return [{"name": f"{name}/local", "path": str(local), "options": options},
            {"name": f"{name}/s3a", "path": url, "options": {**options, **KEYS, "s3.endpoint": endpoint}}]


def check_same(out: dict[str, dict], name: str, side: str = "s3a", under: str = f"s3://{BUCKET}/") -> int:
    """The case ``name`` read locally and on the other side (``NAME/SIDE``, its segments named ``under...``): both
    by the JVM scan, the same rows; their number."""
    a, b = out[f"{name}/local"], out[f"{name}/{side}"]
    assert "error" not in a and "error" not in b, (a, b)
    assert a["scan"] and b["scan"], (a["plan"], b["plan"])
    assert (b["rows"], b["digest"]) == (a["rows"], a["digest"]), name
    assert b["segment"] is None or b["segment"].startswith(under), b["segment"]
    return int(a["rows"])


def test_the_planner_plans_s3a_as_s3(s3_endpoint, tmp_path, monkeypatch):
    """No Spark: ``s3a://`` and ``s3://`` give the same pieces (storage.io.fs.split_uri), named for Hadoop as
    ``s3a://`` (storage.io.fs.hadoop_url), with the planner's endpoint and keys as ``fs.s3a.*``."""
    from kafkalog.tools.spark.jvm import encode_pieces, hadoop_schemes, scan_options
    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.plan import plan

    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    local = generated_data_dir(tmp_path / "d", {"p": 1}, 300, segment_bytes=1 << 16, value_size=200)
    url = upload(s3_endpoint, local, "plan/d")
    opts = {**KEYS, "s3.endpoint": s3_endpoint, "maxPartitionBytes": "40000"}
    got = {}
    for path in (url, url.replace("s3a://", "s3://")):
        o = parse_read_options({**opts, "path": path})
        groups = plan(o)
        got[path] = [(p.name, p.start, p.end) for g in groups for p in g], encode_pieces(groups, o)
        assert hadoop_schemes(groups) == ["s3a"]
        assert scan_options(groups)["hadoop.fs.s3a.endpoint"] == s3_endpoint
    (pieces, enc), (pieces2, enc2) = got.values()
    assert pieces == pieces2 and enc == enc2 and len(pieces) >= 2
    assert all(n.startswith(f"s3://{BUCKET}/plan/d/p-0/") for n, _, _ in pieces)
    assert enc.startswith(f"s3a://{BUCKET}/plan/d/p-0/")


@pytest.fixture(scope="module")
def uploaded(s3_endpoint, tmp_path_factory):
    """The sample: the 4.3.1 fixture and a generated dir (1 MiB segments, split), each local and on S3."""
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    root = tmp_path_factory.mktemp("s3a")
    gen = generated_data_dir(root / "gen", {"g": 2}, 3000, segment_bytes=1 << 20, value_size=400)
    fixture = FIXTURES / "kafka-4.3.1-kraft" / "data"
    return root, {"gen": (gen, upload(s3_endpoint, gen, "gen")),
                  "kraft431": (fixture, upload(s3_endpoint, fixture, "kraft431"))}


def test_s3a_reads_equal_local_reads(s3_endpoint, uploaded):
    root, dirs = uploaded
    bad = root / "bad"
    _, pos = corrupt_generated_partition(bad / "t-0")
    bad_url = upload(s3_endpoint, bad, "bad")
    gen, gen_url = dirs["gen"]
    fixture, fixture_url = dirs["kraft431"]
    cases = [*pairs(s3_endpoint, "gen", gen, gen_url, maxPartitionBytes=str(300 * 1024)),
             *pairs(s3_endpoint, "gen-window", gen, gen_url, startingOffset="1234", endingOffset="2900"),
             *pairs(s3_endpoint, "kraft431", fixture, fixture_url, includeControlRecords="true"),
             {"name": "bad", "path": bad_url, "options": {**KEYS, "s3.endpoint": s3_endpoint}},
             {"name": "s3-pyarrow", "path": gen_url.replace("s3a://", "s3://"),
              "options": {**KEYS, "s3.endpoint": s3_endpoint}}]  # fmt: skip
    out = submit(cases, root)
    assert check_same(out, "gen") == 6000
    assert check_same(out, "gen-window") == 2 * (2900 - 1234)
    assert check_same(out, "kraft431") > 1000
    assert out["s3-pyarrow"]["scan"] and out["s3-pyarrow"]["digest"] == out["gen/local"]["digest"]
    err = out["bad"].get("error", "")
    assert f"s3://{BUCKET}/bad/t-0/00000000000000000000.log: byte {pos}" in err and "crc" in err.lower(), out["bad"]
    print(f"spark-submit with hadoop-aws, {len(cases)} reads: {out['_seconds']['seconds']:.1f} s")


def test_one_session_plans_the_files_as_they_are_on_s3a(s3_endpoint, tmp_path):
    """The JVM source's planner is kept for the session (``Planner.java``): segments appended to, then deleted from
    the data dir on S3 (and locally) between two queries of one session are read as a fresh session reads them."""
    from test_jvm_planner_kept import changing_dir

    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    data, aside, held = changing_dir(tmp_path / "d")
    url = upload(s3_endpoint, data, "changing")

    def dests(f: Path) -> tuple[str, str]:  # a partition's file: locally and on S3
        return str(data / f.parent.name / f.name), f"{url}/{f.parent.name}/{f.name}"

    def state(name: str, before: list[tuple] = ()) -> list[dict]:
        """The read of one state, local and on S3, after the steps ``before`` (read_job.change)."""
        local, s3a = pairs(s3_endpoint, name, data, url)
        local["before"] = [[op, *args, where[0]] for op, *args, where in before]
        s3a["before"] = [[op, *args, where[1]] for op, *args, where in before]
        return [local, s3a]

    copies = [("copy", str(f), dests(f)) for log in held for f in (aside / log.parent.name).glob(log.stem + ".*")]
    oldest = sorted((data / "g-0").glob("*.log"))[0]
    deletes = [("delete", dests(f)) for f in sorted((data / "g-0").glob(oldest.stem + ".*"))]
    out = submit([*state("first"), *state("appended", copies), *state("deleted", deletes)], tmp_path)
    fresh = submit(state("fresh"), tmp_path)
    first, more, fewer = (check_same(out, n) for n in ("first", "appended", "deleted"))
    assert check_same(fresh, "fresh") == fewer
    assert (fresh["fresh/s3a"]["digest"], fresh["fresh/local"]["digest"]) == (out["deleted/s3a"]["digest"],
                                                                              out["deleted/local"]["digest"])
    assert more == 2 * 3000 > max(first, fewer)


@pytest.mark.campaign
def test_every_fixture_reads_from_s3a_as_locally(s3_endpoint, tmp_path):
    from test_read import partition_dirs

    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    cases = []
    for fx in sorted(FIXTURES.iterdir()):
        data = fx / "data"
        if not data.is_dir() or not partition_dirs(data):
            continue
        url = upload(s3_endpoint, data, fx.name)
        cases += pairs(s3_endpoint, fx.name, data, url, includeControlRecords="true")
    assert len(cases) >= 12
    out = submit(cases, tmp_path)
    for c in cases[::2]:
        check_same(out, c["name"].removesuffix("/local"))


def test_the_s3_options_and_hadoop_s_s3a_keys_say_the_same():
    """No Spark: the planner's ``s3.*`` options become the scan's ``fs.s3a.*`` keys and back (one table)."""
    from kafkalog.storage.io.fs import hadoop_conf, s3_options, split_uri

    given = {"s3.endpoint": "http://127.0.0.1:9", "s3.accesskey": "a", "s3.secretkey": "s", "s3.region": "r"}
    conf = hadoop_conf(split_uri("s3a://b/k", {**given, "s3.accessKey": "a"})[0])
    assert conf["fs.s3a.path.style.access"] == "true" and conf["fs.s3a.connection.ssl.enabled"] == "false"
    assert s3_options(conf) == given
    assert s3_options({"fs.s3a.endpoint": "h:9", "fs.s3a.connection.ssl.enabled": "false"}) == {"s3.endpoint": "http://h:9"}
    assert s3_options({"fs.s3a.endpoint": "h:9"}) == {"s3.endpoint": "https://h:9"}
    assert hadoop_conf(split_uri("/local/dir")[0]) == {}


def test_spark_jars_s3a_adds_hadoop_aws_of_spark_s_hadoop(capsys, monkeypatch):
    from kafkalog.tools.cli import main
    from kafkalog.tools.spark.jvm import KAFKA_CLIENTS_PACKAGE, hadoop_aws_package, scan_jar

    monkeypatch.delenv("KAFKALOG_KAFKA_CLIENTS_JAR", raising=False)
    assert hadoop_aws_package().startswith("org.apache.hadoop:hadoop-aws:3.")  # 3.5.0 for pyspark 4.3.0
    assert main(["spark", "jars", "--s3a"]) == 0
    assert capsys.readouterr().out == f"--jars {scan_jar()} --packages {KAFKA_CLIENTS_PACKAGE},{hadoop_aws_package()}\n"


def test_s3a_streams_as_the_python_stream_and_as_locally(s3_endpoint, tmp_path):
    """``spark.readStream.format("kafkalog")`` over ``s3a://`` is the JVM stream (the planner lists the bucket
    through its filesystem seam, the executors read the pieces through Hadoop's ``s3a://``), micro-batch by
    micro-batch as the Python stream over the same objects and as the JVM stream over the same files locally: rate
    limited (``maxOffsetsPerTrigger``), a new segment object put into the bucket between two triggers (after the
    availableNow query's end: read by the next query), then a restart from the checkpoint; every offset once. The
    same on a processing-time trigger (one query reads the new object), and segment objects deleted between the plan
    and the read of a micro-batch with ``failOnDataLoss`` false; one replaced then (an object of its first half put
    under its key, as the log cleaner swaps a segment) fails the query naming it (``FileStamp``: the size and
    modification time of the planner's listing, compared with Hadoop's ``FileStatus``)."""
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    data = generated_data_dir(tmp_path / "d", {"g": 2}, 400, segment_bytes=1 << 14, value_size=200)
    aside = tmp_path / "aside"
    aside.mkdir()
    last = sorted((data / "g-0").glob("*.log"))[-1]
    held = sorted((data / "g-0").glob(last.stem + ".*"))
    for f in held:  # the segment the broker rolls to later: copied in while the stream runs
        f.rename(aside / f.name)
    opts = {"maxOffsetsPerTrigger": "150", "startingOffsets": "earliest"}
    cases = []
    gone = sorted((data / "g-1").glob("*.log"))[:2]  # retention's next two (micro-batch 1 reads the second)
    half = tmp_path / "half.log"  # the second, as compaction might leave it
    half.write_bytes(gone[1].read_bytes()[:gone[1].stat().st_size // 2])
    for name, fmt in (("jvm", "kafkalog"), ("python", "python"), ("local", "kafkalog"), ("jvm-gone", "kafkalog"),
                      ("python-gone", "python"), ("jvm-live", "kafkalog"), ("python-live", "python"),
                      ("jvm-replaced", "kafkalog")):
        if name == "local":
            root, url, options = tmp_path / "local", str(tmp_path / "local"), opts
            shutil.copytree(data, root)
        else:
            url, options = upload(s3_endpoint, data, f"stream-{name}"), {**opts, **KEYS, "s3.endpoint": s3_endpoint}
        append = [["copy", str(aside / f.name), f"{url}/g-0/{f.name}"] for f in held]
        if name.endswith("-gone"):  # deleted after the driver planned micro-batch 1, before it is read
            options = {**options, "failOnDataLoss": "false"}
            append = [["delete", f"{url}/g-1/{f.name}"] for log in gone for f in sorted(log.parent.glob(log.stem + ".*"))]
        if name.endswith("-replaced"):  # replaced after the driver planned micro-batch 1, before it is read
            append = [["copy", str(half), f"{url}/g-1/{gone[1].name}"]]
        cases.append({"name": name, "stream": fmt, "path": url, "options": options, "append": append,
                      "appendAfter": 1, "checkpoint": str(tmp_path / f"ckpt-{name}"),
                      "queries": 1 if name.endswith(("-gone", "-replaced")) else 2,
                      "until": 800 if name.endswith("-live") else None})
    out = submit(cases, tmp_path)
    for name in ("jvm", "python", "local", "jvm-gone", "python-gone", "jvm-live", "python-live"):
        assert "error" not in out[name], out[name]["error"]
    replaced = out["jvm-replaced"].get("error", "")
    assert f"DataLossError: s3://{BUCKET}/stream-jvm-replaced/g-1/{gone[1].name} (offsets " in replaced, replaced
    assert (f"was replaced after the read was planned: planned {gone[1].stat().st_size} bytes" in replaced
            and f"found {half.stat().st_size} bytes" in replaced), replaced
    jvm, python, local = out["jvm"], out["python"], out["local"]
    assert jvm["descriptions"] == local["descriptions"] == ["kafkalog stream (JVM segment scan)"]
    assert python["descriptions"] != jvm["descriptions"]
    assert jvm["batches"] == python["batches"]
    assert {k: b["offsets"] for k, b in jvm["batches"].items()} == {k: b["offsets"] for k, b in
                                                                   local["batches"].items()}
    offsets = [tuple(o) for b in jvm["batches"].values() for o in b["offsets"]]
    assert len(offsets) == len(set(offsets)) == 2 * 400  # the held segment too, each offset once
    assert max(len(b["offsets"]) for b in jvm["batches"].values()) <= 150 and len(jvm["batches"]) >= 6
    # with failOnDataLoss false, both streams lose what micro-batch 1 read of the deleted segments, and read on
    assert out["jvm-gone"]["descriptions"] == jvm["descriptions"] and out["jvm-gone"]["batches"] == out[
        "python-gone"]["batches"]
    seen = {(p, o) for b in out["jvm-gone"]["batches"].values() for p, o in b["offsets"]}
    missing = {(1, o) for o in range(100)} - seen
    assert missing and all(o >= 50 for _, o in missing) and len(seen) == 750 - len(missing), sorted(missing)
    # one query on a processing-time trigger reads the segment object put in the bucket while it runs (its kept
    # planner lists the bucket again at each trigger), as the Python stream does
    live = out["jvm-live"]
    assert live["descriptions"] == jvm["descriptions"] and live["batches"] == out["python-live"]["batches"]
    offsets = [tuple(o) for b in live["batches"].values() for o in b["offsets"]]
    assert len(offsets) == len(set(offsets)) == 2 * 400
    print(f"JVM stream over s3a: {len(jvm['batches'])} micro-batches, {out['_seconds']['seconds']:.1f} s")
