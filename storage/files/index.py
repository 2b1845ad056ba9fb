"""What ``.index`` and ``.timeindex`` share (``AbstractIndex``): fixed-size big-endian entries, no header,
entry count derived from the file length, preallocation with zeros, lookups by binary search."""

from __future__ import annotations

import mmap
import os
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, Self

from kafkalog.storage.errors import CorruptIndexError, KafkaLogError
from kafkalog.storage.files.findings import Defect, defect
from kafkalog.storage.files.names import offset_from_file_name
from kafkalog.storage.io.closing import Closing
from kafkalog.storage.io.fileops import atomic_write
from kafkalog.storage.io.local import map_regular

INT32_MAX = (1 << 31) - 1
ZERO_CHUNK = bytes(1 << 20)


def map_file(path: str | os.PathLike, error_cls: type[KafkaLogError] = CorruptIndexError) -> tuple[Any, int]:
    """Read-only mmap of a whole regular file, or ``b""`` for an empty one (mmap of 0 bytes fails)."""
    return map_regular(path, error_cls)


def all_zero(buf: memoryview) -> bool:
    # bytes == bytes is a memcmp; memoryview != bytes compared element by element (a 2 GiB sparse index: minutes)
    for i in range(0, len(buf), len(ZERO_CHUNK)):
        chunk = bytes(buf[i : i + len(ZERO_CHUNK)])
        if chunk != ZERO_CHUNK[: len(chunk)]:
            return False
    return True


def base_offset_for(path: str | os.PathLike, base_offset: int | None) -> int:
    if base_offset is not None:
        return base_offset
    name = os.path.basename(os.fspath(path))
    try:
        return offset_from_file_name(name)
    except ValueError:
        raise CorruptIndexError(f"cannot derive a base offset from the file name {name!r}", str(path)) from None


#: the relative offset field of an index entry, as a defect names it
RELATIVE_OFFSET = "relative offset"


class MappedIndex(Closing):
    """What the three index files share: their bytes, read whole through a read-only mmap (:meth:`open`) or given
    (:meth:`from_bytes`), the base offset their entries are relative to, and :meth:`close` (or ``with``)."""

    def __init__(self, buf: Any, base_offset: int, path: str | None = None, *, _closer: Any = None):
        self._buf = memoryview(buf)
        self._closer = _closer
        self.base_offset = base_offset
        self.path = path
        self.length = len(self._buf)

    @classmethod
    def open(cls, path: str | os.PathLike, base_offset: int | None = None) -> Self:
        """Memory-map an existing index file read-only (base offset from the file name unless given)."""
        base = base_offset_for(path, base_offset)
        buf, _ = map_file(path)
        return cls(buf, base, str(path), _closer=buf if isinstance(buf, mmap.mmap) else None)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, base_offset: int, path: str | None = None) -> Self:
        return cls(data, base_offset, path)

    def close(self) -> None:
        self._buf.release()
        if self._closer is not None:
            self._closer.close()
            self._closer = None


class FixedIndex(MappedIndex, ABC):
    """Base of :class:`OffsetIndex` and :class:`TimeIndex`. Subclasses set ``ENTRY``, ``KEY_FIELD``,
    ``REL_FIELD`` and implement ``_make``.

    ``entries`` is Kafka's count (``length // entry_size``: every slot, zero padding included);
    ``valid_entries`` stops at the first slot ``i > 0`` whose relative offset is 0, the rule DumpLogSegments
    uses to recognise the zero tail of a preallocated (untrimmed) file, and also treats an all-zero slot 0 as
    padding: a preallocated index with no entries yet. (No real entry is all zeros: an offset-index entry
    never has position 0 because the first append/batch of a segment is never indexed, and a time-index
    entry would need timestamp 0.) DumpLogSegments reports such a slot as a mismatching entry.
    """

    ENTRY: struct.Struct
    KEY_FIELD: int  # index in the unpacked tuple of the search key
    REL_FIELD: int  # index of the relative offset
    FIELDS: tuple[str, str]  # what the two fields are, in messages
    KIND = "index"
    error_cls = CorruptIndexError

    def __init__(self, buf: Any, base_offset: int, path: str | None = None, *, _closer: Any = None):
        super().__init__(buf, base_offset, path, _closer=_closer)
        self._raw = buf
        self._valid: int | None = None

    # ---- geometry ----------------------------------------------------------------------------------------
    @property
    def entry_size(self) -> int:
        return self.ENTRY.size

    @property
    def entries(self) -> int:
        """Kafka's entry count: ``length // entry_size``."""
        return self.length // self.ENTRY.size

    @property
    def valid_entries(self) -> int:
        if self._valid is None:
            n = 0
            rel = self.REL_FIELD
            size = self.ENTRY.size
            view = self._buf[: self.entries * size]
            for i, t in enumerate(self.ENTRY.iter_unpack(view)):
                if t[rel] == 0 and (i > 0 or not any(t)):
                    break
                n += 1
            self._valid = n
        return self._valid

    @property
    def padding_entries(self) -> int:
        """Slots after the valid entries (zero padding of a preallocated file, or garbage)."""
        return self.entries - self.valid_entries

    @property
    def is_trimmed(self) -> bool:
        return self.length == self.valid_entries * self.ENTRY.size

    def padding_is_zero(self) -> bool:
        """True when every byte after the valid entries is zero (a clean preallocated tail)."""
        return all_zero(self._buf[self.valid_entries * self.ENTRY.size :])

    def __len__(self) -> int:
        return self.valid_entries

    # ---- entries -----------------------------------------------------------------------------------------
    def _tuple(self, n: int) -> tuple:
        return self.ENTRY.unpack_from(self._buf, n * self.ENTRY.size)

    def entry(self, n: int):
        """The n-th slot (any slot below ``entries``, padding included, as ``AbstractIndex.entry``)."""
        if not 0 <= n < self.entries:
            raise IndexError(f"slot {n} out of range (index has {self.entries} slots)")
        return self._make(self._tuple(n))

    def __iter__(self) -> Iterator:
        """The valid entries."""
        size = self.ENTRY.size
        for t in self.ENTRY.iter_unpack(self._buf[: self.valid_entries * size]):
            yield self._make(t)

    @abstractmethod
    def _make(self, t: tuple) -> Any:
        """The entry object for one unpacked slot (relative offset made absolute)."""

    def _search(self, key: int, count: int) -> int:
        """Largest slot in [0, count) whose key <= ``key``, or -1."""
        lo, hi = 0, count - 1
        if count == 0 or self._tuple(0)[self.KEY_FIELD] > key:
            return -1
        f = self.KEY_FIELD
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if self._tuple(mid)[f] > key:
                hi = mid - 1
            else:
                lo = mid
        return lo

    # ---- serialization -----------------------------------------------------------------------------------
    def entries_bytes(self) -> bytes:
        return bytes(self._buf[: self.valid_entries * self.ENTRY.size])

    def to_bytes(self, *, trim: bool = False, size: int | None = None) -> bytes:
        """The valid entries, zero-padded to the original file length (or ``size``), or trimmed.

        For a well-formed file (``padding_is_zero``) ``to_bytes()`` equals the bytes read.
        """
        body = self.entries_bytes()
        if trim:
            return body
        target = self.length if size is None else size - size % self.ENTRY.size
        if target < len(body):
            raise ValueError(f"size {target} is smaller than the {len(body)} bytes of entries")
        return body + bytes(target - len(body))

    def _err(self, reason: str, position: int | None = None) -> CorruptIndexError:
        return self.error_cls(reason, self.path, position)

    def _check_length(self, what: str) -> None:
        """The end of ``sanityCheck``: the length a multiple of the entry size."""
        size = self.ENTRY.size
        if self.length % size != 0:
            raise self._err(f"{what} is corrupt, found {self.length} bytes which is not a multiple of {size}",
                            self.length - self.length % size)

    def problems(self) -> list[Defect]:
        """Stricter structural checks than Kafka's, each at its byte position."""
        size = self.ENTRY.size
        out: list[Defect] = []
        if self.length % size:
            out.append(defect("index.length", self.length - self.length % size, length=self.length, entrySize=size))
        prev: tuple | None = None
        for i, t in enumerate(self.ENTRY.iter_unpack(self._buf[: self.valid_entries * size])):
            out += self._entry_problems(i, t, prev)
            prev = t
        if not self.padding_is_zero():
            out.append(defect("index.nonZeroPadding", self.valid_entries * size))
        return out

    def _entry_problems(self, i: int, t: tuple, prev: tuple | None) -> list[Defect]:
        """What is wrong with valid entry ``i`` (unpacked), given the one before it: a negative field, a key that
        does not increase, the other field decreasing."""
        rel, key, at = self.REL_FIELD, self.KEY_FIELD, i * self.ENTRY.size
        out = [defect("index.negative", at, entry=i, field=RELATIVE_OFFSET if f == rel else self.FIELDS[f],
                      value=t[f]) for f in (rel, 1 - rel) if t[f] < 0]
        if prev is not None and t[key] <= prev[key]:
            out.append(defect("index.notIncreasing", at, entry=i, field=self.FIELDS[key], value=self._value(key, t),
                              previous=self._value(key, prev)))
        if prev is not None and t[1 - key] < prev[1 - key]:
            out.append(defect("index.decreases", at, entry=i, field=self.FIELDS[1 - key],
                              value=self._value(1 - key, t), previous=self._value(1 - key, prev)))
        return out

    def _value(self, f: int, t: tuple) -> int:
        """Field ``f`` of an entry as messages show it (a relative offset made absolute)."""
        return self.base_offset + t[f] if f == self.REL_FIELD else t[f]

    def write(self, path: str | os.PathLike, *, trim: bool = True, size: int | None = None, fsync: bool = True) -> None:
        atomic_write(path, self.to_bytes(trim=trim and size is None, size=size), fsync=fsync)


def padded(data: bytes, size: int | None, entry_size: int) -> bytes:
    """``data`` (entries) zero-padded to ``size`` rounded down to whole entries, as a preallocated index file."""
    return data if size is None else data + bytes(max(0, size - size % entry_size - len(data)))
