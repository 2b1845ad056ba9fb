"""kafkalog on Apache Spark: the ``kafkalog`` data source (read and write) and distributed jobs.

>>> from kafkalog.tools.spark import register, session
>>> spark = session("local[2]")            # or your own SparkSession (spark-submit $(kafkalog spark jars)), then register(spark)
>>> df = spark.read.format("kafkalog").option("topics", "orders").load("/var/lib/kafka/data")

With kafkalog's jar on the session's classpath (:func:`session` puts it there when it has one: the wheel's, or
compiled from a checkout with a JDK), ``format("kafkalog")`` is the JVM source (``java/.../KafkaLogSource.java``):
kafkalog's planner plans the read on the driver and a JVM scan decodes only the columns the query uses; what the
scan does not read goes to the Python data source, then registered as ``kafkalog_python``
(:mod:`kafkalog.tools.spark.jvm`). Without the jar, ``format("kafkalog")`` is the Python data source.

Schemas: :mod:`kafkalog.tools.spark.schema`; read options: :mod:`kafkalog.tools.spark.options`; write options:
:mod:`kafkalog.tools.spark.writer`; jobs (verify, export, convert, compact): :mod:`kafkalog.tools.spark.jobs`.
"""

from __future__ import annotations

import logging
import os
import sys

from kafkalog.storage.errors import ConfigError, require

from .schema import BATCH_COLUMNS, BATCH_SCHEMA_DDL, CORRUPT_COLUMN, RECORD_COLUMNS, RECORD_SCHEMA_DDL

log = logging.getLogger(__name__)

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
    """Register kafkalog's Python data source on ``spark`` and enable filter pushdown to Python data sources: as
    ``kafkalog``, or as ``kafkalog_python`` when kafkalog's jar is on the session's classpath (its JVM source is
    ``kafkalog`` and hands the Python source what its scan does not read, streams and writes; Spark refuses a
    name that is both).

    Spark's Python workers run the interpreter the session was created with (``PYSPARK_PYTHON``, else the
    system ``python3``, which may not have kafkalog): :func:`session` sets it to this one; for a session of
    your own, call :func:`ensure_worker_python` before creating it."""
    require("pyarrow", feature="the kafkalog Spark data source")
    from .jvm import has_source
    from .source import KafkaLogDataSource, KafkaLogPythonDataSource

    spark.dataSource.register(KafkaLogPythonDataSource if has_source(spark) else KafkaLogDataSource)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def session(master: str = "local[*]", *, app_name: str = "kafkalog", conf: dict[str, str] | None = None,
            jvm_scan: bool | None = None):
    """A SparkSession with the data source registered (workers use this interpreter; UI off).

    ``jvm_scan``: ``None`` (default) puts kafkalog's jar on ``spark.jars`` when there is one (the wheel's, or
    compiled from a checkout's sources with a JDK on first use), so ``format("kafkalog")`` reads through the JVM
    scan; kafka-clients comes as a local jar when this machine has one (``KAFKALOG_KAFKA_CLIENTS_JAR``, Maven's
    local repository, Spark's Ivy cache), else through ``spark.jars.packages``. ``True``: the same, and an error
    when there is no jar; ``False``: the Python data source only."""
    require("pyspark", feature="Spark")
    require("pyarrow", feature="the kafkalog Spark data source")
    ensure_worker_python()
    from pyspark.sql import SparkSession

    conf = dict(conf or {})
    if jvm_scan is not False:
        from .jvm import scan_jar

        try:
            _add_jars(conf, scan_jar())
        except ConfigError as e:
            if jvm_scan:
                raise
            log.info("kafkalog: format(\"kafkalog\") is the Python data source: %s", e)
            jvm_scan = False
    b = SparkSession.builder.master(master).appName(app_name)
    if master.startswith("local"):
        b = b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    b = b.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    if jvm_scan:
        from .jvm import has_source

        if not has_source(spark):  # spark.jars reach the driver's classpath only when this process starts its JVM
            raise ConfigError("jvm_scan=True: this Python process already started a Spark JVM without kafkalog's "
                              "jar (spark.jars is read once per JVM): ask for jvm_scan=True in the first "
                              "session of the process")
    register(spark)
    return spark


def _add_jars(conf: dict[str, str], jar) -> None:
    """kafkalog's ``jar`` and kafka-clients (a local jar, else its Maven coordinates) into ``conf``."""
    from .jar import KAFKA_CLIENTS_PACKAGE, JarBuildError, local_kafka_clients

    try:
        clients = local_kafka_clients()
    except JarBuildError as e:
        raise ConfigError(str(e)) from None
    # first on the classpath: the scan is written for kafka-clients 4.3.1's record classes, and a jar of the
    # session's own (Spark's Kafka connector brings kafka-clients 3.9) must not shadow them
    jars = [str(jar), *([str(clients)] if clients is not None else []), *filter(None, [conf.get("spark.jars")])]
    if clients is None:
        conf["spark.jars.packages"] = ",".join([*filter(None, [conf.get("spark.jars.packages")]), KAFKA_CLIENTS_PACKAGE])
    conf["spark.jars"] = ",".join(jars)
