"""The public API (``import kafkalog``): every name of ``__all__`` importable and lazy, the same facts as the
library calls the commands make (offsets, records, Arrow rows == export rows), plan -> apply on a fixture copy,
``docs/api.md`` generated from the docstrings and its examples run as doctests."""

from __future__ import annotations

import doctest
import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from builders import numbered_batches

import kafkalog
from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.engine.export import ExportFilter, export_jsonl, iter_export_rows
from kafkalog.storage.engine.parquet import export_parquet
from kafkalog.storage.engine.plan import apply as engine_apply
from kafkalog.storage.engine.retention import plan_retention
from kafkalog.storage.errors import LogDirError
from kafkalog.storage.log.offset_spec import parse_offset_spec
from kafkalog.storage.log.paths import PathError
from kafkalog.storage.reports.describe import describe_paths
from kafkalog.storage.reports.diff import diff_paths
from kafkalog.tools import apidoc

require_modules("pyarrow", extra="spark")  # skipped without the spark extra, a failure under CI=true

import fsspec  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
KRAFT = FIXTURES / "kafka-4.3.1-kraft" / "data"
DATA_DIRS = sorted(p / "data" for p in FIXTURES.iterdir() if (p / "data").is_dir())
NOW = 1_900_000_000_000  # past every fixture record's retention.ms (Kafka's default: 7 days)


def test_every_public_name_is_importable_and_in_all():
    names = [n for n in kafkalog.__all__ if n != "__version__"]
    assert len(names) == len(set(names)) and set(names) == set(kafkalog._EXPORTS)
    for name in names:
        assert getattr(kafkalog, name) is not None, name
        assert name in dir(kafkalog)
    with pytest.raises(AttributeError):
        kafkalog.not_a_name  # noqa: B018
    for entry in ("open", "apply", "LogDirs", "Partition", "Plan", "OffsetSpec", "Segment", "KafkaLogError"):
        assert entry in kafkalog.__all__


def test_import_kafkalog_loads_nothing_else():
    """``import kafkalog`` loads neither the library nor pyarrow: every name is imported on first use; and
    ``kafkalog --version`` (the CLI imports ``kafkalog``) loads neither pyarrow nor the public API's module."""
    code = ("import sys, kafkalog; print(sorted(m for m in sys.modules if m.startswith(('kafkalog.', 'pyarrow'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
    code = ("import sys; sys.argv = ['kafkalog', '--version']\nimport runpy\ntry:\n"
            "    runpy.run_module('kafkalog', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('pyarrow', 'kafkalog.storage.api'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("data_dir", DATA_DIRS, ids=[p.parent.name for p in DATA_DIRS])
def test_offsets_are_the_describe_command_s(data_dir: Path):
    described = {(d["topic"], d["partition"]): d for d in describe_paths([data_dir], scan=False)
                 if d.get("dirKind") == "live"}
    with kafkalog.open(data_dir) as dirs:
        parts = dirs.partitions()
        assert {(p.topic, p.partition) for p in parts} == set(described)
        for p in parts:
            d = described[(p.topic, p.partition)]
            assert (p.log_start_offset, p.log_end_offset) == (d["logStartOffset"], d["logEndOffset"]), p.name
            hw = d["highWatermark"]  # describe shows the checkpointed value; the partition's is capped at the end
            assert p.high_watermark == (p.log_end_offset if hw is None else min(hw, p.log_end_offset)), p.name
            assert [s.base_offset for s in p.segments] == [s["baseOffset"] for s in d["segments"]]
            assert p.last_stable_offset <= p.high_watermark


@pytest.mark.parametrize("data_dir", DATA_DIRS, ids=[p.parent.name for p in DATA_DIRS])
def test_records_are_the_export_rows(data_dir: Path):
    with kafkalog.open(data_dir) as dirs:
        for control in (False, True):
            got = list(dirs.records(include_control=control))
            want = list(iter_export_rows([data_dir], ExportFilter(include_control=control)))
            assert got == want


def test_the_partition_asks_the_one_partition_model(monkeypatch):
    """The API re-derives nothing: patch the library's one log start offset, high watermark and log end offset
    (PartitionLog's) and the API's answers, and the ranges it resolves, change with them."""
    from kafkalog.storage.log.partition import PartitionLog

    monkeypatch.setattr(PartitionLog, "log_start_offset", property(lambda self: 7))
    monkeypatch.setattr(PartitionLog, "high_watermark", property(lambda self: 9))
    with kafkalog.open(KRAFT) as dirs:
        p = dirs.partition("codec-none", 0)
        assert (p.log_start_offset, p.high_watermark) == (7, 9)
        assert p.offsets("start") == (7, p.log_end_offset)
        assert next(p.records("+0"))["offset"] == 7
    monkeypatch.setattr(PartitionLog, "log_end_offset", property(lambda self: 20))
    with kafkalog.open(KRAFT) as dirs:
        assert dirs.partition("codec-none", 0).offsets("-3") == (17, 20)


def test_offset_and_time_ranges_are_rpk_s():
    with kafkalog.open(KRAFT) as dirs:
        p = dirs.partition("multi-segment", 0)
        assert [r["offset"] for r in p.records("10:20")] == list(range(10, 20))
        assert p.offsets("-5") == (p.log_end_offset - 5, p.log_end_offset)
        assert [r["offset"] for r in p.records("-5")] == list(range(p.log_end_offset - 5, p.log_end_offset))
        spec = parse_offset_spec("@1750000000000:")
        want = [r["offset"] for r in iter_export_rows([p.path], ExportFilter(offset_spec=spec, include_control=False))]
        assert [r["offset"] for r in p.records(spec)] == want
        first = p.offset_for_time(1750000000000)
        assert first is not None and want[0] == first
        batches = list(p.batches("44:46"))
        assert batches and all(b.last_offset >= 44 and b.base_offset < 46 for _, b in batches)
        assert batches[0][0].base_offset == 44  # the second segment
        assert list(p.batches("44:44")) == [] and list(p.records("end")) == []
        every = [b.last_offset for _, b in p.batches()]
        assert every == sorted(every) and every[-1] == p.log_end_offset - 1


@pytest.mark.parametrize("data_dir", [KRAFT, FIXTURES / "kafka-3.9.2-zk-v0" / "data"], ids=["4.3.1", "3.9.2-v0"])
def test_arrow_rows_are_the_parquet_export_rows(data_dir: Path, tmp_path: Path):
    export_parquet([data_dir], tmp_path, ExportFilter(include_control=True))
    with kafkalog.open(data_dir) as dirs:
        for p in dirs.partitions():
            table = p.to_arrow(include_control=True, batch_rows=7).read_all()
            want = pq.read_table(tmp_path / f"{p.name}.parquet")
            assert table.schema.names == want.schema.names
            assert table.to_pylist() == want.to_pylist(), p.name
        topics = ["codec-none", "codec-zstd"] if "4.3.1" in str(data_dir) else None
        reader = dirs.to_arrow(topics)
        want_rows = sum(1 for _ in dirs.records(topics))
    assert reader.read_all().num_rows == want_rows  # read after the dirs were closed


def test_selection_and_path_errors(tmp_path: Path):
    with kafkalog.open(KRAFT) as dirs:
        assert [p.partition for p in dirs.partitions("idempotent", partitions=[1])] == [1]
        with pytest.raises(LogDirError, match="no partition of topic nope here"):
            dirs.partitions("nope")
        with pytest.raises(LogDirError, match="no partition nope-0"):
            dirs.partition("nope", 0)
        assert dirs.config("compacted").source("cleanup.policy") != "Kafka default"
    with pytest.raises(PathError):
        kafkalog.open(tmp_path / "missing")
    with pytest.raises(PathError):
        kafkalog.open(tmp_path)  # empty: not a data dir
    with pytest.raises(PathError):
        kafkalog.open(KRAFT.parent)  # the parent of a data dir
    with kafkalog.open(KRAFT / "codec-lz4-0") as one:  # a partition dir: only that partition
        assert [p.name for p in one] == ["codec-lz4-0"]
        assert one.partitions()[0].log_end_offset == describe_paths([KRAFT / "codec-lz4-0"]).__next__()["logEndOffset"]


def test_jbod_several_data_dirs_of_one_broker(tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(KRAFT, a)
    b.mkdir()
    shutil.copy(a / "meta.properties", b / "meta.properties")
    for name in ("codec-gzip-0", "idempotent-1"):
        shutil.move(a / name, b / name)
    with kafkalog.open([a, b]) as dirs, kafkalog.open(KRAFT) as one:
        assert [p.name for p in dirs] == [p.name for p in one]
        moved = dirs.partition("codec-gzip", 0)
        assert moved.data_dir.path == b
        assert moved.log_end_offset == one.partition("codec-gzip", 0).log_end_offset
        assert dirs.to_arrow().read_all().num_rows == one.to_arrow().read_all().num_rows


def test_plan_then_apply_is_the_engine_s(tmp_path: Path):
    ours, theirs = tmp_path / "ours" / "data", tmp_path / "theirs" / "data"
    shutil.copytree(KRAFT, ours)
    shutil.copytree(KRAFT, theirs)
    with kafkalog.open(ours) as dirs:
        plan = dirs.plan_retention(now_ms=NOW)
    want = plan_retention([theirs], now_ms=NOW)
    assert isinstance(plan, kafkalog.Plan) and plan.changes
    assert {k: v for k, v in plan.summary().items() if k != "dataDirs"} == \
        {k: v for k, v in want.summary().items() if k != "dataDirs"}
    result = kafkalog.apply(plan, backup=False)
    assert isinstance(result, kafkalog.ApplyResult) and result.operations == sum(1 for _ in plan.ops())
    engine_apply(want, backup=False)
    with kafkalog.open(ours) as a, kafkalog.open(theirs) as b:
        assert [(p.name, p.log_start_offset, p.log_end_offset) for p in a] == \
            [(p.name, p.log_start_offset, p.log_end_offset) for p in b]
        assert any(p.log_start_offset > 0 for p in a)
        assert not a.plan_retention(now_ms=NOW).changes


def test_every_command_s_plan_and_report_is_reachable(tmp_path: Path):
    with kafkalog.open(KRAFT) as dirs:
        for plan in (dirs.plan_compact(now_ms=NOW), dirs.plan_repair(now_ms=NOW), dirs.plan_flush(now_ms=NOW),
                     dirs.plan_reindex(), dirs.plan_convert(), dirs.plan_migrate(tmp_path / "new", kafkalog.MigrateOptions(cluster_id="MkU3OEVBNTcwNTJENDM2Qk", node_id=1)),
                     dirs.plan_topic_id("codec-none", "LvuvLzDqQMec2O0tWy4eZA"),
                     dirs.plan_checkpoint("recovery-point", {("codec-none", 0): 60})):
            assert isinstance(plan, kafkalog.Plan)
            plan.check()
        assert isinstance(dirs.verify(), kafkalog.VerifyReport)
        assert isinstance(dirs.doctor(now_ms=NOW), kafkalog.Diagnosis)
        assert isinstance(dirs.groups(), kafkalog.GroupsReport)
        assert isinstance(dirs.transactions(now_ms=NOW), kafkalog.TransactionReport)
        assert len(dirs.describe()) == len(list(describe_paths([KRAFT])))
        assert dirs.diff(KRAFT).equal
        other = KRAFT.parent.parent / "kafka-3.9.2-kraft" / "data"
        with kafkalog.open(other) as b:
            assert dirs.diff(b, level="batches").summary() == \
                diff_paths(KRAFT, other, level="batches").summary()


def test_rehydrate_plan_then_apply(tmp_path: Path):
    tiered = FIXTURES / "kafka-4.3.1-tiered"
    data = tmp_path / "data"
    shutil.copytree(tiered / "data", data)
    with kafkalog.open_remote_store(tiered / "remote") as store:
        with kafkalog.open(data) as dirs:
            plan = dirs.plan_rehydrate(store, kafkalog.RehydrateOptions(topic="tiered"))
        assert [p.name for p in plan.partitions] == ["tiered-0", "tiered-1"] and plan.changes
        kafkalog.apply(plan, backup=False)
    with kafkalog.open(data) as dirs:
        for p in dirs.partitions("tiered"):
            assert p.segments and p.segments[0].base_offset == 0
            assert p.log_start_offset == 0


def test_import_and_append_write_through_the_api(tmp_path: Path):
    """``import`` (export rows into a data dir) and ``append`` (batches to a partition): each all or nothing,
    with a dry run that touches nothing; the object sees the new data afterwards."""
    data = tmp_path / "data"
    shutil.copytree(KRAFT, data)
    rows = tmp_path / "codec-none.jsonl"
    export_jsonl([KRAFT / "codec-none-0"], rows, ExportFilter(include_control=True))
    with kafkalog.open(data) as dirs:
        preview = dirs.import_files([rows], topic="copied", dry_run=True)
        assert preview.records == 60 and not (data / "copied-0").exists()
        stats = dirs.import_files([rows], topic="copied")
        assert stats.records == 60
        copied = dirs.partition("copied", 0)
        assert [r["value"] for r in copied.records()] == [r["value"] for r in dirs.partition("codec-none", 0).records()]
        batches = numbered_batches(0, 3, ts0=1_750_000_100_000)
        assert dirs.append("copied-0", batches, dry_run=True) == (3, 66)
        assert dirs.partition("copied", 0).log_end_offset == 60
        assert dirs.append("copied-0", batches) == (3, 66)
        assert dirs.partition("copied", 0).log_end_offset == 66
    # a URL opens read-only (tests/storage/test_open_url.py): writing through it is refused, naming the URL
    mem = fsspec.filesystem("memory")
    for f in (data / "copied-0").iterdir():
        mem.pipe(f"/public-api/data/copied-0/{f.name}", f.read_bytes())
    with kafkalog.open("memory://public-api/data") as remote:
        assert remote.partition("copied", 0).log_end_offset == 66
        with pytest.raises(LogDirError, match="memory://public-api/data: append changes files, and a URL is read-only"):
            remote.append("copied-0", numbered_batches(0, 1))


def test_docs_api_md_is_generated_from_the_docstrings():
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert text == apidoc.render(), "docs/api.md is stale: python -m kafkalog.tools.apidoc > docs/api.md"
    for name in kafkalog.__all__:
        if name != "__version__":
            assert f"`kafkalog.{name}" in text, name


@pytest.mark.parametrize("module", ["kafkalog", "kafkalog.storage.api", "kafkalog.storage.api.log_dirs",
                                    "kafkalog.storage.api.partition"])
def test_docstring_examples(module: str, monkeypatch):
    monkeypatch.chdir(ROOT)
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, extraglobs={"kafkalog": kafkalog}, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_docs_api_md_examples(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False,
                              globs={"kafkalog": kafkalog}, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_py_typed_covers_the_whole_package():
    for pkg in ("tools/package", "storage", "tools"):
        assert (ROOT / pkg / "py.typed").is_file(), pkg
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    for pkg in ("kafkalog", "kafkalog.storage", "kafkalog.tools"):
        assert "py.typed" in data.get(pkg, []), pkg
