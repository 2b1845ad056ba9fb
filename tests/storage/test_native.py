"""The compiled record core (storage/native, Rust + PyO3) against the pure-Python reference decoder.

The contract: for the same records section the native decoder returns exactly what the Python fast decoder
returns, or ``None`` ("unusual"), and then the Python careful decoder gives the verdict -- so records, errors,
byte positions and reasons are identical with and without the core. Checked on every batch of every real
broker fixture, on hypothesis round trips, on mutated bytes, and with the core switched off
(``KAFKALOG_NATIVE=0``) in a separate interpreter.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest
from builders import numbered_batches
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.codec.native import backend, core
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.records import RecordBatch, build_batch, build_legacy, iter_batches
from kafkalog.storage.records.record import PyRecord, Record

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TS = 1_700_000_000_000

# Outside CI a checkout without cargo has no core to compare; under CI these tests run (and fail without it)
needs_core = pytest.mark.skipif(core is None and os.environ.get("CI") != "true",
                                reason="the compiled record core is not built")


@needs_core
def test_the_cores_allocator_purges_by_reset_unless_told():
    """alloc.rs: mimalloc's purges reset memory (MADV_FREE) instead of decommitting it, so a decode after other
    work reuses its pages without a fault each; MIMALLOC_PURGE_DECOMMITS in the environment wins."""
    if "MIMALLOC_PURGE_DECOMMITS" not in os.environ:
        assert core.allocator() == ("mimalloc", False)
    code = "from kafkalog.storage import _native; print(_native.allocator())"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "MIMALLOC_PURGE_DECOMMITS": "1"},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "('mimalloc', True)"


def test_the_core_is_built_under_ci():
    """`pip install -e .` builds the core where cargo is present (as on CI): a silent fallback to Python there
    would leave the fast path untested."""
    if os.environ.get("CI") == "true" and os.environ.get("KAFKALOG_NATIVE", "1") != "0":
        from kafkalog.storage.codec import native
        assert core is not None, f"the compiled record core is off: {native.REASON}"


def _fields(r) -> tuple:
    if isinstance(r, tuple):
        return r
    return (r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers], r.attributes,
            r.timestamp_delta, r.offset_delta, r.sequence, r.magic, r.crc)


def _python(batch: RecordBatch, full: bool, chunk: int | None = None):
    """The pure-Python decoder's outcome: the records' fields, or the error text."""
    with backend("python"):
        return _outcome(batch, full, chunk)


def _outcome(batch: RecordBatch, full: bool, chunk: int | None = None):
    try:
        if chunk:
            recs = [r for c in batch.record_chunks(full, chunk) for r in c]
        else:
            recs = batch.records() if full else batch.record_tuples()
        return [_fields(r) for r in recs]
    except KafkaLogError as e:
        return ("error", type(e).__name__, str(e))


def _v2_batches():
    for log in sorted(FIXTURES.rglob("*.log")):
        data = log.read_bytes()
        for b in iter_batches(memoryview(data), path=str(log)):
            if isinstance(b, RecordBatch):
                yield log, b


@needs_core
def test_every_fixture_batch_decodes_the_same():
    n = records = 0
    for _log, b in _v2_batches():
        for full in (False, True):
            got, want = _outcome(b, full), _python(b, full)
            assert got == want, (b, full)
        got_chunks, want_chunks = _outcome(b, True, 3), _python(b, True, 3)
        assert got_chunks == want_chunks
        n += 1
        records += len(want) if isinstance(want, list) else 0
    assert n > 100 and records > 1000, (n, records)


@needs_core
def test_native_records_are_records():
    """Same fields, defaults, equality, repr and pickling as the dataclass reference."""
    args = (5, TS, b"k", None)
    a, b = Record(*args), PyRecord(*args)
    assert repr(a) == repr(b)
    assert _fields(a) == _fields(b)
    full = (7, TS, None, b"v", [("h", None)], 1, 3, 2, 9, 2, None)
    assert repr(Record(*full)) == repr(PyRecord(*full))
    assert Record(*full) == Record(*full) and Record(*full) != Record(*args)
    assert pickle.loads(pickle.dumps(Record(*full))) == Record(*full)
    assert Record(*args).is_tombstone and not Record(*full).is_tombstone
    with pytest.raises(TypeError):
        hash(Record(*args))
    r = Record(*args)
    r.headers.append(("x", b"1"))
    assert Record(*args).headers == [] and r.headers == [("x", b"1")]
    with pytest.raises(AttributeError):  # read-only: fields are plain member slots, read at C speed
        r.offset = 6


blobs = st.one_of(st.none(), st.binary(max_size=300))
header_keys = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
headers = st.lists(st.tuples(header_keys, st.one_of(st.none(), st.binary(max_size=20))), max_size=3)


@needs_core
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=st.integers(0, 2**40),
       recs=st.lists(st.tuples(st.sampled_from([1, 1, 2, 1000]), st.integers(-10_000, 10**7), blobs, blobs,
                               headers), min_size=1, max_size=30),
       codec=st.sampled_from([0, 1, 2, 3, 4]), log_append=st.booleans(), seq=st.sampled_from([-1, 0, 2**31 - 3]))
def test_round_trips_decode_the_same(first, recs, codec, log_append, seq):
    out, offset = [], first
    for gap, t, k, v, h in recs:
        out.append((offset, TS + t, k, v, h))
        offset += gap  # gaps as after compaction
    recs = out
    raw = build_batch(recs, codec=codec, timestamp_type=1 if log_append else 0, producer_id=7 if seq >= 0 else -1,
                      producer_epoch=0 if seq >= 0 else -1, base_sequence=seq)
    b = next(iter_batches(memoryview(raw)))
    for full in (False, True):
        got = _outcome(b, full)
        assert got == _python(b, full)
        assert isinstance(got, list) and len(got) == len(recs)


@needs_core
def test_mutated_records_give_the_same_records_or_the_same_error():
    """Random byte changes in the records section (CRC recomputed by the builder's caller is irrelevant:
    records are decoded without a CRC check) -- every outcome, success or error text, is the same."""
    rng = random.Random(1234)
    base = [(i, TS + i * 5, b"key-%d" % i if i % 3 else None, b"v" * (i * 11 % 70) if i % 4 else None,
             [("h", b"x"), ("n", None), ("\u00e9", b"")] if i % 2 else []) for i in range(12)]
    good = bytearray(build_batch(base))
    errors = 0
    for _ in range(3000):
        buf = bytearray(good)
        for _ in range(rng.choice([1, 1, 2, 4])):
            i = rng.randrange(61, len(buf))
            buf[i] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        if rng.random() < 0.2:  # a different declared count
            buf[57:61] = rng.choice([0, 1, 11, 13, 1000, 2**31 - 1]).to_bytes(4, "big")
        b = RecordBatch(memoryview(bytes(buf)), 4096, "seg.log")
        for full in (False, True):
            got = _outcome(b, full)
            assert got == _python(b, full), bytes(buf).hex()
            errors += isinstance(got, tuple)
        assert _outcome(b, True, 5) == _python(b, True, 5)
    assert errors > 500  # the mutations really reach the error paths


@needs_core
def test_the_native_decoder_never_raises_on_hostile_arguments():
    """Out-of-range positions and counts are 'unusual' (None), never a crash."""
    data = bytes(build_batch([(0, TS, b"k", b"v", [])]))[61:]
    for count, p in [(1, 0), (1, len(data)), (2, 0), (0, 0), (10**9, 0), (1, 10**6)]:
        got = core.decode_records(data, count, 0, TS, None, -1, True, p, True)
        assert got is None or (count == 1 and p == 0 and len(got[0]) == 1)
    assert core.decode_records(b"", 0, 0, 0, None, -1, False) == ([], 0)
    assert core.decode_records(b"\x00" * 64, 3, 2**63 - 1, 0, None, -1, False) is None


_NO_CORE_SCRIPT = r"""
import json, sys
from pathlib import Path
from kafkalog.storage.records import RecordBatch, iter_batches
from kafkalog.storage.codec import native
from kafkalog.storage.records import record
assert native.core is None and "KAFKALOG_NATIVE=0" in native.REASON, native.REASON
assert record.Record is record.PyRecord
out = []
for log in sorted(Path(sys.argv[1]).rglob("*.log")):
    for b in iter_batches(memoryview(log.read_bytes())):
        if isinstance(b, RecordBatch):
            out.append([[r.offset, r.timestamp, (r.key or b"").hex(), None if r.value is None else r.value.hex(),
                         len(r.headers), r.sequence] for r in b.records()])
print(json.dumps(out))
"""


def test_kafkalog_native_0_uses_the_python_reference():
    """With KAFKALOG_NATIVE=0 (or no core built) the pure-Python decoder does the work, with the same
    results."""
    env = dict(os.environ, KAFKALOG_NATIVE="0")
    res = subprocess.run([sys.executable, "-c", _NO_CORE_SCRIPT, str(FIXTURES)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    theirs = json.loads(res.stdout)
    mine = []
    for log in sorted(FIXTURES.rglob("*.log")):
        for b in iter_batches(memoryview(log.read_bytes())):
            if isinstance(b, RecordBatch):
                mine.append([[r.offset, r.timestamp, (r.key or b"").hex(),
                              None if r.value is None else r.value.hex(), len(r.headers), r.sequence]
                             for r in b.records()])
    assert theirs == mine and len(mine) > 100


# ------------------------------------------------------------------------------------- Arrow output


@needs_core
def test_to_arrow_is_the_same_with_and_without_the_core():
    """Every fixture segment (v0, v1, v2, every codec, control and transactional batches) as Arrow: the
    columns decoded natively equal the columns built from the Python decoder's tuples, value for value."""
    from kafkalog.storage.records import RECORD_COLUMNS, to_arrow

    rows = 0
    for log in sorted(FIXTURES.rglob("*.log")):
        data = log.read_bytes()
        got = to_arrow(data, topic=log.parent.name, partition=0, segment=log.name)
        want = to_arrow(data, topic=log.parent.name, partition=0, segment=log.name, native=False)
        assert got.schema == want.schema and [f.name for f in got.schema] == [n for n, _ in RECORD_COLUMNS]
        assert got.equals(want), log
        rows += got.num_rows
    assert rows > 1000


@needs_core
def test_arrow_batch_level_string_columns_one_value_or_many():
    """topic, segment and codec repeat one value per batch: a chunk where every batch has the same one (Arrow's
    repeat, unchecked) and one where they differ (built run by run) give each row its own batch's value."""
    require_modules("pyarrow", extra="spark")
    import pyarrow as pa

    from kafkalog.storage.codec.compression import decompress

    plain = build_batch([(i, TS + i, b"k", b"v%d" % i, []) for i in range(3)])
    packed = build_batch([(i, TS + i, b"k", b"v%d" % i, []) for i in range(2)], codec=1)  # gzip
    names = [("orders", 0, "00000000000000000000.log"), ("t", 7, "00000000000000000042.log")]

    def chunk(pieces):
        cols = core.ArrowRecords(1 << 16)
        for batch, piece in pieces:
            codec = batch[22] & 0x07
            data = decompress(codec, bytes(batch[61:])) if codec else None
            assert cols.add_v2(batch, 0, piece, None, data) is not None
        return pa.record_batch(cols.finish(names)).to_pydict()

    same = chunk([(plain, 0), (plain, 0)])
    assert same["topic"] == ["orders"] * 6 and same["segment"] == [names[0][2]] * 6
    assert same["codec"] == ["none"] * 6 and same["partition"] == [0] * 6
    mixed = chunk([(plain, 0), (packed, 1), (plain, 0)])
    assert mixed["topic"] == ["orders"] * 3 + ["t"] * 2 + ["orders"] * 3
    assert mixed["segment"] == [names[0][2]] * 3 + [names[1][2]] * 2 + [names[0][2]] * 3
    assert mixed["codec"] == ["none"] * 3 + ["gzip"] * 2 + ["none"] * 3
    assert mixed["partition"] == [0] * 3 + [7] * 2 + [0] * 3
    assert mixed["value"] == [b"v0", b"v1", b"v2", b"v0", b"v1", b"v0", b"v1", b"v2"]


@needs_core
def test_arrow_filters_and_bad_batches_are_the_same():
    """The pushed-down offset/timestamp window, and a batch that fails to decode: the same rows, the same
    error (and nothing added by the failed batch)."""
    from kafkalog.storage.records import RecordColumns

    rng = random.Random(99)
    good = build_batch([(i, TS + i, b"k%d" % i, b"v" * i, [("h", b"%d" % i)] if i % 2 else []) for i in range(40)],
                       producer_id=3, producer_epoch=0, base_sequence=2**31 - 10)
    for _ in range(400):
        buf = bytearray(good)
        for _ in range(rng.choice([0, 1, 2])):
            buf[rng.randrange(61, len(buf))] = rng.randrange(256)
        keep = rng.choice([None, (5, 30, -(1 << 63), 1 << 63), (0, 1 << 63, TS + 10, TS + 12)])
        out = []
        for native in (True, False):
            cols = RecordColumns(native)
            cols.add_batch(RecordBatch(memoryview(good), 0), "t", 1, "s.log")
            try:
                n = cols.add_batch(RecordBatch(memoryview(bytes(buf)), len(good)), "t", 1, "s.log", keep)
                err = None
            except KafkaLogError as e:
                n, err = None, str(e)
            out.append((n, err, cols.to_arrow()))
        (n1, e1, a1), (n2, e2, a2) = out
        assert (n1, e1) == (n2, e2)
        assert a1.equals(a2)


@pytest.mark.parametrize("native", [pytest.param(True, marks=needs_core), False], ids=["native", "python"])
@pytest.mark.parametrize("window", [{}, {"from_offset": 30, "to_offset": 150}, {"from_time": 1, "to_time": 2**62},
                                    {"include_control": False}])
def test_parquet_export_equals_the_row_export(tmp_path, request, window, native):
    """`export --format parquet` (batches straight into Arrow columns) and the JSON Lines rows (the records
    layer's tuples) hold the same rows, field for field, with and without a filter, on every fixture dir."""
    require_modules("pyarrow", extra="spark")
    from kafkalog.storage.engine.export import ExportFilter, iter_export_rows
    from kafkalog.storage.engine.parquet import export_parquet, iter_parquet_rows

    if not native:
        stack = contextlib.ExitStack()
        stack.enter_context(backend("python"))
        request.addfinalizer(stack.close)
    total = 0
    for data in sorted(FIXTURES.glob("*/data")):
        flt = ExportFilter(**window)
        out = tmp_path / data.parent.name
        st = export_parquet([data], out, flt, row_group_rows=64)
        got = [r for f in sorted(out.glob("*.parquet")) for r in iter_parquet_rows(f)]
        stats = type(st)()
        want = [dict(r, headers=[tuple(h) for h in r["headers"]])
                for r in iter_export_rows(sorted(p for p in data.iterdir() if p.is_dir() and "-" in p.name
                                                 and p.name.rsplit("-", 1)[1].isdigit()), flt, stats)]
        key = lambda r: (r["topic"], r["partition"], r["offset"], r["position"])  # noqa: E731
        assert sorted(got, key=key) == sorted(want, key=key), data
        assert (st.records, st.batches) == (stats.records, stats.batches) == (len(got), st.batches)
        total += len(got)
    assert total > (1000 if not window or "include_control" in window else 100), total


def _scan_outcome(data, native: bool, **kw):
    from kafkalog.storage.records import scan_crc

    try:
        s = scan_crc(data, native=native, **kw)
        return list(s.positions), bytes(s.valid), s.stop_position, s.stop_reason
    except KafkaLogError as e:
        return ("error", type(e).__name__, str(e))


@needs_core
def test_scan_crc_is_the_same_with_and_without_the_core():
    """The one-pass native scan + CRC32C against LogScanner + is_valid() per entry: every fixture segment
    (legacy entries included), then mutated bytes (bad CRCs, bad sizes, torn tails, partial entries): the same
    positions, validity, stop position and reason, or the same error."""
    rng = random.Random(12)
    logs = sorted(FIXTURES.rglob("*.log"))
    entries = 0
    for log in logs:
        data = log.read_bytes()
        want = _scan_outcome(data, False, path=str(log), position_base=7)
        assert _scan_outcome(data, True, path=str(log), position_base=7) == want, log
        entries += len(want[0]) if want[0] != "error" else 0
    assert entries > 100
    base = b"".join(numbered_batches(0, 6)) + build_legacy([(0, TS, b"k", b"v")], magic=1) + b"".join(
        numbered_batches(10, 3))
    for _ in range(600):
        data = bytearray(base if rng.random() < 0.5 else logs[rng.randrange(len(logs))].read_bytes()[:4096])
        for _ in range(rng.randint(1, 3) if data else 0):
            i = rng.randrange(len(data))
            data[i] = rng.choice([0, 0xFF, 13, 2, 1, rng.randrange(256)])
        if rng.random() < 0.3:
            data = data[: rng.randrange(len(data) + 1)]
        kw = {"max_batch_size": rng.choice([None, 100, 1 << 20])}
        assert _scan_outcome(bytes(data), True, **kw) == _scan_outcome(bytes(data), False, **kw)


@needs_core
def test_iter_arrow_chunks_are_the_same_with_and_without_the_core():
    """iter_arrow's native runs of plain entries and its records-layer steps (compressed, legacy, unusual
    entries) at every chunk boundary: the same Arrow batches, or the same error, on fixtures and mutations."""
    require_modules("pyarrow", extra="spark")
    import pyarrow as pa

    from kafkalog.storage.records import iter_arrow

    def outcome(data, native, rows):
        try:
            parts = list(iter_arrow(data, topic="t", partition=3, segment="s.log", position_base=5, rows=rows,
                                    native=native))
            return [p.num_rows for p in parts], pa.Table.from_batches(parts) if parts else None
        except KafkaLogError as e:
            return ("error", type(e).__name__, str(e)), None

    rng = random.Random(5)
    logs = sorted(FIXTURES.rglob("*.log"))
    for i in range(120):
        data = bytearray(logs[i % len(logs)].read_bytes()[:20000])
        if i >= len(logs) and data:
            for _ in range(rng.randint(1, 2)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        rows = rng.choice([1, 7, 100, 65536])
        got, want = outcome(bytes(data), True, rows), outcome(bytes(data), False, rows)
        assert got[0] == want[0], logs[i % len(logs)]
        assert (got[1] is None and want[1] is None) or got[1].equals(want[1])


@needs_core
@pytest.mark.parametrize("legacy", [False, True], ids=["v2", "legacy"])
@pytest.mark.parametrize("include_control", [True, False])
def test_parquet_export_native_runs_stop_where_the_records_layer_judges(tmp_path, monkeypatch, include_control,
                                                                        legacy):
    """The export's native runs (plain v2 batches and plain v0/v1 messages taken without a Python object, their
    CRC checked) stop at any damage, so the outcome is the pure-Python path's: the same rows up to it, the same
    error (class, text, position); an empty batch and row groups filling mid-run are counted the same."""
    require_modules("pyarrow", extra="spark")
    import shutil

    from builders import generated_partition, legacy_segment_bytes

    from kafkalog.storage.engine.export import ExportFilter
    from kafkalog.storage.engine.parquet import export_parquet, iter_parquet_rows

    src = tmp_path / "src" / "t-0"
    if legacy:  # v0 and v1 plain messages, a run of gzip wrappers, then more plain v1 messages
        src.mkdir(parents=True)
        data = (legacy_segment_bytes(150, magic=0) + legacy_segment_bytes(120, magic=1, codec=1, per=6)
                + legacy_segment_bytes(300, magic=1))
        (src / "00000000000000000000.log").write_bytes(data)
    else:
        generated_partition(src, 900, batch_records=30)
    log = next(src.glob("*.log"))
    size = log.stat().st_size
    rng = random.Random(7)
    cases = [None] + [("flip", rng.randrange(size)) for _ in range(12)] + [("cut", rng.randrange(size))
                                                                            for _ in range(4)]

    def outcome(native: bool, case, i: int):
        d = tmp_path / f"{'n' if native else 'p'}{i}" / "t-0"
        shutil.copytree(src, d)
        data = bytearray(log.read_bytes())
        if case is not None and case[0] == "flip":
            data[case[1]] ^= 0x5A
        elif case is not None:
            del data[case[1]:]
        (d / log.name).write_bytes(bytes(data))
        try:
            out = d.parent / "out"
            with backend("native" if native else "python"):
                st = export_parquet([d], out, ExportFilter(include_control=include_control), row_group_rows=100)
            return ("ok", st.records, st.batches,
                    [r for f in sorted(out.glob("*.parquet")) for r in iter_parquet_rows(f)])
        except KafkaLogError as e:
            return ("error", type(e).__name__, str(e).replace(str(d.parent), "<dir>"))

    kinds = set()
    for i, case in enumerate(cases):
        a, b = outcome(True, case, i), outcome(False, case, i)
        assert a == b, case
        kinds.add(a[0])
    assert kinds == {"ok", "error"}
