"""The ``kafkalog`` Spark data source (Spark 4 Python data source API): ``format("kafkalog")`` in a session
without kafkalog's jar, else ``format("kafkalog_python")``, to which the JVM source hands what it does not read."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from .options import parse_read_options
from .reader import KafkaLogReader
from .schema import source_ddl


class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafkalog")`` and ``df.write.format("kafkalog")``; options: see
    :mod:`kafkalog.tools.spark.options` (read) and :mod:`kafkalog.tools.spark.writer` (write)."""

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> str:
        return source_ddl(self.options)

    def reader(self, schema: StructType) -> KafkaLogReader:
        return KafkaLogReader(schema, parse_read_options(self.options))

    def streamReader(self, schema: StructType):  # noqa: N802 - Spark's name
        from .stream import KafkaLogStreamReader

        return KafkaLogStreamReader(schema, dict(self.options))

    def writer(self, schema: StructType, overwrite: bool):
        from .writer import KafkaLogWriter

        return KafkaLogWriter(schema, dict(self.options), overwrite)


class KafkaLogPythonDataSource(KafkaLogDataSource):
    """The same data source under the name ``kafkalog_python``: :func:`kafkalog.tools.spark.register` registers
    it so when kafkalog's jar gives ``kafkalog`` to the JVM source (``KafkaLogSource.java``), which hands it what
    its scan does not read (and streams and writes)."""

    @classmethod
    def name(cls) -> str:
        return "kafkalog_python"
