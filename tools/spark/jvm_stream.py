"""The JVM stream's questions to kafkalog's stream rules (``jvm_plan``'s ``stream`` request), on the driver.

``KafkaLogMicroBatchStream.java`` (``spark.readStream.format("kafkalog")`` on a session with kafkalog's jar) keeps
no rule of its own: each question is answered by a :class:`~kafkalog.tools.spark.stream.KafkaLogStreamReader`
made for it, the Python stream's reader, so the offsets, the rate limit, the complete ends, the data-loss rule and
the pieces are the Python stream's. The JVM side keeps what a reader would keep between calls (the availableNow
offsets, the plan of the last trigger) and decodes the pieces with ``SegmentScan``. One planner call per trigger:

* ``open`` (when the query starts): ``{"initial": OFFSETS, "available": OFFSETS, "maxOffsets": N | null,
  "failOnDataLoss": BOOL, "dataLossFail": TEXT, "dataLossWarn": TEXT, "verifyCrc": ..., "includeControlRecords":
  ..., "scan": {...}}``: ``initialOffset`` (a new query's; a restarted one keeps the one written in its
  checkpoint), what is complete now (an availableNow query's end), the options the JVM side acts on, the data-loss
  texts for a segment deleted after the driver planned it and before an executor read it (Spark's Kafka source's
  words for records retention removed between planning and fetching), and the scan's options: for a segment
  replaced after planning (:func:`kafkalog.tools.spark.jvm.data_loss_options`) and for data dirs under a URL
  (``s3a://``, ``hdfs://``: :func:`kafkalog.tools.spark.jvm.stream_scan_options`; none for local dirs);
* ``latest`` (each trigger; body ``start``, ``maxRows``, ``target``): ``{"end": OFFSETS, "available": OFFSETS,
  "plan": PLAN}``: ``latestOffset`` and, in the same call, the plan of the micro-batch ``[start, end)``;
* ``plan`` (a micro-batch Spark runs again from its offset log; body ``start``, ``end``): ``{"plan": PLAN}``.

PLAN is ``{"pieces": ...}`` (one line per input partition of the
Python stream: :func:`kafkalog.tools.spark.jvm.encode_pieces`), or ``{"error": "DataLossError: ..."}``: the
micro-batch fails when Spark plans it, as the Python stream's ``partitions`` does. Every answer carries
``warnings``: what the reader logged (data loss with ``failOnDataLoss`` false, offsets left in a remote store),
for the JVM's log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from pyspark.sql.types import StructType

from kafkalog.storage.errors import ConfigError

from .jvm import data_loss_options, encode_pieces, pieces_refusal, stream_scan_options
from .stream import (
    DATA_LOSS_FAIL,
    DATA_LOSS_WARN,
    DataLossError,
    KafkaLogStreamReader,
    from_json_offsets,
    log,
)


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def micro_batch(reader: KafkaLogStreamReader, start: dict, end: dict) -> dict:
    """The plan of the micro-batch ``[start, end)`` (see the module's doc), or its data-loss error."""
    try:
        groups = [reader.pieces(part) for part in reader.partitions(start, end)]
    except DataLossError as e:
        return {"error": f"DataLossError: {e}"}
    why = pieces_refusal(groups)
    if why is not None:  # a stream cannot change readers between micro-batches
        return {"error": f"ConfigError: the JVM stream cannot read {why}"}
    return {"pieces": encode_pieces([g for g in groups if g], reader.opts)}


def answer(op: str, options: Mapping[str, str], body: Mapping) -> dict:
    """The answer to one question of the JVM stream (see the module's doc)."""
    kept = _Kept()
    log.addHandler(kept)
    try:
        reader = KafkaLogStreamReader(StructType(), options)  # (no rows read here: no schema needed)
        if op == "open":
            out: dict = {"initial": reader.initialOffset(), "available": reader.reportLatestOffset(),
                         "maxOffsets": reader.sopts.max_offsets, "failOnDataLoss": reader.sopts.fail_on_data_loss,
                         "dataLossFail": DATA_LOSS_FAIL, "dataLossWarn": DATA_LOSS_WARN,
                         "verifyCrc": str(reader.opts.verify_crc).lower(),
                         "includeControlRecords": str(reader.opts.include_control).lower(),
                         "scan": stream_scan_options(reader.opts) | data_loss_options(reader.opts)}
        elif op == "latest":
            if body.get("target") is not None:
                reader.available_now(from_json_offsets(body["target"]))
            rows = body.get("maxRows")
            start = body["start"]
            end = reader.latestOffset(start, ReadAllAvailable() if rows is None else ReadMaxRows(int(rows)))
            out = {"end": end, "available": reader.reportLatestOffset(), "plan": micro_batch(reader, start, end)}
        elif op == "plan":
            out = {"plan": micro_batch(reader, body["start"], body["end"])}
        else:
            raise ConfigError(f"unknown stream request {op!r} (open, latest or plan)")
    finally:
        log.removeHandler(kept)
    out["warnings"] = kept.messages
    return out
