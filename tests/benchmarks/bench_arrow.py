"""The Arrow reader (:meth:`kafkalog.LogDirs.to_arrow`) beside aiokafka's Cython reader and the ``crc32c`` scan
ceiling, in the same run, on the same generated segments (issue 32's decode goals).

Not collected by pytest. Usage::

    python tests/benchmarks/bench_arrow.py                        # 4 partitions, 1 GiB uncompressed, 256 MiB lz4/zstd
    python tests/benchmarks/bench_arrow.py --scale 0.25 --runs 5 --json

The segments are ``bench_records.py``'s (v2 batches of ~16 KiB: keys ~10 bytes, values ~100 bytes, a header on
every 10th record), one file per codec hard-linked as the only segment of ``--partitions`` partitions of a data dir
under ``tests/benchmarks/data/`` (gitignored), indexed as a broker's. Page cache warm; the works run interleaved
``--runs`` times; rates are from the median times, ratios are the medians of the per-run ratios (robust to a shared
machine's load changes). Each work is timed on two clocks at once: wall time (what a user waits; the threads help
only when CPUs are free) and this process's CPU time (all its threads: the work done, what a loaded machine does
not distort; on an idle machine with N CPUs the parallel read's wall time approaches its CPU time / N):

* ``arrow``: ``to_arrow()`` read to the end, every column (CRC checked, every record decoded into Arrow buffers),
  with the reader's default threads; ``arrow-1``: the same on one thread (``threads=1``);
* ``arrow-cols``: ``to_arrow(columns=[topic, partition, offset, timestamp])`` (no key, value or headers asked);
* ``arrow-view``: ``to_arrow(binary_view=True)``, every column, key and value as views (no copy per record);
* ``arrow-any``: ``to_arrow(ordered=False)``, every column, the batches as the threads make them (no thread
  waits for the reader to reach its partition);
* ``aiokafka``: aiokafka's Cython reader (``aiokafka.record._crecords``) reading every field of every record of
  every partition (its bytes in memory: it takes ``bytes``), one thread as a consumer does;
* ``aiokafka-crc``: the same, each batch's CRC checked first (``validate_crc()``), as aiokafka's consumer does by
  default (``check_crcs=True``) and as ``arrow`` always does; reported beside the goal's peer, not instead of it;
* ``crc32c`` (uncompressed only): the ``crc32c`` package over every partition's mmap, the ceiling in bytes/s. The
  maps are made once, before the runs: after the first run their pages are mapped, which a reader opening the
  segments anew (``arrow``) pays again every run;
* ``crc32c-fresh`` (uncompressed only): the same over maps made anew each run (what mapping the page cache costs).

Goals (issue 32): ``arrow`` >= 10x aiokafka and >= 40 % of the ceiling uncompressed; >= 4x aiokafka with lz4 and
zstd. Measured ``--scale 0.5 --runs 5`` on 2026-12-03 (load 7-11, alternated with the core before the shared
batch-level columns, docs/performance.md), CPU time: uncompressed ``arrow`` 3.01x -> 3.65x aiokafka (16.5 M
records/s, 17 % of the ceiling), ``arrow-1`` 2.99x -> 3.90x, lz4 3.00x -> 3.47x, zstd 2.52x -> 2.63x; wall ratios
were noise at that load.

``--one-partition N``: instead, one partition of the same batches cut into ``N`` segments (1 GiB uncompressed by
default), read whole by one thread as before pieces existed (``whole``: ``MIN_PIECE_BYTES`` out of reach), and in
pieces of about one batch (``partition._pieces``) on 1 thread (``pieces-1``) and on the reader's default threads
(``pieces``): the speedup of decoding the pieces of one partition at once.
"""

from __future__ import annotations

import argparse
import inspect
import json
import mmap
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_records import DATA_DIR, GIB, MIB, _batches, _touch_batch, _touch_records, generate  # noqa: E402
from builders import write_data_dir_files  # noqa: E402
from crc32c import crc32c  # noqa: E402

import kafkalog  # noqa: E402
from kafkalog.storage.codec.compression import CODEC_IDS, CODEC_NAMES  # noqa: E402

SMALL_COLUMNS = ["topic", "partition", "offset", "timestamp"]


def data_dir(codec: str, total: int, partitions: int) -> Path:
    """A data dir of ``partitions`` partitions, each one segment: the generated file of ``total / partitions``
    bytes of ``codec`` batches, hard-linked, with its indexes."""
    per = total // partitions
    src = DATA_DIR / f"v2-{CODEC_NAMES[CODEC_IDS[codec]]}-{per}.log"
    generate(src, CODEC_IDS[codec], per)
    root = DATA_DIR / f"arrow-{codec}-{per}x{partitions}"
    if not (root / "done").exists():
        write_data_dir_files(root)
        for p in range(partitions):
            seg = root / f"bench-{p}" / "00000000000000000000.log"
            seg.parent.mkdir(parents=True, exist_ok=True)
            if not seg.exists():
                os.link(src, seg)
        with kafkalog.open(root) as dirs:  # the offset and time indexes a broker writes beside its segments
            kafkalog.apply(dirs.plan_reindex(all_segments=True), backup=False)
        (root / "done").touch()
    return root


def one_partition_dir(codec: str, total: int, segments: int) -> Path:
    """A data dir of one partition ``big-0`` holding ``total`` bytes of ``codec`` batches (the generated file's)
    in ``segments`` segments cut at batch boundaries, with its indexes."""
    src = DATA_DIR / f"v2-{CODEC_NAMES[CODEC_IDS[codec]]}-{total}.log"
    generate(src, CODEC_IDS[codec], total)
    root = DATA_DIR / f"arrow-one-{codec}-{total}x{segments}"
    if not (root / "done").exists():
        write_data_dir_files(root)
        pdir = root / "big-0"
        pdir.mkdir(parents=True, exist_ok=True)
        data = src.read_bytes()
        per, pos, start = len(data) // segments, 0, 0
        while pos < len(data):
            pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
            if pos - start >= per or pos >= len(data):
                base = int.from_bytes(data[start:start + 8], "big")
                (pdir / f"{base:020d}.log").write_bytes(data[start:pos])
                start = pos
        with kafkalog.open(root) as dirs:
            kafkalog.apply(dirs.plan_reindex(all_segments=True), backup=False)
        (root / "done").touch()
    return root


def bench_pieces(codec: str, total: int, segments: int, runs: int) -> dict:
    from kafkalog.storage.api import partition as api

    root = one_partition_dir(codec, total, segments)
    size = sum(s.stat().st_size for s in root.glob("*/*.log"))
    sizes = api.MIN_PIECE_BYTES, api.PIECE_BYTES

    def whole() -> int:
        api.MIN_PIECE_BYTES = api.PIECE_BYTES = 1 << 62
        try:
            return arrow(root, threads=1)
        finally:
            api.MIN_PIECE_BYTES, api.PIECE_BYTES = sizes

    fns = {"whole": whole, "pieces-1": lambda: arrow(root, threads=1), "pieces": lambda: arrow(root)}
    fns["pieces"]()  # warm up
    times, res, ratios = _paired(fns, runs)
    assert res["whole"] == res["pieces-1"] == res["pieces"], res
    row = {"codec": codec, "segments": segments, "bytes": size, "records": res["whole"], "cpus": os.cpu_count(),
           "load": os.getloadavg()[0]}
    for c in CLOCKS:
        row |= {f"{c}_{k.replace('-', '_')}_MBps": size / v / 1e6 for k, v in times[c].items()}
        row |= {f"{c}_pieces_vs_whole": 1 / ratios[c]["pieces"], f"{c}_pieces_1_vs_whole": 1 / ratios[c]["pieces-1"]}
    return row


def _print_pieces(r: dict) -> None:
    for c in CLOCKS:
        print(f"{r['codec']:<5} {c:<4} one partition, {r['segments']} segments, {r['bytes'] / 1e6:.0f} MB "
              f"{r['records']} records (load {r['load']:.1f}): whole {r[f'{c}_whole_MBps']:.0f} MB/s, pieces on 1 "
              f"thread {r[f'{c}_pieces_1_MBps']:.0f} MB/s, pieces {r[f'{c}_pieces_MBps']:.0f} MB/s => pieces "
              f"{r[f'{c}_pieces_vs_whole']:.2f}x whole (1 thread {r[f'{c}_pieces_1_vs_whole']:.2f}x)", flush=True)


def _threads_kw(threads: int | None) -> dict:
    """``threads=`` where the reader takes it (a run on an older tree reads without it)."""
    return {"threads": threads} if "threads" in inspect.signature(kafkalog.LogDirs.to_arrow).parameters else {}


def arrow(root: Path, threads: int | None = None, columns: list[str] | None = None, **kw) -> int:
    with kafkalog.open(root) as dirs:
        reader = dirs.to_arrow(columns=columns, **_threads_kw(threads), **kw)
        return sum(rb.num_rows for rb in reader)


def aiokafka(datas: list[bytes]) -> int:
    from aiokafka.record._crecords import MemoryRecords

    return sum(_touch_records(MemoryRecords(d)) for d in datas)


def aiokafka_crc(datas: list[bytes]) -> int:
    """``aiokafka`` with each batch's CRC checked first, as its consumer's fetcher does (``check_crcs=True``)."""
    from aiokafka.record._crecords import MemoryRecords

    n = 0
    for d in datas:
        for b in _batches(MemoryRecords(d)):
            if not b.validate_crc():
                raise ValueError("aiokafka: a batch's CRC does not match")
            n += _touch_batch(b)
    return n


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _paired(fns: dict, runs: int) -> tuple[dict, dict, dict]:
    """``fns`` interleaved ``runs`` times: per clock, the median time per name and the median of the per-run
    ratios of each name's time to the first name's; and the last result per name."""
    times: dict = {c: {k: [] for k in fns} for c in CLOCKS}
    ratios: dict = {c: {k: [] for k in fns} for c in CLOCKS}
    results: dict = {}
    first = next(iter(fns))
    for _ in range(runs):
        this: dict = {c: {} for c in CLOCKS}
        for name, fn in fns.items():
            t0 = {c: clock() for c, clock in CLOCKS.items()}
            results[name] = fn()
            for c, clock in CLOCKS.items():
                this[c][name] = clock() - t0[c]
                times[c][name].append(this[c][name])
        for c in CLOCKS:
            for name in fns:
                ratios[c][name].append(this[c][name] / this[c][first])
    med = statistics.median
    return ({c: {k: med(v) for k, v in times[c].items()} for c in CLOCKS}, results,
            {c: {k: med(v) for k, v in ratios[c].items()} for c in CLOCKS})


def _crc_fresh(path: Path) -> int:
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return crc32c(m)


def bench(codec: str, total: int, partitions: int, runs: int) -> dict:
    root = data_dir(codec, total, partitions)
    segs = sorted(root.glob("*/*.log"))
    size = sum(s.stat().st_size for s in segs)
    files = [open(s, "rb") for s in segs]  # noqa: SIM115 - closed below
    maps = [mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) for f in files]
    try:
        datas = [bytes(m) for m in maps]
        fns = {"arrow": lambda: arrow(root), "arrow-1": lambda: arrow(root, threads=1),
               "arrow-cols": lambda: arrow(root, columns=SMALL_COLUMNS), "aiokafka": lambda: aiokafka(datas),
               "aiokafka-crc": lambda: aiokafka_crc(datas)}
        if "binary_view" in inspect.signature(kafkalog.LogDirs.to_arrow).parameters:
            fns["arrow-view"] = lambda: arrow(root, binary_view=True)
        if "ordered" in inspect.signature(kafkalog.LogDirs.to_arrow).parameters:
            fns["arrow-any"] = lambda: arrow(root, ordered=False)
        if codec == "none":
            fns["crc32c"] = lambda: [crc32c(m) for m in maps]
            fns["crc32c-fresh"] = lambda: [_crc_fresh(s) for s in segs]
        fns["arrow"]()  # warm up (imports, page cache)
        times, res, ratios = _paired(fns, runs)
    finally:
        for m in maps:
            m.close()
        for f in files:
            f.close()
    n = res["arrow"]
    assert res["arrow-1"] == res["arrow-cols"] == res["aiokafka"] == res["aiokafka-crc"] == n, res
    assert res.get("arrow-view", n) == n, res
    assert res.get("arrow-any", n) == n, res
    row = {"codec": codec, "partitions": partitions, "bytes": size, "records": n, "cpus": os.cpu_count(),
           "load": os.getloadavg()[0]}
    for c in CLOCKS:
        t, ratio = times[c], ratios[c]
        row |= {f"{c}_{k.replace('-', '_')}_MBps": size / v / 1e6 for k, v in t.items()}
        row |= {f"{c}_{k.replace('-', '_')}_records_per_s": n / v for k, v in t.items() if not k.startswith("crc")}
        row |= {f"{c}_arrow_vs_aiokafka": ratio["aiokafka"],
                f"{c}_arrow_1_vs_aiokafka": ratio["aiokafka"] / ratio["arrow-1"],
                f"{c}_arrow_vs_aiokafka_crc": ratio["aiokafka-crc"],
                f"{c}_arrow_1_vs_aiokafka_crc": ratio["aiokafka-crc"] / ratio["arrow-1"],
                f"{c}_arrow_cols_vs_arrow": 1 / ratio["arrow-cols"], f"{c}_arrow_vs_arrow_1": ratio["arrow-1"]}
        if "arrow-view" in t:
            row[f"{c}_arrow_view_vs_aiokafka"] = ratio["aiokafka"] / ratio["arrow-view"]
        if "arrow-any" in t:
            row[f"{c}_arrow_any_vs_aiokafka"] = ratio["aiokafka"] / ratio["arrow-any"]
        if "crc32c" in t:
            row[f"{c}_arrow_of_ceiling"] = ratio["crc32c"]
            row[f"{c}_arrow_1_of_ceiling"] = ratio["crc32c"] / ratio["arrow-1"]
            row[f"{c}_arrow_of_fresh_ceiling"] = ratio["crc32c-fresh"]
    return row


def _print(r: dict) -> None:
    for c in CLOCKS:
        line = (f"{r['codec']:<5} {c:<4} {r['partitions']} partitions {r['bytes'] / 1e6:.0f} MB {r['records']} "
                f"records (load {r['load']:.1f}): arrow {r[f'{c}_arrow_records_per_s'] / 1e6:.2f} M rec/s "
                f"({r[f'{c}_arrow_MBps']:.0f} MB/s), 1 thread {r[f'{c}_arrow_1_records_per_s'] / 1e6:.2f}, "
                f"4 columns {r[f'{c}_arrow_cols_records_per_s'] / 1e6:.2f}, aiokafka "
                f"{r[f'{c}_aiokafka_records_per_s'] / 1e6:.2f} M rec/s => arrow {r[f'{c}_arrow_vs_aiokafka']:.2f}x "
                f"aiokafka (1 thread {r[f'{c}_arrow_1_vs_aiokafka']:.2f}x), threads {r[f'{c}_arrow_vs_arrow_1']:.2f}x, "
                f"4 columns {r[f'{c}_arrow_cols_vs_arrow']:.2f}x all; aiokafka with its consumer's CRC check "
                f"{r[f'{c}_aiokafka_crc_records_per_s'] / 1e6:.2f} M rec/s => arrow "
                f"{r[f'{c}_arrow_vs_aiokafka_crc']:.2f}x it (1 thread {r[f'{c}_arrow_1_vs_aiokafka_crc']:.2f}x)")
        if f"{c}_arrow_view_vs_aiokafka" in r:
            line += f"; binary_view {r[f'{c}_arrow_view_vs_aiokafka']:.2f}x aiokafka"
        if f"{c}_arrow_any_vs_aiokafka" in r:
            line += f"; ordered=False {r[f'{c}_arrow_any_vs_aiokafka']:.2f}x aiokafka"
        if f"{c}_arrow_of_ceiling" in r:
            line += (f"; crc32c {r[f'{c}_crc32c_MBps']:.0f} MB/s => arrow {r[f'{c}_arrow_of_ceiling']:.0%} of it "
                     f"(1 thread {r[f'{c}_arrow_1_of_ceiling']:.0%}); over maps made anew each run "
                     f"{r[f'{c}_crc32c_fresh_MBps']:.0f} MB/s => arrow {r[f'{c}_arrow_of_fresh_ceiling']:.0%} of it")
        print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the default sizes (1 GiB / 256 MiB)")
    ap.add_argument("--runs", type=int, default=5, help="interleaved runs per measurement (median reported)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--codecs", default="none,lz4,zstd", help="comma-separated codec names")
    ap.add_argument("--json", action="store_true", help="print JSON Lines instead of a line per codec")
    ap.add_argument("--one-partition", type=int, metavar="SEGMENTS", default=0,
                    help="one partition of this many segments: whole vs in pieces (see above)")
    args = ap.parse_args(argv)
    print(f"# wall clock, median of {args.runs} interleaved runs, {os.cpu_count()} CPUs", file=sys.stderr)
    for codec in filter(None, args.codecs.split(",")):
        total = int((GIB if codec == "none" else 256 * MIB) * args.scale)
        if args.one_partition:
            row = bench_pieces(codec, total, args.one_partition, args.runs)
            print(json.dumps(row), flush=True) if args.json else _print_pieces(row)
            continue
        row = bench(codec, total, args.partitions, args.runs)
        print(json.dumps(row), flush=True) if args.json else _print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
