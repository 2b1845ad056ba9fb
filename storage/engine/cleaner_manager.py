"""What the compact and retain commands share: finding partition dirs and each topic's effective config
(``--config`` > topic config file > the KRaft ``__cluster_metadata`` log in the same data dir > server.properties
> Kafka defaults, internal topics compacted)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..config import BrokerConfig, LogConfig, read_properties
from ..errors import KafkaLogError
from ..files.names import segment_log_files
from ..logdir import resolve_partition_dirs
from ..records.reader import iter_batches

METADATA_DIR = "__cluster_metadata-0"


def resolve_partitions(paths: Iterable[str | os.PathLike]) -> list[tuple[Path, Path]]:
    """``(data dir, partition dir)`` for every path: a partition dir, or a data dir (all its partitions except
    ``__cluster_metadata`` and ``-delete``/``-stray``/``-future`` dirs)."""
    return [(p.parent, p) for raw in paths for p in resolve_partition_dirs(raw, include_metadata=False)]


def cluster_metadata_topic_configs(data_dir: Path) -> dict[str, dict[str, str]]:
    """Topic config overrides replayed from ``__cluster_metadata-0`` in ``data_dir`` ({} when absent)."""
    mdir = data_dir / METADATA_DIR
    if not mdir.is_dir():
        return {}
    try:
        from ..decoders.cluster_metadata import topic_configs
    except ImportError:  # pragma: no cover - decoders ship with the package
        return {}
    records = []
    for log in segment_log_files(mdir):
        data = log.read_bytes()
        for b in iter_batches(data, path=str(log)):
            if b.magic >= 2 and not b.is_control:
                records.extend(b.records())
    try:
        return topic_configs(records, strict=False)
    except KafkaLogError:
        return {}


class ConfigResolver:
    def __init__(self, server_properties: str | None = None, topic_config_file: str | None = None,
                 overrides: dict[str, str] | None = None):
        self.broker = BrokerConfig.from_file(server_properties) if server_properties else BrokerConfig()
        self.file_props = read_properties(topic_config_file) if topic_config_file else {}
        self.overrides = overrides or {}
        self._metadata: dict[Path, dict[str, dict[str, str]]] = {}

    def log_config(self, data_dir: Path, topic: str) -> LogConfig:
        if data_dir not in self._metadata:
            self._metadata[data_dir] = cluster_metadata_topic_configs(data_dir)
        cfg = self.broker.log_config(topic)
        meta = self._metadata[data_dir].get(topic)
        if meta:
            cfg = cfg.with_overrides(meta, f"{METADATA_DIR} ({topic})")
        if self.file_props:
            cfg = cfg.with_overrides(self.file_props, "topic config file")
        if self.overrides:
            cfg = cfg.with_overrides(self.overrides, "--config")
        return cfg
