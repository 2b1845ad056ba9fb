"""The one topic-config resolver: the effective ``LogConfig`` of a topic in a data dir, and where each value
came from.

Precedence, lowest first (the broker's, plus the two ways a person adds to it):

1. Kafka's defaults;
2. ``server.properties`` (``--server-properties``), through the ``log.*`` broker synonyms;
3. dynamic broker configs in the KRaft metadata (``kafka-configs --entity-type brokers``): the cluster-wide
   default, then this node's own (the node id comes from ``meta.properties``);
4. the broker's settings for its internal topics (``__consumer_offsets``, ``__transaction_state``);
5. the topic's overrides in the KRaft metadata: the latest ``__cluster_metadata`` snapshot
   (``<end offset>-<epoch>.checkpoint``) and then the metadata log records at or after its end offset. A
   long-running cluster trims its metadata log below the latest snapshot, so the snapshot is where most
   overrides live;
6. a topic config file (``--topic-config``), then ``--config KEY=VALUE``.

A ZooKeeper-mode data dir (``meta.properties`` version 0) keeps no topic overrides on disk: they live in
ZooKeeper. Its plans say so, and use ``--config``/``--topic-config`` for them.

Names the broker accepted but this version does not model are kept and reported (:attr:`LogConfig.unknown`),
never fatal; names a person typed must be known.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.storage.config.log_config import BrokerConfig, LogConfig
from kafkalog.storage.config.properties import parse_overrides, read_properties
from kafkalog.storage.decoders.cluster_metadata import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataState
from kafkalog.storage.errors import CorruptRecordError, KafkaLogError
from kafkalog.storage.files.findings import Finding, note
from kafkalog.storage.files.meta_properties import META_PROPERTIES_FILE, read_meta_properties
from kafkalog.storage.files.names import segment_logs_named
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io.dirview import FILE, DirView
from kafkalog.storage.io.fs import absolute

METADATA_TOPIC = "__cluster_metadata"
METADATA_DIR = f"{METADATA_TOPIC}-0"
KRAFT_SNAPSHOT_SUFFIX = ".checkpoint"
KRAFT, ZOOKEEPER, UNKNOWN_MODE = "kraft", "zookeeper", "unknown"


@dataclass
class ClusterMetadata:
    """What the KRaft metadata of a data dir says about topics and brokers."""

    dir: Path | None = None  # the __cluster_metadata-0 directory read (None: no metadata log found)
    snapshot: str | None = None  # the snapshot file replayed first
    topic_ids: dict[str, str] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)  # name -> (value, source)
    broker_configs: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)  # "" = cluster default
    undecodable: int = 0
    notes: list[Finding] = field(default_factory=list)


def _batches(seg: Segment, min_offset: int, errors: list[str]) -> Iterator:
    """The v2 data batches of ``seg`` from ``min_offset``; a corrupt batch ends them (``errors`` gets why)."""
    try:
        for b in seg.iter_batches():
            if b.magic >= 2 and not b.is_control and b.last_offset >= min_offset:
                yield b
            del b
    except CorruptRecordError as e:
        errors.append(str(e))


def _snapshots(view: DirView) -> list[tuple[int, int, str]]:
    out = []
    for name in view.names(FILE):
        if not name.endswith(KRAFT_SNAPSHOT_SUFFIX):
            continue
        head = name[: -len(KRAFT_SNAPSHOT_SUFFIX)]
        offset, _, epoch = head.partition("-")
        if offset.isdigit() and epoch.isdigit():
            out.append((int(offset), int(epoch), name))
    return sorted(out)


def read_cluster_metadata(metadata_dir: str | os.PathLike) -> ClusterMetadata:
    """Replay ``__cluster_metadata-0``: the latest readable snapshot, then the log records at or after its end
    offset (as the broker's ``MetadataLoader`` does). Undecodable records are skipped and counted. A directory
    under a URL is read through the filesystem seam (its segments and snapshots in windows)."""

    with DirView(metadata_dir, DirView.READONLY) as view:
        return _replay_metadata(view)


def _replay_metadata(view: DirView) -> ClusterMetadata:
    mdir = view.path
    out = ClusterMetadata(mdir)
    state = MetadataState(strict=False)
    start = 0
    for offset, _epoch, name in reversed(_snapshots(view)):
        path = mdir / name
        trial = MetadataState(strict=False)
        trial.label = f"{METADATA_TOPIC} snapshot {name}"
        errors: list[str] = []
        try:
            with Segment.in_view(view, 0, name) as seg:
                for b in _batches(seg, 0, errors):
                    trial.replay_all(r.value for r in b.records())
                    del b
        except (KafkaLogError, OSError) as e:
            errors.append(str(e))
        if errors:
            out.notes.append(note(path, "metadata.snapshotUnreadable", errors=errors))
            continue
        state, start, out.snapshot = trial, offset, name
        break
    state.label = f"{METADATA_TOPIC} log"
    for base, name in segment_logs_named(view.names(FILE)):
        log = mdir / name
        stopped: list[str] = []
        try:
            with Segment.in_view(view, base, name) as seg:
                for b in _batches(seg, start, stopped):
                    state.replay_all(r.value for r in b.records() if r.offset >= start)
                    del b
        except (KafkaLogError, OSError) as e:
            out.notes.append(note(log, "metadata.logUnreadable", error=str(e)))
        out.notes += [note(log, "metadata.readStopped", error=e) for e in stopped]
    out.topic_ids = dict(state.topic_ids)
    out.undecodable = state.errors
    for (rtype, name), cfg in state.configs.items():
        target = out.topic_configs if rtype == TOPIC_RESOURCE else \
            out.broker_configs if rtype == BROKER_RESOURCE else None
        if target is not None:
            target[name] = {k: (v, state.sources.get((rtype, name, k), METADATA_TOPIC)) for k, v in cfg.items()}
    for name in out.topic_ids:
        out.topic_configs.setdefault(name, {})
    return out


@dataclass
class DataDirInfo:
    """What a data dir says about where its topic configs live."""

    path: Path
    mode: str  # kraft | zookeeper | unknown
    node_id: int | None
    cluster_id: str | None
    metadata: ClusterMetadata | None
    notes: list[Finding] = field(default_factory=list)


class ConfigResolver:
    """``log_config(data_dir, topic)`` with the precedence of the module doc. One resolver serves every data dir
    of a run; a data dir without ``__cluster_metadata-0`` (JBOD: the metadata log lives in one ``log.dirs``
    entry) uses the metadata of another given data dir of the same cluster and node."""

    def __init__(self, server_properties: str | os.PathLike | Mapping[str, Any] | BrokerConfig | None = None,
                 topic_config_file: str | os.PathLike | None = None,
                 overrides: Mapping[str, Any] | Iterable[str] | None = None, *,
                 data_dirs: Iterable[str | os.PathLike] = (), config: LogConfig | None = None):
        """``config``: use this effective config for every topic, whatever the data dirs say (tests and
        harnesses that fix the configuration)."""
        self.fixed = config
        if isinstance(server_properties, BrokerConfig):
            self.broker = server_properties
        elif server_properties is None:
            self.broker = BrokerConfig()
        elif isinstance(server_properties, Mapping):
            self.broker = BrokerConfig.from_props(server_properties)
        else:
            self.broker = BrokerConfig.from_file(server_properties)
        self.topic_config_file = None if topic_config_file is None else str(topic_config_file)
        self.file_props = read_properties(topic_config_file) if topic_config_file else {}
        if overrides is None:
            self.overrides: dict[str, Any] = {}
        elif isinstance(overrides, Mapping):
            self.overrides = dict(overrides)
        else:
            self.overrides = parse_overrides(overrides)
        # typos in what a person typed are errors now, before any plan is made
        LogConfig.from_topic_props(self.file_props, source=f"topic config file {self.topic_config_file}")
        LogConfig.from_topic_props(self.overrides, source="--config")
        self._dirs: dict[Path, DataDirInfo] = {}
        self._known = [absolute(d) for d in data_dirs]
        self._cache: dict[tuple[Path, str], LogConfig] = {}

    # ------------------------------------------------------------------------------------------ data dirs
    def data_dir(self, data_dir: str | os.PathLike) -> DataDirInfo:
        d = absolute(data_dir)
        info = self._dirs.get(d)
        if info is None:
            info = self._dirs[d] = self._load(d)
        return info

    def _identity(self, d: Path) -> tuple[str, int | None, str | None]:
        try:
            mp = read_meta_properties(d / META_PROPERTIES_FILE) if (d / META_PROPERTIES_FILE).is_file() else None
        except KafkaLogError:
            mp = None
        if mp is None:
            return UNKNOWN_MODE, None, None
        try:
            node = mp.node_id
            mode = ZOOKEEPER if mp.version == 0 else KRAFT
        except KafkaLogError:
            return UNKNOWN_MODE, None, mp.cluster_id
        return mode, node, mp.cluster_id

    def _load(self, d: Path) -> DataDirInfo:
        mode, node, cluster = self._identity(d)
        info = DataDirInfo(d, mode, node, cluster, None)
        if (d / METADATA_DIR).is_dir():
            info.metadata = read_cluster_metadata(d / METADATA_DIR)
            info.mode = KRAFT
        else:
            for other in self._known:
                if other == d or not (other / METADATA_DIR).is_dir():
                    continue
                o_mode, o_node, o_cluster = self._identity(other)
                if o_cluster == cluster and o_node == node and cluster is not None:
                    info.metadata = self.data_dir(other).metadata
                    info.mode = KRAFT
                    break
        if info.metadata is not None:
            info.notes += info.metadata.notes
            if info.metadata.undecodable:
                info.notes.append(note(info.metadata.dir, "metadata.undecodable",
                                       records=info.metadata.undecodable))
        elif info.mode == ZOOKEEPER:
            info.notes.append(note(d, "config.zookeeperDir"))
        elif info.mode == KRAFT:
            info.notes.append(note(d, "config.noMetadataDir", metadataDir=METADATA_DIR))
        return info

    def broker_for(self, data_dir: str | os.PathLike) -> BrokerConfig:
        """server.properties with the dynamic broker configs of this data dir's node applied."""
        info = self.data_dir(data_dir)
        broker = self.broker
        if info.metadata is not None:
            for resource in ("", None if info.node_id is None else str(info.node_id)):
                if resource is None:
                    continue
                cfg = info.metadata.broker_configs.get(resource)
                if cfg:
                    label = "dynamic cluster-wide broker config" if resource == "" else \
                        f"dynamic config of broker {resource}"
                    broker = broker.with_dynamic({k: v for k, (v, _) in cfg.items()},
                                                 f"{label} in {METADATA_TOPIC}")
        return broker

    # ----------------------------------------------------------------------------------------- configs
    def log_config(self, data_dir: str | os.PathLike, topic: str) -> LogConfig:
        d = absolute(data_dir)
        key = (d, topic)
        cfg = self._cache.get(key)
        if cfg is not None:
            return cfg
        if self.fixed is not None:
            return self.fixed
        info = self.data_dir(d)
        cfg = self.broker_for(d).log_config(topic)
        meta = info.metadata.topic_configs.get(topic) if info.metadata is not None else None
        for name, (value, source) in (meta or {}).items():
            cfg = cfg.with_overrides({name: value}, source, strict=False)
        if self.file_props:
            cfg = cfg.with_overrides(self.file_props, f"topic config file {self.topic_config_file}")
        if self.overrides:
            cfg = cfg.with_overrides(self.overrides, "--config")
        self._cache[key] = cfg
        return cfg

    def topic_id(self, data_dir: str | os.PathLike, topic: str) -> str | None:
        md = self.data_dir(data_dir).metadata
        return None if md is None else md.topic_ids.get(topic)

    def notes(self, data_dir: str | os.PathLike) -> list[Finding]:
        return list(self.data_dir(data_dir).notes)


__all__ = ["ClusterMetadata", "ConfigResolver", "DataDirInfo", "METADATA_DIR", "read_cluster_metadata"]
