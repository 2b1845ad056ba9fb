"""Scale and memory (issue 17): ``verify``, ``describe``, ``repair --dry-run`` and ``export`` on a data dir of
100,000 partitions and on one 20 GB segment, each a whole process, with its wall time, its peak RSS and whether it
showed progress on a terminal.

    python tests/benchmarks/bench_scale.py                          # 100,000 partitions and a 20 GB segment
    python tests/benchmarks/bench_scale.py --scale 0.05                # 5,000 partitions and a 1 GB segment

The memory bound (asserted with ``--check``, and by ``tests/reliability/test_scale.py`` on 5,000 partitions and
a 200 MB segment): a command's peak anonymous memory (PSS over its process tree: heap and buffers; not the page
cache of the segments it maps, which the kernel reclaims, and which peak RSS does include) stays below
``BASE_MB`` plus ``PER_PARTITION_KB`` per partition, whatever the size of the segments: records are decoded a
chunk at a time and never held; what grows with the partition count is a small summary per partition (its name,
offsets, sizes, findings or plan entry), which the reports print. The inputs are built with
``tests/builders.py`` (:func:`many_partitions_data_dir`, :func:`big_segment_data_dir`) in a temporary dir,
deleted after. A terminal on stderr shows whether the command draws its progress bar.
Prints a table and one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from builders import big_segment_data_dir, many_partitions_data_dir  # noqa: E402

#: the stated bound: a fixed part (interpreter, libraries, the native core, read windows) ...
BASE_MB = 256
#: ... plus this much per partition of the input (one summary, its findings, its plan entry)
PER_PARTITION_KB = 4

COMMANDS = {
    "verify": ["verify", "{d}"],
    "describe": ["describe", "{d}"],
    "repair --dry-run": ["repair", "{d}", "--dry-run"],
    "export": ["export", "{d}", "--out", os.devnull],
}


def bound_mb(partitions: int) -> float:
    return BASE_MB + partitions * PER_PARTITION_KB / 1024


def _tree_rss_kb(pid: int) -> tuple[int, int]:
    """(peak RSS, current anonymous PSS) of ``pid`` and its descendants, in kB, from /proc: ``VmHWM`` is the
    kernel's high-water mark of each process's resident set (file pages of mapped segments included: page cache
    the kernel may drop); ``Pss_Anon`` (smaps_rollup) the memory only these processes hold (heap, buffers),
    proportionally: pages a forked worker still shares with its parent are counted once, not per process."""
    hwm = anon = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm += int(line.split()[1])
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss_Anon:"):
                        anon += int(line.split()[1])
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError, ValueError, PermissionError):
            pass
    return hwm, anon


def measure(args: list[str], timeout: float = 3600) -> dict:
    """Run ``kafkalog ARGS`` with stdout discarded and stderr on a terminal (so the progress bar shows), polling
    its process tree's RSS; returns the exit code, wall time, peak RSS (MB) and the terminal's bytes."""
    master, slave = pty.openpty()
    seen = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk[:4096] if len(seen) > 1 << 20 else chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "kafkalog.tools.cli", *args], stdout=subprocess.DEVNULL,
                            stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    peak = peak_anon = 0
    while proc.poll() is None:
        hwm, anon = _tree_rss_kb(proc.pid)
        peak, peak_anon = max(peak, hwm), max(peak_anon, anon)
        if time.perf_counter() - t0 > timeout:
            proc.kill()
            proc.wait()
            raise TimeoutError(f"kafkalog {' '.join(args)} did not finish within {timeout}s")
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    reader.join(timeout=5)
    os.close(master)
    text = bytes(seen).decode(errors="replace")
    return {"exit": proc.returncode, "wall": wall, "rssMB": peak / 1024, "anonMB": peak_anon / 1024, "progress": _shows_progress(text),
            "stderr": text[-2000:]}


def _shows_progress(text: str) -> bool:
    """A rich progress bar was drawn: its bar glyphs or a percentage/ETA column."""
    return any(g in text for g in ("━", "╸", "╺", "-:--:--", "0:00:"))


def run(inputs: dict[str, tuple[Path, int]], *, check: bool) -> list[dict]:
    rows = []
    for label, (d, partitions) in inputs.items():
        for name, argv in COMMANDS.items():
            args = [a.format(d=d) for a in argv]
            m = measure(args)
            row = {"command": name, "input": label, "exit": m["exit"], "wallS": round(m["wall"], 1),
                   "peakRssMB": round(m["rssMB"]), "peakAnonMB": round(m["anonMB"]),
                   "boundMB": round(bound_mb(partitions)), "progress": m["progress"]}
            rows.append(row)
            print(f"{name:<18} {label:<28} exit {row['exit']}  {row['wallS']:>7.1f} s  RSS {row['peakRssMB']:>6} MB, "
                  f"anonymous (PSS) {row['peakAnonMB']:>5} MB (bound {row['boundMB']} MB)  progress: {'yes' if row['progress'] else 'no'}", flush=True)
            if check:
                assert m["exit"] in (0, 1), (name, label, m["stderr"])
                assert row["peakAnonMB"] < row["boundMB"] and row["progress"], row
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="1 = 100,000 partitions and a 20 GB segment")
    ap.add_argument("--partitions", type=int, default=None, help="partitions (default: 100,000 x scale)")
    ap.add_argument("--segment-gb", type=float, default=None, help="segment size in GB (default: 20 x scale)")
    ap.add_argument("--dir", default=None, help="where to build the inputs (default: a temporary dir)")
    ap.add_argument("--check", action="store_true", help="fail when a command exceeds the memory bound")
    args = ap.parse_args(argv)
    if args.partitions is None:
        args.partitions = max(1, round(100_000 * args.scale))
    if args.segment_gb is None:
        args.segment_gb = 20.0 * args.scale
    root = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=args.dir))
    try:
        t = time.perf_counter()
        many = many_partitions_data_dir(root / "many", args.partitions)
        t_many = time.perf_counter() - t
        t = time.perf_counter()
        size = int(args.segment_gb * 1e9)
        big = big_segment_data_dir(root / "big", size)
        t_big = time.perf_counter() - t
        print(f"built {args.partitions:,d} partitions in {t_many:.0f} s, a {size / 1e9:.1f} GB segment in {t_big:.0f} s",
              flush=True)
        rows = run({f"{args.partitions:,d} partitions": (many, args.partitions),
                    f"one {size / 1e9:.1f} GB segment": (big, 1)}, check=args.check)
        print(json.dumps({"bench": "scale", "basePerMB": BASE_MB, "perPartitionKB": PER_PARTITION_KB, "rows": rows}))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
