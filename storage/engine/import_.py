"""Write exported records back into a data dir through the write path (``kafkalog import``).

Rows (from :mod:`.export`: JSON Lines or Parquet) are grouped back into batches by ``(segment, position)``; each
batch is rebuilt as a v2 batch with the exported header fields (codec, timestamp type, partition leader epoch,
producer id/epoch, base sequence, transactional/control flags) and appended with its offsets kept (a
follower append of :class:`~kafkalog.storage.engine.writer.LogWriter`), rolling a new segment where the export
says a new segment began. For uncompressed v2 data the rebuilt batches, segments and positions are identical
to the originals, so export -> import -> export is identical; compressed batches are re-compressed (same
records, other bytes). v0/v1 rows are written as v2 (Kafka 4.0's conversion rules).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kafkalog.storage.codec.compression import CODEC_IDS
from kafkalog.storage.engine.export import row_from_json
from kafkalog.storage.engine.offset_checkpoints import merge_checkpoint
from kafkalog.storage.engine.parquet import iter_parquet_rows
from kafkalog.storage.engine.plan import data_dir_lock
from kafkalog.storage.engine.staging import PartitionStaging
from kafkalog.storage.engine.topic_id import check_topic_id
from kafkalog.storage.engine.writer import LogWriter
from kafkalog.storage.errors import ConfigError, CorruptRecordError, LogDirError
from kafkalog.storage.files.checkpoints import RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from kafkalog.storage.files.names import segment_log_files
from kafkalog.storage.io import fileops
from kafkalog.storage.io.jsonio import INT16, INT32, INT64, int_field, iter_lines, loads, typed_field
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.log.paths import require_destination
from kafkalog.storage.log.topic_partition import partition_path, validate_topic
from kafkalog.storage.records import CREATE_TIME, LOG_APPEND_TIME, build_batch
from kafkalog.storage.records.record import Record


@dataclass
class ImportStats:
    partitions: dict[str, int] = field(default_factory=dict)  # partition dir name -> log end offset
    batches: int = 0
    records: int = 0

    def to_dict(self) -> dict:
        """JSON (``import --json``): ``partitions`` is a list of ``{partition, logEndOffset}`` (a partition dir
        name is data, not a key)."""
        return {"partitions": [{"partition": name, "logEndOffset": leo} for name, leo in sorted(self.partitions.items())],
                "batches": self.batches, "records": self.records}


REQUIRED = ("topic", "partition", "offset", "timestamp", "key", "value")


#: the fields of an exported record that import reads, with their types (docs/schemas/exportRecord.schema.json):
#: integers by the signed width Kafka writes them in, or ``str``/``bool``; ``None`` after the type: may be null
_INTS = {"partition": (INT32, False), "offset": (INT64, False), "timestamp": (INT64, False),
         "timestampType": (INT16, False), "leaderEpoch": (INT32, False), "producerId": (INT64, False),
         "producerEpoch": (INT16, False), "sequence": (INT32, True), "position": (INT64, True),
         "magic": (INT16, False)}
_TYPED = {"topic": (str, False), "codec": (str, True), "segment": (str, True), "isTransactional": (bool, False),
          "isControl": (bool, False)}


def _checked(where: str, path: str, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with every field import reads checked for its type and range (a crafted line gets a clear error
    naming its field, never an exception from deep in the batch builder)."""
    if not isinstance(row, dict):
        raise CorruptRecordError(f"{where}: not an exported record (a JSON object is expected)", path)
    missing = [k for k in REQUIRED if k not in row]
    if missing:
        raise CorruptRecordError(f"{where}: not an exported record (missing {', '.join(missing)})", path)
    try:
        for k, (bits, null) in _INTS.items():
            if k in row:
                int_field(row[k], k, bits, null=null)
        for k, (kind, null) in _TYPED.items():
            if k in row:
                typed_field(row[k], k, kind, null=null)
        headers = row.get("headers") or []
        if not isinstance(headers, list) or not all(
                isinstance(h, tuple | list) and len(h) == 2 and isinstance(h[0], str)
                and (h[1] is None or isinstance(h[1], bytes)) for h in headers):
            raise ValueError("field 'headers': expected a list of {key: text, value: bytes or null}")
        for k in ("key", "value"):
            if row[k] is not None and not isinstance(row[k], bytes):
                raise ValueError(f"field {k!r}: expected bytes or null, got {type(row[k]).__name__}")
    except ValueError as e:
        raise CorruptRecordError(f"{where}: not an exported record ({e})", path) from None
    row["headers"] = headers
    row.setdefault("segment", None)
    row.setdefault("position", None)
    return row


def iter_rows(path: str | os.PathLike) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, row)`` from a JSON Lines (``.jsonl``/``.json``/``-``) or Parquet (``.parquet``) file."""
    p = str(path)
    if p.endswith(".parquet"):
        for i, row in enumerate(iter_parquet_rows(p)):
            yield f"row {i}", _checked(f"row {i}", p, row)
        return

    stream = sys.stdin if p == "-" else open(p, encoding="utf-8")
    try:
        lines = iter_lines(stream)
        while True:
            try:
                n, line = next(lines)
            except StopIteration:
                break
            except ValueError as e:
                raise CorruptRecordError(f"not an exported record: {e}", p) from None
            if not line.strip():
                continue
            try:
                obj = loads(line)
                if not isinstance(obj, dict):
                    raise ValueError("a JSON object is expected")
                row = row_from_json(obj)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise CorruptRecordError(f"line {n}: not an exported record ({e})", p) from None
            yield f"{p}:{n}", _checked(f"line {n}", p, row)
    finally:
        if stream is not sys.stdin:
            stream.close()


def _batch_key(row: dict[str, Any]) -> tuple:
    return (row["topic"], row["partition"], row["segment"], row["position"])


def _build(rows: list[dict[str, Any]], where: str) -> bytes:
    """The v2 batch of one exported batch's rows; rows the format cannot hold (offsets more than a 32-bit delta
    apart, ...) are a ``CorruptRecordError`` naming the first row's line."""
    try:
        return _build_batch(rows)
    except ValueError as e:
        raise CorruptRecordError(f"{where}: cannot be written as a batch: {e}") from None


def _build_batch(rows: list[dict[str, Any]]) -> bytes:
    first = rows[0]
    codec_name = first.get("codec") or "none"
    if codec_name not in CODEC_IDS:
        raise ConfigError(f"unknown codec {codec_name!r}")
    ts_type = first.get("timestampType", CREATE_TIME)
    ts_type = LOG_APPEND_TIME if ts_type == LOG_APPEND_TIME else CREATE_TIME
    recs = [Record(r["offset"], r["timestamp"], r["key"], r["value"], [(k, v) for k, v in r["headers"]])
            for r in rows]
    seq = first.get("sequence", -1)
    return build_batch(
        recs,
        base_offset=first["offset"],
        codec=cast(int, CODEC_IDS[codec_name]),  # types only ("producer" maps to None, as before)
        timestamp_type=ts_type,
        log_append_time=first["timestamp"] if ts_type == LOG_APPEND_TIME else None,
        producer_id=first.get("producerId", -1),
        producer_epoch=first.get("producerEpoch", -1),
        base_sequence=seq if seq is not None else -1,
        partition_leader_epoch=first.get("leaderEpoch", -1),
        is_transactional=bool(first.get("isTransactional")),
        is_control=bool(first.get("isControl")),
        strict=True,  # input: every offset and timestamp must read back as given
    )


def _group(rows: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    cur: list[dict[str, Any]] = []
    key = None
    where = ""
    for w, row in rows:
        k = _batch_key(row)
        if cur and k != key:
            yield where, cur
            cur = []
        if not cur:
            where = w
        key = k
        cur.append(row)
    if cur:
        yield where, cur


def _has_data(pdir: Path) -> bool:
    return any(f.stat().st_size > 0 for f in segment_log_files(pdir))


class _Checks:
    """The rules every imported batch must pass, for the import and for its dry run alike: legal partition
    names inside the data dir, no import into a partition holding data without ``append``, offsets increasing
    within a partition (and, with ``append``, at or above its log end offset)."""

    def __init__(self, ddir: Path, topic: str | None, append: bool):
        self.ddir, self.topic, self.append = ddir, topic, append
        self.paths: dict[str, Path] = {}
        self.last_offset: dict[str, int] = {}

    def batch(self, where: str, batch_rows: list[dict[str, Any]]) -> tuple[str, Path, list[int]]:
        first = batch_rows[0]
        t, part = self.topic or first["topic"], first["partition"]
        name = f"{t}-{part}"
        pdir = self.paths.get(name)
        if pdir is None:
            try:
                pdir = partition_path(self.ddir, t, part)
            except LogDirError as e:
                raise LogDirError(f"field 'topic'/'partition': {e.reason}", where) from None
            if pdir.exists() and _has_data(pdir):
                if not self.append:
                    raise LogDirError(f"partition {name} already holds data (use --append)", str(pdir))
                self.last_offset[name] = _log_end_offset(pdir) - 1
            self.paths[name] = pdir
        offs = [r["offset"] for r in batch_rows]
        prev = self.last_offset.get(name, -1)
        if any(b <= a for a, b in zip(offs, offs[1:], strict=False)) or offs[0] <= prev:
            raise CorruptRecordError(f"offsets must increase within a partition (offset {offs[0]} after "
                                     f"{prev})", where)
        self.last_offset[name] = offs[-1]
        return name, pdir, offs


def _log_end_offset(pdir: Path) -> int:

    with PartitionLog(pdir) as plog:
        segs = plog.segments
        return segs[-1].read_next_offset() if segs else 0


def _destination(data_dir: str | os.PathLike) -> Path:
    """The data dir an import writes into: an existing path must be a data dir or an empty dir (the one path
    contract, :func:`~kafkalog.storage.log.paths.require_destination`); a path that does not exist is a new data dir,
    which the import creates with its parents."""
    ddir = Path(data_dir)
    if ddir.exists() or ddir.is_symlink():
        require_destination(ddir, new=False)
    return ddir


def preview_import(files: Iterable[str | os.PathLike], data_dir: str | os.PathLike, *, topic: str | None = None,
                   append: bool = False) -> ImportStats:
    """``import --dry-run``: read and check every row exactly as :func:`import_files` does and return what it
    would write (per partition the log end offset after the import, batches, records), touching nothing."""
    ddir = _destination(data_dir)
    if topic is not None:
        validate_topic(topic)
    stats = ImportStats()
    checks = _Checks(ddir, topic, append)
    for f in files:
        for where, batch_rows in _group(iter_rows(f)):
            name, _pdir, offs = checks.batch(where, batch_rows)
            _build(batch_rows, where)  # the batch must build (codec, fields) as it would on import
            stats.batches += 1
            stats.records += len(batch_rows)
            stats.partitions[name] = offs[-1] + 1
    return stats


def import_files(files: Iterable[str | os.PathLike], data_dir: str | os.PathLike, *, topic: str | None = None,
                 topic_id: str | None = None, append: bool = False) -> ImportStats:
    """Import exported rows into ``data_dir`` (under its lock). A partition that already holds data is refused
    unless ``append`` (then offsets must continue after its log end offset). All or nothing: on any error
    (bad row, full disk) the data dir is left exactly as it was (:mod:`.staging`). ``data_dir`` is a data dir or a
    new one (:func:`_destination`: a path that does not exist yet, with its parents, or an empty dir);
    anything else is a :class:`~kafkalog.storage.log.paths.PathError` before anything is read or written."""
    ddir = _destination(data_dir)
    if topic is not None:
        validate_topic(topic)
    if topic_id is not None:
        check_topic_id(topic_id)
    created = not ddir.exists()
    ddir.mkdir(parents=True, exist_ok=True)
    try:
        return _import(files, ddir, topic, topic_id, append)
    except BaseException:
        if created:
            fileops.rmtree(ddir)  # a data dir this import created goes with it
        raise


def _import(files: Iterable[str | os.PathLike], ddir: Path, topic: str | None, topic_id: str | None,
            append: bool) -> ImportStats:
    stats = ImportStats()
    writers: dict[str, LogWriter] = {}
    last_segment: dict[str, str | None] = {}
    checks = _Checks(ddir, topic, append)

    def rows() -> Iterator[tuple[str, dict[str, Any]]]:
        for f in files:
            yield from iter_rows(f)

    with data_dir_lock(ddir), PartitionStaging(ddir) as staging:
        try:
            for where, batch_rows in _group(rows()):
                first = batch_rows[0]
                name, pdir, offs = checks.batch(where, batch_rows)
                w = writers.get(name)
                if w is None:
                    w = writers[name] = LogWriter(staging.path(pdir), topic_id=topic_id, leader_epoch=None)
                seg = first.get("segment")
                if seg and seg != last_segment.get(name) and seg[:-4].isdigit():
                    base = int(seg[:-4])
                    if base > w.active.base_offset and base <= offs[0] and (
                            name in last_segment or w.active.size == 0):
                        w.roll(base)
                last_segment[name] = seg
                w.append(_build(batch_rows, where), assign_offsets=False)
                stats.batches += 1
                stats.records += len(batch_rows)
                stats.partitions[name] = offs[-1] + 1
            for name, w in writers.items():
                stats.partitions[name] = w.close()
        except BaseException:
            for w in writers.values():
                w.__exit__(Exception, None, None)  # closed without writing indexes; the staging undoes it all
            raise
        ends = {}
        for name, leo in stats.partitions.items():
            t, _, p = name.rpartition("-")
            ends[(t, int(p))] = leo
        for ck in (RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
            staging.keep(ddir / ck)
            merge_checkpoint(ddir / ck, ends)
        staging.commit()  # the last step: the new partitions appear under their names
    return stats


__all__ = ["ImportStats", "import_files", "iter_rows", "preview_import"]
