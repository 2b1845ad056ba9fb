"""``partition.metadata`` (``PartitionMetadataFile``, KIP-516, docs/formats.md#partitionmetadata).

Exact content ``version: 0\\ntopic_id: <22-char base64url Uuid>`` with no trailing newline.
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass

from kafkalog.storage.errors import CorruptCheckpointError
from kafkalog.storage.files.checkpoints import read_bytes_bounded
from kafkalog.storage.files.java import (
    ZERO_UUID,
    parse_java_int,
    read_lines,
    uuid_from_string,
    uuid_to_string,
)
from kafkalog.storage.io.fileops import atomic_write

PARTITION_METADATA_FILE = "partition.metadata"
CURRENT_VERSION = 0
MAX_BYTES = 1 << 16
_SEP = re.compile(":[ \t\n\x0b\f\r]+")


@dataclass
class PartitionMetadata:
    topic_id: str  # as written (Uuid.toString)
    version: int = CURRENT_VERSION
    path: str | None = None
    raw: bytes | None = None  # the bytes read, when read from a file

    @property
    def topic_id_bytes(self) -> bytes:
        return uuid_from_string(self.topic_id)

    @classmethod
    def from_uuid_bytes(cls, raw: bytes) -> PartitionMetadata:
        return cls(uuid_to_string(raw))

    @classmethod
    def from_bytes(cls, data: bytes, path: str | os.PathLike | None = None) -> PartitionMetadata:
        """``PartitionMetadataReadBuffer.read``: errors are :class:`CorruptCheckpointError` with line numbers."""
        p = None if path is None else str(path)
        data = bytes(data)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptCheckpointError(f"invalid UTF-8 ({e.reason})", p, e.start) from None
        lines = read_lines(text)

        def bpos(i: int) -> int:
            return len(text[:i].encode("utf-8"))

        def value(n: int, key: str, what: str, missing_at: int) -> tuple[str, int]:
            """Line ``n``'s value (``<key>: <value>``) and the byte the line starts at."""
            if len(lines) < n:
                raise CorruptCheckpointError(f"line {n}: missing {key} line", p, missing_at)
            line, start, _ = lines[n - 1]
            parts = _SEP.split(line)
            if len(parts) != 2:
                raise CorruptCheckpointError(f"line {n}: malformed {what} line {line[:80]!r}", p, bpos(start))
            return parts[1], bpos(start)

        text_version, at = value(1, "version", "version", 0)
        try:
            version = parse_java_int(text_version)
        except ValueError:
            raise CorruptCheckpointError(f"line 1: malformed version {text_version[:40]!r}", p, at) from None
        if version < 0:
            raise CorruptCheckpointError(f"line 1: unrecognised version {version}", p, at)
        topic_id, at = value(2, "topic_id", "topic id", len(data))
        try:
            raw = uuid_from_string(topic_id)
        except ValueError as e:
            raise CorruptCheckpointError(f"line 2: invalid topic id: {e}", p, at) from None
        if raw == ZERO_UUID:
            raise CorruptCheckpointError("line 2: the zero topic id is not valid", p, at)
        return cls(topic_id, version, p, data)

    @staticmethod
    def broker_read_failure(data: bytes, path: str) -> tuple[str, bool]:
        """What the broker's ``PartitionMetadataFile.read`` (Kafka 3.9 and 4.x) throws on bytes :meth:`from_bytes`
        refuses, as ``(cause, offline)``. A missing line fails on ``null`` (``NullPointerException``) and a topic id
        ``Uuid.fromString`` refuses with an ``IllegalArgumentException``: neither is an ``IOException``, so the
        broker stops ("Error starting LogManager", checked with a real 4.3.1 broker). Anything else (bad UTF-8, a
        malformed line, a negative version, the zero id) is an ``IOException`` rethrown as a
        ``KafkaStorageException``: the log dir goes offline (``offline``)."""
        offline = (f"Error while reading partition metadata file {path}", True)
        npe = ("java.lang.NullPointerException", False)
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            return offline
        lines = read_lines(text)
        if not lines:
            return npe
        parts = _SEP.split(lines[0][0])
        if len(parts) != 2:
            return offline
        try:
            if parse_java_int(parts[1]) < 0:
                return offline
        except ValueError:
            return offline
        if len(lines) < 2:
            return npe
        parts = _SEP.split(lines[1][0])
        if len(parts) != 2:
            return offline
        tid = parts[1]
        try:
            uuid_from_string(tid)
        except ValueError:
            iae = "java.lang.IllegalArgumentException"
            if len(tid) > 24:
                return f"{iae}: Input string with prefix `{tid[:24]}` is too long to be decoded as a base64 UUID", False
            try:
                n = len(base64.urlsafe_b64decode(tid + "=" * (-len(tid) % 4)))
            except ValueError:
                return iae, False  # java.util.Base64's own message
            return (f"{iae}: Input string `{tid}` decoded as {n} bytes, which is not equal to the expected 16 bytes "
                    "of a base64-encoded UUID"), False
        return offline

    def to_bytes(self) -> bytes:
        return f"version: {self.version}\ntopic_id: {self.topic_id}".encode()

    @property
    def canonical(self) -> bool:
        return self.raw is None or self.raw == self.to_bytes()


def read_partition_metadata(path: str | os.PathLike) -> PartitionMetadata:
    return PartitionMetadata.from_bytes(read_bytes_bounded(path, MAX_BYTES), path)


def write_partition_metadata(path: str | os.PathLike, metadata: PartitionMetadata | str, *, fsync: bool = True) -> None:
    if isinstance(metadata, str):
        metadata = PartitionMetadata(metadata)
    if uuid_from_string(metadata.topic_id) == ZERO_UUID:
        raise ValueError("the zero topic id cannot be written")
    atomic_write(path, metadata.to_bytes(), fsync=fsync)
