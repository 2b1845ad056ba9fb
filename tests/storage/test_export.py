"""kafkalog export (JSON Lines, Parquet) and import: fields, ranges, round trips through the write path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import writer_data_dir

from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.codec.compression import LZ4
from kafkalog.storage.engine.export import (
    COLUMN_NAMES,
    EXPORT_COLUMNS,
    ExportFilter,
    export_jsonl,
    iter_export_rows,
)
from kafkalog.storage.engine.import_ import import_files
from kafkalog.storage.engine.parquet import export_parquet
from kafkalog.storage.errors import CorruptRecordError, LogDirError
from kafkalog.storage.log.offset_spec import parse_offset_specs
from kafkalog.storage.reports.diff import diff_paths
from kafkalog.tools.cli import main

T0 = 1_700_000_000_000
TOPIC_ID = "l5y0MjLvQdypLcP9XmR7bw"


ALL = ExportFilter(include_control=True)  # every record, transaction markers too: what an import rebuilds the log from


def test_schema_matches_spark_source():
    from kafkalog.tools.spark.schema import RECORD_COLUMNS

    assert EXPORT_COLUMNS == RECORD_COLUMNS


def test_rows_have_every_field(tmp_path: Path):
    d = writer_data_dir(tmp_path / "d")
    rows = list(iter_export_rows([d], ExportFilter(topics={"orders"}, include_control=True)))
    assert len(rows) == 92 and list(rows[0]) == COLUMN_NAMES
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


def test_from_time_starts_through_the_time_index(tmp_path: Path):
    """--from-time alone starts where ListOffsets by that timestamp does (the time indexes, as ``-o @T``): the
    segments before it are never read, so damage there (a batch whose CRC fails) is not met."""
    d = writer_data_dir(tmp_path / "d")
    flt = ExportFilter(topics={"orders"}, from_time=T0 + 200)
    want = list(iter_export_rows([d], flt))
    assert want and min(r["offset"] for r in want) == 60
    first = min((d / "orders-0").glob("*.log"))
    data = bytearray(first.read_bytes())
    data[100] ^= 0xFF  # inside the first batch's records: its CRC fails
    first.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError):
        list(iter_export_rows([d], ExportFilter(topics={"orders"})))
    assert list(iter_export_rows([d], flt)) == want


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_import_export_identical_uncompressed(tmp_path: Path, fmt: str):
    d = writer_data_dir(tmp_path / "d")
    if fmt == "jsonl":
        export_jsonl([d], tmp_path / "a.jsonl", ALL)
        files = [tmp_path / "a.jsonl"]
    else:
        require_modules("pyarrow", extra="spark")
        st = export_parquet([d], tmp_path / "pq", ALL, row_group_rows=16)
        files = [Path(f) for f in st.files]
        import pyarrow.parquet as pq

        md = pq.ParquetFile(files[-1]).metadata
        assert md.num_row_groups > 1 and md.num_rows == 92
    stats = import_files(files, tmp_path / "imp", topic_id=TOPIC_ID)
    assert stats.partitions["orders-0"] == 92
    a = list(iter_export_rows([d], ALL))
    b = list(iter_export_rows([tmp_path / "imp"], ALL))
    assert a == b
    # the .log files are byte-identical too
    res = diff_paths(d / "orders-0", tmp_path / "imp" / "orders-0", level="batches")
    assert res.equal, res.differences


def test_compressed_is_record_identical(tmp_path: Path):
    d = writer_data_dir(tmp_path / "d", codec=LZ4)
    export_jsonl([d], tmp_path / "a.jsonl", ALL)
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
    assert main(["export", str(d), "--format", "parquet", "--out", str(tmp_path / "pq"),
                 "--print-control-records"]) == 0
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

    from kafkalog.storage.io.jsonio import iter_lines

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


# ------------------------------------------------------------------------- --key, --print-control-records

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "kafka-4.3.1-kraft" / "data"


def test_key_filter(tmp_path: Path):
    from kafkalog.storage.engine.export import key_bytes

    d = writer_data_dir(tmp_path / "d")
    rows = list(iter_export_rows([d], ExportFilter(key=b"k1")))
    assert [r["offset"] for r in rows] == list(range(1, 90, 3)) and {r["key"] for r in rows} == {b"k1"}
    # with an offset range, and in Parquet (the record path, not the whole-batch Arrow one)
    rows = list(iter_export_rows([d], ExportFilter(key=b"k2", from_offset=40, to_offset=50)))
    assert [r["offset"] for r in rows] == [41, 44, 47]
    export_parquet([d], tmp_path / "pq", ExportFilter(key=b"k0"))
    import pyarrow.parquet as pq

    t = pq.read_table(tmp_path / "pq" / "orders-0.parquet")
    assert t.num_rows == 30 and set(t.column("key").to_pylist()) == {b"k0"}
    assert list(iter_export_rows([d], ExportFilter(key=b"nope"))) == []
    assert key_bytes("k1") == b"k1" and key_bytes("6b31", "hex") == b"k1" and key_bytes("azE=", "base64") == b"k1"
    assert key_bytes("\udcff", "utf8") == b"\xff"  # as `--payload utf8` prints an undecodable byte


def test_key_filter_cli(tmp_path: Path, capsys):
    d = writer_data_dir(tmp_path / "d")
    for args in (["--key", "k1"], ["--key", "6b31", "--key-format", "hex"], ["--key", "azE=", "--key-format", "base64"]):
        assert main(["export", str(d), "--out", "-", "--no-progress", *args]) == 0
        rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        assert len(rows) == 30 and {r["key"] for r in rows} == {"azE="}, args
    assert main(["export", str(d), "--out", "-", "--key", "zz", "--key-format", "hex"]) == 1
    assert "not valid hex" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["export", str(d), "--out", "-", "--key", "k1", "--key-format", "rot13"])
    assert e.value.code == 2
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    helptext = capsys.readouterr().out
    assert "--key K" in helptext and "--key-format" in helptext and "--print-control-records" in helptext


def test_control_records_only_with_print_control_records(tmp_path: Path, capsys):
    """kcat and kafka-console-consumer: data records by default; --print-control-records adds the markers,
    with their type."""
    tx = FIXTURE / "transactions-0"
    assert main(["export", str(tx), "--out", "-", "--no-progress"]) == 0
    data = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert data and not any(r["isControl"] for r in data) and all("controlType" not in r for r in data)
    assert main(["export", str(tx), "--out", "-", "--no-progress", "--print-control-records"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    markers = [r for r in rows if r["isControl"]]
    assert len(rows) == len(data) + len(markers)
    assert {r["controlType"] for r in markers} == {"COMMIT", "ABORT"}
    assert all(r["isTransactional"] for r in markers)
    # --read-committed never prints markers; --no-control (the old default's opposite) is still accepted
    assert main(["export", str(tx), "--out", "-", "--print-control-records", "--read-committed"]) == 0
    assert not any(json.loads(x)["isControl"] for x in capsys.readouterr().out.splitlines())
    assert main(["export", str(tx), "--out", "-", "--no-control"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(data)


def test_print_control_records_round_trips_through_import(tmp_path: Path, capsys):
    """An export with the markers is what `kafkalog import` rebuilds a transactional partition from."""
    d = writer_data_dir(tmp_path / "d")
    out = tmp_path / "all.jsonl"
    assert main(["export", str(d), "--out", str(out), "--no-progress", "--print-control-records"]) == 0
    assert main(["import", str(out), str(tmp_path / "new")]) == 0
    assert diff_paths(d / "orders-0", tmp_path / "new" / "orders-0").equal
    assert main(["export", str(d), "--out", str(tmp_path / "data.jsonl"), "--no-progress"]) == 0
    assert main(["import", str(tmp_path / "data.jsonl"), str(tmp_path / "new2")]) == 0
    (diff,) = diff_paths(d / "orders-0", tmp_path / "new2" / "orders-0").differences  # the marker, missing
    assert diff.kind == "offsets-only-in-a" and diff.a["ranges"] == [[91, 91]]


@pytest.mark.parametrize("spec", ["start", "+0"])
def test_offset_start_is_the_log_start_offset(tmp_path: Path, capsys, spec: str):
    """`export -o start` (and `-o +0`) started at the first segment's base offset: the partition was opened
    without its data dir's checkpoints, so a log start offset the broker checkpointed above it (retention,
    DeleteRecords) was not seen. It starts where `kafkalog.open(...).partition(...).log_start_offset` says."""
    import shutil

    from damage import FIXTURES

    import kafkalog
    from kafkalog.storage.files.checkpoints import read_offset_checkpoint, write_offset_checkpoint

    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", data)
    cp = data / "log-start-offset-checkpoint"
    offsets = read_offset_checkpoint(cp).to_dict() if cp.exists() else {}
    write_offset_checkpoint(cp, {**offsets, ("codec-none", 0): 10})
    with kafkalog.open(data) as logs:
        assert logs.partition("codec-none", 0).log_start_offset == 10
    out = tmp_path / "out.jsonl"
    assert main(["export", str(data), "--topics", "codec-none", "-o", spec, "--out", str(out)]) == 0
    offsets_out = [json.loads(x)["offset"] for x in out.read_text().splitlines()]
    assert offsets_out and offsets_out[0] == 10, offsets_out[:3]
    flt = ExportFilter(topics={"codec-none"}, offset_spec=parse_offset_specs([spec]))
    assert next(iter_export_rows([data / "codec-none-0"], flt))["offset"] == 10  # the library, a partition dir


def test_import_names_a_byte_that_is_not_utf8_by_line_and_byte(tmp_path: Path):
    """import reads its JSON Lines as append does (jsonio.iter_lines): a bad byte is named by line and byte."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n" * 5000 + b'{"topic": "\xfe"}\n')
    with pytest.raises(CorruptRecordError, match=r"line 5001: not UTF-8 text \(byte 0xfe at byte 5011 of the file\)"):
        import_files([src], tmp_path / "imp")
    assert not (tmp_path / "imp").exists()


def test_export_jsonl_that_fails_leaves_no_half_written_file(tmp_path: Path, capsys):
    """An export that stops at a corrupt batch leaves --out as it was (here: an earlier file kept whole), not the
    rows read before the error; a successful export replaces it whole (written beside it, then renamed)."""
    import shutil

    from damage import FIXTURES, crc_mismatch

    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", data)
    out = tmp_path / "out.jsonl"
    out.write_text("an earlier export\n")
    assert crc_mismatch(data)
    assert main(["export", str(data), "--out", str(out)]) == 1
    assert "record batch is corrupt" in capsys.readouterr().err
    assert out.read_text() == "an earlier export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out.jsonl"]
    assert main(["export", str(data / "codec-none-0"), "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 60
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out.jsonl"]


def test_export_parquet_refuses_an_out_dir_inside_a_data_dir(tmp_path: Path, capsys):
    """`export DATA --format parquet --out DATA/pq` made DATA/pq, a folder the broker refuses to load DATA for
    ('pq' is not in the form of topic-partition): refused, nothing written."""
    require_modules("pyarrow", extra="spark")
    import shutil

    from damage import FIXTURES, tree

    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", data)
    before = tree(data)
    for out in (data / "pq", data / "codec-none-0" / "pq"):
        assert main(["export", str(data / "codec-none-0"), "--format", "parquet", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"{out}: inside the data dir {data}" in err, err
        assert tree(data) == before
    assert main(["export", str(data / "codec-none-0"), "--format", "parquet", "--out", str(tmp_path / "pq")]) == 0


def test_import_of_a_file_that_is_not_parquet_is_an_error_naming_it(tmp_path: Path, capsys):
    """A damaged .parquet input was 'internal error ... ArrowInvalid: Parquet magic bytes not found', exit 3."""
    require_modules("pyarrow", extra="spark")
    for name, data in (("junk.parquet", bytes(range(256)) * 2), ("short.parquet", b"PAR1xxxxPAR1")):
        src = tmp_path / name
        src.write_bytes(data)
        with pytest.raises(CorruptRecordError, match="not a Parquet file"):
            import_files([src], tmp_path / "imp")
        assert main(["import", str(src), str(tmp_path / "imp")]) == 1
        err = capsys.readouterr().err
        assert f"{src}: not a Parquet file" in err and "internal error" not in err, err
        assert not (tmp_path / "imp").exists()
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"topic": ["t"], "partition": [0], "offset": [0], "value": [b"x"]}), tmp_path / "o.parquet")
    assert main(["import", str(tmp_path / "o.parquet"), str(tmp_path / "imp")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'o.parquet'}: not a Parquet file kafkalog exported: no column headers, timestampMs" in err, err
    assert not (tmp_path / "imp").exists()
