"""Decoders for the payloads of Kafka's internal topics: ``__consumer_offsets``, ``__transaction_state``,
``__cluster_metadata`` (and KRaft snapshots), ``__remote_log_metadata``, ``__share_group_state``, and control
records. See :mod:`.schema` for the generic
generated-message reader they share.

``parse_*`` return raw field values, ``decode_*`` the JSON-ready dicts DumpLogSegments' decoders print, and
``format_*`` DumpLogSegments' exact text (``dialect="4.3"`` = Kafka 4.3.1, ``"3.9"`` = Kafka 3.9.2).
"""

from kafkalog.storage.decoders.cluster_metadata import (
    MetadataRecord,
    MetadataState,
    broker_configs,
    decode_metadata_record,
    format_metadata_record,
    parse_metadata_record,
    topic_configs,
    topic_ids,
)
from kafkalog.storage.decoders.common import kafka_str_to_uuid, uuid_to_kafka_str
from kafkalog.storage.decoders.consumer_offsets import (
    decode_consumer_assignment,
    decode_consumer_subscription,
    decode_offsets_key,
    decode_offsets_record,
    decode_offsets_value,
    format_offsets_record,
    parse_offsets_key,
    parse_offsets_value,
)
from kafkalog.storage.decoders.coordinator import DIALECTS, Dialect
from kafkalog.storage.decoders.kraft_control import (
    ControlRecord,
    decode_control_record,
    format_control_record,
    parse_control_record,
)
from kafkalog.storage.decoders.remote_log_metadata import (
    decode_remote_log_metadata,
    format_remote_log_metadata,
    parse_remote_log_metadata,
)
from kafkalog.storage.decoders.share_group_state import (
    decode_share_group_state_record,
    format_share_group_state_record,
)
from kafkalog.storage.decoders.transaction_state import (
    decode_transaction_record,
    format_transaction_record,
    parse_transaction_key,
    parse_transaction_value,
)

__all__ = [
    "DIALECTS",
    "ControlRecord",
    "Dialect",
    "MetadataRecord",
    "MetadataState",
    "broker_configs",
    "decode_consumer_assignment",
    "decode_consumer_subscription",
    "decode_control_record",
    "decode_metadata_record",
    "decode_offsets_key",
    "decode_offsets_record",
    "decode_offsets_value",
    "decode_remote_log_metadata",
    "decode_share_group_state_record",
    "decode_transaction_record",
    "format_control_record",
    "format_metadata_record",
    "format_offsets_record",
    "format_remote_log_metadata",
    "format_share_group_state_record",
    "format_transaction_record",
    "kafka_str_to_uuid",
    "parse_control_record",
    "parse_metadata_record",
    "parse_offsets_key",
    "parse_offsets_value",
    "parse_remote_log_metadata",
    "parse_transaction_key",
    "parse_transaction_value",
    "topic_configs",
    "topic_ids",
    "uuid_to_kafka_str",
]
