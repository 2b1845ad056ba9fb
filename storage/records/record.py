"""``Record``: one decoded record (v2 record, or a v0/v1 message seen as a record).

``PyRecord`` is the pure-Python dataclass (the reference, :mod:`.pyrecord`); ``Record`` is the compiled core's
twin when that is built (``codec.native``): same fields, constructor, equality, repr and pickling, but read-only
(its fields are member slots, read at C speed). The records layer builds the class of the backend in force
(:func:`record_class`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalog.storage.codec.native import active, core
from kafkalog.storage.records.pyrecord import Record as PyRecord

if TYPE_CHECKING:
    from kafkalog.storage.records.pyrecord import Record
else:
    Record = core.Record if core is not None else PyRecord


def record_class() -> type[PyRecord]:
    """The class the backend in force decodes records into (``PyRecord`` under ``backend("python")``)."""
    return Record if active().records is not None else PyRecord


__all__ = ["PyRecord", "Record", "record_class"]
