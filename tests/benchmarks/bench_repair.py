"""``kafkalog repair`` versus the real broker's own startup recovery, same dir, same machine, same run.

    python tests/benchmarks/bench_repair.py --scale 0.25        # 0.25 x (2,000 partitions, 4 GiB)
    python tests/benchmarks/bench_repair.py --scale 1 --version 3.9.2

A KRaft data dir is formatted with Kafka's own storage tool, then filled with ``2000 * scale`` partitions of
``4 GiB * scale`` in total, in the state a SIGKILLed broker leaves: no ``.kafka_cleanshutdown``, empty
recovery-point checkpoint, active ``.index``/``.timeindex`` preallocated (sparse 10 MiB), idempotent
producer batches (so producer snapshots are rebuilt), 16 KiB v2 batches in 64 MiB segments. The dir is
copied; ``kafkalog repair --no-backup`` runs on one copy, the broker starts on the other. Figures:

* kafkalog: wall time of the whole ``kafkalog repair`` process (Python start-up included);
* broker: its own "Loaded N logs in X ms" (LogManager, recovery threads = ``num.recovery.threads.per.data.dir``)
  and the wall time from launching the JVM to that line.

Both runs read a page cache warmed by the copy; the generated data is synced to disk first (``--no-sync`` to
skip), so neither side pays for writing back the benchmark's own copy. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from crc32c import crc32c
from scratch import scratch_dir

from kafkalog.compat import jars
from kafkalog.compat.broker import Broker, write_properties
from kafkalog.storage.records import build_batch

NOW = 1_700_000_000_000
SEGMENT = 64 << 20
INDEX_BYTES = 10 * 1024 * 1024
LOADED = re.compile(r"Loaded (\d+) logs in (\d+)ms")


def _template(records: int, value_size: int) -> bytearray:
    recs = [(i, NOW + i, b"key-%d" % i, b"v" * value_size) for i in range(records)]
    return bytearray(build_batch(recs, base_offset=0, producer_id=1000, producer_epoch=0, base_sequence=0))


def generate_partition(pdir: Path, total: int, template: bytearray, producer_id: int) -> int:
    """Segments of copies of ``template`` with base offset, sequence and producer id patched (CRC redone)."""
    pdir.mkdir(parents=True)
    n = int.from_bytes(template[57:61], "big")
    b = bytearray(template)
    b[43:51] = producer_id.to_bytes(8, "big")
    off = written = 0
    seg_base, seg = 0, open(pdir / f"{0:020d}.log", "wb")
    while written < total:
        if seg.tell() + len(b) > SEGMENT:
            seg.close()
            seg_base = off
            seg = open(pdir / f"{seg_base:020d}.log", "wb")
        b[0:8] = off.to_bytes(8, "big")
        b[53:57] = (off % (2**31)).to_bytes(4, "big")
        b[17:21] = crc32c(memoryview(b)[21:]).to_bytes(4, "big")
        seg.write(b)
        off += n
        written += len(b)
    seg.close()
    for ext, size in ((".index", INDEX_BYTES), (".timeindex", INDEX_BYTES - INDEX_BYTES % 12)):
        with open(pdir / f"{seg_base:020d}{ext}", "wb") as f:  # the active segment's preallocated indexes
            f.truncate(size)
    (pdir / "leader-epoch-checkpoint").write_bytes(b"0\n0\n")
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of 2,000 partitions / 4 GiB")
    ap.add_argument("--version", default=jars.LATEST_4)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="kafkalog repair --workers")
    ap.add_argument("--recovery-threads", type=int, default=1, help="broker num.recovery.threads.per.data.dir")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-sync", action="store_true",
                    help="do not sync(2) after generating: the gigabytes just written are still dirty, and "
                    "kafkalog (which fsyncs the logs whose recovery point it advances) pays their writeback")
    a = ap.parse_args()
    partitions = max(1, int(2000 * a.scale))
    per_partition = int(4 * 1024**3 * a.scale) // partitions
    with scratch_dir("bench-repair-", keep=a.keep) as root:
        broker_dir = root / "broker" / "data"
        broker = Broker(a.version, data_dir=broker_dir, heap="1g",
                        server_properties={"num.recovery.threads.per.data.dir": str(a.recovery_threads)})
        broker.data_dir.mkdir(parents=True)
        write_properties(broker.properties_path, broker.server_properties())
        broker._format()
        t0 = time.perf_counter()
        template = _template(100, 150)
        size = 0
        for p in range(partitions):
            size += generate_partition(broker_dir / f"bench-{p}", per_partition, template, 1000 + p)
        for cp in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
            (broker_dir / cp).write_bytes(b"")
        gen_s = time.perf_counter() - t0
        ours = root / "kafkalog" / "data"
        ours.parent.mkdir(parents=True)
        subprocess.run(["cp", "-a", "--sparse=always", str(broker_dir), str(ours)], check=True)
        if not a.no_sync:  # both sides start from the same state: data in the page cache, none of it dirty
            os.sync()

        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "repair", "--no-backup", "--kafka-exact",
                            "--json", "--workers", str(a.workers), str(ours)], capture_output=True, text=True)
        ours_s = time.perf_counter() - t0
        if r.returncode not in (0, 1):
            print(r.stderr, file=sys.stderr)
            return 1

        t0 = time.perf_counter()
        broker.start(wait=False)
        loaded = None
        deadline = time.monotonic() + 3600
        while loaded is None and time.monotonic() < deadline:
            m = LOADED.search(broker.log_path.read_text(errors="replace"))
            if m:
                loaded = (int(m.group(1)), int(m.group(2)))
            elif not broker.running:
                print(broker.log_path.read_text()[-3000:], file=sys.stderr)
                return 1
            else:
                time.sleep(0.05)
        broker_wall = time.perf_counter() - t0
        broker.kill()
        broker.close()
        assert loaded is not None, "the broker did not report loading its logs"
        print(json.dumps({
            "version": a.version, "partitions": partitions, "bytes": size, "generate_s": round(gen_s, 1),
            "synced_before": not a.no_sync, "kafkalog_repair_s": round(ours_s, 2), "kafkalog_workers": a.workers,
            "broker_loaded_logs": loaded[0], "broker_load_s": loaded[1] / 1000,
            "broker_launch_to_loaded_s": round(broker_wall, 2), "broker_recovery_threads": a.recovery_threads,
            "ratio_broker_load_over_kafkalog": round(loaded[1] / 1000 / ours_s, 2),
            "ratio_broker_wall_over_kafkalog": round(broker_wall / ours_s, 2),
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
