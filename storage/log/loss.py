"""What a partition has lost, as facts: where a segment's batches end short of its file (the one rule every
reader follows, :func:`segment_end_error`), the segments no reader can read whole (:class:`SegmentHole`), and
the offsets a partition's checkpoints, snapshots or leader epochs remember beyond its log end
(:class:`RememberedOffset`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkalog.storage.errors import CorruptRecordError
from kafkalog.storage.records import LogScanner

if TYPE_CHECKING:
    pass

def segment_end_error(path: str | os.PathLike, scanner: LogScanner, size: int, *, active: bool,
                      next_base_offset: int | None = None) -> CorruptRecordError | None:
    """Where a partition's batches may end short of a segment's end: the one rule every reader follows.

    A scan stops early at a torn tail (fewer than 17 bytes left) or a partial batch (an entry running past the
    file's end). At the end of the *active* (last) segment that is a write the broker had not finished, and the
    log simply ends there (``FileLogInputStream.nextBatch`` returns null). Anywhere else it is a hole: the
    offsets after the last complete batch of that segment, up to the next segment's base offset, are gone, and
    a reader that went on to the next segment would skip them silently. So it is corruption: the error names
    the file and the byte where the complete batches end. ``None`` when the scan ended cleanly or at the end of
    the active segment."""
    reason = scanner.stop_reason
    if reason is None or active:
        return None
    stop = scanner.stop_position
    upto = "" if next_base_offset is None else f" up to offset {next_base_offset - 1}"
    return CorruptRecordError(
        f"{reason}: the last {size - stop} bytes of a segment that is not the active one are not a complete "
        f"batch; the records from here{upto} are lost (`kafkalog export --salvage` reads around it)",
        str(path), stop)  # (a local path, or a UrlPath)


@dataclass(frozen=True)
class SegmentHole:
    """Records of a segment that no reader can read: its batches end before its file does (a segment other than
    the active one; offsets ``first_offset..last_offset``, from the one after its last complete batch to the one
    before the next segment's base offset; the ``bytes`` from ``position`` on are a torn or partial batch,
    :func:`segment_end_error`), or the batch at ``position`` (``bytes`` long) fails its CRC (any segment, the
    active one too); ``reason`` in words."""

    file: str
    position: int
    bytes: int
    first_offset: int | None  # (None: not known, the entry's header cannot be read)
    last_offset: int | None
    reason: str


PRODUCER_SNAPSHOT = "producer snapshot"
CONSUMER_GROUP = "consumer group"


@dataclass(frozen=True)
class RememberedOffset:
    """An offset that a partition's checkpoints, snapshots or leader epochs (or a consumer group's commit)
    remember beyond the end of its log: offsets ``[first_missing, offset)`` were in the log once and are gone.

    ``source``: :data:`REPLICATION_OFFSET_CHECKPOINT` (the high watermark), :data:`RECOVERY_POINT_CHECKPOINT`,
    :data:`LOG_START_OFFSET_CHECKPOINT`, :data:`PRODUCER_SNAPSHOT`, :data:`LEADER_EPOCH_CHECKPOINT` (an epoch's
    start offset) or :data:`CONSUMER_GROUP` (a committed offset, ``group`` set); ``file``: where it is remembered."""

    source: str
    file: str
    offset: int
    log_end_offset: int
    group: str | None = None
    epoch: int | None = None

    @property
    def first_missing(self) -> int:
        return self.log_end_offset

    @property
    def last_missing(self) -> int:
        return self.offset - 1

    @property
    def missing(self) -> int:
        """How many offsets are gone."""
        return self.offset - self.log_end_offset

    def to_dict(self) -> dict:
        """The facts: what remembers the offset (``source``, ``file``, ``group``, ``epoch``), the offset and the log
        end offset (``kafkalog.facts`` words them)."""
        return {"source": self.source, "file": self.file, "offset": self.offset, "logEndOffset": self.log_end_offset,
                "group": self.group, "epoch": self.epoch}


def remembered_facts(found: list[RememberedOffset]) -> dict:
    """A partition's :meth:`PartitionLog.remembered_beyond_end` (and groups' commits) as the facts of one finding
    (code ``loss.remembered``): the offsets gone (``logEndOffset`` .. ``lastMissing``) and what remembers them."""
    return {"logEndOffset": found[0].log_end_offset, "lastMissing": max(r.last_missing for r in found),
            "remembered": [r.to_dict() for r in found]}
