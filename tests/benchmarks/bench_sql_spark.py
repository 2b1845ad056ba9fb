"""The issue's GROUP BY query with ``kafkalog sql`` beside Spark ``local[2]`` (kafkalog's fastest Spark path: the
JVM segment scan, ``kafkalog.tools.spark.load`` in a ``session(jvm_scan=True)``) and DuckDB over a Parquet export,
on the same records, in the same run (issue 32's goals: >= 5x Spark, >= 0.5x the Parquet ceiling).

Not collected by pytest. Usage::

    python tests/benchmarks/bench_sql_spark.py                   # a ~2 GB data dir, 3 runs
    python tests/benchmarks/bench_sql_spark.py --mb 500 --runs 3 --json

The data dir and its Parquet export are ``bench_sql.py``'s (``tests/benchmarks/data/sql-<MB>mb-<value size>/``,
gitignored: 4 partitions of uncompressed v2 batches of 100 records; generated and exported once, not timed). The
query is ``SELECT partition, count(*), sum(length(value)) FROM records GROUP BY partition`` (DuckDB's byte length
of a BLOB is ``octet_length``; Spark's ``length`` of a binary is its byte length). Timed, interleaved ``--runs``
times after one untimed run of each (page cache warm, Spark's JVM started and its classes loaded; the Spark
session is made once and not timed):

* ``kafkalog``: :meth:`kafkalog.LogDirs.sql` over the broker's files (DuckDB pushes the projection into the
  reader: only ``partition`` and ``value`` leave it; every batch is read, its CRC checked and decoded);
* ``spark``: ``spark.sql`` over ``kafkalog.tools.spark.load(spark, DIR)`` in ``session("local[2]",
  jvm_scan=True)``;
* ``parquet``: DuckDB's ``read_parquet`` over the export (the columnar ceiling).

Each figure is printed with the 1-minute load average and this process tree's CPU seconds (Spark's JVM is a
child of this process: ``os.times`` counts it once it is waited for, so the Spark CPU column is the JVM's user and
system time read from ``/proc/<pid>/stat`` of the JVM); ratios are medians of the per-run ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sql import data_dir, run_kafkalog, run_parquet, size_of  # noqa: E402

SPARK_QUERY = ("SELECT partition, count(*), sum(length(value)) FROM records GROUP BY partition "
               "ORDER BY partition")


def _jvm_cpu(spark) -> float:
    """CPU seconds (user + system) of the Spark driver JVM so far (``/proc/<pid>/stat``)."""
    pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=2000, help="size of the data dir's logs (MB)")
    ap.add_argument("--value-size", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from kafkalog.tools.spark import load, session

    logs, parquet = data_dir(args.mb, args.value_size)
    log_bytes = size_of(logs, ".log")
    spark = session("local[2]", jvm_scan=True, conf={"spark.driver.memory": "2g"})
    try:
        load(spark, str(logs)).createOrReplaceTempView("records")

        def run_spark() -> list:
            return [tuple(r) for r in spark.sql(SPARK_QUERY).collect()]

        tools = {"kafkalog": lambda: run_kafkalog(logs), "spark": run_spark, "parquet": lambda: run_parquet(parquet)}
        answers = {name: [tuple(r) for r in fn()] for name, fn in tools.items()}  # warm-up; the answers agree
        assert answers["kafkalog"] == answers["spark"] == answers["parquet"], answers
        wall: dict[str, list[float]] = {name: [] for name in tools}
        cpu: dict[str, list[float]] = {name: [] for name in tools}
        loads = []
        for _ in range(args.runs):
            loads.append(os.getloadavg()[0])
            for name, fn in tools.items():
                c0 = _jvm_cpu(spark) if name == "spark" else time.process_time()
                t = time.perf_counter()
                fn()
                wall[name].append(time.perf_counter() - t)
                cpu[name].append((_jvm_cpu(spark) if name == "spark" else time.process_time()) - c0)
    finally:
        spark.stop()
    med = statistics.median
    out = {"logBytes": log_bytes, "records": sum(r[1] for r in answers["kafkalog"]), "runs": args.runs,
           "load": loads, "wallSeconds": {k: med(v) for k, v in wall.items()},
           "cpuSeconds": {k: med(v) for k, v in cpu.items()},
           "kafkalogOverSpark": med(s / k for s, k in zip(wall["spark"], wall["kafkalog"], strict=True)),
           "kafkalogOverSparkCpu": med(s / k for s, k in zip(cpu["spark"], cpu["kafkalog"], strict=True)),
           "parquetOverKafkalog": med(p / k for p, k in zip(wall["parquet"], wall["kafkalog"], strict=True))}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{out['records']:,} records, {log_bytes / 1e6:.0f} MB of .log files, {args.runs} runs, load "
          f"{', '.join(f'{x:.1f}' for x in loads)}, {os.cpu_count()} CPUs (medians)")
    for name in tools:
        print(f"  {name:9s} {out['wallSeconds'][name]:7.3f} s wall  {out['cpuSeconds'][name]:7.3f} s CPU  "
              f"{log_bytes / 1e6 / out['wallSeconds'][name]:8.1f} MB/s of logs")
    print(f"  spark time / kafkalog time: {out['kafkalogOverSpark']:.2f}x wall, {out['kafkalogOverSparkCpu']:.2f}x "
          f"CPU (goal >= 5x); parquet time / kafkalog time: {out['parquetOverKafkalog']:.2f}x (goal >= 0.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
