"""Filters pushed by Spark, as plain values the data source evaluates itself (picklable, Spark-free).

Spark hands a Python data source the filters of a query (``pyspark.sql.datasource.EqualTo``, ``Not``, ...;
conjunctions arrive split). :func:`to_node` turns one into a nested tuple, or returns None when the filter has a
shape this module does not know (a class added by a later Spark, a literal whose type does not match the
column): such filters are handed back and Spark evaluates them.

:func:`evaluate` applies a node to a row given as a mapping from column name to value, with SQL's three-valued
logic (``None`` is unknown; a row is kept only when the result is ``True``). The data source uses it where every
column a filter names is constant over a whole unit it can skip: a partition dir (``topic``, ``partition``) at
planning time and a batch (its header fields) while scanning. That makes the pushed filter exact, so Spark does
not evaluate it again.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

Node = tuple  # ("eq", column, value) | ("in", column, values) | ("not", node) | ("and"/"or", node, node) | ...

_COMPARE = {
    "EqualTo": "eq", "EqualNullSafe": "eqns", "GreaterThan": "gt", "GreaterThanOrEqual": "ge",
    "LessThan": "lt", "LessThanOrEqual": "le", "StringStartsWith": "startswith",
    "StringEndsWith": "endswith", "StringContains": "contains",
}
_STRING_OPS = ("startswith", "endswith", "contains")
_PY_TYPES = {"string": (str,), "int": (int,), "bigint": (int,), "boolean": (bool,), "binary": (bytes, bytearray),
             "timestamp": (_dt.datetime,)}


def _column(f) -> str | None:
    attr = getattr(f, "attribute", None)
    if isinstance(attr, tuple | list) and len(attr) == 1 and isinstance(attr[0], str):
        return attr[0]
    return None


def _literal_ok(value: Any, sql_type: str) -> bool:
    if value is None:
        return True  # compares as unknown: evaluated exactly like SQL does
    kinds = _PY_TYPES.get(sql_type)
    if kinds is None:
        return False
    if sql_type in ("int", "bigint") and isinstance(value, bool):
        return False
    return isinstance(value, kinds)


def to_node(f, types: Mapping[str, str]) -> Node | None:
    """``f`` (a Spark filter) as a node over the columns in ``types`` (name -> SQL type), or None."""
    kind = type(f).__name__
    if kind == "Not":
        child = to_node(getattr(f, "child", None), types)
        return None if child is None else ("not", child)
    if kind in ("And", "Or"):  # not pushed by Spark 4.1-4.3 (it splits conjunctions); accepted if it ever is
        left = to_node(getattr(f, "left", None), types)
        right = to_node(getattr(f, "right", None), types)
        return None if left is None or right is None else (kind.lower(), left, right)
    col = _column(f)
    if col is None or col not in types:
        return None
    sql_type = types[col]
    if kind in ("IsNull", "IsNotNull"):
        return ("isnull" if kind == "IsNull" else "isnotnull", col)
    if kind == "In":
        values = getattr(f, "value", None)
        if not isinstance(values, tuple | list) or not all(_literal_ok(v, sql_type) for v in values):
            return None
        return ("in", col, tuple(values))
    op = _COMPARE.get(kind)
    if op is None:
        return None
    value = getattr(f, "value", None)
    if op in _STRING_OPS:
        return (op, col, value) if sql_type == "string" and isinstance(value, str) else None
    if not _literal_ok(value, sql_type) or (op not in ("eq", "eqns") and sql_type in ("boolean", "binary")):
        return None
    return (op, col, value)


def columns(node: Node) -> set[str]:
    """The columns ``node`` reads."""
    op = node[0]
    if op == "not":
        return columns(node[1])
    if op in ("and", "or"):
        return columns(node[1]) | columns(node[2])
    return {node[1]}


def evaluate(node: Node, row: Mapping[str, Any]) -> bool | None:
    """``node`` on ``row`` with SQL semantics: True, False, or None (unknown, a null was involved)."""
    op = node[0]
    if op == "not":
        r = evaluate(node[1], row)
        return None if r is None else not r
    if op == "and":
        a, b = evaluate(node[1], row), evaluate(node[2], row)
        return False if a is False or b is False else (None if a is None or b is None else True)
    if op == "or":
        a, b = evaluate(node[1], row), evaluate(node[2], row)
        return True if a is True or b is True else (None if a is None or b is None else False)
    x = row.get(node[1])
    if op == "isnull":
        return x is None
    if op == "isnotnull":
        return x is not None
    v = node[2]
    if op == "eqns":
        return (x is None and v is None) or (x is not None and v is not None and x == v)
    if x is None:
        return None
    if op == "in":
        return True if x in v else (None if None in v else False)
    if v is None:
        return None
    if op == "eq":
        return x == v
    if op == "gt":
        return x > v
    if op == "ge":
        return x >= v
    if op == "lt":
        return x < v
    if op == "le":
        return x <= v
    if op == "startswith":
        return x.startswith(v)
    if op == "endswith":
        return x.endswith(v)
    return v in x  # contains


def keeps(nodes: tuple[Node, ...], row: Mapping[str, Any]) -> bool:
    """Whether a row passes every node (SQL: only a True result keeps it)."""
    return all(evaluate(n, row) is True for n in nodes)


def offset_range(node: Node) -> tuple[int | None, int | None] | None:
    """The ``[lo, hi)`` range of integer values ``node`` admits on its column, when it is a plain comparison,
    equality or IN list of integers (None otherwise): used to narrow reads through the offset and time indexes."""
    op = node[0]
    if op in ("eq", "eqns", "gt", "ge", "lt", "le") and isinstance(node[2], _dt.datetime):
        return _ms_range(op, epoch_us(node[2]))
    if op == "in" and any(isinstance(v, _dt.datetime) for v in node[2]):
        us = [epoch_us(v) for v in node[2] if isinstance(v, _dt.datetime)]
        return (-(-min(us) // 1000), max(us) // 1000 + 1)
    if op in ("eq", "eqns", "gt", "ge", "lt", "le"):
        v = node[2]
        if not isinstance(v, int) or isinstance(v, bool):
            return None
        return {"eq": (v, v + 1), "eqns": (v, v + 1), "gt": (v + 1, None), "ge": (v, None), "lt": (None, v),
                "le": (None, v + 1)}[op]
    if op == "in":
        ints = [v for v in node[2] if isinstance(v, int) and not isinstance(v, bool)]
        if not ints:
            return (0, 0)  # only nulls (or nothing): no row can match
        return (min(ints), max(ints) + 1)
    return None


def epoch_us(t: _dt.datetime) -> int:
    """Microseconds since the epoch of a TIMESTAMP literal as Spark hands it over (aware; a naive one is in the
    local time zone, as ``datetime.fromtimestamp`` makes it)."""
    if t.tzinfo is None:
        t = t.astimezone()  # local wall time -> aware
    delta = t - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def _ms_range(op: str, us: int) -> tuple[int | None, int | None]:
    """The ``[lo, hi)`` epoch-ms range of records (timestamp = ms * 1000 us) that ``timestamp OP us`` keeps."""
    floor, ceil = us // 1000, -(-us // 1000)
    if op in ("eq", "eqns"):
        return (floor, floor + 1) if us % 1000 == 0 else (floor, floor)
    return {"gt": (floor + 1, None), "ge": (ceil, None), "lt": (None, ceil), "le": (None, floor + 1)}[op]
