"""Kafka's atomic file replacement protocol (``CheckpointFile.write``, ``Utils.atomicMoveWithFallback``).

1. write ``<path>.tmp`` (truncating), flush, fsync;
2. rename it over ``<path>`` (``os.replace`` is atomic on POSIX);
3. fsync the parent directory so the rename itself is durable.
"""

from __future__ import annotations

import os
from pathlib import Path

TMP_SUFFIX = ".tmp"


def tmp_path(path: str | os.PathLike) -> Path:
    """The temporary sibling Kafka uses for ``path`` (``<absolute path>.tmp``)."""
    p = Path(path)
    return p.with_name(p.name + TMP_SUFFIX)


def fsync_dir(path: str | os.PathLike) -> None:
    """fsync a directory (``Utils.flushDir``); a no-op where directories cannot be opened (Windows)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(path, flags)
    except (IsADirectoryError, PermissionError):  # pragma: no cover - platform dependent
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike, data: bytes | bytearray | memoryview, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` crash-safely: tmp file, fsync, rename, fsync of the parent directory.

    On failure the temporary file is removed and ``path`` is left untouched.
    """
    target = Path(path)
    tmp = tmp_path(target)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise
    if fsync:
        fsync_dir(target.parent if str(target.parent) else ".")
