"""SQL over a broker's files with DuckDB in process (``kafkalog sql``, :meth:`LogDirs.sql`).

``records`` is a relation with the Spark source's schema (:data:`~kafkalog.storage.records.columns.RECORD_COLUMNS`).
It is registered in DuckDB as an Arrow dataset: at each scan DuckDB hands the dataset the columns the query uses
and the filters it pushes down (a ``pyarrow.compute.Expression``), and :class:`RecordsScan` turns the
conjuncts on ``topic``, ``partition``, ``offset`` and ``timestamp``/``timestampMs`` into the reader's selection:
partitions left out, an offset range that goes through the offset indexes (whole segments skipped, a segment
read from the indexed position), a time window that skips batches by their max timestamp. The pushed-down
selection is conservative (every row the filter keeps is read) and the exact filter is still applied to every
row by the Arrow scanner, so pushdown never changes a result; ``pushdown=False`` reads everything (the tests
compare the two).

Decoding ``value`` is a column function: ``decode(value)`` (UTF-8 text), ``json(decode(value))`` and
``json_extract_string(decode(value), '$.field')`` are DuckDB's own; ``avro(value, 'schema.avsc')`` (the record
as JSON text) is registered when fastavro is installed.

DuckDB and pyarrow are optional dependencies (the ``sql`` extra): imported when a query runs.
"""

from __future__ import annotations

import importlib.util
import io
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kafkalog.storage.api.partition import DEFAULT_ARROW_ROWS, Partition, Window, _reader
from kafkalog.storage.engine.export import _selected_batches
from kafkalog.storage.errors import KafkaLogError, require
from kafkalog.storage.records.columns import RECORD_COLUMNS, arrow_schema

if TYPE_CHECKING:
    import duckdb
    import pyarrow

COLUMN_NAMES = [n for n, _ in RECORD_COLUMNS]


class LogDirs(Protocol):
    """What a query asks the :class:`~kafkalog.storage.api.LogDirs` it reads: its partitions."""

    def partitions(self) -> list[Partition]: ...


class SqlError(KafkaLogError):
    """A query DuckDB refuses: ``syntax`` is True for a statement that does not parse (a usage error), False for
    one that does not bind (a column or table that does not exist) or fails as it runs."""

    def __init__(self, reason: str, syntax: bool = False):
        self.syntax = syntax
        super().__init__(reason)


# ---- the pushed-down selection ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Interval:
    """Integers ``lo <= v < hi`` (None: unbounded)."""

    lo: int | None = None
    hi: int | None = None


Values = Interval | frozenset  # an interval of integers, or a finite set (of integers or topic names)


def _intersect(a: Values, b: Values) -> Values:
    if isinstance(a, frozenset) and isinstance(b, frozenset):
        return a & b
    if isinstance(a, frozenset) or isinstance(b, frozenset):
        s, i = (a, b) if isinstance(a, frozenset) else (b, a)
        assert isinstance(i, Interval) and isinstance(s, frozenset)
        return frozenset(v for v in s if isinstance(v, int) and _within(v, i))
    lo = a.lo if b.lo is None else b.lo if a.lo is None else max(a.lo, b.lo)
    hi = a.hi if b.hi is None else b.hi if a.hi is None else min(a.hi, b.hi)
    return Interval(lo, hi)


def _within(v: int, i: Interval) -> bool:
    return (i.lo is None or v >= i.lo) and (i.hi is None or v < i.hi)


def _hull(v: Values) -> Interval | None:
    """The smallest interval holding ``v`` (None: empty)."""
    if isinstance(v, Interval):
        return v
    ints = [x for x in v if isinstance(x, int)]
    if len(ints) != len(v):
        raise TypeError("not integers")
    return Interval(min(ints), max(ints) + 1) if ints else None


def _union(a: Values, b: Values) -> Values | None:
    if isinstance(a, frozenset) and isinstance(b, frozenset):
        return a | b
    try:
        ha, hb = _hull(a), _hull(b)
    except TypeError:
        return None  # topic names and an interval: no constraint
    if ha is None or hb is None:
        return ha or hb
    lo = None if ha.lo is None or hb.lo is None else min(ha.lo, hb.lo)
    hi = None if ha.hi is None or hb.hi is None else max(ha.hi, hb.hi)
    return Interval(lo, hi)


#: the columns the reader selects on, and the key of each in a constraint (``timestamp`` is ``timestampMs``
#: as a TIMESTAMP: both bound the record's epoch-ms timestamp)
_PUSHABLE = {"topic": "topic", "partition": "partition", "offset": "offset", "timestamp": "time",
             "timestampMs": "time"}
_FLIP = {"less": "greater", "less_equal": "greater_equal", "greater": "less", "greater_equal": "less_equal",
         "equal": "equal"}
_UNIT_PER_MS = {"s": Fraction(1, 1000), "ms": Fraction(1), "us": Fraction(1000), "ns": Fraction(1_000_000)}


def _literal(column: str, scalar: Any) -> Fraction | str | None:
    """``scalar`` as a value of the column's domain (epoch ms for the timestamps), None if it is not one."""
    pa = require("pyarrow", extra="sql", feature="SQL")  # optional dependency
    if not scalar.is_valid:
        return None
    t = scalar.type
    if column == "topic":
        return scalar.as_py() if pa.types.is_string(t) or pa.types.is_large_string(t) else None
    if column == "timestamp":
        if not pa.types.is_timestamp(t):
            return None
        return Fraction(scalar.value) / _UNIT_PER_MS[t.unit]
    if pa.types.is_integer(t):
        return Fraction(scalar.as_py())
    if pa.types.is_floating(t) and math.isfinite(scalar.as_py()):
        return Fraction(scalar.as_py())
    return None


def _bound(op: str, v: Fraction) -> Values | None:
    """The integers ``x`` with ``x op v``."""
    if op == "greater_equal":
        return Interval(math.ceil(v), None)
    if op == "greater":
        return Interval(math.floor(v) + 1, None)
    if op == "less":
        return Interval(None, math.ceil(v))
    if op == "less_equal":
        return Interval(None, math.floor(v) + 1)
    if op == "equal":
        return frozenset({int(v)}) if v.denominator == 1 else frozenset()
    return None


Node = tuple  # ("lit", scalar) | ("field", name) | ("call", function, [args], options scalar or None)


def _parse_expression(expr: Any) -> Node:
    """The tree of a ``pyarrow.compute.Expression``, read from Arrow's own serialization of it (the one its
    pickling uses: an IPC file whose schema metadata lists the tree in prefix order, ``call``/``field_ref``/
    ``literal``/``options``/``end``, and whose columns hold the literals)."""
    pa = require("pyarrow", extra="sql", feature="SQL")  # optional dependency
    _deserialize, (buf,) = expr.__reduce__()
    with pa.ipc.open_file(buf) as f:
        table = f.read_all()
        text = f.schema.to_string(show_schema_metadata=True, truncate_metadata=False)
    meta = text.split("-- schema metadata --\n", 1)[1].splitlines()
    tokens = []
    for line in meta:
        m = re.fullmatch(r"(\w+): '(.*)'", line)
        if m is None:
            raise ValueError(f"unexpected expression metadata {line!r}")
        tokens.append((m.group(1), m.group(2)))

    def node(i: int) -> tuple[Node, int]:
        key, val = tokens[i]
        if key == "literal":
            return ("lit", table.column(int(val))[0]), i + 1
        if key == "field_ref":
            return ("field", val), i + 1
        if key != "call":
            raise ValueError(f"unexpected expression token {key!r}")
        args: list[Node] = []
        options = None
        i += 1
        while tokens[i][0] != "end":
            if tokens[i][0] == "options":
                options = table.column(int(tokens[i][1]))[0]
                i += 1
                continue
            arg, i = node(i)
            args.append(arg)
        return ("call", val, args, options), i + 1

    tree, end = node(0)
    if end != len(tokens):
        raise ValueError("trailing expression tokens")
    return tree


def _fields(n: Node) -> set[str]:
    if n[0] == "field":
        return {n[1]}
    if n[0] == "call":
        return set().union(*(_fields(a) for a in n[2])) if n[2] else set()
    return set()


def _constraints(n: Node) -> dict[str, Values]:
    """What every row ``n`` keeps satisfies, per pushable column (a column absent: anything)."""
    if n[0] != "call":
        return {}
    fn, args, options = n[1], n[2], n[3]
    if fn in ("and", "and_kleene"):
        out: dict[str, Values] = {}
        for a in args:
            for k, v in _constraints(a).items():
                out[k] = _intersect(out[k], v) if k in out else v
        return out
    if fn in ("or", "or_kleene"):
        parts = [_constraints(a) for a in args]
        out = {}
        for k in set.intersection(*(set(p) for p in parts)) if parts else set():
            u: Values | None = parts[0][k]
            for p in parts[1:]:
                u = None if u is None else _union(u, p[k])
            if u is not None:
                out[k] = u
        return out
    if fn == "if_else" and len(args) == 3 and args[2][0] == "lit" and not args[2][1].is_valid:
        # DuckDB's IN: if_else(is_valid(x), is_in(x, ...), null): kept only where the condition and the
        # chosen branch hold
        return _constraints(("call", "and", args[:2], None))
    if fn in _FLIP and len(args) == 2:
        a, b = args
        op = fn
        if a[0] == "lit" and b[0] == "field":
            a, b, op = b, a, _FLIP[fn]
        if a[0] != "field" or b[0] != "lit" or a[1] not in _PUSHABLE:
            return {}
        lit = _literal(a[1], b[1])
        if lit is None:
            return {}
        if isinstance(lit, str):
            return {"topic": frozenset({lit})} if op == "equal" else {}
        if a[1] == "topic":
            return {}
        bound = _bound(op, lit)
        return {} if bound is None else {_PUSHABLE[a[1]]: bound}
    if fn == "is_in" and len(args) == 1 and args[0][0] == "field" and args[0][1] in _PUSHABLE \
            and options is not None:
        col = args[0][1]
        values = options["value_set"].values
        found: set = set()
        for i in range(len(values)):
            x = _literal(col, values[i])
            if x is None:
                return {}  # a null or another type in the set: no constraint
            if isinstance(x, str):
                found.add(x)
            elif col != "topic" and x.denominator == 1:
                found.add(int(x))
            elif col == "topic":
                return {}
        return {_PUSHABLE[col]: frozenset(found)}
    return {}


@dataclass
class Pushdown:
    """What one scan of ``records`` reads: the partitions (``topics``, ``partitions``: None is all), the offset
    range ``[from_offset, to_offset)`` and the timestamp window ``[from_time, to_time)`` (epoch ms; None:
    unbounded), the columns (None: all) and the filter DuckDB pushed (its text)."""

    topics: frozenset[str] | None = None
    partitions: Values | None = None
    from_offset: int | None = None
    to_offset: int | None = None
    from_time: int | None = None
    to_time: int | None = None
    columns: list[str] | None = None
    filter: str | None = None
    empty: bool = False  # the filter keeps no row whatever the data (contradictory bounds)

    @classmethod
    def of(cls, columns: Sequence[str] | None, expr: Any) -> Pushdown:
        """The selection for DuckDB's ``columns`` and ``filter``; anything not understood selects more, never
        less."""
        if expr is None:
            return cls(columns=None if columns is None else _needed(columns, set()))
        text = str(expr)
        try:
            tree = _parse_expression(expr)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            return cls(filter=f"{text} (not pushed down: {e})")
        cons = _constraints(tree)
        need = None if columns is None else _needed(columns, _fields(tree))
        out = cls(columns=need, filter=text)
        topics = cons.get("topic")
        if isinstance(topics, frozenset):
            out.topics = frozenset(t for t in topics if isinstance(t, str))
            out.empty |= not out.topics
        if "partition" in cons:
            out.partitions = cons["partition"]
        for key, lo_name, hi_name in (("offset", "from_offset", "to_offset"), ("time", "from_time", "to_time")):
            if key not in cons:
                continue
            hull = _hull(cons[key])
            if hull is None:
                out.empty = True
                continue
            setattr(out, lo_name, hull.lo)
            setattr(out, hi_name, hull.hi)
            if hull.lo is not None and hull.hi is not None and hull.lo >= hull.hi:
                out.empty = True
        return out

    def selects(self, p: Partition) -> bool:
        if self.empty or (self.topics is not None and p.topic not in self.topics):
            return False
        if self.partitions is None:
            return True
        if isinstance(self.partitions, frozenset):
            return p.partition in self.partitions
        return _within(p.partition, self.partitions)

    @property
    def window(self) -> Window | None:
        if (self.from_offset, self.to_offset, self.from_time, self.to_time) == (None, None, None, None):
            return None
        return Window(self.from_offset, self.to_offset, self.from_time, self.to_time)

    def to_dict(self) -> dict[str, Any]:
        parts = self.partitions
        if isinstance(parts, frozenset):
            parts_out: Any = sorted(parts)
        elif isinstance(parts, Interval):
            parts_out = {"from": parts.lo, "to": parts.hi}
        else:
            parts_out = None
        return {"topics": None if self.topics is None else sorted(self.topics), "partitions": parts_out,
                "fromOffset": self.from_offset, "toOffset": self.to_offset, "fromTime": self.from_time,
                "toTime": self.to_time, "columns": self.columns, "filter": self.filter, "empty": self.empty}


def _needed(columns: Sequence[str], filtered: set[str]) -> list[str]:
    """The record columns a scan materialises: those DuckDB projects and those its filter reads, in the schema's
    order."""
    want = set(columns) | filtered
    return [c for c in COLUMN_NAMES if c in want]


# ---- the relation -------------------------------------------------------------------------------------------

class RecordsScan:
    """The source behind ``records``: each scan DuckDB starts is a :class:`Pushdown` and a reader over the
    partitions of ``dirs`` it selects (``plan_only``: no reader, an empty scan; :func:`explain` then reads the
    plan). ``error`` is the first kafkalog error a reader raised (DuckDB reports it as its own)."""

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


def connect(dirs: LogDirs, *, pushdown: bool = True, include_control: bool = False, read_committed: bool = False,
            plan_only: bool = False) -> tuple[duckdb.DuckDBPyConnection, RecordsScan]:
    """A DuckDB connection in which ``records`` reads ``dirs`` (and ``avro`` decodes, with fastavro), and the
    source behind it."""
    duckdb = require("duckdb", extra="sql", feature="SQL")  # optional dependency
    source = RecordsScan(dirs, pushdown=pushdown, include_control=include_control, read_committed=read_committed,
                         plan_only=plan_only)
    con = duckdb.connect()
    con.register("records", _dataset(source))
    _register_avro(con)
    return con, source


def relation(dirs: LogDirs, query: str, *, pushdown: bool = True, include_control: bool = False,
             read_committed: bool = False) -> duckdb.DuckDBPyRelation:
    """``query`` as a DuckDB relation over ``records`` (:meth:`LogDirs.sql`)."""
    con, source = connect(dirs, pushdown=pushdown, include_control=include_control, read_committed=read_committed)
    return _checked(source, lambda: con.sql(query))


def _checked(source: RecordsScan, call: Any) -> Any:
    """``call()``, with DuckDB's errors as kafkalog's: the reader's own error (file and byte) when it raised
    one, else :class:`SqlError` with DuckDB's message."""
    duckdb = require("duckdb", extra="sql", feature="SQL")  # optional dependency
    try:
        return call()
    except duckdb.Error as e:
        if source.error is not None:
            raise source.error from None
        syntax = isinstance(e, (duckdb.ParserException, duckdb.SyntaxException))
        reason = _one_line(str(e))
        if isinstance(e, duckdb.CatalogException) and "avro" in reason and not avro_available():
            reason += " (avro() needs the optional package 'fastavro', which is not installed: pip install fastavro)"
        raise SqlError(reason, syntax=syntax) from None


def _close(con: Any) -> None:
    """Close a connection of :func:`connect`: ``records`` (a Python object DuckDB holds) is unregistered first, so
    DuckDB lets go of it now, while Python runs, and not from one of its threads at interpreter exit (a crash)."""
    con.unregister("records")
    con.close()


def _one_line(msg: str) -> str:
    lines = [ln.strip() for ln in msg.strip().splitlines() if ln.strip()]
    return " ".join(lines)


def execute(dirs: LogDirs, query: str, *, pushdown: bool = True, include_control: bool = False,
            read_committed: bool = False, batch_rows: int = 8192) -> tuple[pyarrow.Schema, Iterator[pyarrow.RecordBatch]]:
    """Run ``query``: the schema of its result and its rows as Arrow batches, streamed (errors as in
    :func:`relation`, also while the rows stream)."""
    con, source = connect(dirs, pushdown=pushdown, include_control=include_control, read_committed=read_committed)
    rel = _checked(source, lambda: con.sql(query))
    if rel is None:
        raise SqlError("not a query: kafkalog sql runs one SELECT over records", syntax=True)
    # to_arrow_reader is DuckDB 2's name of fetch_record_batch (deprecated there)
    fetch = getattr(rel, "to_arrow_reader", None) or rel.fetch_record_batch
    reader = _checked(source, lambda: fetch(batch_rows))

    def batches() -> Iterator[pyarrow.RecordBatch]:
        # the connection and the relation stay referenced until the reader is done: DuckDB's stream reads from
        # them (a reader outliving its connection reads freed memory)
        it, alive = iter(reader), [con, rel]
        try:
            while True:
                b = _checked(source, lambda: next(it, None))
                if b is None:
                    return
                yield b
        finally:
            # the result's stream first (a LIMIT leaves the scan's Arrow stream, a Python generator, unfinished:
            # DuckDB must let go of it now, while Python runs, not from its threads at interpreter exit), then the
            # connection and its threads
            reader.close()
            alive.clear()
            _close(con)

    return reader.schema, batches()


# ---- explain ----------------------------------------------------------------------------------------------------

@dataclass
class SegmentRead:
    """The part of one segment a scan reads: the batches from byte ``start`` to ``end`` of ``file``."""

    partition: str
    file: str
    start: int
    end: int
    batches: int = 0
    bytes: int = 0  # the bytes of the batches read (checked and decoded)

    def to_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "file": self.file, "start": self.start, "end": self.end,
                "batches": self.batches, "bytes": self.bytes}


@dataclass
class ScanPlan:
    """One scan of ``records``: its pushdown and the segments it reads."""

    pushdown: Pushdown
    partitions: list[str]
    segments: list[SegmentRead] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.segments)

    def to_dict(self) -> dict[str, Any]:
        return {"pushdown": self.pushdown.to_dict(), "partitions": self.partitions,
                "segments": [s.to_dict() for s in self.segments], "bytes": self.bytes}


@dataclass
class SqlPlan:
    """What a query reads (:func:`explain`): its scans of ``records``, and ``log_bytes``, the bytes of every
    ``.log`` file of the dirs (what a scan without pushdown reads)."""

    query: str
    scans: list[ScanPlan]
    log_bytes: int
    duckdb_plan: str

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.scans)

    @property
    def segments(self) -> int:
        return sum(len(s.segments) for s in self.scans)

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "scans": [s.to_dict() for s in self.scans], "segments": self.segments,
                "bytes": self.bytes, "logBytes": self.log_bytes}


def explain(dirs: LogDirs, query: str, *, pushdown: bool = True, include_control: bool = False,
            read_committed: bool = False) -> SqlPlan:
    """The segments and bytes ``query`` reads: the query runs on empty scans to learn what DuckDB pushes into
    each, then each scan's selection is planned as the reader plans it (the same batch selection, through the
    indexes; every batch counted is read, its CRC checked). Nothing is decoded."""
    con, source = connect(dirs, pushdown=pushdown, include_control=include_control, read_committed=read_committed,
                          plan_only=True)
    try:
        rel = _checked(source, lambda: con.sql(query))
        if rel is None:
            raise SqlError("not a query: kafkalog sql runs one SELECT over records", syntax=True)
        duck = _checked(source, lambda: rel.explain())
        _checked(source, lambda: rel.fetchall())
    finally:
        _close(con)
    scans = []
    for push in source.scans:
        parts = source.partitions(push)
        plan = ScanPlan(push, [p.name for p in parts])
        for p in parts:
            flt = p._filter(None, include_control, read_committed, push.window)
            by_file: dict[str, SegmentRead] = {}
            for _topic, _partition, name, b in _selected_batches(p.path, flt, None):
                s = by_file.get(name)
                if s is None:
                    s = by_file[name] = SegmentRead(p.name, str(Path(p.path) / name), b.position, b.position)
                s.end = b.position + b.size
                s.batches += 1
                s.bytes += b.size
            plan.segments.extend(by_file.values())
        scans.append(plan)
    log_bytes = sum(p.size for p in dirs.partitions())
    return SqlPlan(query, scans, log_bytes, duck if isinstance(duck, str) else str(duck))


# ---- column functions -------------------------------------------------------------------------------------------

def avro_available() -> bool:
    """``avro(value, 'schema.avsc')`` is registered in every connection (fastavro is installed)."""
    return importlib.util.find_spec("fastavro") is not None


def _register_avro(con: Any) -> None:
    if not avro_available():
        return
    fastavro = require("fastavro", extra="sql", feature="avro()")  # optional dependency (installed: checked above)

    schemas: dict[str, Any] = {}

    def avro(value: bytes | None, schema_file: str) -> str | None:
        """The Avro datum ``value`` (schemaless: no container header, no schema registry prefix) read with the
        writer schema in ``schema_file``, as JSON text."""
        if value is None:
            return None
        schema = schemas.get(schema_file)
        if schema is None:
            with open(schema_file, encoding="utf-8") as f:
                schema = schemas[schema_file] = fastavro.parse_schema(json.load(f))
        return json.dumps(fastavro.schemaless_reader(io.BytesIO(value), schema), default=str)

    con.create_function("avro", avro, ["BLOB", "VARCHAR"], "VARCHAR", null_handling="special")


__all__ = ["Pushdown", "RecordsScan", "ScanPlan", "SegmentRead", "SqlError", "SqlPlan", "avro_available", "connect",
           "execute", "explain", "relation"]
