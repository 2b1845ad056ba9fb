"""Small emulations of the JDK parsing rules Kafka's text files depend on (private to the files layer)."""

from __future__ import annotations

import base64
import re
import unicodedata

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# java.util.regex \s and \S (ASCII whitespace only, unlike Python's Unicode-aware classes)
JAVA_WS = " \t\n\x0b\f\r"
_JAVA_WS_RE = re.compile("[ \t\n\x0b\f\r]+")


def parse_java_int(text: str, bits: int = 32) -> int:
    """``Integer.parseInt`` / ``Long.parseLong`` (radix 10): optional sign, then Unicode decimal digits only.

    Raises ``ValueError`` where Java throws ``NumberFormatException``.
    """
    if not text:
        raise ValueError("empty number")
    i = 0
    negative = False
    if text[0] in "+-":
        negative = text[0] == "-"
        i = 1
        if len(text) == 1:
            raise ValueError(f"not a number: {text!r}")
    value = 0
    for ch in text[i:]:
        d = unicodedata.decimal(ch, None)
        if d is None:
            raise ValueError(f"not a number: {text!r}")
        value = value * 10 + d
        if value > (1 << (bits - 1)):  # early exit keeps hostile 10^6-digit strings cheap
            raise ValueError(f"out of range: {text!r}")
    if negative:
        value = -value
    if not -(1 << (bits - 1)) <= value <= (1 << (bits - 1)) - 1:
        raise ValueError(f"out of range: {text!r}")
    return value


def java_split_ws(line: str) -> list[str]:
    """``line.split("\\\\s+")``: Java drops trailing empty strings but keeps a leading one."""
    parts = _JAVA_WS_RE.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    if not parts:  # "".split(...) gives [""] in Java; an all-whitespace line gives []
        return [""] if line == "" else []
    return parts


_LINE_RE = re.compile(r"([^\r\n]*)(\r\n|\r|\n|)")


def read_lines(text: str) -> list[tuple[str, int, str]]:
    """Split like ``BufferedReader.readLine``: terminators ``\\n``, ``\\r``, ``\\r\\n`` only.

    Returns ``(line, start_index, terminator)`` triples; a final line without terminator has ``""``.
    """
    out: list[tuple[str, int, str]] = []
    i = 0
    n = len(text)
    match = _LINE_RE.match
    while i < n:
        m = match(text, i)
        assert m is not None  # the pattern matches the empty string too
        out.append((m[1], i, m[2]))
        i = m.end()
    return out


# ---- org.apache.kafka.common.Uuid -----------------------------------------------------------------------

_B64URL_RE = re.compile(r"^[A-Za-z0-9_-]*={0,2}$")


def uuid_from_string(text: str) -> bytes:
    """``Uuid.fromString``: at most 24 chars of URL-safe base64 decoding to exactly 16 bytes."""
    if len(text) > 24:
        raise ValueError(f"input string with prefix {text[:24]!r} is too long to be decoded as a base64 UUID")
    if not _B64URL_RE.match(text):
        raise ValueError(f"{text!r} is not URL-safe base64")
    body = text.rstrip("=")
    if len(body) % 4 == 1:
        raise ValueError(f"{text!r} is not valid base64")
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except ValueError as e:  # binascii.Error
        raise ValueError(f"{text!r} is not valid base64: {e}") from None
    if len(raw) != 16:
        raise ValueError(f"input string {text!r} decoded as {len(raw)} bytes, not the 16 bytes of a UUID")
    return raw


def uuid_to_string(raw: bytes) -> str:
    """``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding (22 characters)."""
    if len(raw) != 16:
        raise ValueError("a Uuid is 16 bytes")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


ZERO_UUID = bytes(16)
