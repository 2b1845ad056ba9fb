"""Kafka's configuration definitions as data (``ConfigDef``, ``TopicConfig``, ``ServerLogConfigs``): every topic,
cleaner and broker key kafkalog models, with its type, default, validator and broker synonyms (in Kafka's
precedence order), and the parsers and validators they use. :mod:`~kafkalog.storage.config.log_config` resolves
them."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkalog.storage.codec.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD

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
