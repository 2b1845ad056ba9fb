"""The Arrow source DuckDB scans as ``records`` (:mod:`kafkalog.storage.api.sql`): :class:`RecordsScan` makes
each scan a :class:`~kafkalog.storage.api.sql_pushdown.Pushdown` and a reader over the partitions it selects, the
reader's batches with the exact filter applied; :func:`_dataset` presents it to DuckDB as a
``pyarrow.dataset.Dataset``.

pyarrow is an optional dependency (the ``sql`` extra): imported when a scan runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from kafkalog.storage.api.partition import DEFAULT_ARROW_ROWS, Partition, _reader
from kafkalog.storage.api.sql_pushdown import Pushdown
from kafkalog.storage.errors import KafkaLogError, require
from kafkalog.storage.records.columns import RECORD_COLUMNS, arrow_schema


class LogDirs(Protocol):
    """What a query asks the :class:`~kafkalog.storage.api.LogDirs` it reads: its partitions."""

    def partitions(self) -> list[Partition]: ...


class RecordsScan:
    """The source behind ``records``: each scan DuckDB starts is a :class:`Pushdown` and a reader over the
    partitions of ``dirs`` it selects (``plan_only``: no reader, an empty scan;
    :func:`~kafkalog.storage.api.sql.explain` then reads the plan). ``error`` is the first kafkalog error a reader
    raised (DuckDB reports it as its own)."""

    def __init__(self, dirs: LogDirs, *, pushdown: bool = True, include_control: bool = False,
                 read_committed: bool = False, batch_rows: int = DEFAULT_ARROW_ROWS, plan_only: bool = False):
        self.dirs = dirs
        self.pushdown = pushdown
        self.include_control = include_control
        self.read_committed = read_committed
        self.batch_rows = batch_rows
        self.plan_only = plan_only
        self.scans: list[Pushdown] = []
        self.error: KafkaLogError | None = None
        self.schema = arrow_schema(RECORD_COLUMNS)

    def partitions(self, push: Pushdown) -> list[Partition]:
        return [p for p in self.dirs.partitions() if push.selects(p)]

    def scanner(self, columns: Sequence[str] | None, expr: Any) -> _Scan:
        push = Pushdown.of(columns, expr) if self.pushdown else Pushdown(filter=None if expr is None else str(expr))
        self.scans.append(push)
        parts = [] if self.plan_only else self.partitions(push)
        reader = _reader(parts, None, self.include_control, self.read_committed, self.batch_rows,
                         window=push.window, columns=push.columns)
        return _Scan(self._guarded(reader), reader.schema, None if columns is None else list(columns), expr)

    def _guarded(self, reader: Any) -> Iterator[Any]:
        try:
            yield from reader
        except KafkaLogError as e:
            if self.error is None:
                self.error = e
            raise


class _Scan:
    """What :meth:`RecordsScan.scanner` gives DuckDB: ``to_reader()``, the reader's batches with the exact filter
    applied and narrowed to ``columns``, one batch at a time on the thread that reads it. (A
    ``pyarrow.dataset.Scanner`` over the reader would read ahead on Arrow's threads, calling into Python from
    them; a query stopped early, by a LIMIT, would leave them running when the interpreter exits: a crash.)"""

    def __init__(self, batches: Iterator[Any], schema: Any, columns: list[str] | None, expr: Any):
        self._batches, self._schema, self._columns, self._expr = batches, schema, columns, expr

    @property
    def projected_schema(self) -> Any:
        if self._columns is None:
            return self._schema
        pa = require("pyarrow", extra="sql", feature="SQL")  # optional dependency
        return pa.schema([self._schema.field(c) for c in self._columns])

    def _filtered(self) -> Iterator[Any]:
        pa = require("pyarrow", extra="sql", feature="SQL")  # optional dependency
        for b in self._batches:
            t = pa.Table.from_batches([b])
            if self._expr is not None:
                t = t.filter(self._expr)
            if self._columns is not None:
                t = t.select(self._columns)
            for out in t.to_batches():
                if out.num_rows:
                    yield out

    def to_reader(self) -> Any:
        pa = require("pyarrow", extra="sql", feature="SQL")  # optional dependency
        return pa.RecordBatchReader.from_batches(self.projected_schema, self._filtered())

    def to_table(self) -> Any:
        return self.to_reader().read_all()

    def to_batches(self) -> Iterator[Any]:
        return iter(self.to_reader())

    def count_rows(self) -> int:
        return sum(b.num_rows for b in self.to_reader())

    def head(self, num_rows: int) -> Any:
        return self.to_table().slice(0, num_rows)


_DATASET: Any = None


def _refused(name: str) -> Any:
    def refused(self: Any, *_: Any, **__: Any) -> Any:
        raise TypeError(f"records is kafkalog's Arrow source: {name} is not supported (use to_table or scanner)")

    return refused


def _dataset(source: RecordsScan) -> Any:
    """``source`` as a ``pyarrow.dataset.Dataset``, the Arrow object DuckDB pushes columns and filters into (it
    calls ``scanner(columns=..., filter=...)`` at each scan)."""
    global _DATASET
    if _DATASET is None:
        ds = require("pyarrow.dataset", extra="sql", feature="SQL")  # optional dependency

        class RecordsDataset(ds.Dataset):  # type: ignore[misc,name-defined]
            def __init__(self, src: RecordsScan):
                self._src = src

            @property
            def schema(self) -> Any:
                return self._src.schema

            def scanner(self, columns: Sequence[str] | None = None, filter: Any = None, **_: Any) -> Any:  # noqa: A002
                return self._src.scanner(columns, filter)

            # the base class's other methods read a C++ dataset this one does not have: each goes through
            # scanner() or is refused, never reaches a null pointer
            def to_batches(self, columns: Any = None, filter: Any = None, **_: Any) -> Any:  # noqa: A002
                return self.scanner(columns, filter).to_batches()

            def to_table(self, columns: Any = None, filter: Any = None, **_: Any) -> Any:  # noqa: A002
                return self.scanner(columns, filter).to_table()

            def count_rows(self, filter: Any = None, **_: Any) -> int:  # noqa: A002
                return int(self.scanner(None, filter).count_rows())

            def head(self, num_rows: int, columns: Any = None, filter: Any = None, **_: Any) -> Any:  # noqa: A002
                return self.scanner(columns, filter).head(num_rows)

        for name in ("get_fragments", "filter", "join", "join_asof", "replace_schema", "sort_by", "take",
                     "partition_expression", "__reduce__"):
            setattr(RecordsDataset, name, _refused(name))
        _DATASET = RecordsDataset
    return _DATASET(source)


__all__ = ["LogDirs", "RecordsScan"]
