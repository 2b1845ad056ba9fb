"""Dump functions for every file kind of a data dir except ``.log`` (which is :mod:`kafkalog.storage.records.dump`), as
DumpLogSegments dumps them (``docs/commands/dump.md``, ``DumpLogSegments``), plus the text/metadata files Kafka's tool ignores.

Each ``dump_*`` function returns a :class:`FileDump`: JSON-ready ``entries`` (one dict per index entry,
snapshot producer, checkpoint line, ...), file-level ``info``, the checks DumpLogSegments reports at the end of
a run (index mismatches, time-index mismatches / out-of-order timestamps / offsets not found) and ``problems``
(what makes Kafka's tool crash or reject the file: a missing ``.log``, an index entry past the end of the log,
a failed sanity check, a corrupt snapshot), each with the byte position. :meth:`FileDump.text` gives the
DumpLogSegments-style stdout lines and :meth:`FileDump.report_lines` its stderr reports.

| file | function |
|---|---|
| ``<base>.index`` | :func:`dump_offset_index` (``verify_index_only``, ``index_sanity_check`` as the tool's options) |
| ``<base>.timeindex`` | :func:`dump_time_index` (same options) |
| ``<base>.txnindex`` | :func:`dump_txn_index` |
| ``<offset>.snapshot`` | :func:`dump_producer_snapshot` |
| the four data-dir offset checkpoints | :func:`dump_offset_checkpoint` |
| ``leader-epoch-checkpoint`` | :func:`dump_leader_epoch_checkpoint` |
| ``partition.metadata`` | :func:`dump_partition_metadata` |
| ``meta.properties`` | :func:`dump_meta_properties` |
| ``.kafka_cleanshutdown`` | :func:`dump_clean_shutdown` |
| ``quorum-state`` | :func:`dump_quorum_state` |
| KRaft ``<offset>-<epoch>.checkpoint`` / ``bootstrap.checkpoint`` | :func:`dump_kraft_snapshot` (a stream of batch dicts) |

:func:`dump_file` dispatches on the file name. :func:`record_decoder` returns the hooks behind
``--offsets-decoder``, ``--transaction-log-decoder``, ``--cluster-metadata-decoder``,
``--remote-log-metadata-decoder`` and ``--share-group-state-decoder`` for
:func:`kafkalog.storage.records.dump.dump_log`: they add ``decoded`` (a dict), ``decodedText`` (the tool's
``key: ... payload: ...`` text) or ``decodeError`` to each record dict.

One deliberate difference from DumpLogSegments: an index file of zeros only (preallocated by a running or
killed broker before the segment's first index entry) dumps as empty; the tool reads its slot 0 as an entry
``(baseOffset, 0)`` and then crashes (empty ``.log``) or reports a mismatch.

The package is split by what it dumps: :mod:`.file_dump` (the result and shared checks), :mod:`.indexes`,
:mod:`.snapshot`, :mod:`.checkpoints` (the text and metadata files), :mod:`.decoders` (internal topics' records)
and :mod:`.dispatch` (by file name).

Memory: index files are mmapped and walked entry by entry; a batch is read per entry; nothing loads a whole
``.log``.
"""

from kafkalog.storage.reports.dump.checkpoints import (
    dump_clean_shutdown,
    dump_leader_epoch_checkpoint,
    dump_meta_properties,
    dump_offset_checkpoint,
    dump_partition_metadata,
    dump_quorum_state,
)
from kafkalog.storage.reports.dump.decoders import (
    DECODERS,
    decode_control_records,
    dump_kraft_snapshot,
    record_decoder,
)
from kafkalog.storage.reports.dump.dispatch import dump_file, dump_kind
from kafkalog.storage.reports.dump.file_dump import DEFAULT_MAX_MESSAGE_SIZE, FileDump
from kafkalog.storage.reports.dump.indexes import dump_offset_index, dump_time_index, dump_txn_index
from kafkalog.storage.reports.dump.snapshot import decrement_sequence, dump_producer_snapshot

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DECODERS",
    "FileDump",
    "decode_control_records",
    "decrement_sequence",
    "dump_clean_shutdown",
    "dump_file",
    "dump_kind",
    "dump_kraft_snapshot",
    "dump_leader_epoch_checkpoint",
    "dump_meta_properties",
    "dump_offset_checkpoint",
    "dump_offset_index",
    "dump_partition_metadata",
    "dump_producer_snapshot",
    "dump_quorum_state",
    "dump_time_index",
    "dump_txn_index",
    "record_decoder",
]
