"""s3:// reads through pyarrow.fs against a local moto S3 server (127.0.0.1 only)."""

from __future__ import annotations

import pytest
from builders import generated_data_dir

pytestmark = pytest.mark.spark


def scan_rows(options: dict) -> list[tuple]:
    """The rows the data source reads with ``options``, planned and scanned in this process (no Spark):
    ``(topic, partition, offset, key, value)``, sorted."""
    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.plan import plan
    from kafkalog.tools.spark.scan import scan

    opts = parse_read_options(options)
    out = []
    for group in plan(opts):
        for rb in scan(group, opts):
            d = rb.to_pydict()
            out += list(zip(d["topic"], d["partition"], d["offset"], d["key"], d["value"], strict=True))
    return sorted(out)


def test_s3_read_equals_local_read(spark, s3_endpoint, tmp_path, monkeypatch):
    import pyarrow.fs as pafs

    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    local = generated_data_dir(tmp_path / "d", {"s3t": 2}, 2000, segment_bytes=1 << 20, value_size=400)
    fs = pafs.S3FileSystem(endpoint_override=s3_endpoint.removeprefix("http://"), scheme="http",
                           access_key="test", secret_key="test", region="us-east-1",
                           allow_bucket_creation=True)
    fs.create_dir("logs")
    pafs.copy_files(str(local), "logs/cluster/d", source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)

    def read(path, **opts):
        r = spark.read.format("kafkalog")
        for k, v in opts.items():
            r = r.option(k, v)
        return r.load(path)

    s3opts = {"s3.endpoint": s3_endpoint, "s3.accessKey": "test", "s3.secretKey": "test", "s3.region": "us-east-1",
              "maxPartitionBytes": str(256 * 1024)}
    remote = read("s3://logs/cluster/d", **s3opts)
    assert remote.rdd.getNumPartitions() > 2  # split through the offset index fetched from S3
    cols = ["topic", "partition", "offset", "timestamp", "key", "value", "position"]
    want = sorted(tuple(r) for r in read(str(local)).select(*cols).collect())
    got = sorted(tuple(r) for r in remote.select(*cols).collect())
    assert len(got) == 4000 and got == want
    seg = remote.select("segment").first().segment
    assert seg.startswith("s3://logs/cluster/d/s3t-")
    some = read("s3://logs/cluster/d", startingOffset="1500", partitions="1", **s3opts).collect()
    assert sorted(r.offset for r in some) == list(range(1500, 2000))


def test_any_fsspec_filesystem_reads_like_local(tmp_path):
    """Schemes other than s3:// go through fsspec (abfs:// with adlfs, gs:// with gcsfs, ...): fsspec's in-memory
    filesystem stands in for them here (in process: Spark's workers would not see this process's memory)."""
    from pathlib import Path

    import fsspec

    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.plan import plan

    fixture = Path(__file__).resolve().parents[2] / "fixtures" / "kafka-4.3.1-kraft" / "data"
    mem = fsspec.filesystem("memory")
    for name in ("multi-segment-0", "transactions-0", "codec-zstd-0"):
        for f in (fixture / name).iterdir():
            mem.pipe(f"/kl-test/{name}/{f.name}", f.read_bytes())

    local = tmp_path / "local"
    for name in ("multi-segment-0", "transactions-0", "codec-zstd-0"):
        import shutil

        shutil.copytree(fixture / name, local / name)
    remote = scan_rows({"path": "memory://kl-test"})
    assert remote and remote == scan_rows({"path": str(local)})
    opts = parse_read_options({"path": "memory://kl-test"})
    assert all(p.name.startswith("memory://") for g in plan(opts) for p in g)
