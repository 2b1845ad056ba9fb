"""``leader-epoch-checkpoint`` (``LeaderEpochCheckpointFile``, docs/formats.md#leader-epoch-checkpoint).

Same framing as the offset checkpoints (version 0), entries ``<epoch> <startOffset>`` sorted by epoch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kafkalog.storage.files.checkpoints import TextCheckpoint, entry_fields, read_bytes_bounded
from kafkalog.storage.files.findings import Defect, defect
from kafkalog.storage.files.java import parse_java_int
from kafkalog.storage.io.fileops import atomic_write

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
MAX_BYTES = 1 << 28


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int


def _parse_entry(line: str) -> EpochEntry:
    epoch, start_offset = entry_fields(line, 2)
    return EpochEntry(parse_java_int(epoch, 32), parse_java_int(start_offset, 64))


def _format_entry(e: EpochEntry) -> str:
    return f"{e.epoch} {e.start_offset}"


@dataclass
class LeaderEpochCheckpoint(TextCheckpoint[EpochEntry]):
    parse_entry = staticmethod(_parse_entry)
    format_entry = staticmethod(_format_entry)

    def epoch_for_offset(self, offset: int) -> int | None:
        """Leader epoch whose range holds ``offset`` (largest start offset <= offset)."""
        found = None
        for e in self.entries:
            if e.start_offset <= offset:
                found = e.epoch
            else:
                break
        return found

    def validate(self) -> list[Defect]:
        """Kafka throws for negative values at load and silently drops non-monotonic entries."""
        problems = []
        prev: EpochEntry | None = None
        for e in self.entries:
            if e.epoch < 0 or e.start_offset < 0:
                problems.append(defect("epochCheckpoint.negative", epoch=e.epoch, startOffset=e.start_offset))
            if prev is not None and (e.epoch <= prev.epoch or e.start_offset <= prev.start_offset):
                problems.append(defect("epochCheckpoint.notIncreasing", epoch=e.epoch, startOffset=e.start_offset,
                                       previousEpoch=prev.epoch, previousStartOffset=prev.start_offset))
            prev = e
        if not self.canonical:
            problems.append(defect("epochCheckpoint.notCanonical"))
        return problems


def read_leader_epoch_checkpoint(path: str | os.PathLike) -> LeaderEpochCheckpoint:
    return LeaderEpochCheckpoint.from_bytes(read_bytes_bounded(path, MAX_BYTES), path)


def write_leader_epoch_checkpoint(
    path: str | os.PathLike, checkpoint: LeaderEpochCheckpoint | list[EpochEntry], *, fsync: bool = True
) -> None:
    if not isinstance(checkpoint, LeaderEpochCheckpoint):
        checkpoint = LeaderEpochCheckpoint(list(checkpoint))
    atomic_write(path, checkpoint.to_bytes(), fsync=fsync)
