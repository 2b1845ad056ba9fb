"""``kafkalog export DIR... --format jsonl|parquet --out PATH``: stream every record out with every field."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime

from kafkalog.storage.engine.export import ExportFilter, export_bytes, export_jsonl, export_parquet
from kafkalog.tools.output import add_topics_argument, progress

DESCRIPTION = """\
Export every record of the partitions under DIR (data dirs or partition dirs) with every field:

  topic, partition, offset, timestamp, timestampType (-1 none/v0, 0 CreateTime, 1 LogAppendTime), key, value,
  headers, leaderEpoch, producerId, producerEpoch, sequence, isTransactional, isControl, magic, codec,
  segment (.log file), position (byte position of the record's batch)

(the same schema as `spark.read.format("kafkalog")`). Control records (transaction markers) are included so
`kafkalog import` can rebuild the partition; --no-control leaves them out.

  --format jsonl     one JSON object per line (key/value/header values base64, null stays null); --out - is stdout
  --format parquet   one file per partition, OUT/<topic>-<partition>.parquet, bounded row groups

Ranges: --from-offset (inclusive) / --to-offset (exclusive); --from-time / --to-time (epoch ms or ISO 8601,
[from, to)). Segments are streamed through mmap one batch at a time: memory does not grow with the data.

Examples:
  kafkalog export /var/lib/kafka/data --topics orders --format parquet --out /tmp/orders-parquet
  kafkalog export /var/lib/kafka/data/orders-0 --from-offset 1000 --to-offset 2000 --out - | jq .value
"""


def _time(s: str | None) -> int | None:
    if s is None:
        return None
    try:
        return int(s)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not epoch ms or ISO 8601: {s!r}") from None
    return int(dt.timestamp() * 1000)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="DIR", help="data dir(s) or partition dir(s)")
    p.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl", help="output format (jsonl)")
    p.add_argument("--out", required=True, help="output file (jsonl; - for stdout) or directory (parquet)")
    add_topics_argument(p)
    p.add_argument("--from-offset", type=int, default=None, help="first offset (inclusive)")
    p.add_argument("--to-offset", type=int, default=None, help="end offset (exclusive)")
    p.add_argument("--from-time", type=_time, default=None, help="first timestamp (inclusive), ms or ISO 8601")
    p.add_argument("--to-time", type=_time, default=None, help="end timestamp (exclusive), ms or ISO 8601")
    p.add_argument("--no-control", action="store_true", help="leave control records (txn markers) out")
    p.add_argument("--row-group-rows", type=int, default=65536, help="Parquet rows per row group (65536)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress bar on stderr (it is shown only when stderr is a terminal)")


def run(args: argparse.Namespace) -> int:
    flt = ExportFilter(topics=args.topics,
                       from_offset=args.from_offset, to_offset=args.to_offset, from_time=args.from_time,
                       to_time=args.to_time, include_control=not args.no_control)
    with progress(export_bytes(args.paths, flt.topics), "export", enabled=None if args.progress else False) as bar:
        if args.format == "jsonl":
            stats = export_jsonl(args.paths, args.out, flt, progress=bar.advance)
        else:
            stats = export_parquet(args.paths, args.out, flt, row_group_rows=args.row_group_rows,
                                   progress=bar.advance)
    msg = stats.to_dict()
    stream = sys.stderr if args.out == "-" else sys.stdout
    if args.json:
        stream.write(json.dumps({"summary": msg}) + "\n")
    else:
        stream.write(f"exported {stats.records} records ({stats.batches} batches) from {stats.partitions} "
                     f"partitions to {args.out}\n")
    return 0
