"""The text framing shared by Kafka's checkpoint files (``CheckpointFile``): ``version NL count NL entries``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from kafkalog.storage.errors import CorruptCheckpointError
from kafkalog.storage.files.java import parse_java_int, read_lines

T = TypeVar("T")

Form = Literal["empty", "version-only", "full"]


def checkpoint_error(reason: str, path, position: int | None, line: int | None) -> CorruptCheckpointError:
    if line is not None:
        reason = f"line {line}: {reason}"
    err = CorruptCheckpointError(reason, path=None if path is None else str(path), position=position)
    err.line = line  # type: ignore[attr-defined]
    return err


def decode_utf8(data: bytes, path) -> str:
    """Strict UTF-8 as ``Files.newBufferedReader`` (malformed input is an error, with its byte position)."""
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        line = bytes(data[: e.start]).count(b"\n") + 1
        raise checkpoint_error(f"invalid UTF-8 ({e.reason})", path, e.start, line) from None


@dataclass
class ParsedCheckpoint(Generic[T]):
    entries: list[T]
    form: Form
    newline: str
    canonical: bool  # writing the entries back gives the same bytes


def parse_checkpoint(
    data: bytes,
    version: int,
    parse_entry: Callable[[str], T],
    format_entry: Callable[[T], str],
    path=None,
) -> ParsedCheckpoint[T]:
    """``CheckpointReadBuffer.read``. ``parse_entry`` raises ``ValueError`` for a malformed line.

    Errors are :class:`CorruptCheckpointError` with the 1-based line number (``err.line``) and the byte
    position of the line's start.
    """
    text = decode_utf8(data, path)
    lines = read_lines(text)
    newline = next((t for _, _, t in lines if t), "\n")

    def bpos(char_index: int) -> int:
        return len(text[:char_index].encode("utf-8"))

    if not lines:
        return ParsedCheckpoint([], "empty", newline, len(data) == 0)
    first, start, _ = lines[0]
    try:
        read_version = parse_java_int(first)
    except ValueError:
        raise checkpoint_error(f"malformed line {first[:80]!r}", path, bpos(start), 1) from None
    if read_version != version:
        raise checkpoint_error(f"unrecognised version {read_version}, expected {version}", path, bpos(start), 1)
    entries: list[T] = []
    if len(lines) == 1:
        parsed = ParsedCheckpoint(entries, "version-only", newline, False)
    else:
        second, start, _ = lines[1]
        try:
            expected = parse_java_int(second)
        except ValueError:
            raise checkpoint_error(f"malformed line {second[:80]!r}", path, bpos(start), 2) from None
        if expected < 0:
            raise checkpoint_error(f"negative entry count {expected}", path, bpos(start), 2)
        for i, (line, start, _) in enumerate(lines[2:], start=3):
            try:
                entries.append(parse_entry(line))
            except ValueError as e:
                raise checkpoint_error(f"malformed line {line[:80]!r} ({e})", path, bpos(start), i) from None
        if len(entries) != expected:
            raise checkpoint_error(
                f"expected {expected} entries but found {len(entries)}", path, bpos(lines[1][1]), 2
            )
        parsed = ParsedCheckpoint(entries, "full", newline, False)
    parsed.canonical = format_checkpoint(parsed.entries, version, format_entry, newline, parsed.form) == bytes(data)
    return parsed


def format_checkpoint(
    entries: list[T], version: int, format_entry: Callable[[T], str], newline: str = "\n", form: Form = "full"
) -> bytes:
    """``CheckpointFile.write`` content: every line terminated by ``newline`` (the JVM line separator)."""
    if form == "empty" and not entries:
        return b""
    if form == "version-only" and not entries:
        return f"{version}{newline}".encode()
    parts = [str(version), str(len(entries))]
    parts.extend(format_entry(e) for e in entries)
    return (newline.join(parts) + newline).encode("utf-8")
