"""A consumer group as Kafka's group coordinator holds it after loading ``__consumer_offsets`` (classic, consumer
(KIP-848), share or streams), its members and its committed offsets, with the rows and JSON the reports give of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CommittedOffset", "Group", "Member"]


@dataclass
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int | None
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None
    record_offset: int  # offset of the commit record in __consumer_offsets
    topic_id: str | None = None
    log_end_offset: int | None = None
    log_end_offset_source: str | None = None  # "highWatermark" | "logEndOffset" | None (partition not present)

    @property
    def lag(self) -> int | None:
        if self.log_end_offset is None or self.offset == -1:
            return None
        return self.log_end_offset - self.offset


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None = None
    assignment: list[tuple[str, int]] = field(default_factory=list)  # (topic or topic id, partition)
    # consumer groups (KIP-848) only
    member_epoch: int | None = None
    state: str | None = None
    subscribed_topics: list[str] | None = None
    rack_id: str | None = None
    server_assignor: str | None = None
    _assigned_ids: list[tuple[str, list[int]]] = field(default_factory=list, repr=False)


@dataclass
class Group:
    group_id: str
    type: str  # "classic" | "consumer" | "share" | "streams"
    protocol_type: str | None = None  # classic: "consumer", "connect", ...; None for a simple group
    protocol: str | None = None  # classic: the assignor chosen ("range"...); consumer: the server assignor
    generation: int | None = None  # classic generation id; consumer/share/streams: the group epoch
    leader: str | None = None
    assignment_epoch: int | None = None
    state_timestamp: int | None = None
    members: dict[str, Member] = field(default_factory=dict)
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    pending_transactional_offsets: int = 0
    coordinator_partition: int | None = None
    data_dir: str | None = None

    @property
    def state(self) -> str:
        if self.type == "classic":
            return "Stable" if self.members else "Empty"
        if self.type != "consumer":
            return "Stable" if self.members else "Empty"
        if not self.members:
            return "Empty"
        target = -1 if self.assignment_epoch is None else self.assignment_epoch
        if (self.generation or 0) > target:
            return "Assigning"
        for m in self.members.values():
            if not (m.state == "Stable" and m.member_epoch == target):
                return "Reconciling"
        return "Stable"

    @property
    def is_simple(self) -> bool:
        return self.type == "classic" and not self.protocol_type and not self.members

    def sorted_offsets(self) -> list[CommittedOffset]:
        return [self.offsets[k] for k in sorted(self.offsets)]

    def describe_rows(self, ends: dict[tuple[str, int], int | None] | None = None) -> list[dict[str, Any]]:
        """The rows ``kafka-consumer-groups.sh --describe`` prints for this group: the partitions assigned to each
        member (members with more partitions first; with their committed offset or None), then the committed
        partitions no member has (consumer None). Keys: group, topic, partition, currentOffset, logEndOffset,
        lag, consumerId, host, clientId. ``ends`` gives the end offsets of assigned partitions without a commit."""
        ends = ends or {}
        rows: list[dict[str, Any]] = []
        assigned: set[tuple[str, int]] = set()

        def row(tp: tuple[str, int], m: Member | None) -> dict[str, Any]:
            o = self.offsets.get(tp)
            end = o.log_end_offset if o is not None else ends.get(tp)
            current = o.offset if o is not None else None
            lag = None if current is None or current == -1 or end is None else end - current
            return {"group": self.group_id, "topic": tp[0], "partition": tp[1], "currentOffset": current,
                    "logEndOffset": end, "lag": lag, "consumerId": m.member_id if m else None,
                    "host": m.client_host if m else None, "clientId": m.client_id if m else None}

        for m in sorted((m for m in self.members.values() if m.assignment), key=lambda m: -len(m.assignment)):
            for tp in sorted(set(m.assignment), key=lambda tp: (tp[1], tp[0])):
                assigned.add(tp)
                rows.append(row(tp, m))
        for tp in sorted((tp for tp in self.offsets if tp not in assigned), key=lambda tp: (tp[1], tp[0])):
            rows.append(row(tp, None))
        return rows

    def to_json(self) -> dict[str, Any]:
        """The ``group`` JSON record (docs/schemas/group.schema.json)."""
        owner = {tp: m for m in self.members.values() for tp in m.assignment}
        offsets = []
        for o in self.sorted_offsets():
            m = owner.get((o.topic, o.partition))
            offsets.append({
                "topic": o.topic, "partition": o.partition, "topicId": o.topic_id,
                "committedOffset": o.offset, "leaderEpoch": o.leader_epoch, "metadata": o.metadata,
                "commitTimestamp": o.commit_timestamp, "expireTimestamp": o.expire_timestamp,
                "recordOffset": o.record_offset, "logEndOffset": o.log_end_offset,
                "logEndOffsetSource": o.log_end_offset_source, "lag": o.lag,
                "consumerId": m.member_id if m else None, "host": m.client_host if m else None,
                "clientId": m.client_id if m else None,
            })
        members = [{
            "memberId": m.member_id, "groupInstanceId": m.group_instance_id, "clientId": m.client_id,
            "host": m.client_host, "memberEpoch": m.member_epoch, "memberState": m.state,
            "subscribedTopics": m.subscribed_topics, "rackId": m.rack_id,
            "assignment": [{"topic": t, "partition": p} for t, p in sorted(m.assignment)],
        } for m in self.members.values()]
        return {
            "groupId": self.group_id, "type": self.type, "state": self.state, "protocolType": self.protocol_type,
            "protocol": self.protocol, "generation": self.generation, "leader": self.leader,
            "assignmentEpoch": self.assignment_epoch, "stateTimestamp": self.state_timestamp,
            "coordinatorPartition": self.coordinator_partition, "dataDir": self.data_dir,
            "members": members, "offsets": offsets,
            "pendingTransactionalOffsets": self.pending_transactional_offsets,
        }
