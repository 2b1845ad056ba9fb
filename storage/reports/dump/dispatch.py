"""Which dump a file gets, by its name (:func:`dump_kind`, :func:`dump_file`)."""

from __future__ import annotations

import os
from collections.abc import Callable

from kafkalog.storage.files.checkpoints import DATA_DIR_CHECKPOINTS
from kafkalog.storage.files.clean_shutdown import CLEAN_SHUTDOWN_FILE
from kafkalog.storage.files.leader_epoch import LEADER_EPOCH_CHECKPOINT
from kafkalog.storage.files.meta_properties import META_PROPERTIES_FILE
from kafkalog.storage.files.partition_metadata import PARTITION_METADATA_FILE
from kafkalog.storage.files.quorum_state import QUORUM_STATE_FILE
from kafkalog.storage.reports.dump import checkpoints
from kafkalog.storage.reports.dump.file_dump import DEFAULT_MAX_MESSAGE_SIZE, FileDump
from kafkalog.storage.reports.dump.indexes import dump_offset_index, dump_time_index, dump_txn_index
from kafkalog.storage.reports.dump.snapshot import dump_producer_snapshot

_BY_SUFFIX: dict[str, Callable[..., FileDump]] = {
    ".index": dump_offset_index,
    ".timeindex": dump_time_index,
    ".txnindex": dump_txn_index,
    ".snapshot": dump_producer_snapshot,
}
_BY_NAME: dict[str, Callable[[str | os.PathLike], FileDump]] = {
    **{n: checkpoints.dump_offset_checkpoint for n in DATA_DIR_CHECKPOINTS},
    LEADER_EPOCH_CHECKPOINT: checkpoints.dump_leader_epoch_checkpoint,
    PARTITION_METADATA_FILE: checkpoints.dump_partition_metadata,
    META_PROPERTIES_FILE: checkpoints.dump_meta_properties,
    CLEAN_SHUTDOWN_FILE: checkpoints.dump_clean_shutdown,
    QUORUM_STATE_FILE: checkpoints.dump_quorum_state,
}


_KIND_BY_SUFFIX = {".index": "index", ".timeindex": "timeindex", ".txnindex": "txnindex", ".snapshot": "snapshot"}
_KIND_BY_NAME = {
    **{n: "offsetCheckpoint" for n in DATA_DIR_CHECKPOINTS},
    LEADER_EPOCH_CHECKPOINT: "leaderEpochCheckpoint",
    PARTITION_METADATA_FILE: "partitionMetadata",
    META_PROPERTIES_FILE: "metaProperties",
    CLEAN_SHUTDOWN_FILE: "cleanShutdown",
    QUORUM_STATE_FILE: "quorumState",
}


def dump_kind(path: str | os.PathLike) -> str | None:
    """Which dumper handles ``path``: ``"log"`` (the records layer), ``"kraftSnapshot"``
    (:func:`dump_kraft_snapshot`), the :attr:`FileDump.kind` of :func:`dump_file`, or None (unknown)."""
    name = os.path.basename(str(path))  # (a local path or a URL)
    if name in _KIND_BY_NAME:
        return _KIND_BY_NAME[name]
    if "." not in name:
        return None
    suffix = name[name.rindex("."):]
    if suffix == ".log":
        return "log"
    if suffix == ".checkpoint":
        return "kraftSnapshot"
    return _KIND_BY_SUFFIX.get(suffix)


def dump_file(
    path: str | os.PathLike,
    *,
    verify_index_only: bool = False,
    index_sanity_check: bool = False,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
) -> FileDump:
    """Dump any non-``.log`` file by its name (ValueError for ``.log``/``.checkpoint`` and unknown files); a file
    under a URL is read through the filesystem seam (an index whole, its ``.log`` in windows)."""
    name = os.path.basename(str(path))
    if name in _BY_NAME:
        return _BY_NAME[name](path)
    if "." in name:
        suffix = name[name.rindex("."):]
        if suffix == ".index":
            return dump_offset_index(path, verify_index_only=verify_index_only,
                                     index_sanity_check=index_sanity_check, max_message_size=max_message_size)
        if suffix == ".timeindex":
            return dump_time_index(path, verify_index_only=verify_index_only, index_sanity_check=index_sanity_check)
        if suffix in _BY_SUFFIX:
            return _BY_SUFFIX[suffix](path)
    raise ValueError(f"no dumper for {name!r} (.log and .checkpoint files are dumped as record batches)")
