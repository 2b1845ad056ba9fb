"""JSON from files and streams people hand us, with bounds: no RecursionError traceback on deeply nested
input, no unbounded line read. Errors are :class:`ValueError` (callers turn them into their own
:class:`~kafkalog.storage.errors.KafkaLogError` with the file and position)."""

from __future__ import annotations

import base64
import binascii
import codecs
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import IO, Any, Literal, overload

from kafkalog.storage.io import fileops

MAX_LINE_BYTES = 512 << 20  # one JSON Lines record: a Kafka record's value (base64) plus fields


def loads(text: str | bytes) -> Any:
    """``json.loads``; input nested too deeply for the parser is a ``ValueError``, not a ``RecursionError``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def iter_lines(stream: IO[str], limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a text stream, refusing a line longer than ``limit`` characters before it is
    read whole (``ValueError`` naming the line). A file or stdin is read line by line from its bytes, so that a
    byte its encoding cannot decode is named by its line and its byte in the file (a text stream's decoder works
    on read-ahead chunks: its error names neither)."""
    raw = getattr(stream, "buffer", None)
    if raw is not None:
        yield from _iter_byte_lines(raw, getattr(stream, "encoding", None) or "utf-8",
                                    getattr(stream, "errors", None) or "strict", limit)
        return
    n = 0
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        n += 1
        if len(line) > limit and not line.endswith("\n"):
            raise ValueError(f"line {n} is longer than {limit} characters")
        yield n, line


def _iter_byte_lines(raw: IO[bytes], encoding: str, errors: str, limit: int) -> Iterator[tuple[int, str]]:
    """:func:`iter_lines` of a text stream's bytes, decoded as the stream would (its encoding and errors)."""
    n = pos = 0
    while True:
        line = raw.readline(limit + 1)
        if not line:
            return
        n += 1
        if len(line) > limit and not line.endswith(b"\n"):
            raise ValueError(f"line {n} is longer than {limit} bytes")
        try:
            text = line.decode(encoding, errors)
        except UnicodeDecodeError as e:
            name = codecs.lookup(encoding).name
            raise ValueError(f"line {n}: not {'UTF-8' if name == 'utf-8' else name} text (byte 0x{line[e.start]:02x} "
                             f"at byte {pos + e.start} of the file)") from None
        pos += len(line)
        yield n, text


#: the signed widths of Kafka's record fields, by the bits they are written in
INT64, INT32, INT16 = 64, 32, 16


@overload
def int_field(v: Any, field: str, bits: int = INT64, *, null: Literal[False] = False) -> int: ...
@overload
def int_field(v: Any, field: str, bits: int = INT64, *, null: bool) -> int | None: ...
def int_field(v: Any, field: str, bits: int = INT64, *, null: bool = False) -> int | None:
    """An integer field of a JSON line that must fit Kafka's signed ``bits``-bit field (``null`` allowed only if
    ``null``); anything else (text, a boolean, a float, out of range) is a ``ValueError`` that names the field."""
    if v is None and null:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"field {field!r}: expected an integer{' or null' if null else ''}, got {json.dumps(v)[:40]}")
    if not -(1 << (bits - 1)) <= v < 1 << (bits - 1):
        raise ValueError(f"field {field!r}: {v} does not fit a {bits}-bit signed integer")
    return v


def typed_field(v: Any, field: str, kind: type, *, null: bool = False) -> Any:
    """A text (``str``) or ``bool`` field of a JSON line, or ``null`` if allowed; otherwise a ``ValueError``."""
    if (v is None and null) or type(v) is kind:
        return v
    what = {str: "text", bool: "true or false"}.get(kind, kind.__name__)
    raise ValueError(f"field {field!r}: expected {what}{' or null' if null else ''}, got {json.dumps(v)[:40]}")


def header_fields(v: Any, decode, where: str = "") -> list[tuple[str, bytes | None]]:
    """The ``headers`` of a JSON line: a list of ``{"key": text, "value": ...}`` (``decode(value, field)`` reads
    the value), or null/absent for none."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise ValueError(f"field '{where}headers': expected a list, got {json.dumps(v)[:40]}")
    out = []
    for i, h in enumerate(v):
        if not isinstance(h, dict) or "key" not in h:
            raise ValueError(f"field '{where}headers[{i}]': expected {{\"key\": ..., \"value\": ...}}, "
                             f"got {json.dumps(h)[:40]}")
        out.append((typed_field(h["key"], f"{where}headers[{i}].key", str),
                    decode(h.get("value"), f"{where}headers[{i}].value")))
    return out


def b64_field(v: Any, field: str) -> bytes | None:
    """A base64 field of a JSON line (``null`` stays ``None``), decoded strictly: only the standard alphabet,
    correct padding, and the canonical encoding of its bytes (so that decoding and encoding again gives the
    same text); anything else is a ``ValueError`` that names the field."""
    if v is None:
        return None
    if not isinstance(v, str):
        raise ValueError(f"field {field!r}: expected base64 text or null, got {type(v).__name__}")
    try:
        raw = base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"field {field!r}: not valid base64: {v[:40]!r}") from None
    if base64.b64encode(raw).decode("ascii") != v:
        raise ValueError(f"field {field!r}: not canonical base64 (stray bits or padding): {v[:40]!r}")
    return raw


@contextlib.contextmanager
def text_output(out: IO[str] | str | os.PathLike) -> Iterator[tuple[IO[str], str | None]]:
    """Where JSON Lines go: a text stream as given, ``-`` for stdout, or a file path. A regular file is written
    beside it (``<path>.tmp``), fsynced and renamed over it at the end: a run that fails leaves no half-written
    file and an earlier one whole (a device or a FIFO is written in place). Yields ``(stream, path of the file
    written or None)``."""
    if not isinstance(out, (str, os.PathLike)):
        yield out, None
    elif str(out) == "-":
        yield sys.stdout, None
    elif os.path.exists(out) and not os.path.isfile(out):
        with open(out, "w", encoding="utf-8") as stream:
            yield stream, str(out)
    else:
        tmp = fileops.tmp_path(out)
        try:
            with open(tmp, "w", encoding="utf-8") as stream:
                yield stream, str(out)
                stream.flush()
                os.fsync(stream.fileno())
        except BaseException:
            fileops.unlink(tmp)
            raise
        fileops.rename(tmp, out)
