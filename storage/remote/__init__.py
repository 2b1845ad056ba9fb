"""Tiered storage (KIP-405) offline: remote log segments as a RemoteStorageManager stores them.

* :mod:`.layout`: where a plugin keeps each segment's files (:class:`RemoteLayout`); Kafka's own
  ``LocalTieredStorage`` is :class:`LocalTieredStorageLayout`, on a local directory or any ``s3://`` / fsspec URL;
* :mod:`.inspect`: ``kafkalog remote ls|verify``, cross-checked with ``__remote_log_metadata``;
* :mod:`.rehydrate`: ``kafkalog rehydrate``, a local partition dir built from remote segments (plan, then apply).
"""

from kafkalog.storage.remote.layout import (
    FILE_KINDS,
    LocalTieredStorageLayout,
    RemoteLayout,
    RemoteSegment,
    is_remote_store,
    open_remote_store,
)

__all__ = ["FILE_KINDS", "LocalTieredStorageLayout", "RemoteLayout", "RemoteSegment", "is_remote_store",
           "open_remote_store"]
