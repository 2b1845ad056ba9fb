"""All or nothing for the write path (``append``, ``import``, the Spark writer): a failed write leaves the data
dir exactly as it was.

A partition that does not exist yet is written in a staging dir ``<topic>-<partition>.<uuid>-delete`` inside
the data dir and renamed to ``<topic>-<partition>`` only when every write of the operation succeeded. The
``-delete`` suffix is the broker's own name for a partition being deleted: if the process dies mid-write, a
broker starting on the dir removes the leftover (``LogManager.loadLogs``), and kafkalog lists it as such.

A partition that already exists is appended in place; its files are recorded first (the size of every
``.log``, the bytes of every other file, which are small: indexes, snapshots, checkpoints) and, on failure,
restored: new files removed, segments truncated back, the other files written back.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from kafkalog.storage.engine.plan import require_writable
from kafkalog.storage.io import fileops
from kafkalog.storage.log.topic_partition import DELETE_DIR_SUFFIX

#: :meth:`PartitionStaging.keep` of a path that is neither absent nor a regular file
_SPECIAL = b"<special file>"


class _Existing:
    def __init__(self, pdir: Path) -> None:
        self.dir = pdir
        self.sizes: dict[str, int] = {}
        self.saved: dict[str, bytes] = {}
        for p in pdir.iterdir():
            if not p.is_file() or p.is_symlink():
                continue
            if p.name.endswith(".log"):
                self.sizes[p.name] = p.stat().st_size
            else:
                self.saved[p.name] = p.read_bytes()

    def restore(self) -> None:
        """Undo, best effort step by step (one step that fails does not stop the others: the segments are
        truncated back even if a new file cannot be removed); the first error is raised at the end."""
        errors: list[OSError] = []

        def step(fn, *args) -> None:
            try:
                fn(*args)
            except OSError as e:
                errors.append(e)

        for name, size in self.sizes.items():
            p = self.dir / name
            if p.exists() and p.stat().st_size != size:
                step(fileops.truncate, p, size)
        for name, data in self.saved.items():
            p = self.dir / name
            if not p.exists() or p.read_bytes() != data:
                step(fileops.write_in_place, p, data)  # in place: a full disk has no room for a copy
                if p.exists() and p.stat().st_size > len(data):
                    step(fileops.truncate, p, len(data))
        for p in self.dir.iterdir():
            if p.name not in self.sizes and p.name not in self.saved and p.is_file():
                step(p.unlink)
        if errors:
            raise errors[0]


class PartitionStaging:
    """``with PartitionStaging(data_dir) as st: w = LogWriter(st.path(final_dir)) ...`` -- new partitions are
    published on a clean exit, everything undone on an exception (which is re-raised)."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir)
        self.staged: dict[Path, Path] = {}  # final dir -> staging dir
        self.existing: dict[Path, _Existing] = {}
        self.kept: dict[Path, bytes | None] = {}
        self.committed = False

    def path(self, final: Path) -> Path:
        """Where to write the partition dir ``final`` (a dir of this data dir)."""
        if final in self.staged:
            return self.staged[final]
        if final in self.existing:
            return final

        if final.exists():
            # appended in place: the dir (new segments, indexes, snapshots) and its files must be writable
            require_writable([final], [p for p in final.iterdir() if p.is_file()], what=final.name)
            self.existing[final] = _Existing(final)
            return final
        require_writable([self.data_dir], what=final.name)  # staged beside it, then renamed into it
        tmp = final.with_name(f"{final.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        self.staged[final] = tmp
        return tmp

    def keep(self, path: Path) -> None:
        """Record a data-dir file (a checkpoint) the operation rewrites, to write it back on failure."""
        if path in self.kept:
            return
        if not os.path.lexists(path):
            self.kept[path] = None  # absent: a failure removes what the operation created
        elif path.is_file():
            self.kept[path] = path.read_bytes()
        else:
            self.kept[path] = _SPECIAL  # a FIFO, socket, device or dir: the operation refuses it; never removed

    def commit(self) -> None:
        """Publish the staged partitions (rename, then fsync the data dir); if that fails, those already renamed
        go back, so :meth:`undo` still leaves the data dir as it was."""
        done: list[tuple[Path, Path]] = []
        try:
            for final, tmp in self.staged.items():
                if tmp.exists():
                    fileops.rename(tmp, final)
                    done.append((final, tmp))
            if self.staged:
                fileops.fsync_dir(self.data_dir)
        except BaseException:
            for final, tmp in reversed(done):
                fileops.rename(final, tmp)
            raise
        self.staged.clear()
        self.committed = True

    def undo(self) -> None:
        for tmp in self.staged.values():
            fileops.rmtree(tmp)
        for e in self.existing.values():
            e.restore()
        for path, data in self.kept.items():
            if data is _SPECIAL:
                continue
            if data is None:
                fileops.unlink(path)
            elif not path.is_file() or path.read_bytes() != data:
                fileops.atomic_write(path, data)

    def __enter__(self) -> PartitionStaging:
        return self

    def __exit__(self, exc_type, *_exc) -> None:
        if exc_type is None:
            if not self.committed:
                self.commit()
        elif not self.committed:
            self.undo()


__all__ = ["PartitionStaging"]
