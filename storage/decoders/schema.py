"""A tiny schema-driven reader/writer for Kafka's generated message format (``*.json`` message specs).

Record payloads of Kafka's internal topics are "generated messages": a struct of fields, each present in a
range of versions. Non-flexible versions use int16-length strings, int32-length bytes and int32-count arrays
(-1 = null); flexible versions use compact forms (uvarint length+1, 0 = null) and end every struct with a
tagged-field section (uvarint count, then per field uvarint tag, uvarint size, data). Tagged fields are
written only when they differ from their default.

Schemas are *data*: :class:`Message` / :class:`Field` trees transcribed from the JSON specs (see
``offsets_schemas.py``, ``metadata_schemas.py``, ...; the spec types are :mod:`.spec`). One generic reader
(:mod:`.readable`), writer (:mod:`.writable`) and JSON converter (:mod:`.json_converter`) walk them:

* :meth:`Message.read` -> ``(dict, end_position)``; values are Python natives (``int``, ``bool``, ``float``,
  ``str``, ``bytes``, ``uuid.UUID``, ``None``, lists, nested dicts). Keys are Kafka's camelCase field names in
  schema order; tagged fields absent from the bytes get their default; unknown tagged fields are kept as
  ``"_unknownTaggedFields": [(tag, bytes), ...]``.
* :meth:`Message.write` -> bytes (for tests and tools that build payloads).
* :meth:`Message.to_json` -> what Kafka's generated ``*JsonConverter.write`` produces (tagged fields only when
  non-default, bytes as base64, UUIDs in Kafka's base64url form).

Like Kafka's generated code, reading never checks the version against ``validVersions`` (a version above the
highest known reads with the "N+" fields of the highest one); callers decide. Every length and count is
checked against the bytes that remain before anything is allocated, and every failure is a
:class:`CorruptRecordError` with the byte position.
"""


from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafkalog.storage.decoders.json_converter import _json_struct
from kafkalog.storage.decoders.readable import _read_struct, _Reader
from kafkalog.storage.decoders.spec import Field, Struct, Versions, _Ctx
from kafkalog.storage.decoders.writable import _write_struct

__all__ = ["Message"]


class Message:
    """A top-level message spec (one JSON file)."""

    __slots__ = ("api_key", "flexible", "name", "struct", "valid")

    def __init__(self, name: str, valid: str, flexible: str, fields: Sequence[Field], api_key: int | None = None):
        self.name = name
        self.valid = Versions.parse(valid)
        self.flexible = Versions.parse(flexible)
        self.struct = Struct(name, fields)
        self.api_key = api_key

    def __repr__(self) -> str:
        return f"Message({self.name}, valid={self.valid!r}, flexible={self.flexible!r})"

    def read(self, buf: bytes | bytearray | memoryview, version: int, pos: int = 0,
             end: int | None = None) -> tuple[dict[str, Any], int]:
        """Decode one message at ``buf[pos:end]``; returns the fields and the position after them."""
        if end is None:
            end = len(buf)
        r = _Reader(buf, pos, end)
        out = _read_struct(r, self.struct, _Ctx(version, self.flexible), self.valid)
        return out, r.p

    def write(self, data: Mapping[str, Any], version: int) -> bytes:
        out = bytearray()
        _write_struct(out, self.struct, data, _Ctx(version, self.flexible), self.valid)
        return bytes(out)

    def to_json(self, data: Mapping[str, Any], version: int) -> dict[str, Any]:
        return _json_struct(self.struct, data, _Ctx(version, self.flexible), self.valid)

    def defaults(self, version: int) -> dict[str, Any]:
        return self.struct.defaults(_Ctx(version, self.flexible), self.valid)

    def context(self, version: int) -> _Ctx:
        """The walk context for ``version`` (use with ``self.struct.plan(ctx, self.valid)``)."""
        return _Ctx(version, self.flexible)

    def is_flexible(self, version: int) -> bool:
        return self.flexible.member(version, self.valid)
