"""What the broker's readers do with a batch failing its CRC that its start-up leaves as it is (issue 31 item 4).

A segment below a partition's recovery point, or any segment after a clean shutdown, is never checked when the
broker loads its logs: a batch in it that fails its CRC is served as it is. The leader never checks the CRC of
what it reads for a fetch (``FileRecords`` bytes go out unchanged), so every reader meets the batch itself:

* the Java consumer (``check.crcs=true`` by default, ``CompletedFetch.maybeEnsureValid``) fails: "Record batch for
  partition ... at offset N is invalid, cause: Record is corrupt"; it cannot move past the batch unless it seeks
  past it;
* kafka-python (``check_crcs=True`` by default) fails: ``CorruptRecordError`` "... at offset N failed crc check";
* librdkafka with ``check.crcs=true`` fails: ``_BAD_MSG`` "MessageSet at offset N ... failed CRC32C check", again
  at every poll, never moving past it;
* librdkafka with its defaults (``check.crcs=false``) does not check the CRC: when the batch's framing is intact
  and its records still decode (:func:`~kafkalog.storage.records.salvage.salvage_scan` with
  ``include_invalid``: the very check ``kafkalog export --salvage --include-invalid`` makes), it delivers the
  damaged records to the application without a word; when they do not decode (a compressed batch whose
  damaged bytes no longer decompress, a record whose lengths are damaged), it fails (``_BAD_COMPRESSION`` or
  ``_BAD_MSG``) at every poll;
* a follower replica appends what it fetches through ``UnifiedLog.appendAsFollower``, which validates every
  batch (``LogValidator``/``analyzeAndValidateRecords``: ``CorruptRecordException``); its fetcher logs "Found
  invalid messages during fetch" and retries the same offset for ever: the replica never gets past the batch
  and never joins the ISR.

``kafkalog repair --full`` recovers every segment as the broker would without a recovery point: it cuts the log
at the batch (that batch's offsets and every later one are lost, later segments deleted). ``kafkalog export
--salvage --include-invalid`` reads every record around it, and the batch's own records when they decode (marked
``crcValid: false``).

Two more damages the start-up leaves as they are are served in their own ways (:attr:`Serving.damage`), measured
against a real 4.3.1 broker:

* a **hole** (``hole``): a closed segment whose batches end in a torn or partial batch (below the recovery point,
  or any closed segment after a clean shutdown). A fetch at the hole's first offset finds no complete batch at or
  after it in that segment and reads the next segment (``LocalLog.read`` moves to ``higherSegment``): every
  reader receives the records before and after the hole and **skips** its offsets without an error; a follower
  replicates around it the same way, its log ending where the leader's does, and joins the ISR with the hole;
* a **torn end of the active segment after a clean shutdown** (``tornEnd``): the broker does not recover it, so
  its log end is the offset after the last complete batch while the torn bytes stay in the file, and it appends
  every new batch after them. A fetch at the log end then finds no complete batch (the torn batch's declared size
  spans the new batches) and gets an empty answer at the log end offset: every reader **stalls** there without an
  error, never receiving a record appended since, and a follower stalls too while the leader counts it in the
  ISR (measured: ISR [1, 2], the follower's log ending at the torn bytes), so the acknowledged records are on the
  leader alone. That holds until the broker has appended more bytes than the torn batch's header declares
  (:attr:`Serving.span_bytes`); from then on a fetch at the log end reads the torn header over the new batches,
  a batch failing its CRC (measured: "Record batch for partition ... at offset 60 is invalid" with 25 records of
  100 bytes appended after a torn 1,409-byte batch): the Java consumer, kafka-python and librdkafka with
  ``check.crcs=true`` **fail** at the log end offset, librdkafka with its defaults **fails** too when the torn
  header names a compression codec ("Decompression (codec 0x2) of message at 60 ... failed") and still stalls
  without an error when it names none (:attr:`Serving.torn_compressed`), and a follower **fails** ("Found invalid messages during fetch", at its first fetch that reaches the torn
  bytes) and drops out of the ISR (:attr:`Serving.served_to_once_spanned`). The next start without a clean
  shutdown truncates the segment at the torn bytes ("Corruption found in segment ..., truncating to offset N"):
  every record appended since is lost.

``kafkalog repair --full`` cuts a hole as it cuts a corrupt batch (the log from the hole on); for a torn end it
removes only the torn bytes, no record.

``tests/kafka/test_doctor_serving.py`` checks each prediction against a real 4.3.1 broker, a second broker
replicating the partitions, and the clients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.records.salvage import SkippedRange, salvage_scan

FAILS, DELIVERS, SKIPS, STALLS = "fails", "delivers", "skips", "stalls"
#: what is served as it is: a batch failing its CRC, a torn closed segment, a torn end of the active segment
CORRUPT_BATCH, HOLE, TORN_END = "corruptBatch", "hole", "tornEnd"
#: the readers, in the order the finding names them (the keys of :meth:`Serving.to_dict`'s ``servedTo``)
READERS = ("javaConsumer", "kafkaPython", "librdkafka", "librdkafkaCheckCrcs", "follower")
#: the command that cuts the log at the batch, and the one that reads around it
CUT_COMMAND = "kafkalog repair --full"
SALVAGE_COMMAND = "kafkalog export --salvage --include-invalid"


@dataclass(frozen=True)
class Serving:
    """How the broker's readers meet what it serves as it is (``damage``: :data:`CORRUPT_BATCH`, the CRC-failing
    batch at a position of a segment; :data:`HOLE`; :data:`TORN_END`), and what cutting the log there loses
    (``cut_first_offset..cut_last_offset``: the damaged offsets and every later one; None when they cannot be read,
    or, for a torn end, when no record is cut)."""

    records_decode: bool  # the batch's framing is intact and its records decode: librdkafka's defaults deliver them
    cut_first_offset: int | None
    cut_last_offset: int | None
    damage: str = CORRUPT_BATCH
    span_bytes: int | None = None  # a torn end: the bytes appended after it before fetches read its header over them
    torn_compressed: bool | None = None  # a torn end: its header names a compression codec (None: not known)

    @property
    def served_to(self) -> dict[str, str]:
        """Each reader of :data:`READERS` -> ``fails`` (an error at the batch), ``delivers`` (the damaged records,
        unchecked), ``skips`` (the hole's offsets, without an error) or ``stalls`` (at the log end, without an
        error, whatever is appended)."""
        if self.damage != CORRUPT_BATCH:
            return dict.fromkeys(READERS, SKIPS if self.damage == HOLE else STALLS)
        return {"javaConsumer": FAILS, "kafkaPython": FAILS, "librdkafka": DELIVERS if self.records_decode else FAILS,
                "librdkafkaCheckCrcs": FAILS, "follower": FAILS}

    @property
    def served_to_once_spanned(self) -> dict[str, str] | None:
        """A torn end: what each reader of :data:`READERS` gets once the broker has appended more than
        :attr:`span_bytes` after it (the torn batch then fails its CRC; librdkafka's defaults, which do not check
        it, fail on a compressed one and stall on the others, as on one whose codec is not known); None for the
        other damages."""
        if self.damage != TORN_END:
            return None
        return {"javaConsumer": FAILS, "kafkaPython": FAILS, "librdkafka": FAILS if self.torn_compressed else STALLS,
                "librdkafkaCheckCrcs": FAILS, "follower": FAILS}

    @property
    def follower_in_isr(self) -> bool:
        """Whether the leader counts a follower in the ISR: it never does past a corrupt batch; past a hole the
        follower catches up; at a torn end the leader takes its empty reads for caught up."""
        return self.damage != CORRUPT_BATCH

    @property
    def cut_records(self) -> int | None:
        """How many offsets ``kafkalog repair --full`` removes."""
        if self.cut_first_offset is None or self.cut_last_offset is None:
            return None
        return self.cut_last_offset - self.cut_first_offset + 1

    def to_dict(self) -> dict[str, Any]:
        return {"damage": self.damage, "servedTo": self.served_to, "followerInIsr": self.follower_in_isr,
                "spanBytes": self.span_bytes, "tornCompressed": self.torn_compressed,
                "servedToOnceSpanned": self.served_to_once_spanned,
                "recordsDecode": self.records_decode,
                "cut": {"command": CUT_COMMAND, "firstOffset": self.cut_first_offset,
                        "lastOffset": self.cut_last_offset},
                "salvage": {"command": SALVAGE_COMMAND}}


def serving(log: PartitionLog, file: str, position: int, first_offset: int | None) -> Serving:
    """How ``log`` is served with the batch at byte ``position`` of its segment ``file`` failing its CRC
    (``first_offset``: the batch's base offset, None when unknown). See the module doc."""
    decode = False
    seg = next((s for s in log.segments if str(s.path) == file), None)
    if seg is not None:
        try:
            first = next(salvage_scan(seg.buf, position, path=file, include_invalid=True), None)
            decode = isinstance(first, SkippedRange) and first.start == position and first.batch is not None
            del first
        except KafkaLogError:
            decode = False
    return _cut(log, first_offset, CORRUPT_BATCH, decode)


def _cut(log: PartitionLog, first_offset: int | None, damage: str, decode: bool = False) -> Serving:
    end = log.log_end_offset
    return Serving(decode, first_offset, end - 1 if first_offset is not None and end > first_offset else None, damage)


def hole_serving(log: PartitionLog, first_offset: int | None) -> Serving:
    """How ``log`` is served with a hole from ``first_offset`` (a torn closed segment the start-up leaves as it
    is): its readers and followers skip its offsets; ``repair --full`` cuts the log from there."""
    return _cut(log, first_offset, HOLE)


def torn_end_serving(torn_bytes: int, declared_bytes: int | None, compressed: bool | None = None) -> Serving:
    """How a log is served whose active segment ends in ``torn_bytes`` the start-up keeps (a clean shutdown), of a
    batch whose header declares ``declared_bytes`` (None: unknown): its readers and followers stall at its log end
    until the broker has appended the rest of that size; ``repair --full`` removes the torn bytes, no record."""
    span = declared_bytes - torn_bytes if declared_bytes is not None and declared_bytes > torn_bytes else None
    return Serving(False, None, None, TORN_END, span, compressed)


__all__ = ["CORRUPT_BATCH", "CUT_COMMAND", "DELIVERS", "FAILS", "HOLE", "READERS", "SALVAGE_COMMAND", "SKIPS",
           "STALLS", "Serving", "TORN_END", "hole_serving", "serving", "torn_end_serving"]
