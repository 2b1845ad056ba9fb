"""Every change kafkalog makes to a file goes through this module: the one I/O seam for writes.

Kafka's own durability protocol lives here (``CheckpointFile.write``, ``Utils.atomicMoveWithFallback``): a
replaced file is written to ``<path>.tmp``, flushed, fsynced, renamed over ``<path>``, and the parent
directory is fsynced so the rename itself is durable. Truncations, renames, deletions, new empty files and
directories are single steps, each followed by the fsync that makes it durable.

Because every mutation passes through :func:`_step`, observers can watch them (:func:`observe`): the plan/apply
tests record what an apply really did, and the fault-injection tests raise at the N-th step (a crash, ENOSPC,
EIO) to prove that every intermediate state is safe.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

TMP_SUFFIX = ".tmp"

#: A step of a mutation: (kind, path, target). Kinds: write (a new file's bytes, at its final or temporary
#: name), rename, truncate, unlink, mkdir, rmdir, fsync, fsync-dir, link, utime.
Step = tuple[str, str, str | None]
Observer = Callable[[str, str, "str | None"], None]
#: process-wide (the engines run partitions in worker threads): observers see every thread's steps
_observers: tuple[Observer, ...] = ()
_observers_lock = threading.Lock()


def _step(kind: str, path: str | os.PathLike, target: str | os.PathLike | None = None) -> None:
    """Announce a step before it happens; an observer may raise to make it fail (fault injection)."""
    for obs in _observers:
        obs(kind, os.fspath(path), None if target is None else os.fspath(target))


def announce(kind: str, path: str | os.PathLike, target: str | None = None) -> None:
    """Tell observers what is about to happen (``begin-op``: an operation of a plan starts). Not a mutation:
    fault injectors ignore it."""
    _step(kind, path, target)


@contextlib.contextmanager
def observe(observer: Observer) -> Iterator[None]:
    """Call ``observer(kind, path, target)`` before every file mutation of this process, in any thread, while the
    context lasts (observers serialise themselves if they keep state)."""
    global _observers
    with _observers_lock:
        _observers = _observers + (observer,)
    try:
        yield
    finally:
        with _observers_lock:
            rest = list(_observers)
            rest.remove(observer)
            _observers = tuple(rest)


@dataclass
class StepRecorder:
    """Collects the steps of a context (``with StepRecorder() as rec: ...; rec.steps``)."""

    steps: list[Step] | None = None

    def __enter__(self) -> StepRecorder:
        self.steps = []
        self._cm = observe(lambda k, p, t: self.steps.append((k, p, t)))  # type: ignore[union-attr]
        self._cm.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._cm.__exit__(*exc)


# ------------------------------------------------------------------------------------------------ helpers
def tmp_path(path: str | os.PathLike) -> Path:
    """The temporary sibling Kafka uses for ``path`` (``<absolute path>.tmp``)."""
    p = Path(path)
    return p.with_name(p.name + TMP_SUFFIX)


def fsync_dir(path: str | os.PathLike) -> None:
    """fsync a directory (``Utils.flushDir``)."""
    _step("fsync-dir", path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike) -> None:
    """fsync an existing file (a missing one is ignored: there is nothing to make durable)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        _step("fsync", path)
        os.fsync(fd)
    finally:
        os.close(fd)


def _parent(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


@contextlib.contextmanager
def _naming(path: str | os.PathLike) -> Iterator[None]:
    """An OS error without a file name (a write or fsync hitting ENOSPC or EIO) gets ``path``: every error of
    the write seam names the file it was writing."""
    try:
        yield
    except OSError as e:
        if e.filename is None:
            e.filename = os.fspath(path)
        raise


def _named(fn):
    """:func:`_naming` around a function whose first argument is the path it writes."""
    @functools.wraps(fn)
    def wrapper(path, *args, **kwargs):
        with _naming(path):
            return fn(path, *args, **kwargs)
    return wrapper


# ----------------------------------------------------------------------------------------------- writing
@_named
def atomic_write(path: str | os.PathLike, data: bytes | bytearray | memoryview, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` crash-safely: tmp file, fsync, rename, fsync of the parent directory.

    On failure the temporary file is removed and ``path`` is left untouched."""
    target = Path(path)
    tmp = tmp_path(target)
    try:
        _step("write", tmp)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        _step("rename", tmp, target)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if fsync:
        fsync_dir(_parent(target))


@_named
def write_in_place(path: str | os.PathLike, data: bytes | bytearray | memoryview, *, fsync: bool = True) -> None:
    """Write ``data`` at the start of ``path`` without truncating it (Kafka writes producer snapshots with
    ``CREATE, WRITE``: an existing longer file keeps its tail), then fsync it."""
    p = Path(path)
    existed = p.exists()
    _step("write", p)
    with open(p, "r+b" if existed else "wb") as f:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    if fsync and not existed:
        fsync_dir(_parent(p))


class NewFile:
    """A new file written in chunks (a ``.cleaned`` segment): ``with NewFile(p) as f: f.write(...)``; on a
    clean exit it is flushed and fsynced, on an error it is removed."""

    def __init__(self, path: str | os.PathLike, *, fsync: bool = True, buffering: int = 1 << 20):
        self.path = Path(path)
        self.fsync = fsync
        self.size = 0
        _step("write", self.path)
        self._f = open(self.path, "wb", buffering=buffering)

    def write(self, data) -> None:
        with _naming(self.path):
            self._f.write(data)
        self.size += len(data)

    def close(self) -> None:
        if self._f.closed:
            return
        with _naming(self.path):
            self._f.flush()
            if self.fsync:
                os.fsync(self._f.fileno())
        self._f.close()

    def abort(self) -> None:
        if not self._f.closed:
            self._f.close()
        with contextlib.suppress(OSError):
            self.path.unlink()

    def __enter__(self) -> NewFile:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


@_named
def touch(path: str | os.PathLike, *, fsync: bool = True) -> None:
    """Create an empty file (kept as is if it exists) and make it durable."""
    p = Path(path)
    _step("write", p)
    with open(p, "ab") as f:
        if fsync:
            os.fsync(f.fileno())
    if fsync:
        fsync_dir(_parent(p))


@_named
def truncate(path: str | os.PathLike, size: int, *, fsync: bool = True) -> None:
    """Cut ``path`` to ``size`` bytes in place (``FileRecords.truncateTo``) and fsync it."""
    _step("truncate", path)
    with open(path, "r+b") as f:
        f.truncate(size)
        if fsync:
            os.fsync(f.fileno())


def rename(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Atomic rename (the caller fsyncs the directory once after a series of renames)."""
    _step("rename", src, dst)
    os.replace(src, dst)


def unlink(path: str | os.PathLike, *, missing_ok: bool = True) -> None:
    _step("unlink", path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


def mkdir(path: str | os.PathLike, *, parents: bool = False, exist_ok: bool = False) -> None:
    _step("mkdir", path)
    Path(path).mkdir(parents=parents, exist_ok=exist_ok)


def rmtree(path: str | os.PathLike) -> None:
    _step("rmdir", path)
    shutil.rmtree(path, ignore_errors=True)


def set_mtime(path: str | os.PathLike, mtime_ns: int) -> None:
    _step("utime", path)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def link_or_copy(src: str | os.PathLike, dst: str | os.PathLike, *, copy: bool = False) -> None:
    """A backup of ``src`` at ``dst``: a hard link (instant, no space: for files that are replaced or deleted,
    never changed in place) or, with ``copy`` or across file systems, a durable copy."""
    _step("link", src, dst)
    if not copy:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    tmp = tmp_path(Path(dst))
    shutil.copyfile(src, tmp)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, dst)
    shutil.copystat(src, dst)


class AppendFile:
    """A file appended in place (the active segment's ``.log`` of a writer, as the broker appends it): every
    :meth:`write` is a step. A crash leaves a torn tail that recovery cuts."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        _step("write", self.path)
        self._f = open(self.path, "ab")

    def write(self, data) -> None:
        _step("append", self.path)
        with _naming(self.path):
            self._f.write(data)

    def flush(self, *, fsync: bool = True) -> None:
        with _naming(self.path):
            self._f.flush()
            if fsync:
                _step("fsync", self.path)
                os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    @property
    def closed(self) -> bool:
        return self._f.closed
