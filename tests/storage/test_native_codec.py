"""Native decompression (storage/native/src/codec.rs) against the Python codec packages (the reference).

The contract is the core's: ``core.decompress`` returns exactly the bytes ``decompress_python`` returns, or
``None`` where the Python path raises -- which then runs and raises its own error, so the error class, text and
byte position are the same with and without the core. ``decode_compressed`` (decompress and decode in one native
call, the decompressed bytes never a Python object) returns what ``decode_records`` returns on those bytes.
Checked on every compressed batch and wrapper of every fixture (v0, v1, v2; every codec), hypothesis round
trips for every codec and magic, mutated and truncated payloads, and decompression bombs.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from builders import zstd_window_batches
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.storage.codec import compression as C
from kafkalog.storage.codec.native import backend, core
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.records import RecordBatch, build_batch, build_legacy, iter_batches
from kafkalog.storage.records.legacy import LegacyBatch

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TS = 1_700_000_000_000
CODECS = [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]

needs_core = pytest.mark.skipif(core is None and os.environ.get("CI") != "true",
                                reason="the compiled record core is not built")
pytestmark = needs_core


def _error(e: KafkaLogError) -> tuple:
    return ("error", type(e).__name__, str(e), getattr(e, "position", None))


def _native_then_python(codec: int, data, magic: int, limit: int):
    """What ``decompress`` gives with the core: its bytes, else the Python path's verdict."""
    try:
        return C.decompress(codec, data, magic=magic, limit=limit)
    except KafkaLogError as e:
        return _error(e)


def _reference(codec: int, data, magic: int, limit: int):
    try:
        return C.decompress_python(codec, data, magic=magic, limit=limit)
    except KafkaLogError as e:
        return _error(e)


def _same(codec: int, data, magic: int = 2, limit: int = C.DEFAULT_DECOMPRESS_LIMIT):
    want = _reference(codec, data, magic, limit)
    got = core.decompress(codec, data, magic, limit)
    if isinstance(want, bytes):
        assert got == want, (codec, magic, len(data))
    else:
        assert got is None, (codec, magic, want)
    assert _native_then_python(codec, data, magic, limit) == want
    return want


def _python_records(batch):
    """The records of ``batch`` with no native code at all (decoder nor decompressor)."""
    with backend("python"):
        return _records(batch)


def _records(batch):
    try:
        return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers], r.attributes,
                 r.timestamp_delta, r.offset_delta, r.sequence, r.magic, r.crc) for r in batch.records()]
    except KafkaLogError as e:
        return _error(e)


def _compressed_payloads():
    """(codec, magic, payload) of every compressed v2 batch and v0/v1 wrapper of the fixtures."""
    for log in sorted(FIXTURES.rglob("*.log")):
        for b in iter_batches(memoryview(log.read_bytes()), path=str(log)):
            if isinstance(b, RecordBatch):
                if b.codec:
                    yield b.codec, 2, bytes(b.records_payload())
            else:
                msg = b.message()
                if msg.attributes & 7 and msg.value is not None:
                    yield msg.attributes & 7, msg.magic, bytes(msg.value)


def test_every_fixture_payload_decompresses_the_same():
    seen = set()
    for codec, magic, payload in _compressed_payloads():
        assert isinstance(_same(codec, payload, magic), bytes)
        seen.add((codec, magic))
    # the fixtures hold every codec in v2 and gzip/snappy/lz4 in v0 and v1
    assert {c for c, m in seen if m == 2} == set(CODECS), seen
    assert {(c, m) for c, m in seen if m < 2} >= {(c, m) for c in (1, 2, 3) for m in (0, 1)}, seen


def test_every_fixture_batch_decodes_the_same():
    n = 0
    for log in sorted(FIXTURES.rglob("*.log")):
        for b in iter_batches(memoryview(log.read_bytes()), path=str(log)):
            compressed = b.codec if isinstance(b, RecordBatch) else b.message().attributes & 7
            if compressed:
                assert _records(b) == _python_records(b)
                n += 1
    assert n > 20, n


def _spec_vectors():
    """Small hand-made payloads at the framings' edges."""
    yield C.LZ4, 0, C.compress(C.LZ4, b"kafka" * 100, magic=0)          # KAFKA-3160 header checksum
    yield C.LZ4, 1, C.compress(C.LZ4, b"kafka" * 100, magic=0)          # ... rejected for magic 1
    yield C.LZ4, 2, bytes.fromhex("04224d1860408200000000")            # empty frame
    yield C.LZ4, 2, bytes.fromhex("04224d1864408205000080") + b"hello" + bytes(4) + bytes(4)  # content cksum
    yield C.SNAPPY, 2, b"\x05\x10hello"                                  # raw snappy (not xerial)
    yield C.SNAPPY, 2, C.compress(C.SNAPPY, b"x" * 70000) + C.compress(C.SNAPPY, b"y" * 10)  # concatenated
    yield C.SNAPPY, 2, C.compress(C.SNAPPY, b"abc") + b"\x00\x00"       # trailing 2 bytes ignored
    yield C.GZIP, 2, C.compress(C.GZIP, b"a" * 1000) + C.compress(C.GZIP, b"b" * 10)  # two members
    yield C.GZIP, 2, C.compress(C.GZIP, b"abc") + b"garbage"            # trailing garbage ignored
    yield C.GZIP, 2, C.compress(C.GZIP, b"")
    yield C.ZSTD, 2, C.compress(C.ZSTD, b"") + C.compress(C.ZSTD, b"q" * 5000)
    yield C.ZSTD, 2, b"\x50\x2a\x4d\x18\x03\x00\x00\x00abc" + C.compress(C.ZSTD, b"z")  # skippable frame
    yield C.ZSTD, 1, C.compress(C.ZSTD, b"z")                            # zstd needs magic 2
    yield 5, 2, b"whatever"


@pytest.mark.parametrize("i", range(len(list(_spec_vectors()))))
def test_spec_vectors(i):
    codec, magic, payload = list(_spec_vectors())[i]
    _same(codec, payload, magic)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(st.binary(max_size=3000), st.integers(0, 200_000).map(lambda n: b"ab" * (n // 2))),
       codec=st.sampled_from(CODECS), magic=st.sampled_from([0, 1, 2]), level=st.sampled_from([None, 1, 12]))
def test_round_trips(data, codec, magic, level):
    if codec == C.ZSTD and magic < 2:
        return
    level = {C.GZIP: 9 if level else None, C.SNAPPY: None}.get(codec, level)
    c = C.compress(codec, data, magic=magic, level=level)
    assert _same(codec, c, magic) == data


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=30)), st.binary(max_size=300)),
                     min_size=1, max_size=40),
       codec=st.sampled_from(CODECS), magic=st.sampled_from([0, 1, 2]), log_append=st.booleans())
def test_batches_round_trip(recs, codec, magic, log_append):
    records = [(7 + i, TS + i, k, v) for i, (k, v) in enumerate(recs)]
    if magic == 2:
        raw = build_batch(records, base_offset=7, codec=codec, timestamp_type=1 if log_append else 0,
                          log_append_time=TS + 99 if log_append else None)
        b = RecordBatch(memoryview(raw))
    else:
        if codec == C.ZSTD:
            return
        raw = build_legacy(records, magic=magic, codec=codec, base_offset=7,
                           timestamp_type=1 if log_append and magic == 1 else 0,
                           log_append_time=TS + 99 if log_append and magic == 1 else None)
        b = next(iter_batches(memoryview(raw)))
        assert isinstance(b, LegacyBatch)
    got = _records(b)
    assert got == _python_records(b)
    assert [r[3] for r in got] == [v for *_, v in records]


def test_mutated_and_truncated_payloads_give_the_same_outcome():
    rnd = random.Random(12)
    payloads = []
    for codec in CODECS:
        for magic in ([2] if codec == C.ZSTD else [0, 1, 2]):
            for data in (b"", b"k" * 10, bytes(rnd.getrandbits(8) for _ in range(300)) * 50, b"xy" * 70000):
                payloads.append((codec, magic, C.compress(codec, data, magic=magic)))
    payloads += list(_compressed_payloads())[:40]
    n = 0
    for codec, magic, payload in payloads:
        for cut in sorted({0, 1, 2, 5, 7, 10, 15, 16, 20, len(payload) // 2, len(payload) - 4, len(payload) - 1}):
            if 0 <= cut < len(payload):
                _same(codec, payload[:cut], magic)
                n += 1
        for _ in range(25):
            m = bytearray(payload)
            for _ in range(rnd.randint(1, 3)):
                if m:
                    m[rnd.randrange(len(m))] = rnd.getrandbits(8)
            _same(codec, bytes(m), magic)
            n += 1
    assert n > 1000


@pytest.mark.parametrize("codec", CODECS)
def test_decompression_bombs_are_bounded_the_same_way(codec):
    bomb = C.compress(codec, bytes(16 << 20))  # 16 MiB of zeros in a few KiB
    for limit in (1 << 20, (16 << 20) - 1):
        want = _same(codec, bomb, 2, limit)
        assert want[0] == "error" and "more than" in want[2] and want[3] == 0, want
    assert _same(codec, bomb, 2, 16 << 20) == bytes(16 << 20)  # exactly at the limit: allowed
    # inside a batch: the same error, at the same byte of the segment
    raw = build_batch([(0, TS, None, b"x")], codec=codec, compressed_payload=bomb, records_count=1)
    b = RecordBatch(memoryview(raw), 4096, "00000000000000000000.log", 1 << 20)
    assert _records(b) == _python_records(b)
    assert _records(b)[2].startswith(f"00000000000000000000.log: byte 4157: {C.CODEC_NAMES[codec]} payload "
                                     "decompresses to more than")


@pytest.mark.parametrize("declared", [200 << 20, 300 << 20, 1 << 49, 5])
def test_zstd_frames_declaring_huge_sizes(declared):
    frame = (b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + declared.to_bytes(8, "little")
             + ((5 << 3) | 1).to_bytes(3, "little") + b"hello")
    _same(C.ZSTD, frame)
    _same(C.ZSTD, bytes.fromhex("28b52ffdd40bdc28b52ffd0000025b4855ffffffff00"), 2, 1 << 20)


def test_zstd_window_above_kafkas_limit_is_refused_by_both():
    """A frame asking for a window above 2^27 bytes, with no content size (or one over 16 KiB), is refused as
    Kafka's zstd reader refuses it (found by the differential fuzz target: the native one-shot decompression
    decoded it, python-zstandard's stream refused it). Native and Python agree on each, records and errors."""
    for name, (raw, ok) in zstd_window_batches().items():
        payload = raw[61:]
        got = _same(C.ZSTD, payload)
        assert isinstance(got, bytes) == ok, (name, got)
        if not ok:
            assert "window" in got[2] and "Kafka's zstd reader" in got[2], got
        b = RecordBatch(memoryview(raw), 0, "00000000000000000000.log", 1 << 20)
        assert _records(b) == _python_records(b)


def test_to_arrow_decompresses_natively_with_the_same_rows_and_errors(tmp_path):
    """to_arrow over every fixture: compressed batches decompressed natively into the Arrow builder
    (``arrow_add_compressed``) give the columns the Python codec packages give; a bomb the same error."""
    from kafkalog.storage.records import to_arrow

    def without_native_decompression(fn):
        with backend("python-codecs"):
            return fn()

    for log in sorted(FIXTURES.rglob("*.log")):
        data = log.read_bytes()
        got = to_arrow(data, topic="t", partition=0, segment=log.name)
        want = without_native_decompression(lambda data=data, log=log: to_arrow(data, topic="t", partition=0, segment=log.name))
        assert got.equals(want), log
    bomb = build_batch([(0, TS, None, b"x")], codec=C.ZSTD, compressed_payload=C.compress(C.ZSTD, bytes(300 << 20)),
                       records_count=1)

    def outcome():
        try:
            return to_arrow(bomb, topic="t", partition=0, segment="s").num_rows
        except KafkaLogError as e:
            return _error(e)

    assert outcome() == without_native_decompression(outcome)
    assert outcome()[0] == "error"


def test_compressing_nothing_at_every_level_is_one_token():
    """An empty input is the block of one empty token, at every lz4 level, and an empty snappy block. An empty
    Rust slice points at address 0x1; lz4's optimal parser (levels 10-12) computed its end guard from that
    pointer, wrapped around and read wild memory: this segfaulted the interpreter before the core handed C a
    real address."""
    for level in range(-1, 18):
        assert core.lz4_block(b"", level) == b"\x00", level
    assert core.snappy_block(b"") == b"\x00"
    assert C.decompress(C.ZSTD, core.zstd_stream(b"", 3)) == b""


@pytest.mark.parametrize("codec", ["zstd", "lz4"])
def test_compression_state_reuse_gives_a_fresh_states_bytes(codec):
    """``zstd_stream`` and ``lz4_block`` (the high compressor) keep one compression state per thread, reset
    before each frame or block (zstd's parameters too): inputs of every size and level, compressed one after
    another on one thread, are byte for byte what a new thread (so a new state) writes for each alone --
    nothing of a level, a window or a match table carries from one into the next. The JVM test
    (``test_compression_parity``) pins these bytes to zstd-jni's and lz4-java's."""
    import threading

    import lz4.block

    rng = random.Random(7)
    levels = [-5, 1, 3, 9, 19, 22] if codec == "zstd" else [1, 3, 9, 10, 12, 17]
    cases = []
    for i in range(60):
        n = rng.choice([0, 1, 17, 300, 16 * 1024, 16 * 1024 + 1, 70_000, 300_000])
        data = bytes(rng.getrandbits(8) for _ in range(min(n, 64))) * (n // 64) + bytes(n % 64)
        cases.append((data if i % 3 else rng.randbytes(n), rng.choice(levels)))

    def compress(d: bytes, level: int) -> bytes:
        return core.zstd_stream(d, level) if codec == "zstd" else core.lz4_block(d, level)

    def alone(d: bytes, level: int) -> bytes:
        out = []
        t = threading.Thread(target=lambda: out.append(compress(d, level)))
        t.start()
        t.join()
        return out[0]

    reused = [compress(d, level) for d, level in cases]
    for (d, level), got in zip(cases, reused, strict=True):
        assert got == alone(d, level), (len(d), level)
        if codec == "zstd":
            assert C.decompress(C.ZSTD, got) == d
        else:
            assert lz4.block.decompress(got, uncompressed_size=len(d)) == d


def test_a_high_zstd_levels_context_is_not_kept():
    """A thread keeps its zstd compression context only up to level 9 (a few MiB): at level 20 the context's
    tables and window are about 190 MiB, freed after the frame instead of held for the thread's lifetime. The
    resident size of a fresh process, after one small frame at each level, says which were kept."""
    import subprocess
    import sys

    code = """
import re
from kafkalog.storage.codec.native import core
def rss():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) >> 10
base = rss()
core.zstd_stream(b"x" * 1000, 3)
kept3 = rss() - base
core.zstd_stream(b"x" * 1000, 20)
print(kept3, rss() - base)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    kept3, kept20 = map(int, r.stdout.split())
    assert kept3 < 16 and kept20 < 32, (kept3, kept20)  # MiB; level 20 held would be about 190
