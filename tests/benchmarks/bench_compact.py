"""Compaction throughput: kafkalog's cleaner on a generated compacted topic.

    python tests/benchmarks/bench_compact.py --scale 0.05      # 0.05 x 2 GiB

Prints MB/s (MB = 10^6 bytes of input segments). The side-by-side run against the real broker's cleaner
(its "cleaned ... MB/sec" log line) is still to be added once the compat harness can run a broker.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kafkalog.storage.config import CleanerConfig, LogConfig
from kafkalog.storage.engine.cleaner import compact_partition
from kafkalog.storage.records import build_batch

NOW = 1_700_000_000_000


def generate(pdir: Path, total: int, keys: int, value_size: int, per_batch: int, segment_bytes: int) -> int:
    off, written, base, out = 0, 0, 0, bytearray()
    value = b"v" * value_size
    while written < total:
        recs = [(off + i, NOW - 10_000, b"key-%d" % ((off + i) % keys), value) for i in range(per_batch)]
        b = build_batch(recs, base_offset=off)
        if len(out) + len(b) > segment_bytes:
            (pdir / f"{base:020d}.log").write_bytes(out)
            written += len(out)
            out, base = bytearray(), off
        out += b
        off += per_batch
    (pdir / f"{base:020d}.log").write_bytes(out)  # active segment
    return written


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    total = int(2 * 1024**3 * a.scale)
    root = Path(tempfile.mkdtemp(prefix="bench-compact-"))
    src = root / "src" / "t-0"
    src.mkdir(parents=True)
    size = generate(src, total, keys=100_000, value_size=100, per_batch=100, segment_bytes=64 << 20)
    cfg = LogConfig.defaults().with_overrides({"cleanup.policy": ["compact"]})
    rates = []
    for _ in range(a.runs):
        work = root / "w" / "t-0"
        shutil.rmtree(work.parent, ignore_errors=True)
        shutil.copytree(src, work)
        t0 = time.perf_counter()
        out = compact_partition(work, cfg, CleanerConfig(), NOW, force=True)
        dt = time.perf_counter() - t0
        rates.append(size / dt / 1e6)
        assert out.result is not None
    print(f"input {size / 1e6:.1f} MB in {len(list(src.glob('*.log')))} segments; kafkalog compaction median "
          f"{statistics.median(rates):.1f} MB/s over {a.runs} runs ({', '.join(f'{r:.1f}' for r in rates)})")
    shutil.rmtree(root, ignore_errors=True)
    os.sync()


if __name__ == "__main__":
    main()
