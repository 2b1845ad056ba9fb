"""SQL over a broker's files with DuckDB in process (``kafkalog sql``, :meth:`LogDirs.sql`).

``records`` is a relation with the Spark source's schema (:data:`~kafkalog.storage.records.columns.RECORD_COLUMNS`).
It is registered in DuckDB as an Arrow dataset: at each scan DuckDB hands the dataset the columns the query uses
and the filters it pushes down (a ``pyarrow.compute.Expression``), and
:class:`~kafkalog.storage.api.sql_dataset.RecordsScan` turns the conjuncts on ``topic``, ``partition``, ``offset``
and ``timestamp``/``timestampMs`` into the reader's selection (:mod:`kafkalog.storage.api.sql_pushdown`):
partitions left out, an offset range that goes through the offset indexes (whole segments skipped, a segment
read from the indexed position), a lower time bound that goes through the time indexes (the read starts where
``ListOffsets`` by that timestamp starts: whole segments skipped) and skips batches by their max timestamp (an
upper time bound is a filter: timestamps need not increase with offsets). The pushed-down
selection is conservative (every row the filter keeps is read) and the exact filter is still applied to every
row by the Arrow scanner, so pushdown never changes a result; ``pushdown=False`` reads everything (the tests
compare the two).

Decoding ``value`` is a column function: ``decode(value)`` (UTF-8 text), ``json(decode(value))`` and
``json_extract_string(decode(value), '$.field')`` are DuckDB's own; ``avro(value, 'schema.avsc')`` (plain Avro
binary) and ``avro_confluent(value, 'schema.avsc')`` (the Confluent wire format: magic byte 0 and a 4-byte schema id
first) give the datum as JSON text, registered when fastavro is installed (the ``sql`` extra). A value that is not
a datum of the schema is :class:`AvroError` naming the record's segment, batch byte and offset.

DuckDB and pyarrow are optional dependencies (the ``sql`` extra): imported when a query runs.
"""

from __future__ import annotations

import importlib.util
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkalog.storage.api.partition import DEFAULT_ARROW_ROWS, _reader
from kafkalog.storage.api.sql_dataset import LogDirs, RecordsScan, _dataset
from kafkalog.storage.api.sql_pushdown import Pushdown
from kafkalog.storage.engine.export import _selected_batches
from kafkalog.storage.errors import KafkaLogError, require

if TYPE_CHECKING:
    import duckdb
    import pyarrow


class SqlError(KafkaLogError):
    """A query DuckDB refuses: ``syntax`` is True for a statement that does not parse (a usage error), False for
    one that does not bind (a column or table that does not exist) or fails as it runs."""

    def __init__(self, reason: str, syntax: bool = False):
        self.syntax = syntax
        super().__init__(reason)


def connect(dirs: LogDirs, *, pushdown: bool = True, include_control: bool = False, read_committed: bool = False,
            plan_only: bool = False) -> tuple[duckdb.DuckDBPyConnection, RecordsScan]:
    """A DuckDB connection in which ``records`` reads ``dirs`` (and ``avro`` decodes, with fastavro), and the
    source behind it."""
    duckdb = require("duckdb", extra="sql", feature="SQL")  # optional dependency
    source = RecordsScan(dirs, pushdown=pushdown, include_control=include_control, read_committed=read_committed,
                         plan_only=plan_only)
    con = duckdb.connect()
    con.register("records", _dataset(source))
    _register_avro(con, source)
    return con, source


def relation(dirs: LogDirs, query: str, *, pushdown: bool = True, include_control: bool = False,
             read_committed: bool = False) -> duckdb.DuckDBPyRelation:
    """``query`` as a DuckDB relation over ``records`` (:meth:`LogDirs.sql`)."""
    con, source = connect(dirs, pushdown=pushdown, include_control=include_control, read_committed=read_committed)
    return _select(con, source, query)


def _select(con: Any, source: RecordsScan, query: str) -> Any:
    """``query`` as a relation when it is one SELECT (DuckDB runs other statements as it parses them: ``COPY ...
    TO`` writes its file, ``ATTACH`` creates a database), else a :class:`SqlError` (a usage error) naming what it
    is, before anything runs."""
    duckdb = require("duckdb", extra="sql", feature="SQL")  # optional dependency
    kinds = [st.type for st in _checked(source, lambda: con.extract_statements(query))]
    if kinds != [duckdb.StatementType.SELECT]:
        found = ", ".join(k.name for k in kinds) or "nothing"
        raise SqlError(f"not a query: kafkalog sql runs one SELECT over records (found {found})", syntax=True)
    return _checked(source, lambda: con.sql(query))


def _checked(source: RecordsScan, call: Any) -> Any:
    """``call()``, with DuckDB's errors as kafkalog's: the reader's own error (file and byte) when it raised
    one, else :class:`SqlError` with DuckDB's message."""
    duckdb = require("duckdb", extra="sql", feature="SQL")  # optional dependency
    try:
        return call()
    except duckdb.Error as e:
        if isinstance(source.error, AvroError) and source.error.path is None:
            source.error = _located(source.dirs, source.error)
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
    rel = _select(con, source, query)
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
    #: the offset each partition's read starts at when a bound moves it: an offset bound (the offset index finds
    #: it) or a lower time bound (where ``ListOffsets`` by that timestamp starts, the time indexes)
    starts: dict[str, int] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.segments)

    def to_dict(self) -> dict[str, Any]:
        return {"pushdown": self.pushdown.to_dict(), "partitions": self.partitions, "starts": self.starts,
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
        rel = _select(con, source, query)
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
            if flt.from_offset is not None:
                plan.starts[p.name] = flt.from_offset
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


CONFLUENT_MAGIC = 0
"""The first byte of a value in the Confluent wire format: magic 0, a 4-byte big-endian schema id, the Avro datum."""


class AvroError(KafkaLogError):
    """A value ``avro()`` cannot decode with its schema file (``value``: the bytes): :func:`_checked` names the
    record (its segment, batch byte and offset) before it reaches the caller."""

    def __init__(self, reason: str, value: bytes | None = None, schema_file: str | None = None,
                 path: str | None = None, position: int | None = None):
        self.value = value
        self.schema_file = schema_file
        super().__init__(reason, path, position)


def _register_avro(con: Any, source: RecordsScan) -> None:
    if not avro_available():
        return
    fastavro = require("fastavro", extra="sql", feature="avro()")  # optional dependency (installed: checked above)

    schemas: dict[str, Any] = {}

    def schema_of(schema_file: str) -> Any:
        schema = schemas.get(schema_file)
        if schema is None:
            try:
                with open(schema_file, encoding="utf-8") as f:
                    schema = schemas[schema_file] = fastavro.parse_schema(json.load(f))
            except (OSError, ValueError, TypeError, KeyError, AttributeError,
                    fastavro.schema.SchemaParseException) as e:
                raise _failed(AvroError(f"cannot read the Avro schema {schema_file}: {_one_line(str(e))}")) from None
        return schema

    def _failed(err: AvroError) -> AvroError:
        if source.error is None:
            source.error = err
        return err

    def decoded(value: bytes, schema_file: str, start: int) -> str:
        schema = schema_of(schema_file)
        buf = io.BytesIO(value)
        buf.seek(start)
        hint = " (the Confluent wire format? use avro_confluent)" \
            if start == 0 and len(value) >= 5 and value[0] == CONFLUENT_MAGIC else ""
        try:
            datum = fastavro.schemaless_reader(buf, schema)
        except Exception as e:  # noqa: BLE001 (fastavro raises whatever its decoders meet: EOF, index, unicode...)
            raise _failed(AvroError(f"not an Avro datum of {schema_file} ({len(value)} bytes): "
                                    f"{type(e).__name__}: {_one_line(str(e)) or 'bytes missing'}{hint}",
                                    value, schema_file)) from None
        left = len(value) - buf.tell()
        if left:
            raise _failed(AvroError(f"not an Avro datum of {schema_file}: {left} of its {len(value)} bytes are left "
                                    f"after the datum{hint}", value, schema_file))
        return json.dumps(datum, default=str)

    def avro(value: bytes | None, schema_file: str) -> str | None:
        """The Avro datum ``value`` (plain binary: no container header, no schema registry prefix) read with the
        writer schema in ``schema_file``, as JSON text."""
        return None if value is None else decoded(value, schema_file, 0)

    def avro_confluent(value: bytes | None, schema_file: str) -> str | None:
        """``value`` in the Confluent wire format (magic byte 0, a 4-byte schema id, then the datum) read with the
        writer schema in ``schema_file`` (the id is not looked up: there is no registry offline), as JSON text."""
        if value is None:
            return None
        if len(value) < 5 or value[0] != CONFLUENT_MAGIC:
            raise _failed(AvroError(f"not the Confluent wire format (magic byte 0 and a 4-byte schema id): "
                                    f"{len(value)} bytes starting {value[:5].hex() or 'with nothing'}",
                                    value, schema_file))
        return decoded(value, schema_file, 5)

    con.create_function("avro", avro, ["BLOB", "VARCHAR"], "VARCHAR", null_handling="special")
    con.create_function("avro_confluent", avro_confluent, ["BLOB", "VARCHAR"], "VARCHAR", null_handling="special")


def _located(dirs: LogDirs, err: AvroError) -> KafkaLogError:
    """``err`` with the file, batch byte and offset of the first record whose value is the bytes it failed on
    (a full read, on the error path only); as it is when no record holds them (a value made by the query)."""
    if err.value is None:
        return err
    pc = require("pyarrow.compute", extra="sql", feature="SQL")  # optional dependency
    cols = ["value", "offset", "segment", "position"]
    try:
        for p in dirs.partitions():
            for b in _reader([p], None, True, False, DEFAULT_ARROW_ROWS, columns=cols):
                hits = pc.indices_nonzero(pc.equal(b.column(0), err.value))
                if len(hits):
                    i = hits[0].as_py()
                    offset, segment, position = (b.column(c)[i].as_py() for c in cols[1:])
                    return AvroError(f"offset {offset}: value {err.reason}", err.value, err.schema_file,
                                     str(Path(p.path) / segment), position)
    except KafkaLogError:
        pass  # damage elsewhere in the dirs: the error as it is (a query reaching it reports that damage)
    return err


__all__ = ["AvroError", "ScanPlan", "SegmentRead", "SqlError", "SqlPlan", "avro_available", "connect", "execute", "explain",
           "relation"]
