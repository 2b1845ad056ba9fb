"""What a read of records keeps (:class:`ExportFilter`: offsets, times, topics, an offset spec, read_committed,
producers, a key) and what it counts (:class:`ExportStats`), for ``export``, ``to_arrow``, ``sql`` and the Spark
source alike (:mod:`.export` reads with them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.log.offset_spec import OffsetSpec
from kafkalog.storage.log.partition import PartitionLog


@dataclass
class ExportFilter:
    """Offsets ``[from_offset, to_offset)``, timestamps ``[from_time, to_time)``, topics (None = all), an
    offset spec (rpk's and kcat's grammar, :mod:`kafkalog.storage.log.offset_spec`) resolved per partition, and
    ``key``: only records whose key is exactly these bytes (:func:`key_bytes` reads them from text).

    Control records (transaction markers) only with ``include_control``: by default the rows are what a Kafka
    consumer reads (and what ``kafkalog export``, the Spark source and ``to_arrow`` give); an export that
    ``kafkalog import`` rebuilds the log from sets it (``--print-control-records``)."""

    topics: set[str] | None = None
    from_offset: int | None = None
    to_offset: int | None = None
    from_time: int | None = None
    to_time: int | None = None
    include_control: bool = False
    offset_spec: OffsetSpec | None = None
    read_committed: bool = False  # what a consumer with isolation.level=read_committed reads
    #: read_committed as a broker that is the partition's only replica serves it once loaded: the leader's high
    #: watermark is the smallest log end offset of its ISR (``Partition.maybeIncrementLeaderHW``), itself alone, so
    #: the log end offset, whatever ``replication-offset-checkpoint`` held (``kafkalog conformance certify``)
    sole_replica: bool = False
    producer_ids: set[int] | None = None  # only batches of these producers
    transactional_only: bool = False
    key: bytes | None = None  # only records with exactly this key (a record with a null key never matches)

    def keeps(self, record: tuple) -> bool:
        """The record-level predicates on a decoded record ``(offset, timestamp, key, value, headers)``."""
        return self.key is None or (record[2] is not None and bytes(record[2]) == self.key)

    def for_partition(self, plog: PartitionLog) -> ExportFilter:
        """This filter with the offset spec resolved for ``plog`` (its log start and end offsets, and its time
        indexes for timestamps) and intersected with the offset range; a ``from_time`` starts the offsets where
        ``ListOffsets`` by that timestamp starts (:func:`time_start`), so the segments and batches before it are
        never read."""
        flt = self
        if self.offset_spec is not None:
            lo, hi = self.offset_spec.resolve_in(plog)
            if self.from_offset is not None:
                lo = max(lo, self.from_offset)
            if self.to_offset is not None:
                hi = min(hi, self.to_offset)
            flt = replace(self, from_offset=lo, to_offset=max(lo, hi), offset_spec=None)
        start = None if flt.from_time is None else time_start(plog, flt.from_time)
        if start is not None and (flt.from_offset is None or start > flt.from_offset):
            flt = replace(flt, from_offset=start)
        return flt


def time_start(plog: PartitionLog, from_time: int) -> int | None:
    """The offset a read of the records with timestamp >= ``from_time`` starts at: the one ``ListOffsets`` by
    timestamp finds (:meth:`PartitionLog.lookup_timestamp`, Kafka's ``fetchOffsetByTimestamp`` through the time
    indexes, which hold the max timestamp so far: every batch before it has a max timestamp below
    ``from_time``). None (read from the start) when the indexes cannot say: records below the log start offset
    (which the lookup does not search), an index that fails its checks (the broker rebuilds it) or damage met
    by the lookup (the read reports it). When every indexed timestamp is older, the active segment is still
    read: its time index may lag behind its batches after a broker that did not shut down cleanly."""
    segs = plog.segments
    if not segs or segs[0].base_offset < plog.log_start_offset or any(s.index_problem() for s in segs):
        return None
    try:
        found = plog.lookup_timestamp(from_time)
    except KafkaLogError:
        return None
    return segs[-1].base_offset if found is None else found[1]


@dataclass
class ExportStats:
    partitions: int = 0
    batches: int = 0
    records: int = 0
    files: list[str] = field(default_factory=list)
    on_segment: Callable[[int], None] | None = field(default=None, repr=False, compare=False)
    """called with each segment's .log size once the export is past it (progress bars)"""

    def to_dict(self) -> dict:
        return {"partitions": self.partitions, "batches": self.batches, "records": self.records,
                "files": list(self.files)}


__all__ = ["ExportFilter", "ExportStats", "time_start"]
