"""A Spark job, run by ``spark-submit`` as a user runs one (``spark-submit $(kafkalog spark jars --s3a) --master URL
read_job.py CASES.json``): reads each case through ``format("kafkalog")`` and prints one JSON line per case:
``{"name", "scan": whether the JVM segment scan read it, "plan": the scan node, "rows", "digest": sha256 of the
sorted rows without the segment column (a local read and an S3 one differ there only), "segment": one row's}``.
A case that fails prints ``{"name", "error": the text}``. A case's ``before`` steps change the files first, in the
same session (:func:`change`). A case with ``"stream"`` is read by ``spark.readStream`` instead (:func:`stream`)."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

from kafkalog.tools.spark import register
from kafkalog.tools.spark.jvm import python_format


def read(spark, case: dict) -> dict:
    df = spark.read.format("kafkalog").options(**case.get("options", {})).load(case["path"])
    plan = df._jdf.queryExecution().executedPlan().toString()
    rows = sorted(map(repr, df.drop("segment").collect()))
    first = df.select("segment").first()
    return {"name": case["name"], "scan": "kafkalog segment scan" in plan, "rows": len(rows),
            "digest": hashlib.sha256("\n".join(rows).encode()).hexdigest(),
            "plan": next((x.strip() for x in plan.splitlines() if "kafkalog" in x), plan[:300]),
            "segment": first.segment if first else None}


def change(case: dict) -> None:
    """The case's ``before`` steps, run before it is read: ``["copy", LOCAL_FILE, DEST]`` and ``["delete", DEST]``,
    DEST a local path or an ``s3a://`` URL on the server of the case's ``s3.*`` options."""
    import shutil

    import pyarrow.fs as pafs

    opts = case.get("options", {})
    s3 = None
    for op, *args in case.get("before", []):
        dest = args[-1]
        if dest.startswith("s3a://"):
            if s3 is None:
                s3 = pafs.S3FileSystem(endpoint_override=opts["s3.endpoint"].split("://", 1)[1], scheme="http",
                                       access_key=opts["s3.accessKey"], secret_key=opts["s3.secretKey"],
                                       region=opts["s3.region"])
            key = dest.removeprefix("s3a://")
            if op == "copy":
                pafs.copy_files(args[0], key, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=s3)
            else:
                s3.delete_file(key)
        elif op == "copy":
            shutil.copyfile(args[0], dest)
        else:
            Path(dest).unlink()


def stream(spark, case: dict) -> dict:
    """``spark.readStream.format(FORMAT)`` (``"stream": "kafkalog"`` or ``"python"``) over the case's path, run as
    availableNow queries on one checkpoint, one after the other (``queries``: a restart each); the ``append`` steps
    (:func:`change`: segments copied in, or deleted) run in the first query's micro-batch ``appendAfter``, after the
    driver planned it and before its rows are read. With ``"until": N`` one query runs on a processing-time trigger
    until it has read N rows, then stops. Returns ``{"name",
    "descriptions": the source's, "batches": {id: {"rows", "digest", "offsets": [[partition, offset], ...]}}}``."""
    fmt = python_format(spark) if case["stream"] == "python" else "kafkalog"
    batches: dict[str, dict] = {}
    descriptions: set[str] = set()
    appended = not case.get("append")

    def collect(df, batch_id):
        nonlocal appended
        if not appended and batch_id >= case.get("appendAfter", 0):
            change({"options": case["options"], "before": case["append"]})
            appended = True
        rows = df.drop("segment").collect()
        text = sorted(map(repr, rows))
        batches[str(batch_id)] = {"rows": len(rows), "digest": hashlib.sha256("\n".join(text).encode()).hexdigest(),
                                  "offsets": sorted([r.partition, r.offset] for r in rows)}

    until = case.get("until")
    for _ in range(1 if until else case.get("queries", 2)):
        df = spark.readStream.format(fmt).options(**case["options"]).load(case["path"])
        q = (df.writeStream.foreachBatch(collect).option("checkpointLocation", case["checkpoint"])
             .trigger(**({"processingTime": "200 milliseconds"} if until else {"availableNow": True})).start())
        deadline = time.monotonic() + 600
        while until and sum(b["rows"] for b in batches.values()) < until and time.monotonic() < deadline:
            q.awaitTermination(0.2)
        if until:
            q.stop()
        q.awaitTermination(600)
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))
        descriptions |= {p["sources"][0]["description"] for p in q.recentProgress if p["sources"]}
    return {"name": case["name"], "descriptions": sorted(descriptions), "batches": batches}


def main(argv: list[str]) -> int:
    spark = SparkSession.builder.appName("kafkalog-read-job").getOrCreate()  # master and jars: spark-submit's
    register(spark)
    for case in json.loads(Path(argv[1]).read_text()):
        try:
            if "stream" in case:
                out = stream(spark, case)
            else:
                change(case)
                out = read(spark, case)
        except Exception as e:  # noqa: BLE001 - reported to the test, which names the case
            text = str(e)  # its start (the error's words) and its end (the executor's cause), not a whole trace
            out = {"name": case["name"], "error": text if len(text) <= 6000 else f"{text[:3000]} ... {text[-3000:]}"}
        print("READ " + json.dumps(out), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
