"""Which file a path named when a read was planned (:class:`FileStamp`), so that a reader can tell it from a file
swapped in under the same name before it reads the planned bytes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class FileStamp:
    """Which file a path named when a read was planned: its size, its modification time (ms, as Java's
    ``File.lastModified`` and Hadoop's ``FileStatus.getModificationTime`` give it) and, for a local file, its inode
    (-1 when the filesystem gives none: an object store's, Hadoop's).

    A reader that reads the planned bytes later checks :meth:`holds` first: the log cleaner (the broker's or
    ``kafkalog compact``'s) swaps a new file in under the same name (``.cleaned`` -> ``.swap`` -> rename), retention
    deletes a segment and a new one may take its name, recovery truncates one; the planned byte ranges then point
    into another file."""

    size: int
    mtime_ms: int
    inode: int = -1

    def holds(self, found: FileStamp) -> bool:
        """Whether ``found`` (the path's stamp now) is still the planned file with the planned bytes: unchanged
        (same size and modification time), or the same inode grown (a broker appending to its active segment:
        the planned bytes are still there). Anything else (a new inode, a shorter file, the same size rewritten,
        an object rewritten under its key) is a replaced file."""
        if found.size == self.size and found.mtime_ms == self.mtime_ms:
            return True
        return self.inode >= 0 and found.inode == self.inode and found.size > self.size

    def fields(self) -> tuple[int, int, int]:
        """``(size, mtime_ms, inode)``: what a reader in another language compares (the JVM scan's piece)."""
        return self.size, self.mtime_ms, self.inode


class _Stat(Protocol):
    @property
    def st_size(self) -> int: ...
    @property
    def st_mtime_ns(self) -> int: ...


def local_stamp(st: os.stat_result | _Stat) -> FileStamp:
    """The :class:`FileStamp` of a ``stat``: a local file's (``os.stat_result``, with its inode) or a file's under a
    URL (``kafkalog.storage.io.fs.UrlStat``: no inode)."""
    return FileStamp(st.st_size, st.st_mtime_ns // 1_000_000, getattr(st, "st_ino", -1))


__all__ = ["FileStamp", "local_stamp"]
