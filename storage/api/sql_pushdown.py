"""The selection a scan of ``records`` pushes into the reader (:mod:`kafkalog.storage.api.sql`): DuckDB hands each
scan the columns the query uses and the filters it pushes down (a ``pyarrow.compute.Expression``), and
:class:`Pushdown` turns the conjuncts on ``topic``, ``partition``, ``offset`` and ``timestamp``/``timestampMs`` into
the reader's selection: partitions left out, an offset range, a time window. The selection is conservative (every
row the filter keeps is read; anything not understood selects more, never less).

pyarrow is an optional dependency (the ``sql`` extra): imported when a filter is read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kafkalog.storage.api.partition import Partition, Window
from kafkalog.storage.errors import require
from kafkalog.storage.records.columns import RECORD_COLUMNS

COLUMN_NAMES = [n for n, _ in RECORD_COLUMNS]


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


__all__ = ["Interval", "Pushdown", "Values"]
