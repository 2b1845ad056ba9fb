"""The cleaner's per-record loops in the compiled core (``cleaner.rs``) against their Python reference.

``map_records`` (the offset map pass) and ``scan_retained`` (the keep/drop rule) must give exactly what
``py_map_records`` / ``py_scan_retained`` give, or "slow" (the batch then takes the careful path). The native
loops may be stricter (odd zig-zag lengths, non-shortest varints that a CRC-valid Kafka batch never holds), never
more lenient: whenever the native loop accepts a records section, the Python loop accepts it with the same result.
Checked on every v2 batch of every real broker fixture (no batch may be slow natively and fast in Python there),
on generated batches (keys and values of every varint width, headers, tombstones, null keys), and on mutated
bytes.
"""

from __future__ import annotations

import os
import random
from hashlib import md5
from pathlib import Path

import pytest

from kafkalog.storage.codec.native import core
from kafkalog.storage.engine.cleaner import records as cr
from kafkalog.storage.engine.cleaner.offset_map import OffsetMap
from kafkalog.storage.records import RecordBatch, build_batch, iter_batches
from kafkalog.storage.records.record_grammar import Slow

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TS = 1_700_000_000_000

pytestmark = pytest.mark.skipif(core is None and os.environ.get("CI") != "true",
                                reason="the compiled record core is not built")


def _map(fn, data: bytes, count: int, base: int):
    m = OffsetMap(1 << 20, spill_keys=1 << 20)
    try:
        fn(data, count, base, m)
    except (Slow, IndexError):
        return "slow", None
    return "ok", ({k: c[0] for k, c in m.raw.items()}, {d: c[0] for d, c in m.cells.items()})


def _native_map(data, count, base, m):
    if not core.map_records(data, count, base, m.raw, m.new_cell):
        raise Slow


def _scan(fn, data: bytes, count: int, base: int, base_ts: int, latest: int, m: OffsetMap, keep: bool):
    try:
        kept, n, invalid = fn(data, count, base, base_ts, latest, m, keep)
    except (Slow, IndexError):
        return "slow", None
    return "ok", ([tuple(k) for k in kept], n, invalid)


def _native_scan(data, count, base, base_ts, latest, m, keep):
    r = core.scan_retained(data, count, base, base_ts, latest, m.raw, m.get_unknown, keep)
    if r is None:
        raise Slow
    return r


def _compare(data: bytes, count: int, base: int, base_ts: int, *, exact: bool) -> tuple[bool, bool]:
    """Native vs Python on one records section: returns (native accepted, python accepted)."""
    got, want = _map(_native_map, data, count, base), _map(cr.py_map_records, data, count, base)
    if got[0] == "ok":
        assert want == got
    elif exact:
        assert want[0] == "slow", "the native map loop gave up on a batch the Python loop maps"
    m = OffsetMap(1 << 20, spill_keys=1 << 20)
    if want[0] == "ok":
        cr.py_map_records(data, count, base, m)
    ok = got[0] == "ok", want[0] == "ok"
    for latest in (base - 1, base + count // 2, base + count + 5):
        for keep in (True, False):
            g = _scan(_native_scan, data, count, base, base_ts, latest, m, keep)
            w = _scan(cr.py_scan_retained, data, count, base, base_ts, latest, m, keep)
            if g[0] == "ok":
                assert w == g
            elif exact:
                assert w[0] == "slow", "the native scan gave up on a batch the Python scan reads"
    return ok


def _section(b: RecordBatch) -> bytes:
    data = b.decompressed_payload()
    return bytes(data)


def test_every_fixture_batch_maps_and_scans_the_same():
    n = 0
    for log in sorted(FIXTURES.rglob("*.log")):
        for b in iter_batches(memoryview(log.read_bytes()), path=str(log)):
            if not isinstance(b, RecordBatch) or b.is_control or not b.is_valid():
                continue
            _compare(_section(b), b.records_count, b.base_offset, b.base_timestamp, exact=True)
            n += 1
    assert n > 100 or os.environ.get("CI") != "true"


def _generated() -> list[bytes]:
    rnd = random.Random(7)
    out = []
    sizes = (0, 1, 10, 63, 64, 127, 128, 8191, 8192, 20000)
    for i in range(60):
        recs = []
        for j in range(rnd.randint(1, 12)):
            key = None if rnd.random() < 0.15 else bytes(rnd.getrandbits(8) for _ in range(rnd.choice(sizes[:7])))
            if key is not None and rnd.random() < 0.5:
                key = b"k%d" % rnd.randint(0, 5)  # repeated keys
            value = None if rnd.random() < 0.2 else b"v" * rnd.choice(sizes)
            headers = [(f"h{h}", None if rnd.random() < 0.3 else b"x" * rnd.choice(sizes[:6]))
                       for h in range(rnd.choice((0, 0, 1, 3)))]
            recs.append((100 + i * 20 + j * rnd.choice((1, 1, 2)), TS + rnd.randint(-5000, 5_000_000), key, value,
                         headers))
        recs.sort(key=lambda r: r[0])
        out.append(build_batch(recs, codec=rnd.choice((0, 0, 1, 3, 4))))
    return out


def test_generated_batches_map_and_scan_the_same():
    accepted = 0
    for raw in _generated():
        b = next(iter_batches(raw))
        nat, py = _compare(_section(b), b.records_count, b.base_offset, b.base_timestamp, exact=True)
        accepted += nat
    # values of 8 KiB and more (3-byte length varints) take the careful path in both loops
    assert accepted >= 10


def test_mutated_sections_never_accepted_natively_where_python_differs():
    rnd = random.Random(11)
    batches = [next(iter_batches(raw)) for raw in _generated()[:20]]
    native_only_slow = tried = 0
    for _ in range(1500):
        b = rnd.choice(batches)
        data = bytearray(_section(b))
        if not data:
            continue
        for _ in range(rnd.choice((1, 1, 2, 4))):
            i = rnd.randrange(len(data))
            data[i] = rnd.choice((0, 1, 2, 0x7F, 0x80, 0xFF, rnd.getrandbits(8)))
        if rnd.random() < 0.1:
            data = data[: rnd.randrange(len(data))]
        count = b.records_count + rnd.choice((0, 0, 0, 1, -1))
        nat, py = _compare(bytes(data), count, b.base_offset, b.base_timestamp, exact=False)
        native_only_slow += py and not nat
        tried += 1
    assert tried > 1000
    assert native_only_slow < tried // 4  # stricter only on unusual encodings


def test_hostile_arguments_are_slow_not_crashes():
    m = OffsetMap(1 << 20)
    for data, count in ((b"", 1), (b"\xff" * 20, 3), (b"\x80\x80\x80", 1), (b"\x02\x00", 5)):
        assert core.map_records(data, count, 0, m.raw, m.new_cell) is False
        assert core.scan_retained(data, count, 0, 0, 10, m.raw, m.get_unknown, True) is None
    # an offset delta that overflows the base offset
    raw = build_batch([(5, TS, b"k", b"v"), (6, TS, b"l", b"w")])
    data = _section(next(iter_batches(raw)))
    assert core.map_records(data, 2, (1 << 63) - 1, m.raw, m.new_cell) is False
    assert core.scan_retained(data, 2, (1 << 63) - 1, 0, -1, m.raw, m.get_unknown, True) is None
    with pytest.raises(TypeError):
        core.map_records(bytearray(data), 1, 0, m.raw, m.new_cell)


def test_the_native_map_answers_like_the_dict_map():
    """put/get/merge_hash/items/freeze on the native map (``OffsetMapCore``) and on the reference dict map."""
    rnd = random.Random(5)
    keys = [os.urandom(rnd.choice([0, 1, 8, 64, 65, 200])) for _ in range(2000)]
    native, plain = OffsetMap(), OffsetMap(spill_keys=1 << 30)
    assert native.native is not None and plain.native is None
    for off in range(15_000):
        k = rnd.choice(keys)
        if rnd.random() < 0.1:  # the parallel pass's merge: only a larger offset wins
            d, o, raw = md5(k).digest(), off - rnd.randint(0, 9000), k if rnd.random() < 0.5 else None
            native.merge_hash(d, o, key=raw)
            plain.merge_hash(d, o, key=raw)
        else:
            native.put(k, off)
            plain.put(k, off)
        assert native.size == plain.size
    assert sorted(native.items()) == sorted(plain.items())
    for k in keys[:300] + [b"never-put", b""]:
        assert native.get(k) == plain.get(k)
        assert native.get_hash(md5(k).digest()) == plain.get_hash(md5(k).digest())
    for m in (native, plain):
        m.start, m.latest_offset = 0, 15_000
        m.freeze()
    for lo in range(0, 15_000, 131):
        hi = lo + rnd.randint(0, 40)
        assert native.maps_none_of(lo, hi) == plain.maps_none_of(lo, hi)
    native.clear()
    assert native.size == 0 and native.get(keys[0]) == -1
