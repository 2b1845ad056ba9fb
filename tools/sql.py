"""``kafkalog sql``: DuckDB's SQL over the records of data dirs; a thin shell over
:mod:`kafkalog.storage.api.sql` (:meth:`kafkalog.LogDirs.sql`)."""

from __future__ import annotations

import argparse
import csv
import datetime
import decimal
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkalog.storage.errors import KafkaLogError, require

from .output import (
    JsonLines,
    add_epoch_argument,
    add_output_arguments,
    human_size,
    human_time,
    render_bytes,
    render_table,
)

if TYPE_CHECKING:
    from kafkalog.storage.api.sql import SqlPlan

DESCRIPTION = """\
Run a SQL query (DuckDB, in process) over the records of Kafka data dirs or partition dirs, offline.

  kafkalog sql /var/lib/kafka/data "SELECT partition, count(*) FROM records GROUP BY ALL"
  kafkalog sql DATA "SELECT \\"offset\\", decode(value) FROM records WHERE topic = 'orders' LIMIT 5"
  kafkalog sql DATA --json "SELECT * FROM records WHERE producerId = 4711"
  kafkalog sql DATA --parquet out.parquet "SELECT key, value FROM records WHERE topic = 'orders'"
  kafkalog sql DATA --explain "SELECT count(*) FROM records WHERE \\"offset\\" >= 1000000"

The relation `records` has the Spark source's and `export`'s columns: key, value, topic, partition,
offset, timestamp (a TIMESTAMP), timestampType, headers, timestampMs, leaderEpoch, producerId,
producerEpoch, sequence, isTransactional, isControl, magic, codec, segment, position. `offset` is a
keyword in SQL: write "offset". Control records (transaction markers) only with --print-control-records.

Predicates on topic, partition, offset and timestamp/timestampMs, and the columns a query uses, go into
the reader: partitions left out, offset ranges through the offset indexes (whole segments skipped), a
lower time bound through the time indexes (the read starts where ListOffsets by that timestamp starts:
whole segments skipped; later batches before the bound skipped undecoded; an upper bound is a filter).
The exact predicate is still applied to every row, so the rows are those of --no-pushdown. --explain
prints what a query reads: the offset each partition starts at, the segments, byte ranges and bytes.

Decoding values is a column function: decode(value) is the value as UTF-8 text, json(decode(value)) as
JSON, json_extract_string(decode(value), '$.id') one field; avro(value, 'schema.avsc') reads a plain Avro
datum with that writer schema (as JSON text), avro_confluent(value, 'schema.avsc') one in the Confluent
wire format (magic byte 0, a 4-byte schema id), when the package fastavro is installed (the sql extra).

Output: a table (bytes as UTF-8 text, \\xNN for undecodable bytes), --json (JSON Lines; bytes base64,
TIMESTAMP columns as epoch ms), --csv, or --parquet FILE (written aside and renamed: never half written).

Exit codes: 0 ok, 1 an error (a corrupt batch: its file and byte; a column or table that does not exist;
a missing package), 2 usage error (a query that does not parse: DuckDB's message)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="DIR", help="data dirs or partition dirs")
    parser.add_argument("query", metavar="QUERY", help="one SELECT over the relation records (DuckDB's SQL)")
    add_output_arguments(parser, payload=True)
    parser.add_argument("--csv", action="store_true", help="print CSV with a header line")
    parser.add_argument("--parquet", metavar="FILE", help="write the result to this Parquet file")
    parser.add_argument("--explain", action="store_true",
                        help="print the segments and bytes the query reads (and what is pushed down), run nothing")
    parser.add_argument("--no-pushdown", action="store_true",
                        help="read every record of every partition (the rows are the same; for comparison)")
    parser.add_argument("--read-committed", action="store_true",
                        help="read as a consumer with isolation.level=read_committed")
    parser.add_argument("--print-control-records", action="store_true",
                        help="include control records (transaction markers) in records")
    add_epoch_argument(parser)


def run(args: argparse.Namespace) -> int:
    require("duckdb", extra="sql", feature="kafkalog sql")  # optional dependency: the message says what to install
    require("pyarrow", extra="sql", feature="kafkalog sql")
    # the public API and its SQL module load pyarrow: imported here, so `kafkalog --version` (which builds every
    # command's parser) loads neither
    import kafkalog
    from kafkalog.storage.api.sql import SqlError, execute, explain
    if sum(map(bool, (args.json, args.csv, args.parquet))) > 1:
        print("kafkalog sql: error: choose one of --json, --csv and --parquet", file=sys.stderr)
        return 2
    opts = {"pushdown": not args.no_pushdown, "include_control": args.print_control_records,
            "read_committed": args.read_committed}
    with kafkalog.open(args.paths) as dirs:
        try:
            if args.explain:
                plan = explain(dirs, args.query, **opts)
                if args.json:
                    JsonLines().write(plan.to_dict())
                else:
                    _print_plan(plan)
                return 0
            schema, batches = execute(dirs, args.query, **opts)
            if args.parquet:
                _write_parquet(Path(args.parquet), schema, batches)
            elif args.json:
                _print_json(schema.names, batches, args.payload or "base64")
            elif args.csv:
                _print_csv(schema.names, batches, args.payload or "base64")
            else:
                rows = [_human_row(r, args.payload or "utf8", args.epoch) for b in batches for r in b.to_pylist()]
                render_table(rows, schema.names)
        except SqlError as e:
            if not e.syntax:
                raise
            print(f"kafkalog sql: error: {e}", file=sys.stderr)
            return 2
    return 0


def _print_plan(plan: SqlPlan) -> None:
    for i, scan in enumerate(plan.scans):
        push = scan.pushdown.to_dict()
        pushed = {k: v for k, v in push.items() if v not in (None, False) and k != "filter"}
        print(f"scan {i + 1} of records: filter {push['filter'] or '-'}")
        print(f"  pushed down: {', '.join(f'{k}={v}' for k, v in pushed.items()) or 'nothing'}")
        print(f"  partitions: {len(scan.partitions)}")
        if scan.starts:
            print(f"  starts at: {', '.join(f'{name} offset {o}' for name, o in scan.starts.items())}")
        rows = [s.to_dict() for s in scan.segments]
        if rows:
            render_table(rows, ["partition", "file", "start", "end", "batches", "bytes"])
    share = 100.0 * plan.bytes / plan.log_bytes if plan.log_bytes else 0.0
    print(f"reads {plan.segments} segment(s), {plan.bytes} bytes ({human_size(plan.bytes)}): {share:.2f} % of the "
          f"{plan.log_bytes} bytes ({human_size(plan.log_bytes)}) of the logs")


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _epoch_ms(v: datetime.datetime) -> int | None:
    """An instant as epoch ms, None if it is not a whole millisecond."""
    return None if v.microsecond % 1000 else (v - _EPOCH) // datetime.timedelta(milliseconds=1)


def _cell(v: Any, payload: str, *, exact: bool) -> Any:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return render_bytes(v, payload, exact=exact)
    if isinstance(v, datetime.datetime) and v.tzinfo is not None and exact:
        ms = _epoch_ms(v)
        return v.isoformat() if ms is None else ms
    if isinstance(v, (datetime.date, datetime.time, datetime.timedelta)):
        return v.isoformat() if not isinstance(v, datetime.timedelta) else str(v)
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, list):
        return [_cell(x, payload, exact=exact) for x in v]
    if isinstance(v, dict):
        return {k: _cell(x, payload, exact=exact) for k, x in v.items()}
    if isinstance(v, tuple):
        return [_cell(x, payload, exact=exact) for x in v]
    return v


def _human_row(r: dict[str, Any], payload: str, epoch: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in r.items():
        if isinstance(v, datetime.datetime) and v.tzinfo is not None and _epoch_ms(v) is not None:
            out[k] = human_time(_epoch_ms(v), epoch)  # as every command shows a Kafka timestamp
            continue
        c = _cell(v, payload, exact=False)
        out[k] = c if c is None or isinstance(c, (int, float, str)) else str(c)
    return out


def _print_json(names: list[str], batches: Iterable[Any], payload: str) -> None:
    out = JsonLines()
    for b in batches:
        for r in b.to_pylist():
            out.write({k: _cell(v, payload, exact=True) for k, v in r.items()})


def _print_csv(names: list[str], batches: Iterable[Any], payload: str) -> None:
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(names)
    for b in batches:
        for r in b.to_pylist():
            w.writerow(["" if v is None else _cell(v, payload, exact=True) for v in r.values()])


def _write_parquet(path: Path, schema: Any, batches: Iterable[Any]) -> None:
    pq = require("pyarrow.parquet", extra="sql", feature="kafkalog sql --parquet")  # optional dependency
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with pq.ParquetWriter(tmp, schema) as w:
            for b in batches:
                w.write_batch(b)
        os.replace(tmp, path)
    except (KafkaLogError, OSError, KeyboardInterrupt):
        tmp.unlink(missing_ok=True)
        raise
