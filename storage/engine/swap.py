"""Kafka's segment replacement protocol and its crash recovery (``LocalLog.replaceSegments``,
``LogLoader.removeTempFilesAndCollectSwapFiles``).

Writers (cleaner, convert, overflow split) write each new segment as ``<base>.log.cleaned`` (+ ``.index.cleaned``,
``.timeindex.cleaned``, optional ``.txnindex.cleaned``; :class:`~kafkalog.storage.log.segment.SegmentWriter`),
fsync them, then :func:`replace_segments` swaps them in:

1. rename the new segments' files ``.cleaned`` -> ``.swap`` (descending base offset), fsync the dir;
2. rename every old segment's files to ``<name>.deleted`` (ascending), fsync the dir;
3. rename the new segments' files ``.swap`` -> final names, fsync the dir;
4. rename producer snapshots of old base offsets that no longer exist to ``.deleted``;
5. delete the ``.deleted`` files (offline there is no reader to wait for), unless asked to keep them.

A crash at any point leaves a directory that :func:`recover_swap_files` (and the broker's own loader) completes or
rolls back with nothing lost: a ``.swap`` file exists only once the complete new segment is durable.

In a plan the whole replacement is one operation, :class:`ReplaceSegments`, whose ``build`` writes the new
segments when it runs; :meth:`ReplaceSegments.plan_on` records it on a planned view with its effect on the
listing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, cast

from kafkalog.storage.errors import LogDirError
from kafkalog.storage.files.findings import note
from kafkalog.storage.files.names import CLEANED_FILE_SUFFIX as CLEANED
from kafkalog.storage.files.names import DELETED_FILE_SUFFIX as DELETED
from kafkalog.storage.files.names import SWAP_FILE_SUFFIX as SWAP
from kafkalog.storage.files.names import leading_offset, offset_file_name
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io import fileops
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.io.ops import Blob, Op, Reason
from kafkalog.storage.log.segment import SEGMENT_SUFFIXES, cleaned_name

CrashHook = Callable[[str], None]


def cleaned_path(partition_dir: str | os.PathLike, base_offset: int, suffix: str) -> Path:
    """Where a writer puts the new segment file ``suffix`` (``.log``, ``.index``...) before the swap."""
    return Path(partition_dir) / cleaned_name(base_offset, suffix)


def _noop(_: str) -> None:
    return None


def _rename(src: Path, dst: Path, hook: CrashHook, step: str) -> None:
    hook(step)
    fileops.rename(src, dst)


@dataclass
class ReplaceResult:
    renamed_to_deleted: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    installed: list[str] = field(default_factory=list)


def replace_segments(
    partition_dir: str | os.PathLike,
    new_bases: Iterable[int],
    old_bases: Iterable[int],
    *,
    keep_deleted: bool = False,
    crash_hook: CrashHook | None = None,
) -> ReplaceResult:
    """Swap the already-written ``.cleaned`` segments ``new_bases`` in for the segments ``old_bases``.

    ``crash_hook(step)`` is called before every rename/delete (tests raise from it to simulate a crash)."""
    d = Path(partition_dir)
    hook = crash_hook or _noop
    new = sorted(set(new_bases))
    old = sorted(set(old_bases))
    res = ReplaceResult()
    for base in new:
        if not cleaned_path(d, base, ".log").exists():
            raise LogDirError(f"new segment {offset_file_name(base, '.log' + CLEANED)} does not exist", str(d))
    # 1. .cleaned -> .swap, descending base offset
    for base in reversed(new):
        for suffix in SEGMENT_SUFFIXES:
            src = cleaned_path(d, base, suffix)
            if src.exists():
                _rename(src, d / (offset_file_name(base, suffix) + SWAP), hook, f"cleaned->swap {src.name}")
    fileops.fsync_dir(d)
    # 2. old segments -> .deleted, ascending
    for base in old:
        for suffix in SEGMENT_SUFFIXES:
            src = d / offset_file_name(base, suffix)
            if src.exists():
                dst = d / (src.name + DELETED)
                _rename(src, dst, hook, f"old->deleted {src.name}")
                res.renamed_to_deleted.append(dst.name)
    fileops.fsync_dir(d)
    # 3. .swap -> final
    for base in new:
        for suffix in SEGMENT_SUFFIXES:
            src = d / (offset_file_name(base, suffix) + SWAP)
            if src.exists():
                dst = d / offset_file_name(base, suffix)
                _rename(src, dst, hook, f"swap->final {src.name}")
                res.installed.append(dst.name)
    fileops.fsync_dir(d)
    # 4. snapshots of old bases that no longer exist
    remaining = {leading_offset(p.name) for p in d.glob("*.log")}
    for base in old:
        if base in remaining:
            continue
        snap = d / offset_file_name(base, ".snapshot")
        if snap.exists():
            dst = d / (snap.name + DELETED)
            _rename(snap, dst, hook, f"snapshot->deleted {snap.name}")
            res.renamed_to_deleted.append(dst.name)
    fileops.fsync_dir(d)
    # 5. physical deletion
    if not keep_deleted:
        for name in res.renamed_to_deleted:
            hook(f"delete {name}")
            fileops.unlink(d / name)
            res.deleted.append(name)
        fileops.fsync_dir(d)
    return res


# ------------------------------------------------------------------------------------ the composite op
@dataclass
class NewSegment:
    """One segment a :class:`ReplaceSegments` installs: its base offset and expected files (``suffix -> size``,
    None when the size is only known once built)."""

    base_offset: int
    files: dict[str, int | None]


class SegmentBuild:
    """Writes the ``.cleaned`` files of the new segments when a :class:`ReplaceSegments` runs; returns what it
    wrote (``[NewSegment]`` with real sizes) so the op can check it against the plan. Subclasses are picklable
    (they run in worker processes or Spark tasks)."""

    def __call__(self, partition_dir: Path) -> Any:
        raise NotImplementedError


class BlobBuild(SegmentBuild):
    """New segments whose bytes are all known when planning (blobs: byte ranges of an existing file, index bytes)."""

    def __init__(self, files: dict[str, Blob], mtime_ns: int | None = None):
        self.files = files  # .cleaned name -> content
        self.mtime_ns = mtime_ns

    def __call__(self, partition_dir: Path) -> Any:
        written = []
        for name, blob in self.files.items():
            with fileops.NewFile(partition_dir / name) as f:
                f.write(blob.data())
            written.append(name)
        if self.mtime_ns is not None:
            for name in written:
                fileops.set_mtime(partition_dir / name, self.mtime_ns)
        return None


@dataclass
class ReplaceSegments(Op):
    """Replace the segments ``sources`` by ``new`` (built by ``build``), with Kafka's swap protocol."""

    kind: ClassVar[str] = "replace-segments"
    sources: list[int] = field(default_factory=list)
    new: list[NewSegment] = field(default_factory=list)
    build: SegmentBuild | None = field(default=None, repr=False)
    source_files: list[str] = field(default_factory=list)  # existing files renamed away (names)
    source_bytes: int = 0
    keep_deleted: bool = False
    check: Callable[[Any], None] | None = field(default=None, repr=False, compare=False)

    def originals(self) -> list[tuple[str, bool]]:
        return [(str(Path(self.path) / n), False) for n in self.source_files]

    def run(self) -> Any:
        d = Path(self.path)
        assert self.build is not None
        try:
            built = self.build(d)
            made = getattr(built, "bases", None)
            if made is not None and list(made) != [s.base_offset for s in self.new]:
                raise LogDirError(f"the rewrite produced segments {list(made)}, the plan "
                                  f"{[s.base_offset for s in self.new]}", self.path)
            for seg in self.new:
                for suffix, size in seg.files.items():
                    p = cleaned_path(d, seg.base_offset, suffix)
                    if not p.exists() or (size is not None and p.stat().st_size != size):
                        raise LogDirError(f"the new segment differs from the plan ({p.name}: "
                                          f"{p.stat().st_size if p.exists() else 'missing'} bytes, planned {size})",
                                          str(p))
                extra = [s for s in SEGMENT_SUFFIXES if s not in seg.files
                         and cleaned_path(d, seg.base_offset, s).exists()]
                if extra:
                    raise LogDirError(f"the new segment has files the plan did not list: {extra}", self.path)
            fileops.fsync_dir(d)
        except BaseException:
            for seg in self.new:
                for suffix in SEGMENT_SUFFIXES:
                    p = cleaned_path(d, seg.base_offset, suffix)
                    if p.exists():
                        fileops.unlink(p)
            raise
        replace_segments(d, [s.base_offset for s in self.new], self.sources, keep_deleted=self.keep_deleted)
        return built

    def trace(self) -> tuple:
        return (self.kind, self.path, tuple(self.sources),
                tuple((s.base_offset, tuple(sorted(s.files))) for s in self.new))

    @property
    def bytes(self) -> int:
        out = sum(size or 0 for s in self.new for suffix, size in s.files.items() if suffix == ".log")
        return max(self.source_bytes - out, 0)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "sources": list(self.sources),
                "new": [{"baseOffset": s.base_offset, "files": {k.lstrip("."): v for k, v in s.files.items()}}
                        for s in self.new],
                "bytesBefore": self.source_bytes}

    def plan_on(self, view: DirView,
                contents: Mapping[str, Blob | int | None] | None = None) -> ReplaceSegments:
        """Record this op on ``view`` with its effect on the listing: the sources' segment files and snapshots
        go away, the new segments' files appear (``contents``: final name -> bytes or size)."""
        removes = list(self.source_files)
        new_bases = {s.base_offset for s in self.new}
        remaining = ({b for b in (leading_offset(n) for n in view.names() if n.endswith(".log"))} - set(self.sources)
                     | new_bases)
        for b in self.sources:
            snap = offset_file_name(b, ".snapshot")
            if b not in remaining and view.exists(snap):
                removes.append(snap)
                self.source_files.append(snap)
        removes, deleted = replacement_effect(view, removes, self.keep_deleted)
        creates: list[tuple[str, Blob | int | None]] = list(deleted)
        for s in self.new:
            for suffix, size in s.files.items():
                name = offset_file_name(s.base_offset, suffix)
                creates.append((name, (contents or {}).get(name, size)))
        view.add(self, removes=removes, creates=creates)
        return self


def replacement_effect(view: DirView, gone: list[str], keep_deleted: bool) -> tuple[list[str], list[tuple[str, int]]]:
    """What :func:`replace_segments` does to the listing besides the new segments: the files in ``gone`` are
    renamed ``.deleted`` (replacing any such leftover) and then removed, or kept as ``.deleted``."""
    removes = list(gone) + [n + DELETED for n in gone if view.exists(n + DELETED)]
    creates = [(n + DELETED, view.size(n)) for n in gone if view.exists(n)] if keep_deleted else []
    return removes, creates


def segment_files(view: DirView, base_offset: int) -> list[str]:
    """The existing files of segment ``base_offset`` (``.log``, ``.index``, ``.timeindex``, ``.txnindex``)."""
    return [n for n in (offset_file_name(base_offset, s) for s in SEGMENT_SUFFIXES) if view.exists(n)]


# ------------------------------------------------------------------------------------- crash recovery
@dataclass
class TempFileRecovery:
    """What the loader's temp-file step does to a partition directory."""

    deleted: list[str] = field(default_factory=list)  # files removed (.deleted, .cleaned, stale .swap, replaced)
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (.swap name, final name)

    @property
    def changed(self) -> bool:
        return bool(self.deleted or self.renamed)


def recover_swap_files(partition_dir: str | os.PathLike | DirView) -> TempFileRecovery:
    """Steps 1–2 of ``LogLoader.load`` on a partition dir (a planned view: the steps become plan ops; a path:
    they happen at once):

    * delete every ``*.deleted`` file (except KRaft ``*.checkpoint.deleted``);
    * delete ``.swap`` files whose base offset is >= the smallest ``.cleaned`` base offset, then all ``.cleaned``;
    * for the remaining ``.swap`` log files, delete every non-swap file whose leading number lies in
      ``[min swap base, max swap next offset)`` and strip the ``.swap`` suffix.
    """
    view = partition_dir if isinstance(partition_dir, DirView) else DirView(partition_dir, DirView.DIRECT)
    out = TempFileRecovery()
    names = view.names()
    cleaned = [n for n in names if n.endswith(CLEANED)]
    swaps = [n for n in names if n.endswith(SWAP)]
    min_cleaned = min((o for n in cleaned if (o := leading_offset(n)) is not None), default=None)

    def delete(name: str, why: Reason) -> None:
        out.deleted.append(name)
        view.delete(name, why)

    for n in names:
        if n.endswith(DELETED) and not n.endswith(".checkpoint" + DELETED):
            delete(n, note(view.path, "op.deletedFile"))
    valid_swaps = []
    for n in swaps:
        base = leading_offset(n)
        if min_cleaned is not None and base is not None and base >= min_cleaned:
            delete(n, note(view.path, "op.swapRolledBack"))
        else:
            valid_swaps.append(n)
    for n in cleaned:
        delete(n, note(view.path, "op.cleanedDeleted"))
    swap_logs = [n for n in valid_swaps if n.endswith(".log" + SWAP)]
    if swap_logs:
        # (a .log.swap file is named by its base offset; types only: cast has no runtime effect)
        lo = min(cast(int, leading_offset(n)) for n in swap_logs)
        hi = max(Segment.in_view(view, cast(int, leading_offset(n)), n).read_next_offset() for n in swap_logs)
        for n in view.names():
            if n.endswith(SWAP) or n in out.deleted:
                continue
            off = leading_offset(n)
            if off is not None and lo <= off < hi:  # any file with a leading number, as LogLoader
                delete(n, note(view.path, "op.swapReplaced", firstOffset=lo, lastOffset=hi - 1))
    for n in valid_swaps:
        final = n[: -len(SWAP)]
        out.renamed.append((n, final))
        view.rename(n, final, note(view.path, "op.swapCompleted"))
    return out
