"""``kafkalog dump`` and the library function behind it (storage/records/dump.py)."""

from __future__ import annotations

import base64
import json

import pytest
from builders import every_kind_of_batch

from kafkalog.storage.records import build_batch
from kafkalog.storage.records.dump import dump_log
from kafkalog.tools.cli import main

TS = 1_700_000_000_000
BATCH_KEYS = {"file", "baseOffset", "lastOffset", "count", "position", "size", "magic", "codec", "crc", "isValid",
              "timestampType", "maxTimestamp", "producerId", "producerEpoch", "baseSequence", "partitionLeaderEpoch",
              "isTransactional", "isControl", "deleteHorizonMs"}


@pytest.fixture
def segment(tmp_path):
    parts = every_kind_of_batch(TS)
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(b"".join(parts))
    return p, parts


def run(capsys, *argv):
    rc = main(["dump", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_library_dump_log(segment):
    path, parts = segment
    items = list(dump_log(path, deep=True))
    assert len(items) == len(parts)
    assert all(BATCH_KEYS <= set(d) and d["isValid"] for d in items)
    positions = [sum(map(len, parts[:i])) for i in range(len(parts))]
    assert [d["position"] for d in items] == positions
    assert [d["baseOffset"] for d in items] == [0, 2, 3, 4, 5, 6, 8]
    assert [d["codec"] for d in items] == ["none", "zstd", "none", "none", "none", "gzip", "none"]
    assert items[0]["records"][0]["headers"] == [("h", b"x"), ("n", None)]
    assert items[2]["records"][0]["controlType"] == "COMMIT" and items[2]["records"][0]["coordinatorEpoch"] == 7
    assert items[3]["records"][0]["controlType"] == "LEADER_CHANGE"
    assert items[4]["deleteHorizonMs"] == TS + 1000 and items[1]["isTransactional"]
    assert items[5]["magic"] == 1 and [r["offset"] for r in items[5]["records"]] == [6, 7]


def test_json_output(segment, capsys):
    path, parts = segment
    rc, out, err = run(capsys, "--json", "--deep", path)
    assert rc == 0, err
    objs = [json.loads(line) for line in out.splitlines()]
    assert len(objs) == len(parts)
    for o in objs:
        assert BATCH_KEYS <= set(o) and o["file"] == str(path)
        assert o["codec"] in {"none", "gzip", "snappy", "lz4", "zstd"}
    r0 = objs[0]["records"][0]
    assert set(r0) >= {"offset", "timestamp", "key", "value", "headers"}
    assert base64.b64decode(r0["key"]) == b"k" and base64.b64decode(r0["value"]) == b"hello"
    assert r0["headers"] == [{"key": "h", "value": base64.b64encode(b"x").decode()}, {"key": "n", "value": None}]
    assert objs[0]["records"][1]["key"] is None and objs[0]["records"][1]["value"] is None
    assert objs[2]["records"][0]["controlType"] == "COMMIT"
    rc, out, _ = run(capsys, "--json", "--deep", "--payload", "hex", path)
    assert json.loads(out.splitlines()[0])["records"][0]["value"] == b"hello".hex()
    rc, out, _ = run(capsys, "--json", path)  # shallow: no records
    assert "records" not in json.loads(out.splitlines()[0])


def test_human_output_mirrors_dump_log_segments(segment, capsys):
    path, _ = segment
    rc, out, _ = run(capsys, "--deep", "--print-data-log", path)
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == f"Dumping {path}" and lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 "
                               "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false "
                               "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 "
                               f"CreateTime: {TS + 1} size: ")
    crc = next(iter(dump_log(path)))["crc"]
    assert lines[2].endswith(f"magic: 2 compresscodec: none crc: {crc} isvalid: true")
    assert lines[3] == (f"| offset: 0 CreateTime: {TS} keySize: 1 valueSize: 5 sequence: -1 headerKeys: [h,n] "
                        "key: k payload: hello")
    assert lines[4] == f"| offset: 1 CreateTime: {TS + 1} keySize: -1 valueSize: -1 sequence: -1 headerKeys: []"
    assert any("endTxnMarker: COMMIT coordinatorEpoch: 7" in x for x in lines)
    assert any("controlType: LEADER_CHANGE(2)" in x for x in lines)
    assert any(f"deleteHorizonMs: OptionalLong[{TS + 1000}]" in x for x in lines)
    assert any(x.startswith("offset: 7 position: ") and "magic: 1 compresscodec: gzip" in x for x in lines)
    assert any(x.startswith("offset: 8 ") and "NoTimestampType: -1" in x for x in lines)
    assert any(x.startswith("| offset: 6 CreateTime: ") and "isValid: true crc: " in x and " payload: a" in x
               for x in lines)


def test_corrupt_batch_exit_1_with_position_and_keeps_going(segment, capsys):
    path, parts = segment
    data = bytearray(path.read_bytes())
    data[len(parts[0]) + 70] ^= 0xFF  # inside the second batch (CRC-covered)
    path.write_bytes(bytes(data))
    rc, out, err = run(capsys, "--json", path)
    assert rc == 1
    objs = [json.loads(line) for line in out.splitlines()]
    assert len(objs) == len(parts)  # every batch still reported
    assert [o["isValid"] for o in objs].count(False) == 1 and objs[1]["isValid"] is False
    assert f"byte {len(parts[0])}" in err and "invalid CRC" in err


def test_torn_tail_and_partial_batch_reported(segment, capsys):
    path, parts = segment
    full = b"".join(parts)
    path.write_bytes(full + parts[0][:30])
    rc, out, err = run(capsys, path)
    assert rc == 1 and "Found 30 invalid bytes at the end of 00000000000000000000.log" in out
    assert f"byte {len(full)}" in err and "partial batch" in err
    path.write_bytes(full + b"\x00" * 5)
    rc, out, _ = run(capsys, "--json", path)
    last = json.loads(out.splitlines()[-1])
    assert rc == 1 and last["event"] == "invalidBytes" and last["reason"] == "torn tail"
    assert last["position"] == len(full) and last["bytes"] == 5
    rc, out, _ = run(capsys, "--json", "--max-bytes", str(len(full) + 3), path)  # cut: not reported
    assert rc == 0 and "invalidBytes" not in out


def test_framing_error_and_bad_records(tmp_path, capsys):
    p = tmp_path / "00000000000000000100.log"
    good = build_batch([(100, TS, b"k", b"v")])
    p.write_bytes(good + b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x00" * 20)
    rc, out, err = run(capsys, "--json", p)
    assert rc == 1 and f"byte {len(good)}" in err and "smaller than minimum record overhead" in err
    assert json.loads(out.splitlines()[-1])["event"] == "corrupt"
    # a batch whose records do not parse (valid CRC): reported with the position, exit 1
    bad = build_batch([], compressed_payload=b"\x0e\x00\x00", records_count=1)
    p.write_bytes(bad)
    rc, out, err = run(capsys, "--json", "--deep", p)
    o = json.loads(out)
    assert rc == 1 and o["isValid"] and "error" in o and o["errorPosition"] == 61
    assert "byte 61" in err


def test_usage_errors_exit_2(segment, capsys):
    path, _ = segment
    for argv in (["dump"], ["dump", "--max-bytes", "-3", str(path)], ["dump", "--payload", "rot13", str(path)],
                 ["dump", "--nope", str(path)]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
    capsys.readouterr()


def test_missing_and_unknown_files(tmp_path, capsys, segment):
    path, _ = segment
    rc, out, err = run(capsys, tmp_path / "00000000000000000009.log", path)
    assert rc == 1 and f"{tmp_path / '00000000000000000009.log'}: no such file or directory" in err  # the contract
    assert "Log starting offset: 0" in out
    other = tmp_path / "notes.txt"
    other.write_text("x")
    rc, _, err = run(capsys, other)
    assert rc == 0 and "Ignoring unknown file" in err


def test_empty_file_and_checkpoint_header(tmp_path, capsys):
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(b"")
    rc, out, _ = run(capsys, p)
    assert rc == 0 and out.splitlines() == [f"Dumping {p}", "Log starting offset: 0"]
    snap = tmp_path / "00000000000000000042-0000000003.checkpoint"
    snap.write_bytes(build_batch([(0, TS, None, b"x")]))
    rc, out, _ = run(capsys, snap)
    assert rc == 0 and "Snapshot end offset: 42, epoch: 3" in out


def test_help_teaches(capsys):
    with pytest.raises(SystemExit) as e:
        main(["dump", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "Exit codes" in out and "--json" in out and "--deep" in out


def test_output_helpers():
    import io

    from kafkalog.tools.output import JsonLines, progress, render_bytes, render_headers, render_table

    assert render_bytes(None) is None and render_bytes(b"\x00\xff") == "AP8="
    assert render_bytes(b"caf\xc3\xa9\xff", "utf8") == "caf\u00e9\\xff" and render_bytes(b"\x01", "hex") == "01"
    with pytest.raises(ValueError):
        render_bytes(b"x", "rot13")
    assert render_headers([("a", None), ("b", b"1")], "hex") == [{"key": "a", "value": None},
                                                                 {"key": "b", "value": "31"}]
    s = io.StringIO()
    JsonLines(s).write_all([{"k": b"\x01", "t": (1, 2)}, {"u": "é"}])
    assert s.getvalue() == '{"k":"AQ==","t":[1,2]}\n{"u":"é"}\n'
    s = io.StringIO()
    render_table([{"name": "a", "n": 5}, {"name": "bbb", "n": None}], ["name", "n"], s)
    assert s.getvalue().splitlines() == ["NAME  N", "a     5", "bbb   -"]  # rpk-style UPPER-CASE headers
    with progress(10, "x", enabled=False) as bar:  # not a TTY: a no-op
        bar.advance(3)
    with progress(10, "x", enabled=True) as bar:  # rich on stderr
        bar.advance(10)


def test_directories_apply_the_path_contract_and_never_exit_0_over_a_gap(tmp_path, capsys):
    """Issue 34: `dump` printed `Ignoring unknown file` with exit 0 for a missing path, an empty dir, a docs
    folder and the parent of a data dir, and over a partition dir whose middle segment is torn, whose closed
    segment fails its CRC or that has no .log files. A partition dir is dumped as one log (its segments' lines
    as kafka-dump-log.sh prints each file), a data dir partition by partition; a gap is an error with the file
    and byte."""
    import shutil

    from damage import FIXTURES, LOSSES

    fixture = FIXTURES / "kafka-4.3.1-kraft" / "data"
    (tmp_path / "empty").mkdir()
    for p, says in ((tmp_path / "missing", "no such file or directory"), (tmp_path / "empty", "empty directory")):
        rc, out, err = run(capsys, p)
        assert rc == 1 and f"kafkalog dump: {p}: {says}" in err and "Ignoring" not in err and out == ""

    pdir = fixture / "multi-segment-0"
    rc, out, err = run(capsys, pdir)
    files = sorted(pdir.glob("*.log"))
    assert rc == 0 and err == "" and len(files) > 1
    by_file = "".join(run(capsys, f)[1] for f in files)
    assert out == by_file  # the same lines as each file dumped on its own
    rc, out, _ = run(capsys, fixture)
    assert rc == 0 and f"Dumping {files[0]}" in out and "Dumping " + str(fixture / "codec-none-0") in out

    for damage, says in (("torn_middle", "not a complete batch; the records from here up to offset"),
                         ("crc_closed", "has an invalid CRC"),
                         ("no_logs", "no .log segment file")):
        data = tmp_path / damage
        shutil.copytree(fixture, data)
        assert LOSSES[damage](data)
        rc, out, err = run(capsys, data / "multi-segment-0")
        assert rc == 1 and says in err, (damage, err)
        assert f"kafkalog dump: {data / 'multi-segment-0'}" in err and ("byte " in err or damage == "no_logs")
        if damage == "no_logs":
            assert "offsets 0..149 are gone (replication-offset-checkpoint holds the high watermark 150" in err
        assert run(capsys, data)[0] == 1


def test_a_torn_tail_of_the_active_segment_ends_the_log(tmp_path, capsys):
    """In a partition dir the torn end of the last segment is a write the broker had not finished: printed as
    kafka-dump-log.sh prints it, not an error; the same bytes at the end of a lone file are reported (exit 1)."""
    import shutil

    from damage import FIXTURES, torn_tail

    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", data)
    assert torn_tail(data)
    rc, out, err = run(capsys, data / "multi-segment-0")
    assert rc == 0 and "invalid bytes at the end of" in out and err == ""
    rc, out, err = run(capsys, sorted((data / "multi-segment-0").glob("*.log"))[-1])
    assert rc == 1 and "invalid bytes at the end" in err
