"""A decoded record (v2 record, or a v0/v1 message seen as a record): the pure-Python reference class.

Code names it :data:`kafkalog.storage.records.record.Record`, which is the compiled core's twin when that is built.
"""

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

