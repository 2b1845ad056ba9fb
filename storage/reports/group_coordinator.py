"""The replay of ``__consumer_offsets`` that Kafka's group coordinator does as it loads a partition.

Each ``__consumer_offsets-N`` partition is replayed in offset order as Kafka's group coordinator loads it
(4.x ``GroupCoordinatorShard.replay`` -> ``GroupMetadataManager.replay`` / ``OffsetMetadataManager.replay``,
``CoordinatorLoaderImpl``; the same outcome as 3.x ``GroupMetadataManager.loadGroupsAndOffsets``):

* the latest record per key wins; a tombstone (null value) deletes the offset commit, the group
  (``GroupMetadata``, ``ConsumerGroupMetadata``), the member or its assignment;
* an offset commit of a group that does not exist creates a "simple" classic group (no protocol type, Empty);
* transactional offset commits (a batch with a producer id) stay pending until their end-transaction marker:
  COMMIT applies them (unless a later non-transactional commit of the same partition has a higher record
  offset), ABORT drops them; a tombstone drops the pending commits of its partition too. Still pending at the
  end of the log: not visible (counted in ``pendingTransactionalOffsets``);
* classic groups (``GroupMetadataValue``) load as ``Empty`` without members, ``Stable`` with members; consumer
  groups (KIP-848 records) get Kafka's computed state (Empty / Assigning / Reconciling / Stable).

Offsets of a group that no longer exists are invisible, as on a 4.x broker (``OffsetFetch`` of an unknown group;
3.x ``loadGroupsAndOffsets`` would recreate such a group as Empty: only reachable when a group tombstone is not
preceded by its offsets' tombstones, which neither release writes). A batch that fails its CRC or cannot be
decoded ends the replay of its partition (an error: the groups as read up to it); a torn tail is a note.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from kafkalog.storage.decoders.common import uuid_to_kafka_str
from kafkalog.storage.decoders.consumer_offsets import (
    decode_consumer_assignment,
    parse_offsets_key,
    parse_offsets_value,
)
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files.findings import Finding, note
from kafkalog.storage.io.fs import UrlPath, as_path
from kafkalog.storage.log.partition import PartitionLog
from kafkalog.storage.records.control import parse_control_key
from kafkalog.storage.reports.consumer_group import CommittedOffset, Group, Member

__all__ = ["GroupCoordinatorShard", "replay_offsets_partition", "replay_task"]

NO_PRODUCER_ID = -1
_ABORT, _COMMIT = 0, 1
# ConsumerGroupMember.State (MemberState): 0 STABLE
_MEMBER_STATES = {0: "Stable", 1: "UnrevokedPartitions", 2: "UnreleasedPartitions", 127: "Unknown"}
_LEAVE_GROUP_MEMBER_EPOCH = -1

# record types (CoordinatorRecordType)
_OFFSET_COMMIT = (0, 1)
_GROUP_METADATA = 2
_CG_METADATA, _CG_PARTITION_METADATA, _CG_MEMBER, _CG_TARGET_META, _CG_TARGET_MEMBER, _CG_CURRENT = 3, 4, 5, 6, 7, 8
_SHARE_TYPES = frozenset(range(9, 16))
_STREAMS_TYPES = frozenset(range(17, 24))


class GroupCoordinatorShard:
    """One ``__consumer_offsets`` partition's coordinator state, as the loader replays it."""

    def __init__(self, partition: int | None = None, data_dir: str | None = None):
        self.partition = partition
        self.data_dir = data_dir
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self.pending: dict[int, dict[str, dict[tuple[str, int], CommittedOffset]]] = {}
        self.open_txns: dict[str, set[int]] = {}
        self.notes: list[Finding] = []  # about the partition replayed (its ``file`` is set by who knows it)

    # -- groups
    def _new(self, group_id: str, kind: str) -> Group:
        g = Group(group_id, kind, coordinator_partition=self.partition, data_dir=self.data_dir)
        self.groups[group_id] = g
        return g

    def _modern(self, group_id: str, kind: str, create: bool) -> Group | None:
        """``getOrMaybeCreatePersisted{Consumer,Share,Streams}Group``: a simple classic group (created by an offset
        commit) or a classic group being converted is replaced; None when absent and not ``create``."""
        g = self.groups.get(group_id)
        if g is not None and g.type == kind:
            return g
        if not create:
            return None
        return self._new(group_id, kind)

    def replay(self, record_offset: int, producer_id: int, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            raise KafkaLogError("__consumer_offsets record without a key", position=None)
        record_type, k = parse_offsets_key(key)
        if k is None:
            self.notes.append(note("", "groups.unknownRecordType", offset=record_offset, recordType=record_type))
            return
        parsed = parse_offsets_value(record_type, value)
        v = None if parsed is None else parsed[1]
        if record_type in _OFFSET_COMMIT:
            self._offset_commit(record_offset, producer_id, k, v)
        elif record_type == _GROUP_METADATA:
            self._group_metadata(k["group"], v)
        elif record_type in (_CG_METADATA, _CG_PARTITION_METADATA, _CG_MEMBER, _CG_TARGET_META, _CG_TARGET_MEMBER,
                             _CG_CURRENT):
            self._consumer(record_type, k, v)
        elif record_type in _SHARE_TYPES or record_type in _STREAMS_TYPES:
            self._other_modern("share" if record_type in _SHARE_TYPES else "streams", record_type, k, v)
        # 16 (ConsumerGroupRegularExpression): resolved regex subscriptions, nothing to show here

    def _offset_commit(self, record_offset: int, producer_id: int, k: dict, v: dict | None) -> None:
        group_id, tp = k["group"], (k["topic"], k["partition"])
        if v is not None:
            if group_id not in self.groups:
                self._new(group_id, "classic").generation = 0  # a "simple consumer group"
            leader_epoch = v.get("leaderEpoch", -1)
            expire = v.get("expireTimestamp", -1)
            topic_id = v.get("topicId")
            commit = CommittedOffset(
                tp[0], tp[1], v["offset"], None if leader_epoch == -1 else leader_epoch, v.get("metadata") or "",
                v["commitTimestamp"], None if expire == -1 else expire, record_offset,
                None if topic_id is None or topic_id.int == 0 else uuid_to_kafka_str(topic_id))
            if producer_id == NO_PRODUCER_ID:
                self.offsets.setdefault(group_id, {})[tp] = commit
            else:
                self.pending.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = commit
                self.open_txns.setdefault(group_id, set()).add(producer_id)
        else:
            self.offsets.get(group_id, {}).pop(tp, None)
            for pid in self.open_txns.get(group_id, ()):
                self.pending.get(pid, {}).get(group_id, {}).pop(tp, None)

    def end_transaction(self, producer_id: int, commit: bool) -> None:
        """``OffsetMetadataManager.replayEndTransactionMarker``."""
        pending = self.pending.pop(producer_id, None)
        if pending is None:
            return
        for group_id in pending:
            txns = self.open_txns.get(group_id)
            if txns is not None:
                txns.discard(producer_id)
                if not txns:
                    del self.open_txns[group_id]
        if not commit:
            return
        for group_id, commits in pending.items():
            store = self.offsets.setdefault(group_id, {})
            for tp, c in commits.items():
                existing = store.get(tp)
                if existing is None or c.record_offset > existing.record_offset:
                    store[tp] = c

    def _group_metadata(self, group_id: str, v: dict | None) -> None:
        if v is None:
            self.groups.pop(group_id, None)
            return
        protocol_type = v.get("protocolType") or None
        g = Group(group_id, "classic", protocol_type=protocol_type, protocol=v.get("protocol"),
                  generation=v.get("generation"), leader=v.get("leader"),
                  state_timestamp=None if v.get("currentStateTimestamp", -1) == -1 else v["currentStateTimestamp"],
                  coordinator_partition=self.partition, data_dir=self.data_dir)
        for m in v.get("members") or []:
            member = Member(m["memberId"], m["clientId"], m["clientHost"], m.get("groupInstanceId"))
            if protocol_type == "consumer" and m.get("assignment"):
                try:
                    a = decode_consumer_assignment(m["assignment"])
                    member.assignment = [(t["topic"], p) for t in a.get("assignedPartitions") or []
                                         for p in t.get("partitions") or []]
                except KafkaLogError:
                    self.notes.append(note("", "groups.assignmentUndecodable", group=group_id, member=m["memberId"]))
            g.members[member.member_id] = member
        self.groups[group_id] = g

    def _consumer(self, record_type: int, k: dict, v: dict | None) -> None:
        group_id = k["groupId"]
        g = self._modern(group_id, "consumer", v is not None)
        if g is None:
            return
        if record_type == _CG_METADATA:
            if v is None:
                del self.groups[group_id]
            else:
                g.generation = v["epoch"]
        elif record_type == _CG_TARGET_META:
            g.assignment_epoch = None if v is None else v["assignmentEpoch"]
        elif record_type == _CG_MEMBER:
            member_id = k["memberId"]
            if v is None:
                g.members.pop(member_id, None)
                return
            m = g.members.get(member_id) or Member(member_id, "", "")
            m.client_id, m.client_host = v["clientId"], v["clientHost"]
            m.group_instance_id, m.rack_id = v.get("instanceId"), v.get("rackId")
            m.subscribed_topics = list(v.get("subscribedTopicNames") or [])
            m.server_assignor = v.get("serverAssignor")
            g.members[member_id] = m
        elif record_type == _CG_CURRENT:
            member_id = k["memberId"]
            current = g.members.get(member_id)
            if v is None:
                if current is not None:
                    current.member_epoch, current._assigned_ids = _LEAVE_GROUP_MEMBER_EPOCH, []
                return
            m = current if current is not None else g.members.setdefault(member_id, Member(member_id, "", ""))
            m.member_epoch = v["memberEpoch"]
            m.state = _MEMBER_STATES.get(v["state"], "Unknown")
            m._assigned_ids = [(uuid_to_kafka_str(t["topicId"]), list(t["partitions"]))
                               for t in v.get("assignedPartitions") or []]
        # 4 (partition metadata) and 7 (target assignment of a member): not shown

    def _other_modern(self, kind: str, record_type: int, k: dict, v: dict | None) -> None:
        """Share and streams groups: their group epoch and members (no consumer offsets to show for share groups,
        streams groups commit offsets as any consumer)."""
        group_id = k.get("groupId")
        if group_id is None:
            return
        is_group = record_type in (11, 17)
        is_member = record_type in (10, 19)
        g = self._modern(group_id, kind, v is not None)
        if g is None:
            return
        if is_group:
            if v is None:
                del self.groups[group_id]
            else:
                g.generation = v["epoch"]
        elif is_member:
            if v is None:
                g.members.pop(k["memberId"], None)
            else:
                g.members[k["memberId"]] = Member(k["memberId"], v["clientId"], v["clientHost"],
                                                 v.get("instanceId"), rack_id=v.get("rackId"))

    def finish(self, topic_names: dict[str, str]) -> list[Group]:
        out = []
        for group_id, g in self.groups.items():
            g.offsets = dict(self.offsets.get(group_id, {}))
            g.pending_transactional_offsets = sum(len(p.get(group_id, {})) for p in self.pending.values())
            if g.type == "consumer":  # ConsumerGroup.preferredServerAssignor: the members' most common choice
                assignors = [m.server_assignor for m in g.members.values() if m.server_assignor]
                g.protocol = max(sorted(set(assignors)), key=assignors.count) if assignors else None
            for m in g.members.values():
                if m._assigned_ids:
                    m.assignment = [(topic_names.get(tid, tid), p) for tid, parts in m._assigned_ids for p in parts]
            out.append(g)
        return out


def replay_offsets_partition(log: PartitionLog, shard: GroupCoordinatorShard | None = None,
                             advance: Callable[[int], None] | None = None
                           ) -> tuple[GroupCoordinatorShard, Finding | None]:
    """Replay one ``__consumer_offsets`` partition from its first batch to its log end. Returns the state and
    an error if a batch could not be read, a note (``groups.crcMismatch``, ``groups.recordUndecodable`` with the
    segment, its ``position`` and ``offset``; ``groups.unreadable`` with the ``error``): the state is then as of the
    batches before it (where the broker's recovery would truncate the log). ``advance(n)`` is told the bytes
    read."""
    shard = shard or GroupCoordinatorShard(log.partition, str(log.path.parent))
    ends: dict[Path, int] = {}
    try:
        for seg, batch in log.iter_batches():
            ends[seg.path] = batch.position + batch.size
            if advance is not None:
                advance(batch.size)
            if not batch.is_valid():
                return shard, note(seg.path, "groups.crcMismatch", position=batch.position,
                                   offset=batch.base_offset)
            producer_id = getattr(batch, "producer_id", NO_PRODUCER_ID)
            records = batch.records()
            if getattr(batch, "is_control", False):
                for r in records:
                    _, ctype = parse_control_key(r.key)
                    if ctype in (_ABORT, _COMMIT):
                        shard.end_transaction(producer_id, ctype == _COMMIT)
                continue
            for r in records:
                try:
                    shard.replay(r.offset, producer_id, r.key, r.value)
                except KafkaLogError as e:
                    return shard, note(seg.path, "groups.recordUndecodable", position=batch.position,
                                       offset=r.offset, reason=e.reason)
    except KafkaLogError as e:
        return shard, note(log.path, "groups.unreadable", error=str(e))
    for seg in log.segments:  # a torn tail (a crash mid-write): the broker's recovery truncates it, so do we
        end = ends.get(seg.path, 0)
        if seg.size > end:
            shard.notes.append(note(seg.path, "groups.tornTail", bytes=seg.size - end, position=end))
    return shard, None


def replay_task(path: str | os.PathLike | UrlPath) -> tuple[GroupCoordinatorShard, Finding | None]:
    """One partition's replay in a worker process (each partition is replayed on its own, in offset order: the
    result does not depend on how many run at once); a partition dir under a URL is read through the seam."""
    with PartitionLog(as_path(path)) as log:
        return replay_offsets_partition(log)
