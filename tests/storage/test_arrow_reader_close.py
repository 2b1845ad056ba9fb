"""A reader that stops half-way lets go of every partition it opened, at once (issue 32): counted with this
process's open files (``/proc/self/fd``) and mappings (``/proc/self/maps``) of the data dir, the garbage collector
off, on 1 and 2 threads, ordered or not, with the partitions read in several pieces each (pieces no thread started
hold their partition too):

* a reader taken from half-way and dropped (``break`` out of the loop, ``del``; or ``close()`` and ``del``: a
  pyarrow reader made from Python batches does not pass ``close()`` on to them, dropping it does), a reader read to
  its end, and a reader whose later piece is a corrupt batch (the error raised, the reader still referenced)
  hold nothing of the data dir afterwards;
* ``binary_view`` views taken before the reader stopped stay valid (their segments stay mapped as long as they
  live), and once they are gone so are the mappings;
* a SQL query stopped early by its ``LIMIT`` (``kafkalog sql``, :func:`~kafkalog.storage.api.sql.execute`) holds
  nothing once its rows are out.
"""

from __future__ import annotations

import gc
import io
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import every_codec_data_dir, write_data_dir_files

import kafkalog
from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.errors import CorruptRecordError

require_modules("pyarrow", extra="sql")  # the Arrow reader's optional dependency (a failure under CI=true)

import pyarrow  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's /proc/self/fd and maps")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """Two idempotent partitions of two 1 MiB segments each, one per codec, and v0/v1 messages."""
    return write_data_dir_files(every_codec_data_dir(tmp_path_factory.mktemp("close")))


@pytest.fixture
def no_gc() -> Iterator[None]:
    """The garbage collector off: what is let go of is let go of by the reader, not found by the collector."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture
def small_pieces(monkeypatch) -> None:
    """Pieces of about 200 kB: each plain partition's read is cut in several, inside its segments too."""
    from kafkalog.storage.api import partition as api

    monkeypatch.setattr(api, "MIN_PIECE_BYTES", 100_000)
    monkeypatch.setattr(api, "PIECE_BYTES", 200_000)


def _held(root: Path) -> tuple[list[str], list[str]]:
    """The files under ``root`` this process has open (file descriptors) and mapped, each sorted."""
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # (the listing's own descriptor, closed since)
            continue
        if target.startswith(str(root)):
            fds.append(target)
    maps = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith(str(root)):
            maps.append(parts[5])
    return sorted(fds), sorted(maps)


def _started(data: Path, threads: int, ordered: bool, **kw):
    """A reader of ``data`` with a few batches taken (its :class:`LogDirs` closed: the reader outlives it), and the
    batches."""
    with kafkalog.open(data) as dirs:
        reader = dirs.to_arrow(batch_rows=300, threads=threads, ordered=ordered, **kw)
    taken = []
    for rb in reader:
        taken.append(rb)
        if len(taken) == 4:
            break
    return reader, taken


CASES = [(1, True), (2, True), (1, False), (2, False)]
IDS = ["1-thread", "2-threads", "1-thread-any-order", "2-threads-any-order"]


@pytest.mark.parametrize(("threads", "ordered"), CASES, ids=IDS)
@pytest.mark.parametrize("how", ["break-del", "close-del", "to-the-end"])
def test_a_reader_stopped_or_done_holds_nothing(data, no_gc, small_pieces, threads, ordered, how):
    before = _held(data)
    reader, taken = _started(data, threads, ordered)
    held = _held(data)
    assert len(held[0]) > len(before[0]) and len(held[1]) > len(before[1])  # (it holds partitions half-way)
    if how == "close-del":
        reader.close()
    elif how == "to-the-end":
        rest = list(reader)
        assert sum(b.num_rows for b in taken + rest) == 2 * 4000 + 4 * 1500 + 15
        assert _held(data) == before  # (the reader still referenced)
    del reader
    assert _held(data) == before


@pytest.mark.parametrize(("threads", "ordered"), CASES, ids=IDS)
def test_a_reader_failing_in_a_later_piece_holds_nothing(data, tmp_path, no_gc, small_pieces, threads, ordered):
    """A CRC mismatch in plain-1's last segment: the batches before it come, the error is raised, and nothing of
    the data dir is held afterwards, while the reader (and the error) are still referenced."""
    damaged = tmp_path / "data"
    shutil.copytree(data, damaged)
    log = sorted((damaged / "plain-1").glob("*.log"))[-1]
    raw = bytearray(log.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    log.write_bytes(bytes(raw))
    before = _held(damaged)
    reader, taken = _started(damaged, threads, ordered)
    with pytest.raises(CorruptRecordError) as e:
        for rb in reader:
            taken.append(rb)
    assert log.name in str(e.value) and taken
    assert _held(damaged) == before


def test_views_taken_before_the_reader_stopped_stay_valid(data, no_gc, small_pieces):
    """``binary_view`` batches taken from a reader stopped half-way: their values are the copies' and their
    segments stay mapped while they live; dropped, nothing of the data dir is held."""
    before = _held(data)
    with kafkalog.open(data) as dirs:
        copies = dirs.to_arrow(batch_rows=300, threads=1).read_all().slice(0, 1200)
    reader, views = _started(data, 2, True, binary_view=True)
    del reader
    got = pyarrow.Table.from_batches(views).cast(copies.schema)
    assert got.num_rows == 1200 and got.equals(copies)
    del views, got
    for _ in range(100):  # (exports dropped on a thread without the GIL are released at the next pending call)
        if _held(data) == before:
            break
        time.sleep(0.01)
    assert _held(data) == before


def test_a_query_stopped_by_its_limit_holds_nothing(data, no_gc, capsys):
    """DuckDB stops the scan at the LIMIT (the threads a few batches ahead, the pieces after them never started):
    once the rows are out, nothing of the data dir is held, through the library call and ``kafkalog sql``."""
    require_modules("duckdb", extra="sql")
    from kafkalog.storage.api.sql import execute
    from kafkalog.tools.cli import main

    before = _held(data)
    with kafkalog.open(data) as dirs:
        _, batches = execute(dirs, 'SELECT "offset", value FROM records LIMIT 5')
        assert sum(b.num_rows for b in batches) == 5
    del batches
    assert _held(data) == before
    out = io.StringIO()
    old, sys.stdout = sys.stdout, out
    try:
        assert main(["sql", str(data), "--json", 'SELECT "offset", value FROM records LIMIT 5']) == 0
    finally:
        sys.stdout = old
    assert out.getvalue().count('"offset"') == 5
    assert _held(data) == before


@pytest.mark.parametrize("ordered", [True, False])
def test_a_stream_closed_on_one_of_its_threads_waits_for_none_and_drops_the_rest(ordered):
    """The collector may finalize a dropped reader on one of the reader's own threads: the stream's close there
    returns at once (no thread waits there for another, which may wait for the item that one is making), and
    every task no thread started is still dropped, by the threads as they end."""
    from kafkalog.storage.parallel import iter_thread_streams

    started, dropped, took, released = [], [], threading.Event(), threading.Event()
    closed_on: list[str] = []
    holder: dict = {}

    def make(t):
        started.append(t)
        if t == 1:  # (waits for task 0's thread, as a piece waits for where the piece before it ended)
            released.wait(10)
        yield t
        if t == 0:
            took.wait(10)  # (the caller has task 0's first item: the stream is suspended)
            t0 = time.monotonic()
            holder["stream"].close()
            closed_on.append(threading.current_thread().name)
            holder["closing"] = time.monotonic() - t0
            released.set()
        yield t

    before = {t.name for t in threading.enumerate()}
    stream = iter_thread_streams(make, list(range(20)), threads=2, ordered=ordered, drop=dropped.append)
    holder["stream"] = stream
    assert next(stream) == 0
    took.set()
    deadline = time.monotonic() + 10
    while ({t.name for t in threading.enumerate()} - before or not closed_on) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert closed_on and closed_on[0].startswith("kafkalog-reader") and holder["closing"] < 5, holder
    assert not {t.name for t in threading.enumerate()} - before  # (the threads ended)
    assert sorted(started + dropped) == list(range(20)) and not set(started) & set(dropped)
