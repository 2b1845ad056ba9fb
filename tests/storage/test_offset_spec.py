"""Offset specs in rpk's and kcat's grammar (``kafkalog export -o``): parsing, and resolution per partition
through the log's offsets and time indexes, checked against a brute-force scan of every record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kafkalog.storage.engine.export import ExportFilter, iter_export_rows
from kafkalog.storage.errors import ConfigError
from kafkalog.storage.log.offset_spec import Bound, parse_offset_spec
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.tools.cli import main

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "kafka-4.3.1-kraft" / "data"
NOW = 1_700_000_000_000
H = 3_600_000


@pytest.mark.parametrize("text,start,end", [
    ("start", Bound("start"), Bound("end")),
    ("oldest", Bound("start"), Bound("end")),
    (":end", Bound("start"), Bound("end")),
    ("end", Bound("end"), Bound("end")),
    ("newest", Bound("end"), Bound("end")),
    ("47", Bound("offset", 47), Bound("end")),
    ("47:", Bound("offset", 47), Bound("end")),
    (":47", Bound("start"), Bound("offset", 47)),
    ("3:47", Bound("offset", 3), Bound("offset", 47)),
    ("+5", Bound("after_start", 5), Bound("end")),
    ("-5", Bound("before_end", 5), Bound("end")),
    ("@1700000000000", Bound("time", NOW), Bound("end")),
    ("@1700000000", Bound("time", NOW), Bound("end")),
    ("@-48h:-24h", Bound("time", NOW - 48 * H), Bound("time", NOW - 24 * H)),
    ("@-1m:end", Bound("time", NOW - 60_000), Bound("end")),
    ("@:-1h", Bound("start"), Bound("time", NOW - H)),
    ("@2022-02-14:1h", Bound("time", 1644796800000), Bound("time", 1644796800000 + H)),
    ("@2024-05-01T12:00:00Z:2024-05-01T13:30:00.250Z", Bound("time", 1714564800000),
     Bound("time", 1714570200250)),
    ("@2024-05-01T12:00:00+02:00", Bound("time", 1714557600000), Bound("end")),
    ("@1m3ms", Bound("time", NOW + 60_003), Bound("end")),
    ("s@1700000000000", Bound("time", NOW), Bound("end")),
    ("e@-2d", Bound("start"), Bound("time", NOW - 48 * H)),
])
def test_the_grammar(text, start, end):
    spec = parse_offset_spec(text, now_ms=NOW)
    assert (spec.start, spec.end) == (start, end)


@pytest.mark.parametrize("text", ["", "abc", "5:x", "@123", "@yesterday", "+", "-x", "@2024-13-01", "1.5"])
def test_bad_specs_are_clear_errors(text):
    with pytest.raises(ConfigError) as e:
        parse_offset_spec(text, now_ms=NOW)
    assert "offset spec" in str(e.value)


def test_kcat_start_and_end_combine():
    spec = parse_offset_spec("s@1700000000000", now_ms=NOW).combine(parse_offset_spec("e@1700003600000"))
    assert (spec.start, spec.end) == (Bound("time", NOW), Bound("time", NOW + H))


def _all_rows(topics: set[str]) -> list[dict]:
    return list(iter_export_rows([FIXTURE], ExportFilter(topics=topics, include_control=True)))


def _brute(rows: list[dict], text: str) -> list[tuple]:
    """What the spec selects, by scanning every record (resolution rules written out independently)."""
    spec = parse_offset_spec(text, now_ms=NOW)
    out = []
    for p in sorted({r["partition"] for r in rows}):
        mine = [r for r in rows if r["partition"] == p]
        with PartitionLog(FIXTURE / f"{mine[0]['topic']}-{p}") as plog:  # offsets are relative to these
            start, end = plog.log_start_offset, plog.log_end_offset

        def at(b, start=start, end=end, mine=mine):
            if b.kind == "start":
                return start
            if b.kind == "end":
                return end
            if b.kind == "offset":
                return b.value
            if b.kind == "after_start":
                return min(start + b.value, end)
            if b.kind == "before_end":
                return max(end - b.value, start)
            return next((r["offset"] for r in mine if r["timestamp"] >= b.value), end)

        lo, hi = at(spec.start), at(spec.end)
        out += [(p, r["offset"]) for r in mine if lo <= r["offset"] < hi]
    return out


@pytest.mark.parametrize("topic", ["multi-segment", "transactions", "compacted", "log-append-time"])
def test_resolution_matches_a_scan_of_every_record(topic):
    rows = _all_rows({topic})
    assert rows
    stamps = sorted({r["timestamp"] for r in rows})
    mid = stamps[len(stamps) // 2]
    specs = ["start", "end", ":end", "2", "2:", ":7", "3:9", "+4", "-4", "-100000", "+100000", f"@{mid}",
             f"@:{mid}", f"@{stamps[0]}:{mid}", f"@{stamps[-1] + 1}", f"@{stamps[0] - 1}:{stamps[-1]}",
             f"s@{mid}", f"e@{mid}"]
    for text in specs:
        got = [(r["partition"], r["offset"]) for r in
               iter_export_rows([FIXTURE], ExportFilter(topics={topic}, include_control=True,
                                                        offset_spec=parse_offset_spec(text, now_ms=NOW)))]
        assert got == _brute(rows, text), text


def test_export_cli_takes_rpk_offsets(tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(FIXTURE, data)
    out = tmp_path / "out.jsonl"
    assert main(["export", str(data), "--topics", "multi-segment", "-o", "-3", "--out", str(out),
                 "--no-progress"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["partition"], r["offset"]) for r in rows) == [(p, o) for p in (0, 1) for o in (147, 148, 149)]
    assert main(["export", str(data), "--topics", "multi-segment", "-o", "s@2000-01-01", "-o", "e@2000-01-02",
                 "--out", str(out), "--no-progress"]) == 0
    assert out.read_text() == ""  # every record is later than that day: the range resolves to the log end
    assert main(["export", str(data), "-o", "5:x", "--out", str(out), "--no-progress"]) == 1
    assert "offset spec '5:x'" in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["50:53", "-2", "+3", ":46", "start", "end", "@1750000102000:1750000112000",
                                  "52:52", "53:50"])
def test_dump_takes_rpk_offsets_within_a_file(spec, capsys):
    """``dump -o``: the batches holding offsets in the range, and with --deep only those records; the same as
    the full dump cut to the range the spec resolves to against the file's first and next offsets. An empty range
    (52:52, 53:50) holds no offset, so no batch (it printed the batch holding 52, 53)."""
    from kafkalog.storage.files.segment import Segment
    from kafkalog.storage.records.dump import dump_log

    log = FIXTURE / "multi-segment-0" / "00000000000000000044.log"
    full = [d for d in dump_log(log, deep=True) if d.get("event") is None]
    with Segment(log, 44) as seg:
        def by_time(ms, seg=seg):
            found = seg.find_offset_by_timestamp(ms)
            return None if found is None else found[1]
        lo, hi = parse_offset_spec(spec).resolve(44, seg.read_next_offset(), by_time)
    want = [(d["baseOffset"], [r["offset"] for r in d["records"] if lo <= r["offset"] < hi]) for d in full
            if lo < hi and d["lastOffset"] >= lo and d["baseOffset"] < hi]
    assert main(["dump", str(log), "-o", spec, "--json", "--deep"]) == 0
    got = [(d["baseOffset"], [r["offset"] for r in d["records"]]) for d in
           map(json.loads, capsys.readouterr().out.splitlines()) if d.get("event") is None]
    assert got == want
    assert spec in ("end", "52:52", "53:50") or got


def test_read_committed_export_is_what_the_producers_committed():
    """``export --read-committed`` on the real 4.3.1 broker's transactions topic: exactly the records the
    capture's producers wrote outside a transaction or in a committed one (its ledger, expected.jsonl), in
    offset order; no control records, nothing of an aborted transaction."""
    ledger = [json.loads(line) for line in (FIXTURE.parent / "expected.jsonl").read_text().splitlines()]
    mine = [r for r in ledger if r["topic"] == "transactions"]
    assert {r["transaction"] for r in mine} == {None, "committed", "aborted"}
    want = sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in mine if r["transaction"] != "aborted")
    rows = list(iter_export_rows([FIXTURE], ExportFilter(topics={"transactions"}, read_committed=True)))
    import base64

    def b64(v):
        return None if v is None else base64.b64encode(v).decode()

    got = sorted((r["partition"], r["offset"], b64(r["key"]), b64(r["value"])) for r in rows)
    assert got == want
    every = list(iter_export_rows([FIXTURE], ExportFilter(topics={"transactions"}, include_control=True)))
    assert any(r["isControl"] for r in every) and not any(r["isControl"] for r in rows)
    txn_only = list(iter_export_rows([FIXTURE], ExportFilter(topics={"transactions"}, transactional_only=True)))
    assert txn_only and all(r["isTransactional"] for r in txn_only)
    pid = txn_only[0]["producerId"]
    by_pid = list(iter_export_rows([FIXTURE], ExportFilter(topics={"transactions"}, producer_ids={pid})))
    assert by_pid and {r["producerId"] for r in by_pid} == {pid}


def test_read_committed_stops_at_an_open_transaction():
    """The broker SIGKILLed inside a transaction (fixtures/kafka-4.3.1-kraft-killed): its 8 records are in the
    log but the transaction is open, so the last stable offset is its first offset and a read_committed consumer
    reads nothing."""
    killed = FIXTURE.parents[1] / "kafka-4.3.1-kraft-killed" / "data"
    every = list(iter_export_rows([killed], ExportFilter(topics={"open-transaction"})))
    assert len(every) == 8 and all(r["isTransactional"] for r in every)
    assert list(iter_export_rows([killed], ExportFilter(topics={"open-transaction"}, read_committed=True))) == []


@pytest.mark.parametrize("command", ["export", "dump", "diff"])
def test_time_option_is_the_time_part_of_the_grammar(command, tmp_path, capsys):
    """``--time T1:T2`` (rpk's time range as its own option) selects exactly what ``-o @T1:T2`` selects; a bad
    one is a usage error naming the part it cannot read."""
    data = FIXTURE
    log = data / "multi-segment-0" / "00000000000000000044.log"
    t1, t2 = "2025-06-15T15:08:20Z", "1750000130000"

    def run(*extra: str) -> str:
        if command == "export":
            argv = ["export", str(data), "--topics", "multi-segment", "--out", "-", "--no-progress", *extra]
        elif command == "dump":
            argv = ["dump", str(log), "--deep", "--json", *extra]
        else:
            argv = ["diff", str(data), str(data), "--json", *extra]
        assert main(argv) == 0
        return capsys.readouterr().out

    by_time, by_offset, everything = run("--time", f"{t1}:{t2}"), run("-o", f"@{t1}:{t2}"), run()
    assert by_time == by_offset and by_time != everything or command == "diff" and by_time == by_offset
    if command != "diff":
        assert by_time.strip() and len(by_time) < len(everything)
    assert run("--time=-48h:-24h") == run("-o", "@-48h:-24h")  # relative to now (nothing in the fixture)
    with pytest.raises(SystemExit) as e:
        main([command, str(log if command == "dump" else data), *(["--out", "-"] if command == "export" else []),
              *([str(data)] if command == "diff" else []), "--time", "5:x"])
    assert e.value.code == 2 and "'5' is neither epoch milliseconds" in capsys.readouterr().err
