"""A Spark job, run by ``spark-submit`` as a user runs one (``spark-submit $(kafkalog spark jars --s3a) --master URL
read_job.py CASES.json``): reads each case through ``format("kafkalog")`` and prints one JSON line per case:
``{"name", "scan": whether the JVM segment scan read it, "plan": the scan node, "rows", "digest": sha256 of the
sorted rows without the segment column (a local read and an S3 one differ there only), "segment": one row's}``.
A case that fails prints ``{"name", "error": the text}``."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from kafkalog.tools.spark import register


def read(spark, case: dict) -> dict:
    df = spark.read.format("kafkalog").options(**case.get("options", {})).load(case["path"])
    plan = df._jdf.queryExecution().executedPlan().toString()
    rows = sorted(map(repr, df.drop("segment").collect()))
    first = df.select("segment").first()
    return {"name": case["name"], "scan": "kafkalog segment scan" in plan, "rows": len(rows),
            "digest": hashlib.sha256("\n".join(rows).encode()).hexdigest(),
            "plan": next((x.strip() for x in plan.splitlines() if "kafkalog" in x), plan[:300]),
            "segment": first.segment if first else None}


def main(argv: list[str]) -> int:
    spark = SparkSession.builder.appName("kafkalog-read-job").getOrCreate()  # master and jars: spark-submit's
    register(spark)
    for case in json.loads(Path(argv[1]).read_text()):
        try:
            out = read(spark, case)
        except Exception as e:  # noqa: BLE001 - reported to the test, which names the case
            out = {"name": case["name"], "error": str(e)[-3000:]}
        print("READ " + json.dumps(out), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
