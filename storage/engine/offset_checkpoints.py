"""A data dir's offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``) read, merged and edited offline
(``kafkalog checkpoints``); the migration merges into the destination's with :func:`merge_checkpoint`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kafkalog.storage.engine.plan import Plan, apply
from kafkalog.storage.engine.targets import read_data_dir
from kafkalog.storage.errors import ConfigError
from kafkalog.storage.files.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    DATA_DIR_CHECKPOINTS,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_checkpoint,
    write_offset_checkpoint,
)
from kafkalog.storage.files.findings import note
from kafkalog.storage.io.dirview import DirView


def read_checkpoints(data_dir: str | os.PathLike) -> dict[str, dict[tuple[str, int], int]]:
    """The four offset checkpoints of a data dir (missing files read as empty)."""
    d = Path(data_dir)
    return {name: read_checkpoint(d / name).to_dict() for name in DATA_DIR_CHECKPOINTS}


def merge_checkpoint(path: str | os.PathLike, updates: Mapping[tuple[str, int], int | None]) -> None:
    """Set (or, for ``None``, remove) entries of one offset checkpoint file, atomically, keeping the others
    (and the file's line separator) as they are."""
    p = Path(path)
    cp = read_checkpoint(p)
    cp.set_offsets(cp.updated(updates))
    write_offset_checkpoint(p, cp)


CHECKPOINT_ALIASES = {
    "recovery-point": RECOVERY_POINT_CHECKPOINT, "recovery": RECOVERY_POINT_CHECKPOINT,
    "log-start-offset": LOG_START_OFFSET_CHECKPOINT, "log-start": LOG_START_OFFSET_CHECKPOINT,
    "replication-offset": REPLICATION_OFFSET_CHECKPOINT, "high-watermark": REPLICATION_OFFSET_CHECKPOINT,
    "replication": REPLICATION_OFFSET_CHECKPOINT,
    "cleaner-offset": CLEANER_OFFSET_CHECKPOINT, "cleaner": CLEANER_OFFSET_CHECKPOINT,
}


def checkpoint_file_name(name: str) -> str:
    if name in DATA_DIR_CHECKPOINTS:
        return name
    if name in CHECKPOINT_ALIASES:
        return CHECKPOINT_ALIASES[name]
    raise ConfigError(f"unknown checkpoint {name!r} (one of {', '.join(sorted(CHECKPOINT_ALIASES))})")


def plan_set_checkpoints(data_dir: str | os.PathLike, name: str,
                         updates: dict[tuple[str, int], int | None]) -> Plan:
    """A plan that sets (or, for ``None``, removes) entries of one checkpoint file of a data dir, keeping the
    other entries and the file's line separator. ``facts`` of the data dir's plan: ``{tp: (old, new)}``."""
    fname = checkpoint_file_name(name)
    d = Path(os.path.abspath(data_dir))
    st = read_data_dir(d)
    dp = st.new_plan()
    cp = read_checkpoint(d / fname)
    before = cp.to_dict()
    entries = cp.updated(updates)
    plan = Plan("checkpoints", [dp])
    plan.options["changes"] = {f"{t}-{n}": (before.get((t, n)), v) for (t, n), v in updates.items()}
    if entries != before or not (d / fname).exists():
        cp.set_offsets(entries)
        view = DirView(d)
        view.write(fname, cp.to_bytes(), note(d, "op.checkpointsSet"))
        dp.ops = list(view.ops)
    return plan


def set_checkpoints(data_dir: str | os.PathLike, name: str, updates: dict[tuple[str, int], int | None], *,
                    dry_run: bool = False) -> dict[tuple[str, int], tuple[int | None, int | None]]:
    """Set entries of one checkpoint of a data dir (a plan applied under its lock, without a backup folder:
    the old values are returned). Returns ``{tp: (old, new)}``."""
    fname = checkpoint_file_name(name)
    before = read_checkpoint(Path(data_dir) / fname).to_dict()
    plan = plan_set_checkpoints(data_dir, name, updates)
    if not dry_run:
        apply(plan, backup=False)
    return {tp: (before.get(tp), v) for tp, v in updates.items()}


__all__ = ["CHECKPOINT_ALIASES", "checkpoint_file_name", "merge_checkpoint", "plan_set_checkpoints", "read_checkpoint",
           "read_checkpoints", "set_checkpoints"]
