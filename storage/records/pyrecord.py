"""A decoded record (v2 record, or a v0/v1 message seen as a record)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Record:
    """One record. ``headers`` is a list of ``(key: str, value: bytes | None)``.

    ``offset`` and ``timestamp`` are absolute (timestamp already resolved for LogAppendTime batches).
    ``attributes``, ``timestamp_delta`` and ``offset_delta`` are the raw stored v2 fields, kept so that a batch
    can be rebuilt byte-exactly; for legacy messages ``attributes`` is the message attribute byte.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    attributes: int = 0
    timestamp_delta: int | None = None
    offset_delta: int | None = None
    sequence: int = -1
    magic: int = 2
    crc: int | None = None  # legacy messages only

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


#: the pure-Python Record (the reference); ``Record`` is the compiled core's twin when that is built: same
#: fields, constructor, equality, repr and pickling, but read-only (its fields are member slots, read at C speed)
PyRecord = Record

from .native import core as _core  # noqa: E402 (the choice depends on the class above)

if _core is not None:
    Record = _core.Record  # type: ignore[misc]  # same fields, constructor, equality and repr
