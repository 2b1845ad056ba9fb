"""What dumping one non-``.log`` file found (:class:`FileDump`), and the checks all the dumps share."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.io.fs import absolute

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # DumpLogSegments --max-message-size

Dialect = Literal["4.3", "3.9"]


@dataclass
class FileDump:
    """What dumping one non-``.log`` file found (see the module doc)."""

    file: str
    kind: str
    entries: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    empty: bool = False
    #: None: not run; True/False: ``--index-sanity-check`` result
    passed_sanity_check: bool | None = None
    #: .index: (index offset, last offset of the batch at the entry's position), in discovery order
    index_mismatches: list[tuple[int, int]] = field(default_factory=list)
    #: .timeindex: (index timestamp, max record timestamp of the batch), in discovery order
    timestamp_mismatches: list[tuple[int, int]] = field(default_factory=list)
    #: .timeindex: (index timestamp, previously indexed timestamp)
    out_of_order_timestamps: list[tuple[int, int]] = field(default_factory=list)
    #: .timeindex: (indexed offset, last offset of the first batch reaching it, -1 if none)
    offsets_not_found: list[tuple[int, int]] = field(default_factory=list)
    #: [{"position": int | None, "reason": str}]: what Kafka's tool would crash on or reject; what the file's own
    #: checks found is ``{"position", "code", "facts"}`` instead of a ``reason`` (``kafkalog.facts`` words it)
    problems: list[dict[str, Any]] = field(default_factory=list)
    #: DumpLogSegments' stdout lines for this file (after "Dumping <file>")
    lines: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No problem and nothing for DumpLogSegments to report."""
        return not (self.problems or self.index_mismatches or self.timestamp_mismatches
                    or self.out_of_order_timestamps or self.offsets_not_found or self.passed_sanity_check is False)

    def problem(self, position: int | None, reason: str = "", *, code: str | None = None, **facts: Any) -> None:
        """A problem in words (``reason``), or as a ``code`` and its ``facts``."""
        self.problems.append({"position": position, "reason": reason} if code is None else
                             {"position": position, "code": code, "facts": facts})

    def text(self) -> list[str]:
        return list(self.lines)

    def report_lines(self) -> list[str]:
        """DumpLogSegments' end-of-run stderr reports for this file (Kafka prints them newest first for
        ``.index`` mismatches and in discovery order for the time-index lists)."""
        path = str(absolute(self.file))  # (a URL as it is)
        out: list[str] = []
        if self.index_mismatches:
            out.append(f"Mismatches in :{path}")
            out += [f"  Index offset: {a}, log offset: {b}" for a, b in reversed(self.index_mismatches)]
        if self.timestamp_mismatches:
            out.append(f"Found timestamp mismatch in :{path}")
            out += [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in self.timestamp_mismatches]
        if self.out_of_order_timestamps:
            out.append(f"Found out of order timestamp in :{path}")
            out += [f"  Index timestamp: {a}, Previously indexed timestamp: {b}"
                    for a, b in self.out_of_order_timestamps]
        if self.offsets_not_found:
            out.append("The following indexed offsets are not found in the log.")
            out += [f"Indexed offset: {a}, found log offset: {b}" for a, b in self.offsets_not_found]
        return out

    def json_objects(self) -> Iterator[dict[str, Any]]:
        """JSON Lines for ``kafkalog dump --json``: one object per entry (``file``, ``kind`` + the entry),
        then objects with an ``event`` key for file-level facts and reports."""
        for e in self.entries:
            yield {"file": self.file, "kind": self.kind, **e}
        if self.info:
            yield {"file": self.file, "kind": self.kind, "event": "info", **self.info}
        if self.empty:
            yield {"file": self.file, "kind": self.kind, "event": "empty"}
        if self.passed_sanity_check is not None:
            yield {"file": self.file, "kind": self.kind, "event": "sanityCheck", "passed": self.passed_sanity_check}
        for a, b in self.index_mismatches:
            yield {"file": self.file, "kind": self.kind, "event": "indexMismatch", "indexOffset": a, "logOffset": b}
        for a, b in self.timestamp_mismatches:
            yield {"file": self.file, "kind": self.kind, "event": "timestampMismatch", "indexTimestamp": a,
                   "logTimestamp": b}
        for a, b in self.out_of_order_timestamps:
            yield {"file": self.file, "kind": self.kind, "event": "outOfOrderTimestamp", "indexTimestamp": a,
                   "previousTimestamp": b}
        for a, b in self.offsets_not_found:
            yield {"file": self.file, "kind": self.kind, "event": "offsetNotFound", "indexOffset": a, "logOffset": b}
        for p in self.problems:
            yield {"file": self.file, "kind": self.kind, "event": "error", **p}

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file, "kind": self.kind, "entries": self.entries, "info": self.info, "empty": self.empty,
            "passedSanityCheck": self.passed_sanity_check, "indexMismatches": self.index_mismatches,
            "timestampMismatches": self.timestamp_mismatches, "outOfOrderTimestamps": self.out_of_order_timestamps,
            "offsetsNotFound": self.offsets_not_found, "problems": self.problems,
        }


def opt_long(v: int | None) -> str:
    return "OptionalLong.empty" if v is None else f"OptionalLong[{v}]"


def sanity_check(out: FileDump, idx) -> None:
    """``--index-sanity-check``: Kafka's ``sanityCheck`` of an offset or time index, as DumpLogSegments prints it."""
    try:
        idx.sanity_check()
        out.passed_sanity_check = True
        out.lines.append(f"{out.file} passed sanity check.")
    except KafkaLogError as e:
        out.passed_sanity_check = False
        out.problem(e.position, e.reason)
