"""Topic (``LogConfig``) and broker (``server.properties``) configuration with Kafka's names and defaults.

Resolution order, as the broker applies it (``LogConfig.fromProps``, ``ServerTopicConfigSynonyms``):

    Kafka defaults  <-  server.properties (``log.*`` broker synonyms)  <-  topic overrides

Broker synonyms are tried in Kafka's order and the first one present wins, e.g. for ``retention.ms``:
``log.retention.ms`` > ``log.retention.minutes`` > ``log.retention.hours``; for ``segment.ms``:
``log.roll.ms`` > ``log.roll.hours``. Internal topics (``__consumer_offsets``, ``__transaction_state``) are
created compacted with their own segment size (``offsets.topic.segment.bytes``,
``transaction.state.log.segment.bytes``), as the broker does when it creates them.

Every effective value remembers where it came from (:attr:`LogConfig.sources`: ``Kafka default``,
``server.properties (log.retention.hours)``, a ``__cluster_metadata`` record, ``--config``...), so a plan can show
an operator the setting that decided it before anything is deleted.

Values that Kafka's ``ConfigDef`` would reject raise :class:`ConfigError` naming the key and the source, and so do
unknown names a user typed (``--config``, a topic config file). Names the *broker* accepted but this version does
not model (a topic config of a newer Kafka, found in ``__cluster_metadata``) are kept in :attr:`LogConfig.unknown`
and reported, never fatal. ``internal.segment.bytes`` (Kafka 4.1+, an internal topic config the broker honours
for rolling and for the cleaner's grouping) is modelled: :attr:`LogConfig.segment_size` is Kafka's
``LogConfig.segmentSize()``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kafkalog.storage.config.config_def import (
    BROKER_CONFIG_KEYS,
    CLEANER_CONFIG_KEYS,
    COMPRESSION_TYPES,
    CONSUMER_OFFSETS_TOPIC,
    DEFAULT_SOURCE,
    INT32_MAX,
    LONG,
    LONG_MAX,
    TOPIC_CONFIG_KEYS,
    TRANSACTION_STATE_TOPIC,
    ConfigKey,
    _list,
)
from kafkalog.storage.config.properties import parse_overrides, read_properties
from kafkalog.storage.errors import ConfigError


def _render(v: Any) -> Any:
    return ",".join(v) if isinstance(v, list) else v


def _did_you_mean(name: str) -> str:

    close = difflib.get_close_matches(name, TOPIC_CONFIG_KEYS, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _coerce(key: ConfigKey, raw: Any, source: str) -> Any:
    try:
        value = key.parse(raw)
    except ValueError as e:
        raise ConfigError(f"Invalid value {raw!r} for configuration {key.name}: {e}", source) from None
    if key.validator is not None:
        problem = key.validator(value)
        if problem:
            raise ConfigError(f"Invalid value {raw!r} for configuration {key.name}: {problem}", source)
    return value


# -------------------------------------------------------------------------------------------- classes


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings (``CleanerConfig``)."""

    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_message_size: int = 1024 * 1024 + 12
    max_io_bytes_per_second: float = 1.7976931348623157e308
    backoff_ms: int = 15000
    enable_cleaner: bool = True

    @classmethod
    def from_props(cls, props: Mapping[str, Any], source: str = "server.properties") -> CleanerConfig:
        v = {name: _coerce(key, props[name], source) if name in props else key.default
             for name, key in CLEANER_CONFIG_KEYS.items()}
        max_msg = _coerce(TOPIC_CONFIG_KEYS["max.message.bytes"], props["message.max.bytes"], source) \
            if "message.max.bytes" in props else 1024 * 1024 + 12
        return cls(
            num_threads=v["log.cleaner.threads"],
            dedupe_buffer_size=v["log.cleaner.dedupe.buffer.size"],
            dedupe_buffer_load_factor=v["log.cleaner.io.buffer.load.factor"],
            io_buffer_size=v["log.cleaner.io.buffer.size"],
            max_message_size=max_msg,
            max_io_bytes_per_second=v["log.cleaner.io.max.bytes.per.second"],
            backoff_ms=v["log.cleaner.backoff.ms"],
            enable_cleaner=v["log.cleaner.enable"],
        )

    @property
    def dedupe_buffer_per_thread(self) -> int:
        """``LogCleaner``: ``min(dedupeBufferSize / numThreads, Int.MaxValue)``."""
        return min(self.dedupe_buffer_size // max(self.num_threads, 1), INT32_MAX)


@dataclass(frozen=True)
class LogConfig:
    """Effective configuration of one topic. ``values`` maps every topic config name to its typed value;
    ``sources`` says where each value that is not Kafka's default came from; ``unknown`` holds names the broker
    accepted that this version does not model (``name -> (value, source)``)."""

    values: Mapping[str, Any] = field(default_factory=lambda: {n: k.default for n, k in TOPIC_CONFIG_KEYS.items()})
    sources: Mapping[str, str] = field(default_factory=dict)
    unknown: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    # -------------------------------------------------------------------------------- construction
    @classmethod
    def defaults(cls) -> LogConfig:
        return cls()

    @property
    def overridden(self) -> frozenset[str]:
        """Names set explicitly (server.properties, dynamic broker configs, topic overrides)."""
        return frozenset(self.sources)

    def source(self, name: str) -> str:
        return self.sources.get(name, DEFAULT_SOURCE)

    @classmethod
    def from_topic_props(cls, props: Mapping[str, Any], base: LogConfig | None = None,
                         source: str = "topic config", *, strict: bool = True) -> LogConfig:
        """Topic overrides (topic config names) applied on top of ``base``.

        ``strict`` (input a person typed): an unknown name or an invalid value is a :class:`ConfigError`, as
        ``CreateTopics``/``AlterConfigs`` reject them. ``strict=False`` (configs the broker itself accepted,
        e.g. replayed from ``__cluster_metadata``): unknown names are kept in :attr:`unknown` and a value this
        version cannot parse is recorded in :attr:`problems` and leaves the previous value in place."""
        b = base or cls()
        values = dict(b.values)
        sources = dict(b.sources)
        unknown = dict(b.unknown)
        problems = list(b.problems)
        for name, raw in props.items():
            key = TOPIC_CONFIG_KEYS.get(name)
            if key is None:
                if strict:
                    raise ConfigError(f"Unknown topic config name: {name}{_did_you_mean(name)}", source)
                unknown[name] = (str(raw), source)
                continue
            try:
                values[name] = _coerce(key, raw, source)
            except ConfigError as e:
                if strict:
                    raise
                problems.append(f"{e.reason} ({source}); {name} stays {values[name]!r}")
                continue
            sources[name] = source
        cfg = cls(values, sources, unknown, tuple(problems))
        cfg.validate(source)
        return cfg

    @classmethod
    def broker_defaults(cls, server_props: Mapping[str, Any], source: str = "server.properties",
                        base: LogConfig | None = None) -> LogConfig:
        """The broker-wide default for every topic config, from its ``log.*`` synonyms in ``server_props`` (on
        top of ``base``: dynamic broker configs apply over server.properties)."""
        b = base or cls()
        values: dict[str, Any] = dict(b.values)
        sources = dict(b.sources)
        for name, key in TOPIC_CONFIG_KEYS.items():
            for syn, mult in key.synonyms:
                if syn in server_props:
                    no_check = mult != 1 or name == "retention.ms"  # log.retention.* have no validator
                    parse_key = ConfigKey(syn, key.parse if mult == 1 else LONG, None,
                                          None if no_check else key.validator)
                    v = _coerce(parse_key, server_props[syn], source)
                    if mult != 1:
                        v = v * mult
                        if v > LONG_MAX:
                            raise ConfigError(f"Invalid value for configuration {syn}: overflows a long", source)
                        problem = key.validator(v) if key.validator else None
                        if problem and not (name == "retention.ms" and v < 0):
                            raise ConfigError(f"Invalid value {server_props[syn]!r} for {syn}: {problem}", source)
                    if name == "retention.ms" and v < 0:
                        v = -1  # KafkaConfig.logRetentionTimeMillis: any negative value means unlimited
                    values[name] = v
                    sources[name] = f"{source} ({syn})"
                    break
        cfg = cls(values, sources, dict(b.unknown), b.problems)
        cfg.validate(source)
        return cfg

    def with_overrides(self, props: Mapping[str, Any], source: str = "topic config", *,
                       strict: bool = True) -> LogConfig:
        return LogConfig.from_topic_props(props, self, source, strict=strict)

    def describe(self, names: Iterable[str]) -> list[dict[str, Any]]:
        """``[{name, value, source}]`` for ``names`` (what decided a plan), then every unknown name."""
        out = [{"name": n, "value": _render(self.values[n]), "source": self.source(n)} for n in names]
        out += [{"name": n, "value": v, "source": f"{src}; not modelled by this kafkalog, ignored"}
                for n, (v, src) in sorted(self.unknown.items())]
        return out

    def validate(self, source: str | None = None) -> None:
        """``LogConfig.validateValues``."""
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ConfigError(
                f"conflict topic config setting min.compaction.lag.ms ({self.min_compaction_lag_ms}) > "
                f"max.compaction.lag.ms ({self.max_compaction_lag_ms})", source)
        if self.segment_index_bytes < 8:
            raise ConfigError(f"Invalid max index size: {self.segment_index_bytes} (segment.index.bytes must "
                              "hold at least one 8-byte offset index entry)", source)

    def get(self, name: str) -> Any:
        return self.values[name]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.values)

    # -------------------------------------------------------------------------------- typed views
    segment_bytes = property(lambda self: self.values["segment.bytes"])
    internal_segment_bytes = property(lambda self: self.values["internal.segment.bytes"])
    segment_ms = property(lambda self: self.values["segment.ms"])
    segment_jitter_ms = property(lambda self: self.values["segment.jitter.ms"])
    segment_index_bytes = property(lambda self: self.values["segment.index.bytes"])
    index_interval_bytes = property(lambda self: self.values["index.interval.bytes"])
    flush_messages = property(lambda self: self.values["flush.messages"])
    flush_ms = property(lambda self: self.values["flush.ms"])
    retention_ms = property(lambda self: self.values["retention.ms"])
    retention_bytes = property(lambda self: self.values["retention.bytes"])
    cleanup_policy = property(lambda self: list(self.values["cleanup.policy"]))
    min_cleanable_dirty_ratio = property(lambda self: self.values["min.cleanable.dirty.ratio"])
    min_compaction_lag_ms = property(lambda self: self.values["min.compaction.lag.ms"])
    max_compaction_lag_ms = property(lambda self: self.values["max.compaction.lag.ms"])
    delete_retention_ms = property(lambda self: self.values["delete.retention.ms"])
    file_delete_delay_ms = property(lambda self: self.values["file.delete.delay.ms"])
    max_message_bytes = property(lambda self: self.values["max.message.bytes"])
    message_timestamp_type = property(lambda self: self.values["message.timestamp.type"])
    message_format_version = property(lambda self: self.values["message.format.version"])
    compression_type = property(lambda self: self.values["compression.type"])
    preallocate = property(lambda self: self.values["preallocate"])

    @property
    def segment_size(self) -> int:
        """``LogConfig.segmentSize()``: ``internal.segment.bytes`` when set, else ``segment.bytes``. The broker
        rolls segments and the cleaner groups them by it."""
        internal = self.values["internal.segment.bytes"]
        return self.values["segment.bytes"] if internal is None else internal

    @property
    def remote_log_enabled(self) -> bool:
        """``remote.storage.enable``: the topic is tiered (its log may start in the remote store, below the first
        local segment)."""
        return bool(self.values["remote.storage.enable"])

    @property
    def compact(self) -> bool:
        return "compact" in self.values["cleanup.policy"]

    @property
    def delete(self) -> bool:
        return "delete" in self.values["cleanup.policy"]

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def codec(self) -> int | None:
        """Codec id the broker re-compresses to, or None for ``producer`` (keep the producer's codec)."""
        return COMPRESSION_TYPES[self.compression_type]

    @property
    def compression_level(self) -> int | None:
        name = self.compression_type
        if name in ("gzip", "lz4", "zstd"):
            return self.values[f"compression.{name}.level"]
        return None

    @property
    def max_segment_ms(self) -> int:
        """``LogConfig.maxSegmentMs``: compacted topics roll by ``max.compaction.lag.ms`` when smaller."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def max_index_entries(self) -> int:
        return self.segment_index_bytes // 8


@dataclass(frozen=True)
class BrokerConfig:
    """What a broker's ``server.properties`` says about logs: topic defaults, cleaner, and the few broker
    settings the storage engines use."""

    props: Mapping[str, str] = field(default_factory=dict)
    log_defaults: LogConfig = field(default_factory=LogConfig)
    cleaner: CleanerConfig = field(default_factory=CleanerConfig)
    settings: Mapping[str, Any] = field(
        default_factory=lambda: {n: k.default for n, k in BROKER_CONFIG_KEYS.items()})

    @classmethod
    def from_props(cls, props: Mapping[str, Any], source: str = "server.properties") -> BrokerConfig:
        settings = {n: _coerce(k, props[n], source) if n in props else k.default
                    for n, k in BROKER_CONFIG_KEYS.items()}
        return cls(dict(props), LogConfig.broker_defaults(props, source), CleanerConfig.from_props(props, source),
                   settings)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> BrokerConfig:
        return cls.from_props(read_properties(path), str(path))

    def with_dynamic(self, props: Mapping[str, Any], source: str) -> BrokerConfig:
        """Dynamic broker configs (``kafka-configs --entity-type brokers``, KRaft ``ConfigRecord``s of resource
        type BROKER) over this config: their ``log.*`` names change the topic defaults, as
        ``DynamicLogConfig`` applies them. Values the broker accepted are never fatal here."""
        if not props:
            return self
        try:
            defaults = LogConfig.broker_defaults(props, source, base=self.log_defaults)
        except ConfigError as e:
            defaults = replace(self.log_defaults, problems=(*self.log_defaults.problems, str(e)))
        return replace(self, log_defaults=defaults)

    @property
    def log_dirs(self) -> list[str]:
        raw = self.props.get("log.dirs") or self.props.get("log.dir") or "/tmp/kafka-logs"
        return _list(raw)

    @property
    def producer_id_expiration_ms(self) -> int:
        return self.settings["producer.id.expiration.ms"]

    @property
    def num_recovery_threads_per_data_dir(self) -> int:
        return self.settings["num.recovery.threads.per.data.dir"]

    def internal_topic_defaults(self, topic: str) -> dict[str, Any]:
        """The configs the broker sets when it auto-creates an internal topic."""
        if topic == CONSUMER_OFFSETS_TOPIC:
            return {"cleanup.policy": ["compact"], "compression.type": "producer",
                    "segment.bytes": self.settings["offsets.topic.segment.bytes"]}
        if topic == TRANSACTION_STATE_TOPIC:
            return {"cleanup.policy": ["compact"], "compression.type": "uncompressed",
                    "min.insync.replicas": 1, "unclean.leader.election.enable": False,
                    "segment.bytes": self.settings["transaction.state.log.segment.bytes"]}
        return {}

    def log_config(self, topic: str | None = None, overrides: Mapping[str, Any] | None = None,
                   source: str = "topic config") -> LogConfig:
        """Effective config of ``topic``: broker defaults <- internal-topic settings <- ``overrides``."""
        cfg = self.log_defaults
        if topic is not None:
            internal = self.internal_topic_defaults(topic)
            if internal:
                cfg = cfg.with_overrides(internal, f"the broker's settings for internal topic {topic}")
        if overrides:
            cfg = cfg.with_overrides(overrides, source)
        return cfg


def log_config_for(topic: str | None = None, *, server_properties: str | os.PathLike | Mapping | None = None,
                   topic_config_file: str | os.PathLike | None = None,
                   overrides: Mapping[str, Any] | Iterable[str] | None = None) -> LogConfig:
    """One call for tools: defaults <- server.properties <- topic config file <- ``--config`` overrides."""
    if server_properties is None:
        broker = BrokerConfig()
    elif isinstance(server_properties, Mapping):
        broker = BrokerConfig.from_props(server_properties)
    else:
        broker = BrokerConfig.from_file(server_properties)
    merged: dict[str, Any] = {}
    if topic_config_file is not None:
        merged.update(read_properties(topic_config_file))
    if overrides:
        merged.update(overrides if isinstance(overrides, Mapping) else parse_overrides(overrides))
    return broker.log_config(topic, merged)
