"""Spark scan throughput: records/s reading a generated multi-GiB data dir with local[1] and local[2], next to
``kafkalog dump --json --deep`` (one core) and the in-process scan (one core, no Spark).

    python tests/benchmarks/bench_spark.py [--scale GIB] [--runs N] [--reps R] [--python] [--dir DIR] [--keep]

``--reps R`` runs local[1] and local[2] alternately R times each (a fresh Spark per figure, ``--runs`` queries
each, the median of those is the figure), so a load change on a shared machine hits both alike; every figure
is printed with the 1-minute load average (``/proc/loadavg``) before it and with the CPU seconds the query
took over the whole Spark process tree (driver JVM, Python workers) next to its wall seconds: ``cpu/wall``
close to the number of cores given means the cores were busy (and more would help), well below means they
waited. ``--python`` adds local[1] with the pure-Python record decoder (``KAFKALOG_NATIVE=0``: the data
source as it was before the compiled core), for the native/Python ratio.

Figures (2-core machine, 2026-11-26 21:27 UTC, ``--scale 0.25 --runs 2 --reps 2 --python``, 2.25 M records,
load average 1.9-2.5; medians of the 2 reps):

=====================  ==========================  ===========  ========  ==========================
configuration          M records/s                 CPU s/query  cpu/wall  M records per CPU second
=====================  ==========================  ===========  ========  ==========================
local[1] native        0.643                       3.3-3.6      0.98      0.62-0.68
local[2] native        1.131 (1.76x; reps 1.82,    3.4-4.3      1.92      0.54-0.64
                       1.70)
local[1] pure Python   0.284 (native: 2.26x)       7.1-9.3      1.00      0.27-0.29
in-process scan        4.04                        (1 core, no Spark)
=====================  ==========================  ===========  ========  ==========================

Under load 12-16 from other jobs the same run gave local[1] 0.11, local[2] 0.16 M records/s with cpu/wall
0.20-0.26: wall figures taken on a busy machine say little, the CPU columns still do.
Before: local[1] 0.67, local[2] 0.88 (1.31x), in-process scan 4.9 M records/s. local[2] does the
same CPU work as local[1] (no serial part of ours grows), so its speed-up is bounded by the cores the machine
actually gives it; per CPU second, Spark's side (Arrow to rows in the JVM, the aggregation, the Python worker's
transfer of all 19 columns: Python data sources get no column pruning) costs ~8x the in-process decode, which is
why the native/Python ratio is ~2x end to end while the decoders alone differ far more.

``--ceiling`` adds local[1] over Arrow batches decoded once and then cached in the Python worker: what Spark
itself costs per record for this full-schema query (the Python data source API has no column pruning: every one
of the 19 columns goes from the worker to the JVM and into rows). 2026-11-26 23:40 UTC, ``--scale 0.25 --runs 2
--python --ceiling`` (load 6-7, CPU columns): native 0.776 M records/s (0.82 M per CPU second), pure Python 0.296
(0.30), ceiling 0.795 (0.86): the native source runs at 98 % of the ceiling, and no decoder can be more than
0.795 / 0.296 = 2.69x the pure-Python source end to end on this query, so the issue's ">= 5x" is out of reach
of any Python data source; the decoders alone differ ~20x (in-process scan 6.4 M records/s).

``--jvm`` adds local[1] through the JVM segment scan (since issue 33 ``format("kafkalog")``'s default with
kafkalog's jar; before it ``kafkalog.tools.spark.load``: the same plan, decoded in the JVM with column pruning;
the other figures are the Python source alone, ``session(jvm_scan=False)``). 2026-11-27 20:00 UTC, ``--scale 0.25 --runs 2 --python --jvm --ceiling``: JVM scan
2.774 M records/s, native Python source 0.748, pure Python 0.257, ceiling 0.876: the JVM scan is 10.8x the
pure-Python source. ``--query full`` aggregates every one of the 19 columns and ``--spark-cached`` adds Spark over
rows it cached first (the query's own cost): JVM scan 0.789, pure Python 0.254, Spark's cached rows 1.181
(3.1x; no source can pass 4.65x on that query).
2026-12-03 07:05-07:15 UTC (load 1.1-2.1), with format("kafkalog") reading through the JVM scan by default
(issue 33): ``--scale 0.25 --runs 2 --python --jvm --skip-dump``: JVM scan 2.412 M records/s, native Python source
1.038 (JVM / native 2.32x, goal >= 3.5x: the Python source got faster since 2026-11-27, 0.748 -> 1.038), pure
Python 0.358 (6.73x, goal >= 10x), Python source local[2]/local[1] 1.93x; ``--query full --jvm --spark-cached``:
JVM scan 0.946, Spark's cached rows 1.318 (72 % of the query's own bound, goal >= 80 %; was 67 %).
``--jvm`` now also runs the JVM scan on local[2]: ``--scale 0.25 --runs 2 --reps 2 --jvm --skip-dump`` (07:13 UTC,
load 1.4-2.1): JVM scan local[1] 2.456, local[2] 3.776 M records/s (1.54x, goal >= 1.8x; not explained yet: each query is ~0.6 s on
local[2], and the driver's planning, a fixed cost, is a suspect), Python source 0.949 / 1.909 (2.01x), JVM / Python 2.59x.
The suspect, measured alone at load 1.2: one ``python -m kafkalog.tools.spark.jvm_plan`` plan request over this dir
takes 0.22-0.24 s wall, and a timed query makes at least one. Without 0.22 s per query the figures above would be
0.69 s (local[1]) and 0.38 s (local[2]): 1.85x. A planner kept per session, as the JVM stream keeps one per query,
is the next step.
The planner kept for the Spark application (``Planner.java``), before (5b0410f's jar, a planner process per
request) -> after, interleaved in one run: ``--scale 0.25 --runs 2 --reps 2 --jvm --jar AFTER --base-jar BEFORE
--cluster --skip-dump``, 2026-12-03 08:35-08:45 UTC, load 7.4-11.6 (other sessions' jobs: local[2] got far less
than 2 cores, cpu/wall 0.52-0.66, so its ratio says little about the 1.8x goal here): per query, Spark's time
before its first job (its planning, with the plan request) 0.67-0.96 s -> 0.07-0.22 s; JVM scan local[1] 0.930 ->
1.261 M records/s (1.36x), local[2] 1.113 -> 1.557 (1.40x); local[2]/local[1] 1.20x -> 1.23x. A second run
(08:50-09:00 UTC, load 4.0-10.1 during the JVM figures, another session's benchmark running too): local[1] 1.622
-> 2.929 (1.81x), local[2] 1.071 -> 1.827 (1.71x), local[2] below local[1] for both jars (its cpu/wall 0.45-0.99:
the second core was busy elsewhere); cluster / local[2] 0.75x (reps 0.65, 0.91). A third (``--runs 3``, 09:11-09:17
UTC, load 2.7-6.6): before its first job 0.39-0.72 s -> 0.08-0.20 s; local[1] 1.674 -> 1.969 (1.18x), local[2]
2.252 -> 2.910 (1.29x), local[2]/local[1] 1.35x -> 1.48x (local[2]'s cpu/wall 0.99-1.09: one core's worth);
cluster / local[2] 0.92x (reps 0.83, 1.01). A fourth, on a quiet machine (``--runs 3``, 09:23-09:28 UTC, load
1.9-4.0 with the benchmark's own processes; local[2]'s cpu/wall 1.88-1.89): local[1] 2.054 -> 2.963 (1.44x),
local[2] 3.501 -> 5.687 (1.62x), local[2]/local[1] 1.70x -> 1.92x (reps 1.94, 1.89; goal >= 1.8x: met);
JVM / native Python source local[1] 3.21x (goal 3.5x: the scan's per-row work, not the planner's, is what is left).
The cluster there: 3.990 M records/s, 0.70x local[2] (reps 0.59, 0.82; goal 0.75x: not met on a quiet machine, while
the loaded runs met it). A query took 0.38-0.41 s on local[2] and 0.48-0.65 s on the cluster: the executors' run
time is the same (0.45-0.59 vs 0.47-0.51 slot-s), the difference is per task, between JVMs: task deserialization
0.09-0.11 slot-s vs 0.01-0.02, scheduler delay and launch (driver-executor RPC) 0.12-0.13 vs 0.03-0.04, the final
aggregate's job 0.063-0.067 s vs 0.023 (its shuffle read from the other executor), while the driver's planning is
the same (0.04 s); six JVMs (driver, master, 2 workers, 2 executors) share the 2 cores. The first timed query on a
fresh executor is slower still (1.04 s: its JIT not warm after one warm-up query). Note for that goal: pinned to one CPU (local[1]) the JVM picks the serial collector, on two (local[2]) G1
(JFR, 23 s of queries each: 160 young collections and 1.02 s of pauses vs 52 and 0.99 s); the scan allocates
~two ``HeapByteBuffer`` slices and a ``DefaultRecord`` per record (with Spark's ``byte[]`` copies for
``length(value)``, 90 % of the sampled allocation), so the collector is part of the per-row cost; no lock
contention between the two task threads (2 monitor waits).

``--cluster`` (the same run): a standalone master and 2 workers of 1 core each (``tests/spark/standalone.py``),
the JVM scan through ``session(url)``, interleaved with local[2]: 1.332 M records/s against local[2]'s 1.557,
0.86x (reps 0.86, 0.85: within the goal's 25 %). Where the rest goes, from Spark's event log (medians per query,
cluster vs local[2]): the final aggregate's job (one task reading the 4 partial aggregates through the shuffle)
0.40-0.59 s vs 0.03-0.05 s, of which executor run 0.18-0.35 s vs 0.003-0.011 and deserialization 0.15 vs 0.002-0.005
(each executor loads and compiles the query's generated code itself; in local mode one JVM does it once); in the
scan's job, task deserialization 0.11-0.20 slot-s vs 0.03, scheduler delay and launch 0.19-0.21 vs 0.07-0.24, idle
slots 0.32-0.39 vs 0.00-0.23; the driver's planning the same (0.10-0.22 s vs 0.07-0.12). Once per application, not
per query: the session with its executors up 24 s vs 15-20 s locally (the executors registered 12-14 s after the
application started: their JVMs start and fetch kafkalog's and kafka-clients' jars from the driver), its first
query 12-14 s (8-14 s locally). The cluster's CPU column counts the driver alone (the executors are the workers'
children); the line ``CPU per query`` gives the driver JVM's and the executors' CPU, and their JIT compiler threads'.

``--warmup N`` (default 1): untimed queries per session before the timed ones, in every configuration alike.
After one, the cluster's three JVMs are still compiling the same hot code, each for itself, on the two cores the
tasks run on (2026-12-03 19:48 UTC: 0.59-0.77 CPU-s per query compiling, against 0.30-0.45 in ``local[2]``'s one
JVM; cluster / local[2] 0.77x). With ``--warmup 20`` (steady state), twice: 0.90x (reps 0.88, 0.92) and 0.90x
(0.87, 0.92); docs/performance.md has where the rest goes.

The scan per row (``SegmentScan.Reader``, ``SegmentBatches``): a JFR profile of the benchmark's query on local[1]
(executor threads) had ``FileRecords``' per-batch loads (a read and a new heap buffer per batch, done for the
CRC check) at 14 % and Kafka's ``DefaultRecord.readFrom`` at 38 %. Local segments are now read in reused 1 MiB
windows decoded by Kafka's ``MemoryRecords`` (the remote path's reader), compressed batches through Kafka's
streaming iterator with reused buffers, the batch fields once per batch, and topic, segment and codec as
dictionary-encoded vectors. After it ``readFrom`` (Kafka's decoder, which stays) is 48 %, Spark's generated code
21 %, the copy of the values into the vectors 10 %. The scan was already columnar (``ColumnarBatch`` of
``OnHeapColumnVector``: ``ColumnarToRow`` inside whole-stage codegen). Spark's own executor CPU per query (stage
metrics, local[1] pinned, 2 interleaved reps, 2026-12-03 08:47-08:52 UTC, load 2.7-6.4): the benchmark's query
269-272 -> 232-242 ms with the windows (GC 54-56 -> 36 ms) -> 231-241 with the dictionaries; ``--query full``
1474-1519 -> 1445 -> 1428-1435 ms (the scan is ~18 % of it; Spark's sort-based aggregate and its row copies are
the rest). The whole process tree took 0.66-0.79 s CPU
per query of the benchmark's: the scan is a third, the rest is the driver's (Spark's analysis and planning
through Py4J, the planner). ``--scale 0.25 --runs 3 --reps 2 --python --jvm --base-jar BEFORE --jar AFTER
--skip-dump`` (BEFORE: this tree with 5b0410f's scan, AFTER: with the windows; 08:32-08:47 UTC, load 7.3-11.6, so wall figures say
little): JVM scan local[1] 1.500 -> 1.579 M records/s (1.05x), local[2] 1.701 -> 2.158; native Python source
0.487, pure Python 0.143 (JVM / native 3.24x, / pure 11.0x, both inflated by the load, which hits the Python
sources harder). ``--scale 0.25 --runs 2 --reps 1 --jvm --spark-cached --query full --base-jar BEFORE --jar AFTER
--skip-dump`` (AFTER: with the dictionaries too; 09:06-09:13 UTC, load 3.8-8.3, one rep): JVM scan local[1] 0.821
-> 0.968 M records/s (0.837 -> 0.971 M records per CPU second), Spark's cached rows 1.148 (1.202 per CPU second):
the 19-column aggregate at 72 % -> 84 % of the query's own bound in wall time, 70 % -> 81 % per CPU second (goal
>= 80 %; one rep on a loaded machine: to be confirmed on a quiet one). The benchmark's query again with the
dictionaries (``--runs 3 --reps 2 --jvm --base-jar BEFORE --jar AFTER --skip-dump``, 09:12-09:19 UTC, load 2.5-7.0):
wall figures swung 2x between reps (JVM scan local[1] 1.413 and 3.134, before 2.671 and 2.661 M records/s); per CPU
second of the whole process tree, which the load moves less, 2.61-2.65 -> 2.85-3.12 M records (1.08-1.19x; the
first run: 2.61-2.81 -> 2.78-3.00).

The data dir (``--scale`` GiB over 4 partitions, ~16 KiB uncompressed batches of 100-byte values, 1 GiB
segments with offset indexes) is written through the write path (LogWriter), reusing a few prebuilt batches so
generation is I/O bound. Each figure is the median of ``--runs`` runs, data in page cache; the scaling ratio is
(local[2] rate / local[1] rate) / 2 (target >= 0.8).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from scratch import scratch_dir

PARTITIONS = 4
BASE_TS = 1_700_000_000_000


def generate(root: Path, gib: float) -> int:
    from kafkalog.storage.config.log_config import LogConfig
    from kafkalog.storage.engine.writer import LogWriter
    from kafkalog.storage.records import build_batch

    templates = []
    for t in range(16):
        recs = [(i, BASE_TS + t * 1000 + i, f"key-{t}-{i}".encode(), os.urandom(50) + b"v" * 50,
                 [("h", b"x")] if i % 10 == 0 else []) for i in range(130)]
        templates.append(build_batch(recs, base_offset=0))
    per_part = int(gib * (1 << 30)) // PARTITIONS
    total = 0
    for p in range(PARTITIONS):
        with LogWriter(root / f"bench-{p}", LogConfig(), leader_epoch=0, now_ms=BASE_TS, fsync=False) as w:
            written = 0
            i = 0
            while written < per_part:
                b = templates[i % len(templates)]
                w.append(b)
                written += len(b)
                total += 130
                i += 1
    return total


def _proc_stats() -> Iterator[tuple[int, list[str]]]:
    """``(pid, the fields of /proc/PID/stat after the command name)`` of every process still there."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    yield int(d), f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue


def _jvm_cpu(root_pid: int) -> dict[str, float]:
    """CPU seconds so far of the Spark JVMs of this run, and of their JIT compiler threads: the driver (the
    ``java`` descendants of ``root_pid``) and the executors (``CoarseGrainedExecutorBackend`` processes: on
    ``--cluster`` the workers' children, one application at a time here). Keys ``driver``, ``driver JIT``,
    ``executors``, ``executors JIT`` (where the cluster's CPU goes: each JVM compiles its hot code itself)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    java: dict[int, str] = {}
    for pid, fields in _proc_stats():
        parent[pid] = int(fields[1])
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if cmd.split(b"\0", 1)[0].endswith(b"java"):
            java[pid] = "executors" if b"CoarseGrainedExecutorBackend" in cmd else "driver"
    out = {k: 0.0 for k in ("driver", "driver JIT", "executors", "executors JIT")}
    for pid, kind in java.items():
        up = pid
        while kind == "driver" and up not in (root_pid, 0, 1):
            up = parent.get(up, 0)
        if kind == "driver" and up != root_pid:
            continue  # (another application's, or a master's or a worker's)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{pid}/task/{t}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            cpu = sum(int(x) for x in st.rsplit(")", 1)[1].split()[11:13]) / tick
            out[kind] += cpu
            if "CompilerThre" in st[st.index("(") + 1:st.rindex(")")]:
                out[kind + " JIT"] += cpu
    return out


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def _tree_cpu(root_pid: int) -> float:
    """CPU seconds (user + system, including reaped children) of ``root_pid`` and every live descendant."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, float] = {}
    for pid, fields in _proc_stats():
        children.setdefault(int(fields[1]), []).append(pid)
        stats[pid] = sum(int(x) for x in fields[11:15]) / tick
    total, todo = 0.0, [root_pid]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, 0.0)
        todo.extend(children.get(pid, ()))
    return total


def spark_rate(root: Path, master: str, runs: int, n: int, pin: bool = True, native: bool = True,
               ceiling: bool = False, jvm: bool = False, query: str = "value", cached: bool = False,
               jar: str | None = None, events: Path | None = None, warmup: int = 1) -> list[float]:
    """Records/s of a full-schema scan on ``master``, measured in a fresh process (PySpark keeps one gateway
    JVM per Python process, so each master needs its own). With ``pin``, that process, its Spark JVM and the
    Python workers are confined to as many cores as the master has task slots (``taskset``): unpinned, the
    JVM side of ``local[1]`` runs on the spare core and ``local[1]`` is not one core."""
    cores = int(master[6:-1]) if master.startswith("local[") and master[6:-1].isdigit() else None
    cmd = [sys.executable, __file__, "--child", master, str(root), str(runs), str(n)]
    if pin and cores:
        cmd = ["taskset", "-c", ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:cores]), *cmd]
    env = dict(os.environ, KAFKALOG_NATIVE="1" if native else "0", BENCH_SPARK_CEILING="1" if ceiling else "0",
               BENCH_SPARK_JVM="1" if jvm else "0", BENCH_SPARK_QUERY=query,
               BENCH_SPARK_CACHED="1" if cached else "0", BENCH_SPARK_JAR=jar or "",
               BENCH_SPARK_EVENTS=str(events or ""), BENCH_SPARK_WARMUP=str(warmup))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"spark run on {master} failed (exit {p.returncode})")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _ceiling_source():
    """``format("kafkalog-ceiling")``: the kafkalog source whose reader hands out the Arrow batches it read the
    first time (kept in the reused Python worker), so a query after the warm-up costs Spark alone: no decoding.
    Its rate bounds what any decoder, however fast, can give end to end."""
    from kafkalog.tools.spark.source import KafkaLogDataSource, KafkaLogReader

    class CeilingReader(KafkaLogReader):
        def read(self, partition):
            import kafkalog.tools.spark.scan as keep  # a module the reused worker keeps between tasks

            cache = keep.__dict__.setdefault("_bench_ceiling_cache", {})
            key = tuple((p.path, p.start, p.end) for p in partition.pieces)
            if key not in cache:
                cache[key] = list(super().read(partition))
            yield from cache[key]

    class CeilingSource(KafkaLogDataSource):
        @classmethod
        def name(cls) -> str:
            return "kafkalog-ceiling"

        def reader(self, schema):
            base = super().reader(schema)
            return CeilingReader(base.schema, base.opts)

    return CeilingSource


def _spark_rate(root: Path, master: str, runs: int, n: int) -> list[float]:
    from pyspark.sql import functions as F

    from kafkalog.tools.spark import session

    jvm = os.environ.get("BENCH_SPARK_JVM") == "1"
    if os.environ.get("BENCH_SPARK_JAR"):  # --jar / --base-jar: another build of kafkalog's jar (before/after)
        import kafkalog.tools.spark.jvm as jvm_module

        jvm_module.scan_jar = lambda: Path(os.environ["BENCH_SPARK_JAR"])
    # jvm: format("kafkalog") is the JVM source (the default with kafkalog's jar); otherwise the Python source alone
    conf = {"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "2g"}
    events = os.environ.get("BENCH_SPARK_EVENTS")
    if events:  # --cluster: Spark's event log, for where the time of each query goes (event_breakdown)
        Path(events).mkdir(parents=True, exist_ok=True)
        conf |= {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events,
                 "spark.eventLog.rolling.enabled": "false",
                 "spark.eventLog.compress": "false"}
    if master.startswith("spark://"):  # --cluster: the driver on this host, its executors in the workers
        conf |= {"spark.driver.host": "127.0.0.1", "spark.executor.memory": "1g", "spark.cores.max": "2"}
    times: list[float] = []
    t0 = time.perf_counter()
    spark = session(master, conf=conf, jvm_scan=jvm)
    spark.sparkContext.setLogLevel("ERROR")
    if master.startswith("spark://"):
        while spark.sparkContext._jsc.sc().getExecutorIds().size() < 2:  # (the executors start after the session)
            time.sleep(0.1)
    started = time.perf_counter() - t0
    fmt = "kafkalog"
    if os.environ.get("BENCH_SPARK_CEILING") == "1":
        spark.dataSource.register(_ceiling_source())
        fmt = "kafkalog-ceiling"
    try:
        cached = None
        if os.environ.get("BENCH_SPARK_CACHED") == "1":  # Spark's own cost: the query over rows it keeps in memory
            cached = spark.read.format(fmt).load(str(root)).cache()
            assert cached.count() == n

        def query(i: int):
            # a fresh DataFrame per run: re-collecting one would reuse its shuffle output and skip the scan
            if cached is not None:
                df = cached
            elif jvm:  # format("kafkalog") with kafkalog's jar: the JVM source, planned by the driver's Python
                df = spark.read.format("kafkalog").option("benchRun", str(i)).load(str(root))
                assert "kafkalog segment scan" in df._jdf.queryExecution().executedPlan().toString()
            else:
                df = spark.read.format(fmt).option("benchRun", str(i)).load(str(root))
            if os.environ.get("BENCH_SPARK_QUERY") == "full":  # every one of the 19 columns
                return df, df.agg(F.count("*").alias("n"), F.sum(F.length("value")), F.sum(F.length("key")),
                                  F.max("offset"), F.max("topic"), F.max("partition"), F.max("timestamp"),
                                  F.max("timestampType"), F.sum(F.size("headers")), F.max("timestampMs"),
                                  F.max("leaderEpoch"), F.max("producerId"), F.max("producerEpoch"), F.max("sequence"),
                                  F.max(F.col("isTransactional").cast("int")), F.max(F.col("isControl").cast("int")),
                                  F.max("magic"), F.max("codec"), F.max("segment"), F.max("position"))
            return df, df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes"), F.max("offset"))

        t0 = time.perf_counter()
        query(-1)[1].collect()  # warm-up: Python workers, imports, page cache
        warm = time.perf_counter() - t0
        for i in range(1, int(os.environ.get("BENCH_SPARK_WARMUP") or 1)):  # --warmup: the JVMs' JIT too
            query(-1 - i)[1].collect()
        times, cpus = [], []
        jvms: dict[str, list[float]] = {}
        me = os.getpid()
        for i in range(runs):
            df, q = query(i)
            c, j = _tree_cpu(me), _jvm_cpu(me) if events else {}
            t = time.perf_counter()
            row = q.collect()[0]
            times.append(time.perf_counter() - t)
            cpus.append(_tree_cpu(me) - c)
            for k, v in (_jvm_cpu(me) if events else {}).items():
                jvms.setdefault(k, []).append(v - j.get(k, 0.0))
            assert row.n == n, (row.n, n)
        label = " (pure Python)" if os.environ.get("KAFKALOG_NATIVE") == "0" else ""
        label = " (ceiling: cached batches, no decoding)" if fmt != "kafkalog" else label
        label = " (JVM segment scan, column pruning)" if jvm else label
        label = " (Spark's cached rows: the query alone)" if cached is not None else label
        print(f"  {master}{label}: input partitions "
              f"{df.rdd.getNumPartitions()}, wall {[round(x, 2) for x in times]} s, "
              f"cpu {[round(x, 2) for x in cpus]} s (cpu/wall {statistics.median(cpus) / statistics.median(times):.2f}, "
              f"{n / statistics.median(cpus) / 1e6:.3f} M records per CPU second)",
              flush=True, file=sys.stderr)
        if events:
            print(f"    session start {started:.2f} s (with its executors), first query {warm:.2f} s", file=sys.stderr)
            print("    CPU per query (median), of which JIT compiler threads: "
                  + ", ".join(f"{k} {statistics.median(v):.3f} s" for k, v in jvms.items()), file=sys.stderr)
        return [n / x for x in times]
    finally:
        spark.stop()
        if events:
            slots = int(master[6:-1]) if master.startswith("local[") else 2
            for line in event_breakdown(Path(events), times, slots):
                print("    " + line, file=sys.stderr, flush=True)


def event_breakdown(events: Path, walls: list[float], slots: int) -> list[str]:
    """Where the time of the timed queries went, from Spark's event log (the newest file in ``events``) and their
    wall seconds (``walls``, measured around ``collect()`` in the driver's Python): per query, medians over the
    timed ones (the warm-up, the first, is left out): before/after the SQL execution (py4j, result to Python),
    inside it before its first job (the driver's planning: the planner request) and between jobs (AQE), and per
    job its tasks: the slot seconds they took from launch to finish, split into executor run, deserialization,
    scheduler/launch delay and result time, and the idle slot time of the job (waves, the last task's tail). Once
    per application: when each executor was added after the application started."""
    log = max(events.iterdir(), key=lambda f: f.stat().st_mtime)
    ev = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    app_start = next(e["Timestamp"] for e in ev if e["Event"] == "SparkListenerApplicationStart")
    added = [(e["Executor ID"], (e["Timestamp"] - app_start) / 1e3) for e in ev
             if e["Event"] == "SparkListenerExecutorAdded"]
    sql_start = {e["executionId"]: e["time"] for e in ev if e["Event"].endswith("SQLExecutionStart")}
    sql_end = {e["executionId"]: e["time"] for e in ev if e["Event"].endswith("SQLExecutionEnd")}
    jobs: dict[int, dict] = {}
    stage_job: dict[int, int] = {}
    for e in ev:
        if e["Event"] == "SparkListenerJobStart":
            eid = int(e.get("Properties", {}).get("spark.sql.execution.id", -1))
            jobs[e["Job ID"]] = {"exec": eid, "start": e["Submission Time"], "tasks": []}
            for sid in e["Stage IDs"]:
                stage_job[sid] = e["Job ID"]
        elif e["Event"] == "SparkListenerJobEnd":
            jobs[e["Job ID"]]["end"] = e["Completion Time"]
        elif e["Event"] == "SparkListenerTaskEnd" and e["Stage ID"] in stage_job:
            jobs[stage_job[e["Stage ID"]]]["tasks"].append(e)
    execs = sorted(x for x in sql_start if x in sql_end and any(j["exec"] == x for j in jobs.values()))
    timed = execs[-len(walls):] if walls else []
    rows: dict[str, list[float]] = {}

    def put(k: str, v: float) -> None:
        rows.setdefault(k, []).append(v)

    for wall, x in zip(walls[-len(timed):], timed, strict=True):
        mine = sorted((j for j in jobs.values() if j["exec"] == x), key=lambda j: j["start"])
        span = (sql_end[x] - sql_start[x]) / 1e3
        put("wall (collect in Python)", wall)
        put("  outside the SQL execution (py4j, rows to Python)", wall - span)
        put("  SQL execution, before its first job (driver planning, incl. the planner)",
            (mine[0]["start"] - sql_start[x]) / 1e3)
        put("  SQL execution, between/after jobs (AQE re-planning, result)",
            span - sum((j["end"] - j["start"]) / 1e3 for j in mine) - (mine[0]["start"] - sql_start[x]) / 1e3)
        for i, j in enumerate(mine):
            js = (j["end"] - j["start"]) / 1e3
            info = [t["Task Info"] for t in j["tasks"]]
            met = [t.get("Task Metrics") or {} for t in j["tasks"]]
            busy = sum((t["Finish Time"] - t["Launch Time"]) / 1e3 for t in info)
            run = sum(m.get("Executor Run Time", 0) for m in met) / 1e3
            des = sum(m.get("Executor Deserialize Time", 0) for m in met) / 1e3
            res = sum(m.get("Result Serialization Time", 0) for m in met) / 1e3
            get = sum(t.get("Getting Result Time", 0) for t in info) / 1e3
            put(f"  job {i}: {len(info)} tasks, span", js)
            put(f"    job {i}: executor run (slot s)", run)
            put(f"    job {i}: task deserialization (slot s)", des)
            put(f"    job {i}: scheduler delay + launch (slot s)", busy - run - des - res - get)
            put(f"    job {i}: result serialization + fetch (slot s)", res + get)
            put(f"    job {i}: slots idle in the job (slot s, {slots} slots)", slots * js - busy)
    out = [f"{k}: {statistics.median(v):.3f} s" for k, v in rows.items()]
    out.append("executors added after the application started: "
               + ", ".join(f"{i} at {s:.1f} s" for i, s in added))
    return out


def dump_rate(root: Path, runs: int, n: int) -> list[float]:
    logs = sorted(str(p) for p in root.rglob("*.log"))
    rates = []
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "kafkalog.tools.cli", "dump", "--json",
                            "--deep", *logs], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        el = time.perf_counter() - t
        if p.returncode != 0:
            raise SystemExit(f"dump failed: {p.stderr.decode()[-500:]}")
        rates.append(n / el)
    return rates


def inprocess_rate(root: Path, runs: int, n: int) -> list[float]:
    from kafkalog.tools.spark.options import parse_read_options
    from kafkalog.tools.spark.plan import plan
    from kafkalog.tools.spark.scan import scan

    opts = parse_read_options({"path": str(root)})
    rates = []
    for _ in range(runs):
        t = time.perf_counter()
        got = sum(rb.num_rows for g in plan(opts) for rb in scan(g, opts))
        rates.append(n / (time.perf_counter() - t))
        assert got == n
    return rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=2.0, help="GiB of log to generate (default 2)")
    ap.add_argument("--runs", type=int, default=3, help="queries per Spark session (their median is one figure)")
    ap.add_argument("--reps", type=int, default=1, help="figures per configuration, taken alternately")
    ap.add_argument("--warmup", type=int, default=1,
                    help="untimed queries per Spark session before the timed ones (default 1: Python workers, "
                         "imports, page cache; more lets every JVM's JIT settle, which a cluster's three JVMs need)")
    ap.add_argument("--python", action="store_true",
                    help="also local[1] with the pure-Python decoder (KAFKALOG_NATIVE=0)")
    ap.add_argument("--ceiling", action="store_true",
                    help="also local[1] over batches decoded once and cached (Spark's own cost: the bound on any "
                         "decoder's end-to-end rate)")
    ap.add_argument("--jvm", action="store_true",
                    help="also local[1] and local[2] through the JVM segment scan (format(\"kafkalog\") with kafkalog's jar: the same plan, "
                         "decoded in the JVM with column pruning)")
    ap.add_argument("--jar", help="kafkalog's Spark jar for the --jvm figures (default: this checkout's)")
    ap.add_argument("--base-jar", help="with --jvm, also the JVM figures with this jar (a build of an earlier "
                                       "commit), interleaved with the others: before -> after in one run. To build "
                                       "one: git archive COMMIT tools/spark | tar -x -C DIR; then in DIR: python -c "
                                       "\"import runpy, pathlib; runpy.run_path('tools/spark/jar.py')"
                                       "['build_for_package'](pathlib.Path('/tmp/before.jar'))\"")
    ap.add_argument("--cluster", action="store_true",
                    help="also the JVM scan on a standalone cluster started here (a master and 2 workers of 1 core: "
                         "tests/spark/standalone.py), interleaved with the JVM scan on local[2], with where each "
                         "query's time goes on both (Spark's event log)")
    ap.add_argument("--spark-cached", action="store_true",
                    help="also local[1] over rows Spark caches in memory first (df.cache()): the query's own cost, "
                         "the bound on any source")
    ap.add_argument("--query", choices=("value", "full"), default="value",
                    help="value: count, sum(length(value)), max(offset) (the default); full: an aggregate over every "
                         "one of the 19 columns (nothing for column pruning to drop)")
    ap.add_argument("--dir", help="where to generate (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated dir")
    ap.add_argument("--skip-dump", action="store_true", help="skip the kafkalog dump figure")
    ap.add_argument("--no-pin", dest="pin", action="store_false",
                    help="do not confine local[N] runs to N cores (the JVM then borrows the spare core)")
    ap.add_argument("--child", nargs=4, metavar=("MASTER", "ROOT", "RUNS", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        master, root_s, runs_s, n_s = args.child
        from kafkalog.tools.spark import ensure_worker_python as _ewp

        _ewp()
        print(json.dumps(_spark_rate(Path(root_s), master, int(runs_s), int(n_s))))
        return 0
    from kafkalog.tools.spark import ensure_worker_python

    ensure_worker_python()
    with scratch_dir("bench-spark-", keep=args.keep, path=args.dir) as root:
        t = time.perf_counter()
        n = generate(root, args.scale)
        size = sum(p.stat().st_size for p in root.rglob("*.log"))
        print(f"generated {n:,} records, {size / 1e9:.2f} GB in {time.perf_counter() - t:.1f} s ({root})", flush=True)
        print(f"cores: {'pinned (local[N] gets N cores)' if args.pin else 'not pinned'}", flush=True)
        figs: dict[str, list[float]] = {"local[1]": [], "local[2]": [], "python": [], "ceiling": [], "jvm": [],
                                        "jvm[2]": [], "base": [], "base[2]": [], "cluster": [], "cached": []}
        names = (["local[1]", "local[2]"] + ["python"] * args.python + ["ceiling"] * args.ceiling
                 + ["jvm", "jvm[2]"] * args.jvm + ["base", "base[2]"] * bool(args.jvm and args.base_jar)
                 + ["jvm[2]", "cluster"] * (args.cluster and not args.jvm) + ["cluster"] * (args.cluster and args.jvm)
                 + ["cached"] * args.spark_cached)
        with contextlib.ExitStack() as stack:
            url = None
            if args.cluster:
                sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
                from standalone import standalone_cluster

                t = time.perf_counter()
                url, _ = stack.enter_context(standalone_cluster(root / "cluster", workers=2, cores=1, memory="1g"))
                print(f"standalone cluster {url}: a master and 2 workers (1 core each) up in "
                      f"{time.perf_counter() - t:.1f} s", flush=True)
            for rep in range(args.reps):
                for name in names:
                    load = loadavg()
                    master = (url if name == "cluster" else name if name.startswith("local")
                              else "local[2]" if name.endswith("[2]") else "local[1]")
                    jvm = name.startswith(("jvm", "base")) or name == "cluster"
                    jar = args.base_jar if name.startswith("base") else args.jar
                    events = root / "events" / f"{name}-{rep}" if args.cluster and jvm else None
                    r = statistics.median(spark_rate(root, str(master), args.runs, n, args.pin, native=name != "python",
                                                     ceiling=name == "ceiling", jvm=jvm, query=args.query,
                                                     cached=name == "cached", jar=jar, events=events,
                                                     warmup=args.warmup))
                    figs[name].append(r)
                    print(f"rep {rep + 1} {name}: {r / 1e6:.3f} M records/s (load before: {load:.2f}, after: "
                          f"{loadavg():.2f})", flush=True)
        r1, r2 = statistics.median(figs["local[1]"]), statistics.median(figs["local[2]"])
        ratios = [b / a for a, b in zip(figs["local[1]"], figs["local[2]"], strict=True)]
        print(f"local[2]/local[1] per rep: {[round(x, 2) for x in ratios]}")
        if args.python:
            rp = statistics.median(figs["python"])
            print(f"spark local[1] pure-Python decoder (KAFKALOG_NATIVE=0): {rp / 1e6:.3f} M records/s; "
                  f"native / pure Python = {r1 / rp:.2f}x (goal >= 5x)")
        if args.ceiling:
            rc = statistics.median(figs["ceiling"])
            line = f"spark local[1] over cached batches (no decoding): {rc / 1e6:.3f} M records/s"
            if args.python:
                line += (f"; the most any decoder can give over the pure-Python one end to end: "
                         f"{rc / statistics.median(figs['python']):.2f}x")
            print(line)
        if args.jvm:
            rj = statistics.median(figs["jvm"])
            line = f"spark local[1] JVM segment scan: {rj / 1e6:.3f} M records/s; JVM scan / native Python source = {rj / r1:.2f}x"
            if args.python:
                line += f"; JVM scan / pure-Python source = {rj / statistics.median(figs['python']):.2f}x (goal >= 5x)"
            print(line)
            rj2 = statistics.median(figs["jvm[2]"])
            print(f"spark local[2] JVM segment scan: {rj2 / 1e6:.3f} M records/s; local[2]/local[1] = {rj2 / rj:.2f}x "
                  "(goal >= 1.8x)")
            if args.base_jar:
                rb, rb2 = statistics.median(figs["base"]), statistics.median(figs["base[2]"])
                print(f"  --base-jar: local[1] {rb / 1e6:.3f}, local[2] {rb2 / 1e6:.3f} M records/s, "
                      f"local[2]/local[1] = {rb2 / rb:.2f}x; this jar / base: local[1] {rj / rb:.2f}x, "
                      f"local[2] {rj2 / rb2:.2f}x")
        if args.cluster:
            rc2, rl2 = statistics.median(figs["cluster"]), statistics.median(figs["jvm[2]"])
            per = [c / loc for c, loc in zip(figs["cluster"], figs["jvm[2]"], strict=True)]
            print(f"standalone cluster (2 workers x 1 core) JVM segment scan: {rc2 / 1e6:.3f} M records/s; "
                  f"cluster / local[2] = {rc2 / rl2:.2f}x (per rep {[round(x, 2) for x in per]}; goal: within 25 %, "
                  ">= 0.75x)")
        if args.spark_cached:
            print(f"spark local[1] over its cached rows (the query alone, no source): "
                  f"{statistics.median(figs['cached']) / 1e6:.3f} M records/s")
        rin = statistics.median(inprocess_rate(root, args.runs, n))
        print(f"in-process scan (1 core, no Spark): {rin / 1e6:.3f} M records/s ({rin * size / n / 1e6:.0f} MB/s)")
        print(f"spark local[1]: {r1 / 1e6:.3f} M records/s ({r1 * size / n / 1e6:.0f} MB/s)")
        print(f"spark local[2]: {r2 / 1e6:.3f} M records/s ({r2 * size / n / 1e6:.0f} MB/s)")
        print(f"scaling local[2]/local[1] = {r2 / r1:.2f}x (goal >= 1.8x), {r2 / r1 / 2:.2f} of linear")
        if not args.skip_dump:
            rd = statistics.median(dump_rate(root, max(1, args.runs - 2), n))
            print(f"kafkalog dump --json --deep (1 core): {rd / 1e6:.3f} M records/s; "
                  f"spark local[1] / dump = {r1 / rd:.2f}x, local[2] / dump = {r2 / rd:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
