"""The data dir ``.lock`` (``server-common/.../FileLock.java``, ``LogManager.lockLogDirs``).

A running broker holds ``FileChannel.tryLock()`` on ``<dir>/.lock``: on Linux a POSIX record lock
(``fcntl(F_SETLK)``, whole file). ``flock(2)`` locks are a different, non-conflicting kind that other tools
use; kafkalog checks and takes both:

* :func:`lock_status` asks with ``F_OFD_GETLK``/``F_GETLK`` (a query: it never takes the lock, so it cannot
  disturb anyone) and, on Linux, names the holders from ``/proc/locks``.
* :class:`DirLock` takes an *open file description* lock (``F_OFD_SETLK``), which conflicts with the broker's
  POSIX lock both ways, and — unlike ``lockf`` — is not silently dropped when some other descriptor of the
  same file is closed in this process. Where OFD locks are unavailable it falls back to ``fcntl.lockf``. It
  then takes an exclusive ``flock`` too, so a holder using ``flock()`` is refused as well.

The lock file is opened non-blocking and must be a regular file: a FIFO ``.lock`` is refused, never waited on.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path

from kafkalog.storage.errors import LockedError, LogDirError
from kafkalog.storage.io.local import file_kind

LOCK_FILE_NAME = ".lock"

# struct flock on Linux (x86_64, aarch64): short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
_FLOCK = struct.Struct("hhqqi4x")
_F_OFD_GETLK = getattr(fcntl, "F_OFD_GETLK", None)
_F_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)


@dataclass(frozen=True)
class LockHolder:
    pid: int | None  # None for an OFD lock (the kernel reports no pid) or when unknown
    kind: str  # 'POSIX', 'OFDLCK', 'FLOCK'
    mode: str  # 'WRITE' / 'READ'
    command: str | None = None  # /proc/<pid>/comm when readable


@dataclass
class LockStatus:
    path: str
    exists: bool
    held: bool  # a conflicting fcntl or flock lock is held (by a live process: dead holders' locks are dropped)
    holders: list[LockHolder] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.held


def describe_holders(holders: list[LockHolder], unknown: str = "unknown") -> str:
    """The holders of a lock for a message: ``pid 123 (java)``, or the lock kind where the kernel gives no pid."""
    return ", ".join(f"pid {h.pid} ({h.command})" if h.pid else h.kind for h in holders) or unknown


def _lock_path(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p / LOCK_FILE_NAME if p.is_dir() else p


def _open_lock_file(path: Path, flags: int) -> int:
    """Open ``.lock`` without blocking (a FIFO would block a plain open) and refuse anything but a regular file."""
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o644)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise LogDirError(f"the lock file is not a regular file ({file_kind(st.st_mode)}): refusing to use this "
                          "data dir", str(path))
    return fd


def _getlk(fd: int) -> tuple[bool, int | None]:
    """(conflicting write lock present?, pid of a POSIX holder or None)."""
    req = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    for cmd in (c for c in (_F_OFD_GETLK, fcntl.F_GETLK) if c is not None):
        try:
            res = fcntl.fcntl(fd, cmd, req)
        except OSError:
            continue
        l_type, _, _, _, pid = _FLOCK.unpack(res)
        if l_type != fcntl.F_UNLCK:
            return True, (pid if pid > 0 else None)
    return False, None


def proc_lock_holders(path: str | os.PathLike) -> list[LockHolder]:
    """Holders of any lock on ``path`` according to ``/proc/locks`` (Linux; [] elsewhere)."""
    try:
        st = os.stat(path)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    out = []
    for line in lines:
        parts = line.split()
        # "1: POSIX  ADVISORY  WRITE 1234 08:01:123456 0 EOF"  (blocked waiters have "->" before the kind)
        if len(parts) >= 6 and parts[1] == "->":
            parts = [parts[0]] + parts[2:]
        if len(parts) < 6 or parts[5] != want:
            continue
        try:
            pid = int(parts[4])
        except ValueError:
            pid = -1
        pid_opt = pid if pid > 0 else None
        comm = None
        if pid_opt is not None:
            try:
                comm = Path(f"/proc/{pid_opt}/comm").read_text().strip()
            except OSError:
                comm = None
        out.append(LockHolder(pid_opt, parts[1], parts[3], comm))
    return out


def lock_status(path: str | os.PathLike) -> LockStatus:
    """Is the ``.lock`` of a data dir (``path`` = the dir or the lock file) held by a live process?

    Never creates the file and never takes the lock.
    """
    lp = _lock_path(path)
    try:
        fd = _open_lock_file(lp, os.O_RDONLY)
    except FileNotFoundError:
        return LockStatus(str(lp), False, False)
    except OSError as e:
        raise LogDirError(f"cannot open lock file: {e.strerror}", str(lp)) from None
    try:
        held, pid = _getlk(fd)
    finally:
        os.close(fd)
    listed = proc_lock_holders(lp)
    holders = [h for h in listed if h.kind in ("POSIX", "OFDLCK")] if held else []
    if held and not holders:
        holders = [LockHolder(pid, "POSIX" if pid else "OFDLCK", "WRITE")]
    flocks = [h for h in listed if h.kind == "FLOCK"]  # flock() holders: invisible to F_GETLK
    return LockStatus(str(lp), True, held or bool(flocks), holders + flocks)


def is_locked(path: str | os.PathLike) -> bool:
    return lock_status(path).held


class DirLock:
    """Exclusive lock on a data dir's ``.lock`` for writers (creates the file like ``FileLock``).

    ``with DirLock(data_dir): ...`` raises :class:`LockedError` when a broker (or another kafkalog writer)
    holds it.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = _lock_path(path)
        self._fd: int | None = None

    @property
    def locked(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            raise LogDirError("lock already acquired by this DirLock", str(self.path))
        try:
            fd = _open_lock_file(self.path, os.O_RDWR | os.O_CREAT)
        except OSError as e:
            raise LogDirError(f"cannot open lock file: {e.strerror}", str(self.path)) from None
        try:
            if _F_OFD_SETLK is not None:
                fcntl.fcntl(fd, _F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
            else:  # pragma: no cover - non-Linux
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # and refuse a holder that uses flock()
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EACCES, errno.EAGAIN):
                holders = proc_lock_holders(self.path)
                err = LockedError(f"Failed to acquire lock on file .lock: held by {describe_holders(holders)}",
                                  str(self.path))
                err.holders = holders  # type: ignore[attr-defined]
                raise err from None
            raise LogDirError(f"cannot lock: {e.strerror}", str(self.path)) from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor of an OFD lock releases it

    def __enter__(self) -> DirLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # interpreter shutdown: the descriptor is closed by the OS anyway
            pass
