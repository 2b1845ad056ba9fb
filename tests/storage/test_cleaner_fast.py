"""The cleaner's fast paths (raw-span map pass, skipped superseded batches, spliced rebuilds) must give exactly
the bytes of the careful per-record path on any log."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest
from engines import compact

from kafkalog.storage.config.log_config import CleanerConfig, LogConfig
from kafkalog.storage.engine.cleaner import cleaner as cleaner_mod
from kafkalog.storage.engine.cleaner import record_filter as cleaner_filter
from kafkalog.storage.engine.cleaner.offset_map import OffsetMap
from kafkalog.storage.engine.cleaner.records import map_records, scan_retained, splice_records
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


def two_copies(tmp_path: Path, seed: int, a: str, b: str) -> tuple[Path, Path]:
    """Two copies of one random log, as partition dirs ``<a>/t-0`` and ``<b>/t-0``."""
    src = tmp_path / "src" / "t-0"
    src.mkdir(parents=True)
    random_log(src, seed)
    out = tmp_path / a / "t-0", tmp_path / b / "t-0"
    for d in out:
        shutil.copytree(src, d)
    return out


def snapshot(pdir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(pdir.parent.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("dedupe", [134217728, 24 * 60])
def test_fast_paths_equal_careful_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, dedupe: int):
    fast, slow = two_copies(tmp_path, seed, "fast", "slow")
    cfg = CleanerConfig(dedupe_buffer_size=dedupe)
    for rnd_now in (NOW, NOW + 5_000):  # two rounds: the second meets delete horizons set by the first
        compact(fast, COMPACT, cfg, rnd_now, force=True)
    with monkeypatch.context() as m:
        m.setattr(cleaner_mod, "_map_fast", lambda b, start, offset_map: False)
        m.setattr(cleaner_filter.CleanerFilter, "_scan_fast", lambda self, b, latest: None)
        m.setattr(OffsetMap, "maps_none_of", lambda self, base, last: False)
        for rnd_now in (NOW, NOW + 5_000):
            compact(slow, COMPACT, cfg, rnd_now, force=True)
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
    from kafkalog.storage.records.record_grammar import Slow

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


def _map_contents(m: OffsetMap) -> tuple:
    return sorted(m.items()), m.latest_offset, m.size


@pytest.mark.parametrize("seed", range(4))
def test_parallel_map_pass_equals_the_sequential_one(tmp_path: Path, seed: int):
    from kafkalog.storage.engine.cleaner.cleaner import build_offset_map
    from kafkalog.storage.files.txn_index import AbortedTxn, TransactionIndex
    from kafkalog.storage.log.partition import PartitionLog
    from kafkalog.storage.records import build_end_txn_marker

    pdir = tmp_path / "d" / "t-0"
    pdir.mkdir(parents=True)
    random_log(pdir, seed)
    # an aborted transaction spanning two segments: its data must not be mapped by either worker
    with PartitionLog(pdir) as log:
        leo, bases = log.log_end_offset, [s.base_offset for s in log.segments]
    pid = 99
    a = build_batch([(leo, NOW, b"k1", b"aborted")], base_offset=leo, producer_id=pid, producer_epoch=0,
                    base_sequence=0, is_transactional=True)
    b = build_batch([(leo + 1, NOW, b"k2", b"aborted")], base_offset=leo + 1, producer_id=pid, producer_epoch=0,
                    base_sequence=1, is_transactional=True)
    marker = build_end_txn_marker(offset=leo + 2, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                  commit=False, timestamp=NOW)
    last = pdir / f"{bases[-1]:020d}.log"
    last.write_bytes(last.read_bytes() + a)
    (pdir / f"{leo + 1:020d}.log").write_bytes(b + marker)
    (pdir / f"{leo + 1:020d}.txnindex").write_bytes(
        bytes(TransactionIndex.from_entries(leo + 1, [AbortedTxn(pid, leo, leo + 2, leo)])._buf))
    (pdir / f"{leo + 3:020d}.log").write_bytes(build_batch([(leo + 3, NOW, b"k3", b"x")], base_offset=leo + 3))
    with PartitionLog(pdir) as log:
        end = log.active_segment.base_offset
        for start in (0, bases[1] if len(bases) > 1 else 0):
            # the parallel pass runs for the dict map (spill_keys given); seq is the native map when it is built
            seq, par, spill = OffsetMap(), OffsetMap(spill_keys=1 << 30), OffsetMap(spill_keys=3)
            assert not build_offset_map(log, start, end, seq)
            assert not build_offset_map(log, start, end, par, workers=2, parallel_min_bytes=0)
            assert not build_offset_map(log, start, end, spill, workers=2, parallel_min_bytes=0)
            assert _map_contents(par) == _map_contents(seq) == _map_contents(spill) and spill.runs
            assert seq.get(b"k1") != leo and seq.get(b"k2") != leo + 1
        # a map that fills up: the parallel pass defers to the sequential one, which stops where Kafka stops
        small_seq, small_par = OffsetMap(24 * 3), OffsetMap(24 * 3, spill_keys=1 << 30)  # capacity 2 keys
        full_seq = build_offset_map(log, 0, end, small_seq)
        full_par = build_offset_map(log, 0, end, small_par, workers=2, parallel_min_bytes=0)
        assert full_seq and full_par and _map_contents(small_par) == _map_contents(small_seq)


def test_parallel_map_worker_memory_is_bounded_by_the_capacity(tmp_path):
    """A worker stops collecting keys once its segment alone would fill the map: its dict (and the merged
    one) never grows beyond the map's capacity, whatever the number of distinct keys in the dirty section."""
    from kafkalog.storage.engine.cleaner.parallel import _map_segment

    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(b"".join(build_batch([(i * 10 + j, NOW, b"key-%d" % (i * 10 + j), b"v") for j in range(10)],
                                         base_offset=i * 10) for i in range(50)))
    status, result = _map_segment((str(log), 0, 0, [], 10**6))
    assert status == "ok" and len(result) == 500
    assert _map_segment((str(log), 0, 0, [], 25)) == ("full", None)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("dedupe", [134217728, 24 * 60])
def test_spilled_map_cleans_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, dedupe: int):
    """The map's compact runs (what a large dirty section spills into) give exactly the bytes of the dict-only map:
    force a spill every few keys and clean two rounds. The unspilled side uses the native map when the compiled
    core is built, so this also holds the native map to the Python dict map's bytes."""
    from kafkalog.storage.engine.cleaner import offset_map as cleaner_map

    hot, spilled = two_copies(tmp_path, seed, "hot", "spilled")
    cfg = CleanerConfig(dedupe_buffer_size=dedupe)
    for rnd_now in (NOW, NOW + 5_000):
        compact(hot, COMPACT, cfg, rnd_now, force=True)
    runs: list[int] = []
    real_spill = OffsetMap._spill

    def counting_spill(self):
        runs.append(len(self.cells))
        real_spill(self)

    with monkeypatch.context() as m:
        m.setattr(cleaner_map, "default_spill_keys", lambda capacity: 1 + seed % 4)
        m.setattr(cleaner_map, "core", None)  # the dict map (the only one that spills)
        m.setattr(OffsetMap, "_spill", counting_spill)
        for rnd_now in (NOW, NOW + 5_000):
            compact(spilled, COMPACT, cfg, rnd_now, force=True)
    assert runs, "the map never spilled"
    a, b = snapshot(hot), snapshot(spilled)
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], name


def test_spilled_map_answers_like_the_dict_map():
    rnd = random.Random(7)
    keys = [os.urandom(rnd.choice([1, 8, 80])) for _ in range(3000)]
    plain, compact = OffsetMap(), OffsetMap(spill_keys=97)
    seen = set()
    for off in range(20_000):
        k = rnd.choice(keys)
        seen.add(k)
        plain.put(k, off)
        compact.put(k, off)
    assert len(compact.runs) > 10 and compact.size == plain.size == len(seen)
    assert sorted(compact.items()) == sorted(plain.items())
    for k in keys + [b"never", b"x" * 100]:
        assert compact.get(k) == plain.get(k)
    compact.put_hash(OffsetMap.hash_key(keys[0]), 5)  # an unconditional set, also inside a run
    plain.put_hash(OffsetMap.hash_key(keys[0]), 5)
    assert compact.get(keys[0]) == plain.get(keys[0]) == 5
    plain.freeze()
    compact.freeze()
    for _ in range(500):
        lo = rnd.randrange(0, 20_000)
        hi = lo + rnd.choice([0, 1, 5, 50])
        assert compact.maps_none_of(lo, hi) == plain.maps_none_of(lo, hi)
    compact.clear()
    assert compact.size == 0 and not compact.runs and compact.get(keys[0]) == -1


def test_spill_threshold(monkeypatch: pytest.MonkeyPatch):
    from kafkalog.storage.engine.cleaner import offset_map as cleaner_map

    assert isinstance(cleaner_map.available_memory(), int)  # /proc/meminfo on Linux
    monkeypatch.setattr(cleaner_map, "available_memory", lambda: 2 << 30)  # a small machine
    big = OffsetMap(2_000_000_000)  # ~75 M keys: spills, with at most MAX_RUNS runs
    assert big.spill_keys * cleaner_map.MAX_RUNS >= big.capacity and big.spill_keys < big.capacity
    assert 1 << 20 <= OffsetMap().spill_keys < OffsetMap().capacity  # the default map spills here
    monkeypatch.setattr(cleaner_map, "available_memory", lambda: 64 << 30)  # room for the default map
    assert OffsetMap().spill_keys >= OffsetMap().capacity
    monkeypatch.setattr(cleaner_map, "available_memory", lambda: None)
    assert OffsetMap().spill_keys == cleaner_map.SPILL_KEYS
