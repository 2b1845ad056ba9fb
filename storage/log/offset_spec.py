"""Where to start and stop reading a partition, in the grammar operators know from ``rpk topic consume -o`` and
``kcat -o`` (an *offset spec*), resolved per partition through the log's offsets and time indexes.

Offsets (the end is exclusive)::

    start          from the log start offset (also: oldest, beginning)
    end            from the log end offset: nothing yet written (also: newest)
    :end           until the log end offset (everything)
    N  /  N:       from offset N
    :N             until offset N
    N1:N2          from N1 until N2
    +N             N after the log start offset
    -N             N before the log end offset (kcat's negative offsets too)

Timestamps (resolved like Kafka's ListOffsets by timestamp: the first record with a timestamp >= t; a time after
every record resolves to the log end offset)::

    @t  /  @t:     from t
    @:t            until t
    @t1:t2         from t1 until t2
    s@t  /  e@t    kcat's start and end timestamps (two specs may be given: one start, one end)

A timestamp is 13 digits (epoch milliseconds), 9 or 10 digits (epoch seconds), ``YYYY-MM-DD`` (a day, UTC),
RFC 3339 (``2024-05-01T12:00:00Z``, fractional seconds and ``+hh:mm`` offsets allowed), a duration (``-48h``,
``-1m30s``; as t1, or as t2 after a duration, relative to now; as t2 after a timestamp, relative to t1, so
``@2024-02-14:1h`` is one hour of that day), or ``end`` as t2. Units: ``ms``, ``s``, ``m``, ``h``, ``d``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from kafkalog.storage.errors import ConfigError
from kafkalog.storage.io.fs import as_path
from kafkalog.storage.log.partition import PartitionLog

_DURATION = re.compile(r"(\d+)(ms|s|m|hr|h|d)")
_DURATION_TERM = re.compile(r"(?:\d+(?:ms|s|m|hr|h|d))+")
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "hr": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True)
class Bound:
    """One end of a range: ``kind`` is ``start``/``end`` (the log's), ``offset``, ``after_start`` (+N),
    ``before_end`` (-N) or ``time`` (epoch ms); ``value`` the number where there is one."""

    kind: str
    value: int = 0


@dataclass(frozen=True)
class OffsetSpec:
    """``[start, end)`` of a partition, unresolved. ``text`` is what the operator wrote."""

    start: Bound
    end: Bound
    text: str

    def resolve(self, log_start: int, log_end: int, offset_for_time) -> tuple[int, int]:
        """``(from offset, to offset)`` for a partition with these offsets; ``offset_for_time(ms)`` is the
        partition's first offset with a timestamp >= ms, or None."""
        lo = _resolve(self.start, log_start, log_end, offset_for_time)
        hi = _resolve(self.end, log_start, log_end, offset_for_time)
        return lo, max(lo, hi)

    def resolve_in(self, plog) -> tuple[int, int]:
        """:meth:`resolve` for a :class:`~kafkalog.storage.log.partition.PartitionLog`: its log start and end offsets, and
        its time indexes for timestamps (``fetchOffsetByTimestamp``)."""

        def offset_for_time(ms: int) -> int | None:
            found = plog.lookup_timestamp(ms)
            return None if found is None else found[1]

        return self.resolve(plog.log_start_offset, plog.log_end_offset, offset_for_time)

    def resolve_in_dir(self, partition_dir) -> tuple[int, int]:
        """:meth:`resolve_in` for the partition in ``partition_dir`` (opened read-only for the time it takes)."""
        with PartitionLog(as_path(partition_dir)) as plog:
            return self.resolve_in(plog)

    def combine(self, other: OffsetSpec) -> OffsetSpec:
        """Two specs given together (kcat's ``-o s@t1 -o e@t2``): the later start and the earlier end."""
        start = other.start if self.start.kind == "start" else self.start
        end = other.end if self.end.kind == "end" else self.end
        return OffsetSpec(start, end, f"{self.text} {other.text}")


def _resolve(b: Bound, log_start: int, log_end: int, offset_for_time) -> int:
    if b.kind == "start":
        return log_start
    if b.kind == "end":
        return log_end
    if b.kind == "offset":
        return b.value
    if b.kind == "after_start":
        return min(log_start + b.value, log_end)
    if b.kind == "before_end":
        return max(log_end - b.value, log_start)
    found = offset_for_time(b.value)
    return log_end if found is None else found


START, END = Bound("start"), Bound("end")


def parse_offset_spec(text: str, *, now_ms: int | None = None) -> OffsetSpec:
    """Parse an offset spec (see the module docs); ``now_ms`` anchors relative durations (default: now)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    s = text.strip()
    if not s:
        raise ConfigError("empty offset spec (expected start, end, N, N1:N2, +N, -N, @t1:t2, s@t or e@t)")
    low = s.lower()
    if low in ("start", "oldest", "beginning", ":end"):
        return OffsetSpec(START, END, text)
    if low in ("end", "newest"):
        return OffsetSpec(END, END, text)
    if low.startswith(("s@", "e@")):
        t = _timestamp(s[2:], now, None, text)
        return OffsetSpec(Bound("time", t), END, text) if low[0] == "s" else OffsetSpec(START, Bound("time", t), text)
    if s.startswith("@"):
        return _time_range(s[1:], now, text)
    if s[0] in "+-" and s[1:].isdigit():
        n = int(s[1:])
        return OffsetSpec(Bound("after_start" if s[0] == "+" else "before_end", n), END, text)
    first, sep, second = s.partition(":")
    if not sep:
        return OffsetSpec(Bound("offset", _offset(first, text)), END, text)
    start = Bound("offset", _offset(first, text)) if first else START
    if not second or second.lower() == "end":
        return OffsetSpec(start, END, text)
    return OffsetSpec(start, Bound("offset", _offset(second, text)), text)


def _time_range(body: str, now: int, text: str) -> OffsetSpec:
    """``@t``, ``@t:``, ``@:t``, ``@t1:t2``; RFC 3339 times hold colons too, so the split is the first colon
    with a timestamp (or nothing) on each side."""
    try:
        return OffsetSpec(Bound("time", _timestamp(body, now, None, text)), END, text)
    except ConfigError:
        if ":" not in body:
            raise
    error: ConfigError | None = None
    for i, ch in enumerate(body):
        if ch != ":":
            continue
        first, second = body[:i], body[i + 1:]
        try:
            t1 = _timestamp(first, now, None, text) if first else None
            start = START if t1 is None else Bound("time", t1)
            if not second or second.lower() == "end":
                return OffsetSpec(start, END, text)
            # a duration as t2 is relative to t1 when t1 is a timestamp, else to now
            anchor = t1 if first and not _is_duration(first) else None
            return OffsetSpec(start, Bound("time", _timestamp(second, now, anchor, text)), text)
        except ConfigError as e:
            error = error or e
    raise error if error is not None else ConfigError(f"offset spec {text!r}: cannot read it")


def _offset(s: str, text: str) -> int:
    if not s.isdigit():
        raise ConfigError(f"offset spec {text!r}: {s!r} is not an offset (expected a non-negative integer, start, end, "
                          "+N, -N, or @timestamp)")
    return int(s)


def _is_duration(s: str) -> bool:
    body = s[1:] if s[:1] in "+-" else s
    return _DURATION_TERM.fullmatch(body) is not None


def parse_timestamp(text: str, *, now_ms: int | None = None) -> int:
    """Epoch ms of one timestamp of the grammar above (13 digits epoch ms, 9 or 10 digits epoch seconds,
    ``YYYY-MM-DD``, RFC 3339, or a duration relative to ``now_ms``, default now): what ``--now`` takes, the same
    rule as a ``@t`` of an offset spec."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return _timestamp(text, now, None, None)


def _timestamp(s: str, now: int, anchor: int | None, text: str | None) -> int:
    """Epoch ms of a timestamp term; durations are relative to ``anchor`` (a t1 timestamp) or ``now``. Errors
    name the offset spec ``text`` the term is part of, if any."""
    where = f"offset spec {text!r}: " if text is not None else ""
    s = s.strip()
    if s.isdigit():
        if len(s) == 13:
            return int(s)
        if len(s) in (9, 10):
            return int(s) * 1000
        raise ConfigError(f"{where}{s!r} is neither epoch milliseconds (13 digits) nor epoch seconds "
                          "(9 or 10 digits)")
    if _is_duration(s):
        sign = -1 if s.startswith("-") else 1
        body = s.lstrip("+-")
        ms = sum(int(n) * _UNITS[u] for n, u in _DURATION.findall(body))
        return (now if anchor is None else anchor) + sign * ms
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", s):
            return int(datetime.strptime(s, "%Y-%m-%d").replace(tzinfo=UTC).timestamp() * 1000)
        dt = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        dt = None
    if dt is None or "T" not in s.upper():
        raise ConfigError(f"{where}cannot read {s!r} as a timestamp (epoch ms, epoch seconds, "
                          "YYYY-MM-DD, RFC 3339 such as 2024-05-01T12:00:00Z, or a duration such as -48h)")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def parse_offset_specs(texts: list[str], *, now_ms: int | None = None) -> OffsetSpec | None:
    """Several specs given together (``-o`` repeated, kcat's ``-o s@T1 -o e@T2``) as one; None for none."""
    spec = None
    for text in texts:
        s = parse_offset_spec(text, now_ms=now_ms)
        spec = s if spec is None else spec.combine(s)
    return spec
