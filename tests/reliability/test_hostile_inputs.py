"""Hostile names and hostile filesystems (issue 17, found 1-4 and 6-7): every command either does its job or
exits 1 with the file and the reason, within seconds, and never writes outside the data dir it was given.

Each test prints what it tried and what survived (``pytest -s`` shows the table).

* path traversal through a topic name: ``import`` of rows whose ``topic`` is ``../../pwned``, ``import
  --topic``, ``append DIR ../escape-0``, ``migrate --topic ../x``, a partition dir that is a symlink out of the
  data dir; and :func:`validate_topic` is Kafka's ``Topic.validate``;
* special files where a file is expected: ``dump`` of a FIFO ``.log``/index/checkpoint, a FIFO ``.lock``
  (``verify`` reports it, ``repair``/``retain`` refuse it), a FIFO index under ``flush``, a FIFO KRaft snapshot
  under ``repair --dry-run``;
* symlink loops and symlinks out of the dir under ``verify``, ``describe``, ``repair --dry-run``, ``export``;
* a v2 batch shorter than its 61-byte header under ``dump``.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.storage.errors import LogDirError
from kafkalog.storage.log.topic_partition import (
    TOPIC_MAX_LENGTH,
    partition_dir_name,
    partition_path,
    validate_topic,
)

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "kafka-4.3.1-kraft" / "data"
TIMEOUT = 60  # a hang is a failure: every run here finishes in a few seconds
INTERNAL = "internal error"


def kafkalog(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", *map(str, args)], capture_output=True,
                              text=True, errors="replace", timeout=TIMEOUT, cwd=cwd)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kafkalog {' '.join(map(str, args))} did not finish within {TIMEOUT}s (a hang)")


def report(title: str, rows: list[tuple[str, str]]) -> None:
    print(f"\n{title}")
    for tried, survived in rows:
        print(f"  {tried:<60} {survived}")


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def data(tmp_path) -> Path:
    """A copy of a real broker's data dir, two levels below ``tmp_path`` (so ``../..`` stays in tmp_path)."""
    d = tmp_path / "a" / "b" / "data"
    shutil.copytree(FIXTURE, d, symlinks=True)
    return d


# ------------------------------------------------------------------------------------------------- names
@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "x" * (TOPIC_MAX_LENGTH + 1), "t\nx", "é",
                                  "a b", "..\\x", "t\x00"])
def test_illegal_topics_are_refused_like_kafka(name):
    with pytest.raises(LogDirError, match="[Tt]opic name"):
        validate_topic(name)
    with pytest.raises(LogDirError):
        partition_dir_name(name, 0)


@pytest.mark.parametrize("name", ["a", "orders.v2", "__consumer_offsets", "A-b_c.9", "x" * TOPIC_MAX_LENGTH, "..a"])
def test_legal_topics_are_accepted(name):
    assert validate_topic(name) == name
    assert partition_dir_name(name, 7) == f"{name}-7"


@pytest.mark.parametrize("part", [-1, 1 << 31, "0", None, True])
def test_partition_numbers_are_checked(part):
    with pytest.raises(LogDirError):
        partition_dir_name("t", part)


def test_partition_path_refuses_symlinks_out(tmp_path):
    root, outside = tmp_path / "data", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "t-0").symlink_to(outside)
    with pytest.raises(LogDirError, match="symlink"):
        partition_path(root, "t", 0)
    (root / "f-0").write_text("not a dir")
    with pytest.raises(LogDirError, match="not a directory"):
        partition_path(root, "f", 0)
    assert partition_path(root, "u", 3) == root / "u-3"


# ------------------------------------------------------------------------------------------ path traversal
def _export(data: Path, tmp_path: Path, topic: str) -> Path:
    out = tmp_path / "export.jsonl"
    r = kafkalog("export", data, "--topics", "compacted", "--out", out)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows
    evil = tmp_path / "evil.jsonl"
    evil.write_text("".join(json.dumps({**row, "topic": topic}) + "\n" for row in rows))
    return evil


@pytest.mark.parametrize("topic", ["../../pwned", "../pwned", "/tmp/pwned", "a/../../pwned", ".."])
def test_import_never_writes_outside_the_data_dir(tmp_path, data, topic):
    evil = _export(data, tmp_path, topic)
    target = tmp_path / "a" / "b" / "target"
    before = tree(tmp_path)
    r = kafkalog("import", evil, target)
    after = tree(tmp_path)
    report(f"import of rows with topic {topic!r}", [("exit code", str(r.returncode)), ("stderr", r.stderr.strip()),
                                                    ("new paths", str(sorted(after - before)))])
    assert r.returncode == 1 and INTERNAL not in r.stderr
    assert "evil.jsonl:1" in r.stderr and "Topic name" in r.stderr
    assert not [p for p in after - before if not p.startswith("a/b/target")], sorted(after - before)
    assert not list(target.glob("*-0")), "no partition dir may be created"


def test_import_topic_option_is_validated(tmp_path, data):
    evil = _export(data, tmp_path, "compacted")
    r = kafkalog("import", evil, tmp_path / "target", "--topic", "../up")
    assert r.returncode == 1 and "Topic name" in r.stderr, r.stderr
    assert not (tmp_path / "up-0").exists()


def test_append_never_writes_outside_the_data_dir(tmp_path, data):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"key": None, "value": "dmFsdWU=", "timestamp": 1}) + "\n")
    before = tree(tmp_path)
    rows = []
    for name in ("../escape-0", "../../escape-0", "a/b-0", "..-0"):
        r = kafkalog("append", data, name, "--from", src)
        rows.append((f"append DIR {name}", f"exit {r.returncode}: {r.stderr.strip()[:80]}"))
        assert r.returncode == 1 and INTERNAL not in r.stderr, r.stderr
    outside = tmp_path / "outside"
    outside.mkdir()
    (data / "link-0").symlink_to(outside)
    r = kafkalog("append", data, "link-0", "--from", src)
    rows.append(("append into a partition dir that is a symlink out", f"exit {r.returncode}"))
    report("append with hostile partition names", rows)
    assert r.returncode == 1 and "symlink" in r.stderr, r.stderr
    assert tree(tmp_path) - before == {"outside", "a/b/data/link-0"}  # only what the test itself made


_ROW = {"topic": "t", "partition": 0, "offset": 0, "timestamp": 1, "key": None, "value": None}
#: crafted export rows: a field of the wrong type or out of its Kafka width (each once made `import` exit 3, or
#: was taken silently), and the field the error must name
CRAFTED_ROWS = [
    ({"timestamp": "x"}, "timestamp"),
    ({"offset": 1 << 70}, "offset"),
    ({"producerEpoch": 70000}, "producerEpoch"),
    ({"sequence": "a"}, "sequence"),
    ({"leaderEpoch": 1 << 40}, "leaderEpoch"),
    ({"segment": 5}, "segment"),
    ({"timestampType": "x"}, "timestampType"),
    ({"isControl": "yes"}, "isControl"),
    ({"headers": [{"key": 5, "value": None}]}, "headers[0].key"),
    ({"headers": [1]}, "headers[0]"),
    ({"headers": 5}, "headers"),
    ({"partition": True}, "partition"),
]


@pytest.mark.parametrize("second", [{"offset": 1 << 62}, {"offset": 1, "timestamp": (1 << 63) - 1}])
def test_import_of_rows_one_batch_cannot_hold_is_refused(tmp_path, second):
    """Rows of one exported batch (same segment and position) whose offsets or timestamps are further apart than
    a batch's deltas allow: exit 1 naming the batch's first line, for the import and its dry run alike."""
    first = {**_ROW, "timestamp": -(1 << 63), "segment": "00000000000000000000.log", "position": 0}
    src = tmp_path / "rows.jsonl"
    src.write_text(json.dumps(first) + "\n" + json.dumps({**first, **second}) + "\n")
    for dry in ([], ["--dry-run"]):
        r = kafkalog("import", *dry, src, tmp_path / "target")
        assert r.returncode == 1 and INTERNAL not in r.stderr, r.stderr
        assert "rows.jsonl:1: cannot be written as a batch: record 1" in r.stderr, r.stderr
        assert not (tmp_path / "target").exists()


@pytest.mark.parametrize("change,field", CRAFTED_ROWS, ids=[f for _, f in CRAFTED_ROWS])
def test_import_of_a_crafted_row_names_the_field(tmp_path, change, field):
    src = tmp_path / "rows.jsonl"
    src.write_text(json.dumps(_ROW) + "\n" + json.dumps({**_ROW, "offset": 1, **change}) + "\n")
    r = kafkalog("import", src, tmp_path / "target")
    assert r.returncode == 1 and INTERNAL not in r.stderr, r.stderr
    assert "line 2" in r.stderr and repr(field) in r.stderr, r.stderr
    assert not (tmp_path / "target").exists()


@pytest.mark.parametrize("line,field", [
    ({"records": [{"offset": 1 << 70, "timestamp": 1}]}, "records[0].offset"),
    ({"baseOffset": "x", "records": []}, "baseOffset"),
    ({"records": [{"offset": 0, "timestamp": 1}], "producerEpoch": 70000}, "producerEpoch"),
    ({"records": [{"offset": 0, "timestamp": 1}], "baseSequence": 1 << 31}, "baseSequence"),
    ({"records": [{"offset": 0, "timestamp": 1}], "isControl": "yes"}, "isControl"),
    ({"records": [{"offset": 0, "timestamp": 1, "headers": [{"key": 5}]}]}, "records[0].headers[0].key"),
    ({"records": [{"offset": 0, "timestamp": 1, "headers": 5}]}, "records[0].headers"),
    ({"records": 5}, "records"),
    # each field fits, the batch cannot hold them (Kafka's widths: offset delta int32, timestamp delta int64)
    ({"baseOffset": (1 << 63) - 1, "records": [{"timestamp": 1}, {"timestamp": 2}]}, "record 1"),
    ({"records": [{"offset": 0, "timestamp": 1}, {"offset": 1 << 62, "timestamp": 2}]}, "record 1"),
    ({"records": [{"offset": 0, "timestamp": -(1 << 63)}, {"offset": 1, "timestamp": (1 << 63) - 1}]}, "record 1"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_append_of_a_crafted_line_names_the_field(tmp_path, data, line, field):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(line) + "\n")
    before = {p: p.read_bytes() for p in (data / "compacted-0").iterdir()}
    r = kafkalog("append", data, "compacted-0", "--from", src, "--keep-offsets")
    assert r.returncode == 1 and INTERNAL not in r.stderr, r.stderr
    assert "line 1" in r.stderr and (repr(field) in r.stderr or field in r.stderr), r.stderr
    assert {p: p.read_bytes() for p in (data / "compacted-0").iterdir()} == before


def test_migrate_topic_is_validated_before_anything_is_written(tmp_path, data):
    dst = tmp_path / "a" / "dst"
    before = tree(tmp_path)
    r = kafkalog("migrate", data / "compacted-0", dst, "--topic", "../x", "--no-backup")
    report("migrate --topic ../x", [("exit code", str(r.returncode)), ("stderr", r.stderr.strip())])
    assert r.returncode == 1 and INTERNAL not in r.stderr and "Topic name" in r.stderr, r.stderr
    assert tree(tmp_path) == before


# ------------------------------------------------------------------------------------------- special files
@pytest.mark.parametrize("name", ["00000000000000000000.log", "00000000000000000000.index",
                                  "00000000000000000000.timeindex", "00000000000000000000.txnindex",
                                  "00000000000000000010.snapshot", "leader-epoch-checkpoint",
                                  "00000000000000000036-0000000001.checkpoint", "partition.metadata"])
def test_dump_refuses_a_fifo_without_waiting(tmp_path, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    r = kafkalog("dump", fifo)
    assert r.returncode == 1 and INTERNAL not in r.stderr, r.stderr
    assert "FIFO" in r.stderr and name in r.stderr, r.stderr


def test_a_fifo_lock_is_reported_and_refused(data):
    (data / ".lock").unlink(missing_ok=True)
    os.mkfifo(data / ".lock")
    rows = []
    v = kafkalog("verify", data)
    rows.append(("verify", f"exit {v.returncode}"))
    assert v.returncode == 1 and "FIFO" in v.stdout and INTERNAL not in v.stderr, v.stdout + v.stderr
    before = {p: p.stat().st_mtime_ns for p in data.rglob("*") if p.is_file()}
    for cmd in (["repair", "--full"], ["retain"], ["flush"]):
        r = kafkalog(*cmd, data, "--no-backup")
        rows.append((" ".join(cmd), f"exit {r.returncode}: {r.stderr.strip()[:70]}"))
        assert INTERNAL not in r.stderr
        if r.returncode == 0:  # nothing to do: nothing may have been written either
            assert "0 operation(s)" in r.stdout, r.stdout
        else:
            assert "FIFO" in r.stderr, r.stderr
    report("a FIFO .lock", rows)
    assert {p: p.stat().st_mtime_ns for p in data.rglob("*") if p.is_file()} == before


def test_fifo_index_and_snapshot_under_mutating_commands(data):
    idx = data / "compacted-0" / "00000000000000000000.index"
    idx.unlink()
    os.mkfifo(idx)
    snap = sorted((data / "__cluster_metadata-0").glob("*.checkpoint"))[-1]
    snap.unlink()
    os.mkfifo(snap)
    rows = []
    for cmd in (["flush"], ["repair", "--dry-run"], ["retain", "--dry-run"], ["compact", "--dry-run"],
                ["verify"], ["describe"], ["reindex", "--dry-run"]):
        r = kafkalog(*cmd, data)
        rows.append((" ".join(cmd), f"exit {r.returncode}"))
        assert r.returncode in (0, 1) and INTERNAL not in r.stderr, (cmd, r.stderr)
    report("FIFO index and KRaft snapshot", rows)
    assert idx.is_fifo() and snap.is_fifo()  # special files are never replaced or opened


# ------------------------------------------------------------------------------------------- symlinks
def test_symlink_loops_and_links_out_give_findings_not_crashes(data):
    (data / "loop1").symlink_to("loop2")
    (data / "loop2").symlink_to("loop1")
    (data / "compacted-0" / "self").symlink_to("self")
    (data / "compacted-0" / "up").symlink_to("../../")
    (data / "looped-0").symlink_to("looped-0")
    rows = []
    for cmd in (["verify"], ["describe"], ["repair", "--dry-run"], ["export", "--out", os.devnull],
                ["retain", "--dry-run"], ["compact", "--dry-run"], ["verify", "--deep"]):
        r = kafkalog(*cmd, data)
        rows.append((" ".join(cmd), f"exit {r.returncode}"))
        assert r.returncode in (0, 1) and INTERNAL not in r.stderr and "Traceback" not in r.stderr, (cmd, r.stderr)
    v = kafkalog("verify", data)
    assert "looping symlink" in v.stdout and "symlink leaving the partition directory" in v.stdout, v.stdout
    report("symlink loops and links out", rows)


# ------------------------------------------------------------------------------------------- short batches
def test_dump_of_a_v2_batch_shorter_than_its_header(tmp_path):
    body = struct.pack(">iB", 0, 2) + b"\0" * 35
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(struct.pack(">qi", 0, len(body)) + body + b"\0" * 30)
    for args in ([], ["--deep"], ["--json"], ["--deep", "--json"]):
        r = kafkalog("dump", *args, seg)
        assert r.returncode == 1 and INTERNAL not in r.stderr, r.stderr
        assert "smaller than the 61-byte v2 header" in r.stderr and "byte 0" in r.stderr, r.stderr


# ------------------------------------------------------------------------------------------- odd dir names
def test_partition_dirs_with_unwritable_names_are_not_partitions(data):
    """A dir named with a newline or invalid UTF-8 cannot come from a broker (topics are validated at creation)
    and cannot be written into a checkpoint line: it is reported, never loaded or checkpointed."""
    for raw in (b"ba\nd-0", b"\xffx-0", b"sp ace-0"):
        d = os.path.join(os.fsencode(data), raw)
        os.mkdir(d)
        for f in (data / "compacted-0").iterdir():
            shutil.copy(f, os.path.join(d, os.fsencode(f.name)))
    rows = []
    for cmd in (["repair", "--full", "--no-backup"], ["flush", "--no-backup"], ["retain", "--dry-run"], ["verify"],
                ["describe"], ["export", "--out", os.devnull]):
        r = kafkalog(*cmd, data)
        rows.append((" ".join(cmd), f"exit {r.returncode}"))
        assert r.returncode in (0, 1) and INTERNAL not in r.stderr, (cmd, r.stderr)
    report("partition dirs named with a newline, invalid UTF-8, a space", rows)
    from kafkalog.storage.files.checkpoints import read_offset_checkpoint

    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        topics = {t for t, _ in read_offset_checkpoint(data / name).to_dict()}
        assert all(t.isprintable() and " " not in t for t in topics), topics



@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_a_non_utf8_name_prints_under_a_strict_stdout(data, encoding):
    """Under a UTF-8 locale Python's stdout is strict (PYTHONIOENCODING makes the same): a dir name that is not
    UTF-8 printed by a table was a UnicodeEncodeError, exit 3 and a half-written table. Now its bytes are printed
    as they are (a UTF-8 stdout) or escaped (another encoding)."""
    raw = b"\xffx-0"
    os.mkdir(os.path.join(os.fsencode(data), raw))
    env = {**os.environ, "PYTHONIOENCODING": encoding}
    for cmd in (["verify", "--no-progress"], ["doctor", "--no-progress"], ["describe"]):
        r = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", *cmd, str(data)], capture_output=True,
                           timeout=TIMEOUT, env=env)
        assert r.returncode in (0, 1, 4) and INTERNAL.encode() not in r.stderr, (cmd, r.stderr[-500:])
        if cmd[0] == "verify":
            assert (raw if encoding == "utf-8" else b"\\udcffx-0") in r.stdout, r.stdout[-500:]

@pytest.mark.parametrize("kind", ["dir", "fifo"])
def test_a_segment_name_that_is_not_a_file_is_an_error_and_never_written_over(tmp_path, kind):
    pdir = tmp_path / "data" / "t-0"
    pdir.mkdir(parents=True)
    seg = pdir / "00000000000000000000.log"
    seg.mkdir() if kind == "dir" else os.mkfifo(seg)
    v = kafkalog("verify", pdir)
    assert v.returncode == 1 and "with the name of a Kafka file" in v.stdout, v.stdout
    data = tmp_path / "data"
    for cmd, codes in ((["repair", "--no-backup"], {1}), (["repair", "--dry-run"], {1}),
                       (["flush", "--no-backup"], {0, 1}), (["reindex", "--no-backup"], {0, 1})):
        r = kafkalog(cmd[0], data, *cmd[1:])
        assert r.returncode in codes and INTERNAL not in r.stderr, (cmd, r.stdout, r.stderr)
    assert seg.is_dir() if kind == "dir" else seg.is_fifo()
    assert sorted(p.name for p in pdir.iterdir()) == [seg.name], "nothing may have been written"


def test_an_unfinished_swap_is_said_never_read_as_a_shorter_log(data):
    """After a crash mid-replacement the `.log` files alone miss records (issue 17, found 8): readers say so, and
    export refuses rather than export a shortened log; repair (the broker's load) completes the swap."""
    pdir = data / "compacted-0"
    full = kafkalog("export", data, "--topics", "compacted", "--out", "-")
    assert full.returncode == 0
    records = len(full.stdout.splitlines())
    seg = max(pdir.glob("*.log"), key=lambda p: p.stat().st_size)
    seg.rename(seg.with_name(seg.name + ".swap"))
    e = kafkalog("export", data, "--topics", "compacted", "--out", "-")
    assert e.returncode == 1 and "unfinished segment replacement" in e.stderr and not e.stdout, e.stderr
    d = kafkalog("describe", data)
    assert "unfinished segment replacement" in d.stdout and "kafkalog repair" in d.stdout, d.stdout
    v = kafkalog("verify", data)
    assert ".swap" in v.stdout
    assert kafkalog("repair", data, "--no-backup").returncode == 1
    again = kafkalog("export", data, "--topics", "compacted", "--out", "-")
    assert again.returncode == 0 and len(again.stdout.splitlines()) == records


def test_a_full_disk_error_names_the_file():
    """ENOSPC raised by a write or flush carries no file name by itself: the write seam adds it, so the one-line
    error says which file could not be written (issue 17, found 9)."""
    from kafkalog.storage.io import fileops

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    f = fileops.AppendFile("/dev/full")
    with pytest.raises(OSError) as e:
        f.write(b"x" * (1 << 20))
        f.flush()
    assert e.value.filename == "/dev/full" and e.value.errno == 28


def test_a_huge_sparse_txnindex_is_refused_by_size_not_read(data):
    """A 4 GiB sparse ``.txnindex`` (126 M zero entries) beside a 4 KB segment: verify and repair --dry-run
    answer within seconds (the index holds one entry per abort marker, so its size is bounded by the segment's)
    instead of reading it entry by entry; repair rebuilds it from the log."""
    import time

    txn = data / "transactions-0" / f"{0:020d}.txnindex"
    os.truncate(txn, 4 << 30)
    rows = []
    for cmd in (("verify", data), ("repair", data, "--dry-run")):
        t0 = time.monotonic()
        r = kafkalog(*cmd)
        took = time.monotonic() - t0
        rows.append((" ".join(map(str, cmd[:1] + cmd[2:])), f"exit {r.returncode} in {took:.1f}s"))
        assert INTERNAL not in r.stderr and took < 30, (cmd, took, r.stderr)
        assert "more than the" in r.stdout + r.stderr, r.stdout[-2000:]
    r = kafkalog("repair", data, "--no-backup")
    rows.append(("repair", f"exit {r.returncode}; txnindex now {txn.stat().st_size} bytes"))
    report("4 GiB sparse .txnindex", rows)
    assert r.returncode == 1 and "applied" in r.stdout and txn.stat().st_size < 4096, r.stderr  # 1: repaired
    assert kafkalog("repair", data, "--dry-run").returncode == 0  # healthy now


def test_a_zero_filled_txnindex_is_reported_and_reindex_rebuilds_it(data):
    """Zero-filled entries pass Kafka's own sanity check for a base-0 segment (the broker keeps them and would
    report bogus aborted transactions); verify reports them and ``reindex`` rebuilds the file from the log."""
    txn = data / "transactions-0" / f"{0:020d}.txnindex"
    good = txn.read_bytes()
    txn.write_bytes(bytes(len(good)))
    r = kafkalog("verify", data)
    assert r.returncode == 1 and "txnindex" in r.stdout, r.stdout[-2000:]
    r = kafkalog("reindex", data, "--no-backup")
    assert r.returncode == 0, r.stderr
    assert txn.read_bytes() == good


def _max_rss_mb(*args) -> tuple[int, float]:
    """Run ``kafkalog ARGS`` in a fresh wrapper process and return (exit code, the child's peak RSS in MB)."""
    code = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "kafkalog.tools.cli", *map(str, args)],
                         capture_output=True, text=True, timeout=300).stdout.split()
    return int(out[0]), int(out[1]) / 1024


def test_a_record_count_bomb_is_decoded_in_bounded_memory(tmp_path):
    """One valid zstd batch of 400,000 empty records (about 300 KB on disk, 2.8 MB decompressed): ``verify
    --deep``, ``export``, ``dump --deep`` (text and JSON) and ``convert`` decode it a chunk of records at a time, so their memory does not grow with the
    record count (before: about 2.5x the peak measured here, and 1.3 GiB for 5 M records)."""
    from kafkalog.storage.records import build_batch

    pdir = tmp_path / "bomb-0"
    pdir.mkdir()
    n = 400_000
    (pdir / f"{0:020d}.log").write_bytes(build_batch([(i, 1000, None, None, ()) for i in range(n)], base_offset=0,
                                                      codec=4))
    rc, idle = _max_rss_mb("verify", tmp_path / "nosuch")
    rows = [("a kafkalog process doing nothing", f"{idle:.0f} MB")]
    log = pdir / f"{0:020d}.log"
    for args in (("verify", "--deep", pdir), ("export", pdir, "--out", tmp_path / "out.jsonl"),
                 ("dump", "--deep", "--print-data-log", log), ("dump", "--deep", "--json", log),
                 ("convert", pdir, "--codec", "lz4", "--no-backup")):  # the last: it rewrites the segment
        rc, mb = _max_rss_mb(*args)
        rows.append((" ".join(map(str, args[:2])), f"exit {rc}, peak {mb:.0f} MB"))
        assert rc == 0 and mb < idle + 60, rows
    report(f"record-count bomb ({n:,d} records in one batch)", rows)
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == n


FIXTURES = FIXTURE.parents[1]


def _findings(stdout: str) -> list[dict]:
    """The findings of `verify --json` (one JSON object per line)."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("damage", ["flipped byte", "torn tail", "magic 3"])
def test_a_damaged_bootstrap_checkpoint_is_an_error(tmp_path, damage):
    """``bootstrap.checkpoint`` (written by kafka-storage format, read by every KRaft node at start-up without
    a CRC check) was ignored by verify: a damaged one is now an error naming the file and the byte."""
    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", data)
    boot = data / "bootstrap.checkpoint"
    raw = bytearray(boot.read_bytes())
    if damage == "flipped byte":
        raw[80] ^= 0xFF
    elif damage == "torn tail":
        raw = raw[:-5]
    else:
        raw[16] = 3
    boot.write_bytes(bytes(raw))
    r = kafkalog("verify", str(data), "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    found = [f for f in _findings(r.stdout) if f["file"].endswith("bootstrap.checkpoint")]
    assert found and all(f["severity"] == "error" for f in found), r.stdout
    assert "bootstrap metadata" in found[0]["message"]
    if damage == "magic 3":
        assert found[0]["position"] == 0 and "magic 3" in found[0]["message"]


def test_a_kraft_snapshot_with_magic_3_is_an_error(tmp_path):
    """A KRaft snapshot holds v2 batches only (Kafka's ByteBufferLogInputStream: "Invalid magic found in
    record"); verify passed one with magic 3 (the magic byte is outside the CRC)."""
    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-3.9.2-kraft" / "data", data)
    snap = sorted((data / "__cluster_metadata-0").glob("*.checkpoint"))[0]
    raw = bytearray(snap.read_bytes())
    raw[16] = 3
    snap.write_bytes(bytes(raw))
    r = kafkalog("verify", str(data), "--json")
    assert r.returncode == 1
    found = [f for f in _findings(r.stdout) if f["file"] == str(snap)]
    assert [(f["severity"], f["position"]) for f in found] == [("error", 0)], r.stdout
    assert "magic 3" in found[0]["message"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_dump_streams_a_big_batch_with_the_same_output(tmp_path, monkeypatch, capsys, fmt):
    """``dump --deep`` streams the records of a batch declaring more than a chunk (RecordStream): its output
    is the same as when the whole batch is decoded into a list, gaps and all."""
    from kafkalog.storage.records import build_batch
    from kafkalog.storage.records import dump as dump_mod
    from kafkalog.tools.cli import main

    n = 70_000  # more than RECORD_CHUNK (65,536)
    recs = [(i * 2, 1000 + i, b"k%d" % (i % 7) if i % 3 else None, b"v" * (i % 5), [("h", b"x")] if i % 9 == 0 else [])
            for i in range(n)]
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(build_batch(recs, base_offset=0, codec=3) + build_batch([(2 * n, 5, b"a", b"b", [])],
                                                                            base_offset=2 * n))
    args = ["dump", "--deep", "--print-data-log", str(log)] + (["--json"] if fmt == "json" else [])
    main(args)
    streamed = capsys.readouterr()
    monkeypatch.setattr(dump_mod, "RECORD_CHUNK", 10**9)  # the list path
    main(args)
    listed = capsys.readouterr()
    if fmt == "json":
        assert [json.loads(x) for x in streamed.out.splitlines()] == [json.loads(x) for x in listed.out.splitlines()]
        assert len(json.loads(streamed.out.splitlines()[0])["records"]) == n
    else:
        assert streamed.out == listed.out and streamed.out.count("| offset: ") == n + 1
    assert streamed.err == listed.err and "Non-consecutive offsets" in streamed.err
