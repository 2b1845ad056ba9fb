"""Plan-then-apply for every mutating engine (repair, retain, compact, convert, migrate).

An engine's ``plan(...)`` returns a :class:`Plan`: a list of :class:`Action` objects that can be rendered
(``--dry-run``, ``--json``) or applied. Applying keeps the originals of every file an action changes or deletes
in a :class:`Backup` (unless disabled), refuses a data dir whose ``.lock`` a live broker holds, and runs each
action's ``apply`` callable, which must itself be crash-safe (write new files, fsync, rename, fsync the dir).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import KafkaLogError, LockedError


@dataclass
class Action:
    """One step of a plan. ``files`` are the existing files the step changes or deletes (they are backed up)."""

    kind: str  # e.g. truncate, delete, rename, write, replace-segments, rebuild-index, checkpoint
    path: str  # the main file or partition dir concerned
    detail: str  # a human sentence: what and why
    files: list[str] = field(default_factory=list)
    bytes: int = 0  # bytes removed/reclaimed/truncated (0 when not applicable)
    records: int | None = None  # records dropped, when known
    apply: Callable[[], Any] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "path": self.path,
            "detail": self.detail,
            "files": list(self.files),
            "bytes": self.bytes,
            "records": self.records,
        }


@dataclass
class Plan:
    operation: str  # repair, retain, compact, convert, ...
    target: str  # data dir or partition dir
    actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # warnings, "the broker would refuse to start because ..."

    def add(self, action: Action) -> Action:
        self.actions.append(action)
        return action

    def extend(self, other: Plan) -> None:
        self.actions.extend(other.actions)
        self.notes.extend(other.notes)

    @property
    def empty(self) -> bool:
        return not self.actions

    @property
    def bytes(self) -> int:
        return sum(a.bytes for a in self.actions)

    def files(self) -> list[str]:
        seen: dict[str, None] = {}
        for a in self.actions:
            for f in a.files:
                seen.setdefault(f, None)
        return list(seen)

    def to_dicts(self) -> Iterator[dict]:
        for a in self.actions:
            d = a.to_dict()
            d["operation"] = self.operation
            d["target"] = self.target
            yield d

    def summary(self) -> dict:
        return {
            "operation": self.operation,
            "target": self.target,
            "actions": len(self.actions),
            "bytes": self.bytes,
            "records": sum(a.records or 0 for a in self.actions),
            "notes": list(self.notes),
        }


class Backup:
    """Keeps the original of every file before an action changes or deletes it.

    Files are stored under ``root`` at their path relative to ``base`` (the data dir). Files that an action
    renames or deletes are hard-linked (instant, no extra space); files that may be modified in place
    (truncation) are copied.
    """

    def __init__(self, root: str | os.PathLike, base: str | os.PathLike):
        self.root = Path(root)
        self.base = Path(base).resolve()
        self.saved: list[str] = []

    @staticmethod
    def default_root(data_dir: str | os.PathLike, operation: str) -> Path:
        d = Path(data_dir).resolve()
        stamp = time.strftime("%Y%m%dT%H%M%S")
        return d.parent / f"kafkalog-backup-{operation}-{d.name}-{stamp}"

    def preserve(self, path: str | os.PathLike, *, copy: bool = True) -> Path | None:
        p = Path(path).resolve()
        if not p.exists() or not p.is_file():
            return None
        try:
            rel = p.relative_to(self.base)
        except ValueError:
            rel = Path(p.name)
        dst = self.root / rel
        if dst.exists():
            return dst  # the first original wins
        dst.parent.mkdir(parents=True, exist_ok=True)
        if copy:
            shutil.copy2(p, dst)
        else:
            try:
                os.link(p, dst)
            except OSError:
                shutil.copy2(p, dst)
        self.saved.append(str(rel))
        return dst


@contextmanager
def data_dir_lock(data_dir: str | os.PathLike):
    """Hold the data dir's ``.lock`` the way the broker does; raise :class:`LockedError` if a live process has it."""
    try:
        from ..lock import DirLock  # provided by the files layer
    except ImportError:  # pragma: no cover - the files layer always ships lock.py
        yield
        return
    with DirLock(data_dir):
        yield


def apply_plan(plan: Plan, *, data_dir: str | os.PathLike, backup: Backup | None,
               progress: Callable[[Action], None] | None = None) -> list[Action]:
    """Apply every action in order, keeping originals in ``backup`` first. Returns the actions applied.

    The caller holds the data dir lock (see :func:`data_dir_lock`).
    """
    done: list[Action] = []
    for a in plan.actions:
        if backup is not None:
            for f in a.files:
                backup.preserve(f, copy=True)
        if a.apply is not None:
            try:
                a.apply()
            except KafkaLogError:
                raise
            except OSError as e:
                raise KafkaLogError(f"{a.kind} failed: {e.strerror or e}", a.path) from None
        done.append(a)
        if progress is not None:
            progress(a)
    return done


__all__ = ["Action", "Backup", "LockedError", "Plan", "apply_plan", "data_dir_lock"]
