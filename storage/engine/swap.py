"""Kafka's segment replacement protocol and its crash recovery (spec 50-cleaner §9, 00-layout §3,
40-log-engine §5.2; ``LocalLog.replaceSegments``, ``LogLoader.removeTempFilesAndCollectSwapFiles``).

Writers (cleaner, convert, overflow split) write each new segment as ``<base>.log.cleaned`` (+ ``.index.cleaned``,
``.timeindex.cleaned``, optional ``.txnindex.cleaned``), fsync them, then call :func:`replace_segments`:

1. rename the new segments' files ``.cleaned`` -> ``.swap`` (descending base offset), fsync the dir;
2. rename every old segment's files to ``<name>.deleted`` (ascending), fsync the dir;
3. rename the new segments' files ``.swap`` -> final names, fsync the dir;
4. rename producer snapshots of old base offsets that no longer exist to ``.deleted``;
5. delete the ``.deleted`` files (offline there is no reader to wait for), unless asked to keep them.

A crash at any point leaves a directory that :func:`recover_swap_files` (and the broker's own loader) completes or
rolls back with nothing lost: a ``.swap`` file exists only once the complete new segment is durable.
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LogDirError
from ..records.reader import iter_batches

CLEANED, SWAP, DELETED = ".cleaned", ".swap", ".deleted"
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")
_LEADING_NUMBER = re.compile(r"^(\d+)\.")

CrashHook = Callable[[str], None]


def offset_file_name(offset: int, suffix: str) -> str:
    """``<20-digit offset><suffix>`` as ``LogFileUtils.filenamePrefixFromOffset``."""
    return f"{offset:020d}{suffix}"


def leading_offset(name: str) -> int | None:
    m = _LEADING_NUMBER.match(name)
    return int(m.group(1)) if m else None


def fsync_dir(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def cleaned_path(partition_dir: str | os.PathLike, base_offset: int, suffix: str) -> Path:
    """Where a writer puts the new segment file ``suffix`` (``.log``, ``.index``...) before the swap."""
    return Path(partition_dir) / (offset_file_name(base_offset, suffix) + CLEANED)


def read_next_offset(log_path: str | os.PathLike, base_offset: int) -> int:
    """The next offset after the last complete batch of a ``.log`` (``LogSegment.readNextOffset``)."""
    size = os.path.getsize(log_path)
    if size == 0:
        return base_offset
    nxt = base_offset
    with open(log_path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for b in iter_batches(mm, path=str(log_path)):
            nxt = b.next_offset
            del b  # no view may outlive the mmap
    return nxt


def _noop(_: str) -> None:
    return None


def _rename(src: Path, dst: Path, hook: CrashHook, step: str) -> None:
    hook(step)
    os.replace(src, dst)


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

    ``crash_hook(step)`` is called before every rename/delete (tests raise from it to simulate a crash).
    """
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
    fsync_dir(d)
    # 2. old segments -> .deleted, ascending
    for base in old:
        for suffix in SEGMENT_SUFFIXES:
            src = d / offset_file_name(base, suffix)
            if src.exists():
                dst = d / (src.name + DELETED)
                _rename(src, dst, hook, f"old->deleted {src.name}")
                res.renamed_to_deleted.append(dst.name)
    fsync_dir(d)
    # 3. .swap -> final
    for base in new:
        for suffix in SEGMENT_SUFFIXES:
            src = d / (offset_file_name(base, suffix) + SWAP)
            if src.exists():
                dst = d / offset_file_name(base, suffix)
                _rename(src, dst, hook, f"swap->final {src.name}")
                res.installed.append(dst.name)
    fsync_dir(d)
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
    fsync_dir(d)
    # 5. physical deletion
    if not keep_deleted:
        for name in res.renamed_to_deleted:
            hook(f"delete {name}")
            (d / name).unlink(missing_ok=True)
            res.deleted.append(name)
        fsync_dir(d)
    return res


@dataclass
class TempFileRecovery:
    """What the loader's temp-file step does (or did) to a partition directory."""

    deleted: list[str] = field(default_factory=list)  # files removed (.deleted, .cleaned, stale .swap, replaced)
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (.swap name, final name)

    @property
    def changed(self) -> bool:
        return bool(self.deleted or self.renamed)


def recover_swap_files(partition_dir: str | os.PathLike, *, dry_run: bool = False,
                       crash_hook: CrashHook | None = None) -> TempFileRecovery:
    """Steps 1–2 of ``LogLoader.load``: remove ``.deleted``/``.cleaned`` leftovers and complete interrupted swaps.

    * delete every ``*.deleted`` file (except KRaft ``*.checkpoint.deleted``);
    * delete ``.swap`` files whose base offset is >= the smallest ``.cleaned`` base offset, then all ``.cleaned``;
    * for the remaining ``.swap`` log files, delete every non-swap file whose leading number lies in
      ``[min swap base, max swap next offset)`` and strip the ``.swap`` suffix.
    """
    d = Path(partition_dir)
    hook = crash_hook or _noop
    out = TempFileRecovery()
    names = sorted(p.name for p in d.iterdir() if p.is_file())
    cleaned = [n for n in names if n.endswith(CLEANED)]
    swaps = [n for n in names if n.endswith(SWAP)]
    min_cleaned = min((leading_offset(n) for n in cleaned if leading_offset(n) is not None), default=None)

    def delete(name: str) -> None:
        out.deleted.append(name)
        if not dry_run:
            hook(f"delete {name}")
            (d / name).unlink(missing_ok=True)

    for n in names:
        if n.endswith(DELETED) and not n.endswith(".checkpoint" + DELETED):
            delete(n)
    valid_swaps = []
    for n in swaps:
        base = leading_offset(n)
        if min_cleaned is not None and base is not None and base >= min_cleaned:
            delete(n)
        else:
            valid_swaps.append(n)
    for n in cleaned:
        delete(n)
    swap_logs = [n for n in valid_swaps if n.endswith(".log" + SWAP)]
    if swap_logs:
        lo = min(leading_offset(n) for n in swap_logs)
        hi = max(read_next_offset(d / n, leading_offset(n)) for n in swap_logs)
        for n in names:
            if n.endswith(SWAP) or n in out.deleted:
                continue
            off = leading_offset(n)
            if off is not None and lo <= off < hi:  # any file with a leading number, as LogLoader
                delete(n)
    for n in valid_swaps:
        final = n[: -len(SWAP)]
        out.renamed.append((n, final))
        if not dry_run:
            hook(f"swap->final {n}")
            os.replace(d / n, d / final)
    if out.changed and not dry_run:
        fsync_dir(d)
    return out
