"""The Spark data source's ``remote`` option: a tiered-storage store (LocalTieredStorage layout, laid out by
``builders.local_tiered_storage``) read like a data dir, the same rows as the partition it was uploaded from."""

from __future__ import annotations

import pytest
from builders import generated_data_dir, local_tiered_storage
from test_s3 import scan_rows

pytestmark = pytest.mark.spark


def test_remote_option_reads_the_store(spark, tmp_path):
    local = generated_data_dir(tmp_path / "d", {"rt": 1}, 400, segment_bytes=8192, value_size=100)
    pdir = local / "rt-0"
    segs = local_tiered_storage(tmp_path / "remote", pdir)
    assert len(segs) >= 2
    remote_end = segs[-1][2]

    want = [r for r in scan_rows({"path": str(local)}) if r[2] <= remote_end]
    assert scan_rows({"remote": str(tmp_path / "remote")}) == want
    df = spark.read.format("kafkalog").option("remote", str(tmp_path / "remote")).load()
    assert sorted((r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect()) \
        == [(t, p, o) for t, p, o, _k, _v in want]
