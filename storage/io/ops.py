"""The file operations engines plan (:class:`Op` and its kinds: write, create, truncate, delete, rename,
fsync) and the content they write (:class:`Blob`): the records a plan is made of, which
:class:`~kafkalog.storage.io.dirview.DirView` appends while an engine runs and ``apply`` runs exactly
(:func:`run_ops`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from crc32c import crc32c

from kafkalog.storage.errors import KafkaLogError, LogDirError
from kafkalog.storage.io import fileops


# ------------------------------------------------------------------------------------------------ content
class Blob:
    """Content an op will write: bytes computed while planning (checkpoints, indexes, snapshots), or a byte
    range of a file (a split segment's ``.log``), read when the op runs."""

    __slots__ = ("_data", "src", "offset", "size", "_crc")

    def __init__(self, data: bytes | bytearray | memoryview | None = None, *, src: str | None = None,
                 offset: int = 0, size: int | None = None):
        self._data: bytes | None
        if data is not None:
            self._data = bytes(data)
            self.size = len(self._data)
        else:
            if src is None or size is None:
                raise ValueError("a Blob is bytes or (src, offset, size)")
            self._data = None
            self.size = size
        self.src, self.offset = src, offset
        self._crc: int | None = None

    def data(self) -> bytes:
        if self._data is not None:
            return self._data
        with open(self.src, "rb") as f:  # type: ignore[arg-type]
            f.seek(self.offset)
            out = f.read(self.size)
        if len(out) != self.size:
            raise LogDirError(f"expected {self.size} bytes at {self.offset}, found {len(out)}", self.src)
        return out

    def write_to(self, f, chunk: int = 8 << 20) -> None:
        """Write the content to the file object ``f`` (a byte range is streamed, never read whole)."""
        if self._data is not None:
            f.write(self._data)
            return
        left = self.size
        with open(self.src, "rb") as g:  # type: ignore[arg-type]
            g.seek(self.offset)
            while left > 0:
                data = g.read(min(chunk, left))
                if not data:
                    raise LogDirError(f"expected {self.size} bytes at {self.offset}, the file ended early", self.src)
                f.write(data)
                left -= len(data)

    @property
    def crc(self) -> int:
        if self._crc is None:
            self._crc = crc32c(self.data())
        return self._crc

    def __reduce__(self):  # travel to worker processes as bytes or as the reference
        if self._data is not None:
            return (Blob, (self._data,))
        return (_blob_ref, (self.src, self.offset, self.size))


def _blob_ref(src: str, offset: int, size: int) -> Blob:
    return Blob(src=src, offset=offset, size=size)


# ---------------------------------------------------------------------------------------------------- ops
class Reason(Protocol):
    """Why an op runs as a code and its facts: a :class:`~kafkalog.storage.files.findings.Finding` (made with
    ``note``), which ``kafkalog.facts`` words."""

    @property
    def kind(self) -> str: ...

    @property
    def facts(self) -> Mapping[str, Any]: ...


def byte_count(n: int) -> str:
    """A size in :meth:`Op.describe` when no renderer is given: ``1,234 bytes``."""
    return f"{n:,d} bytes"


@dataclass
class Op:
    """One file operation of a plan. ``why`` says what it is for: in words, or as a code and its facts (a
    :class:`Reason`, which ``kafkalog.facts`` words). Subclasses say which existing
    files they change (:meth:`originals`: kept in the backup first) and how to run (:meth:`run`)."""

    kind: ClassVar[str] = "op"
    path: str
    why: str | Reason
    routine: bool = field(default=False, kw_only=True)  # what the broker itself does at every start

    def originals(self) -> list[tuple[str, bool]]:
        """``(path, copy)`` of every existing file this op changes or removes: ``copy`` when it is changed in
        place (a hard link would change with it), a hard link otherwise."""
        return []

    def run(self) -> Any:
        raise NotImplementedError(type(self).__name__)

    def trace(self) -> tuple:
        """What the op does, as compared by the plan == apply tests."""
        return (self.kind, self.path)

    def done_trace(self, result: Any) -> tuple:
        """What the op did, from what :meth:`run` returned (an op whose details are only known when it runs,
        e.g. a cleaning round planned without measuring, says here what it really did)."""
        return self.trace()

    @property
    def bytes(self) -> int:
        """Bytes this op removes (truncated, deleted, reclaimed)."""
        return 0

    def to_dict(self) -> dict:
        """JSON: the fields; a ``why`` given as a code is ``code`` and ``facts`` (``why`` empty: the command puts
        its words there)."""
        if not isinstance(self.why, str):
            return {"op": self.kind, "path": self.path, "why": "", **({"routine": True} if self.routine else {}),
                    "code": self.why.kind, "facts": dict(self.why.facts)}
        return {"op": self.kind, "path": self.path, "why": self.why, **({"routine": True} if self.routine else {})}

    def describe(self, size: Callable[[int], str] = byte_count) -> str:
        """The op in one line; its sizes (fields of the op) printed by ``size`` (tools/ passes its human size)."""
        return f"{self.kind} {self.path}: {self.why}"


@dataclass
class WriteFile(Op):
    """Create or replace a file with ``blob`` (atomically: tmp, fsync, rename), or, with ``in_place``, write it
    over the start of the existing file as Kafka writes producer snapshots."""

    kind: ClassVar[str] = "write"
    blob: Blob = field(default=None, repr=False)  # type: ignore[assignment]
    existed: bool = False
    in_place: bool = False

    def originals(self) -> list[tuple[str, bool]]:
        return [(self.path, self.in_place)] if self.existed else []

    def run(self) -> None:
        data = self.blob.data()
        if self.in_place:
            fileops.write_in_place(self.path, data)
        else:
            fileops.atomic_write(self.path, data)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "size": self.blob.size, "replaces": self.existed}

    def describe(self, size: Callable[[int], str] = byte_count) -> str:
        verb = "rewrite" if self.existed else "create"
        return f"{verb} {self.path} ({size(self.blob.size)}): {self.why}"


@dataclass
class Touch(Op):
    """Create an empty file (a new active segment, a missing ``.timeindex``)."""

    kind: ClassVar[str] = "create"

    def run(self) -> None:
        fileops.touch(self.path)

    def describe(self, size: Callable[[int], str] = byte_count) -> str:
        return f"create {self.path} (empty): {self.why}"


@dataclass
class Truncate(Op):
    kind: ClassVar[str] = "truncate"
    old_size: int = 0
    new_size: int = 0

    def originals(self) -> list[tuple[str, bool]]:
        return [(self.path, True)]

    def run(self) -> None:
        fileops.truncate(self.path, self.new_size)
        fileops.fsync_dir(Path(self.path).parent)

    def trace(self) -> tuple:
        return (self.kind, self.path, self.new_size)

    @property
    def bytes(self) -> int:
        return self.old_size - self.new_size

    def to_dict(self) -> dict:
        return {**super().to_dict(), "oldSize": self.old_size, "newSize": self.new_size}

    def describe(self, size: Callable[[int], str] = byte_count) -> str:
        return (f"truncate {self.path} from {size(self.old_size)} to {size(self.new_size)} "
                f"({size(self.old_size - self.new_size)} removed): {self.why}")


@dataclass
class Delete(Op):
    kind: ClassVar[str] = "delete"
    size: int = 0

    def originals(self) -> list[tuple[str, bool]]:
        return [(self.path, False)]

    def run(self) -> None:
        fileops.unlink(self.path)
        fileops.fsync_dir(Path(self.path).parent)

    @property
    def bytes(self) -> int:
        return self.size

    def to_dict(self) -> dict:
        return {**super().to_dict(), "size": self.size}

    def describe(self, size: Callable[[int], str] = byte_count) -> str:
        return f"delete {self.path} ({size(self.size)}): {self.why}"


@dataclass
class Rename(Op):
    kind: ClassVar[str] = "rename"
    target: str = ""
    replaces: bool = False  # the target exists and is replaced

    def originals(self) -> list[tuple[str, bool]]:
        return [(self.path, False)] + ([(self.target, False)] if self.replaces else [])

    def run(self) -> None:
        fileops.rename(self.path, self.target)
        fileops.fsync_dir(Path(self.target).parent)

    def trace(self) -> tuple:
        return (self.kind, self.path, self.target)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "target": self.target}

    def describe(self, size: Callable[[int], str] = byte_count) -> str:
        return f"rename {self.path} -> {Path(self.target).name}: {self.why}"


@dataclass
class Sync(Op):
    """fsync files that are already in place (flush: bytes a broker wrote but did not sync)."""

    kind: ClassVar[str] = "fsync"
    files: list[str] = field(default_factory=list)

    def run(self) -> None:
        for f in self.files:
            fileops.fsync_file(f)
        fileops.fsync_dir(self.path)

    def trace(self) -> tuple:
        return (self.kind, self.path, tuple(self.files))

    def to_dict(self) -> dict:
        return {**super().to_dict(), "files": list(self.files)}

    def describe(self, size: Callable[[int], str] = byte_count) -> str:
        return f"fsync {len(self.files)} file(s) in {self.path}: {self.why}"


def run_ops(ops: Iterable[Op], before: Callable[[Op], None] | None = None) -> None:
    """Run ops in order (``before(op)`` first, e.g. to keep originals). OS errors name the op."""
    for op in ops:
        if before is not None:
            before(op)
        try:
            op.run()
        except KafkaLogError:
            raise
        except OSError as e:
            raise KafkaLogError(f"{op.kind} failed: {e.strerror or e}", e.filename or op.path) from None
