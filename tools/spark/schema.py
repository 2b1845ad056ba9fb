"""The documented, stable schemas of the ``kafkalog`` Spark data source.

Record level (default, one row per record); the first eight columns are those of Spark's own Kafka source
(``format("kafka")`` with ``includeHeaders=true``), in its order, with its types and values::

    key binary, value binary, topic string, partition int, offset bigint,
    timestamp timestamp (the record's epoch ms; -1, "none", shows as 1969-12-31 23:59:59.999 UTC as in Spark),
    timestampType int (-1 none/v0, 0 CreateTime, 1 LogAppendTime),
    headers array<struct<key:string,value:binary>> (null for a record without headers),

then kafkalog's own::

    timestampMs bigint (the raw epoch ms), leaderEpoch int (partition leader epoch, -1 for v0/v1),
    producerId bigint, producerEpoch int, sequence int (-1 when none), isTransactional boolean,
    isControl boolean, magic int, codec string (none/gzip/snappy/lz4/zstd), segment string (the .log file),
    position bigint (byte position of the record's batch in that file)

Control records (transaction markers) are rows only with ``option("includeControlRecords", "true")``.
The schema is defined once, in :data:`kafkalog.storage.records.columns.RECORD_COLUMNS` (also ``kafkalog export``'s
Parquet schema); every reader (batch and streaming) takes it from here.

Batch level (``option("level", "batch")``, one row per batch, records are not decoded)::

    topic, partition, baseOffset, lastOffset, recordCount (null for v0/v1), baseTimestamp (null for v0/v1),
    maxTimestamp, timestampType, leaderEpoch, producerId, producerEpoch, baseSequence, lastSequence,
    isTransactional, isControl, magic, codec, crc (stored), crcValid (null when verifyCrc is false),
    size (bytes of the entry incl. the 12-byte log overhead), segment, position

With ``option("mode", "permissive")`` both gain a last column ``_corrupt string``: null for good rows; a row
describing a corrupt batch (segment, position, reason) otherwise, with the data columns null.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkalog.storage.records.columns import HEADERS_TYPE, RECORD_COLUMNS
from kafkalog.storage.records.columns import arrow_schema as _arrow_schema

from .options import parse_read_options

CORRUPT_COLUMN = "_corrupt"
__all__ = ["BATCH_COLUMNS", "CORRUPT_COLUMN", "HEADERS_TYPE", "RECORD_COLUMNS", "arrow_schema",
           "batch_constant_columns", "column_types", "ddl"]

BATCH_COLUMNS: list[tuple[str, str]] = [
    ("topic", "string"),
    ("partition", "int"),
    ("baseOffset", "bigint"),
    ("lastOffset", "bigint"),
    ("recordCount", "int"),
    ("baseTimestamp", "bigint"),
    ("maxTimestamp", "bigint"),
    ("timestampType", "int"),
    ("leaderEpoch", "int"),
    ("producerId", "bigint"),
    ("producerEpoch", "int"),
    ("baseSequence", "int"),
    ("lastSequence", "int"),
    ("isTransactional", "boolean"),
    ("isControl", "boolean"),
    ("magic", "int"),
    ("codec", "string"),
    ("crc", "bigint"),
    ("crcValid", "boolean"),
    ("size", "int"),
    ("segment", "string"),
    ("position", "bigint"),
]


# record-level columns whose value is the same for every record of a batch (filters on them skip whole batches)
RECORD_BATCH_COLUMNS = frozenset({"topic", "partition", "timestampType", "leaderEpoch", "producerId",
                                  "producerEpoch", "isTransactional", "isControl", "magic", "codec", "segment",
                                  "position"})


def column_types(opts) -> dict[str, str]:
    """Column name -> SQL type of the rows read under ``opts`` (a ReadOptions)."""
    cols = dict(BATCH_COLUMNS if opts.batch_level else RECORD_COLUMNS)
    if opts.permissive:
        cols[CORRUPT_COLUMN] = "string"
    return cols


def batch_constant_columns(opts) -> frozenset[str]:
    """The columns of the rows read under ``opts`` that are constant over a batch (and over a corrupt-entry row)."""
    cols = frozenset(dict(BATCH_COLUMNS)) if opts.batch_level else RECORD_BATCH_COLUMNS
    return cols | {CORRUPT_COLUMN} if opts.permissive else cols


def ddl(columns: list[tuple[str, str]], corrupt: bool = False) -> str:
    cols = list(columns) + ([(CORRUPT_COLUMN, "string")] if corrupt else [])
    return ", ".join(f"`{n}` {t}" for n, t in cols)


RECORD_SCHEMA_DDL = ddl(RECORD_COLUMNS)
BATCH_SCHEMA_DDL = ddl(BATCH_COLUMNS)


def source_ddl(options: Mapping[str, str]) -> str:
    """The schema of ``format("kafkalog")`` with these read options (its level and mode; ``remote`` is left out:
    no view of a store is made for a schema)."""
    opts = parse_read_options({k: v for k, v in dict(options).items() if str(k).lower() != "remote"})
    return ddl(BATCH_COLUMNS if opts.batch_level else RECORD_COLUMNS, corrupt=opts.permissive)


def arrow_schema(columns: list[tuple[str, str]], corrupt: bool = False):
    """The pyarrow schema Spark expects for ``columns`` (all fields nullable, list items named ``element``)."""
    return _arrow_schema(columns, (CORRUPT_COLUMN,) if corrupt else ())
