"""``kafkalog describe``: the offline ``kafka-log-dirs --describe``; a thin shell over
:func:`kafkalog.storage.reports.describe.describe_paths`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any

from kafkalog.storage.reports.describe import describe_paths

from .output import (
    JsonLines,
    add_epoch_argument,
    add_topics_argument,
    human_size,
    progress,
    render_table,
    time_format,
)

DESCRIPTION = """\
Describe the partitions of Kafka data dirs (or single partition dirs) without a broker: the offline
equivalent of `kafka-log-dirs.sh --describe`, plus what only the files know.

  kafkalog describe /var/lib/kafka/data
  kafkalog describe /var/lib/kafka/data/orders-3 --segments     # one line per segment too
  kafkalog describe --json /data1 /data2 | jq 'select(.topic=="orders")'
  kafkalog describe s3://bucket/data                            # a URL: read-only, .log files in windows

Per partition: size in bytes, segment count, log start offset (log-start-offset-checkpoint or the
first segment), log end offset, recovery point (recovery-point-offset-checkpoint), high watermark
(replication-offset-checkpoint), clean point (cleaner-offset-checkpoint), the latest leader epoch
(leader-epoch-checkpoint), the topic id (partition.metadata), message formats (magic 0/1/2) and
codecs found in the batch headers. "-" means unknown or absent.

--json prints one object per partition with the keys dataDir, dir, topic, partition, dirKind, size,
segments (a list of {baseOffset, file, size, indexEntries, timeIndexEntries, txnIndexEntries,
maxTimestamp, batches, nextOffset}), logStartOffset, logEndOffset, recoveryPoint, highWatermark,
cleanPoint, leaderEpochs ([[epoch, startOffset], ...]), topicId, producerSnapshots, leftovers, magics,
codecs, and errors when a file could not be read (JSON Schemas of every --json output: docs/json.md).

--fast skips the batch-header scan (no magics, codecs, per-segment batch counts): it then only
reads indexes, checkpoints and the tail of the last segment.

A data dir or partition dir may be a URL (s3://, gs://, hdfs://, fsspec), read through the filesystem
seam as a local dir is read, with the same output; the S3 endpoint and keys come from the environment
(AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).

Exit codes: 0 ok, 1 a partition or file could not be read, 2 usage error."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="DIR", help="data dirs or partition dirs; local paths or URLs (s3://...)")
    parser.add_argument("--json", action="store_true", help="print JSON Lines, one object per partition")
    parser.add_argument("--segments", action="store_true", help="human output: also one line per segment")
    parser.add_argument("--fast", action="store_true", help="skip the batch-header scan (no magics/codecs)")
    add_topics_argument(parser)
    add_epoch_argument(parser)


COLUMNS = ["partition", "size", "segments", "logStartOffset", "logEndOffset", "recoveryPoint", "highWatermark",
           "cleanPoint", "epoch", "topicId", "formats", "codecs"]
HEADERS = ["PARTITION", "SIZE", "SEGMENTS", "START", "END", "RECOVERY", "HW", "CLEAN", "EPOCH", "TOPIC ID",
           "FORMAT", "CODECS"]


def run(args: argparse.Namespace) -> int:
    ok = True
    with progress(None, "describe", unit_bytes=False) as bar:  # partitions read (shown on a terminal only)
        descriptions = _counted(describe_paths(args.paths, scan=not args.fast, topics=args.topics), bar.advance)
        if args.json:
            out = JsonLines(sys.stdout)
            for d in descriptions:
                ok &= "errors" not in d
                out.write(d)
        else:
            ok = print_descriptions(descriptions, sys.stdout, segments=args.segments, epoch=args.epoch)
    sys.stdout.flush()
    return 0 if ok else 1


def _counted(items: Iterable[dict[str, Any]], advance) -> Iterator[dict[str, Any]]:
    for d in items:
        advance(1)
        yield d


def _row(d: dict[str, Any]) -> dict[str, Any]:
    epochs = d.get("leaderEpochs") or []
    suffix = "" if d.get("dirKind", "live") == "live" else f" ({d['dirKind']})"
    return {
        "partition": f"{d.get('dir')}{suffix}",
        "size": d.get("size"),
        "segments": len(d["segments"]) if isinstance(d.get("segments"), list) else None,
        "logStartOffset": d.get("logStartOffset"),
        "logEndOffset": d.get("logEndOffset"),
        "recoveryPoint": d.get("recoveryPoint"),
        "highWatermark": d.get("highWatermark"),
        "cleanPoint": d.get("cleanPoint"),
        "epoch": f"{epochs[-1][0]}@{epochs[-1][1]}" if epochs else None,
        "topicId": d.get("topicId"),
        "formats": ",".join(f"v{m}" for m in d.get("magics", [])) or None,
        "codecs": ",".join(d.get("codecs", [])) or None,
    }


def print_descriptions(descriptions: Iterable[dict[str, Any]], stream: IO[str], *, segments: bool = False,
                       epoch: bool = False) -> bool:
    """Human tables, one per data dir (sizes in KiB/MiB..., timestamps ISO-8601 UTC or, with ``epoch``, raw
    epoch ms); returns False when some partition had errors."""
    ok = True
    by_dir: dict[str, list[dict[str, Any]]] = {}
    for d in descriptions:
        by_dir.setdefault(d.get("dataDir", ""), []).append(d)
    for i, (ddir, parts) in enumerate(by_dir.items()):
        if i:
            stream.write("\n")
        total = sum(p.get("size") or 0 for p in parts)
        stream.write(f"Data dir {ddir}: {len(parts)} partitions, {human_size(total)}\n")
        render_table([_row(p) for p in parts], COLUMNS, stream, headers=HEADERS, formats={"size": human_size})
        for p in parts:
            for e in p.get("errors", ()):
                ok = False
                stream.write(f"  error: {p.get('dir')}: {e}\n")
            for w in p.get("warnings", ()):
                stream.write(f"  warning: {p.get('dir')}: {w}\n")
        if segments:
            for p in parts:
                segs = p.get("segments") or []
                if not segs:
                    continue
                stream.write(f"\n{p.get('dir')}:\n")
                render_table(segs, ["file", "size", "baseOffset", "nextOffset", "batches", "indexEntries",
                                    "timeIndexEntries", "txnIndexEntries", "maxTimestamp"], stream,
                             headers=["FILE", "SIZE", "BASE", "NEXT", "BATCHES", "INDEX", "TIMEINDEX", "TXNINDEX",
                                      "MAX TIMESTAMP"],
                             formats={"size": human_size, "maxTimestamp": time_format(epoch)})
    return ok
