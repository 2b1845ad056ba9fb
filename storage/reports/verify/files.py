"""Single files given on the command line: a KRaft snapshot, an index, a checkpoint, ...."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from kafkalog.storage.errors import CorruptRecordError, KafkaLogError
from kafkalog.storage.files.findings import Finding, error, info
from kafkalog.storage.files.index import map_file
from kafkalog.storage.files.segment import Segment, WindowedScanner
from kafkalog.storage.io.fs import SegmentFile, UrlPath, as_path, is_url
from kafkalog.storage.log.segment_check import SegmentSummary, _deep_check, verify_segment
from kafkalog.storage.records import LogScanner
from kafkalog.storage.reports.dump import dump_file, dump_kind


def verify_kraft_snapshot(path: str | os.PathLike, deep: bool = False) -> tuple[list[Finding], int]:
    """A KRaft snapshot (``<offset>-<epoch>.checkpoint``, or a data dir's ``bootstrap.checkpoint``): batch
    framing, magic and CRCs (records with ``deep``); returns the findings and the bytes scanned."""

    if is_url(path):  # read in windows through the filesystem seam
        url = UrlPath.of(path)  # type: ignore[arg-type]
        try:
            file = SegmentFile(url.spec, url.fspath)
        except OSError as e:
            return [error(str(url), None, "layout", code="verify.cannotOpen", error=str(e))], 0
        with file:
            return _scan_kraft_snapshot(WindowedScanner(file, path=str(url)), str(url), file.size, deep)
    name = os.fspath(path)
    try:
        mm, _ = map_file(name, CorruptRecordError)
    except KafkaLogError as e:
        return [error(name, e.position, "layout", e.reason)], 0
    buf = memoryview(mm)
    try:
        return _scan_kraft_snapshot(LogScanner(buf, path=name), name, len(buf), deep)
    finally:
        buf.release()
        if hasattr(mm, "close"):
            try:
                mm.close()
            except BufferError:
                pass


def _scan_kraft_snapshot(scanner: LogScanner, name: str, size: int, deep: bool) -> tuple[list[Finding], int]:
    """:func:`verify_kraft_snapshot`'s checks over the batches of ``scanner`` (``size`` bytes)."""
    out: list[Finding] = []
    summary = SegmentSummary(0, size)
    try:
        for b in scanner:
            if b.magic != 2:  # RecordsIterator: a KRaft snapshot holds v2 batches only
                out.append(error(name, b.position, "batch", code="verify.snapshotMagic", magic=b.magic))
            elif not b.is_valid():
                out.append(error(name, b.position, "crc", code="verify.crc", storedCrc=b.crc,
                                 computedCrc=b.compute_crc()))
            if deep and b.magic == 2:
                _deep_check(b, name, out, summary)
            del b
    except CorruptRecordError as e:
        out.append(error(name, e.position, "batch", e.reason))
    else:
        if scanner.stop_reason is not None:
            out.append(error(name, scanner.stop_position, "batch", code="verify.tail", reason=scanner.stop_reason,
                             bytes=size - scanner.stop_position))
    return out, size


_FILE_KINDS = {"snapshot": "snapshot", "offsetCheckpoint": "checkpoint", "leaderEpochCheckpoint": "epoch",
               "partitionMetadata": "metadata", "metaProperties": "metadata", "cleanShutdown": "metadata"}


def verify_file(path: str | os.PathLike, deep: bool = False) -> tuple[list[Finding], int, int]:
    """One file given on its own: a segment file (``.log`` or one of its indexes: the whole segment is
    checked), a KRaft snapshot, a producer snapshot, a checkpoint or metadata file. Returns (findings,
    segments, bytes). A file under a URL is read through the filesystem seam (a ``.log`` in windows)."""

    p = as_path(path)
    if not p.exists():
        return [error(p, None, "layout", code="file.noSuchFile")], 0, 0
    kind = dump_kind(p)
    if kind in ("log", "index", "timeindex", "txnindex"):
        prefix = p.name.split(".", 1)[0]
        log_path = p.parent / (prefix + ".log")
        if not log_path.exists():
            return [error(log_path, None, "layout", code="verify.noLogFile", given=p.name)], 0, 0
        later = [n for n in _names(p.parent) if n.endswith(".log") and n > log_path.name]
        seg = Segment(log_path)
        try:
            findings, summary = verify_segment(seg, deep=deep, is_active=not later)
        except KafkaLogError as e:
            return [error(e.path or log_path, e.position, "layout", e.reason)], 1, 0
        finally:
            seg.close()
        return findings, 1, summary.size
    if kind == "kraftSnapshot":
        findings, size = verify_kraft_snapshot(p, deep)
        return findings, 0, size
    if kind is None:
        return [info(p, None, "layout", code="verify.unknownFileKind")], 0, 0
    try:
        d = dump_file(p)
    except KafkaLogError as e:
        return [error(e.path or p, e.position, _FILE_KINDS.get(kind, "layout"), e.reason)], 0, 0
    return [Finding(str(p), x["position"], _FILE_KINDS.get(kind, "layout"), "error", x.get("reason", ""),
                    x.get("facts", {}), x.get("code")) for x in d.problems], 0, 0


def _names(directory: Path) -> list[str]:
    """The names in ``directory`` (local, or under a URL), none when it cannot be listed."""
    try:
        return [q.name for q in directory.iterdir()]
    except OSError:
        return []


ProgressCallback = Callable[[int], None]


