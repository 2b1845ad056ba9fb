import pytest

from kafkalog.storage.config.log_config import BrokerConfig, CleanerConfig, LogConfig, log_config_for
from kafkalog.storage.config.properties import parse_properties
from kafkalog.storage.errors import ConfigError


def test_defaults_match_kafka():
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.segment_index_bytes == 10485760
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604800000 and c.retention_bytes == -1
    assert c.cleanup_policy == ["delete"] and not c.compact
    assert c.max_message_bytes == 1048588
    assert c.codec is None and c.message_timestamp_type == "CreateTime"


def test_broker_synonyms_and_precedence():
    props = parse_properties("log.retention.hours=1\nlog.retention.minutes=3\nlog.roll.hours: 2\n"
                             "log.segment.bytes = 1000\n# comment\nlog.cleanup.policy=compact,delete\n")
    c = BrokerConfig.from_props(props).log_defaults
    assert c.retention_ms == 3 * 60000  # minutes beat hours
    assert c.segment_ms == 2 * 3600000
    assert c.segment_bytes == 1000
    assert c.compact and c.delete
    c2 = BrokerConfig.from_props({"log.retention.ms": "-5", "log.retention.hours": "1"}).log_defaults
    assert c2.retention_ms == -1


def test_topic_overrides_win_and_are_validated():
    c = log_config_for("t", server_properties={"log.segment.bytes": "5000"}, overrides=["segment.bytes=7000"])
    assert c.segment_bytes == 7000
    with pytest.raises(ConfigError, match="segment.bytes"):
        LogConfig.from_topic_props({"segment.bytes": "10"})
    with pytest.raises(ConfigError, match="Unknown topic config"):
        LogConfig.from_topic_props({"no.such": "1"})
    with pytest.raises(ConfigError, match="cleanup.policy"):
        LogConfig.from_topic_props({"cleanup.policy": "shred"})
    with pytest.raises(ConfigError, match="conflict"):
        LogConfig.from_topic_props({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_internal_topics_are_compacted():
    b = BrokerConfig.from_props({"offsets.topic.segment.bytes": "12345"})
    c = b.log_config("__consumer_offsets")
    assert c.compact and c.segment_bytes == 12345
    assert b.log_config("__transaction_state").compact
    assert not b.log_config("orders").compact


def test_max_segment_ms_and_cleaner_config():
    c = LogConfig.from_topic_props({"cleanup.policy": "compact", "max.compaction.lag.ms": "1000"})
    assert c.max_segment_ms == 1000
    cc = CleanerConfig.from_props({"log.cleaner.dedupe.buffer.size": "1000", "log.cleaner.threads": "2"})
    assert cc.dedupe_buffer_per_thread == 500
    assert cc.dedupe_buffer_load_factor == 0.9
