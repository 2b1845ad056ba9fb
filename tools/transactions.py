"""``kafkalog transactions``: open and hanging transactions of data dirs; a thin shell over
:func:`kafkalog.storage.reports.transactions.find_transactions`."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import IO, Any

from kafkalog import facts
from kafkalog.storage.files.findings import Finding
from kafkalog.storage.reports.transactions import BOOTSTRAP_PLACEHOLDER, TransactionReport, find_transactions

from .output import (
    NOW_GRAMMAR,
    JsonLines,
    add_epoch_argument,
    add_topics_argument,
    non_negative_int,
    positive_int,
    progress,
    render_table,
    time_format,
    timestamp_ms,
)

DESCRIPTION = """\
List the open transactions of Kafka data dirs without a broker, and which of them hang: the offline
`kafka-transactions.sh find-hanging` + `describe-producers` + `describe`, from the files alone.

  kafkalog transactions /var/lib/kafka/data
  kafkalog transactions /data1 /data2 --bootstrap-server kafka-1:9092     # abort commands ready to paste
  kafkalog transactions --json /var/lib/kafka/data | jq 'select(.hanging)'

Per partition, the open transactions are those the broker's producer state has after loading it (the
latest producer snapshot plus the batches after it): producer id and epoch, the first offset, the
producer's last write. Each is joined with the transaction coordinator's state in the __transaction_state
partitions found in the same dirs: transactional id and its state (Ongoing, PrepareCommit, ...).

STATUS: open     the coordinator lists the partition: it will write the marker (or abort the
                 transaction after its transaction.timeout.ms);
        hanging  kafka-transactions.sh find-hanging's rule: no transactional id has the producer id, or
                 its state does not list the partition: no marker will ever come. Abort it with the
                 command printed below the table (kafka-transactions.sh abort --start-offset, brokers 3.0+);
        unknown  the producer id is in none of the __transaction_state partitions here, but some are
                 missing (pass every broker's data dirs, or --transaction-state-partitions).
find-hanging also skips transactions whose producer wrote less than --max-transaction-timeout (15)
minutes ago; offline nothing races, so every one is listed (DURATION is find-hanging's Duration).

The earliest open transaction of a partition is its first unstable offset: it pins the last stable
offset (LSO: what read_committed consumers read up to) and the log cleaner's first uncleanable offset
(BLOCKS: LSO, and CLEANER when finished segments above it stay dirty until it ends: on a compacted
topic, the cleaner cannot clean them).

--json prints one object per open transaction (docs/schemas/openTransaction.schema.json): dataDir, dir,
topic, partition, producerId, producerEpoch, coordinatorEpoch, firstOffset, lastOffset, firstTimestamp,
lastTimestamp, ageMs, durationMs, lastStableOffset, blocksLso, blocksCleaner, transactionalId,
coordinatorState, coordinatorPartition, coordinatorProducerEpoch, transactionTimeoutMs,
coordinatorStartTimestamp, hanging (null: unknown), status, reason, abortCommand; unreadable partitions
as {dataDir, dir, error}.

Exit codes: 0 no open transaction, 1 open or hanging transactions found (or a partition could not be
read), 2 usage error."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="DIR", help="data dirs or partition dirs")
    parser.add_argument("--json", action="store_true", help="print JSON Lines, one object per open transaction")
    parser.add_argument("--hanging", action="store_true", help="only hanging (and unknown) transactions")
    parser.add_argument("--now", type=timestamp_ms, default=None, metavar="TIME",
                        help=f"time the ages are measured at: {NOW_GRAMMAR} (default: wall clock)")
    parser.add_argument("--bootstrap-server", default=BOOTSTRAP_PLACEHOLDER, metavar="HOST:PORT",
                        help="put into the abort commands (default: the placeholder BOOTSTRAP)")
    parser.add_argument("--transaction-state-partitions", type=non_negative_int, default=None, metavar="N",
                        help="transaction.state.log.num.partitions (default: the __transaction_state partitions "
                        "found, if numbered 0..N-1 without a gap)")
    add_topics_argument(parser)
    parser.add_argument("--workers", type=positive_int, default=None, metavar="N",
                        help="partitions read in parallel by N processes (default: the number of CPUs when there are "
                        "many partitions)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_epoch_argument(parser)


COLUMNS = ["partition", "producerId", "producerEpoch", "transactionalId", "firstOffset", "age", "status", "blocks"]
HEADERS = ["PARTITION", "PRODUCER ID", "EPOCH", "TRANSACTIONAL ID", "FIRST OFFSET", "AGE", "STATUS", "BLOCKS"]


def human_duration(ms: int | None) -> str:
    """``3d4h``, ``2h5m``, ``12m30s``, ``45s``; ``-`` when unknown."""
    if ms is None:
        return "-"
    sign, ms = ("-", -ms) if ms < 0 else ("", ms)
    s = ms // 1000
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{sign}{d}d{h}h"
    if h:
        return f"{sign}{h}h{m}m"
    if m:
        return f"{sign}{m}m{s}s"
    return f"{sign}{s}s" if s else f"{sign}{ms}ms"


def _row(t: dict[str, Any]) -> dict[str, Any]:
    blocks = [w for w, on in (("LSO", t["blocksLso"]), ("CLEANER", t["blocksCleaner"])) if on]
    state = t["coordinatorState"]
    return {
        "partition": t["dir"],
        "producerId": t["producerId"],
        "producerEpoch": t["producerEpoch"],
        "transactionalId": t["transactionalId"],
        "firstOffset": t["firstOffset"],
        "age": human_duration(t["ageMs"]),
        "status": t["status"] + (f" ({state})" if state else ""),
        "blocks": ",".join(blocks) or None,
    }


def print_report(report: TransactionReport, txns: Sequence[dict[str, Any]], stream: IO[str], *,
                 epoch: bool = False) -> None:
    """The human table, the reasons and the abort commands of the hanging (and unknown) transactions."""
    found = _ranges(report.coordinator_partitions)
    if txns:
        render_table([_row(t) for t in txns], COLUMNS, stream, headers=HEADERS)
        stream.write("\n")
        ts = time_format(epoch)
        for t in txns:
            stream.write(f"{t['dir']} @{t['firstOffset']} (producer {t['producerId']}, first write "
                         f"{ts(t['firstTimestamp'])}, last write {ts(t['lastTimestamp'])}, LSO "
                         f"{t['lastStableOffset']}): {t['status']}: {t['reason']}\n")
        to_abort = [t for t in txns if t["hanging"] is not False]
        if to_abort:
            stream.write("\nAbort with (on the running cluster; check first with kafka-transactions.sh "
                         "describe-producers):\n")
            for t in to_abort:
                stream.write(f"  {t['abortCommand']}\n")
    hanging = sum(1 for t in report.transactions if t["hanging"])
    unknown = sum(1 for t in report.transactions if t["hanging"] is None)
    stream.write(f"{'' if not txns else chr(10)}{len(report.transactions)} open transaction(s), {hanging} hanging"
                 f"{f', {unknown} unknown' if unknown else ''} in {report.partitions_scanned} partition(s); "
                 f"coordinator state from {len(report.coordinator_partitions)} {TS} partition(s)"
                 f"{f' ({found})' if found else ''}{'' if report.coordinator_complete else ', incomplete'}\n")
    for e in report.errors:
        stream.write(f"  error: {e.get('dir')}: {error_words(e)['error']}\n")


TS = "__transaction_state"


def _ranges(nums: Sequence[int]) -> str:
    """``0-4,7``."""
    out: list[str] = []
    for n in nums:
        if out and out[-1].split("-")[-1] == str(n - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        else:
            out.append(str(n))
    return ",".join(out)


def error_words(e: dict[str, Any]) -> dict[str, Any]:
    """A partition that could not be read, its ``error`` (words, or a note: a code and its facts) in words."""
    return e | {"error": facts.render(e["error"])} if isinstance(e["error"], Finding) else e


def worded(t: dict[str, Any]) -> dict[str, Any]:
    """An open transaction with its ``reason`` (a note: a code and its facts) in words, for --json and people."""
    return t | {"reason": facts.render(t["reason"])}


def run(args: argparse.Namespace) -> int:
    now = args.now if args.now is not None else int(time.time() * 1000)
    with progress(None, "transactions", enabled=False if args.no_progress else None, unit_bytes=False) as bar:
        report = find_transactions(args.paths, now_ms=now, transaction_state_partitions=args.transaction_state_partitions,
                                   topics=args.topics, bootstrap=args.bootstrap_server, workers=args.workers,
                                   on_total=lambda n: bar.update(total=n), on_advance=bar.advance)
    txns = [worded(t) for t in report.transactions if not args.hanging or t["hanging"] is not False]
    if args.json:
        out = JsonLines(sys.stdout)
        for t in txns:
            out.write(t)
        for e in report.errors:
            out.write(error_words(e))
    else:
        print_report(report, txns, sys.stdout, epoch=args.epoch)
    sys.stdout.flush()
    return 1 if txns or report.errors else 0
