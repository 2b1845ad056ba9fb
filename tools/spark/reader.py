"""The batch reader of the ``kafkalog`` Spark data source: its input partitions, filter pushdown, planning and
reading (:class:`KafkaLogReader`); the streaming reader (:mod:`.stream`) reads its micro-batches with it."""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .filters import columns, offset_range, to_node
from .options import ReadOptions
from .plan import Piece, plan
from .schema import batch_constant_columns, column_types


class KafkaLogPartition(InputPartition):
    """One Spark input partition: pieces of segments read in order by one task."""

    def __init__(self, pieces: list[Piece]):
        super().__init__(len(pieces))
        self.pieces = pieces

    @property
    def bytes(self) -> int:
        return sum(p.length for p in self.pieces)


class KafkaLogReader(DataSourceReader):
    def __init__(self, schema: StructType, opts: ReadOptions):
        self.schema = schema
        self.opts = opts

    # ---------------------------------------------------------------------------------- pushdown
    def pushFilters(self, filters):  # noqa: N802 - Spark's name
        """Take what can be applied exactly, hand back the rest (never raise: an unknown filter class or a
        literal of another type is simply handed back).

        Taken: any filter over columns that are constant per batch (every column at batch level; ``topic``,
        ``partition``, the batch header fields, ``segment``, ``position`` and ``_corrupt`` at record level),
        evaluated on partition dirs while planning and on batch headers while scanning; and at record level
        ``=``, ``<=>``, ``<``, ``<=``, ``>``, ``>=`` on ``offset`` and ``timestamp``, which narrow the read through
        the indexes and filter records one by one. ``IN`` on ``offset``/``timestamp`` narrows the read to its
        range and is handed back.

        Only with the ``pushFilters`` option (see :mod:`.options` for why it is off by default): otherwise every
        filter is handed back and the read is the same as without a filter."""
        if not self.opts.push_filters:
            yield from filters
            return
        for f in filters:
            try:
                taken = self._take(f)
            except Exception:  # noqa: BLE001 - a filter shape we did not foresee: Spark evaluates it
                taken = False
            if not taken:
                yield f

    def _take(self, f) -> bool:
        o = self.opts
        node = to_node(f, column_types(o))
        if node is None:
            return False
        cols = columns(node)
        if cols <= batch_constant_columns(o):
            self.opts = o.with_filter(node)
            return True
        if o.batch_level or len(cols) != 1 or not cols <= {"offset", "timestamp"}:
            return False
        rng = offset_range(node)
        if rng is None:
            return False
        lo, hi = ("start_offset", "end_offset") if cols == {"offset"} else ("start_timestamp", "end_timestamp")
        narrowed = o.narrowed(**{k: v for k, v in ((lo, rng[0]), (hi, rng[1])) if v is not None})
        if node[0] == "in":  # pruned to the IN list's range; Spark still picks the listed values
            self.opts = narrowed
            return False
        self.opts = narrowed.with_filter(node)  # the node drops permissive mode's corrupt rows (null offset)
        return True

    # ---------------------------------------------------------------------------------- planning
    def partitions(self) -> list[KafkaLogPartition]:
        groups = plan(self.opts)
        return [KafkaLogPartition(g) for g in groups] or [KafkaLogPartition([])]

    # ---------------------------------------------------------------------------------- reading
    def read(self, partition: InputPartition) -> Iterator:
        assert isinstance(partition, KafkaLogPartition)  # Spark hands back the partitions planned above
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
