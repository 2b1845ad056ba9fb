"""Producer-state snapshot ``<offset>.snapshot`` (``ProducerStateManager.readSnapshot/writeSnapshot``,
``ProducerSnapshot.json`` version 1, docs/formats.md#producer-snapshots).

Layout: version int16 (=1), crc uint32 (CRC32C of bytes [6, end)), count int32, then 46-byte entries.
Entry order is kept as read (Java ``HashMap`` order, meaningless but byte-relevant).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from kafkalog.storage.codec.crc import crc32c
from kafkalog.storage.errors import CorruptCheckpointError
from kafkalog.storage.files.checkpoints import read_bytes_bounded
from kafkalog.storage.files.findings import Defect, defect
from kafkalog.storage.io.fileops import atomic_write

SNAPSHOT_SUFFIX = ".snapshot"
VERSION = 1
HEADER = struct.Struct(">hIi")  # version, crc, count
CRC_START = 6  # PRODUCER_ENTRIES_OFFSET: the CRC covers [6, end)
ENTRY = struct.Struct(">qhiqiqiq")
ENTRY_SIZE = ENTRY.size  # 46
MAX_BYTES = 1 << 28


@dataclass(frozen=True)
class ProducerSnapshotEntry:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int

    @property
    def has_batch_metadata(self) -> bool:
        """``lastOffset >= 0``: the producer's last data batch is known."""
        return self.last_offset >= 0

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta

    @property
    def ongoing_txn(self) -> bool:
        return self.current_txn_first_offset >= 0


@dataclass
class ProducerSnapshot:
    entries: list[ProducerSnapshotEntry] = field(default_factory=list)
    version: int = VERSION
    crc: int | None = None  # as stored (None when built in memory)
    trailing: bytes = b""  # bytes after the last entry (Kafka ignores them but they are covered by the CRC)
    path: str | None = None

    @classmethod
    def from_bytes(cls, data, path: str | os.PathLike | None = None, *, check_crc: bool = True) -> ProducerSnapshot:
        """Parse as ``readSnapshot``: any failure is a :class:`CorruptCheckpointError` with the byte position
        (Kafka's ``CorruptSnapshotException``)."""
        p = None if path is None else str(path)
        buf = memoryview(data)
        n = len(buf)
        if n < 2:
            raise CorruptCheckpointError("snapshot failed schema validation: truncated version", p, 0)
        (version,) = struct.unpack_from(">h", buf, 0)
        if version != VERSION:
            raise CorruptCheckpointError(f"snapshot contained an unknown file version {version}", p, 0)
        if n < HEADER.size:
            raise CorruptCheckpointError("snapshot failed schema validation: truncated header", p, 2)
        _, crc, count = HEADER.unpack_from(buf, 0)
        if count < 0:
            raise CorruptCheckpointError(f"snapshot failed schema validation: entry count {count}", p, 6)
        remaining = n - HEADER.size
        if count > remaining // ENTRY_SIZE:
            raise CorruptCheckpointError(
                f"snapshot failed schema validation: {count} entries of {ENTRY_SIZE} bytes but only "
                f"{remaining} bytes remain",
                p,
                6,
            )
        if check_crc:
            computed = crc32c(buf[CRC_START:])
            if computed != crc:
                raise CorruptCheckpointError(
                    f"snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}",
                    p,
                    2,
                )
        end = HEADER.size + count * ENTRY_SIZE
        entries = [ProducerSnapshotEntry(*t) for t in ENTRY.iter_unpack(buf[HEADER.size : end])]
        return cls(entries, version, crc, bytes(buf[end:]), p)

    def body(self) -> bytes:
        out = bytearray(struct.pack(">i", len(self.entries)))
        for e in self.entries:
            out += ENTRY.pack(
                e.producer_id,
                e.producer_epoch,
                e.last_sequence,
                e.last_offset,
                e.offset_delta,
                e.timestamp,
                e.coordinator_epoch,
                e.current_txn_first_offset,
            )
        out += self.trailing
        return bytes(out)

    def computed_crc(self) -> int:
        return crc32c(self.body())

    def to_bytes(self) -> bytes:
        """Bytes as ``writeSnapshot`` produces them (the CRC is recomputed)."""
        body = self.body()
        return struct.pack(">hI", self.version, crc32c(body)) + body

    def __iter__(self) -> Iterator[ProducerSnapshotEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def validate(self) -> list[Defect]:
        problems = []
        if self.trailing:
            problems.append(defect("snapshot.trailingBytes", bytes=len(self.trailing)))
        seen: set[int] = set()
        for e in self.entries:
            if e.producer_id in seen:
                problems.append(defect("snapshot.producerTwice", producerId=e.producer_id))
            seen.add(e.producer_id)
            if e.producer_id < 0:
                problems.append(defect("snapshot.negativeProducerId", producerId=e.producer_id))
        return problems


def read_producer_snapshot(path: str | os.PathLike, *, check_crc: bool = True) -> ProducerSnapshot:
    return ProducerSnapshot.from_bytes(read_bytes_bounded(path, MAX_BYTES), path, check_crc=check_crc)


def write_producer_snapshot(path: str | os.PathLike, snapshot: ProducerSnapshot, *, fsync: bool = True) -> None:
    """Written atomically (Kafka writes in place without a tmp file; a rename is strictly safer)."""
    atomic_write(path, snapshot.to_bytes(), fsync=fsync)
