"""Message specs of KRaft metadata records (``__cluster_metadata``), transcribed from Kafka's
``metadata/src/main/resources/common/metadata/*.json`` (4.0, plus what 4.3 added). All are flexible from version 0.
``METADATA_RECORDS`` maps the api key (``MetadataRecordType`` id) to the spec.
"""

from __future__ import annotations

from kafkalog.storage.decoders.schema import Message
from kafkalog.storage.decoders.spec import Field as F


def _m(api_key: int, name: str, valid: str, fields: list[F]) -> Message:
    return Message(name, valid, "0+", fields, api_key=api_key)


def _endpoints() -> list[F]:
    return [F("Name", "string", "0+"), F("Host", "string", "0+"), F("Port", "uint16", "0+"),
            F("SecurityProtocol", "int16", "0+")]


def _features() -> list[F]:
    return [F("Name", "string", "0+"), F("MinSupportedVersion", "int16", "0+"),
            F("MaxSupportedVersion", "int16", "0+")]


_RECORDS = [
    _m(0, "RegisterBrokerRecord", "0-4", [
        F("BrokerId", "int32", "0+"),
        F("IsMigratingZkBroker", "bool", "2+", default=False),
        F("IncarnationId", "uuid", "0+"),
        F("BrokerEpoch", "int64", "0+"),
        F("EndPoints", "[]BrokerEndpoint", "0+", fields=_endpoints()),
        F("Features", "[]BrokerFeature", "0+", fields=_features()),
        F("Rack", "string", "0+", nullable="0+"),
        F("Fenced", "bool", "0+", default=True),
        F("InControlledShutdown", "bool", "1+", default=False),
        F("LogDirs", "[]uuid", "3+", tagged="3+", tag=0),
        F("CordonedLogDirs", "[]uuid", "4+", nullable="4+", tagged="4+", tag=1, default=None),  # 4.2+
    ]),
    _m(1, "UnregisterBrokerRecord", "0", [
        F("BrokerId", "int32", "0+"),
        F("BrokerEpoch", "int64", "0+"),
    ]),
    _m(2, "TopicRecord", "0", [
        F("Name", "string", "0+"),
        F("TopicId", "uuid", "0+"),
    ]),
    _m(3, "PartitionRecord", "0-2", [
        F("PartitionId", "int32", "0+", default=-1),
        F("TopicId", "uuid", "0+"),
        F("Replicas", "[]int32", "0+"),
        F("Isr", "[]int32", "0+"),
        F("RemovingReplicas", "[]int32", "0+"),
        F("AddingReplicas", "[]int32", "0+"),
        F("Leader", "int32", "0+", default=-1),
        F("LeaderRecoveryState", "int8", "0+", tagged="0+", tag=0, default=0),
        F("LeaderEpoch", "int32", "0+", default=-1),
        F("PartitionEpoch", "int32", "0+", default=-1),
        F("Directories", "[]uuid", "1+"),
        F("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tagged="2+", tag=1, default=None),
        F("LastKnownElr", "[]int32", "2+", nullable="2+", tagged="2+", tag=2, default=None),
    ]),
    _m(4, "ConfigRecord", "0", [
        F("ResourceType", "int8", "0+"),
        F("ResourceName", "string", "0+"),
        F("Name", "string", "0+"),
        F("Value", "string", "0+", nullable="0+"),
    ]),
    _m(5, "PartitionChangeRecord", "0-2", [
        F("PartitionId", "int32", "0+", default=-1),
        F("TopicId", "uuid", "0+"),
        F("Isr", "[]int32", "0+", nullable="0+", tagged="0+", tag=0, default=None),
        F("Leader", "int32", "0+", tagged="0+", tag=1, default=-2),
        F("Replicas", "[]int32", "0+", nullable="0+", tagged="0+", tag=2, default=None),
        F("RemovingReplicas", "[]int32", "0+", nullable="0+", tagged="0+", tag=3, default=None),
        F("AddingReplicas", "[]int32", "0+", nullable="0+", tagged="0+", tag=4, default=None),
        F("LeaderRecoveryState", "int8", "0+", tagged="0+", tag=5, default=-1),
        F("Directories", "[]uuid", "1+", nullable="1+", tagged="1+", tag=8, default=None),
        F("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tagged="2+", tag=6, default=None),
        F("LastKnownElr", "[]int32", "2+", nullable="2+", tagged="2+", tag=7, default=None),
    ]),
    _m(7, "FenceBrokerRecord", "0", [F("Id", "int32", "0+"), F("Epoch", "int64", "0+")]),
    _m(8, "UnfenceBrokerRecord", "0", [F("Id", "int32", "0+"), F("Epoch", "int64", "0+")]),
    _m(9, "RemoveTopicRecord", "0", [F("TopicId", "uuid", "0+")]),
    _m(10, "DelegationTokenRecord", "0", [
        F("Owner", "string", "0+"),
        F("Requester", "string", "0+"),
        F("Renewers", "[]string", "0+"),
        F("IssueTimestamp", "int64", "0+"),
        F("MaxTimestamp", "int64", "0+"),
        F("ExpirationTimestamp", "int64", "0+"),
        F("TokenId", "string", "0+"),
    ]),
    _m(11, "UserScramCredentialRecord", "0", [
        F("Name", "string", "0+"),
        F("Mechanism", "int8", "0+"),
        F("Salt", "bytes", "0+"),
        F("StoredKey", "bytes", "0+"),
        F("ServerKey", "bytes", "0+"),
        F("Iterations", "int32", "0+"),
    ]),
    _m(12, "FeatureLevelRecord", "0", [
        F("Name", "string", "0+"),
        F("FeatureLevel", "int16", "0+"),
    ]),
    _m(14, "ClientQuotaRecord", "0", [
        F("Entity", "[]EntityData", "0+", fields=[
            F("EntityType", "string", "0+"),
            F("EntityName", "string", "0+", nullable="0+"),
        ]),
        F("Key", "string", "0+"),
        F("Value", "float64", "0+"),
        F("Remove", "bool", "0+"),
    ]),
    _m(15, "ProducerIdsRecord", "0", [
        F("BrokerId", "int32", "0+"),
        F("BrokerEpoch", "int64", "0+", default=-1),
        F("NextProducerId", "int64", "0+"),
    ]),
    _m(17, "BrokerRegistrationChangeRecord", "0-3", [
        F("BrokerId", "int32", "0+"),
        F("BrokerEpoch", "int64", "0+"),
        F("Fenced", "int8", "0+", tagged="0+", tag=0),
        F("InControlledShutdown", "int8", "1+", tagged="1+", tag=1),
        F("LogDirs", "[]uuid", "2+", tagged="2+", tag=2),
        F("CordonedLogDirs", "[]uuid", "3+", nullable="3+", tagged="3+", tag=3, default=None),  # 4.2+
    ]),
    _m(18, "AccessControlEntryRecord", "0", [
        F("Id", "uuid", "0+"),
        F("ResourceType", "int8", "0+"),
        F("ResourceName", "string", "0+"),
        F("PatternType", "int8", "0+"),
        F("Principal", "string", "0+"),
        F("Host", "string", "0+"),
        F("Operation", "int8", "0+"),
        F("PermissionType", "int8", "0+"),
    ]),
    _m(19, "RemoveAccessControlEntryRecord", "0", [F("Id", "uuid", "0+")]),
    _m(20, "NoOpRecord", "0", []),
    _m(21, "ZkMigrationStateRecord", "0", [F("ZkMigrationState", "int8", "0+")]),
    _m(22, "RemoveUserScramCredentialRecord", "0", [
        F("Name", "string", "0+"),
        F("Mechanism", "int8", "0+"),
    ]),
    _m(23, "BeginTransactionRecord", "0", [
        F("Name", "string", "0+", nullable="0+", tagged="0+", tag=0, default=None),
    ]),
    _m(24, "EndTransactionRecord", "0", []),
    _m(25, "AbortTransactionRecord", "0", [
        F("Reason", "string", "0+", nullable="0+", tagged="0+", tag=0, default=None),
    ]),
    _m(26, "RemoveDelegationTokenRecord", "0", [F("TokenId", "string", "0+")]),
    _m(27, "RegisterControllerRecord", "0", [
        F("ControllerId", "int32", "0+"),
        F("IncarnationId", "uuid", "0+"),
        F("ZkMigrationReady", "bool", "0+"),
        F("EndPoints", "[]ControllerEndpoint", "0+", fields=_endpoints()),
        F("Features", "[]ControllerFeature", "0+", fields=_features()),
    ]),
    _m(28, "ClearElrRecord", "0", [F("TopicName", "string", "0+")]),
]

METADATA_RECORDS: dict[int, Message] = {m.api_key: m for m in _RECORDS if m.api_key is not None}

# ConfigRecord.ResourceType (org.apache.kafka.common.config.ConfigResource.Type)
CONFIG_RESOURCE_TYPES = {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS",
                         32: "GROUP"}
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
