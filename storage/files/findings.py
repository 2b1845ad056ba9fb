"""Findings: what validation reports instead of raising (verify is a pure function over files).

Lives in the files layer so that every layer above (log, logdir, verify) reports with the same type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Finding:
    """One observation about one file.

    ``file`` is the path of the file (or directory) concerned, ``position`` a byte position inside it when one
    applies, ``kind`` a short machine-readable category (``crc``, ``batch``, ``offsets``, ``index``,
    ``timeindex``, ``txnindex``, ``checkpoint``, ``snapshot``, ``metadata``, ``leftover``, ``layout``, ...),
    ``severity`` one of ``error``/``warning``/``info``.

    A note (what a plan, a load or a report says beside its results) is a finding too: its ``kind`` is a code
    (``cleaner.notEligible``, ``loader.split``...), ``file`` the path it is about, and ``facts`` its offsets, counts,
    bytes, timestamps (epoch ms) and config names/values as typed fields. Its words are made in ``kafkalog.tools``
    (``tools/package/facts.py``: one template per kind, over ``facts``); ``message`` is empty then.
    """

    file: str
    position: int | None
    kind: str
    severity: Severity
    message: str = ""
    facts: Mapping[str, Any] = field(default_factory=dict, hash=False)
    code: str | None = None  # what was found, when ``kind`` is a category (``checkpoint``...): its template's name

    def to_dict(self) -> dict:
        """JSON (docs/schemas/finding.schema.json): file, position, kind, severity and message. A structured
        finding's ``facts`` and ``code`` are the library's (the plan notes' JSON carries them:
        ``kafkalog.facts.to_json``)."""
        return {"file": self.file, "position": self.position, "kind": self.kind, "severity": self.severity,
                "message": self.message}

    def __str__(self) -> str:
        """For debugging: the message, or the code and facts of a structured finding (its words are
        ``kafkalog.facts.line``)."""
        where = self.file if self.position is None else f"{self.file}@{self.position}"
        what = self.message if self.message else f"{self.code or self.kind} {dict(self.facts)}"
        return f"{self.severity}: {where}: [{self.kind}] {what}"


def error(file, position: int | None, kind: str, message: str = "", *, code: str | None = None,
          **facts: Any) -> Finding:
    """An error about ``file``: in words (``message``), or as a ``code`` and its ``facts`` (kafkalog.tools words
    it)."""
    return Finding(str(file), position, kind, "error", message, facts, code)


def warning(file, position: int | None, kind: str, message: str = "", *, code: str | None = None,
            **facts: Any) -> Finding:
    return Finding(str(file), position, kind, "warning", message, facts, code)


def info(file, position: int | None, kind: str, message: str = "", *, code: str | None = None,
         **facts: Any) -> Finding:
    return Finding(str(file), position, kind, "info", message, facts, code)


@dataclass(frozen=True)
class Defect:
    """What a file's own checks found (``validate()``, ``problems()`` of the files layer), before anyone says
    about which file and how bad: a ``code`` (its template's name in ``kafkalog.facts``), its typed ``facts`` and
    the byte ``position`` in the file when one applies. :meth:`finding` makes it a finding about a file."""

    code: str
    facts: Mapping[str, Any] = field(default_factory=dict, hash=False)
    position: int | None = None

    def finding(self, file, kind: str, severity: Severity, position: int | None = None) -> Finding:
        """This defect as a finding of ``severity`` about ``file`` (at ``position``, else its own)."""
        return Finding(str(file), self.position if position is None else position, kind, severity, "", self.facts,
                       self.code)


def defect(code: str, position: int | None = None, **facts: Any) -> Defect:
    """A :class:`Defect` ``code`` with its ``facts`` (at ``position``)."""
    return Defect(code, facts, position)


def note(subject, kind: str, **facts: Any) -> Finding:
    """A structured note about ``subject`` (a path): ``kind`` is its code, ``facts`` its typed fields."""
    return Finding(str(subject), None, kind, "info", "", facts)
