"""Message specs of ``__consumer_offsets`` records, transcribed from Kafka's
``group-coordinator/src/main/resources/common/message/*.json`` (4.0) and the embedded consumer protocol
(``clients/src/main/resources/common/message/ConsumerProtocol{Subscription,Assignment}.json``).

Keys are non-flexible; in the JSON specs each key's fields are valid in exactly the version equal to its
record type (4.0 renamed that number ``apiKey``; the bytes are the same), so they are declared ``0+`` here and
read at version 0. Values are read at the int16 version that prefixes them.
"""

from __future__ import annotations

from kafkalog.storage.decoders.coordinator import RecordType
from kafkalog.storage.decoders.schema import Message
from kafkalog.storage.decoders.spec import Field as F
from kafkalog.storage.decoders.spec import Versions

# ------------------------------------------------------------------------------------- classic groups

OFFSET_COMMIT_KEY = Message("OffsetCommitKey", "0-1", "none", [
    F("group", "string", "0+"),
    F("topic", "string", "0+"),
    F("partition", "int32", "0+"),
])

OFFSET_COMMIT_VALUE = Message("OffsetCommitValue", "0-4", "4+", [
    F("offset", "int64", "0+"),
    F("leaderEpoch", "int32", "3+", default=-1),
    F("metadata", "string", "0+"),
    F("commitTimestamp", "int64", "0+"),
    F("expireTimestamp", "int64", "1", default=-1),
    F("topicId", "uuid", "4+", tagged="4+", tag=0),  # 4.1+
])

GROUP_METADATA_KEY = Message("GroupMetadataKey", "2", "none", [F("group", "string", "0+")])

GROUP_METADATA_VALUE = Message("GroupMetadataValue", "0-4", "4+", [
    F("protocolType", "string", "0+"),
    F("generation", "int32", "0+"),
    F("protocol", "string", "0+", nullable="0+"),
    F("leader", "string", "0+", nullable="0+"),
    F("currentStateTimestamp", "int64", "2+", default=-1),
    F("members", "[]MemberMetadata", "0+", common="0+", fields=[
        F("memberId", "string", "0+"),
        F("groupInstanceId", "string", "3+", nullable="3+", default=None),
        F("clientId", "string", "0+"),
        F("clientHost", "string", "0+"),
        F("rebalanceTimeout", "int32", "1+", default=-1),
        F("sessionTimeout", "int32", "0+"),
        F("subscription", "bytes", "0+"),
        F("assignment", "bytes", "0+"),
    ]),
])

# ------------------------------------------------------------------ consumer groups (KIP-848), types 3-8, 16


def _group_key(name: str, member: bool = False) -> Message:
    fields = [F("GroupId", "string", "0+")]
    if member:
        fields.append(F("MemberId", "string", "0+"))
    return Message(name, "0", "none", fields)


def _topic_partitions(assignment_epochs: bool = False) -> list[F]:
    fields = [F("TopicId", "uuid", "0+"), F("Partitions", "[]int32", "0+")]
    if assignment_epochs:  # KIP-1251 (4.3); its JSON default is null, i.e. no default: the empty array
        fields.append(F("AssignmentEpochs", "[]int32", "0+", nullable="0+", tagged="0+", tag=0))
    return fields


CONSUMER_GROUP_METADATA_VALUE = Message("ConsumerGroupMetadataValue", "0", "0+", [
    F("Epoch", "int32", "0+"),
    F("MetadataHash", "int64", "0+", tagged="0+", tag=0, default=0),  # KIP-1101 (4.1)
])

_TOPIC_METADATA = [
    F("TopicId", "uuid", "0+"),
    F("TopicName", "string", "0+"),
    F("NumPartitions", "int32", "0+"),
    F("PartitionMetadata", "[]PartitionMetadata", "0+", fields=[
        F("Partition", "int32", "0+"),
        F("Racks", "[]string", "0+"),
    ]),
]

CONSUMER_GROUP_PARTITION_METADATA_VALUE = Message("ConsumerGroupPartitionMetadataValue", "0", "0+", [
    F("Topics", "[]TopicMetadata", "0+", fields=_TOPIC_METADATA),
])

CONSUMER_GROUP_MEMBER_METADATA_VALUE = Message("ConsumerGroupMemberMetadataValue", "0", "0+", [
    F("InstanceId", "string", "0+", nullable="0+"),
    F("RackId", "string", "0+", nullable="0+"),
    F("ClientId", "string", "0+"),
    F("ClientHost", "string", "0+"),
    F("SubscribedTopicNames", "[]string", "0+"),
    F("SubscribedTopicRegex", "string", "0+", nullable="0+"),
    F("RebalanceTimeoutMs", "int32", "0+", default=-1),
    F("ServerAssignor", "string", "0+", nullable="0+"),
    # JSON default null = no default = the empty struct, so Kafka writes a null here as tag 0 with value 0
    F("ClassicMemberMetadata", "ClassicMemberMetadata", "0+", nullable="0+", tagged="0+", tag=0, fields=[
          F("SessionTimeoutMs", "int32", "0+"),
          F("SupportedProtocols", "[]ClassicProtocol", "0+", fields=[
              F("Name", "string", "0+"),
              F("Metadata", "bytes", "0+"),
          ]),
      ]),
])

def _assignment_metadata(name: str) -> Message:
    return Message(name, "0", "0+", [
        F("AssignmentEpoch", "int32", "0+"),
        F("AssignmentTimestamp", "int64", "0+", tagged="0+", tag=0, default=0),  # 4.2+
    ])


CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = _assignment_metadata("ConsumerGroupTargetAssignmentMetadataValue")

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Message("ConsumerGroupTargetAssignmentMemberValue", "0", "0+", [
    F("TopicPartitions", "[]TopicPartition", "0+", fields=_topic_partitions()),
])

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message(
    "ConsumerGroupCurrentMemberAssignmentValue", "0", "0+", [
        F("MemberEpoch", "int32", "0+"),
        F("PreviousMemberEpoch", "int32", "0+"),
        F("State", "int8", "0+"),
        F("AssignedPartitions", "[]TopicPartitions", "0+", common="0+", fields=_topic_partitions(True)),
        F("PartitionsPendingRevocation", "[]TopicPartitions", "0+", common="0+", fields=_topic_partitions(True)),
    ])

CONSUMER_GROUP_REGULAR_EXPRESSION_KEY = Message("ConsumerGroupRegularExpressionKey", "0", "none", [
    F("GroupId", "string", "0+"),
    F("RegularExpression", "string", "0+"),
])

CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE = Message("ConsumerGroupRegularExpressionValue", "0", "0+", [
    F("Topics", "[]string", "0+"),
    F("Version", "int64", "0+"),
    F("Timestamp", "int64", "0+"),
])

# ------------------------------------------------------------------- share groups (KIP-932), types 9-15

SHARE_GROUP_PARTITION_METADATA_VALUE = Message("ShareGroupPartitionMetadataValue", "0", "0+", [
    F("Topics", "[]TopicMetadata", "0+", fields=_TOPIC_METADATA),
])

SHARE_GROUP_MEMBER_METADATA_VALUE = Message("ShareGroupMemberMetadataValue", "0", "0+", [
    F("RackId", "string", "0+", nullable="0+"),
    F("ClientId", "string", "0+"),
    F("ClientHost", "string", "0+"),
    F("SubscribedTopicNames", "[]string", "0+"),
])

SHARE_GROUP_METADATA_VALUE = Message("ShareGroupMetadataValue", "0", "0+", [
    F("Epoch", "int32", "0+"),
    F("MetadataHash", "int64", "0+"),  # 4.1+, not tagged (share groups were a preview)
])
SHARE_GROUP_METADATA_VALUE_4_0 = Message("ShareGroupMetadataValue", "0", "0+", [F("Epoch", "int32", "0+")])

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = _assignment_metadata("ShareGroupTargetAssignmentMetadataValue")

SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Message("ShareGroupTargetAssignmentMemberValue", "0", "0+", [
    F("TopicPartitions", "[]TopicPartition", "0+", fields=_topic_partitions()),
])

SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message("ShareGroupCurrentMemberAssignmentValue", "0", "0+", [
    F("MemberEpoch", "int32", "0+"),
    F("PreviousMemberEpoch", "int32", "0+"),
    F("State", "int8", "0+"),
    F("AssignedPartitions", "[]TopicPartitions", "0+", common="0+", fields=_topic_partitions()),
])

_TOPIC_PARTITIONS_INFO = [F("TopicId", "uuid", "0+"), F("TopicName", "string", "0+"), F("Partitions", "[]int32", "0+")]
_TOPIC_INFO = [F("TopicId", "uuid", "0+"), F("TopicName", "string", "0+")]

SHARE_GROUP_STATE_PARTITION_METADATA_VALUE = Message("ShareGroupStatePartitionMetadataValue", "0", "0+", [
    F("InitializingTopics", "[]TopicPartitionsInfo", "0+", common="0+", fields=_TOPIC_PARTITIONS_INFO),  # 4.1+
    F("InitializedTopics", "[]TopicPartitionsInfo", "0+", common="0+", fields=_TOPIC_PARTITIONS_INFO),
    F("DeletingTopics", "[]TopicInfo", "0+", common="0+", fields=_TOPIC_INFO),
])
SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_4_0 = Message("ShareGroupStatePartitionMetadataValue", "0", "0+", [
    F("InitializedTopics", "[]TopicPartitionsInfo", "0+", common="0+", fields=_TOPIC_PARTITIONS_INFO),
    F("DeletingTopics", "[]TopicInfo", "0+", common="0+", fields=_TOPIC_INFO),
])

# ------------------------------------------------------------------ streams groups (KIP-1071), types 17-23

_TASK_IDS = [
    F("SubtopologyId", "string", "0+"),
    F("Partitions", "[]int32", "0+"),
    F("AssignmentEpochs", "[]int32", "0+", nullable="0+", tagged="0+", tag=0),  # 4.3
]
_TASK_IDS_NO_EPOCHS = _TASK_IDS[:2]

STREAMS_GROUP_METADATA_VALUE = Message("StreamsGroupMetadataValue", "0", "0+", [
    F("Epoch", "int32", "0+"),
    F("MetadataHash", "int64", "0+"),
    F("ValidatedTopologyEpoch", "int32", "0+", tagged="0+", tag=0, default=-1),
    F("LastAssignmentConfigs", "[]LastAssignmentConfig", "0+", nullable="0+", tagged="0+", tag=1, common="0+",
      fields=[F("Key", "string", "0+"), F("Value", "string", "0+")]),
])

STREAMS_GROUP_MEMBER_METADATA_VALUE = Message("StreamsGroupMemberMetadataValue", "0", "0+", [
    F("InstanceId", "string", "0+", nullable="0+"),
    F("RackId", "string", "0+", nullable="0+"),
    F("ClientId", "string", "0+"),
    F("ClientHost", "string", "0+"),
    F("RebalanceTimeoutMs", "int32", "0+", default=-1),
    F("TopologyEpoch", "int32", "0+"),
    F("ProcessId", "string", "0+"),
    F("UserEndpoint", "Endpoint", "0+", nullable="0+", default=None, common="0+",
      fields=[F("Host", "string", "0+"), F("Port", "uint16", "0+")]),
    F("ClientTags", "[]KeyValue", "0+", common="0+", fields=[F("Key", "string", "0+"), F("Value", "string", "0+")]),
])

STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = _assignment_metadata("StreamsGroupTargetAssignmentMetadataValue")

STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Message("StreamsGroupTargetAssignmentMemberValue", "0", "0+", [
    F("ActiveTasks", "[]TaskIds", "0+", common="0+", fields=_TASK_IDS_NO_EPOCHS),
    F("StandbyTasks", "[]TaskIds", "0+", common="0+", fields=_TASK_IDS_NO_EPOCHS),
    F("WarmupTasks", "[]TaskIds", "0+", common="0+", fields=_TASK_IDS_NO_EPOCHS),
])

STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message("StreamsGroupCurrentMemberAssignmentValue", "0", "0+", [
    F("MemberEpoch", "int32", "0+"),
    F("PreviousMemberEpoch", "int32", "0+"),
    F("State", "int8", "0+"),
    F("ActiveTasks", "[]TaskIds", "0+", common="0+", fields=_TASK_IDS),
    F("StandbyTasks", "[]TaskIds", "0+", common="0+", fields=_TASK_IDS),
    F("WarmupTasks", "[]TaskIds", "0+", common="0+", fields=_TASK_IDS),
    F("ActiveTasksPendingRevocation", "[]TaskIds", "0+", common="0+", fields=_TASK_IDS),
    F("StandbyTasksPendingRevocation", "[]TaskIds", "0+", common="0+", fields=_TASK_IDS),
    F("WarmupTasksPendingRevocation", "[]TaskIds", "0+", common="0+", fields=_TASK_IDS),
])

_STREAMS_TOPIC_INFO = [
    F("Name", "string", "0+"),
    F("Partitions", "int32", "0+"),
    F("ReplicationFactor", "int16", "0+"),
    F("TopicConfigs", "[]TopicConfig", "0+", common="0+", fields=[F("key", "string", "0+"), F("value", "string", "0+")]),
]

STREAMS_GROUP_TOPOLOGY_VALUE = Message("StreamsGroupTopologyValue", "0", "0+", [
    F("Epoch", "int32", "0+"),
    F("Subtopologies", "[]Subtopology", "0+", fields=[
        F("SubtopologyId", "string", "0+"),
        F("SourceTopics", "[]string", "0+"),
        F("SourceTopicRegex", "[]string", "0+"),
        F("StateChangelogTopics", "[]TopicInfo", "0+", common="0+", fields=_STREAMS_TOPIC_INFO),
        F("RepartitionSinkTopics", "[]string", "0+"),
        F("RepartitionSourceTopics", "[]TopicInfo", "0+", common="0+", fields=_STREAMS_TOPIC_INFO),
        F("CopartitionGroups", "[]CopartitionGroup", "0+", fields=[
            F("SourceTopics", "[]int16", "0+"),
            F("SourceTopicRegex", "[]int16", "0+"),
            F("RepartitionSourceTopics", "[]int16", "0+"),
        ]),
    ]),
])

# record type -> RecordType(short name, key spec, value spec, older incompatible value specs tried when the
# current one does not fit the bytes exactly, value versions Kafka 4.3 accepts). GroupCoordinatorRecordSerde /
# CoordinatorRecordType. Type 0 keeps the pre-4.0 meaning (OffsetCommitValue at the value's version); 4.x reads
# it as LegacyOffsetCommitValue, whose only version, 0, has the same layout.
_t = RecordType


RECORD_TYPES: dict[int, RecordType] = {
    0: _t("OffsetCommit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE, (), Versions(0, 0)),
    1: _t("OffsetCommit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    2: _t("GroupMetadata", GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
    3: _t("ConsumerGroupMetadata", _group_key("ConsumerGroupMetadataKey"), CONSUMER_GROUP_METADATA_VALUE),
    4: _t("ConsumerGroupPartitionMetadata", _group_key("ConsumerGroupPartitionMetadataKey"),
          CONSUMER_GROUP_PARTITION_METADATA_VALUE),
    5: _t("ConsumerGroupMemberMetadata", _group_key("ConsumerGroupMemberMetadataKey", True),
          CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    6: _t("ConsumerGroupTargetAssignmentMetadata", _group_key("ConsumerGroupTargetAssignmentMetadataKey"),
          CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    7: _t("ConsumerGroupTargetAssignmentMember", _group_key("ConsumerGroupTargetAssignmentMemberKey", True),
          CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    8: _t("ConsumerGroupCurrentMemberAssignment", _group_key("ConsumerGroupCurrentMemberAssignmentKey", True),
          CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    9: _t("ShareGroupPartitionMetadata", _group_key("ShareGroupPartitionMetadataKey"),
          SHARE_GROUP_PARTITION_METADATA_VALUE),
    10: _t("ShareGroupMemberMetadata", _group_key("ShareGroupMemberMetadataKey", True),
           SHARE_GROUP_MEMBER_METADATA_VALUE),
    11: _t("ShareGroupMetadata", _group_key("ShareGroupMetadataKey"), SHARE_GROUP_METADATA_VALUE,
           (SHARE_GROUP_METADATA_VALUE_4_0,)),
    12: _t("ShareGroupTargetAssignmentMetadata", _group_key("ShareGroupTargetAssignmentMetadataKey"),
           SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    13: _t("ShareGroupTargetAssignmentMember", _group_key("ShareGroupTargetAssignmentMemberKey", True),
           SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    14: _t("ShareGroupCurrentMemberAssignment", _group_key("ShareGroupCurrentMemberAssignmentKey", True),
           SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    15: _t("ShareGroupStatePartitionMetadata", _group_key("ShareGroupStatePartitionMetadataKey"),
           SHARE_GROUP_STATE_PARTITION_METADATA_VALUE, (SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_4_0,)),
    16: _t("ConsumerGroupRegularExpression", CONSUMER_GROUP_REGULAR_EXPRESSION_KEY,
           CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE),
    17: _t("StreamsGroupMetadata", _group_key("StreamsGroupMetadataKey"), STREAMS_GROUP_METADATA_VALUE),
    19: _t("StreamsGroupMemberMetadata", _group_key("StreamsGroupMemberMetadataKey", True),
           STREAMS_GROUP_MEMBER_METADATA_VALUE),
    20: _t("StreamsGroupTargetAssignmentMetadata", _group_key("StreamsGroupTargetAssignmentMetadataKey"),
           STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    21: _t("StreamsGroupTargetAssignmentMember", _group_key("StreamsGroupTargetAssignmentMemberKey", True),
           STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    22: _t("StreamsGroupCurrentMemberAssignment", _group_key("StreamsGroupCurrentMemberAssignmentKey", True),
           STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    23: _t("StreamsGroupTopology", _group_key("StreamsGroupTopologyKey"), STREAMS_GROUP_TOPOLOGY_VALUE),
}

# ---------------------------------------------------------------------- embedded consumer protocol

_TOPIC_PARTITION = [F("Topic", "string", "0+"), F("Partitions", "[]int32", "0+")]

CONSUMER_PROTOCOL_SUBSCRIPTION = Message("ConsumerProtocolSubscription", "0-3", "none", [
    F("Topics", "[]string", "0+"),
    F("UserData", "bytes", "0+", nullable="0+", default=None),
    F("OwnedPartitions", "[]TopicPartition", "1+",
      fields=[F("Topic", "string", "1+"), F("Partitions", "[]int32", "1+")]),
    F("GenerationId", "int32", "2+", default=-1),
    F("RackId", "string", "3+", nullable="3+", default=None),
])

CONSUMER_PROTOCOL_ASSIGNMENT = Message("ConsumerProtocolAssignment", "0-3", "none", [
    F("AssignedPartitions", "[]TopicPartition", "0+", fields=_TOPIC_PARTITION),
    F("UserData", "bytes", "0+", nullable="0+", default=None),
])
