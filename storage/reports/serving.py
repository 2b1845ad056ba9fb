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

``tests/kafka/test_doctor_serving.py`` checks each prediction against a real 4.3.1 broker, a second broker
replicating the partition, and the clients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.records.salvage import SkippedRange, salvage_scan

FAILS, DELIVERS = "fails", "delivers"
#: the readers, in the order the finding names them (the keys of :meth:`Serving.to_dict`'s ``servedTo``)
READERS = ("javaConsumer", "kafkaPython", "librdkafka", "librdkafkaCheckCrcs", "follower")
#: the command that cuts the log at the batch, and the one that reads around it
CUT_COMMAND = "kafkalog repair --full"
SALVAGE_COMMAND = "kafkalog export --salvage --include-invalid"


@dataclass(frozen=True)
class Serving:
    """How the broker's readers meet the CRC-failing batch at ``position`` of a segment it serves as it is, and
    what cutting the log there loses (``cut_first_offset..cut_last_offset``: the batch's offsets and every later
    one; None when the batch's offsets cannot be read)."""

    records_decode: bool  # the batch's framing is intact and its records decode: librdkafka's defaults deliver them
    cut_first_offset: int | None
    cut_last_offset: int | None

    @property
    def served_to(self) -> dict[str, str]:
        """Each reader of :data:`READERS` -> ``fails`` or ``delivers`` (the damaged records, unchecked)."""
        return {"javaConsumer": FAILS, "kafkaPython": FAILS, "librdkafka": DELIVERS if self.records_decode else FAILS,
                "librdkafkaCheckCrcs": FAILS, "follower": FAILS}

    @property
    def cut_records(self) -> int | None:
        """How many offsets ``kafkalog repair --full`` removes."""
        if self.cut_first_offset is None or self.cut_last_offset is None:
            return None
        return self.cut_last_offset - self.cut_first_offset + 1

    def to_dict(self) -> dict[str, Any]:
        return {"servedTo": self.served_to, "recordsDecode": self.records_decode,
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
    end = log.log_end_offset
    return Serving(decode, first_offset, end - 1 if first_offset is not None and end > first_offset else None)


__all__ = ["CUT_COMMAND", "DELIVERS", "FAILS", "READERS", "SALVAGE_COMMAND", "Serving", "serving"]
