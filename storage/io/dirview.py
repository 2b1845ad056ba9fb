"""A directory as an engine sees it, with the file operations engines plan on it.

Every mutating engine runs **once**, against a :class:`DirView`: it reads the files through the view and changes
them only by calling the view's mutators (:meth:`DirView.write`, :meth:`~DirView.truncate`,
:meth:`~DirView.delete`, :meth:`~DirView.rename`, :meth:`~DirView.touch`, or :meth:`~DirView.add` for a
composite operation; the operations are :mod:`~kafkalog.storage.io.ops`). What happens then depends on the view's mode:

* ``planned`` (the default): nothing on disk changes. Each mutation becomes an :class:`Op` appended to
  :attr:`DirView.ops`, and the view's own listing changes as if it had happened, so later steps of the engine
  read what earlier steps would have left (a truncated ``.log`` reads shorter, a snapshot written reads back,
  a deleted file is gone). The ops are the plan; ``--dry-run`` prints them and ``apply`` runs exactly them.
* ``direct``: each mutation runs at once through :mod:`.fileops` (the write path of a live writer).
* ``readonly``: a mutation is a bug (:class:`RuntimeError`).

A URL (``s3://...``, a :class:`~kafkalog.storage.io.fs.UrlPath`) is listed and read through the filesystem seam
(:mod:`kafkalog.storage.io.fs`), never written: its small files are read whole, a segment's ``.log`` in windows
(:class:`~kafkalog.storage.files.segment.Segment`); a planned view of it records the ops (a prediction: ``doctor``,
never applied), a direct one is refused.

The listing never opens a file: kinds come from ``lstat``/``stat``. FIFOs, sockets and devices are listed as
``special`` and never read; a symlink is followed only when it stays inside the directory.
"""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from kafkalog.storage.errors import LogDirError
from kafkalog.storage.io.file_stamp import FileStamp
from kafkalog.storage.io.fs import SegmentFile, UrlPath, is_url, listdir, read_bytes
from kafkalog.storage.io.local import open_regular
from kafkalog.storage.io.ops import Blob, Delete, Op, Reason, Rename, Touch, Truncate, WriteFile

FILE, DIR, SPECIAL, SYMLINK_OUT, DANGLING = "file", "dir", "special", "symlink-out", "dangling"


# ---------------------------------------------------------------------------------------------- the view
@dataclass
class Entry:
    name: str
    kind: str  # FILE, DIR, SPECIAL, SYMLINK_OUT, DANGLING
    size: int = 0
    mtime_ns: int = 0
    ino: int = 0
    disk: str | None = None  # on-disk name whose bytes this entry holds (None: planned content)
    blob: Blob | None = None  # planned content (overlaid on ``disk`` for an in-place write)
    symlink: bool = False

    def fingerprint(self) -> tuple:
        return (self.kind, self.size, self.mtime_ns, self.ino)


class DirView:
    """One directory (a partition dir, a data dir), see the module doc."""

    PLANNED, DIRECT, READONLY = "planned", "direct", "readonly"

    def __init__(self, path: str | os.PathLike | UrlPath, mode: str = PLANNED, *, missing_ok: bool = False):
        #: the directory's URL when it is not a local path (read-only, through the filesystem seam)
        self.url: UrlPath | None = UrlPath.of(path) if is_url(path) else None  # type: ignore[arg-type]
        if self.url is not None:
            if mode == self.DIRECT:  # (planned: the ops are recorded, never run: a prediction, never applied)
                raise LogDirError("a URL is read-only: kafkalog changes files only in a local directory",
                                  str(self.url))
            self.path = cast(Path, self.url)  # a UrlPath: name, parent, / and str() as a Path's
        else:
            self.path = Path(os.path.abspath(cast(str, path)))
        self.mode = mode
        self.ops: list[Op] = []
        self.entries: dict[str, Entry] = {}
        self.read_names: set[str] = set()  # disk files the engine read (their fingerprints guard the plan)
        self._deleted: dict[str, tuple[Entry, Op]] = {}  # on-disk files this plan deleted, and how
        self._maps: dict[str, tuple[Any, memoryview]] = {}
        self.exists_on_disk = self.path.is_dir()
        if not self.exists_on_disk:
            if not missing_ok:
                raise LogDirError("not a directory", str(self.path))
        else:
            self._scan()

    def __repr__(self) -> str:
        return f"DirView({str(self.path)!r}, {self.mode}, {len(self.entries)} entries, {len(self.ops)} ops)"

    # ------------------------------------------------------------------------------------------ listing
    def _scan(self) -> None:
        if self.url is not None:
            try:
                listing = listdir(self.url.spec, self.url.fspath)
            except OSError as e:
                raise LogDirError(f"cannot list the directory: {e}", str(self.url)) from None
            for fe in listing:
                self.entries[fe.name] = (Entry(fe.name, DIR, 0, fe.mtime_ns) if fe.is_dir else
                                         Entry(fe.name, FILE, fe.size, fe.mtime_ns, disk=fe.name))
            return
        try:
            with os.scandir(self.path) as it:
                raw = list(it)
        except OSError as e:
            raise LogDirError(f"cannot list the directory: {e.strerror or e}", str(self.path)) from None
        for de in raw:
            self.entries[de.name] = self._entry(de)

    def _entry(self, de: os.DirEntry) -> Entry:
        name = de.name
        try:
            st = de.stat(follow_symlinks=False)
        except OSError:
            return Entry(name, DANGLING)
        symlink = stat.S_ISLNK(st.st_mode)
        if symlink:
            target = os.path.realpath(de.path)
            if not _inside(target, str(self.path)):
                return Entry(name, SYMLINK_OUT, symlink=True)
            try:
                st = os.stat(de.path)
            except OSError:  # dangling, or a loop
                return Entry(name, DANGLING, symlink=True)
        if stat.S_ISREG(st.st_mode):
            return Entry(name, FILE, st.st_size, st.st_mtime_ns, st.st_ino, disk=name, symlink=symlink)
        if stat.S_ISDIR(st.st_mode):
            return Entry(name, DIR, 0, st.st_mtime_ns, st.st_ino, symlink=symlink)
        return Entry(name, SPECIAL, 0, st.st_mtime_ns, st.st_ino, symlink=symlink)

    def names(self, kind: str | None = FILE) -> list[str]:
        """Sorted names of the entries of ``kind`` (all entries for ``None``)."""
        return sorted(n for n, e in self.entries.items() if kind is None or e.kind == kind)

    def entry(self, name: str) -> Entry | None:
        return self.entries.get(name)

    def is_file(self, name: str) -> bool:
        e = self.entries.get(name)
        return e is not None and e.kind == FILE

    exists = is_file

    def size(self, name: str) -> int:
        return self._file(name).size

    def mtime_ns(self, name: str) -> int:
        return self._file(name).mtime_ns

    def stamp(self, name: str) -> FileStamp:
        """Which file ``name`` is, as listed (:class:`~kafkalog.storage.io.file_stamp.FileStamp`; a local one with its
        inode)."""
        e = self._file(name)
        return FileStamp(e.size, e.mtime_ns // 1_000_000, e.ino if self.url is None else -1)

    def file(self, name: str) -> str:
        """The absolute path of ``name`` in this directory."""
        return str(self.path / name)

    def _file(self, name: str) -> Entry:
        e = self.entries.get(name)
        if e is None or e.kind != FILE:
            raise LogDirError("no such file" if e is None else f"not a regular file ({e.kind})", self.file(name))
        return e

    # ------------------------------------------------------------------------------------------- reading
    def map(self, name: str) -> memoryview:
        """The bytes of ``name`` as the plan has them so far: a read-only mmap of the file on disk (cut to its
        planned size) or the planned content. Views stay valid until :meth:`close`."""
        e = self._file(name)
        if e.blob is not None:
            data = memoryview(e.blob.data())
            return data if e.disk is None else self._overlay(e)
        if e.size == 0:
            return memoryview(b"")
        disk = e.disk
        assert disk is not None
        self.read_names.add(disk)
        cached = self._maps.get(disk)
        if cached is None and self.url is not None:  # a small file under a URL, read whole (a .log: Segment)
            try:
                raw = read_bytes(self.url.spec, (self.url / disk).fspath, e.size)
            except OSError as err:
                raise LogDirError(f"cannot read: {err}", self.file(name)) from None
            cached = self._maps[disk] = (raw, memoryview(raw))
        if cached is None:
            fd = open_regular(self.path / disk, LogDirError)
            try:
                mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            finally:
                os.close(fd)
            cached = self._maps[disk] = (mm, memoryview(mm))
        return cached[1][:e.size]

    def head(self, name: str, size: int) -> memoryview:
        """The first ``size`` bytes of ``name`` as :meth:`map` gives them (fewer when it is shorter); of a file under
        a URL not read whole yet, only those bytes are read (through the filesystem seam)."""
        e = self._file(name)
        if self.url is None or e.blob is not None or e.disk is None or e.disk in self._maps:
            return self.map(name)[:size]
        self.read_names.add(e.disk)
        return memoryview(self._read_disk(e.disk, 0, min(size, e.size)))

    def _overlay(self, e: Entry) -> memoryview:
        """An in-place write over a longer file: the new bytes, then the old file's tail."""
        assert e.blob is not None and e.disk is not None
        head = e.blob.data()
        return memoryview(head + self._read_disk(e.disk, len(head), max(0, e.size - len(head))))

    def blob_range(self, name: str, offset: int, size: int) -> Blob:
        """Content for a new file: ``size`` bytes of ``name`` from ``offset``, as the plan has them (read from
        disk only when the op runs)."""
        e = self._file(name)
        if offset + size > e.size:
            raise LogDirError(f"range {offset}+{size} beyond the end ({e.size} bytes)", self.file(name))
        if e.blob is None and e.disk is not None:
            self.read_names.add(e.disk)
            return Blob(src=str(self.path / e.disk), offset=offset, size=size)
        return Blob(bytes(self.map(name)[offset:offset + size]))

    def read(self, name: str, limit: int | None = None) -> bytes:
        """The bytes of a small file (checkpoints, snapshots); :class:`LogDirError` above ``limit``."""
        e = self._file(name)
        if limit is not None and e.size > limit:
            raise LogDirError(f"{e.size} bytes: larger than the {limit} bytes expected", self.file(name))
        return bytes(self.map(name))

    def close(self) -> None:
        for mm, view in self._maps.values():
            try:
                view.release()
                if isinstance(mm, mmap.mmap):
                    mm.close()
            except BufferError:  # a batch view still refers to it; the mapping goes with the last view
                pass
        self._maps.clear()

    def __enter__(self) -> DirView:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ changing
    def _record(self, op: Op) -> Op:
        if self.mode == self.READONLY:
            raise RuntimeError(f"a read-only view cannot {op.kind} {op.path}")
        if self.mode == self.DIRECT:
            self._release(Path(op.path).name)
            op.run()
        else:
            self.ops.append(op)
        return op

    def _release(self, name: str) -> None:
        e = self.entries.get(name)
        if e is not None and e.disk in self._maps:
            mm, view = self._maps.pop(e.disk)
            try:
                view.release()
                mm.close()
            except BufferError:
                pass

    def _writable(self, name: str) -> None:
        """Refuse to plan a write where something other than a regular file stands (a FIFO, a directory, a
        symlink): kafkalog never writes through, over or into it; the plan fails with nothing changed."""
        e = self.entries.get(name)
        if e is not None and e.kind != FILE:
            what = {DIR: "a directory", SPECIAL: "a FIFO, socket or device", SYMLINK_OUT: "a symlink leaving the "
                    "directory", DANGLING: "a dangling or looping symlink"}.get(e.kind, e.kind)
            raise LogDirError(f"{what} stands where a regular file is expected: kafkalog will not write over it "
                              "(move it away, then run again)", self.file(name))

    def write(self, name: str, data: bytes | bytearray | memoryview | Blob, why: str | Reason, *,
              in_place: bool = False) -> Op | None:
        """Create or replace ``name`` with ``data`` (``in_place``: write over the start of it, as Kafka writes
        producer snapshots)."""
        self._writable(name)
        blob = data if isinstance(data, Blob) else Blob(data)
        old = self.entries.get(name)
        existed = old is not None and old.kind == FILE
        if self.mode == self.PLANNED:
            if existed and old is not None and self._pristine(old, blob, in_place):
                return None  # the file already holds these bytes: nothing to do
            undo = self._deleted.get(name)
            if not existed and undo is not None and self._pristine(undo[0], blob, False):
                # deleted earlier in this plan and written back with the same bytes: neither op is needed
                self.ops.remove(undo[1])
                del self._deleted[name]
                self.entries[name] = undo[0]
                return None
        op = self._record(WriteFile(self.file(name), why, blob, existed, in_place))
        if in_place and existed and old is not None and old.size > blob.size:
            self.entries[name] = Entry(name, FILE, old.size, old.mtime_ns, old.ino, disk=old.disk, blob=blob)
        else:
            self.entries[name] = Entry(name, FILE, blob.size, 0, 0, disk=None, blob=blob)
        return op

    _COMPARE_LIMIT = 1 << 20

    def _pristine(self, e: Entry, blob: Blob, in_place: bool) -> bool:
        """Whether the on-disk file of ``e`` (unchanged by this plan) already holds ``blob``'s bytes (as its
        start, for an in-place write)."""
        if e.disk != e.name or e.blob is not None or blob.size > self._COMPARE_LIMIT:
            return False
        if not (e.size >= blob.size if in_place else e.size == blob.size):
            return False
        return self._read_disk(e.disk, 0, blob.size) == blob.data()

    def _read_disk(self, disk: str, start: int, size: int) -> bytes:
        """``size`` bytes from ``start`` of the on-disk file ``disk`` (under a URL through the filesystem seam)."""
        if self.url is not None:
            with SegmentFile(self.url.spec, (self.url / disk).fspath) as f:
                return bytes(f.view(start, size))
        with open(self.path / disk, "rb") as f:
            f.seek(start)
            return f.read(size)

    def touch(self, name: str, why: str | Reason) -> Op | None:
        """Create ``name`` empty unless it exists."""
        if self.is_file(name):
            return None
        self._writable(name)
        op = self._record(Touch(self.file(name), why))
        self.entries[name] = Entry(name, FILE, 0, 0, 0, disk=None, blob=Blob(b""))
        return op

    def truncate(self, name: str, size: int, why: str | Reason) -> Op | None:
        e = self._file(name)
        if size >= e.size:
            return None
        op = self._record(Truncate(self.file(name), why, e.size, size))
        if e.blob is not None:
            e.blob = Blob(e.blob.data()[:size])
            e.disk = None
        e.size = size
        return op

    def delete(self, name: str, why: str | Reason) -> Op | None:
        e = self.entries.get(name)
        if e is None:
            return None
        if e.kind != FILE:
            raise LogDirError(f"refusing to delete a {e.kind} entry", self.file(name))
        op = self._record(Delete(self.file(name), why, e.size))
        del self.entries[name]
        if e.disk == name and e.blob is None:
            self._deleted[name] = (e, op)
        return op

    def rename(self, src: str, dst: str, why: str | Reason) -> Op:
        e = self._file(src)
        self._writable(dst)
        replaces = self.is_file(dst)
        op = self._record(Rename(self.file(src), why, self.file(dst), replaces))
        del self.entries[src]
        e.name = dst
        self.entries[dst] = e
        return op

    def add(self, op: Op, *, removes: Iterable[str] = (),
            creates: Iterable[tuple[str, Blob | int | None]] = ()) -> Op:
        """Record a composite op (e.g. a segment replacement) with its effect on the listing: ``removes`` are
        names that go away, ``creates`` are ``(name, content or size)`` that appear (size None: known only once
        the op runs; such a file cannot be read by the rest of the plan)."""
        creates = list(creates)
        for n, _ in creates:
            self._writable(n)
        self._record(op)
        if self.mode != self.DIRECT:
            for n in removes:
                self.entries.pop(n, None)
            for n, content in creates:
                if isinstance(content, Blob):
                    self.entries[n] = Entry(n, FILE, content.size, 0, 0, disk=None, blob=content)
                else:
                    self.entries[n] = Entry(n, FILE, content, 0, 0, disk=None, blob=None)  # type: ignore[arg-type]
        else:
            self.rescan()
        return op

    def rescan(self) -> None:
        """Read the listing from disk again (a direct view, after a composite op ran)."""
        self.close()
        self.entries.clear()
        self._scan()

    # ------------------------------------------------------------------------------------------ guarding
    def fingerprints(self) -> dict[str, tuple | None]:
        """What the plan read, to check before applying that nothing changed since (see :func:`stale`)."""
        return fingerprints(self.path, self.read_names)

    def expected_state(self) -> dict[str, int | None]:
        """The file names and sizes the directory holds once the planned ops have run (None: a size known only
        when the op runs)."""
        return {n: e.size for n, e in self.entries.items() if e.kind == FILE}


def fingerprints(path: str | os.PathLike, names: Iterable[str]) -> dict[str, tuple | None]:
    """The fingerprint (size, mtime, inode; None: absent or unreadable) of each of ``names`` under ``path``: what a
    plan read, compared again before it is applied (:func:`stale`); none under a URL (a plan over one, a
    prediction, is never applied)."""
    if is_url(path):
        return {}
    out: dict[str, tuple | None] = {}
    for n in names:
        try:
            st = os.stat(Path(path) / n)
            out[n] = (st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:
            out[n] = None
    return out


def stale(path: str | os.PathLike, fingerprints_then: dict[str, tuple | None]) -> list[str]:
    """Names (under ``path``) whose size, mtime or inode differ from ``fingerprints_then``."""
    now = fingerprints(path, fingerprints_then)
    return sorted(n for n, fp in fingerprints_then.items() if now[n] != fp)


def _inside(target: str, root: str) -> bool:
    root = os.path.realpath(root)
    return target == root or target.startswith(root.rstrip(os.sep) + os.sep)
