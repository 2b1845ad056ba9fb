"""The Arrow reader over a data dir on S3 (a local moto server, issue 32): a segment under a URL is cut into pieces
as a local one is (``Segment.cut_positions(..., in_place=True)``), at the entries of its offset index read through
the filesystem seam, only those a log its size can hold (a preallocated index's zero tail is not read):

* the rows are the uncut read's of the same dir on a local disk, on 1 and 2 threads, ordered or not, whole and
  within an offset range, and more than one piece of one remote segment decodes at once;
* an offset index that lies (entries 10 bytes into batches) changes no row: each piece checks it starts where the
  one before ended;
* a segment without an offset index is one piece.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from builders import every_codec_data_dir, spy_url_reads, write_data_dir_files
from builders import s3_upload as upload
from damage import lying_index

import kafkalog
from kafkalog.compat.pytest_plugin import require_modules

require_modules("pyarrow", "fsspec", "moto", extra="spark")  # skipped without the spark extra, a failure under CI=true

PADDED = 4 << 20  # plain-0's first offset index, preallocated as a broker's active segment's is
BATCH_ROWS = 300


def s3_options(endpoint: str) -> dict[str, str]:
    return {"s3.endpoint": endpoint, "s3.accessKey": "test", "s3.secretKey": "test", "s3.region": "us-east-1"}


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    """plain-0 and plain-1 (two 1 MiB segments each, with offset indexes: plain-0's first one zero-padded), a
    partition per codec and v0/v1 messages; ``bare-0``, a copy of plain-1 without its offset indexes."""
    root = every_codec_data_dir(tmp_path_factory.mktemp("url") / "data")
    shutil.copytree(root / "plain-1", root / "bare-0")
    for index in (root / "bare-0").glob("*.index"):
        index.unlink()
    first = sorted((root / "plain-0").glob("*.index"))[0]
    with first.open("r+b") as f:
        f.truncate(PADDED)
    return write_data_dir_files(root)


@pytest.fixture(scope="module")
def url(local, s3_endpoint) -> str:
    return upload(local, s3_endpoint, "arrow/data")


@pytest.fixture
def small_pieces(monkeypatch) -> None:
    """Pieces of about 200 kB: every plain segment cut inside, at its offset index's entries."""
    from kafkalog.storage.api import partition as api

    monkeypatch.setattr(api, "MIN_PIECE_BYTES", 100_000)
    monkeypatch.setattr(api, "PIECE_BYTES", 200_000)


def _open(where: str | Path, s3_endpoint: str):
    return kafkalog.open(where, filesystem_options=s3_options(s3_endpoint)) if isinstance(where, str) \
        else kafkalog.open(where)


def _spans(where: str | Path, s3_endpoint: str) -> dict[str, list]:
    """Each partition's pieces' spans (:func:`kafkalog.storage.api.partition._pieces`)."""
    from kafkalog.storage.api.partition import _pieces

    with _open(where, s3_endpoint) as dirs:
        return {p.name: [piece.span for piece in _pieces(p, p._filter(None, False, False), BATCH_ROWS)]
                for p in dirs.partitions()}


def _rows(where: str | Path, s3_endpoint: str, **kw) -> list:
    with _open(where, s3_endpoint) as dirs:
        return [r for b in dirs.to_arrow(batch_rows=BATCH_ROWS, **kw) for r in b.to_pylist()]


def _uncut(local: Path, **kw) -> list:
    """The rows of the local dir read with every partition one piece, on one thread."""
    from kafkalog.storage.api import partition as api

    with pytest.MonkeyPatch.context() as m:
        m.setattr(api, "MIN_PIECE_BYTES", 1 << 62)
        m.setattr(api, "PIECE_BYTES", 1 << 62)
        return _rows(local, "", threads=1, **kw)


def _inside(spans: list) -> int:
    """How many pieces start inside a segment."""
    return sum(1 for span in spans if span is not None and span[1] is not None)


@pytest.mark.parametrize("kw", [{}, {"offsets": "1234:3500"}, {"binary_view": True},
                                {"columns": ["offset", "value", "segment", "position"]}],
                         ids=["whole", "offsets", "views", "columns"])
def test_remote_segments_are_cut_and_give_the_uncut_rows(local, url, s3_endpoint, small_pieces, monkeypatch, kw):
    expected = _uncut(local, **kw)
    reads = spy_url_reads(monkeypatch)
    here, there = _spans(local, s3_endpoint), _spans(url, s3_endpoint)
    del here["bare-0"], there["bare-0"]  # (a local segment without an index is cut at its batches' ends)
    assert there == here  # (the same cuts as on a local disk)
    assert _inside(there["plain-0"]) >= 4 and _inside(there["plain-1"]) >= 4, there
    padded = [n for path, n, size in reads.windows if path.endswith(sorted(p.name for p in (
        local / "plain-0").glob("*.index"))[0])]
    assert padded and sum(padded) < PADDED // 8, padded  # (only the entries a 1 MiB log can hold)
    for threads, ordered in ((1, True), (2, True), (2, False)):
        got = _rows(url, s3_endpoint, threads=threads, ordered=ordered, **kw)
        if ordered:
            assert got == expected, (threads, ordered)
        else:
            assert sorted(got, key=repr) == sorted(expected, key=repr)
    assert all(n < size for n, size in reads.logs() if size > 1 << 20)  # (a .log read in windows, never whole)


def test_pieces_of_one_remote_segment_decode_at_once(local, url, s3_endpoint, small_pieces, monkeypatch):
    from kafkalog.storage.api import partition as api

    seen = {"now": 0, "most": 0}
    lock = threading.Lock()
    real = api._piece_batches

    def spy(task, span, *args, **kwargs):
        one = span is not None and span[1] is not None and task.read.path.name == "plain-0"
        with lock:
            seen["now"] += one
            seen["most"] = max(seen["most"], seen["now"])
        try:
            yield from real(task, span, *args, **kwargs)
        finally:
            with lock:
                seen["now"] -= one

    monkeypatch.setattr(api, "_piece_batches", spy)
    with _open(url, s3_endpoint) as dirs:
        rows = sum(b.num_rows for b in dirs.to_arrow(["plain"], batch_rows=BATCH_ROWS, partitions=[0], threads=2))
    assert rows == 4000
    assert seen["most"] >= 2, seen


def test_a_remote_index_that_lies_changes_no_row(local, s3_endpoint, tmp_path, small_pieces):
    """Offset index entries pointing 10 bytes into batches (no batch starts there): the pieces cut there read
    from where the piece before actually ended; the rows are the uncut read's."""
    data = tmp_path / "data"
    shutil.copytree(local, data)
    lying_index(data / "plain-1")
    lying = upload(data, s3_endpoint, "arrow/lying")
    assert _inside(_spans(lying, s3_endpoint)["plain-1"]) >= 4
    expected = _uncut(local, topics=["plain"])
    for threads in (1, 2):
        assert _rows(lying, s3_endpoint, topics=["plain"], threads=threads) == expected, threads


def test_a_remote_segment_without_an_offset_index_is_one_piece(local, url, s3_endpoint, small_pieces):
    spans = _spans(url, s3_endpoint)["bare-0"]
    assert _inside(spans) == 0 and len(spans) == 2, spans  # (one piece per segment)
    assert _rows(url, s3_endpoint, topics=["bare"], threads=2) == _uncut(local, topics=["bare"])


def test_a_remote_piece_reads_about_its_bytes(local, url, s3_endpoint, small_pieces, monkeypatch):
    """Each piece of a cut segment reads its bytes from its start in full windows, and at most a first window past
    its end (the batch there tells where it ended): the segment is read about once, not a window per piece more
    (before, each piece's windows grew from a first one and read on a window's bytes past its end)."""
    from kafkalog.storage.io.fs import FIRST_WINDOW

    spans = _spans(url, s3_endpoint)
    reads = spy_url_reads(monkeypatch)
    assert len(_rows(url, s3_endpoint, threads=2)) == len(_uncut(local))
    for name in ("plain-0", "plain-1"):
        log = sorted((local / name).glob("*.log"))[0]  # (the cut one: the active segment's end is read more often)
        pieces = sum(1 for span in spans[name] if span is not None and span[0] == 0)
        read = sum(n for path, n, _ in reads.windows if path.endswith(f"{name}/{log.name}"))
        assert pieces >= 5 and log.stat().st_size <= read <= log.stat().st_size + pieces * FIRST_WINDOW, \
            (name, read, pieces)
