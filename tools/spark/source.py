"""The ``kafkalog`` Spark data source (Spark 4 Python data source API)."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from .options import parse_read_options
from .reader import KafkaLogReader
from .schema import BATCH_COLUMNS, RECORD_COLUMNS, ddl


class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafkalog")`` and ``df.write.format("kafkalog")``; options: see
    :mod:`kafkalog.tools.spark.options` (read) and :mod:`kafkalog.tools.spark.writer` (write)."""

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> str:  # (the level and mode: no remote store's view is made for it)
        opts = parse_read_options({k: v for k, v in dict(self.options).items() if str(k).lower() != "remote"})
        return ddl(BATCH_COLUMNS if opts.batch_level else RECORD_COLUMNS, corrupt=opts.permissive)

    def reader(self, schema: StructType) -> KafkaLogReader:
        return KafkaLogReader(schema, parse_read_options(self.options))

    def streamReader(self, schema: StructType):  # noqa: N802 - Spark's name
        from .stream import KafkaLogStreamReader

        return KafkaLogStreamReader(schema, dict(self.options))

    def writer(self, schema: StructType, overwrite: bool):
        from .writer import KafkaLogWriter

        return KafkaLogWriter(schema, dict(self.options), overwrite)
