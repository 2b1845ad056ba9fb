"""One module per on-disk file kind: read, validate, write atomically, rebuild.

================================  =====================================================
module                            file
================================  =====================================================
:mod:`.segment`                   ``<base>.log`` + its indexes (:class:`Segment`)
:mod:`.offset_index`              ``<base>.index``
:mod:`.time_index`                ``<base>.timeindex``
:mod:`.txn_index`                 ``<base>.txnindex``
:mod:`.rebuild`                   index rebuilds (append-time and recovery-time rules)
:mod:`.producer_snapshot`         ``<offset>.snapshot``
:mod:`.leader_epoch`              ``leader-epoch-checkpoint``
:mod:`.partition_metadata`        ``partition.metadata``
:mod:`.checkpoints`               the four data-dir offset checkpoints
:mod:`.meta_properties`           ``meta.properties``
:mod:`.clean_shutdown`            ``.kafka_cleanshutdown``
:mod:`.names`                     file naming rules (``LogFileUtils``)
:mod:`.findings`                  :class:`Finding`, what validation reports
================================  =====================================================
"""

from kafkalog.storage.files.checkpoints import (
    OffsetCheckpoint,
    TopicPartitionOffset,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from kafkalog.storage.files.clean_shutdown import (
    CleanShutdownMarker,
    read_clean_shutdown,
    write_clean_shutdown,
)
from kafkalog.storage.files.findings import Finding
from kafkalog.storage.files.leader_epoch import (
    EpochEntry,
    LeaderEpochCheckpoint,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)
from kafkalog.storage.files.meta_properties import MetaProperties, read_meta_properties, write_meta_properties
from kafkalog.storage.files.offset_index import (
    OffsetIndex,
    OffsetIndexBuilder,
    OffsetPosition,
    read_offset_index,
)
from kafkalog.storage.files.partition_metadata import (
    PartitionMetadata,
    read_partition_metadata,
    write_partition_metadata,
)
from kafkalog.storage.files.producer_snapshot import (
    ProducerSnapshot,
    ProducerSnapshotEntry,
    read_producer_snapshot,
    write_producer_snapshot,
)
from kafkalog.storage.files.time_index import TimeIndex, TimeIndexBuilder, TimestampOffset, read_time_index
from kafkalog.storage.files.txn_index import AbortedTxn, TransactionIndex, read_txn_index

__all__ = [
    "AbortedTxn",
    "CleanShutdownMarker",
    "EpochEntry",
    "Finding",
    "LeaderEpochCheckpoint",
    "MetaProperties",
    "OffsetCheckpoint",
    "OffsetIndex",
    "OffsetIndexBuilder",
    "OffsetPosition",
    "PartitionMetadata",
    "ProducerSnapshot",
    "ProducerSnapshotEntry",
    "TimeIndex",
    "TimeIndexBuilder",
    "TimestampOffset",
    "TopicPartitionOffset",
    "TransactionIndex",
    "read_clean_shutdown",
    "read_leader_epoch_checkpoint",
    "read_meta_properties",
    "read_offset_checkpoint",
    "read_offset_index",
    "read_partition_metadata",
    "read_producer_snapshot",
    "read_time_index",
    "read_txn_index",
    "write_clean_shutdown",
    "write_leader_epoch_checkpoint",
    "write_meta_properties",
    "write_offset_checkpoint",
    "write_partition_metadata",
    "write_producer_snapshot",
]
