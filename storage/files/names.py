"""File names inside a partition directory (``LogFileUtils``, docs/formats.md#file-names)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from kafkalog.storage.files.java import parse_java_int

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
TMP_FILE_SUFFIX = ".tmp"
TEMP_SUFFIXES = (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX, TMP_FILE_SUFFIX)
INDEX_SUFFIXES = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)


def filename_prefix_from_offset(offset: int) -> str:
    """20-digit zero-padded decimal (``LogFileUtils.filenamePrefixFromOffset``)."""
    if offset < 0:
        raise ValueError(f"negative offset {offset}")
    return f"{offset:020d}"


def log_file_name(base_offset: int) -> str:
    return filename_prefix_from_offset(base_offset) + LOG_FILE_SUFFIX


def index_file_name(base_offset: int) -> str:
    return filename_prefix_from_offset(base_offset) + INDEX_FILE_SUFFIX


def time_index_file_name(base_offset: int) -> str:
    return filename_prefix_from_offset(base_offset) + TIME_INDEX_FILE_SUFFIX


def txn_index_file_name(base_offset: int) -> str:
    return filename_prefix_from_offset(base_offset) + TXN_INDEX_FILE_SUFFIX


def snapshot_file_name(offset: int) -> str:
    return filename_prefix_from_offset(offset) + PRODUCER_SNAPSHOT_FILE_SUFFIX


def offset_from_file_name(name: str) -> int:
    """``LogFileUtils.offsetFromFileName``: ``Long.parseLong`` of the part before the first ``.``.

    Raises ``ValueError`` when that part is not a Java long.
    """
    return parse_java_int(name.split(".", 1)[0], 64)


def is_log_file(name: str) -> bool:
    return name.endswith(LOG_FILE_SUFFIX)


def is_index_file(name: str) -> bool:
    return name.endswith(INDEX_SUFFIXES)


def is_snapshot_file(name: str) -> bool:
    return name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX)


def temp_suffix(name: str) -> str | None:
    """The temporary suffix (``.deleted``/``.cleaned``/``.swap``/``.tmp``) a file name ends with, if any."""
    for s in TEMP_SUFFIXES:
        if name.endswith(s):
            return s
    return None


def segment_base_offsets(partition_dir: str | os.PathLike) -> list[int]:
    """Base offsets of the ``.log`` files of a partition dir, ascending (``LogLoader``: regular files ending
    in ``.log``; ``.cleaned``/``.swap``/``.deleted`` names do not, and names without an offset are skipped)."""
    return [base for base, _ in _segment_logs(partition_dir)]


def segment_log_files(partition_dir: str | os.PathLike) -> list[Path]:
    """The ``.log`` files of a partition dir, ascending base offset (see :func:`segment_base_offsets`)."""
    return [p for _, p in _segment_logs(partition_dir)]


def _segment_logs(partition_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    with os.scandir(partition_dir) as it:
        files = {e.name: Path(e.path) for e in it if is_log_file(e.name) and e.is_file()}
    return [(base, files[name]) for base, name in segment_logs_named(files)]


def segment_logs_named(names: Iterable[str]) -> list[tuple[int, str]]:
    """``(base offset, name)`` of the ``.log`` files among the regular files ``names``, ascending base offset
    (see :func:`segment_base_offsets`)."""
    out = []
    for name in names:
        if not is_log_file(name):
            continue
        try:
            base = offset_from_file_name(name)
        except ValueError:
            continue
        if base >= 0:
            out.append((base, name))
    out.sort(key=lambda x: x[0])
    return out


def offset_file_name(offset: int, suffix: str) -> str:
    """``<20-digit offset><suffix>`` (``LogFileUtils.filenamePrefixFromOffset`` + suffix)."""
    return filename_prefix_from_offset(offset) + suffix


def leading_offset(name: str) -> int | None:
    """The decimal number a file name starts with, before its first ``.`` (``LogLoader``'s test for files
    covered by a swap); None when there is none."""
    head, dot, _ = name.partition(".")
    return int(head) if dot and head.isdigit() and head.isascii() else None
