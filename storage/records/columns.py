"""Records as Arrow columns: the record-level schema of the Spark data source, and the builder that fills it.

:class:`RecordColumns` takes whole batches and produces ``pyarrow.RecordBatch`` es with the columns of
``RECORD_COLUMNS``. With the compiled record core, v2 records are decoded straight into Arrow buffers (no
Python object per record); otherwise, and for v0/v1 messages and anything the fast decoder hands back, the
records layer's tuples are appended. Either way the rows are the same; a batch that fails to decode raises
:class:`~kafkalog.storage.errors.KafkaLogError` and leaves the builder as it was.

pyarrow is imported only when Arrow output is asked for (it is an optional dependency of the library).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate, chain

from kafkalog.storage.codec.compression import DEFAULT_DECOMPRESS_LIMIT, native_codec
from kafkalog.storage.codec.native import active
from kafkalog.storage.errors import require
from kafkalog.storage.records.batch import RecordBatch, increment_sequence
from kafkalog.storage.records.legacy import LegacyBatch
from kafkalog.storage.records.reader import LogScanner, iter_batches

BYTES_PER_CHUNK = 8 << 20  # iter_arrow starts a new Arrow batch after this many bytes of log entries (small
# chunks reuse memory that is already mapped: faster than one big one)

# The first eight columns are Spark's own Kafka source's (``format("kafka")`` with ``includeHeaders=true``), in
# its order and with its types, so a job moves between the two by changing the format name; kafkalog's own
# columns follow. As Spark shows them: ``timestamp`` is the record's epoch-ms timestamp as a TIMESTAMP
# (-1, "no timestamp", is 1969-12-31 23:59:59.999 UTC), ``timestampType`` is -1 none, 0 CreateTime,
# 1 LogAppendTime, and ``headers`` is null for a record without headers. ``timestampMs`` is the raw epoch ms.
RECORD_COLUMNS: list[tuple[str, str]] = [
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "bigint"),
    ("timestamp", "timestamp"),
    ("timestampType", "int"),
    ("headers", "array<struct<key:string,value:binary>>"),
    ("timestampMs", "bigint"),
    ("leaderEpoch", "int"),
    ("producerId", "bigint"),
    ("producerEpoch", "int"),
    ("sequence", "int"),
    ("isTransactional", "boolean"),
    ("isControl", "boolean"),
    ("magic", "int"),
    ("codec", "string"),
    ("segment", "string"),
    ("position", "bigint"),
]

# epoch ms beyond which a timestamp has no TIMESTAMP (microseconds in an int64): such rows get a null timestamp
_MAX_MS = (1 << 63) // 1000 - 1


def HEADERS_TYPE():  # noqa: N802 - a type constant, built lazily (pyarrow is optional for the library)
    pa = require("pyarrow", feature="Arrow output")  # optional dependency

    return pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])))


def TIMESTAMP_TYPE():  # noqa: N802 - as HEADERS_TYPE
    """Spark's TIMESTAMP in Arrow (what Spark's own ``to_arrow_schema`` gives with the UTC session time zone)."""
    pa = require("pyarrow", feature="Arrow output")  # optional dependency

    return pa.timestamp("us", tz="UTC")


def timestamp_columns(ms):
    """``(timestamp, timestampMs)`` from an int64 Arrow array of epoch ms: vectorised casts, no Python per row
    (ms values too large for microseconds give null timestamps instead of an error)."""
    pa = require("pyarrow", feature="Arrow output")  # optional dependency
    import pyarrow.compute as pc  # optional dependency (extra "spark"): only Arrow output needs it

    try:
        ts = ms.cast(pa.timestamp("ms", tz="UTC")).cast(TIMESTAMP_TYPE())
    except pa.ArrowInvalid:  # overflow: null those, as Spark cannot show them either
        fits = pc.less_equal(pc.abs(ms), _MAX_MS)
        ts = pc.if_else(fits, ms, pa.scalar(None, pa.int64())).cast(pa.timestamp("ms", tz="UTC")).cast(TIMESTAMP_TYPE())
    return ts, ms


def null_empty_headers(headers):
    """The headers column as Spark's Kafka source has it: null (not an empty list) for a record without
    headers. One vectorised pass over the list lengths."""
    pa = require("pyarrow", feature="Arrow output")  # optional dependency
    import pyarrow.compute as pc  # optional dependency (extra "spark"): only Arrow output needs it

    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    empty = pc.equal(pc.list_value_length(headers), 0)
    if not pc.any(empty).as_py():
        return headers
    offsets = headers.offsets
    if headers.offset:  # a slice: rebase (from_arrays needs offsets starting where the values do)
        headers = pa.concat_arrays([headers])
        offsets = headers.offsets
    return pa.ListArray.from_arrays(offsets, headers.values, type=headers.type, mask=pc.or_kleene(empty, headers.is_null()))


def arrow_schema(columns: list[tuple[str, str]], extra: tuple[str, ...] = (), *, views: bool = False):
    """The pyarrow schema for ``columns`` (all fields nullable, list items named ``element``), plus ``extra``
    string columns; with ``views``, ``key`` and ``value`` are ``binary_view`` (:class:`RecordColumns`)."""
    pa = require("pyarrow", feature="Arrow output")  # optional dependency

    simple = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "binary": pa.binary(),
              "boolean": pa.bool_(), "timestamp": TIMESTAMP_TYPE()}
    viewed = {"key", "value"} if views else set()
    fields = [pa.field(name, pa.binary_view()) if name in viewed else
              pa.field(name, simple[t]) if t in simple else pa.field(name, HEADERS_TYPE()) for name, t in columns]
    fields += [pa.field(name, pa.string()) for name in extra]
    return pa.schema(fields)


def _batch_meta(b) -> tuple:
    """A batch's values of the batch-level columns, then its size: what ``ArrowRecords.add_rows`` takes."""
    return (b.timestamp_type, b.partition_leader_epoch, b.producer_id, b.producer_epoch, b.is_transactional,
            b.is_control, b.magic, b.codec_name, b.position, b.size)


#: the columns of ``_batch_meta``'s values, in its order, with their Arrow types (``pyarrow`` factories)
_BATCH_META_COLUMNS = (("timestampType", "int32"), ("leaderEpoch", "int32"), ("producerId", "int64"),
                       ("producerEpoch", "int32"), ("isTransactional", "bool_"), ("isControl", "bool_"),
                       ("magic", "int32"), ("codec", "string"), ("position", "int64"))


class RecordColumns:
    """Rows of ``RECORD_COLUMNS``, added a batch at a time (see the module docstring); with ``columns``, only those
    columns, in that order (the compiled core then fills no other column's buffers: no key, value or header bytes
    are copied unless asked for). With ``views``, ``key`` and ``value`` are ``binary_view``: the compiled core
    points them into the bytes the records were read from (a segment's mapping, kept alive by them; a compressed
    batch's decompressed records) instead of copying each."""

    def __init__(self, native: bool = True, capacity: int = 0, columns: list[str] | None = None,
                 views: bool = False):
        # capacity: about how many bytes of log entries will be added (native buffers are sized once)
        core = active().records if native else None
        self.columns = None if columns is None else list(columns)
        self.views = views
        self._core = None if core is None else core.ArrowRecords(capacity, self.columns, views)
        self._clear()

    def _clear(self) -> None:
        self._pieces: dict[tuple, int] = {}  # (topic, partition, segment) -> piece number (native rows)
        # per batch (pure-Python path)
        self.b_topic: list = []
        self.b_part: list = []
        self.b_seg: list = []
        self.b_meta: list[tuple] = []  # _batch_meta of each batch
        # per record (pure-Python path)
        self.take: list[int] = []
        self.offsets: list = []
        self.timestamps: list = []
        self.keys: list = []
        self.values: list = []
        self.headers: list = []
        self.any_headers = False
        self.sequences: list = []
        self._nbytes = 0

    @property
    def nbytes(self) -> int:
        """Bytes of log entries added since the last ``to_arrow``."""
        return self._core.nbytes if self._core is not None else self._nbytes

    def __len__(self) -> int:
        return len(self._core) if self._core is not None else len(self.offsets)

    def add_batch(self, b, topic: str | None, partition: int | None, segment: str,
                  keep: tuple[int, int, int, int] | None = None) -> int:
        """Decode ``b``'s records and add them as rows (only those with ``lo_o <= offset < hi_o`` and
        ``lo_t <= timestamp < hi_t`` when ``keep`` is given). Returns the number of rows added; raises
        KafkaLogError (nothing added) when the batch cannot be decoded."""
        if self._core is not None:
            return self._add_native(b, (topic, partition, segment), keep)
        recs = self._decode(b, keep)
        if recs:
            self.add_records(b, recs, topic, partition, segment)
        return len(recs)

    def add_records(self, b, recs: list[tuple], topic: str | None, partition: int | None, segment: str) -> None:
        """Add ``recs``, records of batch ``b`` already decoded as ``(offset, timestamp, key, value, headers)``
        tuples (for example a chunk of ``b.record_chunks(full=False)``), as rows."""
        if not recs:
            return
        if self._core is not None:
            self._add_rows(b, recs, self._piece((topic, partition, segment)))
            return
        bi = len(self.b_topic)
        n = len(recs)
        self.take.extend([bi] * n)
        offs, tss, ks, vs, hs = zip(*recs, strict=True)
        self.offsets.extend(offs)
        self.timestamps.extend(tss)
        self.keys.extend(ks)
        self.values.extend(vs)
        self.headers.extend(hs)
        if not self.any_headers and any(hs):
            self.any_headers = True
        self.sequences.extend(_sequences(b, recs))
        self.b_topic.append(topic)
        self.b_part.append(partition)
        self.b_seg.append(segment)
        self.b_meta.append(_batch_meta(b))
        self._nbytes += b.size

    @staticmethod
    def _decode(b, keep) -> list:
        recs = b.record_tuples()
        if keep is not None:
            lo_o, hi_o, lo_t, hi_t = keep
            recs = [r for r in recs if lo_o <= r[0] < hi_o and lo_t <= r[1] < hi_t]
        return recs

    def _piece(self, piece: tuple) -> int:
        pi = self._pieces.get(piece)
        if pi is None:
            pi = self._pieces[piece] = len(self._pieces)
        return pi

    def _add_native(self, b, piece: tuple, keep) -> int:
        pi = self._piece(piece)
        assert self._core is not None  # (only called with the native core)
        if isinstance(b, RecordBatch):
            data = None
            nc = native_codec() if b.codec else None
            if nc is not None:  # decompressed natively into the builder (else by the records layer: its errors)
                n = nc.arrow_add_compressed(self._core, b.buf, b.position, pi, b.decompress_limit, keep)
                if n is not None:
                    return n
            if b.codec:
                data = b.decompressed_payload()
            n = self._core.add_v2(b.buf, b.position, pi, keep, data)
            if n is not None:
                return n
        elif isinstance(b, LegacyBatch) and (not b.codec or native_codec() is not None):
            # a plain message or a wrapper (decompressed natively) straight into the columns (legacy.rs)
            n = self._core.add_legacy(b.buf, b.position, pi, keep, b.decompress_limit)
            if n is not None:
                return n
        recs = self._decode(b, keep)
        if recs:
            self._add_rows(b, recs, pi)
        return len(recs)

    def _add_rows(self, b, recs: list, pi: int) -> None:
        assert self._core is not None  # (only called with the native core)
        self._core.add_rows(recs, _sequences(b, recs), pi, _batch_meta(b))

    def to_arrow(self):
        """The rows as one ``pyarrow.RecordBatch`` with the schema of ``RECORD_COLUMNS`` (or of ``columns``); the
        builder is empty afterwards (ready for the next chunk)."""
        pa = require("pyarrow", feature="Arrow output")  # optional dependency

        if self._core is not None:
            # the core builds the columns (topic, partition and segment from the piece names, Spark's timestamp
            # beside timestampMs, null headers for a record without any) and hands them over through the Arrow
            # C data interface, without a copy
            rb = pa.record_batch(self._core.finish(list(self._pieces)))
            self._clear()
            if self.columns == []:  # no column: only the number of rows
                return rb
            schema = self.schema()
            return pa.RecordBatch.from_arrays([rb.column(f.name) for f in schema], schema=schema)
        rb = self._python_arrow(pa)
        if self.views:
            rb = rb.cast(arrow_schema(RECORD_COLUMNS, views=True))
        return rb if self.columns is None else rb.select(self.columns)

    def schema(self):
        """The ``pyarrow.Schema`` of the batches :meth:`to_arrow` gives."""
        return arrow_schema(RECORD_COLUMNS if self.columns is None
                            else [(c, t) for name in self.columns for c, t in RECORD_COLUMNS if c == name],
                            views=self.views)

    def _python_arrow(self, pa):
        """The pure-Python path's batch, every column."""
        import pyarrow.compute as pc  # optional dependency (extra "spark"): only Arrow output needs it

        schema = arrow_schema(RECORD_COLUMNS)
        take = pa.array(self.take, pa.int32())

        def expand(values, typ):
            return pc.take(pa.array(values, typ), take)

        cols = {
            "topic": expand(self.b_topic, pa.string()),
            "partition": expand(self.b_part, pa.int32()),
            "offset": pa.array(self.offsets, pa.int64()),
            "timestampMs": pa.array(self.timestamps, pa.int64()),
            "key": pa.array(self.keys, pa.binary()),
            "value": pa.array(self.values, pa.binary()),
            "headers": null_empty_headers(self._headers_array(pa)),
            "sequence": pa.array(self.sequences, pa.int32()),
            "segment": expand(self.b_seg, pa.string()),
        }
        metas = list(zip(*self.b_meta, strict=True)) or [()] * len(_BATCH_META_COLUMNS)
        for (name, typ), values in zip(_BATCH_META_COLUMNS, metas, strict=False):  # (the batch size is no column)
            cols[name] = expand(values, getattr(pa, typ)())
        cols["timestamp"], _ = timestamp_columns(cols["timestampMs"])
        self._clear()
        return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)

    def _headers_array(self, pa):
        n = len(self.offsets)
        if self.any_headers:
            counts = [0, *accumulate(map(len, self.headers))]
            flat = list(chain.from_iterable(self.headers))
            items = pa.StructArray.from_arrays([pa.array([h[0] for h in flat], pa.string()),
                                                pa.array([h[1] for h in flat], pa.binary())], names=["key", "value"])
            return pa.ListArray.from_arrays(pa.array(counts, pa.int32()), items, type=HEADERS_TYPE())
        empty = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())],
                                           names=["key", "value"])
        return pa.ListArray.from_arrays(pa.array([0] * (n + 1), pa.int32()), empty, type=HEADERS_TYPE())


def _sequences(b, recs: list) -> list[int]:
    """The sequence column: each record's sequence as ``Record.sequence`` has it (``increment_sequence``), -1
    without a base sequence."""
    bs = b.base_sequence
    if bs < 0:
        return [-1] * len(recs)
    base = b.base_offset
    return [increment_sequence(bs, r[0] - base) for r in recs]


def iter_arrow(buf, *, topic: str = "", partition: int = -1, segment: str = "", position_base: int = 0,
               rows: int = 65536, native: bool = True, include_control: bool = False, views: bool = False) -> Iterator:
    """The records of a buffer of log entries (a segment's bytes or mmap) as ``pyarrow.RecordBatch`` es of
    about ``rows`` rows (or ``BYTES_PER_CHUNK`` bytes of entries), with the data source's record schema (key and
    value as views into ``buf`` with ``views``: :class:`RecordColumns`; ``buf`` then stays exported while they
    live). Control records (transaction markers) only with ``include_control``: a Kafka consumer never sees them,
    and neither do ``kafkalog export`` and the Spark source by default. Raises KafkaLogError at the first batch that
    cannot be decoded (the byte position is in the error)."""
    cols = RecordColumns(native, min(len(buf), BYTES_PER_CHUNK), views=views)
    if cols._core is None:
        for b in iter_batches(buf, path=segment or None, position_base=position_base):
            if b.is_control and not include_control:
                continue
            cols.add_batch(b, topic, partition, segment)
            if len(cols) >= rows or cols.nbytes >= BYTES_PER_CHUNK:
                yield cols.to_arrow()  # and cols is empty again
    else:
        # the core adds runs of plain (uncompressed v2) entries in one call; any other entry (compressed,
        # legacy, unusual, the end) goes through the records layer, one entry at a time, as above
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        core_cols, piece, pos, end = cols._core, (topic, partition, segment), 0, len(mv)
        stop = 0x07 if include_control else 0x27  # a codec; a control batch
        while True:
            pos, _, _ = core_cols.add_entries(mv, pos, end, position_base, cols._piece(piece), rows, BYTES_PER_CHUNK,
                                              False, stop)
            if len(cols) < rows and cols.nbytes < BYTES_PER_CHUNK:
                # and runs of v0/v1 entries (legacy.rs; wrappers when the core decompresses): the records layer
                # takes the next entry only when neither run moved
                start, (pos, _) = pos, core_cols.add_legacy_entries(mv, pos, end, position_base, cols._piece(piece),
                                                                    rows, BYTES_PER_CHUNK, _legacy_limit())
                entry = None if pos != start else next(iter(LogScanner(mv, pos, path=segment or None,
                                                                       position_base=position_base)), None)
                if entry is None:
                    if pos != start:
                        continue
                    break
                if include_control or not entry.is_control:
                    cols.add_batch(entry, topic, partition, segment)
                pos += entry.size
            if len(cols) >= rows or cols.nbytes >= BYTES_PER_CHUNK:
                yield cols.to_arrow()
    if len(cols):
        yield cols.to_arrow()


def _legacy_limit() -> int:
    """How large a v0/v1 wrapper's value the core decompresses in ``iter_arrow`` (0 when the Python codec packages
    decompress: then only plain messages)."""
    return DEFAULT_DECOMPRESS_LIMIT if native_codec() is not None else 0


def to_arrow(buf, *, topic: str = "", partition: int = -1, segment: str = "", position_base: int = 0,
             native: bool = True, include_control: bool = False):
    """Every record of ``buf`` as one ``pyarrow.RecordBatch`` (see :func:`iter_arrow`; control records only with
    ``include_control``)."""
    pa = require("pyarrow", feature="Arrow output")  # optional dependency

    parts = list(iter_arrow(buf, topic=topic, partition=partition, segment=segment, position_base=position_base,
                            rows=1 << 62, native=native, include_control=include_control))
    if not parts:
        return pa.RecordBatch.from_pylist([], schema=arrow_schema(RECORD_COLUMNS))
    return parts[0] if len(parts) == 1 else pa.concat_batches(parts)
