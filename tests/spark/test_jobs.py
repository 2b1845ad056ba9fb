"""`kafkalog spark verify|export|convert|compact`: the single-machine engines, distributed, one report."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from builders import BASE_TS, generated_data_dir, generated_partition

from kafkalog.facts import finding_json
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.cleaner.manager import plan_compact
from kafkalog.storage.engine.plan import apply
from kafkalog.storage.files.checkpoints import read_offset_checkpoint, write_offset_checkpoint
from kafkalog.storage.files.partition_metadata import write_partition_metadata
from kafkalog.storage.records import build_legacy, iter_batches
from kafkalog.storage.reports.verify import verify_partition, verify_paths
from kafkalog.tools.spark import jobs
from kafkalog.tools.spark.jvm import NO_SCAN, has_scan

pytestmark = pytest.mark.spark


def _corrupt_one(tmp_path):
    root = generated_data_dir(tmp_path / "d", {"v": 3}, 400)
    log = root / "v-1" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    pos = [b.position for b in iter_batches(bytes(data))][2]
    data[pos + 80] ^= 0x55
    log.write_bytes(bytes(data))
    return root, log, pos


def test_verify_matches_single_machine(spark, tmp_path):
    root, log, pos = _corrupt_one(tmp_path)
    report = jobs.verify(spark, [str(root)], deep=True)
    single = [finding_json(f) for p in ("v-0", "v-1", "v-2") for f in verify_partition(root / p, True)]
    part_rows = [r for r in report.rows if "/v-" in r["file"]]
    key = lambda r: (r["file"], r["position"] or -1, r["kind"], r["message"])  # noqa: E731
    assert sorted(part_rows, key=key) == sorted(single, key=key)
    assert any(r["severity"] == "error" and r["file"] == str(log) and r["position"] == pos for r in report.rows)
    assert not report.ok and report.summary["partitions"] == 3


def test_verify_is_the_single_machine_report(spark, tmp_path):
    """Dir-level and cross-partition findings too: a checkpoint entry for a partition not hosted here, two
    topic ids in one topic, a partition missing from recovery-point-offset-checkpoint, a corrupt batch."""
    root, log, pos = _corrupt_one(tmp_path)
    write_offset_checkpoint(root / "recovery-point-offset-checkpoint", {("v", 0): 400, ("v", 1): 400,
                                                                         ("gone", 7): 5})
    write_partition_metadata(root / "v-0" / "partition.metadata", "AAAAAAAAAAAAAAAAAAAAAQ")
    write_partition_metadata(root / "v-1" / "partition.metadata", "AAAAAAAAAAAAAAAAAAAAAg")
    report = jobs.verify(spark, [str(root)], deep=True)
    single = verify_paths([str(root)], deep=True, workers=1)
    assert report.rows == [finding_json(f) for f in single.findings]
    msgs = [r["message"] for r in report.rows]
    assert any("gone-7, which is not hosted" in m for m in msgs)
    assert any("topic id AAAAAAAAAAAAAAAAAAAAAg differs" in m for m in msgs)
    assert any(r["file"] == str(root / "v-2") and "not in recovery-point-offset-checkpoint" in r["message"]
               for r in report.rows)
    assert report.summary["partitions"] == 3 and report.summary["dataDirs"] == 1 and not report.ok


def test_cli_verify_json_exit_code(tmp_path):
    root, log, pos = _corrupt_one(tmp_path)
    p = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "spark", "verify", str(root), "--master",
                        "local[1]", "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr[-2000:]
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert lines[-1]["job"] == "verify" and lines[-1]["summary"]["partitions"] == 3
    assert any(x.get("file") == str(log) and x.get("position") == pos for x in lines[:-1])


def test_export_parquet_and_json(spark, tmp_path):
    root = generated_data_dir(tmp_path / "d", {"e": 2, "f": 1}, 700)
    report = jobs.export(spark, [str(root)], str(tmp_path / "out.parquet"), options={"topics": "e"})
    assert report.summary["records"] == 1400
    assert report.summary["reader"] == ("jvm segment scan" if has_scan(spark) else f'format("kafkalog") ({NO_SCAN})')
    assert sorted(p.name for p in (tmp_path / "out.parquet").iterdir() if p.is_dir()) == ["topic=e"]
    back = spark.read.parquet(str(tmp_path / "out.parquet")).filter("partition = 1").orderBy("offset").collect()
    assert [r.offset for r in back] == list(range(700)) and back[10].timestampMs == BASE_TS + 100
    report = jobs.export(spark, [str(root / "f-0")], str(tmp_path / "out.json"), fmt="json")
    assert report.summary["records"] == 700


def test_convert_legacy_to_v2(spark, tmp_path):
    pdir = tmp_path / "d" / "old-0"
    pdir.mkdir(parents=True)
    data = b""
    for i in range(20):
        recs = [(None, BASE_TS + i * 10 + j, f"k{j}".encode(), f"v{i}-{j}".encode()) for j in range(5)]
        data += build_legacy(recs, magic=1, codec=1 if i % 2 else 0, base_offset=i * 5)
    (pdir / "00000000000000000000.log").write_bytes(data)
    before = sorted((r.offset, r.timestamp, bytes(r.value)) for r in spark.read.format("kafkalog")
                    .load(str(pdir)).collect())
    report = jobs.convert(spark, [str(tmp_path / "d")], backup_root=str(tmp_path / "bk"))
    assert report.ok and report.summary["segments"] == 1
    after = spark.read.format("kafkalog").load(str(pdir)).collect()
    assert {r.magic for r in after} == {2}
    assert sorted((r.offset, r.timestamp, bytes(r.value)) for r in after) == before
    assert any((tmp_path / "bk").rglob("*.log"))


def test_compact_matches_single_machine(spark, tmp_path):
    root = tmp_path / "d"
    for p in range(2):
        generated_partition(root / f"c-{p}", 3000, batch_records=100, segment_bytes=1 << 20, value_size=500)
    twin = tmp_path / "twin"
    shutil.copytree(root, twin)
    overrides = {"cleanup.policy": "compact"}
    report = jobs.compact(spark, [str(root)], now=BASE_TS + 10**8, force=True, overrides=overrides, backup=False)
    assert report.ok and report.summary["bytesReclaimed"] > 0
    apply(plan_compact([twin], now_ms=BASE_TS + 10**8, resolver=ConfigResolver(None, None, overrides), force=True),
          backup=False)
    for p in range(2):
        a = sorted(f.name for f in (root / f"c-{p}").iterdir())
        assert a == sorted(f.name for f in (twin / f"c-{p}").iterdir())
        for name in a:
            if name.endswith(".log"):
                assert (root / f"c-{p}" / name).read_bytes() == (twin / f"c-{p}" / name).read_bytes()
    ck = "cleaner-offset-checkpoint"  # entry order is hash-map order: compare the entries
    assert sorted((root / ck).read_text().splitlines()) == sorted((twin / ck).read_text().splitlines())


def test_compact_tasks_leave_the_shared_checkpoint_to_the_driver(tmp_path):
    """Tasks of one data dir run at once: none may rewrite cleaner-offset-checkpoint (CI once saw two tasks
    collide on its .tmp file). The task reports its clean point; the driver writes the file once."""
    root = tmp_path / "d"
    generated_partition(root / "c-0", 600, batch_records=50, segment_bytes=1 << 16, value_size=100)
    plan = plan_compact([root], now_ms=BASE_TS + 10**8, force=True,
                        resolver=ConfigResolver(None, None, {"cleanup.policy": "compact"}))
    [pp] = plan.partitions
    assert pp.facts["cleanPoint"] == pp.facts["endOffset"] > 0

    def runner(fn, items):
        out = [fn(i) for i in items]
        assert not (root / "cleaner-offset-checkpoint").exists(), "a partition task wrote the shared file"
        assert not list(root.glob("*.tmp"))
        return out

    apply(plan, backup=False, runner=runner)
    assert read_offset_checkpoint(root / "cleaner-offset-checkpoint").to_dict() == {("c", 0): pp.facts["cleanPoint"]}


def test_compact_many_partitions_of_one_data_dir(spark, tmp_path):
    root = tmp_path / "d"
    n = 12
    for p in range(n):
        generated_partition(root / f"m-{p}", 300 + 10 * p, batch_records=20, segment_bytes=1 << 14, value_size=200)
    report = jobs.compact(spark, [str(root)], now=BASE_TS + 10**8, force=True,
                          overrides={"cleanup.policy": "compact"}, backup=False)
    assert report.ok and report.summary["partitions"] == n
    ck = read_offset_checkpoint(root / "cleaner-offset-checkpoint").to_dict()
    assert ck == {("m", row_p): row["cleanPoint"] for row in report.rows
                  for row_p in [int(row["partition"].rsplit("-", 1)[1])]}
    assert len(ck) == n and all(v > 0 for v in ck.values()) and not list(root.glob("*.tmp"))


def test_errors_inside_spark_become_one_line(spark, tmp_path):
    from pyspark.errors import PySparkException

    from kafkalog.tools.spark_cli import spark_error_line

    generated_partition(tmp_path / "t-0", 50, batch_records=10)
    log = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[8:12] = (5).to_bytes(4, "big")  # a size field below the 14-byte minimum, in the first batch
    log.write_bytes(bytes(data))
    with pytest.raises(PySparkException) as ei:
        spark.read.format("kafkalog").load(str(tmp_path)).count()
    assert spark_error_line(ei.value) == (f"{log}: byte 0: Found record size 5 smaller than minimum record "
                                          "overhead (14)")
    with pytest.raises(PySparkException) as ei:
        spark.read.format("kafkalog").load(str(tmp_path / "missing")).count()
    assert spark_error_line(ei.value) == f"{tmp_path / 'missing'}: no such file or directory"


def test_export_offset_spec_resolved_per_partition(spark, tmp_path):
    """`kafkalog spark export -o` / the data source's ``offset`` option: rpk's grammar resolved per partition
    through the library's resolver (log start and end offsets, time index), then read through the indexes."""
    from kafkalog.storage.log.offset_spec import parse_offset_specs
    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.plan import discover, partition_windows

    root = tmp_path / "d"
    generated_partition(root / "e-0", 700, segment_bytes=8000)
    generated_partition(root / "e-1", 300, segment_bytes=8000)
    opts = parse_read_options({"paths": str(root), "offset": "-100"})
    assert opts.offset_spec == parse_offset_specs(["-100"])
    windows = {d.rsplit("/", 1)[-1]: w for (_s, d), w in partition_windows(discover(opts), opts).items()}
    assert windows == {"e-0": (600, 700), "e-1": (200, 300)}

    def offsets(report_out):
        rows = spark.read.parquet(str(report_out)).select("partition", "offset").collect()
        out: dict[int, list[int]] = {}
        for r in rows:
            out.setdefault(r.partition, []).append(r.offset)
        return {p: sorted(v) for p, v in out.items()}

    report = jobs.export(spark, [str(root)], str(tmp_path / "last"), options={"offset": "-100"})
    assert report.summary["records"] == 200
    assert offsets(tmp_path / "last") == {0: list(range(600, 700)), 1: list(range(200, 300))}
    # kcat's s@T e@T (Kafka's rule: the first record with a timestamp >= T), intersected with startingOffset
    t1, t2 = BASE_TS + 503, BASE_TS + 2500

    def first_at(t):  # (datagen's timestamps: BASE_TS + i * 10 + (i % 5) * 3)
        return next(i for i in range(700) if BASE_TS + i * 10 + (i % 5) * 3 >= t)

    assert (first_at(t1), first_at(t2)) == (51, 249)
    report = jobs.export(spark, [str(root)], str(tmp_path / "t"), options={"offset": f"s@{t1} e@{t2}"})
    got = offsets(tmp_path / "t")
    assert got[0] == got[1] == list(range(51, 249))
    report = jobs.export(spark, [str(root)], str(tmp_path / "t2"), options={"offset": f"s@{t1} e@{t2}",
                                                                           "startingOffset": "60"})
    got = offsets(tmp_path / "t2")
    assert got[0] == got[1] == list(range(60, 249))
    # the CLI: -o, and a bad spec refused before Spark starts
    p = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "spark", "export", str(root), "--out",
                        str(tmp_path / "cli"), "-o", "+650", "--master", "local[1]", "--json", "--jvm-scan"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    summary = json.loads(p.stdout.splitlines()[-1])["summary"]
    assert summary["records"] == 50  # e-0: 650..699, e-1: nothing
    # (the shared session has the scan's jars, always under CI=true: the CLI's session gets them too)
    assert summary["reader"] == ("jvm segment scan" if has_scan(spark) else f'format("kafkalog") ({NO_SCAN})')
    p = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "spark", "export", str(root), "--out",
                        str(tmp_path / "bad"), "-o", "5:x"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "'x' is not an offset" in p.stderr


def test_a_refused_plan_raises_its_errors_which_the_cli_words(spark, tmp_path):
    """A partition the broker would mark uncleanable: the job's PlanError carries the plan's errors (codes and facts)
    and the CLI's line words them as before ("nothing was changed: the plan is invalid: DIR: WORDS"); a plan row
    with an error has its words, errorCode and errorFacts."""
    from builders import kv_batch, write_segment

    from kafkalog.storage.engine.plan import PlanError
    from kafkalog.tools.cli import _error_words

    pdir = tmp_path / "d" / "legacy-0"
    pdir.mkdir(parents=True)
    now = BASE_TS + 10**8
    write_segment(pdir, 0, [build_legacy([(0, now - 9000, b"a", b"1")], magic=1, base_offset=0),
                            build_legacy([(1, now - 9000, None, b"x")], magic=1, base_offset=1)], mtime_ms=now - 1000)
    write_segment(pdir, 2, [kv_batch(2, b"c", b"2", now - 5000)], mtime_ms=now - 1000)
    with pytest.raises(PlanError) as ei:
        jobs.compact(spark, [str(tmp_path / "d")], now=now, dry_run=True, force=True,
                     overrides={"cleanup.policy": "compact"})
    (err,) = ei.value.errors
    seg = pdir / "00000000000000000000.log"
    words = (f"the broker would mark this partition uncleanable: {seg}: byte {err.facts['position']}: Empty batches "
             "are only supported for magic v2 and above")
    assert err.kind == "compact.uncleanable" and err.file == str(pdir)
    assert _error_words(ei.value) == f"nothing was changed: the plan is invalid: {pdir}: {words}"
    plan = plan_compact([tmp_path / "d"], now_ms=now, force=True, exact=True,
                        resolver=ConfigResolver(None, None, {"cleanup.policy": "compact"}))
    (row,) = jobs._plan_rows(plan)
    assert (row["error"], row["errorCode"], row["errorFacts"]) == (words, "compact.uncleanable", dict(err.facts))
