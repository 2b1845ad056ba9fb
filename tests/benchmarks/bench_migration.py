"""Benchmark: `kafkalog convert` and `kafkalog export --format parquet` vs a consume-and-reproduce migration
through a real broker (kafka-python consumer -> producer into a second topic), in the same run.

    python tests/benchmarks/bench_migration.py                 # 2 GiB of v1 data (4 partitions x 512 MiB)
    python tests/benchmarks/bench_migration.py --scale 0.125   # 256 MiB
    python tests/benchmarks/bench_migration.py --json

The generated dir holds message format v1 (uncompressed messages, and every 8th entry a gzip wrapper of 8
messages), ~1 KiB values, in 512 MiB segments. The broker path moves a sample (--broker-mb, default 128 MiB)
of the same records; throughputs are compared in MB/s of record payload (key + value) and records/s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

from kafkalog.storage.codec.compression import GZIP
from kafkalog.storage.engine.convert import ConvertOptions
from kafkalog.storage.engine.message_format import plan_convert
from kafkalog.storage.engine.parquet import export_parquet
from kafkalog.storage.engine.plan import apply
from kafkalog.storage.records import build_legacy, build_legacy_message

GiB = 1 << 30
VALUE = 1000
SEGMENT = 512 << 20


def generate(root: Path, total: int, partitions: int = 4) -> tuple[int, int]:
    """Write ``total`` bytes of v1 data; returns (records, payload bytes)."""
    per = total // partitions
    records = payload = 0
    for p in range(partitions):
        d = root / f"bench-{p}"
        d.mkdir(parents=True)
        off = 0
        seg_base = 0
        f = open(d / f"{seg_base:020d}.log", "wb", buffering=8 << 20)
        written = seg_written = 0
        template = build_legacy_message(1, 0, 1_700_000_000_000, b"key-000000", os.urandom(VALUE // 2).hex()[:VALUE]
                                        .encode())
        body = template[8:]
        while written < per:
            if off % 64 == 56:
                recs = [(off + j, 1_700_000_000_000 + j, b"key-%06d" % (j % 999999), b"g" * VALUE) for j in range(8)]
                entry = build_legacy(recs, magic=1, codec=GZIP)
                n = 8
            else:
                entry = struct.pack(">q", off) + body
                n = 1
            if seg_written + len(entry) > SEGMENT:
                f.close()
                seg_base = off
                f = open(d / f"{seg_base:020d}.log", "wb", buffering=8 << 20)
                seg_written = 0
            f.write(entry)
            written += len(entry)
            seg_written += len(entry)
            off += n
            records += n
            payload += n * (VALUE + 10)
        f.close()
    return records, payload


def timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def broker_migration(sample_records: int, value: bytes) -> tuple[float, int]:
    """Consume ``sample_records`` from topic A with kafka-python and produce them into topic B."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from kafkalog.compat import jars
    from kafkalog.compat.broker import Broker

    with Broker(jars.LATEST_4) as b:
        b.create_topic("a")
        b.create_topic("b")
        prod = KafkaProducer(bootstrap_servers=b.bootstrap_servers, linger_ms=5, batch_size=256 * 1024)
        for i in range(sample_records):
            prod.send("a", key=b"key-%06d" % (i % 999999), value=value)
        prod.flush()
        t = time.perf_counter()
        cons = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, auto_offset_reset="earliest",
                             enable_auto_commit=False, fetch_max_bytes=64 << 20, max_partition_fetch_bytes=16 << 20)
        tp = TopicPartition("a", 0)
        cons.assign([tp])
        cons.seek_to_beginning(tp)
        out = KafkaProducer(bootstrap_servers=b.bootstrap_servers, linger_ms=5, batch_size=256 * 1024)
        n = 0
        while n < sample_records:
            for recs in cons.poll(timeout_ms=1000, max_records=10000).values():
                for m in recs:
                    out.send("b", key=m.key, value=m.value, timestamp_ms=m.timestamp, headers=m.headers or None)
                    n += 1
        out.flush()
        elapsed = time.perf_counter() - t
        cons.close()
        out.close()
        prod.close()
        b.stop()
    return elapsed, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="1.0 = 2 GiB")
    ap.add_argument("--runs", type=int, default=1, help="runs per kafkalog measurement (median)")
    ap.add_argument("--broker-mb", type=float, default=128, help="MB moved through the broker (same records)")
    ap.add_argument("--no-broker", action="store_true")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="processes for the parallel convert run (default: the CPUs; 1 skips it)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="kafkalog-bench-migration-"))
    src = work / "src"
    if src.exists():
        shutil.rmtree(src)
    total = int(2 * GiB * args.scale)
    t = time.perf_counter()
    records, payload = generate(src, total)
    gen = time.perf_counter() - t
    size = sum(f.stat().st_size for f in src.rglob("*.log"))
    res: dict = {"bytes": size, "records": records, "payloadBytes": payload, "generateSeconds": round(gen, 2)}

    def run_convert(workers: int, native: bool = True) -> None:
        from kafkalog.storage.engine import convert as convert_mod

        tgt = work / "conv"
        if tgt.exists():
            shutil.rmtree(tgt)
        shutil.copytree(src, tgt)
        core = convert_mod.core
        if not native:  # the per-entry Python rewrite (convert before its loop moved into the compiled core)
            convert_mod.core = None
        try:
            t0 = time.perf_counter()
            apply(plan_convert([tgt], ConvertOptions(), workers=workers), backup=False, workers=workers)
            res.setdefault("convertRuns", []).append(time.perf_counter() - t0)
        finally:
            convert_mod.core = core

    # the compiled and the Python rewrite alternate on the same bytes (this machine is shared and noisy)
    for key, workers, native in (("convert", 1, True), ("convertPython", 1, False),
                                 ("convertParallel", args.workers, True)):
        if key == "convertParallel" and workers <= 1:
            continue
        for _ in range(args.runs):
            run_convert(workers, native)
        conv = statistics.median(res.pop("convertRuns"))
        res[key] = {"workers": workers, "seconds": round(conv, 2), "MBps": round(size / conv / 1e6, 1),
                    "recordsPerSec": round(records / conv)}
    res["convert"]["vsPython"] = round(res["convertPython"]["seconds"] / res["convert"]["seconds"], 2)
    if "convertParallel" in res:
        res["convertParallel"]["speedup"] = round(res["convert"]["seconds"] / res["convertParallel"]["seconds"], 2)

    def run_parquet() -> None:
        out = work / "pq"
        if out.exists():
            shutil.rmtree(out)
        export_parquet([src], out)

    pq = timed(run_parquet, args.runs)
    res["exportParquet"] = {"seconds": round(pq, 2), "MBps": round(size / pq / 1e6, 1),
                            "recordsPerSec": round(records / pq)}
    if not args.no_broker:
        sample = max(1000, int(args.broker_mb * 1e6 / (VALUE + 10)))
        el, n = broker_migration(sample, b"v" * VALUE)
        res["broker"] = {"records": n, "seconds": round(el, 2), "recordsPerSec": round(n / el),
                         "payloadMBps": round(n * (VALUE + 10) / el / 1e6, 1)}
        for k in ("convert", "convertParallel", "exportParquet"):
            if k in res:
                res[k]["vsBroker"] = round(res[k]["recordsPerSec"] / res["broker"]["recordsPerSec"], 1)
    shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(res))
    else:
        print(f"data: {size / 1e9:.2f} GB, {records} records (v1, ~{VALUE} B values), generated in {gen:.1f}s")
        for k in ("convert", "convertPython", "convertParallel", "exportParquet", "broker"):
            if k in res:
                print(f"{k:>14}: {json.dumps(res[k])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
