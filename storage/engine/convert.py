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
import shutil
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..codec.compression import CODEC_IDS, CODEC_NAMES
from ..codec.crc import crc32c
from ..codec.varint import write_varint
from ..diff import mapped
from ..errors import ConfigError, CorruptRecordError, KafkaLogError
from ..files.names import offset_from_file_name, segment_log_files
from ..files.offset_index import OffsetIndexBuilder
from ..files.time_index import TimeIndexBuilder
from ..logdir import data_dir_of, resolve_partition_dirs
from ..records import CREATE_TIME, LOG_APPEND_TIME, LegacyBatch, LogScanner, RecordBatch, build_batch, rebuild
from ..records.record import Record
from .plan import Action, Backup, Plan, data_dir_lock
from .swap import cleaned_path, fsync_dir, offset_file_name, replace_segments

DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
MAX_SEGMENT_BYTES = 2147483647  # FileRecords refuses larger .log files
DEFAULT_GROUP_BYTES = 1024 * 1024  # records bytes per grouped batch (below max.message.bytes 1048588)
_WRITE_BUFFER = 1 << 20


@dataclass
class ConvertOptions:
    to_magic: int = 2
    codec: int | None = None  # None: keep each batch's codec (Kafka's rule)
    level: int | None = None
    group_uncompressed: bool = False
    group_bytes: int = DEFAULT_GROUP_BYTES
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    max_index_size: int = DEFAULT_MAX_INDEX_SIZE
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
        if self.group_bytes < 1 or self.index_interval_bytes < 0:
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


@dataclass
class _Writer:
    """Writes ``<base>.log.cleaned`` + indexes by the recovery rule (``LogSegment.recover``)."""

    dir: Path
    base: int
    opts: ConvertOptions
    pos: int = 0
    last_index_entry: int = 0
    max_ts: int = -1
    max_ts_offset: int = -1
    batches: int = 0
    f: object = None
    oi: OffsetIndexBuilder = field(init=False)
    ti: TimeIndexBuilder = field(init=False)

    def __post_init__(self) -> None:
        self.f = open(cleaned_path(self.dir, self.base, ".log"), "wb", buffering=_WRITE_BUFFER)
        self.oi = OffsetIndexBuilder(self.base, self.opts.max_index_size)
        self.ti = TimeIndexBuilder(self.base, self.opts.max_index_size)

    def append(self, data: bytes, last_offset: int, max_timestamp: int) -> None:
        if max_timestamp > self.max_ts:
            self.max_ts, self.max_ts_offset = max_timestamp, last_offset
        if self.pos - self.last_index_entry > self.opts.index_interval_bytes:
            self.oi.append(last_offset, self.pos)
            self.ti.maybe_append(self.max_ts, self.max_ts_offset)
            self.last_index_entry = self.pos
        self.f.write(data)
        self.pos += len(data)
        self.batches += 1

    def finish(self) -> None:
        self.ti.maybe_append(self.max_ts, self.max_ts_offset, skip_full_check=True)
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        for suffix, idx in ((".index", self.oi.build()), (".timeindex", self.ti.build())):
            with open(cleaned_path(self.dir, self.base, suffix), "wb") as g:
                g.write(idx.to_bytes(trim=True))
                g.flush()
                os.fsync(g.fileno())

    def abort(self) -> None:
        if self.f is not None and not self.f.closed:
            self.f.close()
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            cleaned_path(self.dir, self.base, suffix).unlink(missing_ok=True)


_Q = struct.Struct(">q")
_I = struct.Struct(">i")


def _header_of(data: bytes) -> tuple[int, int]:
    """(last offset, max timestamp) of a converted batch (always v2) or a verbatim entry."""
    if data[16] >= 2:
        return _Q.unpack_from(data, 0)[0] + _I.unpack_from(data, 23)[0], _Q.unpack_from(data, 35)[0]
    lb = LegacyBatch(memoryview(data))
    return lb.last_offset, lb.max_timestamp


def convert_segment(log_path: str | os.PathLike, opts: ConvertOptions, *, swap: bool = True,
                    crash_hook: Callable[[str], None] | None = None) -> SegmentResult:
    """Convert one segment in place (crash-safe). Returns what was written."""
    log_path = Path(log_path)
    pdir = log_path.parent
    base = offset_from_file_name(log_path.name)
    size = log_path.stat().st_size
    st = log_path.stat()
    writers: list[_Writer] = [_Writer(pdir, base, opts)]
    batches_in = legacy = 0
    try:
        if size:
            with mapped(log_path) as mm:
                scanner = LogScanner(mm, path=str(log_path))

                def counted() -> Iterator[RecordBatch | LegacyBatch]:
                    nonlocal batches_in, legacy
                    for b in scanner:
                        batches_in += 1
                        if b.magic < 2:
                            legacy += 1
                        yield b
                        del b

                for data in convert_batches(counted(), opts):
                    last, max_ts = _header_of(data)
                    w = writers[-1]
                    if w.pos and w.pos + len(data) > opts.max_segment_bytes:
                        w.finish()
                        first = RecordBatch(memoryview(data)).base_offset
                        writers.append(_Writer(pdir, first, opts))
                        w = writers[-1]
                    w.append(data, last, max_ts)
                stop = (scanner.stop_reason, scanner.stop_position)
                del scanner
            if stop[0] is not None:
                raise CorruptRecordError(f"{stop[0]} at the end of the segment: run `kafkalog repair` first",
                                         str(log_path), stop[1])
        writers[-1].finish()
        txn = pdir / offset_file_name(base, ".txnindex")
        if txn.exists():
            dst = cleaned_path(pdir, base, ".txnindex")
            shutil.copyfile(txn, dst)
            with open(dst, "rb+") as g:
                os.fsync(g.fileno())
        for w in writers:
            for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                p = cleaned_path(pdir, w.base, suffix)
                if p.exists():
                    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        fsync_dir(pdir)
    except BaseException:
        for w in writers:
            w.abort()
        raise
    bases = [w.base for w in writers]
    if swap:
        replace_segments(pdir, bases, [base], crash_hook=crash_hook)
    return SegmentResult(pdir.name, log_path.name, bases, size, sum(w.pos for w in writers), batches_in,
                         sum(w.batches for w in writers), legacy)


# -------------------------------------------------------------------------------------------- audit


@dataclass
class SegmentAudit:
    partition: str
    segment: str
    size: int
    batches: int
    v0_batches: int
    v1_batches: int
    v2_batches: int
    legacy_bytes: int
    codecs: dict[str, int]

    @property
    def legacy(self) -> bool:
        return bool(self.v0_batches or self.v1_batches)

    def to_dict(self) -> dict:
        return {"partition": self.partition, "segment": self.segment, "size": self.size, "batches": self.batches,
                "v0Batches": self.v0_batches, "v1Batches": self.v1_batches, "v2Batches": self.v2_batches,
                "legacyBytes": self.legacy_bytes, "codecs": dict(self.codecs)}


def audit_segment(log_path: str | os.PathLike) -> SegmentAudit:
    """Shallow scan: counts of v0/v1/v2 batches, legacy bytes and codecs (no decompression)."""
    p = Path(log_path)
    counts = [0, 0, 0]
    legacy_bytes = 0
    codecs: dict[str, int] = {}
    n = 0
    size = p.stat().st_size
    if size:
        with mapped(p) as mm:
            for b in LogScanner(mm, path=str(p)):
                n += 1
                m = min(b.magic, 2)
                counts[m] += 1
                if m < 2:
                    legacy_bytes += b.size
                c = b.codec_name
                codecs[c] = codecs.get(c, 0) + 1
                del b
    return SegmentAudit(p.parent.name, p.name, size, n, counts[0], counts[1], counts[2], legacy_bytes, codecs)


def audit(paths: Iterable[str | os.PathLike], *, topics: set[str] | None = None,
          only_legacy: bool = True) -> Iterator[SegmentAudit]:
    """Segments (of every partition under ``paths``) still holding v0/v1 batches (all with ``only_legacy=False``)."""
    for root in paths:
        for pdir in resolve_partition_dirs(root, topics):
            for seg in segment_log_files(pdir):
                a = audit_segment(seg)
                if a.legacy or not only_legacy:
                    yield a


# --------------------------------------------------------------------------------------------- plan


def _segment_needs(seg: Path, opts: ConvertOptions) -> tuple[bool, int, int]:
    """(needs conversion, batches to convert, their bytes), by a shallow scan."""
    n = nbytes = 0
    with mapped(seg) as mm:
        for b in LogScanner(mm, path=str(seg)):
            if needs_conversion(b, opts) or (opts.group_uncompressed and b.magic < 2):
                n += 1
                nbytes += b.size
            del b
    return n > 0, n, nbytes


def plan_convert(paths: Iterable[str | os.PathLike], opts: ConvertOptions | None = None, *,
                 topics: set[str] | None = None) -> Plan:
    """A plan with one ``convert-segment`` action per segment that holds something to convert."""
    opts = opts or ConvertOptions()
    paths = list(paths)
    plan = Plan("convert", ", ".join(str(p) for p in paths))
    what = f"v{opts.to_magic}" + (f", codec {CODEC_NAMES[opts.codec]}" if opts.codec is not None else "")
    for root in paths:
        for pdir in resolve_partition_dirs(root, topics):
            for seg in segment_log_files(pdir):
                need, n, nbytes = _segment_needs(seg, opts)
                if not need:
                    continue
                base = offset_from_file_name(seg.name)
                files = [str(pdir / offset_file_name(base, s)) for s in (".log", ".index", ".timeindex", ".txnindex")
                         if (pdir / offset_file_name(base, s)).exists()]
                plan.add(Action(
                    "convert-segment", str(seg),
                    f"rewrite {n} batches ({nbytes} bytes) as {what}; rebuild .index/.timeindex; swap in",
                    files=files, bytes=nbytes,
                    apply=lambda seg=seg: convert_segment(seg, opts)))
    return plan


@dataclass
class ConvertReport:
    plan: Plan
    applied: list[SegmentResult] = field(default_factory=list)
    backup: str | None = None

    def summary(self) -> dict:
        return {
            "segments": len(self.applied),
            "bytesIn": sum(r.bytes_in for r in self.applied),
            "bytesOut": sum(r.bytes_out for r in self.applied),
            "batchesIn": sum(r.batches_in for r in self.applied),
            "batchesOut": sum(r.batches_out for r in self.applied),
            "legacyBatches": sum(r.legacy_batches for r in self.applied),
            "backup": self.backup,
        }


def _convert_one(seg: str, opts: ConvertOptions) -> SegmentResult:
    try:
        return convert_segment(seg, opts)
    except OSError as e:
        raise KafkaLogError(f"convert-segment failed: {e.strerror or e}", seg) from None


def _convert_task(task: tuple[str, ConvertOptions]) -> tuple[SegmentResult | None, tuple | None]:
    """Worker: convert one segment; (result, None) or (None, (error class, reason, path, position))."""
    seg, opts = task
    try:
        return _convert_one(seg, opts), None
    except KafkaLogError as e:
        return None, (type(e), e.reason, e.path or seg, e.position)


def convert(paths: Iterable[str | os.PathLike], opts: ConvertOptions | None = None, *,
            topics: set[str] | None = None, dry_run: bool = False, backup_root: str | os.PathLike | None = None,
            backup: bool = True, progress: Callable[[Action | None], None] | None = None,
            plan: Plan | None = None, workers: int = 1) -> ConvertReport:
    """Plan (unless a ``plan`` from :func:`plan_convert` is given) and, unless ``dry_run``, apply a conversion
    under each data dir's lock, keeping backups (hard links of the replaced files).

    ``workers`` processes convert segments at once (each segment is swapped in on its own, crash-safely, so
    the order does not matter). A failing segment stops the run: with one worker at once, with several after
    the segments already under way finish; the error names the segment and byte position."""
    from .recovery import run_partition_tasks

    opts = opts or ConvertOptions()
    paths = list(paths)
    if plan is None:
        plan = plan_convert(paths, opts, topics=topics)
    report = ConvertReport(plan)
    if dry_run or plan.empty:
        return report
    by_dir: dict[Path, list[Action]] = {}
    for a in plan.actions:
        by_dir.setdefault(data_dir_of(Path(a.path).parent), []).append(a)
    for ddir, actions in by_dir.items():
        with data_dir_lock(ddir):
            if backup:
                root = Path(backup_root) / ddir.name if backup_root else Backup.default_root(ddir, "convert")
                bk = Backup(root, ddir)
                report.backup = str(Path(backup_root) if backup_root else root)
                for a in actions:
                    for f in a.files:  # old files are renamed away, never modified: hard links suffice
                        bk.preserve(f, copy=False)
            if workers <= 1:
                for a in actions:
                    report.applied.append(_convert_one(a.path, opts))
                    if progress is not None:
                        progress(a)
                continue

            def advance(n: int) -> None:
                for _ in range(n):
                    progress(None)  # type: ignore[misc]

            # biggest first, so one large segment does not start last; results reported in plan order
            order = sorted(range(len(actions)), key=lambda i: -actions[i].bytes)
            out = run_partition_tasks(_convert_task, [(actions[i].path, opts) for i in order], workers=workers,
                                      threads=1, progress=advance if progress is not None else None)
            done: list = [None] * len(actions)
            for i, r in zip(order, out, strict=True):
                done[i] = r
            errors = [err for _, err in done if err is not None]
            report.applied.extend(res for res, err in done if err is None)
            if errors:
                more = f" ({len(errors) - 1} more segments failed)" if len(errors) > 1 else ""
                cls, reason, path, position = errors[0]
                raise cls(reason + more, path, position)
    return report


__all__ = [
    "ConvertOptions", "ConvertReport", "SegmentAudit", "SegmentResult", "audit", "audit_segment", "convert",
    "convert_batches", "convert_legacy", "convert_segment", "needs_conversion", "plan_convert", "recompress_v2",
]
