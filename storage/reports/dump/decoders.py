"""The record decoders of ``dump``'s ``--offsets-decoder``, ``--transaction-log-decoder``,
``--cluster-metadata-decoder``, ``--remote-log-metadata-decoder`` and ``--share-group-state-decoder``, and the
KRaft snapshot dump."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any, Literal

from kafkalog.storage.decoders.cluster_metadata import decode_metadata_record, format_metadata_record
from kafkalog.storage.decoders.consumer_offsets import decode_offsets_record, format_offsets_record
from kafkalog.storage.decoders.kraft_control import decode_control_record, format_control_record
from kafkalog.storage.decoders.remote_log_metadata import (
    decode_remote_log_metadata,
    format_remote_log_metadata,
)
from kafkalog.storage.decoders.share_group_state import (
    decode_share_group_state_record,
    format_share_group_state_record,
)
from kafkalog.storage.decoders.transaction_state import decode_transaction_record, format_transaction_record
from kafkalog.storage.errors import CorruptRecordError
from kafkalog.storage.records.dump import RecordDecoder, dump_log
from kafkalog.storage.reports.dump.file_dump import Dialect

# ------------------------------------------------------------------------------------------- decoders

RecordDecoderName = Literal["offsets", "transaction", "cluster-metadata", "remote-log-metadata", "share-group-state"]


def _keyed_decoder(fmt: Callable, dec: Callable, dialect: Dialect) -> RecordDecoder:
    """A hook for internal topics whose records have a schema'd key and value (offsets, transactions, cluster
    and remote log metadata): DumpLogSegments' text in ``decodedText`` (``fmt`` reports a bad record in its text),
    the JSON form in ``decoded``, or ``decodeError``."""

    def decode(batch: dict, rec: dict) -> None:
        key, value = rec["key"], rec["value"]
        try:
            rec["decodedText"] = fmt(key, value, rec["offset"], dialect)
            rec["decoded"] = dec(key, value)
        except CorruptRecordError as e:
            rec["decodeError"] = e.reason

    return decode


def _offsets_decoder(dialect: Dialect) -> RecordDecoder:
    return _keyed_decoder(format_offsets_record, decode_offsets_record, dialect)


def _transaction_decoder(dialect: Dialect) -> RecordDecoder:
    return _keyed_decoder(format_transaction_record, decode_transaction_record, dialect)


def _decode_metadata(key: Any, value: Any) -> Any:
    if value is None:
        raise CorruptRecordError("metadata record without a value")
    return decode_metadata_record(value)


def _metadata_decoder(dialect: Dialect) -> RecordDecoder:
    return _keyed_decoder(lambda key, value, offset, _: format_metadata_record(value, offset), _decode_metadata,
                          dialect)


def _remote_log_metadata_decoder(dialect: Dialect) -> RecordDecoder:
    return _keyed_decoder(lambda key, value, offset, _: format_remote_log_metadata(value, offset),
                          decode_remote_log_metadata, dialect)


def _share_group_state_decoder(dialect: Dialect) -> RecordDecoder:
    return _keyed_decoder(format_share_group_state_record, decode_share_group_state_record, dialect)


DECODERS: dict[str, Callable[[Dialect], RecordDecoder]] = {
    "offsets": _offsets_decoder,
    "transaction": _transaction_decoder,
    "cluster-metadata": _metadata_decoder,
    "remote-log-metadata": _remote_log_metadata_decoder,
    "share-group-state": _share_group_state_decoder,
}


def record_decoder(name: str, dialect: Dialect = "4.3") -> RecordDecoder:
    """The per-record hook for ``dump_log(..., record_decoder=...)``: ``"offsets"``
    (``--offsets-decoder``), ``"transaction"`` (``--transaction-log-decoder``), ``"cluster-metadata"``
    (``--cluster-metadata-decoder``), ``"remote-log-metadata"`` (``--remote-log-metadata-decoder``) or
    ``"share-group-state"`` (``--share-group-state-decoder``). ``dialect`` picks the text of Kafka 4.3 or 3.9 where they differ."""
    try:
        return DECODERS[name](dialect)
    except KeyError:
        raise ValueError(f"unknown decoder {name!r} (one of {', '.join(DECODERS)})") from None


def decode_control_records(batch: dict, dialect: Dialect = "4.3") -> None:
    """Add ``control`` (decoded JSON) and ``controlText`` (DumpLogSegments' control part) to the records of a
    control batch dict (KRaft SnapshotHeader/Footer, KRaftVersion, KRaftVoters, LeaderChange, txn markers)."""
    for rec in batch.get("records", ()):
        try:
            rec["control"] = decode_control_record(rec["key"], rec["value"])
            rec["controlText"] = format_control_record(rec["key"], rec["value"], dialect)
        except CorruptRecordError as e:
            rec["decodeError"] = e.reason


def dump_kraft_snapshot(
    path: str | os.PathLike,
    *,
    deep: bool = True,
    decode: bool = True,
    max_bytes: int | None = None,
    dialect: Dialect = "4.3",
) -> Iterator[dict]:
    """A KRaft snapshot (``<offset>-<epoch>.checkpoint``, ``bootstrap.checkpoint``) or any
    ``__cluster_metadata`` segment: the batch dicts of :func:`dump_log`, with metadata records decoded
    (``--cluster-metadata-decoder``) and control records (snapshot header/footer, voters, ...) decoded."""
    dec = _metadata_decoder(dialect) if decode else None
    for d in dump_log(path, deep=deep, max_bytes=max_bytes, record_decoder=dec):
        if decode and d.get("isControl"):
            decode_control_records(d, dialect)
        yield d
