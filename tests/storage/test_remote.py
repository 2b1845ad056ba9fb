"""Tiered storage offline (storage/remote): the LocalTieredStorage layout, ``remote ls|verify``, ``rehydrate``,
on synthetic stores laid out by ``builders.local_tiered_storage``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import (
    TOPIC_ID,
    local_tiered_storage,
    numbered_batches,
    remote_log_metadata_partition,
    remote_segment_metadata_values,
    write_partition_files,
    write_segment,
)

from kafkalog.facts import render
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.remote import open_remote_store
from kafkalog.storage.remote.inspect import iter_remote_segments, list_remote, verify_remote
from kafkalog.storage.remote.rehydrate import RehydrateOptions, plan_rehydrate, rehydrate
from kafkalog.storage.reports.verify import verify_paths
from kafkalog.tools.cli import main


def _source(tmp_path):
    """tiered-0 with segments at 0, 10, 20 (uploaded) and the active 30 (not uploaded)."""
    src = tmp_path / "src" / "tiered-0"
    for base in (0, 10, 20, 30):
        write_segment(src, base, numbered_batches(base, 5, ts0=1000 + base, epoch=0 if base < 20 else 1),
                      rebuild_indexes=True, interval=100)
    write_partition_files(src, epochs=[(0, 0), (1, 20)], topic_id=TOPIC_ID)
    return src


@pytest.fixture
def store(tmp_path):
    src = _source(tmp_path)
    segs = local_tiered_storage(tmp_path / "remote", src)
    return tmp_path / "remote", src, segs


def _records(paths):
    out = []
    for p in paths:
        log = PartitionLog(p)
        out += [(r.offset, r.key, r.value) for _s, b in log.iter_batches() for r in b.records()]
        log.close()
    return out


def test_layout_lists_segments(store):
    root, _src, segs = store
    s = open_remote_store(root)
    assert s.partitions() == [("tiered", 0, TOPIC_ID)]
    got = s.segments("tiered", 0, TOPIC_ID)
    assert [(g.segment_id, g.start_offset) for g in got] == [(sid, start) for sid, start, _ in segs]
    assert set(got[0].files) == {"log", "index", "timeindex", "leader_epoch_checkpoint", "snapshot"}
    assert open_remote_store(root / "kafka-tiered-storage").partitions() == s.partitions()


def test_ls_and_verify_cross_check(store, tmp_path):
    root, _src, segs = store
    data = tmp_path / "data"
    # metadata: segments 0 and 10 finished, 20 deleted (but its files are still there), plus one never uploaded
    vals = remote_segment_metadata_values(segs[:2]) + remote_segment_metadata_values([segs[2]], final_state=3) \
        + remote_segment_metadata_values([("AAAAAAAAAAAAAAAAAAAAAA", 30, 39)])
    remote_log_metadata_partition(data, 0, vals)
    s = open_remote_store(root)
    rows = {r.start_offset: r for r in list_remote(s, [data])}
    assert rows[0].status == "present" and rows[0].state == "COPY_SEGMENT_FINISHED" and rows[0].end_offset == 9
    assert rows[20].status == "undeleted"
    assert rows[30].status == "missing"
    rep = verify_remote(s, [data])
    msgs = [(f.severity, render(f)) for f in rep.findings]
    assert any(sev == "error" and "absent from the store" in m for sev, m in msgs)
    assert any(sev == "warning" and "still in the store" in m for sev, m in msgs)
    assert rep.segments == 3


def test_verify_clean_and_corrupt(store):
    root, _src, segs = store
    s = open_remote_store(root)
    assert verify_remote(s).errors == []
    log = next(p for p in (root / "kafka-tiered-storage").rglob("*.log"))
    b = bytearray(log.read_bytes())
    b[70] ^= 0xFF
    log.write_bytes(bytes(b))
    errs = verify_remote(open_remote_store(root)).errors
    assert errs and any("CRC" in render(f) for f in errs) and errs[0].file.endswith(".log")


def test_remote_records_equal_local(store):
    root, src, segs = store
    got = []
    for seg, p in iter_remote_segments(open_remote_store(root)):
        got += _records_of_segment(p, seg.start_offset)
    assert got == [r for r in _records([src]) if r[0] < 30]


def _records_of_segment(p, base):
    from kafkalog.storage.files.segment import Segment

    with Segment(p, base) as s:
        return [(r.offset, r.key, r.value) for b in s.iter_batches() for r in b.records()]


def test_rehydrate_from_store_alone(store, tmp_path):
    root, src, segs = store
    data = tmp_path / "fresh"
    data.mkdir()
    plan, _ = rehydrate(open_remote_store(root), data, dry_run=True)
    assert not (data / "tiered-0").exists()
    assert plan.partitions[0].facts["logEndOffset"] == 30
    rehydrate(open_remote_store(root), data)
    pdir = data / "tiered-0"
    assert sorted(p.name for p in pdir.glob("*.log")) == [f"{b:020d}.log" for b in (0, 10, 20)]
    assert (pdir / "00000000000000000030.snapshot").exists()
    assert (pdir / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 20\n"
    assert TOPIC_ID in (pdir / "partition.metadata").read_text()
    assert "tiered 0 30" in (data / "recovery-point-offset-checkpoint").read_text()
    assert _records([pdir]) == [r for r in _records([src]) if r[0] < 30]
    assert [f for f in verify_paths([str(data)]).findings if f.severity == "error"] == []


def test_rehydrate_before_local_segments_and_gap(store, tmp_path):
    root, src, segs = store
    data = tmp_path / "d"
    local = data / "tiered-0"
    local.mkdir(parents=True)
    for name in ("00000000000000000020.log", "00000000000000000020.index", "00000000000000000020.timeindex",
                 "00000000000000000030.log", "00000000000000000030.index", "00000000000000000030.timeindex"):
        shutil.copy(src / name, local / name)
    write_partition_files(local, epochs=[(1, 20)], topic_id=TOPIC_ID)
    plan, _ = rehydrate(open_remote_store(root), data)
    assert plan.partitions[0].facts["remoteSegments"] == [f"0-{segs[0][0]}", f"10-{segs[1][0]}"]
    assert _records([local]) == _records([src])
    assert (local / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 20\n"
    # a gap: the local log starts after the remote end
    data2 = tmp_path / "d2"
    (data2 / "tiered-0").mkdir(parents=True)
    shutil.copy(src / "00000000000000000030.log", data2 / "tiered-0")
    (root / "kafka-tiered-storage" / f"tiered-0-{TOPIC_ID}" / f"{20:020d}-{segs[2][0]}.log").unlink()
    errors = plan_rehydrate(open_remote_store(root), data2).errors
    assert errors and "gap" in render(errors[0])


def test_rehydrate_skips_deleted_segments(store, tmp_path):
    root, _src, segs = store
    data = tmp_path / "d"
    remote_log_metadata_partition(data, 0, remote_segment_metadata_values([segs[0]], final_state=3)
                                  + remote_segment_metadata_values(segs[1:]))
    plan = plan_rehydrate(open_remote_store(root), data, RehydrateOptions(topic="tiered"))
    pp = plan.partitions[0]
    assert pp.facts["logStartOffset"] == 10 and len(pp.losses) == 1


def test_a_dir_without_the_layout_is_not_a_store(store, tmp_path):
    """Issue 34: `remote ls` on an empty dir, a docs folder or the parent of a data dir listed nothing with exit 0.
    A store is the layout's kafka-tiered-storage/ dir, a dir holding it, or a dir of its partition dirs; an empty
    kafka-tiered-storage/ is an empty store."""
    from kafkalog.storage.errors import LogDirError

    root, src, _segs = store
    (tmp_path / "empty").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text("# notes\n")
    (tmp_path / "parent").mkdir()
    shutil.copytree(src.parent, tmp_path / "parent" / "data")
    for p, also in ((tmp_path / "empty", ""), (tmp_path / "docs", ""), (src.parent, "it is a Kafka data dir"),
                    (tmp_path / "parent", f"it contains the data dir(s) {tmp_path / 'parent' / 'data'}")):
        with pytest.raises(LogDirError, match="not a tiered-storage store") as e:
            open_remote_store(p)
        assert str(e.value).startswith(f"{p}: ") and also in str(e.value)
    (tmp_path / "new" / "kafka-tiered-storage").mkdir(parents=True)
    assert open_remote_store(tmp_path / "new").partitions() == []
    assert open_remote_store(root / "kafka-tiered-storage").partitions() == open_remote_store(root).partitions()


def test_cli(store, tmp_path, capsys):
    root, _src, segs = store
    assert main(["remote", "ls", str(root)]) == 0
    out = capsys.readouterr().out
    assert "TOPIC" in out and segs[0][0] in out
    assert main(["remote", "verify", str(root), "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[-1]["summary"]["errors"] == 0 and lines[-1]["summary"]["segments"] == 3
    assert main(["remote", "dump", str(root), "--deep"]) == 0
    assert "baseOffset: 0" in capsys.readouterr().out
    data = tmp_path / "fresh"
    data.mkdir()
    assert main(["rehydrate", str(root), str(data), "--dry-run"]) == 0
    assert not (data / "tiered-0").exists()
    assert main(["rehydrate", str(root), str(data)]) == 0
    assert (data / "tiered-0" / "00000000000000000000.log").exists()


def test_memory_filesystem(store):
    import fsspec

    root, _src, segs = store
    mem = fsspec.filesystem("memory")
    for p in root.rglob("*"):
        if p.is_file():
            mem.pipe(f"/kl-remote/{p.relative_to(root)}", p.read_bytes())
    s = open_remote_store("memory://kl-remote")
    try:
        assert [x.segment_id for x in s.segments("tiered", 0, TOPIC_ID)] == [x[0] for x in segs]
        assert verify_remote(s).errors == []
    finally:
        s.close()


def test_s3_store(store, tmp_path, monkeypatch, s3_endpoint):
    """An ``s3://`` store (a local moto S3 server on 127.0.0.1): listed, verified and rehydrated like the local
    copy of the same files."""
    import pyarrow.fs as pafs

    root, src, segs = store
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    fs = pafs.S3FileSystem(endpoint_override=s3_endpoint.removeprefix("http://"), scheme="http", access_key="test",
                           secret_key="test", region="us-east-1", allow_bucket_creation=True)
    fs.create_dir("tiered")
    pafs.copy_files(str(root), "tiered/store", source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    opts = {"s3.endpoint": s3_endpoint, "s3.accessKey": "test", "s3.secretKey": "test", "s3.region": "us-east-1"}
    s = open_remote_store("s3://tiered/store", options=opts)
    try:
        assert [x.segment_id for x in s.segments("tiered", 0, TOPIC_ID)] == [x[0] for x in segs]
        assert verify_remote(s).errors == []
        assert [r for r in _records_of_store(s, tmp_path / "view")] == [r for r in _records([src]) if r[0] < 30]
    finally:
        s.close()


def _records_of_store(s, view):
    from kafkalog.storage.remote.layout import remote_partition_view

    return _records(sorted(remote_partition_view(s, view).iterdir()))


def test_export_remote(store, tmp_path):
    root, src, _segs = store
    out = tmp_path / "out.jsonl"
    assert main(["export", "--remote", str(root), "--out", str(out)]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["topic"], r["offset"]) for r in rows] == [("tiered", o) for o, _k, _v in _records([src]) if o < 30]
    assert main(["export", "--out", str(out)]) == 2


TIERED = Path(__file__).resolve().parents[2] / "fixtures" / "kafka-4.3.1-tiered"


def test_real_fixture_remote_plus_local_is_what_was_produced(tmp_path):
    """fixtures/kafka-4.3.1-tiered: the store verifies clean against the broker's __remote_log_metadata, and the
    partitions rehydrated into a copy of the broker's dir (remote segments + the local ones) hold exactly the
    produced records, offsets included."""
    import base64

    s = open_remote_store(TIERED / "remote")
    rep = verify_remote(s, [TIERED / "data"], deep=True)
    assert rep.errors == [] and rep.segments == 6
    assert {r.status for r in rep.rows} == {"present"}
    d = tmp_path / "data"
    shutil.copytree(TIERED / "data", d)
    plan, _ = rehydrate(s, d, RehydrateOptions(topic="tiered"))
    assert not plan.errors and [p.facts["localSegments"] > 0 for p in plan.partitions] == [True, True]
    def b(v):
        return None if v is None else base64.b64decode(v)

    want = sorted((r["partition"], r["offset"], b(r["key"]), b(r["value"]))
                  for r in map(json.loads, (TIERED / "expected.jsonl").read_text().splitlines())
                  if r["topic"] == "tiered")
    got = sorted(((p, o, k, v) for p in (0, 1) for o, k, v in _records([d / f"tiered-{p}"])),
                 key=lambda r: r[:2])
    assert got == sorted(want, key=lambda r: r[:2])
    assert [f for f in verify_paths([str(d / "tiered-0"), str(d / "tiered-1")]).findings
            if f.severity == "error"] == []
