"""Compaction throughput: kafkalog's cleaner and the real broker's log cleaner on the same generated topic.

    python tests/benchmarks/bench_compact.py --scale 0.05              # 0.05 x 2 GiB, kafkalog only
    python tests/benchmarks/bench_compact.py --scale 0.1 --broker 4.3.1  # side by side with Kafka 4.3.1
    python tests/benchmarks/bench_compact.py --scale 0.05 --workers both  # 1 process vs the default

The topic: keyed records (100 000 keys, 100-byte values, 100 records per uncompressed v2 batch, 64 MB segments,
one extra active segment). MB = 10^6 bytes of input segments. kafkalog: median wall-clock and CPU rate over
``--runs`` rounds on fresh copies (one compaction round each, as the broker runs it; CPU time includes the
map pass's worker processes). Broker (run with its full JIT, unlike the test harness's C1-only JVMs): the same segment
files are put into a stopped broker's partition dir (indexes are rebuilt at load), the broker is restarted with
its cleaner on and the round's figures are read from its "Log cleaner thread 0 cleaned log" report (its own
"processed in N seconds" and MB/sec). Both use the same ``log.cleaner.dedupe.buffer.size`` (128 MiB) and
``log.cleaner.io.buffer.size``. Timings vary on shared machines: compare the ratio of one run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kafkalog.storage.config.log_config import BrokerConfig, CleanerConfig, LogConfig
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.cleaner.cleaner import CleanResult
from kafkalog.storage.engine.cleaner.manager import plan_compact
from kafkalog.storage.engine.plan import apply
from kafkalog.storage.files.checkpoints import write_offset_checkpoint
from kafkalog.storage.records import build_batch

NOW = 1_700_000_000_000
DEDUPE = 134217728
TOPIC = "bench"


def generate(pdir: Path, total: int, keys: int, value_size: int, per_batch: int, segment_bytes: int) -> tuple[int, int]:
    """Segments of ``total`` bytes plus a small active segment; returns (bytes in the closed segments, LEO)."""
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
    return written, off


def _cpu() -> float:
    """CPU seconds of this process and its reaped children (the map pass's worker processes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_kafkalog(src: Path, root: Path, runs: int, size: int, workers: int | None) -> tuple[list[float], list[float]]:
    cfg = LogConfig.defaults().with_overrides({"cleanup.policy": ["compact"]})
    wall, cpu = [], []
    for _ in range(runs):
        work = root / "w" / src.name
        shutil.rmtree(work.parent, ignore_errors=True)
        shutil.copytree(src, work)
        t0, c0 = time.perf_counter(), _cpu()
        # the command's whole path: plan (validation, the map pass when the map may fill) then apply
        resolver = ConfigResolver(BrokerConfig(cleaner=CleanerConfig(dedupe_buffer_size=DEDUPE)), config=cfg)
        res = apply(plan_compact([work], now_ms=NOW, resolver=resolver, force=True, map_workers=workers),
                    backup=False)
        wall.append(size / (time.perf_counter() - t0) / 1e6)
        cpu.append(size / (_cpu() - c0) / 1e6)
        out = next(r for rs in res.results.values() for r in rs if isinstance(r, CleanResult))
        assert out.bytes_reclaimed > 0
    shutil.rmtree(root / "w", ignore_errors=True)
    return wall, cpu


REPORT = re.compile(r"cleaned log (\S+) \(dirty section = \[(\d+), (\d+)\]\)\s+([\d.,]+) MB of log processed in "
                    r"([\d.,]+) seconds \(([\d.,]+) MB/sec\)\.\s+Indexed ([\d.,]+) MB in ([\d.,]+) seconds.*?"
                    r"Cleaned ([\d.,]+) MB in ([\d.,]+) seconds", re.S)


def _num(s: str) -> float:
    return float(s.replace(",", ""))  # the broker's report groups thousands: "1,087.9 MB"


def run_broker(version: str, src: Path, root: Path, leo: int, timeout: float) -> dict:
    from kafkalog.compat.broker import Broker
    from kafkalog.compat.clients import create_topic

    props = {"log.cleaner.enable": "false", "log.cleaner.dedupe.buffer.size": str(DEDUPE),
             "log.cleaner.backoff.ms": "200", "log.initial.task.delay.ms": "0"}
    # the harness runs JVMs with C1 only (fast start-up); a fair benchmark lets the broker use its full JIT
    b = Broker(version, data_dir=root / "broker" / "data", server_properties=props, heap="1g",
               jvm_args=("-XX:TieredStopAtLevel=4",))
    try:
        b.start()
        create_topic(b.bootstrap_servers, TOPIC, config={"cleanup.policy": "compact"})
        b.stop()
        pdir = b.partition_dir(TOPIC)
        for f in pdir.iterdir():
            if f.suffix in (".log", ".index", ".timeindex", ".snapshot", ".txnindex"):
                f.unlink()
        for f in src.glob("*.log"):
            shutil.copy2(f, pdir / f.name)
        for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
            write_offset_checkpoint(b.data_dir / name, {(TOPIC, 0): leo})
        b.extra_properties["log.cleaner.enable"] = "true"
        log_start = b.log_path.stat().st_size
        t0 = time.monotonic()
        b.start(timeout=timeout)
        while time.monotonic() - t0 < timeout:
            text = b.log_path.read_text(errors="replace")[log_start:]
            m = REPORT.search(text)
            if m and m.group(1) == f"{TOPIC}-0":
                b.stop()
                return {"processed_mib": _num(m.group(4)), "seconds": _num(m.group(5)),
                        "mib_per_s": _num(m.group(6)), "index_s": _num(m.group(8)),
                        "clean_s": _num(m.group(10)), "dirty": (int(m.group(2)), int(m.group(3)))}
            time.sleep(0.5)
        raise RuntimeError(f"the broker did not report a cleaning of {TOPIC}-0 within {timeout}s: {b.log_path}")
    finally:
        b.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of 2 GiB of closed segments")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--broker", metavar="VERSION", help="also run this Kafka version's cleaner (needs a JDK)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--workers", default="auto",
                    help="processes for the map pass: a number, 'auto' (usable CPUs) or 'both' (1 and auto)")
    a = ap.parse_args()
    total = int(2 * 1024**3 * a.scale)
    root = Path(tempfile.mkdtemp(prefix="bench-compact-"))
    try:
        src = root / "src" / f"{TOPIC}-0"
        src.mkdir(parents=True)
        size, leo = generate(src, total, keys=100_000, value_size=100, per_batch=100, segment_bytes=64 << 20)
        segs = len(list(src.glob("*.log")))
        print(f"input {size / 1e6:.1f} MB in {segs - 1} closed segments (+ active)")
        choices = {"both": [1, None], "auto": [None]}.get(a.workers) or [int(a.workers)]
        for w in choices:
            wall, cpu = run_kafkalog(src, root, a.runs, size, w)
            kl = statistics.median(wall)
            print(f"kafkalog (workers={w or 'auto'}): median {kl:.1f} MB/s wall "
                  f"({', '.join(f'{r:.1f}' for r in wall)}), {statistics.median(cpu):.1f} MB/s of CPU time")
        if a.broker:
            r = run_broker(a.broker, src, root, leo, a.timeout)
            broker_rate = size / r["seconds"] / 1e6 if r["seconds"] else float("inf")
            print(f"Kafka {a.broker} cleaner: dirty section {r['dirty']}, {r['processed_mib']:.1f} MiB processed in "
                  f"{r['seconds']:.1f} s (its report: {r['mib_per_s']:.1f} MiB/s; indexing {r['index_s']:.1f} s, "
                  f"cleaning {r['clean_s']:.1f} s) = {broker_rate:.1f} MB/s of input")
            print(f"ratio kafkalog / broker (wall): {kl / broker_rate:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
