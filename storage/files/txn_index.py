"""Aborted-transaction index ``<base>.txnindex`` (``TransactionIndex``, ``AbortedTxn``, docs/formats.md#transaction-index).

34-byte entries: version int16 (0), producerId int64, firstOffset int64, lastOffset int64 (the ABORT
marker's offset, in this segment), lastStableOffset int64. No preallocation; a partial trailing entry is
ignored by Kafka (kept here as ``trailing`` so the bytes round-trip).
Rebuilding needs producer state from earlier segments: :func:`.rebuild.rebuild_txn_index`.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from kafkalog.storage.errors import CorruptIndexError
from kafkalog.storage.files.findings import Defect, defect
from kafkalog.storage.files.index import MappedIndex
from kafkalog.storage.io.fileops import atomic_write

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
CURRENT_VERSION = 0
_VERSION_BYTE = struct.Struct(">b")


@dataclass(frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION


class TransactionIndex(MappedIndex):
    @classmethod
    def from_entries(cls, base_offset: int, entries: list[AbortedTxn]) -> TransactionIndex:
        prev = None
        out = bytearray()
        for e in entries:
            if prev is not None and e.last_offset <= prev:
                raise CorruptIndexError(
                    f"the last offset of appended transactions must increase: {e.last_offset} after {prev}"
                )
            prev = e.last_offset
            out += ENTRY.pack(e.version, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
        return cls(bytes(out), base_offset)

    @property
    def entries(self) -> int:
        return self.length // ENTRY_SIZE

    def __len__(self) -> int:
        return self.entries

    @property
    def trailing(self) -> bytes:
        return bytes(self._buf[self.entries * ENTRY_SIZE :])

    def __iter__(self) -> Iterator[AbortedTxn]:
        """All entries; like Kafka, an entry whose version byte (the first byte) is > 0 is an error."""
        for i, (v, pid, first, last, lso) in enumerate(ENTRY.iter_unpack(self._buf[: self.entries * ENTRY_SIZE])):
            (version_byte,) = _VERSION_BYTE.unpack_from(self._buf, i * ENTRY_SIZE)  # AbortedTxn.version()
            if version_byte > CURRENT_VERSION:
                raise CorruptIndexError(
                    f"unexpected aborted transaction version {version_byte}, current version is {CURRENT_VERSION}",
                    self.path,
                    i * ENTRY_SIZE,
                )
            yield AbortedTxn(pid, first, last, lso, v)

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return list(self)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """``TransactionIndex.collectAbortedTxns``: (entries overlapping the range, search complete?)."""
        out = []
        for t in self:
            if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset:
                out.append(t)
            if t.last_stable_offset >= upper_bound_offset:
                return out, True
        return out, False

    def sanity_check(self) -> None:
        """``TransactionIndex.sanityCheck`` (run by Kafka at every load): lastOffset >= segment base."""
        for i, t in enumerate(self):
            if t.last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"last offset of aborted transaction {t} is less than start offset {self.base_offset}",
                    self.path,
                    i * ENTRY_SIZE,
                )

    def problems(self) -> list[Defect]:
        """Stricter checks than Kafka's of every entry (Kafka reads only the first byte of the version), each at its
        byte position."""
        out: list[Defect] = []
        prev = None
        try:
            for i, t in enumerate(self):
                pos = i * ENTRY_SIZE
                if t.version != CURRENT_VERSION:
                    out.append(defect("txnIndex.version", pos, entry=i, version=t.version))
                if t.last_offset < self.base_offset:
                    out.append(defect("txnIndex.belowBase", pos, entry=i, lastOffset=t.last_offset,
                                      baseOffset=self.base_offset))
                if t.first_offset > t.last_offset:
                    out.append(defect("txnIndex.firstAfterLast", pos, entry=i, firstOffset=t.first_offset,
                                      lastOffset=t.last_offset))
                if t.last_stable_offset > t.last_offset + 1 or t.last_stable_offset < 0:
                    out.append(defect("txnIndex.lastStableOutOfRange", pos, entry=i,
                                      lastStableOffset=t.last_stable_offset))
                if prev is not None and t.last_offset <= prev:
                    out.append(defect("txnIndex.notIncreasing", pos, entry=i, lastOffset=t.last_offset,
                                      previousLastOffset=prev))
                prev = t.last_offset
        except CorruptIndexError as e:
            out.append(defect("txnIndex.unreadable", e.position or 0, error=e.reason))
        if self.length % ENTRY_SIZE:
            out.append(defect("txnIndex.partialEntry", self.entries * ENTRY_SIZE, bytes=self.length % ENTRY_SIZE))
        return out

    def to_bytes(self) -> bytes:
        """The entries re-encoded, plus any partial trailing entry: equals the bytes read."""
        return self.entries_bytes() + self.trailing

    def entries_bytes(self) -> bytes:
        return b"".join(
            ENTRY.pack(t.version, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) for t in self
        )

    def write(self, path: str | os.PathLike, *, fsync: bool = True) -> None:
        atomic_write(path, self.entries_bytes(), fsync=fsync)


def read_txn_index(path: str | os.PathLike, base_offset: int | None = None) -> TransactionIndex:
    return TransactionIndex.open(path, base_offset)
