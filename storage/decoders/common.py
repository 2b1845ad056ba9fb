"""Helpers shared by the internal-topic decoders: Kafka UUID strings, Jackson-like compact JSON text,
Java's ``Double.toString`` and ``String.hashCode``, base64.

Everything here is pure and total on its documented inputs; malformed *bytes* are the schema reader's job.
"""

from __future__ import annotations

import base64
import math
import uuid
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from kafkalog.storage.files.java import uuid_to_string

__all__ = [
    "ZERO_UUID",
    "b64",
    "jackson_dumps",
    "java_double_str",
    "java_string_hash",
    "kafka_str_to_uuid",
    "to_int16",
    "to_int32",
    "uuid_to_kafka_str",
]

ZERO_UUID = uuid.UUID(int=0)


def uuid_to_kafka_str(u: uuid.UUID | bytes) -> str:
    """Render a UUID as Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    raw = u.bytes if isinstance(u, uuid.UUID) else bytes(u)
    if len(raw) != 16:
        raise ValueError(f"a UUID has 16 bytes, not {len(raw)}")
    return uuid_to_string(raw)


def kafka_str_to_uuid(s: str) -> uuid.UUID:
    """Parse Kafka's ``Uuid.fromString`` form (URL-safe base64, padding optional). Raises ``ValueError``."""
    if len(s) > 24:
        raise ValueError(f"Input string with prefix `{s[:24]}` is too long to be decoded as a base64 UUID")
    padded = s + "=" * (-len(s) % 4)
    try:
        raw = base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True)
    except (ValueError, UnicodeEncodeError) as e:
        raise ValueError(f"Input string `{s}` is not valid base64url: {e}") from None
    if len(raw) != 16:
        raise ValueError(
            f"Input string `{s}` decoded as {len(raw)} bytes, which is not equal to the expected "
            "16 bytes of a base64-encoded UUID"
        )
    return uuid.UUID(bytes=raw)


def b64(data: bytes | bytearray | memoryview) -> str:
    """Standard base64 with padding, as Jackson renders a ``BinaryNode``."""
    return base64.b64encode(bytes(data)).decode("ascii")


def to_int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def to_int16(x: int) -> int:
    x &= 0xFFFF
    return x - (1 << 16) if x & 0x8000 else x


def java_string_hash(s: str) -> int:
    """``java.lang.String.hashCode()`` (over UTF-16 code units, int32 overflow)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return to_int32(h)


def java_double_str(d: float) -> str:
    """``java.lang.Double.toString(d)`` (shortest-repr digits, as JDK 19+)."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0.0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    a = abs(d)
    sign = "-" if d < 0 else ""
    t = Decimal(repr(a)).as_tuple()
    digits = "".join(map(str, t.digits)).rstrip("0") or "0"
    exp10 = len(t.digits) - 1 + int(t.exponent)  # a = 0.digits * 10^(exp10 + 1)
    if len(digits) == 1:
        # Java picks, among 2-digit decimals, the one closest to the exact binary value (4.9E-324, not 5.0E-324)
        q = Decimal(a).scaleb(-exp10).quantize(Decimal("0.1"), rounding=ROUND_HALF_EVEN)
        if q >= 10:
            q, exp10 = (q / 10).quantize(Decimal("0.1"), rounding=ROUND_HALF_EVEN), exp10 + 1
        digits = str(q).replace(".", "").rstrip("0") or "0"
    if -3 <= exp10 < 7:
        if exp10 >= 0:
            whole = (digits[:exp10 + 1]).ljust(exp10 + 1, "0")
            frac = digits[exp10 + 1:] or "0"
        else:
            whole, frac = "0", "0" * (-exp10 - 1) + digits
        return f"{sign}{whole}.{frac}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp10}"


_ESC = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _quote(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in _ESC:
            out.append(_ESC[ch])
        elif o < 0x20:
            out.append(f"\\u{o:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def jackson_dumps(obj: Any) -> str:
    """Compact JSON text as Jackson's ``ObjectNode.toString()`` writes it: no spaces, non-ASCII kept,
    control characters as ``\\uXXXX`` with upper-case hex, doubles as Java's ``Double.toString``."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        if math.isnan(obj) or math.isinf(obj):
            return _quote(java_double_str(obj))
        return java_double_str(obj)
    if isinstance(obj, str):
        return _quote(obj)
    if isinstance(obj, dict):
        return "{" + ",".join(f"{_quote(str(k))}:{jackson_dumps(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, list | tuple):
        return "[" + ",".join(jackson_dumps(v) for v in obj) + "]"
    if isinstance(obj, uuid.UUID):
        return _quote(uuid_to_kafka_str(obj))
    if isinstance(obj, bytes | bytearray | memoryview):
        return _quote(b64(obj))
    raise TypeError(f"cannot render {type(obj).__name__} as JSON")
