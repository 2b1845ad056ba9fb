"""Record-layer benchmark: kafkalog vs kafka-python on the same bytes, in the same run (PERF-ANCHORS.md).

Not collected by pytest. Usage::

    python tests/benchmarks/bench_records.py                 # 1 GiB uncompressed + 256 MiB per codec
    python tests/benchmarks/bench_records.py --scale 0.1 --runs 3 --json

Data files are generated once under ``tests/benchmarks/data/`` (gitignored): v2 batches of ~16 KiB of
records (key ~10 bytes, value ~100 bytes, a header on every 10th record). A few distinct batches are built
and repeated with rewritten base offsets (the base offset is outside the CRC, so every batch stays valid).

Work measured over an mmap of the file (page cache warm): the tools run interleaved ``--runs`` times;
rates are from the median times, ratios are the medians of the per-run ratios (robust to load changes on a
shared machine):

* ``scan``: shallow iteration + CRC32C verification of every batch (``scan_crc``: one native pass, columnar
  result; also ``iter_batches`` + ``is_valid()``, an object per batch); the ceiling is ``crc32c`` over the
  whole mmap in one call.
* ``deep``: every record decoded to ``Record`` objects and every field read (offset, timestamp, key, value,
  headers), through the public API; peers: aiokafka's Cython reader (``aiokafka.record._crecords``, the
  fastest Python peer), kafka-python, and kafkalog's own pure-Python decoder (``KAFKALOG_NATIVE=0``'s path).
* ``tuples``: the same as ``(offset, timestamp, key, value, headers)`` tuples (``record_tuples``).
* ``arrow``: every record into Arrow columns with the data source's schema (``iter_arrow``), against aiokafka
  reading every field.
* ``parquet`` (uncompressed file only): ``export_parquet`` of the file as a one-segment partition, with the
  compiled core against the pure-Python path (what ``KAFKALOG_NATIVE=0`` runs).
* ``legacy`` (``--legacy``, message format v1: plain messages, gzip and lz4 wrappers of 50 messages, 256 MiB
  each): every record through the public API (``records()``, ``record_tuples()``, ``iter_arrow``) with the
  compiled core (``legacy.rs``) against the pure-Python path (``backend("python")``), and aiokafka's Cython
  reader, which reads v0/v1 too.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import random
import statistics
import struct
import sys
import time
from pathlib import Path

from crc32c import crc32c

from kafkalog.storage.codec.compression import CODEC_IDS, CODEC_NAMES
from kafkalog.storage.records import build_batch, build_legacy, iter_batches, scan_crc

DATA_DIR = Path(__file__).resolve().parent / "data"
#: time.perf_counter (wall) or time.process_time (CPU time of this process: fair on a loaded shared machine)
CLOCK = time.perf_counter
GIB = 1 << 30
MIB = 1 << 20
TS = 1_700_000_000_000
_WORDS = [b"alpha", b"beta", b"gamma", b"delta", b"kafka", b"topic", b"offset", b"broker", b"segment",
          b"partition", b"record", b"batch", b"consumer", b"producer", b"leader"]


def _records(rng: random.Random, first: int, target: int) -> list[tuple]:
    recs = []
    size = 0
    i = 0
    while size < target:
        # half random bytes, half words: compresses about 2x, like typical JSON-ish payloads
        value = rng.randbytes(50) + b" ".join(rng.choice(_WORDS) for _ in range(8))[:50].ljust(50, b".")
        key = b"key-%06d" % rng.randrange(1_000_000)
        headers = [("trace", rng.randbytes(8))] if i % 10 == 0 else []
        recs.append((first + i, TS + i * 3, key, value, headers))
        size += len(key) + len(value) + 8 + (16 if headers else 0)
        i += 1
    return recs


def generate(path: Path, codec: int, total: int, seed: int = 42) -> None:
    """Write ``total`` bytes (rounded up to whole batches) of v2 batches with ``codec``."""
    if path.exists() and path.stat().st_size >= total:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed + codec)
    templates = [bytearray(build_batch(_records(rng, 0, 16 * 1024), codec=codec, partition_leader_epoch=0))
                 for _ in range(32)]
    tmp = path.with_suffix(".tmp")
    written = 0
    offset = 0
    i = 0
    with open(tmp, "wb") as f:
        while written < total:
            t = templates[i % len(templates)]
            struct.pack_into(">q", t, 0, offset)  # base offset is not covered by the CRC
            (last_delta,) = struct.unpack_from(">i", t, 23)
            f.write(t)
            written += len(t)
            offset += last_delta + 1
            i += 1
    os.replace(tmp, path)


def generate_legacy(path: Path, codec: int, total: int, seed: int = 7) -> None:
    """Write ``total`` bytes (rounded up) of message format v1: plain messages (``codec`` 0) or wrappers of 50
    messages, the records as the v2 files'."""
    if path.exists() and path.stat().st_size >= total:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed + codec)
    per = 1 if codec == 0 else 50
    templates = []
    for _ in range(32):
        recs = [(i, ts, k, v) for i, (_, ts, k, v, _) in enumerate(_records(rng, 0, 8000))][:per]
        templates.append(bytearray(build_legacy(recs, magic=1, codec=codec, base_offset=0)))
    tmp = path.with_suffix(".tmp")
    written = offset = i = 0
    with open(tmp, "wb") as f:
        while written < total:
            t = templates[i % len(templates)]
            n = per if codec else 1
            struct.pack_into(">q", t, 0, offset + n - 1)  # a wrapper's offset (its last), outside the CRC
            f.write(t)
            written += len(t)
            offset += n
            i += 1
    os.replace(tmp, path)


def bench_legacy(path: Path, codec: str, runs: int) -> dict:
    """The ``legacy`` row: v1 records deep, as tuples and into Arrow, native against pure Python and aiokafka."""
    from kafkalog.storage.codec.native import backend
    from kafkalog.storage.records import iter_arrow

    size = path.stat().st_size

    def reference(fn):
        def run():
            with backend("python"):
                return fn()
        return run

    def arrow(mv, native=True):
        return sum(rb.num_rows for rb in iter_arrow(mv, native=native))

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        mv = memoryview(mm)
        try:
            data = bytes(mv)
            t, res, ratio = _paired({
                "deep": lambda: kafkalog_deep(mv), "deep-python": reference(lambda: kafkalog_deep(mv)),
                "tuples": lambda: kafkalog_tuples(mv), "tuples-python": reference(lambda: kafkalog_tuples(mv)),
                "arrow": lambda: arrow(mv), "arrow-python": reference(lambda: arrow(mv, False)),
                "aiokafka": lambda: aiokafka_deep(data)}, runs)
        finally:
            mv.release()
    n = res["deep"]
    assert set(res.values()) == {n}, res
    return {
        "work": "legacy", "codec": codec, "bytes": size, "records": n,
        **{f"{k.replace('-', '_')}_records_per_s": n / v for k, v in t.items()},
        "deep_vs_python": ratio["deep-python"], "deep_vs_aiokafka": ratio["aiokafka"],
        "tuples_vs_python": ratio["tuples-python"] / ratio["tuples"],
        "tuples_vs_aiokafka": ratio["aiokafka"] / ratio["tuples"],
        "arrow_vs_python": ratio["arrow-python"] / ratio["arrow"], "arrow_vs_aiokafka": ratio["aiokafka"] / ratio["arrow"],
    }


def kafkalog_scan(mv) -> tuple[int, int]:
    """``scan_crc``: the batch framing and every batch's CRC, one native pass (columnar result)."""
    s = scan_crc(mv)
    return len(s), s.invalid


def kafkalog_scan_batches(mv) -> tuple[int, int]:
    """The same with a batch object per entry (``iter_batches`` + ``is_valid()``)."""
    n = bad = 0
    for b in iter_batches(mv):
        n += 1
        if not b.is_valid():
            bad += 1
    return n, bad


def kafkalog_deep(mv) -> int:
    n = 0
    for b in iter_batches(mv):
        for r in b.records():
            r.offset, r.timestamp, r.key, r.value, r.headers  # noqa: B018 -- touch every field
            n += 1
    return n


def kafkalog_python_deep(mv) -> int:
    """The pure-Python reference decoder (what KAFKALOG_NATIVE=0 runs)."""
    from kafkalog.storage.codec.native import backend

    with backend("python"):  # and the Python codec packages decompress
        return kafkalog_deep(mv)


def python_decompression(fn):
    """``fn`` as it ran before native decompression: the native decoder, the Python codec packages
    decompressing (``compression.decompress_python``), the decompressed bytes a Python object."""
    from kafkalog.storage.codec.native import backend

    def run():
        with backend("python-codecs"):
            return fn()
    return run


def kafkalog_tuples(mv) -> int:
    n = 0
    for b in iter_batches(mv):
        n += len(b.record_tuples())
    return n


def kafkalog_arrow(mv) -> int:
    from kafkalog.storage.records import iter_arrow

    return sum(rb.num_rows for rb in iter_arrow(mv))


def _batches(mr):
    """The batches of a client library's ``MemoryRecords`` (aiokafka's and kafka-python's share the API)."""
    while (b := mr.next_batch()) is not None:
        yield b


def _touch_batch(b) -> int:
    """Read every field of every record of a client library's batch ``b``; the number of records."""
    n = 0
    for r in b:
        r.offset, r.timestamp, r.key, r.value, r.headers  # noqa: B018 -- touch every field
        n += 1
    return n


def _touch_records(mr) -> int:
    """Read every field of every record of ``mr``; the number of records."""
    return sum(_touch_batch(b) for b in _batches(mr))


def aiokafka_deep(data: bytes) -> int:
    from aiokafka.record._crecords import MemoryRecords

    return _touch_records(MemoryRecords(data))


def kafka_python_scan(mv) -> tuple[int, int]:
    from kafka.record import MemoryRecords
    n = bad = 0
    for b in _batches(MemoryRecords(mv)):
        n += 1
        if not b.validate_crc():
            bad += 1
    return n, bad


def kafka_python_deep(mv) -> int:
    from kafka.record import MemoryRecords
    return _touch_records(MemoryRecords(mv))


def kafkalog_parquet(path: Path, out: Path, native: bool) -> int:
    """``export_parquet`` of a one-segment partition holding ``path`` (hard-linked), with the compiled core or
    on the pure-Python path (what KAFKALOG_NATIVE=0 runs)."""
    from kafkalog.storage.codec.native import backend
    from kafkalog.storage.engine.parquet import export_parquet

    pdir = out / "bench-0"
    seg = pdir / "00000000000000000000.log"
    if not seg.exists():
        pdir.mkdir(parents=True, exist_ok=True)
        os.link(path, seg)
    with backend("native" if native else "python"):
        return export_parquet([pdir], out / ("native" if native else "python")).records


def _paired(fns: dict, runs: int) -> tuple[dict, dict, dict]:
    """Run the ``fns`` interleaved ``runs`` times (so load changes hit all of them alike); return the median
    time per name, the last result per name, and the median of the per-run time ratios to the first name."""
    times: dict = {k: [] for k in fns}
    results: dict = {}
    ratios: dict = {k: [] for k in fns}
    first = next(iter(fns))
    for _ in range(runs):
        this = {}
        for name, fn in fns.items():
            t0 = CLOCK()
            results[name] = fn()
            this[name] = CLOCK() - t0
            times[name].append(this[name])
        for name in fns:
            ratios[name].append(this[name] / this[first])
    return ({k: statistics.median(v) for k, v in times.items()}, results,
            {k: statistics.median(v) for k, v in ratios.items()})


def bench_file(path: Path, codec: str, runs: int, deep_only: bool) -> list[dict]:
    size = path.stat().st_size
    rows = []
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        mv = memoryview(mm)
        try:
            crc32c(mv)  # warm the page cache
            if not deep_only:
                t, res, ratio = _paired({"kafkalog": lambda: kafkalog_scan(mv), "crc32c": lambda: crc32c(mv),
                                         "iter_batches": lambda: kafkalog_scan_batches(mv),
                                         "kafka-python": lambda: kafka_python_scan(mv)}, runs)
                batches, bad = res["kafkalog"]
                assert res["kafka-python"] == res["iter_batches"] == (batches, bad) and bad == 0, (res, bad)
                rows.append({
                    "work": "scan+crc", "codec": codec, "bytes": size, "batches": batches,
                    "kafkalog_MBps": size / t["kafkalog"] / 1e6, "kafkalog_batches_per_s": batches / t["kafkalog"],
                    "kafka_python_MBps": size / t["kafka-python"] / 1e6,
                    "crc32c_ceiling_MBps": size / t["crc32c"] / 1e6,
                    "ratio_vs_ceiling": ratio["crc32c"], "ratio_vs_kafka_python": ratio["kafka-python"],
                    "iter_batches_MBps": size / t["iter_batches"] / 1e6,
                    "iter_batches_vs_ceiling": ratio["crc32c"] / ratio["iter_batches"],
                })
            data = bytes(mv)  # aiokafka's reader takes bytes
            fns = {"kafkalog": lambda: kafkalog_deep(mv), "aiokafka": lambda: aiokafka_deep(data),
                   "kafkalog-python": lambda: kafkalog_python_deep(mv), "kafka-python": lambda: kafka_python_deep(mv)}
            if deep_only:  # compressed: the same with Python decompression (before native decompression)
                fns["python-decompression"] = python_decompression(lambda: kafkalog_deep(mv))
            t, res, ratio = _paired(fns, runs)
            n = res["kafkalog"]
            assert res["aiokafka"] == res["kafka-python"] == res["kafkalog-python"] == n, (n, res)
            extra = {}
            if deep_only:
                assert res["python-decompression"] == n
                extra = {"python_decompression_records_per_s": n / t["python-decompression"],
                         "native_decompression_speedup": ratio["python-decompression"]}
            rows.append({
                "work": "deep", "codec": codec, "bytes": size, "records": n,
                "kafkalog_records_per_s": n / t["kafkalog"], "kafkalog_MBps": size / t["kafkalog"] / 1e6,
                "aiokafka_records_per_s": n / t["aiokafka"],
                "kafkalog_python_records_per_s": n / t["kafkalog-python"],
                "kafka_python_records_per_s": n / t["kafka-python"], "kafka_python_MBps": size / t["kafka-python"] / 1e6,
                "ratio_vs_aiokafka": ratio["aiokafka"],
                "ratio_vs_kafkalog_python": ratio["kafkalog-python"],
                "ratio_vs_kafka_python": ratio["kafka-python"], **extra,
            })
            fns = {"kafkalog": lambda: kafkalog_tuples(mv), "arrow": lambda: kafkalog_arrow(mv),
                   "aiokafka": lambda: aiokafka_deep(data)}
            if deep_only:
                fns["arrow-python-decompression"] = python_decompression(lambda: kafkalog_arrow(mv))
            t, res, ratio = _paired(fns, runs)
            assert res["arrow"] == res["aiokafka"] == n, res
            extra = {}
            if deep_only:
                assert res["arrow-python-decompression"] == n
                extra = {"arrow_python_decompression_records_per_s": n / t["arrow-python-decompression"],
                         "arrow_native_decompression_speedup":
                             ratio["arrow-python-decompression"] / ratio["arrow"]}
            rows.append({
                "work": "tuples+arrow", "codec": codec, "bytes": size, "records": n,
                "tuples_records_per_s": n / t["kafkalog"], "arrow_records_per_s": n / t["arrow"],
                "aiokafka_records_per_s": n / t["aiokafka"],
                "tuples_vs_aiokafka": ratio["aiokafka"],
                "arrow_vs_aiokafka": ratio["aiokafka"] / ratio["arrow"],
                # the deep-decode goal (2x aiokafka) leaves half of aiokafka's time per record to create, read
                # and free a Record and its five field objects; tuples_ns is what creating and freeing a tuple
                # and the same five objects alone costs here, nothing read (the floor of any CPython decoder
                # handing out objects)
                "deep_2x_budget_ns": t["aiokafka"] / n / 2 * 1e9, "tuples_ns": t["kafkalog"] / n * 1e9, **extra,
            })
            if not deep_only:
                import tempfile

                with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
                    t, res, ratio = _paired({"kafkalog": lambda: kafkalog_parquet(path, Path(tmp), True),
                                             "python": lambda: kafkalog_parquet(path, Path(tmp), False)}, runs)
                assert res["kafkalog"] == res["python"] == n, res
                rows.append({"work": "parquet", "codec": codec, "bytes": size, "records": n,
                             "kafkalog_records_per_s": n / t["kafkalog"], "python_records_per_s": n / t["python"],
                             "ratio_vs_python": ratio["python"]})
        finally:
            mv.release()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the default sizes (1 GiB / 256 MiB)")
    ap.add_argument("--runs", type=int, default=3, help="runs per measurement (median reported)")
    ap.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd", help="comma-separated codec names")
    ap.add_argument("--legacy", default="none,gzip,lz4",
                    help="comma-separated codecs of the message format v1 files ('' for none)")
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR)
    ap.add_argument("--json", action="store_true", help="print JSON Lines instead of a table")
    ap.add_argument("--cpu-time", action="store_true",
                    help="measure CPU time of this process instead of wall time (for loaded machines)")
    args = ap.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.cpu_time else time.perf_counter
    print(f"# clock: {'CPU time' if args.cpu_time else 'wall time'}, median of {args.runs} interleaved runs",
          file=sys.stderr)
    rows = []
    for name in filter(None, args.codecs.split(",")):
        codec = CODEC_IDS[name]
        total = int((GIB if codec == 0 else 256 * MIB) * args.scale)
        path = args.data_dir / f"v2-{CODEC_NAMES[codec]}-{total}.log"
        t0 = time.perf_counter()
        generate(path, codec, total)
        print(f"# {path.name}: {path.stat().st_size / 1e6:.0f} MB (ready in {time.perf_counter() - t0:.1f} s)",
              file=sys.stderr)
        for row in bench_file(path, name, args.runs, deep_only=codec != 0):
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                _print_row(row)
    for name in filter(None, args.legacy.split(",")):
        codec = CODEC_IDS[name]
        total = int(256 * MIB * args.scale)
        path = args.data_dir / f"v1-{CODEC_NAMES[codec]}-{total}.log"
        generate_legacy(path, codec, total)
        print(f"# {path.name}: {path.stat().st_size / 1e6:.0f} MB", file=sys.stderr)
        row = bench_legacy(path, name, args.runs)
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            _print_row(row)
    return 0


def _print_row(r: dict) -> None:
    if r["work"] == "scan+crc":
        print(f"scan+crc  {r['codec']:<6} {r['batches']:>9} batches  kafkalog {r['kafkalog_MBps']:>8.0f} MB/s "
              f"({r['kafkalog_batches_per_s']:>9.0f} batches/s)  kafka-python {r['kafka_python_MBps']:>8.0f} MB/s  "
              f"crc32c ceiling {r['crc32c_ceiling_MBps']:>8.0f} MB/s  => {r['ratio_vs_ceiling']:.0%} of ceiling, "
              f"{r['ratio_vs_kafka_python']:.2f}x kafka-python (iter_batches+is_valid {r['iter_batches_MBps']:.0f} MB/s, "
              f"{r['iter_batches_vs_ceiling']:.0%} of ceiling)", flush=True)
    elif r["work"] == "deep":
        print(f"deep      {r['codec']:<6} {r['records']:>9} records  kafkalog {r['kafkalog_records_per_s'] / 1e6:>6.2f} M rec/s "
              f"({r['kafkalog_MBps']:>6.0f} MB/s)  aiokafka {r['aiokafka_records_per_s'] / 1e6:>6.2f}  "
              f"kafkalog-python {r['kafkalog_python_records_per_s'] / 1e6:>6.2f}  "
              f"kafka-python {r['kafka_python_records_per_s'] / 1e6:>6.2f} M rec/s  => {r['ratio_vs_aiokafka']:.2f}x "
              f"aiokafka, {r['ratio_vs_kafkalog_python']:.2f}x pure Python, {r['ratio_vs_kafka_python']:.2f}x kafka-python"
              + (f"; Python decompression {r['python_decompression_records_per_s'] / 1e6:.2f} M rec/s "
                 f"(native {r['native_decompression_speedup']:.2f}x)" if "native_decompression_speedup" in r else ""),
              flush=True)
    elif r["work"] == "legacy":
        print(f"legacy    {r['codec']:<6} {r['records']:>9} records  deep {r['deep_records_per_s'] / 1e6:>6.2f} M rec/s "
              f"(pure Python {r['deep_python_records_per_s'] / 1e6:.2f})  tuples {r['tuples_records_per_s'] / 1e6:>6.2f} "
              f"({r['tuples_python_records_per_s'] / 1e6:.2f})  arrow {r['arrow_records_per_s'] / 1e6:>6.2f} "
              f"({r['arrow_python_records_per_s'] / 1e6:.2f})  aiokafka {r['aiokafka_records_per_s'] / 1e6:>6.2f} M rec/s"
              f"  => deep {r['deep_vs_python']:.2f}x pure Python, {r['deep_vs_aiokafka']:.2f}x aiokafka; tuples "
              f"{r['tuples_vs_python']:.2f}x, {r['tuples_vs_aiokafka']:.2f}x; arrow {r['arrow_vs_python']:.2f}x, "
              f"{r['arrow_vs_aiokafka']:.2f}x", flush=True)
    elif r["work"] == "parquet":
        print(f"parquet   {r['codec']:<6} {r['records']:>9} records  kafkalog {r['kafkalog_records_per_s'] / 1e6:>6.2f} M rec/s  "
              f"pure Python {r['python_records_per_s'] / 1e6:>6.2f} M rec/s  => {r['ratio_vs_python']:.2f}x pure Python",
              flush=True)
    else:
        print(f"tuples    {r['codec']:<6} {r['records']:>9} records  tuples {r['tuples_records_per_s'] / 1e6:>6.2f} M rec/s  "
              f"arrow {r['arrow_records_per_s'] / 1e6:>6.2f} M rec/s  aiokafka {r['aiokafka_records_per_s'] / 1e6:>6.2f} "
              f"M rec/s  => tuples {r['tuples_vs_aiokafka']:.2f}x, arrow {r['arrow_vs_aiokafka']:.2f}x aiokafka; "
              f"2x-aiokafka budget {r['deep_2x_budget_ns']:.0f} ns/record vs {r['tuples_ns']:.0f} ns to create and "
              f"free the six objects alone"
              + (f"; arrow with Python decompression {r['arrow_python_decompression_records_per_s'] / 1e6:.2f} M rec/s "
                 f"(native {r['arrow_native_decompression_speedup']:.2f}x)"
                 if "arrow_native_decompression_speedup" in r else ""),
              flush=True)

if __name__ == "__main__":
    sys.exit(main())
