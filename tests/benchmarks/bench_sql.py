"""``kafkalog sql`` beside DuckDB over a Parquet export of the same records, in the same run (issue 32).

Not collected by pytest. Usage::

    python tests/benchmarks/bench_sql.py                     # a ~200 MB data dir, 5 runs
    python tests/benchmarks/bench_sql.py --mb 50 --runs 3 --json

The data dir is generated once under ``tests/benchmarks/data/sql-<MB>mb/`` (gitignored) by the shared builders
(:func:`builders.generated_data_dir`: 4 partitions of uncompressed v2 batches of 100 records, values of
``--value-size`` bytes, a header on every third record), and exported once to Parquet (``export_parquet``:
snappy pages, one file per partition; the export time is not counted).

The query is the issue's ``SELECT partition, count(*), sum(length(value)) FROM records GROUP BY partition``;
DuckDB's ``length`` is for text, so the byte length of a BLOB is ``octet_length(value)``. Timed, interleaved
``--runs`` times (page cache warm after the first run), each a fresh connection:

* ``kafkalog``: :meth:`kafkalog.LogDirs.sql` over the broker's files (DuckDB pushes the projection into the
  reader: only ``partition`` and ``value`` leave it; every batch is read, its CRC checked and decoded);
* ``parquet``: DuckDB's own ``read_parquet`` over the export (the columnar ceiling: no CRC, no record grammar);
* ``arrow``: DuckDB over :meth:`kafkalog.LogDirs.to_arrow` with every column (no pushdown), for reference.

Ratios are the medians of the per-run ratios (robust to load changes on a shared machine); ``ratio`` is
parquet time / kafkalog time (the issue's goal: >= 0.5).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb  # noqa: E402
from builders import generated_data_dir, write_data_dir_files  # noqa: E402

import kafkalog  # noqa: E402
from kafkalog.storage.engine.parquet import export_parquet  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
QUERY = "SELECT partition, count(*), sum(octet_length(value)) FROM {src} GROUP BY partition ORDER BY partition"
PARTITIONS = 4
BATCH_RECORDS = 100


def data_dir(mb: int, value_size: int) -> tuple[Path, Path]:
    root = DATA / f"sql-{mb}mb-{value_size}"
    logs, parquet = root / "logs", root / "parquet"
    if not (root / "done").exists():
        per_record = value_size + 40
        n = mb * 1_000_000 // (per_record * PARTITIONS)
        n -= n % BATCH_RECORDS
        t = time.perf_counter()
        generated_data_dir(logs, {"bench": PARTITIONS}, n, value_size=value_size, batch_records=BATCH_RECORDS)
        write_data_dir_files(logs)
        print(f"generated {n * PARTITIONS} records in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        t = time.perf_counter()
        export_parquet([logs], parquet)
        print(f"exported to Parquet in {time.perf_counter() - t:.1f} s (not counted)", file=sys.stderr)
        (root / "done").write_text("")
    return logs, parquet


def size_of(path: Path, suffix: str) -> int:
    return sum(p.stat().st_size for p in path.rglob(f"*{suffix}"))


def run_kafkalog(logs: Path) -> list:
    with kafkalog.open(logs) as dirs:
        return dirs.sql(QUERY.format(src="records")).fetchall()


def run_parquet(parquet: Path) -> list:
    con = duckdb.connect()
    try:
        return con.sql(QUERY.format(src=f"read_parquet('{parquet}/*.parquet')")).fetchall()
    finally:
        con.close()


def run_arrow(logs: Path) -> list:
    con = duckdb.connect()
    try:
        with kafkalog.open(logs) as dirs:
            reader = dirs.to_arrow()  # noqa: F841  (DuckDB finds it by name)
            return con.sql(QUERY.format(src="reader")).fetchall()
    finally:
        con.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=200, help="size of the data dir's logs (MB)")
    ap.add_argument("--value-size", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    logs, parquet = data_dir(args.mb, args.value_size)
    log_bytes, parquet_bytes = size_of(logs, ".log"), size_of(parquet, ".parquet")
    tools = {"kafkalog": lambda: run_kafkalog(logs), "parquet": lambda: run_parquet(parquet),
             "arrow": lambda: run_arrow(logs)}
    answers = {name: fn() for name, fn in tools.items()}  # warm-up (page cache), and the answers agree
    assert answers["kafkalog"] == answers["parquet"] == answers["arrow"], answers
    times: dict[str, list[float]] = {name: [] for name in tools}
    for _ in range(args.runs):
        for name, fn in tools.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    ratio = statistics.median(p / k for p, k in zip(times["parquet"], times["kafkalog"], strict=True))
    ratio_arrow = statistics.median(a / k for a, k in zip(times["arrow"], times["kafkalog"], strict=True))
    out = {"logBytes": log_bytes, "parquetBytes": parquet_bytes, "records": sum(r[1] for r in answers["kafkalog"]),
           "runs": args.runs, "seconds": med,
           "logMBps": {name: log_bytes / 1e6 / s for name, s in med.items()},
           "ratioParquetOverKafkalog": ratio, "ratioArrowOverKafkalog": ratio_arrow,
           "duckdb": duckdb.__version__}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{out['records']:,} records, {log_bytes / 1e6:.0f} MB of .log files, {parquet_bytes / 1e6:.0f} MB "
              f"of Parquet (DuckDB {duckdb.__version__}, {args.runs} runs, medians)")
        for name, s in med.items():
            print(f"  {name:9s} {s:7.3f} s   {log_bytes / 1e6 / s:8.1f} MB/s of logs")
        print(f"  parquet time / kafkalog time: {ratio:.2f}x (goal >= 0.5x); to_arrow without pushdown / "
              f"kafkalog: {ratio_arrow:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
