"""Record formats: v0/v1 messages, v2 record batches, control records; shallow and deep iteration; building."""

from kafkalog.storage.records.batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    NO_TIMESTAMP_TYPE,
    TIMESTAMP_TYPE_NAMES,
    RecordBatch,
)
from kafkalog.storage.records.builder import (
    build_batch,
    build_end_txn_marker,
    build_legacy,
    build_legacy_message,
    rebuild,
)
from kafkalog.storage.records.columns import RECORD_COLUMNS, RecordColumns, iter_arrow, to_arrow
from kafkalog.storage.records.legacy import LegacyBatch
from kafkalog.storage.records.reader import (
    PARTIAL_BATCH,
    TORN_TAIL,
    Batch,
    BatchScan,
    LogScanner,
    batch_at,
    iter_batches,
    scan_crc,
)
from kafkalog.storage.records.record import Record

__all__ = [
    "Batch",
    "BatchScan",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "LegacyBatch",
    "LogScanner",
    "NO_TIMESTAMP",
    "NO_TIMESTAMP_TYPE",
    "PARTIAL_BATCH",
    "RECORD_COLUMNS",
    "Record",
    "RecordColumns",
    "RecordBatch",
    "TIMESTAMP_TYPE_NAMES",
    "TORN_TAIL",
    "batch_at",
    "build_batch",
    "build_end_txn_marker",
    "build_legacy",
    "build_legacy_message",
    "iter_arrow",
    "iter_batches",
    "rebuild",
    "scan_crc",
    "to_arrow",
]
