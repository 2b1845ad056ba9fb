"""kafkalog on Apache Spark: the ``kafkalog`` data source (read and write) and distributed jobs.

>>> from kafkalog.tools.spark import load, register, session
>>> spark = session("local[2]")            # or your own SparkSession, then register(spark)
>>> df = spark.read.format("kafkalog").option("topics", "orders").load("/var/lib/kafka/data")
>>> spark = session("local[2]", jvm_scan=True)   # the same rows, read in the JVM with column pruning:
>>> df = load(spark, "/var/lib/kafka/data", {"topics": "orders"})

Schemas: :mod:`kafkalog.tools.spark.schema`; read options: :mod:`kafkalog.tools.spark.options`; write options:
:mod:`kafkalog.tools.spark.writer`; jobs (verify, export, convert, compact): :mod:`kafkalog.tools.spark.jobs`.
"""

from __future__ import annotations

import os
import sys

from kafkalog.storage.errors import ConfigError, require

from .schema import BATCH_COLUMNS, BATCH_SCHEMA_DDL, CORRUPT_COLUMN, RECORD_COLUMNS, RECORD_SCHEMA_DDL

__all__ = [
    "BATCH_COLUMNS",
    "BATCH_SCHEMA_DDL",
    "CORRUPT_COLUMN",
    "RECORD_COLUMNS",
    "RECORD_SCHEMA_DDL",
    "ensure_worker_python",
    "load",
    "register",
    "session",
]


def ensure_worker_python() -> None:
    """Spark workers must run an interpreter that can import kafkalog: this one, unless told otherwise."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local masters talk over loopback only


def load(spark, path: str | None = None, options: dict[str, str] | None = None):
    """The records under ``path`` as ``format("kafkalog")`` reads them, through the JVM segment scan (column
    pruning; see :mod:`kafkalog.tools.spark.jvm`) when the session has it (``session(..., jvm_scan=True)``) and the
    options allow it."""
    from .jvm import load as _load

    return _load(spark, path, options)


def register(spark) -> None:
    """Register the ``kafkalog`` format on ``spark`` and enable filter pushdown to Python data sources.

    Spark's Python workers run the interpreter the session was created with (``PYSPARK_PYTHON``, else the
    system ``python3``, which may not have kafkalog): :func:`session` sets it to this one; for a session of
    your own, call :func:`ensure_worker_python` before creating it."""
    require("pyarrow", feature="the kafkalog Spark data source")
    from .source import KafkaLogDataSource

    spark.dataSource.register(KafkaLogDataSource)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def session(master: str = "local[*]", *, app_name: str = "kafkalog", conf: dict[str, str] | None = None,
            jvm_scan: bool = False):
    """A SparkSession with the data source registered (workers use this interpreter; UI off). ``jvm_scan``:
    put the JVM segment scan on the classpath (a JDK compiles it on first use), the fast path of
    :func:`kafkalog.tools.spark.jvm.load`."""
    require("pyspark", feature="Spark")
    require("pyarrow", feature="the kafkalog Spark data source")
    ensure_worker_python()
    from pyspark.sql import SparkSession

    conf = dict(conf or {})
    if jvm_scan:
        from .jvm import scan_jars

        conf["spark.jars"] = ",".join([*filter(None, [conf.get("spark.jars")]), *map(str, scan_jars())])
    b = SparkSession.builder.master(master).appName(app_name)
    if master.startswith("local"):
        b = b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    b = b.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    if jvm_scan:
        from .jvm import has_scan

        if not has_scan(spark):  # spark.jars reach the driver's classpath only when this process starts its JVM
            raise ConfigError("jvm_scan=True: this Python process already started a Spark JVM without the JVM "
                              "scan's jars (spark.jars is read once per JVM): ask for jvm_scan=True in the first "
                              "session of the process")
    register(spark)
    return spark
