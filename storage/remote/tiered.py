"""A tiered partition read through both of its tiers, as Kafka serves it to a consumer (KIP-405).

``ReplicaManager.readFromLog``: a fetch at an offset the local segments do not hold that lies at or above the
partition's log start offset and below ``UnifiedLog.localLogStartOffset`` is read from the remote store
(``RemoteLogManager.read``); every other offset is read from the local segments. Kafka keeps a segment locally
for a while after uploading it (``local.retention.ms``/``local.retention.bytes``), so both tiers may hold the
same offsets: the local log serves them, the remote store only what lies below the local log start. Each offset
is read once, from one tier (:func:`by_tier`).

The local partition is :class:`~kafkalog.storage.log.partition.PartitionLog` (its local log start and its data
dir's ``log-start-offset-checkpoint``); the remote tier is the first offset the store holds for the partition.
"""

from __future__ import annotations

from kafkalog.storage.log.partition import PartitionLog, log_start_offset

Range = tuple[int, int]


def by_tier(lo: int, hi: int, local_start: int) -> tuple[Range | None, Range | None]:
    """The offsets ``[lo, hi)`` of a tiered partition as its tiers serve them: ``(remote, local)``, the offsets
    below ``local_start`` (its ``localLogStartOffset``) from the remote store and the others from the local
    segments, each ``[lo, hi)`` or None when that tier serves none of them."""
    cut = min(max(lo, local_start), hi)
    return ((lo, cut) if lo < cut else None), ((cut, hi) if cut < hi else None)


def tiered_log_start(plog: PartitionLog, remote_first: int | None) -> int:
    """The log start offset of a tiered partition whose remote store is read too: Kafka's
    (:func:`~kafkalog.storage.log.partition.log_start_offset` with ``remote_log_enabled``: the data dir's
    ``log-start-offset-checkpoint``, which for a tiered topic lies below the local segments), or the first offset
    either tier holds when the checkpoint has no entry, and never below that first offset (segments remote
    retention deleted are gone whatever the checkpoint still says). ``remote_first``: the store's first offset
    for the partition (None: the store holds none of it)."""
    firsts = [o for o in (remote_first, plog.segments[0].base_offset if plog.segments else None) if o is not None]
    first = min(firsts) if firsts else None
    start = log_start_offset(plog.log_start_offset_checkpoint, first, remote_log_enabled=True)
    return start if first is None else max(start, first)


def remote_part(plog: PartitionLog) -> Range | None:
    """The offsets of the partition that its data dir's ``log-start-offset-checkpoint`` puts below its local
    segments, ``[log start offset, local log start)`` as a tiered topic's (the checkpoint Kafka writes for a tiered
    partition whatever its value), or None: the offsets a tiered topic's remote store holds and only a reader of
    that store can read."""
    if not plog.segments:
        return None
    start = log_start_offset(plog.log_start_offset_checkpoint, plog.segments[0].base_offset, remote_log_enabled=True)
    return by_tier(start, plog.local_log_start_offset, plog.local_log_start_offset)[0]


__all__ = ["by_tier", "remote_part", "tiered_log_start"]
