"""Findings: what validation reports instead of raising (verify is a pure function over files).

Lives in the files layer so that every layer above (log, logdir, verify) reports with the same type.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Finding:
    """One observation about one file.

    ``file`` is the path of the file (or directory) concerned, ``position`` a byte position inside it when one
    applies, ``kind`` a short machine-readable category (``crc``, ``batch``, ``offsets``, ``index``,
    ``timeindex``, ``txnindex``, ``checkpoint``, ``snapshot``, ``metadata``, ``leftover``, ``layout``, ...),
    ``severity`` one of ``error``/``warning``/``info``.
    """

    file: str
    position: int | None
    kind: str
    severity: Severity
    message: str

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        where = self.file if self.position is None else f"{self.file}@{self.position}"
        return f"{self.severity}: {where}: [{self.kind}] {self.message}"


def error(file, position: int | None, kind: str, message: str) -> Finding:
    return Finding(str(file), position, kind, "error", message)


def warning(file, position: int | None, kind: str, message: str) -> Finding:
    return Finding(str(file), position, kind, "warning", message)


def info(file, position: int | None, kind: str, message: str) -> Finding:
    return Finding(str(file), position, kind, "info", message)
