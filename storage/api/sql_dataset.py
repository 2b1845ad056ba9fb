"""The Arrow source DuckDB scans as ``records`` (:mod:`kafkalog.storage.api.sql`): :class:`RecordsScan` makes
each scan a :class:`~kafkalog.storage.api.sql_pushdown.Pushdown` and a reader over the partitions it selects, the
reader's batches with the exact filter applied; :func:`_dataset` presents it to DuckDB as a
``pyarrow.dataset.Dataset``.

``key`` and ``value`` reach DuckDB as Arrow ``binary_view`` (the reader's zero-copy views into the segments'
mapped bytes and the decompressed batches) when the DuckDB installed reads that type (:func:`duckdb_reads_views`,
checked once); else as ``binary``, copies. The dataset still declares them ``binary``: DuckDB pushes no filter
into a dataset declaring a view type (pyarrow's compute has no filter or take for ``binary_view``), and it reads
each scan's stream by the stream's own Arrow schema, checking only that each column is the declared DuckDB type
(BLOB for both). A scan with a filter evaluates it on the other columns (or on copies of key and value when it
names them) and keeps the rows as slices of the views, copying only when the rows kept are scattered
(:func:`_filter`).

pyarrow is an optional dependency (the ``sql`` extra): imported when a scan runs.
"""

from __future__ import annotations

import functools
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
    raised (DuckDB reports it as its own). ``views``: key and value as ``binary_view`` (None: when DuckDB reads
    them, :func:`duckdb_reads_views`)."""

    def __init__(self, dirs: LogDirs, *, pushdown: bool = True, include_control: bool = False,
                 read_committed: bool = False, batch_rows: int = DEFAULT_ARROW_ROWS, plan_only: bool = False,
                 views: bool | None = None):
        self.dirs = dirs
        self.views = duckdb_reads_views() if views is None else views
        self.pushdown = pushdown
        self.include_control = include_control
        self.read_committed = read_committed
        self.batch_rows = batch_rows
        self.plan_only = plan_only
        self.scans: list[Pushdown] = []
        self.error: KafkaLogError | None = None
        self.schema = arrow_schema(RECORD_COLUMNS)  # (declared binary, streamed as views: the module docstring)

    def partitions(self, push: Pushdown) -> list[Partition]:
        return [p for p in self.dirs.partitions() if push.selects(p)]

    def scanner(self, columns: Sequence[str] | None, expr: Any) -> _Scan:
        push = Pushdown.of(columns, expr) if self.pushdown else Pushdown(filter=None if expr is None else str(expr))
        self.scans.append(push)
        parts = [] if self.plan_only else self.partitions(push)
        # (in any order: a relation has none without ORDER BY, and the threads never wait for DuckDB to reach
        # their partition)
        reader = _reader(parts, None, self.include_control, self.read_committed, self.batch_rows,
                         window=push.window, columns=push.columns, views=self.views, ordered=False)
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
                t = _filter(pa, t, self._expr)
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


MAX_RUNS = 16
"""A filtered batch with ``binary_view`` columns keeps its rows as at most this many slices of the views (no
copy); rows kept more scattered than that are filtered on copies of key and value, viewed again."""

_ROWS: list[Any] = [None]  # a cached 0..n-1 int64 array: the row numbers of a probe


def _row_numbers(pa: Any, n: int) -> Any:
    rows = _ROWS[0]
    if rows is None or len(rows) < n:
        rows = _ROWS[0] = pa.array(range(max(n, 2 * DEFAULT_ARROW_ROWS)), pa.int64())
    return rows.slice(0, n)


def _filter(pa: Any, t: Any, expr: Any) -> Any:
    """``t.filter(expr)``, also for a table with ``binary_view`` columns (pyarrow's compute filters and takes no
    ``binary_view``): the filter runs on a probe (the other columns, or copies of the views when ``expr`` names
    them, and the row numbers); the rows it keeps are slices of ``t`` when they are at most :data:`MAX_RUNS` runs
    (the views kept, no copy), else the filtered copies viewed again. The same rows either way."""
    viewed = [f.name for f in t.schema if pa.types.is_binary_view(f.type)]
    if not viewed:
        return t.filter(expr)
    rows = _row_numbers(pa, t.num_rows)
    try:  # (a filter naming key or value fails on the probe without them: it gets their copies)
        kept = t.drop_columns(viewed).append_column("__row", rows).filter(expr)
    except (pa.ArrowInvalid, KeyError):
        kept = _copied(pa, t, viewed).append_column("__row", rows).filter(expr)
    n = kept.num_rows
    if n == t.num_rows:
        return t
    if n == 0:
        return t.slice(0, 0)
    pc = require("pyarrow.compute", extra="sql", feature="SQL")  # optional dependency
    kept_rows = kept.column("__row").combine_chunks()
    # where a run of consecutive row numbers starts: the first, and each one not following the one before
    breaks = pc.indices_nonzero(pc.not_equal(pc.subtract(kept_rows.slice(1), kept_rows.slice(0, n - 1)), 1))
    if len(breaks) >= MAX_RUNS:
        return _refiltered(pa, t, expr, viewed)
    starts = [0, *(i + 1 for i in breaks.to_pylist())]
    ends = [*starts[1:], n]
    return pa.concat_tables([t.slice(kept_rows[a].as_py(), b - a) for a, b in zip(starts, ends, strict=True)])


def _copied(pa: Any, t: Any, viewed: list[str]) -> Any:
    """``t`` with its ``viewed`` columns copied into ``binary`` columns."""
    return t.cast(pa.schema([f.with_type(pa.binary()) if f.name in viewed else f for f in t.schema]))


def _refiltered(pa: Any, t: Any, expr: Any, viewed: list[str]) -> Any:
    """``t.filter(expr)`` on copies of the ``viewed`` columns, viewed again (:func:`_filter`'s scattered rows)."""
    return _copied(pa, t, viewed).filter(expr).cast(t.schema)


@functools.cache
def duckdb_reads_views() -> bool:
    """Whether the DuckDB installed reads Arrow ``binary_view`` columns (as BLOB, the bytes unchanged): checked
    once, on a two-row table (a DuckDB whose Arrow scan lacks the type refuses it)."""
    pa = require("pyarrow", extra="sql", feature="SQL")  # optional dependency
    duckdb = require("duckdb", extra="sql", feature="SQL")  # optional dependency
    values = [b"short", b"a value longer than twelve bytes"]
    probe = pa.table({"v": pa.array(values, pa.binary_view())})
    con = duckdb.connect()
    try:
        con.register("probe", probe)
        got = con.sql("SELECT v FROM probe").fetchall()
    except duckdb.Error:
        return False
    finally:
        con.close()
    return [r[0] for r in got] == values


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


__all__ = ["LogDirs", "RecordsScan", "duckdb_reads_views"]
