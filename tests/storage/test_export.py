"""kafkalog export (JSON Lines, Parquet) and import: fields, ranges, round trips through the write path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import writer_data_dir

from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.codec.compression import LZ4
from kafkalog.storage.diff import diff_paths
from kafkalog.storage.engine.export import (
    COLUMN_NAMES,
    EXPORT_COLUMNS,
    ExportFilter,
    export_jsonl,
    export_parquet,
    iter_export_rows,
)
from kafkalog.storage.engine.import_ import import_files
from kafkalog.storage.errors import CorruptRecordError, LogDirError
from kafkalog.tools.cli import main

T0 = 1_700_000_000_000
TOPIC_ID = "l5y0MjLvQdypLcP9XmR7bw"


def test_schema_matches_spark_source():
    from kafkalog.tools.spark.schema import RECORD_COLUMNS

    assert EXPORT_COLUMNS == RECORD_COLUMNS


def test_rows_have_every_field(tmp_path: Path):
    d = writer_data_dir(tmp_path / "d")
    rows = list(iter_export_rows([d], ExportFilter(topics={"orders"})))
    assert len(rows) == 92 and set(rows[0]) == set(COLUMN_NAMES)
    r = rows[4]
    assert (r["topic"], r["partition"], r["offset"], r["timestamp"], r["key"], r["leaderEpoch"]) == \
        ("orders", 0, 4, T0 + 11, b"k1", 2)
    assert r["headers"] == [("h", b"x"), ("n", None)] and r["magic"] == 2 and r["codec"] == "none"
    txn, marker = rows[-2], rows[-1]
    assert (txn["producerId"], txn["sequence"], txn["isTransactional"], txn["isControl"]) == (9, 0, True, False)
    assert marker["isControl"] and marker["offset"] == 91
    assert len({r["segment"] for r in rows}) > 1


def test_ranges(tmp_path: Path):
    d = writer_data_dir(tmp_path / "d")
    rows = list(iter_export_rows([d], ExportFilter(topics={"orders"}, from_offset=40, to_offset=50)))
    assert [r["offset"] for r in rows] == list(range(40, 50))
    rows = list(iter_export_rows([d], ExportFilter(topics={"orders"}, from_time=T0 + 100, to_time=T0 + 120)))
    assert {r["timestamp"] for r in rows} == {T0 + 100, T0 + 101, T0 + 102, T0 + 110, T0 + 111, T0 + 112}
    rows = list(iter_export_rows([d], ExportFilter(topics={"orders"}, include_control=False)))
    assert not any(r["isControl"] for r in rows)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_import_export_identical_uncompressed(tmp_path: Path, fmt: str):
    d = writer_data_dir(tmp_path / "d")
    if fmt == "jsonl":
        export_jsonl([d], tmp_path / "a.jsonl")
        files = [tmp_path / "a.jsonl"]
    else:
        require_modules("pyarrow", extra="spark")
        st = export_parquet([d], tmp_path / "pq", row_group_rows=16)
        files = [Path(f) for f in st.files]
        import pyarrow.parquet as pq

        md = pq.ParquetFile(files[-1]).metadata
        assert md.num_row_groups > 1 and md.num_rows == 92
    stats = import_files(files, tmp_path / "imp", topic_id=TOPIC_ID)
    assert stats.partitions["orders-0"] == 92
    a = list(iter_export_rows([d]))
    b = list(iter_export_rows([tmp_path / "imp"]))
    assert a == b
    # the .log files are byte-identical too
    res = diff_paths(d / "orders-0", tmp_path / "imp" / "orders-0", level="batches")
    assert res.equal, res.differences


def test_compressed_is_record_identical(tmp_path: Path):
    d = writer_data_dir(tmp_path / "d", codec=LZ4)
    export_jsonl([d], tmp_path / "a.jsonl")
    import_files([tmp_path / "a.jsonl"], tmp_path / "imp")
    assert diff_paths(d, tmp_path / "imp").equal
    strip = [{k: v for k, v in r.items() if k not in ("position",)} for r in iter_export_rows([d])]
    strip2 = [{k: v for k, v in r.items() if k not in ("position",)} for r in iter_export_rows([tmp_path / "imp"])]
    assert strip == strip2


def test_import_refuses_existing_and_bad_rows(tmp_path: Path):
    d = writer_data_dir(tmp_path / "d")
    export_jsonl([d], tmp_path / "a.jsonl")
    with pytest.raises(LogDirError, match="--append"):
        import_files([tmp_path / "a.jsonl"], d)
    (tmp_path / "bad.jsonl").write_text('{"topic": "x"}\nnot json\n')
    with pytest.raises(CorruptRecordError, match="line 1"):
        import_files([tmp_path / "bad.jsonl"], tmp_path / "imp2")
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    (tmp_path / "dup.jsonl").write_text("\n".join(lines[:3] + lines[:3]) + "\n")
    with pytest.raises(CorruptRecordError, match="offsets must increase"):
        import_files([tmp_path / "dup.jsonl"], tmp_path / "imp3")


def test_cli(tmp_path: Path, capsys):
    d = writer_data_dir(tmp_path / "d")
    assert main(["export", str(d / "orders-0"), "--out", "-", "--from-offset", "3", "--to-offset", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [json.loads(x)["offset"] for x in out] == [3, 4]
    assert json.loads(out[0])["key"] == "azA="
    require_modules("pyarrow", extra="spark")
    assert main(["export", str(d), "--format", "parquet", "--out", str(tmp_path / "pq")]) == 0
    assert sorted(p.name for p in (tmp_path / "pq").iterdir()) == ["audit-0.parquet", "orders-0.parquet"]
    assert main(["import", str(tmp_path / "pq" / "orders-0.parquet"), str(tmp_path / "imp"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["summary"]["records"] == 92
    with pytest.raises(SystemExit) as e:
        main(["export", str(d), "--out", "x", "--from-time", "yesterday"])
    assert e.value.code == 2


def test_import_refuses_hostile_json_with_a_line_number(tmp_path: Path):
    (tmp_path / "deep.jsonl").write_text("\n" + "[" * 100_000 + "\n")
    with pytest.raises(CorruptRecordError, match="line 2: .*nested too deeply"):
        import_files([tmp_path / "deep.jsonl"], tmp_path / "imp")


def test_json_lines_are_read_with_a_bound():
    import io

    from kafkalog.storage.jsonio import iter_lines

    assert list(iter_lines(io.StringIO("a\nbb\n"), limit=3)) == [(1, "a\n"), (2, "bb\n")]
    with pytest.raises(ValueError, match="line 2 is longer than 3"):
        list(iter_lines(io.StringIO("abc\nabcd\n"), limit=3))


def test_progress_counts_every_segment(tmp_path: Path):
    import io

    from kafkalog.storage.engine.export import export_bytes

    d = writer_data_dir(tmp_path / "d")
    seen: list[int] = []
    export_jsonl([d], io.StringIO(), progress=seen.append)
    assert len(seen) == len(list(d.rglob("*.log"))) > 2 and sum(seen) == export_bytes([d])
    seen.clear()
    require_modules("pyarrow", extra="spark")
    export_parquet([d], tmp_path / "pq", ExportFilter(from_offset=60), progress=seen.append)
    assert sum(seen) == export_bytes([d])  # segments before the range are skipped, still counted
