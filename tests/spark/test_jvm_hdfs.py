"""``hdfs://`` as a Hadoop user meets it: a data dir put into HDFS (Hadoop's MiniDFSCluster of pyspark's Hadoop
version, ``hdfs_cluster``) is read by ``spark.read.format("kafkalog")`` through the JVM segment scan (Hadoop's own
``hdfs://`` FileSystem, Spark's bundled client) with the rows of the same dir read locally. The planner lists it
through its filesystem seam without libhdfs: WebHDFS at the namenode HTTP address of ``$HADOOP_CONF_DIR``'s
``hdfs-site.xml`` (:mod:`kafkalog.storage.io.hdfs`). The command line reads ``hdfs://`` through the same seam.

Run as a user runs a job: ``HADOOP_CONF_DIR=... spark-submit $(kafkalog spark jars) read_job.py``. CI reads a
sample (the 4.3.1 fixture, a generated dir whose 1 MiB segments are split, a window, a corrupt batch, the same dir
as ``webhdfs://``); every fixture under ``-m campaign``. The mini cluster's jars come from Maven Central the first
time (56 MB, kept in ``~/.cache/kafkalog``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from builders import corrupt_generated_partition, generated_data_dir
from test_jvm_s3a import check_same, submit
from test_read import FIXTURES

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def hdfs_conf(hdfs_cluster):
    """``HADOOP_CONF_DIR`` of the cluster in this process's environment (a Hadoop user's shell)."""
    before = os.environ.get("HADOOP_CONF_DIR")
    os.environ["HADOOP_CONF_DIR"] = str(hdfs_cluster.conf_dir)
    yield hdfs_cluster
    if before is None:
        os.environ.pop("HADOOP_CONF_DIR", None)
    else:
        os.environ["HADOOP_CONF_DIR"] = before


@pytest.fixture(scope="module")
def uploaded(hdfs_conf, tmp_path_factory):
    """The sample: the 4.3.1 fixture, a generated dir (1 MiB segments, split) and one with a corrupt batch, each
    local and in HDFS; the corrupt batch's file and byte."""
    root = tmp_path_factory.mktemp("hdfs-data")
    gen = generated_data_dir(root / "gen", {"g": 2}, 3000, segment_bytes=1 << 20, value_size=400)
    fixture = FIXTURES / "kafka-4.3.1-kraft" / "data"
    bad = root / "bad"
    _, pos = corrupt_generated_partition(bad / "t-0")
    dirs = {name: (local, hdfs_conf.put(local, f"/{name}")) for name, local in
            (("gen", gen), ("kraft431", fixture), ("bad", bad))}
    return root, dirs, pos


def pairs(name: str, local: Path, url: str, **options: str) -> list[dict]:
    return [{"name": f"{name}/local", "path": str(local), "options": options},
            {"name": f"{name}/hdfs", "path": url, "options": options}]


def test_the_planner_plans_hdfs_through_webhdfs(uploaded, hdfs_conf):
    """No Spark, no libhdfs: the planner lists ``hdfs://`` through WebHDFS (the namenode's HTTP address from
    ``hdfs-site.xml``, from the option ``hdfs.httpAddress``, or a ``webhdfs://`` URL) and plans the pieces of the
    local dir, named for Hadoop as the URL given; each piece's stamp is the one Hadoop's FileStatus gives."""
    from kafkalog.storage.io.fs import forget_listings
    from kafkalog.tools.spark.jvm import encode_pieces, hadoop_schemes
    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.plan import plan

    (gen, url), http = uploaded[1]["gen"], hdfs_conf.http_address
    local = plan(parse_read_options({"path": str(gen), "maxPartitionBytes": "300000"}))
    want = [(p.name.removeprefix(str(gen)), p.start, p.end) for g in local for p in g]
    for path, options in ((url, {}), (url, {"hdfs.httpAddress": http}), (f"webhdfs://{http}/gen", {})):
        forget_listings()
        o = parse_read_options({**options, "path": path, "maxPartitionBytes": "300000"})
        groups = plan(o)
        assert [(p.name.removeprefix(path), p.start, p.end) for g in groups for p in g] == want, path
        if path.startswith("hdfs://"):  # (webhdfs:// is read by the Python source: storage.io.hdfs)
            assert hadoop_schemes(groups) == ["hdfs"] and encode_pieces(groups, o).startswith(f"{path}/g-")
        stamps = {p.stamp for g in groups for p in g}
        assert all(s.mtime_ms > 1_600_000_000_000 and s.inode == -1 for s in stamps), stamps
    assert len(want) >= 4


def test_hdfs_reads_equal_local_reads(uploaded, hdfs_conf):
    """``spark-submit`` (``HADOOP_CONF_DIR`` set, no ``--packages`` for HDFS: Spark's Hadoop client reads it): batch
    reads, and an availableNow stream (``maxOffsetsPerTrigger``) micro-batch by micro-batch as over the local dir."""
    root, dirs, pos = uploaded
    (gen, gen_url), (fixture, fixture_url), (_, bad_url) = dirs["gen"], dirs["kraft431"], dirs["bad"]
    web = f"webhdfs://{hdfs_conf.http_address}/gen"
    cases = [*pairs("gen", gen, gen_url, maxPartitionBytes=str(300 * 1024)),
             *pairs("gen-window", gen, gen_url, startingOffset="1234", endingOffset="2900"),
             *pairs("kraft431", fixture, fixture_url, includeControlRecords="true"),
             {"name": "bad", "path": bad_url, "options": {}},
             {"name": "webhdfs", "path": web, "options": {}},
             *({"name": f"stream/{side}", "stream": "kafkalog", "path": path, "queries": 1,
                "options": {"maxOffsetsPerTrigger": "2500", "startingOffsets": "earliest"},
                "checkpoint": str(root / f"ckpt-{side}")} for side, path in (("local", str(gen)), ("hdfs", gen_url)))]  # fmt: skip
    out = submit(cases, root, s3a=False, env={"HADOOP_CONF_DIR": str(hdfs_conf.conf_dir)})
    under = f"{hdfs_conf.url}/"
    assert check_same(out, "gen", "hdfs", under) == 6000
    assert check_same(out, "gen-window", "hdfs", under) == 2 * (2900 - 1234)
    assert check_same(out, "kraft431", "hdfs", under) > 1000
    # webhdfs:// is the Python source's (Spark's shaded Hadoop client has no working WebHdfsFileSystem: storage.io.hdfs)
    assert "error" not in out["webhdfs"], out["webhdfs"]["error"][-3000:]
    assert not out["webhdfs"]["scan"] and out["webhdfs"]["digest"] == out["gen/local"]["digest"], out["webhdfs"]
    assert out["webhdfs"]["segment"].startswith(f"{web}/g-"), out["webhdfs"]["segment"]
    # the JVM stream over hdfs:// (planned through WebHDFS, read through Hadoop's hdfs://): the local micro-batches
    local, there = out["stream/local"], out["stream/hdfs"]
    assert "error" not in there, there["error"][-3000:]
    assert there["descriptions"] == local["descriptions"] == ["kafkalog stream (JVM segment scan)"]
    assert there["batches"] == local["batches"] and len(there["batches"]) >= 3
    err = out["bad"].get("error", "")
    assert f"{bad_url}/t-0/00000000000000000000.log: byte {pos}" in err and "crc" in err.lower(), out["bad"]
    print(f"spark-submit over hdfs://, {len(cases)} reads: {out['_seconds']['seconds']:.1f} s")


def test_the_command_line_reads_hdfs_as_the_local_dir(uploaded, hdfs_conf, capsys):
    """``kafkalog describe --json`` and ``kafkalog dump`` of a partition over ``hdfs://`` (WebHDFS, no libhdfs):
    the local dir's answers, named by the URL; ``verify`` of the data dir finds nothing (WebHDFS lists a directory
    in itself: not a partition named ``data``); a corrupt batch is named by its URL (exit 1)."""
    from kafkalog.tools.cli import main

    _, dirs, pos = uploaded
    fixture, url = dirs["kraft431"]

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        got = capsys.readouterr()
        return code, got.out, got.err

    code, there, _ = run("describe", "--json", url)
    assert code == 0
    _, here, _ = run("describe", "--json", str(fixture))
    assert there.replace(url, "DIR") == here.replace(str(fixture), "DIR")
    assert len(there.splitlines()) > 10 and json.loads(there.splitlines()[0])
    code, there, _ = run("dump", "--json", "--deep", f"{url}/codec-zstd-0/00000000000000000000.log")
    _, here, _ = run("dump", "--json", "--deep", str(fixture / "codec-zstd-0" / "00000000000000000000.log"))
    assert code == 0 and there.replace(url, "DIR") == here.replace(str(fixture), "DIR") and there
    code, out, _ = run("verify", url)  # (its worker processes: forked, each with its own WebHDFS connections)
    assert code == 0 and out.startswith("OK: 26 partitions, 33 segments"), out
    code, out, err = run("verify", f"{dirs['bad'][1]}/t-0")
    assert code == 1 and f"{dirs['bad'][1]}/t-0/00000000000000000000.log" in out + err, out + err


@pytest.mark.campaign
def test_every_fixture_reads_from_hdfs_as_locally(hdfs_conf, tmp_path):
    from test_read import partition_dirs

    cases = []
    for fx in sorted(FIXTURES.iterdir()):
        data = fx / "data"
        if not data.is_dir() or not partition_dirs(data):
            continue
        cases += pairs(fx.name, data, hdfs_conf.put(data, f"/all/{fx.name}"), includeControlRecords="true")
    assert len(cases) >= 12
    out = submit(cases, tmp_path, s3a=False, env={"HADOOP_CONF_DIR": str(hdfs_conf.conf_dir)})
    for c in cases[::2]:
        check_same(out, c["name"].removesuffix("/local"), "hdfs", f"{hdfs_conf.url}/")
