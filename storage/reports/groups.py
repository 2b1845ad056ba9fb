"""Consumer groups and their committed offsets, read offline from ``__consumer_offsets`` partitions (what
``kafkalog groups`` prints): the offline ``kafka-consumer-groups.sh --describe --all-groups``.

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

Lag = the partition's end offset minus the committed offset, for partitions present (live) in the same data
dirs. The end offset is what ``kafka-consumer-groups.sh`` shows as LOG-END-OFFSET: ``ListOffsets(latest)``
read-uncommitted, i.e. the high watermark. Offline: the ``replication-offset-checkpoint`` entry capped at the
log end offset, or the log end offset without an entry (``logEndOffsetSource`` says which).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.storage.decoders.common import uuid_to_kafka_str
from kafkalog.storage.decoders.consumer_offsets import (
    decode_consumer_assignment,
    parse_offsets_key,
    parse_offsets_value,
)
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.log.datadir import DataDir
from kafkalog.storage.log.partition import CONSUMER_GROUP, PartitionLog, RememberedOffset
from kafkalog.storage.log.paths import DATA_DIR, PARTITION_DIR, require
from kafkalog.storage.parallel import run_partition_tasks
from kafkalog.storage.records.control import parse_control_key

__all__ = ["OFFSETS_TOPIC", "CommittedOffset", "Group", "GroupsReport", "Member", "load_groups",
           "replay_offsets_partition"]

OFFSETS_TOPIC = "__consumer_offsets"
NO_PRODUCER_ID = -1
PARALLEL_BYTES = 64 << 20  # from this much __consumer_offsets data on, partitions are replayed in parallel
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


@dataclass
class GroupsReport:
    groups: list[Group]
    partitions: list[str]  # the __consumer_offsets partition dirs read
    errors: list[str]  # a partition that could not be read to its end (its groups as far as it was read)
    notes: list[str]
    #: end offsets (high watermark, else log end offset) of the partitions present that some member is assigned
    assigned_ends: dict[tuple[str, int], int | None] = field(default_factory=dict)
    #: committed offsets past the log end offset of their partition (present in these dirs): offsets the group
    #: consumed that the log no longer holds (its lag is negative)
    beyond_end: list[RememberedOffset] = field(default_factory=list)

    def describe_rows(self) -> list[dict[str, Any]]:
        return [r for g in self.groups for r in g.describe_rows(self.assigned_ends)]


# ------------------------------------------------------------------------------------------------ the replay


class _Shard:
    """One ``__consumer_offsets`` partition's coordinator state, as the loader replays it."""

    def __init__(self, partition: int | None = None, data_dir: str | None = None):
        self.partition = partition
        self.data_dir = data_dir
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self.pending: dict[int, dict[str, dict[tuple[str, int], CommittedOffset]]] = {}
        self.open_txns: dict[str, set[int]] = {}
        self.notes: list[str] = []

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
            self.notes.append(f"offset {record_offset}: unknown record type {record_type}, ignored")
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
                    self.notes.append(f"group {group_id}: member {m['memberId']}: assignment not decodable")
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


def replay_offsets_partition(log: PartitionLog, shard: _Shard | None = None,
                             advance: Callable[[int], None] | None = None) -> tuple[_Shard, str | None]:
    """Replay one ``__consumer_offsets`` partition from its first batch to its log end. Returns the state and
    an error (file, byte position, reason) if a batch could not be read: the state is then as of the batches
    before it (where the broker's recovery would truncate the log). ``advance(n)`` is told the bytes read."""
    shard = shard or _Shard(log.partition, str(log.path.parent))
    ends: dict[Path, int] = {}
    try:
        for seg, batch in log.iter_batches():
            ends[seg.path] = batch.position + batch.size
            if advance is not None:
                advance(batch.size)
            if not batch.is_valid():
                return shard, (f"{seg.path}: byte {batch.position}: batch at offset {batch.base_offset} has a "
                               "CRC mismatch: groups read up to it")
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
                    return shard, (f"{seg.path}: byte {batch.position}: record at offset {r.offset}: {e.reason}: "
                                   "groups read up to it")
    except KafkaLogError as e:
        return shard, f"{e}: groups read up to it"
    for seg in log.segments:  # a torn tail (a crash mid-write): the broker's recovery truncates it, so do we
        end = ends.get(seg.path, 0)
        if seg.size > end:
            shard.notes.append(f"{seg.path.name}: {seg.size - end} bytes at the end (from byte {end}) are not a "
                               "complete batch (a torn write): ignored, as the broker's recovery truncates them")
    return shard, None


# ---------------------------------------------------------------------------------------------- the library


def _replay_task(path: str) -> tuple[_Shard, str | None]:
    """One partition's replay in a worker process (each partition is replayed on its own, in offset order: the
    result does not depend on how many run at once)."""
    with PartitionLog(Path(path)) as log:
        return replay_offsets_partition(log)


def load_groups(log_dirs: Iterable[str | os.PathLike], *, group: str | None = None,
                progress: Any = None, workers: int | None = None) -> GroupsReport:
    """``kafkalog groups``: every group of the live ``__consumer_offsets`` partitions found in ``log_dirs``
    (data dirs of one broker, or partition dirs), with its members and latest committed offsets, and the lag
    against the partitions present in the same dirs. ``group`` keeps that group only. ``progress`` (optional,
    :func:`kafkalog.tools.output.progress`'s bar) gets ``update(total=bytes)`` then ``advance(bytes)``.
    ``workers``: processes replaying partitions at once (default: the CPU count from :data:`PARALLEL_BYTES` of
    ``__consumer_offsets`` on, else 1); the report is the same for any number. Raises
    :class:`~kafkalog.storage.log.paths.PathError` (the one path contract) for a path that is neither a data dir nor
    a partition dir."""

    dirs: list[DataDir] = []
    offsets_logs: list[PartitionLog] = []
    logs: dict[tuple[str, int], PartitionLog] = {}
    single: list[PartitionLog] = []
    try:
        for raw in log_dirs:
            p = Path(raw)
            if require(p, (DATA_DIR, PARTITION_DIR)).kind == PARTITION_DIR:
                log = PartitionLog(p)
                single.append(log)
                candidates = [log]
            else:
                d = DataDir(p)
                dirs.append(d)
                candidates = list(d.partitions(include_metadata=False))
            for log in candidates:
                if log.dir_kind != "live":
                    continue
                logs.setdefault((log.topic, log.partition), log)
                if log.topic == OFFSETS_TOPIC:
                    offsets_logs.append(log)
        topic_names: dict[str, str] = {}
        for (topic, _), log in logs.items():
            try:
                tid = log.topic_id
            except KafkaLogError:
                tid = None
            if tid:
                topic_names.setdefault(tid, topic)
        groups: list[Group] = []
        errors: list[str] = []
        notes: list[str] = []
        ordered = sorted(offsets_logs, key=lambda lg: lg.partition)
        sizes = [lg.size for lg in ordered]
        if progress is not None:
            progress.update(total=sum(sizes))
        if workers is None:
            workers = (os.cpu_count() or 1) if sum(sizes) >= PARALLEL_BYTES else 1
        if workers <= 1:  # in this process: the bar advances batch by batch
            results = [replay_offsets_partition(lg, advance=None if progress is None else progress.advance)
                       for lg in ordered]
        else:  # the workers open their own logs: only paths travel; the bar advances a partition's bytes at once

            results = run_partition_tasks(_replay_task, [str(lg.path) for lg in ordered], workers=workers,
                                          threads=1, progress=None if progress is None else progress.advance,
                                          weights=sizes)
        for log, (shard, err) in zip(ordered, results, strict=True):
            if err:
                errors.append(err)
            notes.extend(f"{log.path.name}: {n}" for n in shard.notes)
            groups.extend(shard.finish(topic_names))
        if group is not None:
            groups = [g for g in groups if g.group_id == group]
        ends: dict[tuple[str, int], tuple[int | None, str | None]] = {}
        for g in groups:
            for tp, o in g.offsets.items():
                if tp not in ends:
                    ends[tp] = _end_offset(logs.get(tp), errors)
                o.log_end_offset, o.log_end_offset_source = ends[tp]
            for m in g.members.values():
                for tp in m.assignment:
                    if tp not in ends:
                        ends[tp] = _end_offset(logs.get(tp), errors)
        groups.sort(key=lambda g: g.group_id)
        return GroupsReport(groups, [str(lg.path) for lg in offsets_logs], errors, notes,
                            {tp: e[0] for tp, e in ends.items()}, _beyond_end(groups, logs))
    finally:
        for d in dirs:
            d.close()
        for log in single:
            log.close()


def _beyond_end(groups: list[Group], logs: dict[tuple[str, int], PartitionLog]) -> list[RememberedOffset]:
    """The committed offsets of ``groups`` past the log end offset of their partition (when it is present)."""
    out: list[RememberedOffset] = []
    leos: dict[tuple[str, int], int | None] = {}
    for g in groups:
        for tp, o in sorted(g.offsets.items()):
            log = logs.get(tp)
            if log is None or o.offset < 0:
                continue
            if tp not in leos:
                try:
                    leos[tp] = log.log_end_offset
                except KafkaLogError:
                    leos[tp] = None  # (the error is reported with the partition's end offset)
            leo = leos[tp]
            if leo is not None and o.offset > leo:
                out.append(RememberedOffset(CONSUMER_GROUP, str(log.path), o.offset, leo, group=g.group_id))
    return out


def _end_offset(log: PartitionLog | None, errors: list[str]) -> tuple[int | None, str | None]:
    if log is None:
        return None, None
    try:
        leo = log.log_end_offset
    except KafkaLogError as e:
        errors.append(f"{log.path}: log end offset: {e}")
        return None, None
    hw = log.high_watermark_checkpoint
    if hw is None:
        return leo, "logEndOffset"
    return min(hw, leo), "highWatermark"
