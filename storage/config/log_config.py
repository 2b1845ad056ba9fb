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
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kafkalog.storage.codec.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kafkalog.storage.errors import ConfigError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
LONG_MAX = INT64_MAX

HOURS = 3600 * 1000
MINUTES = 60 * 1000

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
INTERNAL_TOPICS = (CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)

COMPRESSION_TYPES = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD, "producer": None}
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")

# --------------------------------------------------------------------------------------------- parsing


def _strip(v: Any) -> Any:
    return v.strip() if isinstance(v, str) else v


def _int(bits: int) -> Callable[[Any], int]:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def parse(v: Any) -> int:
        if isinstance(v, bool):
            raise ValueError("not a number")
        if isinstance(v, int):
            n = v
        else:
            s = _strip(str(v))
            if not s or not (s.lstrip("+-").isdigit() and s.isascii()):
                raise ValueError(f"{v!r} is not an integer")
            n = int(s)
        if not lo <= n <= hi:
            raise ValueError(f"{n} does not fit a {bits}-bit integer")
        return n

    return parse


def _double(v: Any) -> float:
    if isinstance(v, bool):
        raise ValueError("not a number")
    try:
        return float(_strip(v) if isinstance(v, str) else v)
    except (TypeError, ValueError):
        raise ValueError(f"{v!r} is not a number") from None


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise ValueError(f"{v!r} is not true or false")


def _string(v: Any) -> str:
    return str(v).strip()


def _list(v: Any) -> list[str]:
    if isinstance(v, (list, tuple)):
        return [str(x).strip() for x in v]
    s = str(v).strip()
    return [] if not s else [x.strip() for x in s.split(",")]


INT = _int(32)
LONG = _int(64)


def _optional_int(v: Any) -> int | None:
    return None if v is None else INT(v)


# ------------------------------------------------------------------------------------------ validators


def at_least(n: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= n else f"Value must be at least {n}"


def between(lo: float, hi: float) -> Callable[[Any], str | None]:
    return lambda v: None if lo <= v <= hi else f"Value must be no less than {lo} and no more than {hi}"


def one_of(*allowed: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in allowed else f"String must be one of: {', '.join(allowed)}"


def list_in(*allowed: str) -> Callable[[Any], str | None]:
    def check(v: list[str]) -> str | None:
        bad = [x for x in v if x not in allowed]
        return f"Invalid value(s) {bad}: must be among {list(allowed)}" if bad else None

    return check


def _gzip_level(v: int) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "Value must be -1 or between 1 and 9"


def _format_version(v: str) -> str | None:

    return None if re.fullmatch(r"\d+\.\d+(\.\d+)?(-IV\d+)?", v) else f"{v!r} is not a valid metadata version"


# ------------------------------------------------------------------------------------------ definitions


@dataclass(frozen=True)
class ConfigKey:
    name: str
    parse: Callable[[Any], Any]
    default: Any
    validator: Callable[[Any], str | None] | None = None
    # broker synonyms in precedence order: (name, multiplier to the topic unit)
    synonyms: tuple[tuple[str, int], ...] = ()
    doc: str = ""


def _k(name, parse, default, validator=None, synonyms=(), doc=""):
    syn = tuple((s, 1) if isinstance(s, str) else s for s in synonyms)
    return ConfigKey(name, parse, default, validator, syn, doc)


TOPIC_CONFIG_KEYS: dict[str, ConfigKey] = {k.name: k for k in (
    _k("segment.bytes", INT, 1024 * 1024 * 1024, at_least(14), ["log.segment.bytes"],
       "size at which a segment is rolled"),
    _k("segment.ms", LONG, 7 * 24 * HOURS, at_least(1), ["log.roll.ms", ("log.roll.hours", HOURS)],
       "age (by record time) at which a segment is rolled"),
    _k("segment.jitter.ms", LONG, 0, at_least(0), ["log.roll.jitter.ms", ("log.roll.jitter.hours", HOURS)]),
    _k("segment.index.bytes", INT, 10 * 1024 * 1024, at_least(4), ["log.index.size.max.bytes"],
       "preallocated size of .index and .timeindex"),
    _k("flush.messages", LONG, LONG_MAX, at_least(1), ["log.flush.interval.messages"]),
    _k("flush.ms", LONG, LONG_MAX, at_least(0), ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]),
    _k("retention.bytes", LONG, -1, None, ["log.retention.bytes"]),
    _k("retention.ms", LONG, 7 * 24 * HOURS, at_least(-1),
       ["log.retention.ms", ("log.retention.minutes", MINUTES), ("log.retention.hours", HOURS)]),
    _k("max.message.bytes", INT, 1024 * 1024 + 12, at_least(0), ["message.max.bytes"]),
    _k("index.interval.bytes", INT, 4096, at_least(0), ["log.index.interval.bytes"]),
    _k("delete.retention.ms", LONG, 24 * HOURS, at_least(0), ["log.cleaner.delete.retention.ms"]),
    _k("min.compaction.lag.ms", LONG, 0, at_least(0), ["log.cleaner.min.compaction.lag.ms"]),
    _k("max.compaction.lag.ms", LONG, LONG_MAX, at_least(1), ["log.cleaner.max.compaction.lag.ms"]),
    _k("file.delete.delay.ms", LONG, 60000, at_least(0), ["log.segment.delete.delay.ms"]),
    _k("min.cleanable.dirty.ratio", _double, 0.5, between(0, 1), ["log.cleaner.min.cleanable.ratio"]),
    _k("cleanup.policy", _list, ["delete"], list_in(*CLEANUP_POLICIES), ["log.cleanup.policy"]),
    _k("unclean.leader.election.enable", _bool, False, None, ["unclean.leader.election.enable"]),
    _k("min.insync.replicas", INT, 1, at_least(1), ["min.insync.replicas"]),
    _k("compression.type", _string, "producer", one_of(*COMPRESSION_TYPES), ["compression.type"]),
    _k("compression.gzip.level", INT, -1, _gzip_level, ["compression.gzip.level"]),
    _k("compression.lz4.level", INT, 9, between(1, 17), ["compression.lz4.level"]),
    _k("compression.zstd.level", INT, 3, between(-131072, 22), ["compression.zstd.level"]),
    _k("preallocate", _bool, False, None, ["log.preallocate"]),
    _k("message.format.version", _string, "3.0-IV1", _format_version, ["log.message.format.version"]),
    _k("message.timestamp.type", _string, "CreateTime", one_of(*TIMESTAMP_TYPES), ["log.message.timestamp.type"]),
    _k("message.timestamp.difference.max.ms", LONG, LONG_MAX, at_least(0),
       ["log.message.timestamp.difference.max.ms"]),
    _k("message.timestamp.before.max.ms", LONG, LONG_MAX, at_least(0), ["log.message.timestamp.before.max.ms"]),
    _k("message.timestamp.after.max.ms", LONG, LONG_MAX, at_least(0), ["log.message.timestamp.after.max.ms"]),
    _k("message.downconversion.enable", _bool, True, None, ["log.message.downconversion.enable"]),
    _k("leader.replication.throttled.replicas", _list, [], None, []),
    _k("follower.replication.throttled.replicas", _list, [], None, []),
    _k("remote.storage.enable", _bool, False, None, []),
    _k("local.retention.ms", LONG, -2, at_least(-2), ["log.local.retention.ms"]),
    _k("local.retention.bytes", LONG, -2, at_least(-2), ["log.local.retention.bytes"]),
    _k("remote.log.copy.disable", _bool, False, None, []),
    _k("remote.log.delete.on.disable", _bool, False, None, []),
    # Kafka 4.1+ (ConfigDef.defineInternal: no default, no validator): overrides segment.bytes for roll and
    # cleaner grouping (LogConfig.segmentSize())
    _k("internal.segment.bytes", _optional_int, None, None, []),
)}

DEFAULT_SOURCE = "Kafka default"

CLEANER_CONFIG_KEYS: dict[str, ConfigKey] = {k.name: k for k in (
    _k("log.cleaner.threads", INT, 1, at_least(0)),
    _k("log.cleaner.io.max.bytes.per.second", _double, 1.7976931348623157e308),
    _k("log.cleaner.dedupe.buffer.size", LONG, 128 * 1024 * 1024),
    _k("log.cleaner.io.buffer.size", INT, 512 * 1024, at_least(0)),
    _k("log.cleaner.io.buffer.load.factor", _double, 0.9),
    _k("log.cleaner.backoff.ms", LONG, 15000, at_least(0)),
    _k("log.cleaner.enable", _bool, True),
)}

BROKER_CONFIG_KEYS: dict[str, ConfigKey] = {k.name: k for k in (
    _k("producer.id.expiration.ms", INT, 86400000, at_least(1)),
    _k("num.recovery.threads.per.data.dir", INT, 1, at_least(1)),
    _k("offsets.topic.segment.bytes", INT, 100 * 1024 * 1024, at_least(1)),
    _k("offsets.topic.compression.codec", INT, 0, at_least(0)),
    _k("transaction.state.log.segment.bytes", INT, 100 * 1024 * 1024, at_least(1)),
    _k("log.retention.check.interval.ms", LONG, 300000, at_least(1)),
    _k("log.flush.offset.checkpoint.interval.ms", INT, 60000, at_least(0)),
    _k("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, at_least(0)),
)}


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


# ---------------------------------------------------------------------------------------------- files


def parse_properties(text: str) -> dict[str, str]:
    """A ``java.util.Properties`` subset good for ``server.properties`` and topic config files:
    ``#``/``!`` comments, ``=``/``:``/whitespace separators, ``\\`` line continuations and escapes."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _odd_backslashes(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        key_chars: list[str] = []
        j = 0
        while j < len(line):
            c = line[j]
            if c == "\\" and j + 1 < len(line):
                key_chars.append(_unescape(line[j + 1]))
                j += 2
                continue
            if c in "=: \t\f":
                break
            key_chars.append(c)
            j += 1
        rest = line[j:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        out["".join(key_chars)] = _unescape_value(rest)
    return out


def _odd_backslashes(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _unescape(c: str) -> str:
    return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c)


def _unescape_value(s: str) -> str:
    out = []
    j = 0
    while j < len(s):
        if s[j] == "\\" and j + 1 < len(s):
            if s[j + 1] == "u" and j + 6 <= len(s):
                try:
                    out.append(chr(int(s[j + 2:j + 6], 16)))
                    j += 6
                    continue
                except ValueError:
                    pass
            out.append(_unescape(s[j + 1]))
            j += 2
        else:
            out.append(s[j])
            j += 1
    return "".join(out)


def read_properties(path: str | os.PathLike) -> dict[str, str]:
    with open(path, "rb") as f:
        data = f.read(1 << 24)
    return parse_properties(data.decode("latin-1"))


def parse_overrides(pairs: Iterable[str], source: str = "--config") -> dict[str, str]:
    """``key=value`` strings (the CLI's repeated ``--config``) to a dict."""
    out = {}
    for p in pairs:
        if "=" not in p:
            raise ConfigError(f"expected key=value, got {p!r}", source)
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


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
