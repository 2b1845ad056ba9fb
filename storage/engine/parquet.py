"""The Parquet layout of ``kafkalog export`` (the rows of :mod:`.export`, one file per partition) and its
reading back (``kafkalog import``): the one record schema, ``records/columns.RECORD_COLUMNS``, with
``timestamp`` a Parquet TIMESTAMP; row groups written by a second thread while the next one is decoded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kafkalog.storage.engine.export import (
    DEFAULT_ROW_GROUP_BYTES,
    DEFAULT_ROW_GROUP_ROWS,
    ExportFilter,
    ExportStats,
    _native_runs,
    _record_chunks,
    _record_window,
    _resolved,
    _selected_batches,
)
from kafkalog.storage.errors import CorruptRecordError, require
from kafkalog.storage.log.datadir import resolve_partition_dirs
from kafkalog.storage.records.batch import RECORD_CHUNK
from kafkalog.storage.records.columns import RECORD_COLUMNS, RecordColumns
from kafkalog.storage.records.columns import arrow_schema as records_arrow_schema

# Parquet writer settings: no dictionary for the columns whose values are unique per record (the hashing is
# wasted: the dictionary would overflow and fall back to plain pages), min/max statistics only for the columns
# readers filter on (statistics over keys, values and headers cost ~15 % of the write and prune nothing)
PARQUET_NO_DICTIONARY = frozenset({"offset", "timestamp", "timestampMs", "sequence", "position"})
PARQUET_STATISTICS = ("topic", "partition", "offset", "timestamp", "timestampMs")


class _RowGroupWriter:
    """``write_batch`` on a Parquet writer in a second thread, one row group at a time: pyarrow's writer (encoding,
    compression) and the record decoder both release the GIL, so a group is written while the next is decoded.
    At most one group is in flight; its error (a full disk) is raised by the next call or on leaving."""

    def __init__(self, writer) -> None:

        self._writer = writer
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kafkalog-parquet")
        self._pending: Future[Any] | None = None

    def write_batch(self, batch, **kw) -> None:
        self._wait()
        self._pending = self._pool.submit(self._writer.write_batch, batch, **kw)

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def __enter__(self) -> _RowGroupWriter:
        return self

    def __exit__(self, exc_type, *_) -> None:
        try:
            if exc_type is None:
                self._wait()
            elif self._pending is not None:
                self._pending.exception()  # let it finish before the file is closed; the first error wins
        finally:
            self._pool.shutdown(wait=True)


def arrow_schema():
    return records_arrow_schema(RECORD_COLUMNS)


def export_parquet(paths: Iterable[str | os.PathLike], out_dir: str | os.PathLike,
                   flt: ExportFilter | None = None, *, row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
                   row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES, compression: str = "snappy",
                   progress: Callable[[int], None] | None = None) -> ExportStats:
    """One Parquet file per partition, ``<out_dir>/<topic>-<partition>.parquet``, row groups of at most
    ``row_group_rows`` rows / about ``row_group_bytes`` bytes of payload, pages compressed with ``compression``
    (snappy, as Spark writes Parquet by default). A row group is written by a second thread while the next one
    is decoded (memory is bounded by two groups)."""
    pq = require("pyarrow.parquet", feature="Parquet")  # optional dependency

    flt = flt or ExportFilter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    schema = arrow_schema()
    stats = ExportStats(on_segment=progress)
    for pdir in resolve_partition_dirs(list(paths), flt.topics):
        stats.partitions += 1
        pflt = _resolved(pdir, flt)
        window = _record_window(pflt)
        target = out / f"{pdir.name}.parquet"
        tmp = target.with_name(target.name + ".tmp")
        cols = RecordColumns(capacity=min(row_group_bytes, 64 << 20))
        with pq.ParquetWriter(tmp, schema, compression=compression,
                              use_dictionary=[f.name for f in schema if f.name not in PARQUET_NO_DICTIONARY],
                              write_statistics=list(PARQUET_STATISTICS)) as pw, _RowGroupWriter(pw) as w:
            run = None
            if cols._core is not None and window is None and pflt.key is None:
                run = _native_runs(cols, w, stats, pflt.include_control, row_group_rows, row_group_bytes)
            for topic, partition, name, b in _selected_batches(pdir, pflt, stats, run):
                # a v2 batch declaring at most a chunk of records, or a plain v0/v1 message (one record)
                whole = b.records_count <= RECORD_CHUNK if b.records_count is not None else not b.is_compressed
                if pflt.key is None and whole:
                    n = cols.add_batch(b, topic, partition, name, window)  # straight into Arrow columns
                else:  # legacy wrappers, and batches declaring more records than a chunk: bounded chunks
                    n = 0
                    for recs in _record_chunks(b, window, pflt):
                        cols.add_records(b, recs, topic, partition, name)
                        n += len(recs)
                stats.batches += 1 if n else 0
                stats.records += n
                if len(cols) >= row_group_rows or cols.nbytes >= row_group_bytes:
                    rows = len(cols)
                    w.write_batch(cols.to_arrow(), row_group_size=max(rows, row_group_rows))
            if len(cols):
                w.write_batch(cols.to_arrow())
        os.replace(tmp, target)
        stats.files.append(str(target))
    return stats


def iter_parquet_rows(path: str | os.PathLike, batch_size: int = 8192) -> Iterator[dict[str, Any]]:
    """Rows of a Parquet file written by :func:`export_parquet` as the JSON Lines export has them: headers as
    ``[(key, value)]`` (``[]`` where the file has null), ``timestamp`` the epoch ms (the file's ``timestampMs``;
    its ``timestamp`` column is the same instant as a Parquet TIMESTAMP)."""
    pq = require("pyarrow.parquet", feature="Parquet")  # optional dependency
    pa = require("pyarrow", feature="Parquet")

    try:
        f = pq.ParquetFile(path)
        missing = [c for c in ("headers", "timestampMs") if c not in f.schema_arrow.names]
        if missing:
            raise CorruptRecordError(f"not a Parquet file kafkalog exported: no column {', '.join(missing)} (its "
                                     f"columns: {', '.join(f.schema_arrow.names[:20])})", str(path))
        for rb in f.iter_batches(batch_size=batch_size):
            for row in rb.to_pylist():
                row["headers"] = [(h["key"], h["value"]) for h in row["headers"] or []]
                row["timestamp"] = row["timestampMs"]
                yield row
    except pa.ArrowException as e:  # a file that is not Parquet, or damaged: no traceback
        raise CorruptRecordError(f"not a Parquet file, or a damaged one ({e})", str(path)) from None


__all__ = ["PARQUET_NO_DICTIONARY", "PARQUET_STATISTICS", "arrow_schema", "export_parquet", "iter_parquet_rows"]
