"""kafkalog on Apache Spark: the ``kafkalog`` data source (read and write) and distributed jobs.

>>> from kafkalog.tools.spark import register, session
>>> spark = session("local[2]")            # or your own SparkSession, then register(spark)
>>> df = spark.read.format("kafkalog").option("topics", "orders").load("/var/lib/kafka/data")

Schemas: :mod:`kafkalog.tools.spark.schema`; read options: :mod:`kafkalog.tools.spark.options`; write options:
:mod:`kafkalog.tools.spark.writer`; jobs (verify, export, convert, compact): :mod:`kafkalog.tools.spark.jobs`.
"""

from __future__ import annotations

import os
import sys

from .schema import BATCH_COLUMNS, BATCH_SCHEMA_DDL, CORRUPT_COLUMN, RECORD_COLUMNS, RECORD_SCHEMA_DDL

__all__ = [
    "BATCH_COLUMNS",
    "BATCH_SCHEMA_DDL",
    "CORRUPT_COLUMN",
    "RECORD_COLUMNS",
    "RECORD_SCHEMA_DDL",
    "ensure_worker_python",
    "register",
    "session",
]


def ensure_worker_python() -> None:
    """Spark workers must run an interpreter that can import kafkalog: this one, unless told otherwise."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local masters talk over loopback only


def register(spark) -> None:
    """Register the ``kafkalog`` format on ``spark`` and enable filter pushdown to Python data sources."""
    from .source import KafkaLogDataSource

    spark.dataSource.register(KafkaLogDataSource)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def session(master: str = "local[*]", *, app_name: str = "kafkalog", conf: dict[str, str] | None = None):
    """A SparkSession with the data source registered (workers use this interpreter; UI off)."""
    ensure_worker_python()
    from pyspark.sql import SparkSession

    b = SparkSession.builder.master(master).appName(app_name)
    if master.startswith("local"):
        b = b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    b = b.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    register(spark)
    return spark
