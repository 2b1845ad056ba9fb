"""Salvage scanning (storage/records/salvage.py) and ``export --salvage`` / ``dump --salvage``.

The fuzz-like campaign takes the real fixture segments (every magic and codec), damages them at random points
with a seeded RNG (flipped bytes, zeroed ranges, truncation, inserted garbage, two segments spliced) and checks
the two promises: every batch lying entirely outside the damaged bytes is recovered with identical bytes and
records, and every batch emitted is one of the originals (nothing invalid emitted as valid).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkalog.storage.codec.compression import decompress
from kafkalog.storage.engine.salvage import SalvageReport, salvage_inputs, salvage_jsonl
from kafkalog.storage.records import iter_batches
from kafkalog.storage.records.legacy import LegacyBatch
from kafkalog.storage.records.salvage import SkippedRange, salvage_scan

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LOGS = sorted(p for p in FIXTURES.glob("*/data/*/*.log") if p.stat().st_size)
RICH = [p for p in LOGS if sum(1 for _ in iter_batches(p.read_bytes())) >= 3]
SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"


SUSPECTS: list[int] = []


def _originals(data: bytes) -> list[tuple[int, bytes]]:
    return [(b.position, bytes(b.buf)) for b in iter_batches(data)]


def _inner_payloads(data: bytes) -> list[bytes]:
    """Decompressed values of the v0/v1 wrappers: their inner messages are valid messages too, and a damaged
    wrapper can expose one verbatim (snappy/lz4 literals)."""
    out = []
    for b in iter_batches(data):
        if isinstance(b, LegacyBatch) and b.codec and b.codec < 4:
            out.append(bytes(decompress(b.codec, b.message().value, magic=b.magic)))
    return out


def _damage(rng: random.Random, a: bytes, b: bytes) -> tuple[bytes, list[tuple[int, int]], str]:
    """``(damaged bytes, [(new position, original batch bytes)] of the batches left intact, what was done)``."""
    kind = rng.choice(["flip", "zero", "truncate", "insert", "splice", "multi"])
    orig = _originals(a)
    n = len(a)
    if kind in ("flip", "multi"):
        d = bytearray(a)
        hits = sorted(rng.randrange(n) for _ in range(rng.randint(1, 4 if kind == "flip" else 12)))
        for h in hits:
            d[h] ^= rng.randint(1, 255)
        intact = [(p, x) for p, x in orig if not any(p <= h < p + len(x) for h in hits)]
        return bytes(d), intact, f"{kind} {hits}"
    if kind == "zero":
        s = rng.randrange(n)
        e = min(n, s + rng.choice([1, 7, 64, 500, 5000]))
        d = a[:s] + bytes(e - s) + a[e:]
        return d, [(p, x) for p, x in orig if p + len(x) <= s or p >= e], f"zero [{s},{e})"
    if kind == "truncate":
        t = rng.randrange(1, n)
        return a[:t], [(p, x) for p, x in orig if p + len(x) <= t], f"truncate at {t}"
    if kind == "insert":
        i = rng.randrange(n)
        g = rng.randbytes(rng.choice([1, 3, 17, 61, 300, 4000]))
        d = a[:i] + g + a[i:]
        intact = [(p, x) for p, x in orig if p + len(x) <= i] + [(p + len(g), x) for p, x in orig if p >= i]
        return d, intact, f"insert {len(g)} at {i}"
    i = rng.randrange(n)
    j = rng.randrange(len(b))
    d = a[:i] + b[j:]
    intact = [(p, x) for p, x in orig if p + len(x) <= i] + [(p - j + i, x) for p, x in _originals(b) if p >= j]
    return d, intact, f"splice a[:{i}] + b[{j}:]"


def _check(data: bytes, intact, allowed: list[bytes], inner: list[bytes], what: str,
           include_invalid: bool = False) -> None:
    got = list(salvage_scan(data, include_invalid=include_invalid))
    pos = 0
    for x in got:  # batches and skipped ranges tile the buffer
        start = x.start if isinstance(x, SkippedRange) else x.position
        end = x.end if isinstance(x, SkippedRange) else x.position + x.size
        assert start == pos and end > start, what
        pos = end
    assert pos == len(data), what
    batches = {x.position: bytes(x.buf) for x in got if not isinstance(x, SkippedRange)}
    for p, x in intact:
        assert batches.get(p) == x, f"{what}: intact batch at {p} not recovered"
    sizes = {len(x) for x in allowed}
    for x in got:  # a CRC-failing batch handed out (include_invalid) has the framing of an original batch
        if isinstance(x, SkippedRange) and x.batch is not None:
            assert x.size in sizes and x.batch.size == x.size, f"{what}: suspect batch at {x.start}"
            SUSPECTS.append(x.start)
    by_tail = {(len(x), x[16:]) for x in allowed}
    for p, x in batches.items():
        # Kafka's CRCs do not cover the offset/size/leader epoch: compare what they cover (and the size)
        ok = (len(x), x[16:]) in by_tail or any(x[12:] in v for v in inner)
        assert ok, f"{what}: emitted batch at {p} ({len(x)} bytes) is not one of the originals"


def test_clean_fixtures_scan_exactly_as_the_reader():
    for p in LOGS:
        data = p.read_bytes()
        got = list(salvage_scan(data))
        assert [(b.position, bytes(b.buf)) for b in got] == _originals(data), p


@pytest.mark.parametrize("seed", range(6))
def test_random_damage_recovers_every_intact_batch(seed):
    rng = random.Random(seed)
    for _ in range(60):  # 360 cases in all
        pa, pb = rng.choice(RICH), rng.choice(RICH)
        a, b = pa.read_bytes(), pb.read_bytes()
        data, intact, how = _damage(rng, a, b)
        what = f"seed {seed} {pa.relative_to(FIXTURES)} / {pb.relative_to(FIXTURES)}: {how}"
        _check(data, intact, [x for _, x in _originals(a)] + [x for _, x in _originals(b)],
               _inner_payloads(a) + _inner_payloads(b), what, include_invalid=seed % 2 == 1)
    assert seed % 2 == 0 or SUSPECTS, "the CRC-failing batches with intact framing are exercised"


def test_recovered_records_are_identical():
    rng = random.Random(99)
    for p in RICH[:40]:
        a = p.read_bytes()
        data, intact, how = _damage(rng, a, a)
        orig = {x: [r[:4] for r in b.record_tuples()] for b in iter_batches(a) for x in [bytes(b.buf)]}
        for x in salvage_scan(data):
            if not isinstance(x, SkippedRange) and bytes(x.buf) in orig:
                assert [r[:4] for r in x.record_tuples()] == orig[bytes(x.buf)], (p, how)


def test_crc_valid_but_undecodable_batch_is_skipped_whole():
    from kafkalog.storage.codec.crc import crc32c
    a = next(p for p in LOGS if "codec-none" in str(p) and "kraft" in str(p)).read_bytes()
    bs = list(iter_batches(a))
    b = bs[1]
    d = bytearray(a)
    p = b.position
    d[p + 57:p + 61] = (b.records_count + 5).to_bytes(4, "big")  # more records than the payload holds
    d[p + 17:p + 21] = crc32c(bytes(d[p + 21:p + b.size])).to_bytes(4, "big")
    got = list(salvage_scan(bytes(d)))
    sk = [x for x in got if isinstance(x, SkippedRange)]
    assert len(sk) == 1 and (sk[0].start, sk[0].end) == (p, p + b.size)
    assert "records do not decode" in sk[0].reason
    assert len(got) == len(bs)


@pytest.mark.parametrize("fill", ["zeros", "random", "ones", "magic"])
def test_hostile_inputs_finish_quickly(fill):
    n = 8 << 20
    data = {"zeros": bytes(n), "random": random.Random(1).randbytes(n), "ones": b"\x01" * n,
            # crafted: 4 header-like candidates every 21 bytes (linear, but a few microseconds each)
            "magic": (bytes(8) + b"\x00\x00\x00\x40" + bytes(4) + b"\x02" + bytes(4)) * (n // 21 // 8)}[fill]
    t = time.monotonic()
    got = list(salvage_scan(data))
    assert time.monotonic() - t < 10
    assert all(isinstance(x, SkippedRange) for x in got)


def test_huge_length_field_and_sparse_tail(tmp_path):
    a = next(p for p in RICH if "codec-gzip" in str(p)).read_bytes()
    bs = _originals(a)
    d = bytearray(a)
    d[bs[0][0] + 8:bs[0][0] + 12] = (0x7FFFFFF0).to_bytes(4, "big")  # the first batch claims 2 GiB
    f = tmp_path / "00000000000000000000.log"
    f.write_bytes(bytes(d))
    with open(f, "r+b") as fh:
        fh.truncate(len(d) + (256 << 20))  # a sparse (preallocated-looking) tail
    t = time.monotonic()
    rep = SalvageReport()
    rows = list(salvage_inputs([f], rep))
    assert time.monotonic() - t < 15
    assert {r["position"] for r in rows} == {p for p, _ in bs[1:]}
    assert [(s.start, s.end) for s in rep.skipped] == [(0, bs[1][0]), (len(a), len(d) + (256 << 20))]


# ------------------------------------------------------------------------------------------ inputs, CLI

def _copy_fixture(tmp_path: Path, name: str = "kafka-4.3.1-kraft") -> Path:
    dst = tmp_path / "data"
    shutil.copytree(FIXTURES / name / "data", dst)
    return dst


def _corrupt_middle(seg: Path) -> tuple[int, int]:
    data = bytearray(seg.read_bytes())
    bs = list(iter_batches(bytes(data)))
    b = bs[len(bs) // 2]
    data[b.position + 30] ^= 0xFF
    seg.write_bytes(bytes(data))
    return b.position, b.position + b.size


def test_delete_dir_and_loose_file_inputs(tmp_path):
    data = _copy_fixture(tmp_path)
    part = data / "codec-none-0"
    gone = data / "codec-none-0.0123456789abcdef0123456789abcdef-delete"
    part.rename(gone)
    loose = tmp_path / "orders-3.log"
    shutil.copy(next(gone.glob("*.log")), loose)
    odd = tmp_path / "whatever.bin"
    shutil.copy(next(gone.glob("*.log")), odd)
    rep = SalvageReport()
    rows = list(salvage_inputs([gone, loose, odd], rep))
    n = sum(len(b.record_tuples()) for b in iter_batches(next(gone.glob("*.log")).read_bytes()))
    assert len(rows) == 3 * n and not rep.skipped
    first = {r["file"]: r for r in rows}
    g = first[str(next(gone.glob("*.log")))]
    assert (g["topic"], g["partition"], g["dataDir"], g["crcValid"]) == ("codec-none", 0, str(data), True)
    assert (first[str(loose)]["topic"], first[str(loose)]["partition"], first[str(loose)]["dataDir"]) == \
        ("orders", 3, None)
    assert (first[str(odd)]["topic"], first[str(odd)]["partition"]) == (None, None)
    # a data dir takes its -delete dirs too
    rows2 = list(salvage_inputs([data], SalvageReport(), topics={"codec-none"}))
    assert len(rows2) == n


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalog", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ}, timeout=120)


def test_export_salvage_cli_exit_codes_and_json(tmp_path):
    import jsonschema
    data = _copy_fixture(tmp_path)
    seg = sorted((data / "multi-segment-1").glob("*.log"))[0]
    clean = _cli("export", "--salvage", str(data / "multi-segment-0"), "--out", str(tmp_path / "c.jsonl"))
    assert clean.returncode == 0, clean.stderr
    start, end = _corrupt_middle(seg)
    # without --salvage: export still fails on the corruption
    plain = _cli("export", str(data / "multi-segment-1"), "--out", str(tmp_path / "p.jsonl"))
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    human = _cli("export", "--salvage", str(data / "multi-segment-1"), "--out", str(tmp_path / "h.jsonl"))
    assert human.returncode == 1, human.stderr
    assert f"bytes {start}-{end}" in human.stderr and seg.name in human.stderr
    js = _cli("export", "--salvage", "--json", str(data / "multi-segment-1"), "--out", "-")
    assert js.returncode == 1
    rec_schema = json.loads((SCHEMAS / "exportRecord.schema.json").read_text())
    lines = [json.loads(x) for x in js.stdout.splitlines()]
    assert lines and all(r["crcValid"] is True and r["file"] for r in lines)
    for r in lines:
        jsonschema.validate(r, rec_schema)
    assert not any(start <= r["position"] < end and r["file"] == str(seg) for r in lines)
    skipped_schema = json.loads((SCHEMAS / "salvageSkipped.schema.json").read_text())
    summary_schema = json.loads((SCHEMAS / "exportSummary.schema.json").read_text())
    events = [json.loads(x) for x in js.stderr.splitlines() if x.startswith("{")]
    skipped = [e for e in events if e.get("event") == "skipped"]
    assert [(e["start"], e["end"]) for e in skipped] == [(start, end)]
    for e in skipped:
        jsonschema.validate(e, skipped_schema)
    summary = [e for e in events if "summary" in e]
    assert len(summary) == 1 and summary[0]["summary"]["skippedRanges"] == 1
    jsonschema.validate(summary[0], summary_schema)
    bad = _cli("export", "--salvage", "--format", "parquet", str(data), "--out", str(tmp_path / "pq"))
    assert bad.returncode == 2


def test_dump_salvage_cli(tmp_path):
    import jsonschema
    data = _copy_fixture(tmp_path)
    seg = sorted((data / "multi-segment-1").glob("*.log"))[0]
    n = sum(1 for _ in iter_batches(seg.read_bytes()))
    start, end = _corrupt_middle(seg)
    out = _cli("dump", "--salvage", str(seg))
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert sum(1 for x in lines if x.startswith("baseOffset:")) == n - 1
    assert any(f"Skipped bytes {start}-{end}" in x for x in lines)
    js = _cli("dump", "--salvage", "--json", "--deep", str(seg))
    objs = [json.loads(x) for x in js.stdout.splitlines()]
    ev = [o for o in objs if "event" in o]
    assert [(o["position"], o["bytes"]) for o in ev] == [(start, end - start)]
    jsonschema.validate(ev[0], json.loads((SCHEMAS / "dumpEvent.schema.json").read_text()))
    assert all(o["isValid"] for o in objs if "event" not in o)
    clean = _cli("dump", "--salvage", str(sorted((data / "multi-segment-0").glob("*.log"))[0]))
    assert clean.returncode == 0, clean.stderr


def test_salvage_jsonl_library(tmp_path):
    data = _copy_fixture(tmp_path, "kafka-3.9.2-zk-v1")
    seg = sorted((data / "mixed-formats-0").glob("*.log"))[0]
    start, end = _corrupt_middle(seg)
    out = tmp_path / "o.jsonl"
    rep = salvage_jsonl([data / "mixed-formats-0"], out)
    assert [(s.start, s.end) for s in rep.skipped] == [(start, end)]
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rows and len(rows) == rep.records
    assert {r["magic"] for r in rows} >= {1, 2}


def test_include_invalid_exports_a_crc_failing_batch_marked(tmp_path):
    data = _copy_fixture(tmp_path)
    seg = sorted((data / "codec-none-0").glob("*.log"))[0]
    raw = bytearray(seg.read_bytes())
    bs = list(iter_batches(bytes(raw)))
    b = bs[1]
    recs = b.record_tuples()
    needle = bytes(recs[0][3])[:8]
    at = raw.index(needle, b.position + 61)
    raw[at] ^= 0x20  # a flipped bit in a record value: the CRC fails, the framing is intact
    seg.write_bytes(bytes(raw))
    rep = SalvageReport()
    rows = list(salvage_inputs([seg], rep, include_invalid=True))
    bad = [r for r in rows if not r["crcValid"]]
    assert {r["position"] for r in bad} == {b.position} and len(bad) == len(recs)
    assert bad[0]["value"] != recs[0][3] and rep.invalid_batches == 1
    assert [(s.start, s.end) for s in rep.skipped] == [(b.position, b.position + b.size)]
    assert all(r["crcValid"] for r in salvage_inputs([seg], SalvageReport()))
    assert len(list(salvage_inputs([seg], SalvageReport()))) == len(rows) - len(recs)
    js = _cli("export", "--salvage", "--include-invalid", "--json", str(seg), "--out", "-")
    assert js.returncode == 1
    ev = [json.loads(x) for x in js.stderr.splitlines() if x.startswith("{")]
    assert [e["recordsExported"] for e in ev if e.get("event") == "skipped"] == [True]
    assert _cli("export", "--include-invalid", str(data), "--out", "-").returncode == 2


def test_include_invalid_never_swallows_valid_batches():
    """A damaged size field makes an entry span valid batches: it is not handed out as one CRC-failing batch."""
    a = next(p for p in RICH if "multi-segment-1" in str(p) and "4.3.1-kraft/" in str(p)).read_bytes()
    bs = _originals(a)
    d = bytearray(a)
    p0, x0 = bs[0]
    d[p0 + 8:p0 + 12] = (len(x0) + len(bs[1][1]) - 12).to_bytes(4, "big")  # batch 0 now ends where batch 2 starts
    got = list(salvage_scan(bytes(d), include_invalid=True))
    assert not any(isinstance(x, SkippedRange) and x.batch is not None for x in got)
    assert [bytes(x.buf) for x in got if not isinstance(x, SkippedRange)] == [x for _, x in bs[1:]]


def test_memory_stays_bounded_by_a_batch(tmp_path):
    import tracemalloc

    a = next(p for p in RICH if "codec-zstd" in str(p)).read_bytes()
    f = tmp_path / "big.log"
    rng = random.Random(5)
    with open(f, "wb") as fh:
        while fh.tell() < (6 << 20):
            fh.write(a)
            fh.write(rng.randbytes(rng.randint(1, 5000)))  # a damaged region between copies
    tracemalloc.start()
    try:
        n = 0
        rep = SalvageReport()
        for _ in salvage_inputs([f], rep):
            n += 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n > 1000 and len(rep.skipped) > 100
    assert peak < 8 << 20, f"peak {peak} bytes for a {f.stat().st_size}-byte file"


def test_unreadable_inputs_are_clear_errors(tmp_path):
    empty = tmp_path / "00000000000000000000.log"
    empty.write_bytes(b"")
    assert list(salvage_inputs([empty], SalvageReport())) == []
    r = _cli("export", "--salvage", str(tmp_path / "missing"), "--out", "-")
    assert r.returncode == 1 and "no such file" in r.stderr and "Traceback" not in r.stderr
    r = _cli("export", "--salvage", str(empty), "--out", "-")
    assert r.returncode == 0, r.stderr
