"""The cleaner's fast paths (raw-span map pass, skipped superseded batches, spliced rebuilds) must give exactly
the bytes of the careful per-record path on any log."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from kafkalog.storage.config import CleanerConfig, LogConfig
from kafkalog.storage.engine import cleaner as cleaner_mod
from kafkalog.storage.engine import cleaner_filter
from kafkalog.storage.engine.cleaner import compact_partition
from kafkalog.storage.engine.cleaner_map import OffsetMap
from kafkalog.storage.engine.cleaner_records import map_records, scan_retained, splice_records
from kafkalog.storage.records import build_batch, iter_batches

NOW = 1_700_000_000_000
COMPACT = LogConfig.defaults().with_overrides({"cleanup.policy": ["compact"], "delete.retention.ms": "1000"})


def random_log(pdir: Path, seed: int) -> None:
    rnd = random.Random(seed)
    keys = [b"k%d" % i for i in range(rnd.choice([3, 20, 200]))] + [b"L" * 70 + b"%d" % i for i in range(3)]
    off = 0
    segments: list[list[bytes]] = [[]]
    for _ in range(rnd.randint(20, 60)):
        n = rnd.choice([1, 3, 40, 130])
        ts0 = NOW - rnd.randint(10_000, 100_000)
        recs = []
        for i in range(n):
            key = None if rnd.random() < 0.05 else rnd.choice(keys)
            value = None if rnd.random() < 0.15 else os.urandom(rnd.choice([0, 5, 100, 300]))
            headers = [("h", b"x")] if rnd.random() < 0.1 else []
            recs.append((off + i, ts0 + rnd.randint(0, 20_000), key, value, headers))
        codec = rnd.choice([0, 0, 1, 3, 4])
        horizon = NOW - 50 if rnd.random() < 0.1 else None
        lat = rnd.random() < 0.1  # LogAppendTime
        segments[-1].append(build_batch(recs, base_offset=off, codec=codec, delete_horizon_ms=horizon,
                                        timestamp_type=1 if lat else 0, log_append_time=ts0 if lat else None))
        off += n
        if rnd.random() < 0.15:
            segments.append([])
    segments.append([build_batch([(off, NOW, b"k0", b"active")], base_offset=off)])
    base = 0
    for seg in segments:
        if not seg:
            continue
        p = pdir / f"{base:020d}.log"
        p.write_bytes(b"".join(seg))
        os.utime(p, ns=((NOW - 1000) * 1_000_000,) * 2)
        base = next(iter(iter_batches(seg[-1]))).next_offset


def snapshot(pdir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(pdir.parent.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("dedupe", [134217728, 24 * 60])
def test_fast_paths_equal_careful_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, dedupe: int):
    src = tmp_path / "src" / "t-0"
    src.mkdir(parents=True)
    random_log(src, seed)
    cfg = CleanerConfig(dedupe_buffer_size=dedupe)
    fast, slow = tmp_path / "fast" / "t-0", tmp_path / "slow" / "t-0"
    shutil.copytree(src, fast)
    shutil.copytree(src, slow)
    for rnd_now in (NOW, NOW + 5_000):  # two rounds: the second meets delete horizons set by the first
        compact_partition(fast, COMPACT, cfg, rnd_now, force=True)
    with monkeypatch.context() as m:
        m.setattr(cleaner_mod, "_map_fast", lambda b, start, offset_map: False)
        m.setattr(cleaner_filter.CleanerFilter, "_scan_fast", lambda self, b, latest: None)
        m.setattr(OffsetMap, "maps_none_of", lambda self, base, last: False)
        for rnd_now in (NOW, NOW + 5_000):
            compact_partition(slow, COMPACT, cfg, rnd_now, force=True)
    a, b = snapshot(fast), snapshot(slow)
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], name


def test_map_records_puts_last_offset_per_key_and_rejects_truncated_regions():
    recs = [(10 + i, NOW, b"k%d" % (i % 3), b"v") for i in range(7)] + [(17, NOW, None, b"x")]
    batch = build_batch(recs, base_offset=10)
    data = bytes(batch[61:])
    m = OffsetMap()
    map_records(data, 8, 10, m)
    assert (m.get(b"k0"), m.get(b"k1"), m.get(b"k2"), m.size) == (16, 14, 15, 3)
    from kafkalog.storage.engine.cleaner_records import Slow

    with pytest.raises((Slow, IndexError)):
        map_records(data[:-3], 8, 10, m)


def test_scan_and_splice_rewrite_only_the_prefix_when_the_base_timestamp_moves():
    recs = [(0, NOW + 5, b"a", b"1"), (1, NOW + 9, b"b", b"2"), (2, NOW + 70_000, b"a", b"3")]
    batch = build_batch(recs, base_offset=0)
    data = bytes(batch[61:])
    m = OffsetMap()
    map_records(data, 3, 0, m)
    m.latest_offset = 2
    kept, n, invalid = scan_retained(data, 3, 0, NOW + 5, 2, m, True)
    assert [k[4] for k in kept] == [1, 2] and n == 3 and invalid == 0
    out = bytearray()
    splice_records(data, kept, NOW + 5, NOW + 9, out)
    expected = build_batch([recs[1], recs[2]], base_offset=0, last_offset_delta=2)
    assert bytes(out) == bytes(expected[61:])
