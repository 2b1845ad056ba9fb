"""Opening files from disk defensively: regular files only, OS errors turned into kafkalog errors."""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
from collections.abc import Iterator
from typing import Any

from kafkalog.storage.errors import KafkaLogError, LogDirError
from kafkalog.storage.io.fs import UrlPath, info, is_url, read_bytes


def open_regular(path: str | os.PathLike, error_cls: type[KafkaLogError]) -> int:
    """A read-only descriptor on ``path``; ``error_cls`` if it cannot be opened or is not a regular file
    (a FIFO would block a plain ``open``, so it is opened non-blocking and refused)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise error_cls(f"cannot open: {e.strerror}", str(path)) from None
    try:
        st = os.fstat(fd)
    except OSError as e:  # pragma: no cover - fstat on an open fd
        os.close(fd)
        raise error_cls(f"cannot stat: {e.strerror}", str(path)) from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise error_cls(f"not a regular file ({file_kind(st.st_mode)}): not read", str(path))
    return fd


def file_kind(mode: int) -> str:
    """What a ``stat`` mode is, in words (for errors about special files)."""
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return what
    return "a regular file" if stat.S_ISREG(mode) else "an unknown kind of file"


def read_bounded(path: str | os.PathLike, limit: int, error_cls: type[KafkaLogError]) -> bytes:
    """Read a small file whole, refusing files above ``limit`` bytes before allocating (a file under a URL
    through the filesystem seam: :func:`_read_url`)."""
    if is_url(path):
        return _read_url(UrlPath.of(path), limit, error_cls)  # type: ignore[arg-type]
    fd = open_regular(path, error_cls)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise error_cls(f"file is {size} bytes, more than the {limit} bytes accepted", str(path))
        chunks = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise error_cls(f"file grew beyond the {limit} bytes accepted while being read", str(path))
        return data
    except OSError as e:
        raise error_cls(f"cannot read: {e.strerror}", str(path)) from None
    finally:
        os.close(fd)


def _read_url(url: UrlPath, limit: int | None, error_cls: type[KafkaLogError]) -> bytes:
    """:func:`read_bounded` of a file under a URL, with the same errors (``limit`` None: whatever its size)."""
    try:
        e = info(url.spec, url.fspath)
        if e is not None and not e.is_dir and (limit is None or e.size <= limit):
            limit = e.size if limit is None else limit
            return read_bytes(url.spec, url.fspath, limit)
    except LogDirError:
        raise error_cls(f"file grew beyond the {limit} bytes accepted while being read", str(url)) from None
    except OSError as err:
        raise error_cls(f"cannot read: {err}", str(url)) from None
    if e is None or e.is_dir:
        raise error_cls("cannot open: No such file or directory" if e is None else
                        "not a regular file (a directory): not read", str(url))
    raise error_cls(f"file is {e.size} bytes, more than the {limit} bytes accepted", str(url))


def map_regular(path: str | os.PathLike, error_cls: type[KafkaLogError]) -> tuple[Any, int]:
    """Read-only mmap of a whole regular file, or ``b""`` when it is empty (mmap of 0 bytes fails). A file under a
    URL (an index: small files only, a ``.log`` is read in windows) is read whole through the filesystem seam."""
    if is_url(path):
        data = _read_url(UrlPath.of(path), None, error_cls)  # type: ignore[arg-type]
        return data, len(data)
    fd = open_regular(path, error_cls)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return b"", 0
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ), size
    except OSError as e:
        raise error_cls(f"cannot map: {e.strerror}", str(path)) from None
    finally:
        os.close(fd)


@contextlib.contextmanager
def mapped(path: str | os.PathLike, error_cls: type[KafkaLogError] = KafkaLogError) -> Iterator[Any]:
    """A read-only mmap of a regular file (``b""`` when it is empty). Closing never raises ``BufferError``: when
    a batch view is still referenced (e.g. by a traceback) the mapping is left to the garbage collector."""
    fd = open_regular(path, error_cls)
    try:
        if os.fstat(fd).st_size == 0:
            yield b""
            return
        mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        try:
            yield mm
        finally:
            try:
                mm.close()
            except BufferError:
                pass
    finally:
        os.close(fd)
