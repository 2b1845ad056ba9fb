"""``kafkalog verify``: check data dirs, partition dirs and single files offline; a thin shell over
:func:`kafkalog.storage.reports.verify.verify_paths`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import IO

from kafkalog.facts import finding_json, render
from kafkalog.storage.files.findings import Finding
from kafkalog.storage.io.fs import is_url
from kafkalog.storage.reports.verify import VerifyReport, verify_paths

from .output import JsonLines, human_size, positive_int, progress, render_table

DESCRIPTION = """\
Check Kafka log directories without a broker: every partition of every data dir, in parallel.

  kafkalog verify /var/lib/kafka/data                    # a whole data dir (all partitions)
  kafkalog verify /data1 /data2                          # the log.dirs of one broker (JBOD)
  kafkalog verify /var/lib/kafka/data/orders-3           # one partition
  kafkalog verify 00000000000000001234.log 00000000000000001234.snapshot   # single files
  kafkalog verify s3://bucket/data/orders-3/00000000000000001234.log     # a URL: a file or a dir
  kafkalog verify --deep --json /var/lib/kafka/data | jq 'select(.severity=="error")'

What is checked: batch framing and CRCs (a CRC mismatch has kind "crc"), offsets increasing and not
below each segment's base offset, the offset and time indexes against the log (Kafka's sanity check
plus DumpLogSegments' stricter --verify-index-only rule), the transaction index against the abort
markers, producer snapshots (CRC32C), leader-epoch-checkpoint, partition.metadata (topic ids agree),
the data-dir checkpoints (pointing inside the logs), meta.properties across data dirs, leftover
.swap/.cleaned/.deleted/.tmp files, and whether a live broker holds the dir's .lock. --deep also
decodes (and decompresses) every record and checks it against its batch header.

Findings have a severity: error (Kafka would truncate, rebuild or refuse something; data may be
lost), warning (unusual, Kafka copes), info (worth knowing; shown with --info). The human output is a
table and a summary line; --json prints one object per finding with the keys file, position, kind,
severity and message (position: byte offset in the file, or null), then nothing else on stdout
(docs/json.md has the JSON Schema of every command's --json output).

Nothing is written: verify only reads (it is safe on a running broker's dir, whose files may change).

Exit codes: 0 no error, 1 at least one error, 2 usage error."""

SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="data dirs, partition dirs or single files (.log, .index, .snapshot, checkpoints, ...); "
                        "local paths or URLs (s3://...)")
    parser.add_argument("--deep", "--kafka-exact", action="store_true", dest="deep",
                        help="also decode every record (decompressing batches): slower, finds more. --kafka-exact "
                             "is the same check (every rule Kafka applies to the records), under the name repair "
                             "and conformance certify use")
    parser.add_argument("--json", action="store_true",
                        help="print JSON Lines, one object per finding (file, position, kind, severity, message)")
    parser.add_argument("--workers", type=positive_int, default=None, metavar="N",
                        help="partitions verified in parallel by N processes (default: the number of CPUs)")
    parser.add_argument("--info", action="store_true", help="also show findings of severity info")
    parser.add_argument("--independent", action="store_true",
                        help="the data dirs belong to different brokers: skip the cross-dir rules (one "
                        "cluster.id and node id, no partition in two dirs)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")




def run(args: argparse.Namespace) -> int:
    show_info = args.info
    with progress(None, "verify", enabled=False if args.no_progress else None) as bar:
        report = verify_paths(
            args.paths, deep=args.deep, workers=args.workers, independent=args.independent,
            on_total=lambda n: bar.update(total=n), on_advance=bar.advance,
        )
    shown = [f for f in report.findings if show_info or f.severity != "info"]
    if args.json:
        out = JsonLines(sys.stdout)
        for f in shown:
            out.write(finding_json(f))
        print(summary_line(report), file=sys.stderr)
    else:
        print_findings(shown, sys.stdout)
        print(summary_line(report))
    sys.stdout.flush()
    return 0 if report.ok else 1


def _short(path: str) -> str:
    if is_url(path):  # (a URL as it is: relpath would take it for a local path)
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if len(rel) < len(path) else path


def print_findings(findings: list[Finding], stream: IO[str]) -> None:
    if not findings:
        return
    ordered = sorted(findings, key=lambda f: SEVERITY_RANK.get(f.severity, 3))
    rows = [{"severity": f.severity, "kind": f.kind, "file": _short(f.file), "position": f.position,
             "message": render(f)} for f in ordered]
    render_table(rows, ["severity", "kind", "file", "position", "message"], stream,
                 headers=["SEVERITY", "KIND", "FILE", "POSITION", "MESSAGE"])


def summary_line(report: VerifyReport) -> str:
    s = report.stats
    rate = s.bytes / report.seconds if report.seconds > 0 else 0.0
    infos = sum(1 for f in report.findings if f.severity == "info")
    what = [f"{s.partitions} partitions" if s.partitions or not s.files else None,
            f"{s.files} files" if s.files else None]
    verdict = "OK" if report.ok else "FAILED"
    return (f"{verdict}: {', '.join(w for w in what if w)}, {s.segments} segments, {human_size(s.bytes)} in "
            f"{report.seconds:.2f} s ({human_size(rate)}/s); {report.errors} errors, {report.warnings} warnings, "
            f"{infos} info")
