"""The leader-epoch cache of a partition (``LeaderEpochFileCache``, docs/formats.md#leader-epoch-checkpoint).

Entries ``epoch -> start offset`` kept sorted by epoch; persisted in ``leader-epoch-checkpoint`` through
``files/leader_epoch.py`` and a :class:`~kafkalog.storage.io.dirview.DirView` (planned: the write becomes a plan
operation; direct: it happens at once). ``assign`` writes synchronously as the broker does (when
``auto_flush``); truncations mark the cache dirty and are written by :meth:`flush` (the broker's asynchronous
write). Every engine that moves a log's start or end moves the cache with it here
(:meth:`truncate_from_start` is what retention and delete-records do to the file).
"""

from __future__ import annotations

import os
from pathlib import Path

from kafkalog.storage.errors import CorruptCheckpointError, LogDirError
from kafkalog.storage.files.findings import note
from kafkalog.storage.files.leader_epoch import LEADER_EPOCH_CHECKPOINT, EpochEntry, LeaderEpochCheckpoint
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.io.ops import Reason

MAX_CHECKPOINT_BYTES = 1 << 24


class LeaderEpochCache:
    def __init__(self, view: DirView | str | os.PathLike | None = None, entries: list[EpochEntry] | None = None, *,
                 auto_flush: bool = True):
        if view is not None and not isinstance(view, DirView):
            view = DirView(view, DirView.DIRECT, missing_ok=True)
        self.view = view
        self.epochs: dict[int, EpochEntry] = {}
        self.auto_flush = auto_flush
        self.dirty = False
        self.writes = 0
        for e in entries or []:
            self._assign(e)

    @property
    def path(self) -> Path | None:
        return None if self.view is None else self.view.path / LEADER_EPOCH_CHECKPOINT

    @property
    def exists(self) -> bool:
        return self.view is not None and self.view.exists(LEADER_EPOCH_CHECKPOINT)

    @classmethod
    def load(cls, partition_dir: DirView | str | os.PathLike, *, auto_flush: bool = True) -> LeaderEpochCache:
        """Read ``leader-epoch-checkpoint`` (missing or zero-length = empty) replaying ``assign`` per entry.
        A malformed file raises :class:`CorruptCheckpointError` (the broker fails to load the partition)."""
        cache = cls(partition_dir, auto_flush=auto_flush)
        path = cache.path
        entries: list[EpochEntry] = []
        if cache.exists:
            assert cache.view is not None
            try:
                data = cache.view.read(LEADER_EPOCH_CHECKPOINT, MAX_CHECKPOINT_BYTES)
            except LogDirError as e:
                raise CorruptCheckpointError(e.reason, str(path)) from None
            entries = LeaderEpochCheckpoint.from_bytes(data, path).entries
        for entry in entries:
            if entry.epoch < 0 or entry.start_offset < 0:
                raise CorruptCheckpointError(f"invalid partition leader epoch entry {entry.epoch} "
                                             f"{entry.start_offset}", str(path))
            cache._assign(entry)
        return cache

    # ------------------------------------------------------------------------------------------ queries
    def entries(self) -> list[EpochEntry]:
        return [self.epochs[k] for k in sorted(self.epochs)]

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self.epochs[max(self.epochs)] if self.epochs else None

    @property
    def latest_epoch(self) -> int | None:
        return max(self.epochs) if self.epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self.epochs[min(self.epochs)] if self.epochs else None

    def to_bytes(self) -> bytes:
        return LeaderEpochCheckpoint(self.entries()).to_bytes()

    # ---------------------------------------------------------------------------------------- updates
    def _is_update_needed(self, e: EpochEntry) -> bool:
        latest = self.latest_entry
        return latest is None or e.epoch != latest.epoch or e.start_offset < latest.start_offset

    def _assign(self, e: EpochEntry) -> bool:
        if e.epoch < 0 or e.start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry {e}")
        if not self._is_update_needed(e):
            return False
        for k in sorted(self.epochs, reverse=True):
            old = self.epochs[k]
            if old.epoch >= e.epoch or old.start_offset >= e.start_offset:
                del self.epochs[k]
            else:
                break
        self.epochs[e.epoch] = e
        return True

    def assign(self, epoch: int, start_offset: int) -> bool:
        changed = self._assign(EpochEntry(epoch, start_offset))
        if changed:
            self.dirty = True
            if self.auto_flush:
                self.flush()
        return changed

    def assign_from_batch(self, partition_leader_epoch: int, base_offset: int) -> bool:
        """``LogSegment.recover``'s rule: only epochs >= 0 and greater than the latest."""
        latest = self.latest_epoch
        if partition_leader_epoch >= 0 and (latest is None or partition_leader_epoch > latest):
            return self.assign(partition_leader_epoch, base_offset)
        return False

    def truncate_from_end(self, end_offset: int) -> bool:
        latest = self.latest_entry
        if end_offset >= 0 and latest is not None and latest.start_offset >= end_offset:
            for k in sorted(self.epochs, reverse=True):
                if self.epochs[k].start_offset >= end_offset:
                    del self.epochs[k]
                else:
                    break
            self.dirty = True
            return True
        return False

    def truncate_from_start(self, start_offset: int) -> bool:
        removed: list[EpochEntry] = []
        for k in sorted(self.epochs):
            if self.epochs[k].start_offset <= start_offset:
                removed.append(self.epochs.pop(k))
            else:
                break
        if removed:
            last = removed[-1]
            self.epochs[last.epoch] = EpochEntry(last.epoch, start_offset)
            self.dirty = True
            return True
        return False

    def clear(self) -> None:
        self.epochs.clear()
        self.dirty = True

    def flush(self, *, fsync: bool = True, why: str | Reason | None = None) -> None:
        """Write the checkpoint (atomically) if there is a directory and it changes the file."""
        if self.view is not None:
            data = self.to_bytes()
            if not self.exists or self.view.read(LEADER_EPOCH_CHECKPOINT, MAX_CHECKPOINT_BYTES) != data:
                self.view.write(LEADER_EPOCH_CHECKPOINT, data, why or note(self.view.path, "op.leaderEpochs"))
                self.writes += 1
        self.dirty = False
