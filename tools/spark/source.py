"""The ``kafkalog`` Spark data source (Spark 4 Python data source API)."""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

from .options import ReadOptions, parse_read_options
from .plan import Piece, plan
from .schema import BATCH_COLUMNS, RECORD_COLUMNS, ddl


class KafkaLogPartition(InputPartition):
    """One Spark input partition: pieces of segments read in order by one task."""

    def __init__(self, pieces: list[Piece]):
        super().__init__(len(pieces))
        self.pieces = pieces

    @property
    def bytes(self) -> int:
        return sum(p.length for p in self.pieces)


class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafkalog")`` and ``df.write.format("kafkalog")``; options: see
    :mod:`kafkalog.tools.spark.options` (read) and :mod:`kafkalog.tools.spark.writer` (write)."""

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> str:
        opts = parse_read_options(self.options)
        return ddl(BATCH_COLUMNS if opts.batch_level else RECORD_COLUMNS, corrupt=opts.permissive)

    def reader(self, schema: StructType) -> KafkaLogReader:
        return KafkaLogReader(schema, parse_read_options(self.options))

    def writer(self, schema: StructType, overwrite: bool):
        from .writer import KafkaLogWriter

        return KafkaLogWriter(schema, dict(self.options), overwrite)


def _col(f) -> str | None:
    return f.attribute[0] if len(f.attribute) == 1 else None


class KafkaLogReader(DataSourceReader):
    def __init__(self, schema: StructType, opts: ReadOptions):
        self.schema = schema
        self.opts = opts

    # ---------------------------------------------------------------------------------- pushdown
    def pushFilters(self, filters):  # noqa: N802 - Spark's name
        """Take =/IN on topic and partition, and =, <, <=, >, >= on offset and timestamp (record level only).
        Everything taken is applied exactly (segments and byte ranges are pruned through the indexes, records
        are filtered one by one), so Spark need not evaluate it again."""
        record_level = not self.opts.batch_level
        for f in filters:
            if not self._take(f, record_level):
                yield f

    def _take(self, f, record_level: bool) -> bool:
        col = _col(f)
        o = self.opts
        if col == "topic":
            if isinstance(f, EqualTo) and isinstance(f.value, str):
                self.opts = o.narrowed(topic_in={f.value})
                return True
            if isinstance(f, In) and all(isinstance(v, str) for v in f.value):
                self.opts = o.narrowed(topic_in=set(f.value))
                return True
            return False
        if col == "partition":
            if isinstance(f, EqualTo) and isinstance(f.value, int):
                self.opts = o.narrowed(partitions={f.value})
                return True
            if isinstance(f, In) and all(isinstance(v, int) for v in f.value):
                self.opts = o.narrowed(partitions=set(f.value))
                return True
            return False
        if not record_level or col not in ("offset", "timestamp"):
            return False
        v = getattr(f, "value", None) if not isinstance(f, In) else None
        if not isinstance(v, int) or isinstance(v, bool):
            return False
        lo, hi = ("start_offset", "end_offset") if col == "offset" else ("start_timestamp", "end_timestamp")
        if isinstance(f, EqualTo):
            self.opts = o.narrowed(**{lo: v, hi: v + 1})
        elif isinstance(f, GreaterThan):
            self.opts = o.narrowed(**{lo: v + 1})
        elif isinstance(f, GreaterThanOrEqual):
            self.opts = o.narrowed(**{lo: v})
        elif isinstance(f, LessThan):
            self.opts = o.narrowed(**{hi: v})
        elif isinstance(f, LessThanOrEqual):
            self.opts = o.narrowed(**{hi: v + 1})
        else:
            return False
        return True

    # ---------------------------------------------------------------------------------- planning
    def partitions(self) -> list[KafkaLogPartition]:
        groups = plan(self.opts)
        return [KafkaLogPartition(g) for g in groups] or [KafkaLogPartition([])]

    # ---------------------------------------------------------------------------------- reading
    def read(self, partition: KafkaLogPartition) -> Iterator:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        from .scan import scan

        target = to_arrow_schema(self.schema, timezone="UTC")
        for rb in scan(partition.pieces, self.opts):
            if rb.schema.equals(target):
                yield rb
                continue
            arrays = []
            for field in target:
                i = rb.schema.get_field_index(field.name)
                if i < 0:
                    arrays.append(pa.nulls(rb.num_rows, field.type))
                else:
                    col = rb.column(i)
                    arrays.append(col if col.type == field.type else col.cast(field.type))
            yield pa.RecordBatch.from_arrays(arrays, schema=target)
