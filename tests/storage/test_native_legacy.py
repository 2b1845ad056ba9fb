"""Message sets v0/v1 decoded by the compiled record core (``storage/native/src/legacy.rs``) against the
pure-Python reference (``storage/records/legacy.py`` under ``backend("python")``).

The contract is the v2 decoder's: for the same entry the core gives exactly the records, tuples and Arrow rows
the Python decoder gives, or hands the entry back, and the Python decoder raises its error -- so error class,
message, file and byte position are identical with and without the core. Checked on every v0/v1 entry of the
broker fixtures, on generated sets of every codec (LogAppendTime wrappers, wrapper offset 0, v0 inside v1), on
hypothesis round trips and on more than a thousand mutated and truncated entries (plain messages, compressed
payloads, and wrappers around mutated inner messages). ``dump --deep``'s per-message fields (with each message's
own CRC check) likewise.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from builders import TS, legacy_message_sets, legacy_segment_bytes, numbered_batches
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.codec.compression import compress
from kafkalog.storage.codec.native import backend, core
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.records import build_legacy, iter_batches
from kafkalog.storage.records.legacy import LegacyBatch
from kafkalog.storage.records.record import PyRecord

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

pytestmark = pytest.mark.skipif(core is None and os.environ.get("CI") != "true",
                                reason="the compiled record core is not built")


def _fields(r) -> tuple:
    if isinstance(r, tuple):
        return r
    return (r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers], r.attributes,
            r.timestamp_delta, r.offset_delta, r.sequence, r.magic, r.crc)


def _error(e: KafkaLogError) -> tuple:
    return ("error", type(e).__name__, str(e), e.path, e.position)


def _entries(data: bytes, path: str | None = None, position_base: int = 0) -> list:
    """Fresh batch objects (nothing cached from an earlier decode) of every entry of ``data``, and the scanner's
    error (a tuple) when it stops on one."""
    out: list = []
    try:
        for b in iter_batches(memoryview(data), path=path, position_base=position_base):
            out.append(b)
    except KafkaLogError as e:
        out.append(_error(e))
    return out


def _outcome(b, full: bool | None):
    if isinstance(b, tuple):
        return b
    try:
        if full is None:  # what dump --deep shows, with each message's own CRC check
            return b.message_fields() if isinstance(b, LegacyBatch) else None
        return [_fields(r) for r in (b.records() if full else b.record_tuples())]
    except KafkaLogError as e:
        return _error(e)


def _both(data: bytes, path: str | None = None, position_base: int = 0) -> tuple[list, list]:
    """Per entry of ``data``, records, tuples and dump's message fields: the core's outcomes, then the pure-Python
    reference's."""
    got = [(_outcome(b, True), _outcome(b, False), _outcome(b, None)) for b in _entries(data, path, position_base)]
    with backend("python"):
        want = [(_outcome(b, True), _outcome(b, False), _outcome(b, None))
                for b in _entries(data, path, position_base)]
    return got, want


def _arrow(data: bytes, native: bool, rows: int = 1 << 62):
    import pyarrow as pa

    from kafkalog.storage.records import iter_arrow
    try:
        parts = list(iter_arrow(data, topic="t", partition=2, segment="s.log", position_base=5, rows=rows,
                                native=native))
        return [p.num_rows for p in parts], pa.Table.from_batches(parts) if parts else None
    except KafkaLogError as e:
        return _error(e), None


def _arrow_same(data: bytes, rows: int = 1 << 62) -> None:
    require_modules("pyarrow", extra="spark")
    got = _arrow(data, True, rows)
    with backend("python"):
        want = _arrow(data, False, rows)
    assert got[0] == want[0]
    assert (got[1] is None and want[1] is None) or got[1].equals(want[1]), (got[1], want[1])


def _legacy_fixture_segments() -> list[Path]:
    out = []
    for log in sorted(FIXTURES.rglob("*.log")):
        if any(isinstance(b, LegacyBatch) for b in _entries(log.read_bytes())):
            out.append(log)
    return out


def test_the_core_decodes_plain_messages_and_wrappers():
    """The core takes every generated set itself (no hand-back), and ``backend("python")`` switches it off."""
    for entry in legacy_message_sets():
        for b in _entries(entry):
            assert core.legacy_records(b.buf, b.decompress_limit, True) is not None, b
            assert core.legacy_records(b.buf, b.decompress_limit, False) is not None, b
            assert core.legacy_messages(b.buf, b.decompress_limit) is not None, b
            assert type(b.records()[0]) is not PyRecord
    with backend("python"):
        b = _entries(legacy_message_sets()[0])[0]
        assert type(b.records()[0]) is PyRecord


def test_every_legacy_fixture_entry_decodes_the_same():
    logs = _legacy_fixture_segments()
    assert len(logs) >= 5, logs
    records = 0
    for log in logs:
        data = log.read_bytes()
        got, want = _both(data, str(log), 3)
        assert got == want, log
        records += sum(len(w[0]) for w in want if isinstance(w[0], list))
        _arrow_same(data)
    assert records > 500, records


@pytest.mark.parametrize("rows", [1, 3, 1 << 62])
def test_generated_sets_decode_the_same(rows):
    sets = legacy_message_sets()
    data = b"".join(sets)
    got, want = _both(data, "gen.log", 11)
    assert got == want
    assert all(isinstance(g[0], list) and g[0] for g in got)
    # the wrapper rules themselves: LogAppendTime inner timestamps, the offset-0 wrapper, v0 inside v1
    by_first = {recs[0][0]: recs for recs, _, _ in got}
    assert {r[1] for r in by_first[210]} == {TS + 999}  # LogAppendTime gzip wrapper
    assert [r[0] for r in by_first[0]] == [0, 1, 2, 3]  # wrapper offset 0: inner offsets as they are
    assert [r[0] for r in by_first[400]] == [400, 401, 402] and {r[9] for r in by_first[400]} == {0}
    _arrow_same(data, rows)
    # with v2 batches around them: the native runs of both kinds
    mixed = b"".join(numbered_batches(0, 3)) + data + b"".join(numbered_batches(500, 2))
    _arrow_same(mixed, rows)


def test_segments_of_every_codec_decode_the_same():
    for magic in (0, 1):
        for codec in (0, 1, 2, 3):
            data = legacy_segment_bytes(60, magic=magic, codec=codec, per=7)
            got, want = _both(data)
            assert got == want
            assert sum(len(g[0]) for g in got) == 60
            _arrow_same(data, 25)


blobs = st.one_of(st.none(), st.binary(max_size=200))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=st.integers(0, 2**40), magic=st.sampled_from([0, 1]), codec=st.sampled_from([0, 1, 2, 3]),
       log_append=st.booleans(), wrapper_zero=st.booleans(),
       recs=st.lists(st.tuples(st.integers(-10_000, 10**7), blobs, blobs), min_size=1, max_size=20))
def test_round_trips_decode_the_same(first, magic, codec, log_append, wrapper_zero, recs):
    kw = {}
    if magic == 1 and log_append:
        kw = {"timestamp_type": 1, "log_append_time": TS + 77}
    if codec and wrapper_zero:
        kw["wrapper_offset"] = 0
    raw = build_legacy([(first + i, TS + t, k, v) for i, (t, k, v) in enumerate(recs)], magic=magic, codec=codec,
                       **kw)
    got, want = _both(raw)
    assert got == want
    flat = [r for g in got for r in g[1]]
    assert len(flat) == len(recs)
    assert [(r[2], r[3]) for r in flat] == [(k, v) for _, k, v in recs]
    _arrow_same(raw)


def _mutants(rng: random.Random, n: int):
    """Mutated and truncated v0/v1 entries: bytes flipped anywhere (headers, sizes, magic, attributes, lengths,
    compressed payloads), wrappers around mutated inner messages, cut entries."""
    sets = legacy_message_sets()
    fixture = [bytes(b.buf) for log in _legacy_fixture_segments()[:6] for b in _entries(log.read_bytes())[:20]
               if isinstance(b, LegacyBatch)]
    pool = sets + fixture
    for i in range(n):
        kind = i % 3
        if kind == 2:
            # a wrapper around mutated inner messages (compressed again, so the inner parse is what is hit)
            magic = rng.choice([0, 1])
            inner = bytearray(b"".join(build_legacy([(j if magic == 0 else j, TS + j, b"k%d" % j, b"v" * j)],
                                                    magic=magic) for j in range(rng.randint(1, 4))))
            for _ in range(rng.randint(1, 3)):
                inner[rng.randrange(len(inner))] = rng.choice([0, 0xFF, 1, 2, 8, 13, rng.randrange(256)])
            if rng.random() < 0.3:
                inner = inner[:rng.randrange(len(inner) + 1)]
            codec = rng.choice([1, 2, 3])
            yield build_legacy([], magic=magic, codec=codec, wrapper_offset=rng.choice([0, 3, 10**6]),
                               wrapper_timestamp=TS, timestamp_type=rng.choice([0, 1]),
                               compressed_payload=compress(codec, bytes(inner), magic=magic))
            continue
        data = bytearray(rng.choice(pool))
        for _ in range(rng.randint(1, 3)):
            j = rng.randrange(len(data)) if kind == 0 or len(data) < 40 else rng.randrange(12, 40)
            data[j] = rng.choice([0, 0xFF, 0x80, 1, 2, 3, 4, 7, 8, 13, rng.randrange(256)])
        if rng.random() < 0.25:
            data = data[:rng.randrange(len(data) + 1)]
        yield bytes(data)


def test_mutated_entries_decode_or_fail_the_same():
    rng = random.Random(1207)
    n = errors = 0
    for i, data in enumerate(_mutants(rng, 1500)):
        got, want = _both(data, "m.log", 100)
        assert got == want, data.hex()
        # the Arrow path on every tenth (a table per entry is slower)
        if i % 10 == 0:
            _arrow_same(data, rng.choice([1, 1 << 62]))
        n += 1
        errors += sum(1 for g in got if not isinstance(g[0], list))
    assert n == 1500 and errors > 100, errors


def test_entries_built_by_hand_decode_or_fail_the_same():
    """The wrapper rules' errors: a null wrapper value, zstd below v2, an unknown codec, compressed inner
    messages, no inner messages, a wrapper offset below its last relative offset, a short read ending the inner
    sequence."""
    inner = build_legacy([(0, TS, b"a", b"b"), (1, TS, b"c", b"d")], magic=1)
    cases = [
        build_legacy([(5, TS, None, None)], magic=1, codec=0)[:17] + bytes([1, 1]) + b"\x00" * 8 + b"\xff" * 8,
        build_legacy([], magic=1, codec=1, wrapper_offset=1, compressed_payload=compress(1, inner, magic=1),
                     wrapper_timestamp=TS)[:17] + b"\x04" + b"\x00" * 30,
        build_legacy([], magic=1, codec=1, wrapper_offset=0, wrapper_timestamp=TS, compressed_payload=b""),
        build_legacy([], magic=1, codec=1, wrapper_offset=7, wrapper_timestamp=TS,
                     compressed_payload=compress(1, build_legacy([(0, TS, b"a", b"b")], magic=1, codec=2),
                                                 magic=1)),
        build_legacy([], magic=1, codec=2, wrapper_offset=0, wrapper_timestamp=TS,
                     compressed_payload=compress(2, inner[:20], magic=1)),
        build_legacy([], magic=1, codec=3, wrapper_offset=0, wrapper_timestamp=TS,
                     compressed_payload=compress(3, inner + inner[:30], magic=1)),
        build_legacy([], magic=0, codec=1, wrapper_offset=9, wrapper_timestamp=-1,
                     compressed_payload=compress(1, inner, magic=0)),
    ]
    for attrs in (4, 5, 7):
        e = bytearray(legacy_message_sets()[5])
        e[17] = attrs
        cases.append(bytes(e))
    # a wrapper whose offset is below its last inner relative offset
    cases.append(build_legacy([], magic=1, codec=1, wrapper_offset=1, wrapper_timestamp=TS,
                              compressed_payload=compress(1, build_legacy([(0, TS, b"a", b"b"), (5, TS, b"c", b"d")],
                                                                          magic=1), magic=1)))
    for data in cases:
        got, want = _both(data, "h.log", 0)
        assert got == want, data.hex()
        _arrow_same(data)
