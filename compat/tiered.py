"""Tiered storage (KIP-405) for the broker harness: Kafka's own ``LocalTieredStorage`` as the
RemoteStorageManager, ``TopicBasedRemoteLogMetadataManager`` (``__remote_log_metadata``) as the metadata manager.

``LocalTieredStorage`` ships in kafka-storage's *test* jar (package ``org.apache.kafka.server.log.remote.storage``);
:func:`tiered_broker_kwargs` adds it (and kafka-clients' test jar, for ``org.apache.kafka.test.TestUtils`` it refers
to) to a :class:`~kafkalog.compat.broker.Broker`'s classpath. It stores uploaded segments under
``<remote_root>/kafka-tiered-storage/<topic>-<partition>-<topicId>/<startOffset:020d>-<segmentId>.<suffix>``
(``.log``, ``.index``, ``.timeindex``, ``.snapshot``, ``.txnindex``, ``.leader_epoch_checkpoint``): the layout is
``LocalTieredStorage``'s own (``RemoteLogSegmentFileset``), which ``kafkalog remote`` reads.

Usage::

    broker = Broker("4.3.1", **tiered_broker_kwargs("4.3.1", remote_root, server_properties={...}))
    broker.create_topic("t", config=TIERED_TOPIC_CONFIG | {...})
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafkalog.compat import jars
from kafkalog.compat.errors import HarnessError

__all__ = [
    "LOCAL_TIERED_STORAGE",
    "REMOTE_LOG_METADATA_TOPIC",
    "STORAGE_DIR_NAME",
    "TIERED_TOPIC_CONFIG",
    "remote_storage_dir",
    "tiered_broker_kwargs",
    "tiered_classpath",
    "tiered_storage_properties",
    "wait_for_remote_log_metadata",
]

LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
TOPIC_BASED_RLMM = "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
#: the directory ``LocalTieredStorage.configure`` makes under its ``dir`` (``ROOT_STORAGE_DIR_NAME``)
STORAGE_DIR_NAME = "kafka-tiered-storage"
#: what ``TopicBasedRemoteLogMetadataManager.initializeResources`` logs once it has read ``__remote_log_metadata``
RLMM_INITIALIZED = "Initialized topic-based RLMM resources successfully"
#: topic configs that make a topic tiered (add ``segment.bytes``, ``local.retention.bytes``/``.ms``)
TIERED_TOPIC_CONFIG: dict[str, str] = {"remote.storage.enable": "true"}


def remote_storage_dir(remote_root: Path) -> Path:
    """Where ``LocalTieredStorage`` configured with ``dir=remote_root`` keeps its topic-partition dirs."""
    return Path(remote_root) / STORAGE_DIR_NAME


def tiered_storage_properties(remote_root: Path, *, listener: str = "PLAINTEXT", metadata_partitions: int = 1,
                              task_interval_ms: int = 500, retention_check_interval_ms: int = 1000) -> dict[str, str]:
    """Broker server properties enabling tiered storage with ``LocalTieredStorage`` rooted at ``remote_root``
    (keys of ``LocalTieredStorage.configure`` under ``remote.log.storage.manager.impl.prefix`` = ``rsm.config.``:
    ``dir``, ``delete.on.close=false`` so the remote data outlives the broker, ``delete.enable=true``) and the
    topic-based metadata manager with a single-broker ``__remote_log_metadata`` (replication factor 1,
    ``metadata_partitions`` partitions, under ``rlmm.config.``), and fast timers: the RLM tasks (upload, expiry)
    every ``task_interval_ms``, the log retention check (which deletes uploaded local segments beyond
    ``local.retention.*``) every ``retention_check_interval_ms``."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
        "remote.log.storage.manager.impl.prefix": "rsm.config.",
        "rsm.config.dir": str(Path(remote_root).absolute()),
        "rsm.config.delete.on.close": "false",
        "rsm.config.delete.enable": "true",
        "remote.log.metadata.manager.class.name": TOPIC_BASED_RLMM,
        "remote.log.metadata.manager.listener.name": listener,
        "remote.log.metadata.manager.impl.prefix": "rlmm.config.",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": str(metadata_partitions),
        "rlmm.config.remote.log.metadata.topic.min.isr": "1",
        "rlmm.config.remote.log.metadata.initialization.retry.interval.ms": "500",
        "remote.log.manager.task.interval.ms": str(task_interval_ms),
        "remote.log.manager.task.retry.backoff.ms": "200",
        "remote.log.manager.task.retry.backoff.max.ms": "1000",
        "remote.log.manager.thread.pool.size": "2",
        "remote.log.manager.copier.thread.pool.size": "1",
        "remote.log.manager.expiration.thread.pool.size": "1",
        "remote.log.reader.threads": "1",
        "log.retention.check.interval.ms": str(retention_check_interval_ms),
    }


def tiered_classpath(version: str) -> tuple[Path, ...]:
    """The jars to append to a broker's classpath for ``LocalTieredStorage`` (fetched on first use)."""
    return tuple(jars.ensure_test_jars(version))


def tiered_broker_kwargs(version: str, remote_root: Path, *, server_properties: Mapping[str, str] | None = None,
                         **props: Any) -> dict[str, Any]:
    """Keyword arguments for :class:`~kafkalog.compat.broker.Broker` (or ``broker_factory``): the tiered storage
    properties (:func:`tiered_storage_properties` with ``props``) merged under ``server_properties``, and the
    test jars on the classpath."""
    return {"server_properties": tiered_storage_properties(remote_root, **props) | dict(server_properties or {}),
            "extra_classpath": tiered_classpath(version)}


def wait_for_remote_log_metadata(broker: Any, timeout: float = 120.0) -> None:
    """Wait until ``broker``'s topic-based remote log metadata manager is initialized (:data:`RLMM_INITIALIZED` in
    its log). A broker that starts on data already in its remote store answers a fetch below the local log start
    with UNKNOWN_SERVER_ERROR until then (``IllegalStateException: This instance is in invalid state, initialized:
    false``), a window of about a second idle and more on a loaded machine."""
    deadline = time.monotonic() + timeout
    while RLMM_INITIALIZED not in broker.log_since(0):
        if time.monotonic() > deadline:
            raise HarnessError(f"the broker's remote log metadata manager was not initialized within {timeout:.0f} s "
                               f"(its log: {broker.log_path})")
        time.sleep(0.2)
