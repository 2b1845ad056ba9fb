"""The originals an operation changes or removes, kept where the user can find them (``--backup``)."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from kafkalog.storage.io import fileops
from kafkalog.storage.io.ops import Op
from kafkalog.storage.log.paths import data_dir_holding


class Backup:
    """Keeps the original of every file an operation changes or removes, under ``root`` at its path relative to
    ``base`` (the data dir). Files an operation replaces or deletes are hard-linked (instant, no extra space);
    files changed in place are copied. The folder is created on first use: a run that changes nothing leaves
    no backup behind."""

    def __init__(self, root: str | os.PathLike, base: str | os.PathLike):
        self.root = Path(root)
        self.base = Path(base).resolve()
        self.saved: list[str] = []
        self._inodes: set[tuple[int, int]] = set()  # files already kept (a renamed file is kept once)

    @staticmethod
    def default_root(data_dir: str | os.PathLike, operation: str) -> Path:
        """A new folder beside the data dir, unique to this run (UTC time, process, random suffix)."""
        d = Path(data_dir).resolve()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        return d.parent / f"kafkalog-backup-{operation}-{d.name}-{stamp}-{os.getpid()}-{secrets.token_hex(3)}"

    def preserve(self, path: str | os.PathLike, *, copy: bool = True) -> Path | None:
        p = Path(path)
        if not p.is_file():
            return None
        st = p.stat()
        if (st.st_dev, st.st_ino) in self._inodes and not copy:
            return None  # the same file, kept already under its earlier name
        try:
            rel = p.resolve().relative_to(self.base)
        except ValueError:
            rel = Path(p.name)
        dst = self.root / rel
        if dst.exists():
            return dst  # the first original wins
        dst.parent.mkdir(parents=True, exist_ok=True)
        fileops.link_or_copy(p, dst, copy=copy)
        self.saved.append(str(rel))
        self._inodes.add((st.st_dev, st.st_ino))
        return dst

    @staticmethod
    def inside_data_dir(root: Path, data_dirs: list[Path]) -> Path | None:
        """The data dir the folder ``root`` lies in: one of ``data_dirs`` (a plan's, which may not exist yet) or any
        existing one; None when outside. Originals are never kept inside a data dir: the broker refuses to load one
        holding a folder that is not a partition (``'bk' is not in the form of topic-partition``)."""
        return next((d for d in data_dirs if root.resolve().is_relative_to(d.resolve())), None) or data_dir_holding(root)

    def keep(self, op: Op) -> None:
        for path, copy in op.originals():
            self.preserve(path, copy=copy)


__all__ = ["Backup"]
