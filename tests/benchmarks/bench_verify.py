"""``kafkalog verify`` versus Kafka's DumpLogSegments ``--deep-iteration`` over the same generated data dir.

    python tests/benchmarks/bench_verify.py --scale 1            # 4 GiB, 256 partitions
    python tests/benchmarks/bench_verify.py --scale 0.25 --runs 3 --version 3.9.2

The data dir holds ``256 * scale`` partitions of ``16 MiB`` each (8 MiB segments, ``4 GiB * scale`` in
total) of ~16 KiB v2 batches, the partitions cycling through the codecs none, lz4, zstd and snappy, with
indexes, leader-epoch checkpoints, partition.metadata, meta.properties and checkpoints as a broker writes them
(so a clean verify has no finding). Timed, each as a whole process (start-up included), page cache warm:

* ``kafkalog verify`` (shallow: framing, CRC32C, offsets, indexes, checkpoints) with 1 and 2 workers;
* ``kafkalog verify --deep`` (also decompresses and decodes every record) with 1 and 2 workers;
* DumpLogSegments ``--deep-iteration --files <every .log>`` (one JVM; stdout to /dev/null): CRC check per
  batch and a decompressing iteration over every record, which is what ``verify --deep`` also does.

Prints one JSON object: MB/s (MB = 10^6 bytes of .log) per run (median over ``--runs``) and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafkalog.compat import jars
from kafkalog.compat.tools import dump_class
from kafkalog.storage.codec.compression import LZ4, NONE, SNAPPY, ZSTD
from kafkalog.storage.files.checkpoints import write_offset_checkpoint
from kafkalog.storage.files.leader_epoch import EpochEntry, write_leader_epoch_checkpoint
from kafkalog.storage.files.meta_properties import MetaProperties, write_meta_properties
from kafkalog.storage.files.partition_metadata import write_partition_metadata
from kafkalog.storage.log.segment import recover_segment
from kafkalog.storage.records import build_batch

NOW = 1_700_000_000_000
PARTITION_BYTES = 16 << 20
SEGMENT = 8 << 20
CODECS = (NONE, LZ4, ZSTD, SNAPPY)


def _templates() -> dict[int, tuple[bytes, int]]:
    """One ~16 KiB-of-records batch per codec (values half random, half repetitive): (bytes, record count)."""
    rnd = random.Random(7)
    recs = [(i, NOW + i, b"key-%06d" % i, bytes(rnd.getrandbits(8) for _ in range(250)) + b"payload " * 95)
            for i in range(16)]
    return {c: (build_batch(recs, base_offset=0, codec=c, partition_leader_epoch=0), len(recs)) for c in CODECS}


def generate(root: Path, scale: float) -> tuple[Path, int]:
    """The data dir and its total .log bytes. The base offset is outside the batch CRC, so copies of a
    template only need their first 8 bytes patched."""
    data = root / "data"
    data.mkdir(parents=True)
    templates = _templates()
    partitions = max(2, round(256 * scale))
    total = 0
    rp = {}
    for p in range(partitions):
        codec = CODECS[p % len(CODECS)]
        batch, n = templates[codec]
        pdir = data / f"bench-{codec}-{p}"
        pdir.mkdir()
        offset = 0
        written = 0
        while written < PARTITION_BYTES:
            base = offset
            chunks = []
            size = 0
            while size + len(batch) <= SEGMENT and written + size < PARTITION_BYTES:
                chunks.append(offset.to_bytes(8, "big") + batch[8:])
                size += len(batch)
                offset += n
            log = b"".join(chunks)
            (pdir / f"{base:020d}.log").write_bytes(log)
            r = recover_segment(log, base, on_overflow="stop")
            (pdir / f"{base:020d}.index").write_bytes(r.offset_index.to_bytes(trim=True))
            (pdir / f"{base:020d}.timeindex").write_bytes(r.time_index.to_bytes(trim=True))
            written += size
        total += written
        write_leader_epoch_checkpoint(pdir / "leader-epoch-checkpoint", [EpochEntry(0, 0)])
        write_partition_metadata(pdir / "partition.metadata", "l5y0MjLvQdypLcP9XmR7bw", fsync=False)
        rp[(f"bench-{codec}", p)] = offset
    write_meta_properties(data / "meta.properties",
                          MetaProperties.new(version=1, cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=1, now=0))
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        write_offset_checkpoint(data / name, rp)
    for name in ("log-start-offset-checkpoint", "cleaner-offset-checkpoint"):
        write_offset_checkpoint(data / name, {})
    return data, total


def _timed(cmd: list[str], stdout=subprocess.DEVNULL) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, check=False)
    return time.perf_counter() - t, proc


def kafkalog_verify(data: Path, workers: int, deep: bool) -> float:
    cmd = [sys.executable, "-m", "kafkalog.tools.cli", "verify", "--json", "--no-progress", "--workers", str(workers)]
    if deep:
        cmd.append("--deep")
    secs, proc = _timed([*cmd, str(data)], stdout=subprocess.PIPE)
    if proc.returncode != 0 or proc.stdout.strip():
        raise SystemExit(f"kafkalog verify failed ({proc.returncode}): {proc.stdout[:2000]} {proc.stderr[-2000:]}")
    return secs


def dump_log_segments(version: str, logs: list[Path], deep: bool) -> float:
    libs = jars.ensure_kafka(version)
    cmd = [jars.java_executable(), "-Xmx1g", "-cp", jars.classpath(libs), dump_class(version)]
    if deep:
        cmd.append("--deep-iteration")
    secs, proc = _timed([*cmd, "--files", ",".join(str(p) for p in logs)])
    if proc.returncode != 0:
        raise SystemExit(f"DumpLogSegments failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return secs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="1 = 4 GiB in 256 partitions")
    ap.add_argument("--runs", type=int, default=1, help="runs per measurement (the median is reported)")
    ap.add_argument("--version", default=jars.LATEST_4, help="Kafka version of DumpLogSegments")
    ap.add_argument("--keep", action="store_true", help="keep the generated data dir")
    args = ap.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="bench-verify-"))
    try:
        t = time.perf_counter()
        data, total = generate(root, args.scale)
        gen_secs = time.perf_counter() - t
        logs = sorted(data.glob("*/*.log"))
        dump_log_segments(args.version, logs[:1], deep=False)  # resolve jars, warm the JVM's class cache
        for p in logs:  # warm the page cache
            with open(p, "rb") as f:
                while f.read(1 << 24):
                    pass
        runs: dict[str, list[float]] = {}
        plan = [
            ("kafkalog verify, 1 worker", lambda: kafkalog_verify(data, 1, False)),
            ("kafkalog verify, 2 workers", lambda: kafkalog_verify(data, 2, False)),
            ("kafkalog verify --deep, 1 worker", lambda: kafkalog_verify(data, 1, True)),
            ("kafkalog verify --deep, 2 workers", lambda: kafkalog_verify(data, 2, True)),
            ("DumpLogSegments --deep-iteration", lambda: dump_log_segments(args.version, logs, deep=True)),
            ("DumpLogSegments (shallow)", lambda: dump_log_segments(args.version, logs, deep=False)),
        ]
        for _ in range(args.runs):
            for name, fn in plan:
                runs.setdefault(name, []).append(fn())
        secs = {k: statistics.median(v) for k, v in runs.items()}
        mbs = {k: round(total / 1e6 / s, 1) for k, s in secs.items()}
        dls = secs["DumpLogSegments --deep-iteration"]
        out = {
            "bytes": total,
            "partitions": len({p.parent for p in logs}),
            "segments": len(logs),
            "generate_seconds": round(gen_secs, 1),
            "kafka_version": args.version,
            "cpus": os.cpu_count(),
            "runs": args.runs,
            "seconds": {k: round(v, 2) for k, v in secs.items()},
            "MB_per_s": mbs,
            "speedup_vs_DumpLogSegments_deep": {k: round(dls / s, 2) for k, s in secs.items()
                                                if k.startswith("kafkalog")},
        }
        print(json.dumps(out, indent=2))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept {root}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
