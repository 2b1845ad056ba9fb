"""The Arrow reader (:meth:`kafkalog.LogDirs.to_arrow`, issue 32 item 1): partitions decoded at once by the compiled
core without the GIL, only the columns asked for built, at most ``threads`` batches held.

* threads change nothing: on every committed fixture and a generated dir (every codec, v0/v1 messages, idempotent
  batches, several segments), with and without control records and read_committed, the batches of ``threads=3``
  are the batches of ``threads=1``, one for one, and their rows the pure-Python path's;
* the projection changes no value: each column subset is the full read's columns, on every fixture;
* the core releases the GIL: a Python thread runs while ``add_entries`` (plain and compressed runs),
  ``arrow_add_compressed``, ``add_v2`` and ``add_legacy`` decode a large input (a C call holding the GIL, the
  control, lets it run not at all);
* memory is bounded: reading a generated dir with small batches, the batches made and not yet handed out never
  exceed ``threads``, and the process's anonymous memory grows by far less than the log's size;
* a reader stopped early stops its threads; an error in one partition comes after the partitions before it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from builders import (
    BASE_TS,
    every_codec_data_dir,
    repeated_batch,
    write_data_dir_files,
    write_segment,
)
from damage import lying_index

import kafkalog
from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.codec.compression import DEFAULT_DECOMPRESS_LIMIT
from kafkalog.storage.codec.native import backend, core
from kafkalog.storage.errors import CorruptRecordError
from kafkalog.storage.records import build_batch, build_legacy
from kafkalog.storage.records.columns import RECORD_COLUMNS, RecordColumns

require_modules("pyarrow", extra="sql")  # the Arrow reader's optional dependency (a failure under CI=true)

import pyarrow  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures").glob("*/data"))
needs_core = pytest.mark.skipif(core is None, reason="the compiled record core is not built")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    """Uncompressed idempotent partitions of several segments, every codec, and v0/v1 message sets."""
    return write_data_dir_files(every_codec_data_dir(tmp_path_factory.mktemp("mixed")))


def _batches(data: Path, **kw) -> list:
    with kafkalog.open(data) as dirs:
        return list(dirs.to_arrow(**kw))


def _dirs(mixed: Path) -> list[Path]:
    return [*FIXTURES, mixed]


@pytest.mark.parametrize("kw", [{}, {"include_control": True}, {"read_committed": True}, {"batch_rows": 97}],
                         ids=["default", "control", "committed", "small-batches"])
def test_threads_give_the_single_thread_batches(mixed, kw):
    for data in _dirs(mixed):
        one = _batches(data, threads=1, **kw)
        many = _batches(data, threads=3, **kw)
        assert [b.num_rows for b in many] == [b.num_rows for b in one], data
        assert all(a.equals(b) for a, b in zip(many, one, strict=True)), data
        assert sum(b.num_rows for b in one) > 0
        with backend("python"):
            reference = _batches(data, threads=2, **kw)
        rows = [r for b in one for r in b.to_pylist()]
        assert rows == [r for b in reference for r in b.to_pylist()], data


COLUMN_SETS = [["offset"], ["value"], ["partition", "value"], ["headers", "topic", "sequence", "timestampMs"],
               ["timestamp", "key", "segment", "position", "codec", "magic", "isControl", "isTransactional"],
               ["producerId", "producerEpoch", "leaderEpoch", "timestampType"], [name for name, _ in RECORD_COLUMNS][::-1]]


def test_the_projection_changes_no_value(mixed):
    for data in _dirs(mixed):
        with kafkalog.open(data) as dirs:
            full = dirs.to_arrow(include_control=True).read_all()
            for cols in COLUMN_SETS:
                got = dirs.to_arrow(include_control=True, columns=cols, threads=2).read_all()
                assert got.schema.names == cols
                assert got.equals(full.select(cols)), (data, cols)
            assert dirs.to_arrow(include_control=True, columns=[]).read_all().num_rows == full.num_rows


@needs_core
def test_the_core_builds_only_the_columns_asked_for():
    seg = next((ROOT / "fixtures" / "kafka-4.3.1-kraft" / "data" / "codec-none-0").glob("*.log")).read_bytes()
    full, some = RecordColumns(), RecordColumns(columns=["partition", "offset"])
    for cols in (full, some):
        cols._core.add_entries(seg, 0, len(seg), 0, cols._piece(("codec-none", 0, "s")), 1 << 20, 1 << 30)
    whole, narrow = full.to_arrow(), some.to_arrow()
    assert narrow.schema.names == ["partition", "offset"] and narrow.num_rows == whole.num_rows > 0
    assert narrow.equals(whole.select(["partition", "offset"]))
    assert narrow.get_total_buffer_size() < whole.column("value").get_total_buffer_size()
    with pytest.raises(ValueError, match="no record column 'nope'|no record column \"nope\""):
        core.ArrowRecords(0, ["nope"])


# ------------------------------------------------------------------------------------------------- the GIL

def _ticks_inside(call) -> tuple[int, float]:
    """How often a Python thread ran during the middle 60 % of ``call()`` (none when ``call`` holds the GIL),
    and how long ``call`` took."""
    ticks: list[float] = []
    stop, started = threading.Event(), threading.Event()

    def tick() -> None:
        started.set()
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0002)  # (a tick needs the GIL back after each sleep)

    t = threading.Thread(target=tick)
    t.start()
    started.wait()
    t0 = time.perf_counter()
    call()
    t1 = time.perf_counter()
    stop.set()
    t.join()
    lo, hi = t0 + 0.2 * (t1 - t0), t1 - 0.2 * (t1 - t0)
    return sum(1 for x in ticks if lo < x < hi), t1 - t0


def _big_batch(codec: int, records: int, value_size: int = 512) -> bytes:
    value = bytes(range(256)) * (value_size // 256)
    return build_batch([(i, BASE_TS + i, b"key-%d" % i, value, [("h", b"x")] if i % 5 == 0 else [])
                        for i in range(records)], codec=codec)


@needs_core
def test_the_core_decodes_without_the_gil():
    # the inputs are built first: each call below is one native call (tens of ms) and nothing else
    log = repeated_batch(_big_batch(0, 2000), 30, 2000)  # ~32 MB of plain batches
    zlog = repeated_batch(_big_batch(4, 2000), 30, 2000)  # ~32 MB of records in zstd batches
    one = _big_batch(0, 10000, 4096)  # one batch of ~40 MB
    big_zstd = _big_batch(4, 10000, 4096)
    legacy = build_legacy([(None, BASE_TS, b"k", bytes(range(256)) * 16) for _ in range(10000)], magic=1, codec=1)
    builders = {name: core.ArrowRecords() for name in ("plain", "zstd", "compressed", "v2", "legacy")}
    builders["views"] = core.ArrowRecords(0, None, True)
    calls = {
        "add_entries": lambda: builders["plain"].add_entries(log, 0, len(log), 0, 0, 1 << 30, 1 << 62, True),
        "add_entries, compressed": lambda: builders["zstd"].add_entries(
            zlog, 0, len(zlog), 0, 0, 1 << 30, 1 << 62, True, 0x20, 1 << 30, DEFAULT_DECOMPRESS_LIMIT),
        "arrow_add_compressed": lambda: core.arrow_add_compressed(builders["compressed"], big_zstd, 0, 0,
                                                                  DEFAULT_DECOMPRESS_LIMIT),
        "add_v2": lambda: builders["v2"].add_v2(one, 0, 0),
        "add_legacy": lambda: builders["legacy"].add_legacy(legacy, 0, 0, None, DEFAULT_DECOMPRESS_LIMIT),
        "add_entries, views": lambda: builders["views"].add_entries(
            zlog + log, 0, len(zlog) + len(log), 0, 0, 1 << 30, 1 << 62, True, 0x20, 1 << 30, DEFAULT_DECOMPRESS_LIMIT),
    }
    # the control: a C call holding the GIL lets the other thread run not at all in its middle
    held, took = _ticks_inside(lambda: sum(range(20_000_000)))
    assert held == 0, (held, took)
    for name, call in calls.items():
        ran, took = _ticks_inside(call)
        assert ran > 0, (name, took)
    assert [len(b) for b in builders.values()] == [60000, 60000, 10000, 10000, 10000, 120000]


# ------------------------------------------------------------------------------------------- bounded memory

@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """Four partitions of one ~24 MB segment each (uncompressed), and two of lz4."""
    root = tmp_path_factory.mktemp("big")
    for p in range(4):
        write_segment(root / f"big-{p}", 0, repeated_batch(_big_batch(0, 500), 90, 500), rebuild_indexes=True)
    for p in range(2):
        write_segment(root / f"lz-{p}", 0, repeated_batch(_big_batch(3, 500), 90, 500), rebuild_indexes=True)
    return write_data_dir_files(root)


def _counted_batches(monkeypatch) -> list[int]:
    """``RecordColumns.to_arrow`` counted: the list's one item is how many batches were made so far."""
    made = [0]
    to_arrow = RecordColumns.to_arrow

    def counted(self):
        rb = to_arrow(self)
        made[0] += 1
        return rb

    monkeypatch.setattr(RecordColumns, "to_arrow", counted)
    return made


@needs_core
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_at_most_threads_batches_are_held(big, monkeypatch, threads):
    made = _counted_batches(monkeypatch)
    taken = held = 0
    with kafkalog.open(big) as dirs:
        for rb in dirs.to_arrow(batch_rows=1000, threads=threads):
            taken += 1
            held = max(held, made[0] - taken)  # made by the threads, not yet handed out
            time.sleep(0.001)  # a slow reader: the threads get ahead as far as they may
            assert rb.num_rows
    assert taken == len(_batches(big, batch_rows=1000, threads=1))  # (the same batches with any threads)
    assert held <= threads  # one per thread at most


@needs_core
@pytest.mark.parametrize("threads", [2, 3])
def test_a_reader_in_any_order_gives_the_rows_each_batch_in_offset_order(big, monkeypatch, threads):
    """``ordered=False`` (the SQL scan's reader): the same rows, each batch in offset order, the batches of
    pieces and partitions interleaved, and still at most ``threads`` held."""
    def by_partition(batches) -> dict:
        out: dict = {}
        for rb in batches:
            key = (rb.column("topic")[0].as_py(), rb.column("partition")[0].as_py())
            out.setdefault(key, []).extend(rb.column("offset").to_pylist())
        return out

    expected = by_partition(_batches(big, batch_rows=1000, threads=1))
    made = _counted_batches(monkeypatch)
    taken = held = 0
    got = []
    with kafkalog.open(big) as dirs:
        for rb in dirs.to_arrow(batch_rows=1000, threads=threads, ordered=False):
            taken += 1
            held = max(held, made[0] - taken)
            time.sleep(0.001)
            got.append(rb)
    assert {k: sorted(v) for k, v in by_partition(got).items()} == expected
    assert all(rb.column("offset").to_pylist() == sorted(rb.column("offset").to_pylist()) for rb in got)
    assert held <= threads


def test_streams_in_any_order_never_wait_for_the_caller_to_reach_a_task():
    """With ``ordered=False`` a thread a task ahead keeps making items (in order the second task could only end
    once the caller took the first's every item: here the first waits for the second's end, a deadlock)."""
    from kafkalog.storage.parallel import iter_thread_streams

    second_done = threading.Event()

    def make(task):
        if task == "a":
            yield "a0"
            assert second_done.wait(10), "the second task never ended"
            yield "a1"
        else:
            yield from ("b0", "b1", "b2")
            second_done.set()

    got = list(iter_thread_streams(make, ["a", "b"], threads=2, ordered=False))
    assert sorted(got) == ["a0", "a1", "b0", "b1", "b2"]
    assert got.index("b2") < got.index("a1") and got.index("b0") < got.index("b1") < got.index("b2")


def test_streams_in_any_order_raise_the_error_of_a_task():
    from kafkalog.storage.parallel import iter_thread_streams

    def make(task):
        yield task
        if task == 2:
            raise ValueError("task 2")

    with pytest.raises(ValueError, match="task 2"):
        list(iter_thread_streams(make, [1, 2, 3], threads=2, ordered=False))


CHILD = textwrap.dedent('''
    import sys
    import kafkalog

    def anon_kb():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1])

    with kafkalog.open(sys.argv[1]) as dirs:
        list(dirs.to_arrow(["big"], partitions=[0], batch_rows=1000, threads=1))  # warm: imports, allocator
        base = peak = anon_kb()
        rows = 0
        for rb in dirs.to_arrow(batch_rows=1000, threads=int(sys.argv[2])):
            rows += rb.num_rows
            peak = max(peak, anon_kb())
    print(rows, peak - base)
''')


@needs_core
def test_memory_is_bounded_by_batches_not_by_the_log(big):
    size = sum(p.stat().st_size for p in big.glob("*/*.log"))
    out = subprocess.run([sys.executable, "-c", CHILD, str(big), "2"], capture_output=True, text=True, check=True)
    rows, grown_kb = map(int, out.stdout.split())
    assert rows == 6 * 90 * 500
    assert grown_kb * 1024 < size / 8, (grown_kb, size)


# ------------------------------------------------------------------------------------- stopping and errors

@needs_core
def test_a_reader_stopped_early_stops_its_threads(big):
    before = {t.name for t in threading.enumerate()}
    with kafkalog.open(big) as dirs:
        reader = dirs.to_arrow(batch_rows=1000, threads=3)
        next(iter(reader))
        del reader
    deadline = time.monotonic() + 10
    while {t.name for t in threading.enumerate()} - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not {t.name for t in threading.enumerate() if t.name.startswith("kafkalog-reader")} - before


def test_an_error_comes_after_the_partitions_before_it(mixed, tmp_path):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(mixed, data)
    log = next((data / "plain-1").glob("*.log"))
    raw = bytearray(log.read_bytes())
    raw[200] ^= 0xFF  # a CRC mismatch in plain-1's first batch
    log.write_bytes(bytes(raw))
    for threads in (1, 3):
        got = []
        with kafkalog.open(data) as dirs, pytest.raises(CorruptRecordError) as e:
            for rb in dirs.to_arrow(threads=threads):
                got.append(rb)
        assert "plain-1" in str(e.value)
        topics = {t for rb in got for t in rb.column("topic").to_pylist()}
        assert "plain-1" not in {f"{t}-{p}" for rb in got for t, p in zip(rb.column("topic").to_pylist(),
                                                                          rb.column("partition").to_pylist(),
                                                                          strict=True)}
        assert topics == {"gz", "legacy", "lz4", "plain"}, threads  # (in name order: gz, legacy, lz4, plain-0)


# ------------------------------------------------------------------------------------------- zero-copy views

def _read(data: Path, offsets=None, **kw):
    with kafkalog.open(data) as dirs:
        return dirs.to_arrow(None, offsets, **kw).read_all()


@pytest.mark.parametrize("kw", [{}, {"include_control": True, "threads": 3}, {"offsets": "5:40"},
                                {"read_committed": True}, {"columns": ["value", "offset", "key"]}],
                         ids=["default", "control", "window", "committed", "projection"])
def test_views_give_the_copies_values(mixed, kw):
    for data in _dirs(mixed):
        copies = _read(data, **kw)
        views = _read(data, binary_view=True, **kw)
        assert views.schema.field("value").type == pyarrow.binary_view() == views.schema.field("key").type
        assert views.num_rows == copies.num_rows > 0, data
        assert views.cast(copies.schema).equals(copies), data


def _mapped(root: Path) -> list[tuple[int, int, str]]:
    """The mappings of this process of files under ``root``: (start, end, path)."""
    out = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith(str(root)):
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            out.append((lo, hi, parts[5].removesuffix(" (deleted)")))
    return out


@needs_core
@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's /proc/self/maps")
def test_views_point_into_the_segments_and_outlive_them(mixed, tmp_path):
    import gc
    import shutil

    data = tmp_path / "data"
    shutil.copytree(mixed, data)
    copies = _read(data, threads=1)
    with kafkalog.open(data) as dirs:
        reader = dirs.to_arrow(binary_view=True, threads=2)
        views = reader.read_all()
    del reader
    gc.collect()
    # the reader and its segments are closed; the plain partitions' segments stay mapped for the views
    mapped = _mapped(data)
    assert {Path(p).parent.name for _, _, p in mapped} >= {"plain-0", "plain-1"}
    plain = [b for i in range(views.column("value").num_chunks)
             for b in views.column("value").chunk(i).buffers()[3:] if b is not None]
    inside = [b for b in plain if any(lo <= b.address and b.address + b.size <= hi for lo, hi, _ in mapped)]
    assert inside  # values not copied: their data buffers are the segments' mapped bytes
    shutil.rmtree(data)  # even the files go: the mappings hold their pages
    junk = [bytearray(1 << 20) for _ in range(32)]
    assert views.cast(copies.schema).equals(copies)
    if _have_duckdb():  # an Arrow consumer's threads take and drop the views too
        got = _duckdb_sums(views)
        assert got == [(copies.num_rows, sum(len(v) for v in copies.column("value").to_pylist() if v))]
    del views, plain, inside, junk
    gc.collect()
    for _ in range(100):  # (exports dropped on a thread without the GIL are released at the next pending call)
        if not _mapped(tmp_path):
            break
        time.sleep(0.01)
    assert not _mapped(tmp_path)  # the last view gone, the mappings are released


def _have_duckdb() -> bool:
    try:
        import duckdb  # noqa: F401
    except ImportError:
        return False
    return True


def _duckdb_sums(rows) -> list:
    """DuckDB's count and value bytes of ``rows`` (in a frame of its own: DuckDB finds ``rows`` among a frame's
    locals, whose snapshot would keep it alive as long as that frame runs)."""
    import duckdb

    return duckdb.sql("SELECT count(*), sum(octet_length(value)) FROM rows").fetchall()


EXIT = textwrap.dedent('''
    import sys
    import threading

    import kafkalog

    with kafkalog.open(sys.argv[1]) as dirs:
        views = dirs.to_arrow(binary_view=True, threads=2).read_all()
    cycle = [views]
    cycle.append(cycle)  # freed by the collector while the interpreter is finalizing
    chunks = [views.column("value").chunk(i) for i in range(views.column("value").num_chunks)]
    # and views held by a thread without the GIL when it ends (a consumer's thread)
    threading.Thread(target=lambda c=chunks[:1]: None).start()
    print(views.num_rows)
''')


@needs_core
def test_views_alive_at_the_interpreter_s_exit_are_released_cleanly(mixed):
    out = subprocess.run([sys.executable, "-c", EXIT, str(mixed)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout) > 0


# ------------------------------------------------------------------------------------ one partition, in pieces

@pytest.fixture(scope="module")
def segmented(tmp_path_factory) -> Path:
    """One partition of eight segments (plain and lz4 batches, ~1.2 MB each) and a small one-segment partition."""
    root = tmp_path_factory.mktemp("segmented")
    first = 0
    for s in range(8):
        batch = _big_batch(3 if s % 3 == 2 else 0, 100, 256)
        write_segment(root / "one-0", first, repeated_batch(batch, 40, 100, first), rebuild_indexes=True)
        first += 40 * 100
    write_segment(root / "small-0", 0, repeated_batch(_big_batch(0, 10), 3, 10), rebuild_indexes=True)
    return write_data_dir_files(root)


def _pieces_of(data: Path, **kw) -> list:
    from kafkalog.storage.api.partition import _pieces

    with kafkalog.open(data) as dirs:
        return [[piece.span for piece in _pieces(p, p._filter(kw.get("offsets"), False, False),
                                                 kw.get("batch_rows", 64 * 1024))]
                for p in dirs.partitions()]


def _small_pieces(monkeypatch, size: int = 200_000) -> None:
    """Pieces of at most ``size`` bytes: every segment of ``segmented`` cut inside, at its batch boundaries."""
    from kafkalog.storage.api import partition as api

    monkeypatch.setattr(api, "MIN_PIECE_BYTES", size // 2)
    monkeypatch.setattr(api, "PIECE_BYTES", size)


def _uncut(data: Path, **kw) -> list:
    """The batches of the read with every partition one piece (as before pieces existed), on one thread."""
    from kafkalog.storage.api import partition as api

    with pytest.MonkeyPatch.context() as m:
        m.setattr(api, "MIN_PIECE_BYTES", 1 << 62)
        m.setattr(api, "PIECE_BYTES", 1 << 62)
        return _batches(data, **{**kw, "threads": 1})


def _rows(batches) -> list:
    return [r for b in batches for r in b.to_pylist()]


def _any_order(batches) -> list:
    """The rows as a sorted list (a read in any order interleaves the batches of pieces and partitions)."""
    return sorted(_rows(batches), key=repr)


@pytest.mark.parametrize("kw", [{}, {"offsets": "1234:25000"}, {"read_committed": True}, {"batch_rows": 777},
                                {"time_range": (BASE_TS + 20, BASE_TS + 60)}, {"binary_view": True},
                                {"columns": ["offset", "value", "codec"]}, {"include_control": True}],
                         ids=["default", "offsets", "committed", "small-batches", "time", "views", "columns",
                              "control"])
def test_pieces_inside_segments_give_the_uncut_rows_and_the_same_batches_on_any_threads(segmented, mixed,
                                                                                         monkeypatch, kw):
    """Segments cut into pieces at their batch boundaries: the rows are those of the uncut read, in the same order;
    the batches of 2 threads are those of 1, one for one; in any order, the same rows."""
    whole = {data: _uncut(data, **kw) for data in (segmented, mixed, *FIXTURES)}
    _small_pieces(monkeypatch)
    spans = _pieces_of(segmented, **kw)[0]
    assert sum(1 for span in spans if span[1] is not None) >= (4 if kw.get("offsets") else 8), spans
    for data, expected in whole.items():
        one = _batches(data, threads=1, **kw)
        two = _batches(data, threads=2, **kw)
        assert [b.num_rows for b in two] == [b.num_rows for b in one], data
        assert all(a.equals(b) for a, b in zip(two, one, strict=True)), data
        assert _rows(one) == _rows(expected), data
        assert _any_order(_batches(data, threads=2, ordered=False, **kw)) == _any_order(expected), data
        assert _rows(one) or data != segmented
    if "offsets" in kw:
        offsets = [r["offset"] for r in _rows(_batches(segmented, threads=2, **kw)) if r.get("topic") == "one"]
        assert offsets == list(range(1234, 25000))


def _in_flight(monkeypatch) -> dict:
    """``_piece_batches`` spied: ``most`` pieces decoding at once (begun and not ended), ``threads`` that did."""
    from kafkalog.storage.api import partition as api

    seen = {"now": 0, "most": 0, "pieces": 0, "threads": set()}
    lock = threading.Lock()
    real = api._piece_batches

    def spy(*args, **kwargs):
        with lock:
            seen["now"] += 1
            seen["pieces"] += 1
            seen["most"] = max(seen["most"], seen["now"])
            seen["threads"].add(threading.current_thread().name)
        try:
            yield from real(*args, **kwargs)
        finally:
            with lock:
                seen["now"] -= 1

    monkeypatch.setattr(api, "_piece_batches", spy)
    return seen


@needs_core
def test_the_ordered_read_of_one_segment_decodes_pieces_at_once(big, monkeypatch):
    """The default, ordered read of one partition of one segment: cut into pieces of about one batch, two of
    them decode at once on two threads (before, the segment was one piece: one thread decoded it all)."""
    seen = _in_flight(monkeypatch)
    with kafkalog.open(big) as dirs:
        batches = list(dirs.to_arrow(["big"], "0:30000", batch_rows=1000, threads=2))
    assert sum(b.num_rows for b in batches) == 4 * 30000
    assert seen["pieces"] >= 8 and seen["most"] >= 2 and len(seen["threads"]) == 2, seen


@needs_core
def test_the_pieces_of_one_partition_hold_at_most_threads_batches(segmented, monkeypatch):
    _small_pieces(monkeypatch)
    made = _counted_batches(monkeypatch)
    expected = sum(b.num_rows for b in _batches(segmented, topics=["one"], batch_rows=1000, threads=1))
    for threads in (2, 3):
        made[0] = taken = held = rows = 0
        with kafkalog.open(segmented) as dirs:
            for rb in dirs.to_arrow(["one"], batch_rows=1000, threads=threads):
                taken += 1
                rows += rb.num_rows
                held = max(held, made[0] - taken)
                time.sleep(0.001)
                assert rb.num_rows
        assert rows == expected == 8 * 4000
        assert held <= threads


def _damaged(segmented: Path, tmp_path: Path, segment: int, at: float, damage) -> tuple[Path, Path]:
    """A copy of ``segmented`` whose ``segment``-th segment of ``one-0`` has ``damage(raw, position)`` applied at
    the batch boundary nearest ``at`` of its length."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(segmented, data)
    log = sorted((data / "one-0").glob("*.log"))[segment]
    raw = bytearray(log.read_bytes())
    pos = 0
    while pos < len(raw) * at:
        pos += 12 + int.from_bytes(raw[pos + 8:pos + 12], "big")
    damage(raw, pos)
    log.write_bytes(bytes(raw))
    return data, log


def _outcome(data: Path, **kw) -> tuple[list, str | None]:
    got: list = []
    try:
        with kafkalog.open(data) as dirs:
            for rb in dirs.to_arrow(["one"], **kw):
                got.append(rb)
    except CorruptRecordError as e:
        return _rows(got), str(e)
    return _rows(got), None


@pytest.mark.parametrize("segment", [3, 7], ids=["middle-segment", "active-segment"])
def test_a_corrupt_batch_inside_a_cut_segment_fails_as_the_uncut_read(segmented, tmp_path, monkeypatch, segment):
    """A CRC mismatch in a batch in the middle of a segment cut into several pieces: the same error (text, file,
    byte) after the same rows, on 1 and 2 threads, ordered or not, as the uncut read and ``records()``."""
    def flip(raw: bytearray, pos: int) -> None:
        raw[pos + 200] ^= 0xFF

    data, log = _damaged(segmented, tmp_path, segment, 0.5, flip)
    rows, error = _outcome(data, threads=1, batch_rows=1000)
    assert error is not None and log.name in error
    with kafkalog.open(data) as dirs, pytest.raises(CorruptRecordError) as e:
        list(dirs.partition("one", 0).records())
    assert str(e.value) == error
    _small_pieces(monkeypatch)
    assert sum(1 for span in _pieces_of(data)[0] if span[1] is not None) >= 8
    one = _outcome(data, batch_rows=1000, threads=1)
    assert one[1] == error and one[0][:len(rows)] == rows  # (the batches before it: each piece's are cut there)
    assert _outcome(data, batch_rows=1000, threads=2) == one
    assert _outcome(data, batch_rows=1000, threads=2, ordered=False)[1] == error


@pytest.mark.parametrize("segment", [3, 7], ids=["middle-segment", "active-segment"])
def test_a_partial_batch_inside_a_cut_segment_ends_as_the_uncut_read(segmented, tmp_path, monkeypatch, segment):
    """A batch whose size runs past the file in the middle of a segment cut into pieces (the offset index still
    points past it): the active segment's log ends there, with the rows before it only; anywhere else the
    error of the uncut read. The pieces after it give nothing."""
    def oversize(raw: bytearray, pos: int) -> None:
        raw[pos + 8:pos + 12] = (len(raw) * 2).to_bytes(4, "big")

    data, log = _damaged(segmented, tmp_path, segment, 0.4, oversize)
    rows, error = _outcome(data, threads=1, batch_rows=1000)
    assert (error is None) == (segment == 7), error
    _small_pieces(monkeypatch)
    one = _outcome(data, batch_rows=1000, threads=1)
    assert one[1] == error and (one[0] == rows if error is None else one[0][:len(rows)] == rows)
    assert _outcome(data, batch_rows=1000, threads=2) == one


def test_an_index_entry_inside_a_batch_cuts_nothing_wrong(segmented, tmp_path, monkeypatch):
    """Offset index entries that point 10 bytes into batches (no batch starts there): the pieces cut there read
    from where the piece before actually ended, and the rows are the uncut read's."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(segmented, data)
    lying_index(data / "one-0")
    expected = _outcome(data, threads=1, batch_rows=1000)
    assert expected[1] is None and len(expected[0]) == 8 * 4000
    _small_pieces(monkeypatch)
    assert sum(1 for span in _pieces_of(data)[0] if span[1] is not None) >= 8
    for kw in ({"threads": 1}, {"threads": 2}):
        assert _outcome(data, batch_rows=1000, **kw) == expected, kw


def test_a_log_end_offset_that_cannot_be_read_does_not_fail_the_plan(segmented, monkeypatch):
    """The pieces' size comes from the log end offset; when it cannot be read the plan goes on (64 MiB pieces) and
    the read itself says what is wrong, as the uncut read does."""
    from kafkalog.storage.api import partition as api
    from kafkalog.storage.errors import KafkaLogError
    from kafkalog.storage.log.partition import PartitionLog

    def unreadable(self):
        raise KafkaLogError("no end", str(self.path))

    monkeypatch.setattr(PartitionLog, "log_end_offset", property(unreadable))
    with pytest.raises(KafkaLogError) as uncut:
        _uncut(segmented)
    with kafkalog.open(segmented) as dirs:
        assert api._piece_bytes(dirs.partition("one", 0), 1000) == api.PIECE_BYTES
        reader = dirs.to_arrow(threads=2)  # (the plan does not read it)
        with pytest.raises(KafkaLogError) as e:
            reader.read_all()
    assert str(e.value) == str(uncut.value) and "no end" in str(e.value)
