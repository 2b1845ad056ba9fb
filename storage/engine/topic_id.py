"""Topic ids offline: a new one as Kafka makes it (``Uuid.randomUuid``), a given one checked, and
``partition.metadata`` rewritten with it (``kafkalog topic-id``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from pathlib import Path

from kafkalog.storage.engine.plan import PartitionPlan, Plan, apply
from kafkalog.storage.engine.targets import read_data_dir
from kafkalog.storage.errors import ConfigError, KafkaLogError
from kafkalog.storage.files.findings import note
from kafkalog.storage.files.java import ZERO_UUID, uuid_from_string, uuid_to_string
from kafkalog.storage.files.partition_metadata import PARTITION_METADATA_FILE, PartitionMetadata
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.log.topic_partition import parse_topic_partition_name


def new_topic_id() -> str:
    """A random topic id as ``Uuid.randomUuid`` makes it (never the reserved ids, never starting with '-')."""
    while True:
        raw = uuid.uuid4().bytes
        s = uuid_to_string(raw)
        if raw not in (ZERO_UUID, bytes(15) + b"\x01") and not s.startswith("-"):
            return s


def check_topic_id(topic_id: str) -> str:
    try:
        raw = uuid_from_string(topic_id)
    except ValueError as e:
        raise ConfigError(f"invalid topic id {topic_id!r}: {e}") from None
    if raw == ZERO_UUID:
        raise ConfigError("the zero topic id AAAAAAAAAAAAAAAAAAAAAA is not valid")
    return topic_id


def plan_topic_id(partition_dirs: Sequence[str | os.PathLike], topic_id: str) -> Plan:
    """A plan that writes ``partition.metadata`` with ``topic_id`` in each partition dir."""
    check_topic_id(topic_id)
    plan = Plan("topic-id")
    by_dir: dict[Path, list[Path]] = {}
    for raw in partition_dirs:
        p = Path(os.path.abspath(raw))
        by_dir.setdefault(p.parent, []).append(p)
    data = PartitionMetadata(topic_id).to_bytes()
    for d, pdirs in by_dir.items():
        dp = read_data_dir(d).new_plan()
        for p in pdirs:
            tp = parse_topic_partition_name(p.name)
            pp = PartitionPlan(str(d), str(p), tp.topic, tp.partition)
            view = DirView(p)
            old = error = None
            if view.exists(PARTITION_METADATA_FILE) and view.size(PARTITION_METADATA_FILE):
                try:
                    old = PartitionMetadata.from_bytes(view.read(PARTITION_METADATA_FILE, 1 << 16)).topic_id
                except KafkaLogError as e:
                    error = e.reason  # (the op's note has it: kafkalog.tools words --json's oldTopicId from it)
            pp.facts = {"oldTopicId": old, "topicId": topic_id}
            if old != topic_id:
                view.write(PARTITION_METADATA_FILE, data, note(p, "op.topicIdSet", oldTopicId=old, unreadable=error,
                                                                topicId=topic_id))
            pp.ops = list(view.ops)
            pp.fingerprints = view.fingerprints()
            dp.partitions.append(pp)
        plan.data_dirs.append(dp)
    return plan


def set_topic_id(partition_dir: str | os.PathLike, topic_id: str, *, dry_run: bool = False) -> str | None:
    """Write ``partition.metadata`` with ``topic_id`` (a plan applied under the data dir's lock, no backup
    folder: the old id is returned). Returns the previous topic id (None when there was no file, or it was
    unreadable)."""
    plan = plan_topic_id([partition_dir], topic_id)
    old = plan.partitions[0].facts["oldTopicId"]
    if not dry_run:
        apply(plan, backup=False)
    return old


__all__ = ["check_topic_id", "new_topic_id", "plan_topic_id", "set_topic_id"]
