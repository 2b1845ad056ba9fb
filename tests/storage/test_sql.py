"""``kafkalog sql`` and :meth:`LogDirs.sql` (issue 32): DuckDB over the records, predicates pushed into the reader.

* ``SELECT * FROM records`` is :meth:`LogDirs.to_arrow` row for row on the bundled fixtures;
* every predicate shape returns the same rows with pushdown on and off, and the pushdown narrows the read;
* ``--explain`` of a selective query reads <= 2 % of the bytes of the unselective one (a generated
  multi-segment partition);
* bad input: a corrupt batch (file and byte), a column that does not exist (exit 1), a query that does not
  parse (exit 2), a missing duckdb (what to install).
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import shutil
import sys
from pathlib import Path

import pytest
from builders import (
    BASE_TS,
    generated_partition,
    generated_record,
    single_record_batches,
    write_data_dir_files,
    write_segment,
)

import kafkalog
from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.engine.writer import LogWriter
from kafkalog.storage.errors import CorruptRecordError, MissingDependencyError
from kafkalog.storage.records.reader import LogScanner
from kafkalog.tools.cli import main

require_modules("duckdb", "pyarrow", "fastavro", extra="sql")  # the sql extra (skipped without it, a failure under CI=true)

import duckdb  # noqa: E402
import fastavro  # noqa: E402
import pyarrow  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from kafkalog.storage.api.sql import AvroError, SqlError, execute, explain  # noqa: E402
from kafkalog.storage.api.sql_pushdown import Pushdown  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
KRAFT = FIXTURES / "kafka-4.3.1-kraft" / "data"
DATA_DIRS = [KRAFT, FIXTURES / "kafka-3.9.2-zk-v0" / "data", FIXTURES / "kafka-4.3.1-tiered" / "data",
             FIXTURES / "kafka-4.3.1-kraft-killed" / "data"]
ORDER = 'ORDER BY topic, partition, "offset"'


def _cell(v):
    # DuckDB gives TIMESTAMP WITH TIME ZONE back in its session zone (Etc/UTC): the same instant as the reader's UTC
    return repr(v.astimezone(datetime.UTC)) if isinstance(v, datetime.datetime) else repr(v)


def _rows(table: pyarrow.Table) -> list[tuple]:
    cols = table.column_names
    return sorted(tuple(_cell(r[c]) for c in cols) for r in table.to_pylist())


@pytest.mark.parametrize("data", DATA_DIRS, ids=lambda p: p.parent.name)
def test_select_star_is_to_arrow(data):
    with kafkalog.open(data) as dirs:
        expected = dirs.to_arrow().read_all()
        rel = dirs.sql("SELECT * FROM records")  # (kept while its Arrow stream is read)
        got = rel.arrow()
        got = got.read_all() if hasattr(got, "read_all") else got
    assert got.schema.names == expected.schema.names
    assert got.num_rows == expected.num_rows > 0
    assert _rows(got) == _rows(expected)


def _both(dirs, query: str) -> tuple[list, list]:
    on = dirs.sql(query).fetchall()
    off = dirs.sql(query, pushdown=False).fetchall()
    return on, off


# every predicate shape, on the columns the reader selects on and on the others
SHAPES = [
    "topic = 'multi-segment'",
    "topic <> 'multi-segment'",
    "topic IN ('multi-segment', 'codec-zstd', 'no-such-topic')",
    "topic = 'no-such-topic'",
    "partition = 1",
    "partition IN (0, 3)",
    "partition > 0 AND partition <= 3",
    '"offset" = 44',
    '"offset" < 10',
    '"offset" <= 10',
    '"offset" > 140',
    '"offset" >= 140',
    '"offset" BETWEEN 40 AND 50',
    '"offset" IN (0, 43, 44, 119, 120, 149)',
    '"offset" > 2.5 AND "offset" < 7.5',
    '"offset" = 2.5',
    '"offset" >= 100 AND "offset" < 50',
    '10 > "offset"',
    "timestamp >= (SELECT min(timestamp) FROM records) + INTERVAL 5 SECOND",
    "timestamp >= TIMESTAMP '2025-06-15 15:06:50' AND timestamp < TIMESTAMP '2025-06-15 15:07:30'",
    "timestamp > TIMESTAMPTZ '2025-06-15 15:06:50.0005+00'",
    "timestamp BETWEEN TIMESTAMP '2025-06-15 15:06:00' AND TIMESTAMP '2025-06-15 15:06:55'",
    "timestampMs >= 1750000000000 AND timestampMs < 1750000030000",
    "timestampMs IN (SELECT timestampMs FROM records WHERE \"offset\" = 3)",
    "(topic = 'multi-segment' AND \"offset\" < 5) OR (topic = 'codec-gzip' AND \"offset\" > 55)",
    "(partition = 0 AND \"offset\" < 5) OR \"offset\" > 145",
    "topic = 'multi-segment' OR key IS NULL",
    "NOT (\"offset\" < 100)",
    "\"offset\" < 10 OR length(decode(key)) > 6",
    "\"offset\" + 1 = 10",
    "key = 'key-017'::BLOB",
    "octet_length(value) > 100 AND topic LIKE 'codec-%'",
    "producerId >= 0 AND isTransactional",
    "\"offset\" < 100 AND (segment LIKE '%120.log' OR position < 1000)",
    "magic = 2 AND codec = 'zstd' AND \"offset\" BETWEEN 10 AND 20",
]


@pytest.fixture(scope="module")
def kraft():
    with kafkalog.open(KRAFT) as dirs:
        yield dirs


@pytest.mark.parametrize("where", SHAPES)
def test_pushdown_changes_no_result(kraft, where):
    query = f"SELECT topic, partition, \"offset\", timestamp, key, octet_length(value) FROM records WHERE {where} {ORDER}"
    on, off = _both(kraft, query)
    assert on == off


def test_pushdown_on_every_fixture():
    queries = ['SELECT topic, partition, "offset" FROM records WHERE "offset" BETWEEN 3 AND 8 ' + ORDER,
               "SELECT count(*), sum(octet_length(value)) FROM records WHERE partition = 0 AND timestamp > "
               "(SELECT min(timestamp) FROM records)",
               'SELECT * EXCLUDE (headers) FROM records WHERE topic IN (SELECT min(topic) FROM records) AND '
               '"offset" < 20 ' + ORDER]
    for data in DATA_DIRS:
        with kafkalog.open(data) as dirs:
            for q in queries:
                on, off = _both(dirs, q)
                assert on == off, (data, q)


def test_the_pushdown_narrows_the_read():
    with kafkalog.open(KRAFT) as dirs:
        plan = explain(dirs, "SELECT key FROM records WHERE topic = 'multi-segment' AND partition = 0 "
                             'AND "offset" BETWEEN 130 AND 140 AND timestamp > TIMESTAMP \'2000-01-01\'')
        (scan,) = plan.scans
        push = scan.pushdown
        assert push.topics == frozenset({"multi-segment"}) and push.partitions == frozenset({0})
        assert (push.from_offset, push.to_offset) == (130, 141)
        assert push.from_time == 946684800001 and push.to_time is None
        assert push.columns == ["key", "topic", "partition", "offset", "timestamp"]
        assert scan.partitions == ["multi-segment-0"]
        assert [Path(s.file).name for s in scan.segments] == ["00000000000000000120.log"]
        full = explain(dirs, "SELECT key FROM records", pushdown=False)
        assert plan.log_bytes >= full.bytes > 50 * plan.bytes  # (control batches are skipped: not read)
        # what is not understood is not pushed down: everything is read
        assert Pushdown.of(["key"], None).window is None
        none = explain(dirs, 'SELECT key FROM records WHERE "offset" + 1 = 10 OR topic = \'x\'')
        assert none.bytes == full.bytes


def test_explain_of_a_selective_query_reads_at_most_2_percent(tmp_path):
    data = tmp_path / "data"
    generated_partition(data / "big-0", 20_000, batch_records=20, segment_bytes=128 * 1024, value_size=100)
    write_data_dir_files(data)
    where = '"offset" >= 10000 AND "offset" < 10200'  # 1 % of the records
    with kafkalog.open(data) as dirs:
        assert len(dirs.partition("big", 0).segments) >= 3  # (segment.bytes is at least 1 MiB in Kafka 4)
        everything = explain(dirs, "SELECT count(*) FROM records")
        selective = explain(dirs, f"SELECT count(*) FROM records WHERE {where}")
        assert everything.bytes == everything.log_bytes
        assert selective.bytes <= 0.02 * everything.bytes
        assert selective.segments <= 2
        q = f'SELECT count(*), sum("offset") FROM records WHERE {where}'
        assert dirs.sql(q).fetchall() == dirs.sql(q, pushdown=False).fetchall() == [(200, sum(range(10000, 10200)))]
    out = _cli(["sql", str(data), "--explain", "--json", f"SELECT count(*) FROM records WHERE {where}"])
    assert out[0] == 0
    facts = json.loads(out[1])
    assert facts["bytes"] == selective.bytes and facts["logBytes"] == everything.bytes


def _cli(argv, capsys=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        code = main(argv)
    finally:
        sys.stdout, sys.stderr = old
    return code, out.getvalue(), err.getvalue()


def _walked(monkeypatch) -> list[int]:
    """Bytes of the batches every scan of a segment walks (the Python scanner every windowed read goes through)."""
    walked = [0]
    real = LogScanner.__iter__

    def counted(self):
        for b in real(self):
            walked[0] += b.size
            yield b

    monkeypatch.setattr(LogScanner, "__iter__", counted)
    return walked


def test_a_time_bound_starts_at_the_time_index(tmp_path, monkeypatch):
    """``timestamp >= T`` starts the read where ListOffsets by T starts (the time indexes): the segments and
    batches before it are not walked. The last 1 % of the records (timestamps increasing) read <= 2 % of the
    bytes; before, every batch header of every segment was walked (about 100 %)."""
    data = tmp_path / "data"
    n = 20_000
    generated_partition(data / "big-0", n, batch_records=20, segment_bytes=128 * 1024, value_size=100)
    write_data_dir_files(data)
    t = BASE_TS + (n - 200) * 10  # about the last 200 records
    kept = [i for i in range(n) if generated_record(i, headers=False)[1] >= t]
    expected = [(len(kept), sum(kept))]
    wheres = [f"timestampMs >= {t}", f"timestampMs > {t - 1}",
              f"timestamp >= make_timestamp({t * 1000})::TIMESTAMPTZ",
              f"timestampMs BETWEEN {t} AND {t + 10_000_000}"]
    with kafkalog.open(data) as dirs:
        assert len(dirs.partition("big", 0).segments) >= 10
        log_bytes = dirs.partition("big", 0).size
        walked = _walked(monkeypatch)
        for where in wheres:
            q = f'SELECT count(*), sum("offset") FROM records WHERE {where}'
            walked[0] = 0
            assert dirs.sql(q).fetchall() == expected, where
            assert walked[0] <= 0.02 * log_bytes, (where, walked[0], log_bytes)
            plan = explain(dirs, f"SELECT count(*) FROM records WHERE {where}")
            assert plan.bytes <= 0.02 * plan.log_bytes and plan.segments <= 2, where
            assert plan.scans[0].starts == {"big-0": kept[0]}  # ListOffsets by t: the first record at or after t
            assert dirs.sql(q, pushdown=False).fetchall() == expected
        # an upper bound alone is a filter (timestamps need not increase): everything is read
        q = f"SELECT count(*) FROM records WHERE timestampMs < {BASE_TS + 2000}"
        assert dirs.sql(q).fetchall() == [(sum(generated_record(i, headers=False)[1] < BASE_TS + 2000
                                               for i in range(n)),)]
        assert explain(dirs, q).bytes == log_bytes
        # a bound past every timestamp reads the active segment only (its time index may lag after a crash)
        walked[0] = 0
        assert dirs.sql(f"SELECT count(*) FROM records WHERE timestampMs >= {t + 10_000_000}").fetchall() == [(0,)]
        assert walked[0] <= dirs.partition("big", 0).segments[-1].size + 0.01 * log_bytes
    code, out, _ = _cli(["sql", str(data), "--explain", "--json", f"SELECT count(*) FROM records WHERE {wheres[0]}"])
    facts = json.loads(out)
    assert code == 0 and facts["bytes"] <= 0.02 * facts["logBytes"] and facts["segments"] <= 2
    assert facts["scans"][0]["starts"] == {"big-0": kept[0]}
    code, out, _ = _cli(["sql", str(data), "--explain", f"SELECT count(*) FROM records WHERE {wheres[0]}"])
    assert code == 0 and f"starts at: big-0 offset {kept[0]}\n" in out


def _late_records_partition(pdir: Path) -> None:
    """Timestamps increasing over several segments (generated_record's) but for three records: at offset 0 one
    from the future, at offsets 1000 and 1101 late ones with old timestamps."""
    cfg = LogConfig.from_topic_props({"segment.bytes": str(16 * 1024)})
    kw = {"batch_records": 10, "segment_bytes": 16 * 1024, "value_size": 60}
    for first, n, odd in ((0, 0, (None, BASE_TS + 10**9, b"future", b"from the future", [])),
                          (1, 999, (None, BASE_TS + 50, b"late", b"an old timestamp", [])),
                          (1001, 100, (None, BASE_TS + 7, b"later", b"older still", []))):
        if n:
            generated_partition(pdir, n, first=first, **kw)
        with LogWriter(pdir, cfg, leader_epoch=3, now_ms=BASE_TS, fsync=False) as w:
            w.append_records([odd])


def test_the_time_index_start_loses_nothing_when_timestamps_go_back(tmp_path):
    """Non-monotonic timestamps: every lower time bound returns the same rows with pushdown on and off, and the
    rows of a filter over every record; also with records below the log start offset (which the time index
    lookup does not search, and the reader reads)."""
    data = tmp_path / "data"
    _late_records_partition(data / "late-0")
    write_data_dir_files(data)
    below = tmp_path / "below"
    shutil.copytree(data, below)
    write_data_dir_files(below, log_start={("late", 0): 500})
    stamps = [BASE_TS, BASE_TS + 7, BASE_TS + 8, BASE_TS + 50, BASE_TS + 51, BASE_TS + 5000, BASE_TS + 9990,
              BASE_TS + 10_000, BASE_TS + 10**9, BASE_TS + 10**9 + 1]
    for d in (data, below):
        with kafkalog.open(d) as dirs:
            assert len(dirs.partition("late", 0).segments) >= 4
            rows = dirs.to_arrow(columns=["offset", "timestampMs"]).read_all().to_pylist()
            for t in stamps:
                q = f'SELECT "offset" FROM records WHERE timestampMs >= {t} ORDER BY "offset"'
                expected = [(r["offset"],) for r in rows if r["timestampMs"] >= t]
                assert dirs.sql(q).fetchall() == dirs.sql(q, pushdown=False).fetchall() == expected, (d, t)


def test_cli_outputs(tmp_path):
    q = 'SELECT "offset", timestamp, key, try(decode(value)) AS text FROM records WHERE topic = \'codec-zstd\' ' \
        'AND "offset" < 3 ORDER BY "offset"'
    code, out, err = _cli(["sql", str(KRAFT), q])
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["OFFSET", "TIMESTAMP", "KEY", "TEXT"] and len(lines) == 4
    code, out, _ = _cli(["sql", str(KRAFT), "--json", q])
    rows = [json.loads(line) for line in out.splitlines()]
    expected = [r for r in kraft_rows("codec-zstd") if r["offset"] < 3]
    assert [r["offset"] for r in rows] == [0, 1, 2]
    assert [r["timestamp"] for r in rows] == [r["timestampMs"] for r in expected]
    code, out, _ = _cli(["sql", str(KRAFT), "--csv", q])
    assert code == 0 and list(csv.reader(io.StringIO(out)))[0] == ["offset", "timestamp", "key", "text"]
    dest = tmp_path / "out.parquet"
    code, _, _ = _cli(["sql", str(KRAFT), "--parquet", str(dest), "SELECT * FROM records WHERE topic = 'large'"])
    assert code == 0 and pq.read_table(dest).num_rows == 3
    assert list(tmp_path.iterdir()) == [dest]
    code, out, _ = _cli(["sql", str(KRAFT), "--explain", 'SELECT count(*) FROM records WHERE "offset" > 140'])
    assert code == 0 and "00000000000000000120.log" in out and "% of the" in out


def kraft_rows(topic: str) -> list[dict]:
    with kafkalog.open(KRAFT) as dirs:
        return list(dirs.records(topic))


def test_value_decoding_functions():
    with kafkalog.open(KRAFT) as dirs:
        text = dirs.sql("SELECT decode(value) FROM records WHERE topic = 'codec-none' AND \"offset\" = 1").fetchall()
        assert text == [(kraft_rows("codec-none")[1]["value"].decode(),)]
        got = dirs.sql("""SELECT json_extract_string(decode(value), '$.a') FROM
                          (SELECT '{"a": "x"}'::BLOB AS value)""").fetchall()
        assert got == [("x",)]


ORDER_SCHEMA = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}, {"name": "price", "type": "double"},
    {"name": "note", "type": ["null", "string"]}, {"name": "tags", "type": {"type": "array", "items": "string"}}]}


def _avro(datum: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ORDER_SCHEMA), datum)
    return out.getvalue()


def _orders(i: int) -> dict:
    return {"id": 1000 + i, "item": f"item-{i}", "price": i * 1.5, "note": None if i % 2 else f"note {i}",
            "tags": [f"t{j}" for j in range(i % 3)]}


def _avro_data_dir(root: Path, values: dict[str, list[bytes]]) -> Path:
    """One single-record batch per value, a topic per entry of ``values``."""
    for topic, vals in values.items():
        write_segment(root / f"{topic}-0", 0, single_record_batches([(b"k%d" % i, v) for i, v in enumerate(vals)]),
                      rebuild_indexes=True)
    return write_data_dir_files(root)


def test_avro_decodes_plain_and_confluent_values(tmp_path):
    schema = tmp_path / "order.avsc"
    schema.write_text(json.dumps(ORDER_SCHEMA))
    orders = [_orders(i) for i in range(5)]
    plain = [_avro(o) for o in orders]
    confluent = [b"\x00" + (42).to_bytes(4, "big") + v for v in plain]
    data = _avro_data_dir(tmp_path / "data", {"plain": plain, "confluent": confluent})
    with kafkalog.open(data) as dirs:
        for fn, topic in (("avro", "plain"), ("avro_confluent", "confluent")):
            got = dirs.sql(f"SELECT {fn}(value, '{schema}') FROM records WHERE topic = '{topic}' "
                           f'ORDER BY "offset"').fetchall()
            assert [json.loads(r[0]) for r in got] == orders, fn
        got = dirs.sql(f"SELECT json_extract_string(avro(value, '{schema}'), '$.item'), "
                       f"CAST(json_extract(avro(value, '{schema}'), '$.price') AS DOUBLE) FROM records "
                       f"WHERE topic = 'plain' AND \"offset\" = 3").fetchall()
        assert got == [("item-3", 4.5)]
        # a null value (a tombstone) is null
        assert dirs.sql(f"SELECT avro(NULL::BLOB, '{schema}'), avro_confluent(NULL::BLOB, '{schema}')").fetchall() \
            == [(None, None)]
    code, out, err = _cli(["sql", str(data), "--json", f"SELECT avro_confluent(value, '{schema}') AS o FROM records "
                           "WHERE topic = 'confluent' AND \"offset\" = 1"])
    assert (code, err) == (0, "") and json.loads(json.loads(out)["o"]) == orders[1]


def test_a_value_avro_cannot_decode_is_the_file_and_offset(tmp_path):
    schema = tmp_path / "order.avsc"
    schema.write_text(json.dumps(ORDER_SCHEMA))
    good = _avro(_orders(0))
    data = _avro_data_dir(tmp_path / "data", {"orders": [good, good[:-3], good + b"\x02", b"\x00\x00\x00\x00\x07" + good]})
    seg = data / "orders-0" / "00000000000000000000.log"
    with kafkalog.open(data) as dirs:
        positions = [b.position for _s, b in dirs.partition("orders", 0).batches()]
        for offset, fn, words in ((1, "avro", "not an Avro datum of"), (2, "avro", "1 of its"),
                                  (3, "avro", "the Confluent wire format? use avro_confluent"),
                                  (0, "avro_confluent", "not the Confluent wire format")):
            q = f"SELECT {fn}(value, '{schema}') FROM records WHERE \"offset\" = {offset}"
            with pytest.raises(AvroError) as e:
                list(execute(dirs, q)[1])
            assert (e.value.path, e.value.position) == (str(seg), positions[offset]), fn
            assert f"offset {offset}: value " in str(e.value) and words in str(e.value)
            assert (str(schema) in str(e.value)) == (fn == "avro")  # (the datum's schema; not a wire format's)
            code, out, err = _cli(["sql", str(data), q])
            assert code == 1 and out == "" and err.count("\n") == 1 and "Traceback" not in err
            assert f"{seg}: byte {positions[offset]}: offset {offset}: value " in err and words in err
        # the whole topic: the first bad record is named
        code, _, err = _cli(["sql", str(data), f"SELECT count(avro(value, '{schema}')) FROM records"])
        assert code == 1 and f"byte {positions[1]}: offset 1:" in err
        # a schema that is not one
        bad = tmp_path / "bad.avsc"
        bad.write_text('{"type": "record", "name": "x", "fields": [{"name": "a", "type": "nope"}]}')
        code, _, err = _cli(["sql", str(data), f"SELECT avro(value, '{bad}') FROM records"])
        assert code == 1 and err.count("\n") == 1 and f"cannot read the Avro schema {bad}" in err


def test_bad_input(tmp_path):
    code, _, err = _cli(["sql", str(KRAFT), "SELECT nope FROM records"])
    assert code == 1 and err.count("\n") == 1 and '"nope" not found' in err and "Traceback" not in err
    code, _, err = _cli(["sql", str(KRAFT), "SELEC * FROM records"])
    assert code == 2 and "syntax error" in err and err.startswith("kafkalog sql: error: Parser Error")
    code, _, err = _cli(["sql", str(KRAFT), "SELECT * FROM nothing_here"])
    assert code == 1 and "nothing_here" in err
    code, _, err = _cli(["sql", str(KRAFT), f"SELECT avro(value, '{tmp_path / 's.avsc'}') FROM records"])
    assert code == 1 and err.count("\n") == 1 and "cannot read the Avro schema" in err and "s.avsc" in err
    code, _, err = _cli(["sql", str(tmp_path / "missing"), "SELECT 1"])
    assert code == 1 and "missing" in err
    with kafkalog.open(KRAFT) as dirs:
        with pytest.raises(SqlError) as e:
            dirs.sql("SELECT nope FROM records")
        assert not e.value.syntax
        with pytest.raises(SqlError) as e:
            dirs.sql("SELEC 1")
        assert e.value.syntax



@pytest.mark.parametrize("query", ["COPY (SELECT 1) TO '{out}'", "SELECT 1; COPY (SELECT 2) TO '{out}'",
                                   "ATTACH '{out}'", "CREATE TABLE t AS SELECT 1"])
def test_only_one_select_runs(tmp_path, query):
    """sql reads: a statement that is not one SELECT is a usage error before anything runs (COPY ... TO wrote the
    file, and an ATTACH created a database, with exit 0)."""
    out = tmp_path / "out.csv"
    for argv in (["sql", str(KRAFT), query.format(out=out)], ["sql", "--explain", str(KRAFT), query.format(out=out)]):
        code, _, err = _cli(argv)
        assert code == 2 and err.count("\n") == 1 and "kafkalog sql runs one SELECT over records" in err, err
        assert not out.exists()
    with kafkalog.open(KRAFT) as dirs, pytest.raises(SqlError) as e:
        dirs.sql(query.format(out=out))
    assert e.value.syntax and not out.exists()

def test_a_corrupt_batch_is_the_file_and_byte(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(KRAFT, data)
    seg = data / "multi-segment-0" / "00000000000000000044.log"
    raw = bytearray(seg.read_bytes())
    raw[200] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    seg.write_bytes(bytes(raw))
    code, out, err = _cli(["sql", str(data), "SELECT count(*) FROM records"])
    assert code == 1 and out == "" and err.count("\n") == 1
    assert str(seg) in err and "byte 0" in err
    with kafkalog.open(data) as dirs:
        with pytest.raises(CorruptRecordError) as e:
            _schema, batches = execute(dirs, "SELECT count(*) FROM records")
            list(batches)
        assert e.value.path == str(seg) and e.value.position == 0
        with pytest.raises(duckdb.Error) as d:  # a relation fetched by DuckDB itself: DuckDB's error, with ours
            dirs.sql("SELECT * FROM records").fetchall()
        assert str(seg) in str(d.value)
        # a query the pushdown keeps away from the damage reads nothing of it
        assert dirs.sql('SELECT count(*) FROM records WHERE topic = \'multi-segment\' AND partition = 0 '
                        'AND "offset" >= 120').fetchall() == [(30,)]


def test_without_fastavro_avro_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "fastavro", None)
    code, _, err = _cli(["sql", str(KRAFT), "SELECT avro(value, 's.avsc') FROM records"])
    assert code == 1 and "pip install fastavro" in err


def test_without_duckdb_the_command_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "duckdb", None)
    code, _, err = _cli(["sql", str(KRAFT), "SELECT 1"])
    assert code == 1 and "pip install 'kafkalog[sql]'" in err
    with kafkalog.open(KRAFT) as dirs, pytest.raises(MissingDependencyError):
        dirs.sql("SELECT 1")


def test_the_relation_runs_again():
    with kafkalog.open(KRAFT) as dirs:
        rel = dirs.sql("SELECT count(*) FROM records WHERE topic = 'codec-lz4'")
        assert rel.fetchall() == [(60,)]
        assert rel.fetchall() == [(60,)]  # each run scans again (a fresh reader)
        assert rel.df()["count_star()"].tolist() == [60]


def test_to_arrow_columns_and_time_range():
    with kafkalog.open(KRAFT) as dirs:
        full = dirs.to_arrow(["multi-segment"]).read_all()
        some = dirs.to_arrow(["multi-segment"], columns=["offset", "key", "timestampMs"]).read_all()
        assert some.schema.names == ["offset", "key", "timestampMs"]
        assert some.to_pylist() == full.select(["offset", "key", "timestampMs"]).to_pylist()
        stamps = sorted(full.column("timestampMs").to_pylist())
        lo, hi = stamps[50], stamps[200]
        window = dirs.to_arrow(["multi-segment"], time_range=(lo, hi)).read_all()
        assert window.to_pylist() == [r for r in full.to_pylist() if lo <= r["timestampMs"] < hi]
        assert window.num_rows > 0
        with pytest.raises(kafkalog.KafkaLogError, match="no column 'nope'"):
            dirs.to_arrow(columns=["offset", "nope"])


def test_the_dataset_never_reaches_the_base_class():
    """``records`` is a ``pyarrow.dataset.Dataset`` without a C++ dataset: its methods go through its scanner or
    are refused (a base-class method would read a null pointer)."""
    import pyarrow.dataset as pds

    from kafkalog.storage.api.sql_dataset import RecordsScan, _dataset

    with kafkalog.open(KRAFT) as dirs:
        ds = _dataset(RecordsScan(dirs))
        assert isinstance(ds, pds.Dataset)
        assert ds.count_rows() == dirs.to_arrow().read_all().num_rows
        assert ds.to_table(columns=["offset"], filter=pds.field("offset") < 3).num_rows == 59
        assert ds.head(2).num_rows == 2
        for refused in (ds.get_fragments, ds.take, ds.sort_by, ds.join):
            with pytest.raises(TypeError, match="not supported"):
                refused()


def test_a_query_stopped_early_exits_cleanly():
    """A LIMIT stops DuckDB before the reader's end: the process still exits 0, nothing on stderr (the scan's
    Arrow stream was once read ahead on Arrow's threads, which called into Python after the interpreter began
    exiting: 'FATAL: exception not rethrown', abort, about one run in twenty)."""
    import subprocess

    for query in ['SELECT key FROM records WHERE headers IS NOT NULL LIMIT 1',
                  'SELECT "offset" FROM records WHERE "offset" > 3 LIMIT 2'] * 2:
        r = subprocess.run([sys.executable, "-m", "kafkalog", "sql", str(KRAFT), query], capture_output=True,
                           text=True, timeout=120, cwd=ROOT)
        assert (r.returncode, r.stderr) == (0, ""), r.stderr[-2000:]


def test_read_committed_and_control_records_are_the_readers():
    with kafkalog.open(KRAFT) as dirs:
        for kw in ({"read_committed": True}, {"include_control": True}, {}):
            expected = dirs.to_arrow(["transactions"], **kw).read_all()
            got = dirs.sql('SELECT * FROM records WHERE topic = \'transactions\'', **kw)
            table = got.arrow()
            table = table.read_all() if hasattr(table, "read_all") else table
            assert _rows(table) == _rows(expected), kw
        committed = dirs.sql("SELECT count(*) FROM records WHERE topic = 'transactions'", read_committed=True)
        everything = dirs.sql("SELECT count(*) FROM records WHERE topic = 'transactions'")
        assert committed.fetchall()[0][0] < everything.fetchall()[0][0]


# scans whose rows are kept contiguously, scattered (more runs than MAX_RUNS: filtered on copies), by key or
# value (the filter needs copies of the views), and unfiltered (the views as they are)
VIEW_QUERIES = [
    f"SELECT topic, partition, \"offset\", key, value FROM records {ORDER}",
    f"SELECT \"offset\", key, value FROM records WHERE topic = 'multi-segment' AND \"offset\" BETWEEN 40 AND 50 {ORDER}",
    f"SELECT \"offset\", key, value FROM records WHERE \"offset\" % 3 = 1 {ORDER}",
    f"SELECT \"offset\", key FROM records WHERE key = 'key-017'::BLOB {ORDER}",
    f"SELECT \"offset\", value FROM records WHERE key IS NULL OR octet_length(value) > 150 {ORDER}",
    f"SELECT \"offset\", key, value FROM records WHERE \"offset\" IN (0, 43, 44, 119, 120, 149) {ORDER}",
    "SELECT partition, count(*), sum(octet_length(value)), min(key), max(value) FROM records GROUP BY partition "
    "ORDER BY partition",
]


def test_key_and_value_reach_duckdb_as_views(monkeypatch):
    """``kafkalog sql`` hands DuckDB the reader's zero-copy ``binary_view`` key and value (DuckDB of the sql extra
    reads them), filters pushed as before; every query's rows are those of copies (``binary``)."""
    from kafkalog.storage.api import sql_dataset

    assert sql_dataset.duckdb_reads_views()
    schemas: list = []
    real = sql_dataset._reader

    def spy(*args, **kwargs):
        reader = real(*args, **kwargs)
        schemas.append(reader.schema)
        return reader

    monkeypatch.setattr(sql_dataset, "_reader", spy)
    with kafkalog.open(KRAFT) as dirs:
        viewed = [dirs.sql(q).fetchall() for q in VIEW_QUERIES]
        pushed = [p for q in VIEW_QUERIES[1:3] for p in explain(dirs, q).scans]
        assert [p.pushdown.topics for p in pushed] == [frozenset({"multi-segment"}), None]
        assert pushed[0].pushdown.from_offset == 40  # (a view-typed schema would have stopped DuckDB's pushdown)
        view_schemas, schemas[:] = list(schemas), []
        monkeypatch.setattr(sql_dataset, "duckdb_reads_views", lambda: False)
        copied = [dirs.sql(q).fetchall() for q in VIEW_QUERIES]
    assert viewed == copied
    assert all(len(rows) > 0 for rows in viewed)
    for views, schema in ((True, view_schemas), (False, schemas)):
        types = {s.field(c).type for s in schema for c in ("key", "value") if c in s.names}
        assert types == ({pyarrow.binary_view()} if views else {pyarrow.binary()}), (views, types)


@pytest.mark.parametrize("runs", [0, 1, 2, 16, 17, 500])
def test_a_filter_keeps_the_views(runs):
    """``sql_dataset._filter`` on a table with ``binary_view`` columns gives the rows ``filter`` gives on copies:
    as slices of the views up to ``MAX_RUNS`` runs of rows, else filtered on copies and viewed again."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pds

    from kafkalog.storage.api.sql_dataset import MAX_RUNS, _filter

    n = 1000
    values = [None if i % 7 == 0 else (b"v%d" % i) * (i % 5) for i in range(n)]
    views = pyarrow.table({"key": pyarrow.array(values, pyarrow.binary_view()), "o": pyarrow.array(range(n))})
    copies = views.cast(pyarrow.schema([pyarrow.field("key", pyarrow.binary()), pyarrow.field("o", pyarrow.int64())]))
    # `runs` runs of 1 row (0: no row) on the o column, then filters naming the key
    keep = pds.field("o") < 0 if runs == 0 else pc.equal(pc.bit_wise_and(pds.field("o"), 1), 0) & (
        pds.field("o") < 2 * runs)
    for expr in (keep, pds.field("o") >= 0, pds.field("key").is_null(), pds.field("key") == b"v3v3v3",
                 (pds.field("key") == b"v2v2") | (pds.field("o") > 900)):
        got = _filter(pyarrow, views, expr)
        want = copies.filter(expr)
        assert got.schema == views.schema
        assert got.to_pylist() == want.to_pylist(), expr
        if expr is keep and 0 < runs <= MAX_RUNS:
            assert got.column("key").num_chunks == runs  # slices of the views, not copies
