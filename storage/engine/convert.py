"""Rewrite segments so every batch is message format v2 and/or uses another codec (``kafkalog convert``).

Conversion rules are Kafka 4.0's cleaner (KAFKA-13093, ``MemoryRecords.buildRetainedRecordsInto``):

* a compressed v0/v1 wrapper becomes **one** v2 batch (same codec unless another is asked for), base offset =
  its first inner offset;
* an uncompressed v0/v1 message becomes a single-record v2 batch (or, with ``group_uncompressed``, runs of them
  become one batch);
* v0 records get timestamp type CreateTime and timestamp -1; v1 keeps its timestamp and type (LogAppendTime
  batches keep the append time as max timestamp);
* producer id/epoch/base sequence -1, partition leader epoch as stored (-1 for legacy entries), record
  attributes 0, no headers.

v2 batches are copied verbatim unless a codec is asked for and differs (control and empty batches are always
copied verbatim); a recompressed v2 batch keeps every header field (base offset, last offset delta, timestamps,
delete horizon, producer fields, partition leader epoch) and the stored record deltas.

Each converted segment is written as ``<base>.log.cleaned`` with its offset and time indexes rebuilt by the
broker's per-batch rule (``LogSegment.recover``), the ``.txnindex`` carried over, the original mtimes kept,
then swapped in with Kafka's ``.cleaned -> .swap -> replace`` protocol (:mod:`.swap`). Offsets, segment base
offsets, producer snapshots and the leader-epoch checkpoint are unchanged.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from kafkalog.storage.codec.compression import CODEC_IDS, CODEC_NAMES
from kafkalog.storage.codec.crc import crc32c
from kafkalog.storage.codec.native import active, core
from kafkalog.storage.codec.varint import write_varint
from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.engine.swap import (
    NewSegment,
    ReplaceSegments,
    SegmentBuild,
    cleaned_path,
    segment_files,
)
from kafkalog.storage.errors import ConfigError, CorruptRecordError
from kafkalog.storage.files.findings import note
from kafkalog.storage.files.names import offset_file_name, offset_from_file_name
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io import fileops
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.log.segment import SegmentWriter
from kafkalog.storage.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    LegacyBatch,
    RecordBatch,
    build_batch,
    rebuild,
)
from kafkalog.storage.records.record import Record

DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
MAX_SEGMENT_BYTES = 2147483647  # FileRecords refuses larger .log files
DEFAULT_GROUP_BYTES = 1024 * 1024  # records bytes per grouped batch (below max.message.bytes 1048588)
_WRITE_BUFFER = 1 << 20
_LEVELLED = ("gzip", "lz4", "zstd")  # the codecs with a compression.<codec>.level


@dataclass
class ConvertOptions:
    to_magic: int = 2
    codec: int | None = None  # None: keep each batch's codec (Kafka's rule)
    level: int | None = None
    group_uncompressed: bool = False
    group_bytes: int = DEFAULT_GROUP_BYTES
    index_interval_bytes: int | None = None  # None: the topic's index.interval.bytes
    max_index_size: int | None = None  # None: the topic's segment.index.bytes
    max_segment_bytes: int = MAX_SEGMENT_BYTES

    def __post_init__(self) -> None:
        if self.to_magic != 2:
            raise ConfigError(f"only conversion to message format v2 is supported (asked: v{self.to_magic})")
        if isinstance(self.codec, str):
            name = "none" if self.codec == "uncompressed" else self.codec
            if name not in CODEC_IDS:
                raise ConfigError(f"unknown codec {self.codec!r} (one of {', '.join(CODEC_IDS)})")
            self.codec = CODEC_IDS[name]
        if self.codec is not None and self.codec not in CODEC_NAMES:
            raise ConfigError(f"unknown codec id {self.codec}")
        if self.level is not None:  # Kafka's compression.<codec>.level rule, for --codec or every codec kept
            for name in (CODEC_NAMES[self.codec],) if self.codec is not None else _LEVELLED:
                if name in _LEVELLED:
                    LogConfig.from_topic_props({f"compression.{name}.level": self.level}, source="--level")
        if self.group_bytes < 1 or (self.index_interval_bytes is not None and self.index_interval_bytes < 0):
            raise ConfigError("group_bytes must be positive and index_interval_bytes non-negative")


# ----------------------------------------------------------------------------------------- pure core


def needs_conversion(batch: RecordBatch | LegacyBatch, opts: ConvertOptions) -> bool:
    if batch.magic < opts.to_magic:
        return True
    if opts.codec is None or batch.is_control or batch.records_count == 0:
        return False
    return batch.codec != opts.codec


def convert_legacy(batch: LegacyBatch, opts: ConvertOptions, records: list[Record] | None = None) -> bytes:
    """One v0/v1 entry (plain message or compressed wrapper) as one v2 batch, Kafka 4.0's cleaner rules."""
    recs = batch.records() if records is None else records
    ts_type = CREATE_TIME if batch.magic == 0 else batch.timestamp_type
    codec = batch.codec if opts.codec is None else opts.codec
    return build_batch(
        [Record(r.offset, r.timestamp, r.key, r.value, []) for r in recs],
        base_offset=recs[0].offset,
        codec=codec,
        timestamp_type=ts_type,
        log_append_time=batch.max_timestamp if ts_type == LOG_APPEND_TIME else None,
        partition_leader_epoch=batch.partition_leader_epoch,
        level=opts.level,
    )


RUN_BYTES = 8 << 20  # output of one native run (bounded memory)
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_U32 = struct.Struct(">I")


def plain_legacy_to_v2(batch: LegacyBatch) -> bytes:
    """Fast path of :func:`convert_legacy` for an uncompressed v0/v1 message (same bytes, no Record objects)."""
    m = batch.message()
    log_append = batch.magic == 1 and batch.timestamp_type == LOG_APPEND_TIME
    ts = m.timestamp if batch.magic == 1 else -1
    body = bytearray(b"\x00\x00\x00")  # attributes, timestamp delta 0, offset delta 0
    for f in (m.key, m.value):
        if f is None:
            body.append(0x01)
        else:
            write_varint(len(f), body)
            body += f
    body.append(0x00)  # no headers
    out = bytearray(61)
    write_varint(len(body), out)
    out += body
    _V2_HEADER.pack_into(out, 0, m.offset, len(out) - 12, batch.partition_leader_epoch, 2, 0,
                         0x08 if log_append else 0, 0, ts, ts, -1, -1, -1, 1)
    _U32.pack_into(out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def recompress_v2(batch: RecordBatch, codec: int, level: int | None = None) -> bytes:
    """A v2 batch with the same header fields and records, compressed with ``codec``."""
    return rebuild(batch, codec=codec, level=level)


def _group_key(b: LegacyBatch) -> tuple:
    ts_type = CREATE_TIME if b.magic == 0 else b.timestamp_type
    # LogAppendTime batches carry one timestamp for all records: only equal append times can share a batch.
    return (b.magic, ts_type, b.max_timestamp if ts_type == LOG_APPEND_TIME else None)


def convert_batches(batches: Iterable[RecordBatch | LegacyBatch], opts: ConvertOptions) -> Iterator[bytes]:
    """The converted byte stream of ``batches`` (views may be released after each yield)."""
    group: list[Record] = []
    group_first: _LegacyHead | None = None
    group_key: tuple | None = None
    group_size = 0

    def flush() -> bytes:
        nonlocal group, group_first, group_key, group_size
        assert group_first is not None
        out = convert_legacy(group_first, opts, group)  # type: ignore[arg-type]
        group, group_first, group_key, group_size = [], None, None, 0
        return out

    for b in batches:
        b.ensure_valid()
        if opts.group_uncompressed and isinstance(b, LegacyBatch) and b.codec == 0:
            key = _group_key(b)
            size = b.size
            if group and (key != group_key or group_size + size > opts.group_bytes):
                yield flush()
            if not group:
                group_first, group_key = _LegacyHead(b), key  # detached: the view may go away
            group.extend(b.records())
            group_size += size
            continue
        if group:
            yield flush()
        if not needs_conversion(b, opts):
            yield bytes(b.buf)
        elif isinstance(b, LegacyBatch):
            if b.codec == 0 and opts.codec in (None, 0):
                yield plain_legacy_to_v2(b)
            else:
                yield convert_legacy(b, opts)
        else:
            yield recompress_v2(b, opts.codec if opts.codec is not None else b.codec, opts.level)
    if group:
        yield flush()


class _LegacyHead:
    """The fields of a legacy entry :func:`convert_legacy` needs, detached from the buffer (the grouped
    records are always passed to it alongside)."""

    def __init__(self, b: LegacyBatch):
        self.magic = b.magic
        self.timestamp_type = b.timestamp_type
        self.codec = b.codec
        self.max_timestamp = b.max_timestamp
        self.partition_leader_epoch = b.partition_leader_epoch


# ------------------------------------------------------------------------------------ segment rewrite


@dataclass
class SegmentResult:
    partition: str
    segment: str
    bases: list[int]
    bytes_in: int
    bytes_out: int
    batches_in: int
    batches_out: int
    legacy_batches: int

    def to_dict(self) -> dict:
        return {"partition": self.partition, "segment": self.segment, "bases": self.bases, "bytesIn": self.bytes_in,
                "bytesOut": self.bytes_out, "batchesIn": self.batches_in, "batchesOut": self.batches_out,
                "legacyBatches": self.legacy_batches}


_Q = struct.Struct(">q")
_I = struct.Struct(">i")


def _header_of(data: bytes) -> tuple[int, int]:
    """(last offset, max timestamp) of a converted batch (always v2) or a verbatim entry."""
    if data[16] >= 2:
        return _Q.unpack_from(data, 0)[0] + _I.unpack_from(data, 23)[0], _Q.unpack_from(data, 35)[0]
    lb = LegacyBatch(memoryview(data))
    return lb.last_offset, lb.max_timestamp


class ConvertBuild(SegmentBuild):
    """Writes the converted ``.cleaned`` segment(s) of one segment when its :class:`ReplaceSegments` runs:
    indexes by the broker's per-batch rule, the ``.txnindex`` carried over, the original's times kept."""

    def __init__(self, log_name: str, base_offset: int, opts: ConvertOptions):
        self.log_name = log_name
        self.base = base_offset
        self.opts = opts

    def __call__(self, pdir: Path) -> SegmentResult:
        opts = self.opts
        log_path = pdir / self.log_name
        st = log_path.stat()
        size = st.st_size

        def writer(base: int) -> SegmentWriter:
            assert opts.index_interval_bytes is not None  # set by plan_convert and convert_segment
            return SegmentWriter(pdir, base, index_interval_bytes=opts.index_interval_bytes,
                                 max_index_size=opts.max_index_size, per_batch=False)

        writers = [writer(self.base)]
        batches_in = legacy = 0
        try:
            if size:
                with Segment(log_path, self.base) as seg:
                    if active().records is not None and not opts.group_uncompressed and opts.codec in (None, 0):
                        batches_in, legacy, stop = self._convert_runs(seg, size, writers, writer)
                    else:
                        scanner = seg.scanner()

                        def counted() -> Iterator[RecordBatch | LegacyBatch]:
                            nonlocal batches_in, legacy
                            for b in scanner:
                                batches_in += 1
                                if b.magic < 2:
                                    legacy += 1
                                yield b
                                del b

                        for data in convert_batches(counted(), opts):
                            _append_converted(data, writers, writer, opts.max_segment_bytes)
                        stop = (scanner.stop_reason, scanner.stop_position)
                        del scanner
                if stop[0] is not None:
                    raise CorruptRecordError(f"{stop[0]} at the end of the segment: run `kafkalog repair` first",
                                             str(log_path), stop[1])
            writers[-1].finish()
            txn = pdir / offset_file_name(self.base, ".txnindex")
            if txn.exists():
                with fileops.NewFile(cleaned_path(pdir, self.base, ".txnindex")) as f:
                    f.write(txn.read_bytes())
            for w in writers:
                for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                    p = cleaned_path(pdir, w.base_offset, suffix)
                    if p.exists():
                        fileops.set_mtime(p, st.st_mtime_ns)
        except BaseException:
            for w in writers:
                w.abort()
            raise
        res = SegmentResult(pdir.name, self.log_name, [w.base_offset for w in writers], size,
                            sum(w.size for w in writers), batches_in, sum(w.batches for w in writers), legacy)
        res.bases = [w.base_offset for w in writers]
        return res


    def _convert_runs(self, seg: Segment, size: int, writers: list[SegmentWriter], writer) -> tuple:
        """The segment converted with the compiled core: runs of plain v0/v1 messages natively
        (``legacy_to_v2``, the bytes of :func:`plain_legacy_to_v2`), every other entry -- and the one a run stops
        at, with its error -- through :func:`convert_batches`. Returns ``(batches in, legacy batches in,
        (stop reason, stop position))``."""
        assert core is not None  # (only called with the compiled core)
        opts = self.opts
        batches_in = legacy = 0
        pos = 0
        while True:
            chunk, metas, pos = core.legacy_to_v2(seg.buf, pos, size, RUN_BYTES)
            if metas:
                _append_run(chunk, metas, writers, writer, opts.max_segment_bytes)
                batches_in += len(metas)
                legacy += len(metas)
            del chunk, metas
            scanner = seg.scanner(pos)
            b = next(iter(scanner), None)
            if b is None:
                return batches_in, legacy, (scanner.stop_reason, scanner.stop_position)
            pos = b.position + b.size
            batches_in += 1
            legacy += b.magic < 2
            for data in convert_batches((b,), opts):
                _append_converted(data, writers, writer, opts.max_segment_bytes)
            del b, scanner


def _append_converted(data: bytes, writers: list[SegmentWriter], writer, max_segment_bytes: int) -> None:
    """Append one converted batch to the last writer, starting a new segment when it would pass the limit."""
    last, max_ts = _header_of(data)
    w = writers[-1]
    if w.size and w.size + len(data) > max_segment_bytes:
        w.finish()
        writers.append(writer(RecordBatch(memoryview(data)).base_offset))
        w = writers[-1]
    w.append(data, largest_offset=last, max_timestamp=max_ts, shallow_offset=last)


def _append_run(chunk: bytes, metas: list, writers: list[SegmentWriter], writer, max_segment_bytes: int) -> None:
    """:func:`_append_converted` for a run of single-record v2 batches (``(size, offset, timestamp)`` each):
    the same segment splits and index entries, one write per segment."""
    mv = memoryview(chunk)
    i = off = 0
    n = len(metas)
    while i < n:
        w = writers[-1]
        have = w.size
        j, run = i, 0
        while j < n and (have + run == 0 or have + run + metas[j][0] <= max_segment_bytes):
            run += metas[j][0]
            j += 1
        if j == i:  # the next batch starts a new segment (its base offset is its only offset)
            w.finish()
            writers.append(writer(metas[i][1]))
            continue
        w.append_run(mv[off:off + run], metas[i:j])
        off += run
        i = j


def convert_segment(log_path: str | os.PathLike, opts: ConvertOptions) -> SegmentResult:
    """Convert one segment in place now (crash-safe), outside a plan (tests, the Spark job's task)."""
    p = Path(log_path)
    base = offset_from_file_name(p.name)
    view = DirView(p.parent, DirView.DIRECT)
    files: dict[str, int | None] = {".log": None, ".index": None, ".timeindex": None}
    if view.exists(offset_file_name(base, ".txnindex")):
        files[".txnindex"] = view.size(offset_file_name(base, ".txnindex"))
    op = ReplaceSegments(str(view.path), note(p, "op.convertNow"), sources=[base], new=[NewSegment(base, files)],
                         build=ConvertBuild(p.name, base, replace(
                             opts, index_interval_bytes=opts.index_interval_bytes or DEFAULT_INDEX_INTERVAL_BYTES,
                             max_index_size=opts.max_index_size or DEFAULT_MAX_INDEX_SIZE)),
                         source_files=segment_files(view, base), source_bytes=view.size(p.name))
    return op.run()


__all__ = [
    "ConvertBuild", "ConvertOptions", "SegmentResult", "convert_batches", "convert_legacy", "convert_segment",
    "needs_conversion", "plain_legacy_to_v2", "recompress_v2",
]
