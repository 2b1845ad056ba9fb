"""Salvage export (``kafkalog export --salvage``): every record that can still be read from damaged files.

Inputs are data dirs (every partition dir in them: live, ``-future``, ``-delete`` and ``-stray``), partition dirs
of any of those kinds, and loose files (a ``.log`` copied out of a broker, a segment renamed ``.deleted``...).
Each file is scanned with :func:`kafkalog.storage.records.salvage.salvage_scan`, which skips corrupt regions and
resynchronises on the next valid batch; every record of every valid batch becomes an export row (the schema of
``kafkalog export``) with its provenance: ``dataDir``, ``file``, ``position`` (of its batch) and ``crcValid``.
Every skipped byte range is recorded in the :class:`SalvageReport` (and handed to ``on_skipped`` as it is
found). No index, checkpoint or snapshot is read: only the bytes of the ``.log`` files.

Topic and partition come from the partition dir's name (``orders-3``, ``orders-3.<id>-delete``); for a loose
file outside a partition dir, from the file name if it reads as ``<topic>-<partition>.log``, else they are null.
Memory is bounded by one batch: files are mmapped and rows produced batch by batch.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from kafkalog.storage.engine.export import ExportFilter, _record_chunks, _record_window, row_to_json, rows_of
from kafkalog.storage.errors import CorruptRecordError, KafkaLogError, LogDirError
from kafkalog.storage.io.jsonio import text_output
from kafkalog.storage.io.local import map_regular
from kafkalog.storage.log.datadir import classify_path, list_partition_dirs
from kafkalog.storage.log.topic_partition import parse_topic_partition_name
from kafkalog.storage.parallel import iter_partition_tasks
from kafkalog.storage.records.salvage import SalvageStats, SkippedRange, salvage_scan

PARTITION_KINDS = ("live", "future", "delete", "stray")


@dataclass(frozen=True)
class SalvageSource:
    """One file to salvage, with what is known of where it comes from."""

    path: Path
    data_dir: Path | None
    topic: str | None
    partition: int | None


@dataclass
class SalvageReport:
    files: int = 0
    partitions: int = 0
    batches: int = 0
    records: int = 0
    bytes_scanned: int = 0
    invalid_batches: int = 0
    skipped: list[SkippedRange] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    @property
    def skipped_bytes(self) -> int:
        return sum(s.size for s in self.skipped)

    @property
    def clean(self) -> bool:
        return not self.skipped

    def to_dict(self) -> dict:
        return {"partitions": self.partitions, "batches": self.batches, "records": self.records,
                "files": list(self.outputs), "salvagedFiles": self.files, "skippedRanges": len(self.skipped),
                "skippedBytes": self.skipped_bytes,
                "crcInvalidBatches": self.invalid_batches}


def _tp(name: str) -> tuple[str, int] | None:
    try:
        tp = parse_topic_partition_name(name)
    except LogDirError:
        return None
    return tp.topic, tp.partition


def _dir_logs(pdir: Path) -> list[Path]:
    return sorted(p for p in pdir.iterdir() if p.name.endswith(".log") and p.is_file())


def salvage_sources(paths: Iterable[str | os.PathLike], topics: Collection[str] | None = None) -> list[SalvageSource]:
    """The files ``paths`` name (see the module doc), in order; :class:`LogDirError` for a missing path."""
    out: list[SalvageSource] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise LogDirError("no such file or directory", str(p))
        if not p.is_dir():
            tp = _tp(p.parent.name)
            data_dir = p.parent.parent if tp is not None else None
            if tp is None:
                stem = p.name.split(".", 1)[0]
                tp = _tp(stem) if "-" in stem else None
            src = SalvageSource(p, data_dir, *(tp if tp is not None else (None, None)))
            if topics is None or src.topic in topics:
                out.append(src)
            continue
        tp = _tp(p.name)
        if tp is not None and classify_path(p) == "partition":
            if topics is None or tp[0] in topics:
                out.extend(SalvageSource(f, p.parent, *tp) for f in _dir_logs(p))
            continue
        for c, t in list_partition_dirs(p, kinds=PARTITION_KINDS):
            if topics is None or t.topic in topics:
                out.extend(SalvageSource(f, p, t.topic, t.partition) for f in _dir_logs(c))
    return out


def salvage_bytes(paths: Iterable[str | os.PathLike], topics: Collection[str] | None = None) -> int:
    """The bytes a salvage of ``paths`` reads (the total of its progress bar)."""
    return sum(s.path.stat().st_size for s in salvage_sources(paths, topics))


def _keeps(b, flt: ExportFilter) -> bool:
    """The batch-level predicates of the export filter (no index, no .txnindex: offsets, times, producers)."""
    if flt.from_offset is not None and b.last_offset < flt.from_offset:
        return False
    if flt.to_offset is not None and b.magic >= 2 and b.base_offset >= flt.to_offset:
        return False
    if flt.from_time is not None and b.magic >= 1 and b.max_timestamp < flt.from_time and b.timestamp_type == 0:
        return False
    if b.is_control and not flt.include_control:
        return False
    if flt.transactional_only and not b.is_transactional:
        return False
    return flt.producer_ids is None or b.producer_id in flt.producer_ids


def salvage_inputs(paths: Iterable[str | os.PathLike], report: SalvageReport | None = None,
                   flt: ExportFilter | None = None, *, topics: Collection[str] | None = None,
                   on_skipped: Callable[[SkippedRange, SalvageSource], None] | None = None,
                   progress: Callable[[int], None] | None = None,
                   max_batch_size: int | None = None, include_invalid: bool = False) -> Iterator[dict[str, Any]]:
    """Every record of every valid batch of the files under ``paths`` as an export row dict (bytes for
    key/value/header values) plus ``dataDir``, ``file``, ``crcValid``; skipped ranges go to ``report.skipped``
    and ``on_skipped``. ``flt``: the export filter's offset, time, key, producer and control predicates (an
    offset spec or read_committed needs the indexes and is refused). ``include_invalid``: also the records of
    entries that fail their CRC but whose framing is provably intact and whose records decode, with ``crcValid``
    false (their range is still reported as skipped)."""
    flt = flt or ExportFilter(include_control=True)
    if flt.offset_spec is not None or flt.read_committed:
        raise CorruptRecordError("salvage reads only the .log bytes: no offset spec (-o) or --read-committed")
    rep = report if report is not None else SalvageReport()
    window = _record_window(flt)
    seen_parts: set[tuple[str | None, str | None, int | None]] = set()
    for src in salvage_sources(paths, topics if topics is not None else flt.topics):
        _count_source(rep, src, seen_parts)
        yield from _salvage_file(src, rep, flt, window, on_skipped, progress, max_batch_size, include_invalid)


def _count_source(rep: SalvageReport, src: SalvageSource, seen: set) -> None:
    key = (str(src.path.parent) if src.topic is not None else str(src.path), src.topic, src.partition)
    if key not in seen:
        seen.add(key)
        rep.partitions += 1
    rep.files += 1


def _salvage_file(src: SalvageSource, rep: SalvageReport, flt: ExportFilter, window, on_skipped, progress,
                  max_batch_size: int | None, include_invalid: bool) -> Iterator[dict[str, Any]]:
    """The rows of one file (see :func:`salvage_inputs`); ``progress(n)`` is told the bytes scanned as the scan
    moves on."""
    name = str(src.path)
    mm, size = map_regular(name, CorruptRecordError)
    prov = {"dataDir": None if src.data_dir is None else os.path.abspath(src.data_dir),
            "file": os.path.abspath(name), "crcValid": True}
    suspect_prov = {**prov, "crcValid": False}
    done = 0
    try:
        if size:
            mv = memoryview(mm)
            try:
                stats = SalvageStats()
                for x in salvage_scan(mv, path=name, max_batch_size=max_batch_size, stats=stats,
                                      include_invalid=include_invalid):
                    if isinstance(x, SkippedRange):
                        if on_skipped is not None:
                            on_skipped(x, src)
                        b, x = x.batch, replace(x, batch=None)  # the report keeps no view into the mmap
                        rep.skipped.append(x)
                        reached = x.end
                        if b is None:
                            if progress is not None:
                                progress(reached - done)
                            done = reached
                            continue
                        rep.invalid_batches += 1
                        batch_prov = suspect_prov
                    else:
                        b = x
                        batch_prov = prov
                        reached = b.position + b.size
                    del x
                    if _keeps(b, flt):
                        magic = b.magic
                        head = (src.topic, src.partition, b.timestamp_type, b.partition_leader_epoch,
                                b.producer_id, b.producer_epoch, b.base_sequence,
                                b.base_offset if magic >= 2 else None, b.is_transactional, b.is_control,
                                magic, b.codec_name, src.path.name, b.position)
                        n = 0
                        for recs in _record_chunks(b, window, flt):
                            n += len(recs)
                            for row in rows_of(head, recs):
                                row.update(batch_prov)
                                yield row
                        rep.batches += 1 if n else 0
                        rep.records += n
                    del b
                    if progress is not None:
                        progress(reached - done)
                    done = reached
            finally:
                try:
                    mv.release()
                except BufferError:  # a view still referenced (a traceback); collected with the mmap
                    pass
    finally:
        rep.bytes_scanned += size
        if size:
            try:
                mm.close()
            except BufferError:
                pass
        if progress is not None:
            progress(size - done)


def describe_skipped(s: SkippedRange, src: SalvageSource | None = None) -> dict[str, Any]:
    """The JSON object of one skipped range (``docs/schemas/salvageSkipped.schema.json``); ``recordsExported``:
    the range is one entry failing its CRC whose records are exported with ``crcValid`` false
    (``include_invalid``)."""
    exported = s.batch is not None
    data_dir = None if src is None or src.data_dir is None else os.path.abspath(src.data_dir)
    return {"event": "skipped", "dataDir": data_dir, "file": None if s.path is None else os.path.abspath(s.path), "topic": None if src is None else src.topic,
            "partition": None if src is None else src.partition, "start": s.start, "end": s.end,
            "bytes": s.size, "reason": s.reason, "recordsExported": exported}


def salvage_jsonl(paths: Iterable[str | os.PathLike], out: IO[str] | str | os.PathLike,
                  flt: ExportFilter | None = None, *, topics: Collection[str] | None = None,
                  on_skipped: Callable[[SkippedRange, SalvageSource], None] | None = None,
                  progress: Callable[[int], None] | None = None, include_invalid: bool = False,
                  workers: int = 1) -> SalvageReport:
    """Write every salvaged record as one JSON object per line to ``out`` (a path, ``-`` for stdout, or a text
    stream): the ``kafkalog export`` row plus ``dataDir``, ``file``, ``crcValid``.

    ``workers > 1``: files are scanned by that many processes, each writing its file's lines to a spool file
    (next to ``out`` when it is a path, else in the temporary dir); the spools are copied to ``out`` in file order
    and deleted, at most ``2 x workers`` of them ahead of the one being copied. The output, the report and the
    order of the ``on_skipped`` calls are those of ``workers=1`` (a file's ranges are reported when its turn
    comes); ``progress`` then advances a file at a time. One file is always scanned by one process (resynchronising
    after damage is sequential)."""

    rep = SalvageReport()
    with text_output(out) as (stream, written):
        if written is not None:
            rep.outputs.append(written)
        if workers <= 1:
            _write_rows(salvage_inputs(paths, rep, flt, topics=topics, on_skipped=on_skipped, progress=progress,
                                       include_invalid=include_invalid), stream)
        else:
            _salvage_parallel(paths, rep, stream, flt, topics, on_skipped, progress, include_invalid, workers,
                              None if written is None else os.path.dirname(os.path.abspath(written)))
    return rep


def _write_rows(rows: Iterable[dict[str, Any]], stream: IO[str]) -> None:
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    for row in rows:
        stream.write(dumps(row_to_json(row)))
        stream.write("\n")


def _salvage_parallel(paths, rep: SalvageReport, stream: IO[str], flt: ExportFilter | None, topics, on_skipped,
                      progress, include_invalid: bool, workers: int, spool_dir: str | None) -> None:
    flt = flt or ExportFilter(include_control=True)
    if flt.offset_spec is not None or flt.read_committed:
        raise CorruptRecordError("salvage reads only the .log bytes: no offset spec (-o) or --read-committed")
    sources = salvage_sources(paths, topics if topics is not None else flt.topics)
    with tempfile.TemporaryDirectory(prefix=".kafkalog-salvage-", dir=spool_dir) as tmp:
        tasks = [(src, flt, include_invalid, os.path.join(tmp, f"{i}.jsonl")) for i, src in enumerate(sources)]
        results = iter_partition_tasks(_spool_file, tasks, workers=workers)
        with contextlib.closing(results):  # on an error: the workers are done before their spool dir goes
            _copy_spools(sources, results, rep, stream, on_skipped, progress)


def _copy_spools(sources: list[SalvageSource], results: Iterator, rep: SalvageReport, stream: IO[str], on_skipped,
                 progress) -> None:
    seen: set = set()
    for src, (spool, part, error) in zip(sources, results, strict=True):
        _count_source(rep, src, seen)
        rep.batches += part.batches
        rep.records += part.records
        rep.invalid_batches += part.invalid_batches
        rep.bytes_scanned += part.bytes_scanned
        for x in part.skipped:
            if on_skipped is not None:
                on_skipped(x, src)
            rep.skipped.append(x)
        if os.path.exists(spool):
            with open(spool, encoding="utf-8") as f:
                shutil.copyfileobj(f, stream)
            os.unlink(spool)
        if progress is not None:
            progress(part.bytes_scanned)
        if error is not None:
            cls, reason, path, position = error
            exc = cls.__new__(cls)
            KafkaLogError.__init__(exc, reason, path, position)
            raise exc


def _spool_file(task) -> tuple[str, SalvageReport, tuple | None]:
    """One file's rows written to its spool (in a worker process): ``(spool, the file's report, error)``; an error
    travels as ``(type, reason, path, position)`` (the rows before it are in the spool, as they would be out)."""
    src, flt, include_invalid, spool = task
    part = SalvageReport()
    error = None
    with open(spool, "w", encoding="utf-8") as f:
        try:
            _write_rows(_salvage_file(src, part, flt, _record_window(flt), None, None, None, include_invalid), f)
        except KafkaLogError as e:
            error = (type(e), e.reason, e.path, e.position)
    return spool, part, error


__all__ = ["SalvageReport", "SalvageSource", "describe_skipped", "salvage_bytes", "salvage_inputs",
           "salvage_jsonl", "salvage_sources"]
