"""`kafkalog doctor LOG_DIR...`: what the broker will do at its next start, predicted offline."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from kafkalog import facts
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.reports.doctor import SCAN_RATE, diagnose
from kafkalog.tools.output import (
    NOW_GRAMMAR,
    JsonLines,
    human_size,
    positive_int,
    progress,
    render_table,
    timestamp_ms,
)

DESCRIPTION = f"""\
One pre-flight over the log.dirs of one broker (in their configured order: the first is the metadata dir) that
predicts its next start, changing nothing:

  * will it start at all: the files it refuses, each with the broker's own error message (meta.properties
    missing or disagreeing on cluster.id / node.id / directory.id, __cluster_metadata outside the metadata
    dir, a partition live in two dirs, a directory that is not a partition's, an unreadable partition.metadata
    or leader-epoch-checkpoint);
  * which partitions it recovers and how many .log bytes it scans, every truncation (records, offsets,
    reason), the indexes and producer snapshots it rebuilds, interrupted segment replacements it completes;
  * stray replicas (partition.metadata topic id missing or not the one in __cluster_metadata: renamed
    -stray, not served), -delete/-stray/-future dirs, segments holding message format v0/v1 batches (info:
    a 4.x broker loads them and appends v2 batches after them);
  * data lost without the broker noticing: offsets a partition's checkpoints, producer snapshots, leader
    epochs or consumer groups' commits remember past the end of its log (its .log files deleted or cut
    short), a torn batch or a batch failing its CRC in a segment the recovery leaves as it is (it is served
    as it is); each a loss with its offsets (the CRCs are read with the format check: --no-format-check);
  * for a batch failing its CRC, how it is served: which consumers fail on it (the Java consumer,
    kafka-python, librdkafka with check.crcs=true) and which receive its damaged records without an error
    (librdkafka with its defaults, when the records still decode), that followers cannot replicate it, and the
    commands that cut the log there (kafkalog repair --full) or read around it (kafkalog export --salvage
    --include-invalid); for a torn closed segment, that consumers and followers skip the hole's offsets
    without an error;
  * a torn end of the active segment after a clean shutdown: the broker keeps the torn bytes and appends after
    them records its consumers and followers never reach (they stall at the log end, the followers counted in
    the ISR, until the appended bytes span the torn batch's declared size; then most of them fail there), and a
    later start without a clean shutdown truncates them away; kafkalog repair --full cuts it;
  * an estimate of the broker's recovery time: bytes to scan / scan rate. The rate is measured while
    planning (which runs the same segment recovery over the same bytes), divided by how much slower the broker
    was than kafkalog in tests/benchmarks/bench_repair.py; under 32 MiB to scan, the broker's rate from that
    benchmark ({SCAN_RATE // (1024 * 1024)} MiB/s, one recovery thread, 2-core machine). --scan-rate overrides.

The prediction is the plan `kafkalog repair --dry-run --kafka-exact` prints (the same function): run
`kafkalog repair` to do the recovery offline instead.

Exit status: 0 healthy, 1 the broker will start after recovery, with data loss or with warnings, 2 usage,
4 the broker will not start.

Examples:
  kafkalog doctor /var/lib/kafka/data
  kafkalog doctor /data1 /data2 --server-properties /etc/kafka/server.properties --json
"""

COLUMNS = ["severity", "kind", "partition", "offsets", "records", "bytes", "message"]
#: the readers of a served corrupt batch (serving.servedTo), in words
READERS = {"javaConsumer": "the Java consumer", "kafkaPython": "kafka-python",
           "librdkafka": "librdkafka with its defaults (check.crcs=false)",
           "librdkafkaCheckCrcs": "librdkafka with check.crcs=true"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("log_dirs", nargs="+", metavar="LOG_DIR", help="the broker's log.dirs, in configured order")
    p.add_argument("--server-properties", metavar="FILE", help="broker config (node.id, index.interval.bytes ...)")
    p.add_argument("--node-id", type=int, metavar="N", help="the configured node.id (default: --server-properties)")
    p.add_argument("--scan-rate", type=positive_int, metavar="MIB_PER_S",
                   help="recovery scan rate for the time estimate, in MiB/s (default: measured)")
    p.add_argument("--no-format-check", action="store_true",
                   help="do not look for message format v0/v1 batches nor check the CRCs of the segments the "
                        "recovery leaves as they are (saves a read of every byte)")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="partitions planned N at a time in parallel processes, those of every LOG_DIR together "
                   "(default: 1)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--now", type=timestamp_ms, metavar="TIME", help=f"current time (producer expiration): {NOW_GRAMMAR}")
    p.add_argument("--json", action="store_true",
                   help="JSON Lines: one doctorProblem per finding, then the doctorSummary (docs/json.md)")


def _offsets(p) -> str | None:
    if p.first_offset is not None and p.last_offset is not None:
        return f"{p.first_offset}..{p.last_offset}"
    if p.first_offset is not None:
        return f"{p.first_offset}.."
    if p.last_offset is not None and p.kind == "recovery":
        return f"..{p.last_offset}"
    return None


def _show(text: str) -> str:
    """A path or message for people: undecodable bytes of file names as ``\\xNN``."""
    return os.fsencode(text).decode("utf-8", "backslashreplace")


def _message(p) -> str:
    text = facts.render(p.note) if p.note is not None else p.message
    return _show(f"{p.broker_message}: {text}" if p.broker_message else text)


def _serving(p) -> list[str]:
    """What a served corrupt batch, hole or torn end means for the clients and replicas of the broker, in words."""
    s = p.serving
    fates = s.served_to
    at = p.first_offset if p.first_offset is not None else "the batch"
    pdir = Path(p.path).parent
    commands = s.to_dict()
    cut = f"`{commands['cut']['command']} {_show(str(pdir.parent))}`"
    salvage = f"`{commands['salvage']['command']} {_show(str(pdir))} --out {_show(pdir.name)}.jsonl`"
    where = f"{_show(p.partition or p.path)} offsets {_offsets(p) or '?'}"
    readers = {fate: ", ".join(w for k, w in READERS.items() if fates[k] == fate) for fate in set(fates.values())}
    loses = (f" (offsets {s.cut_first_offset}..{s.cut_last_offset} are lost)"
             if s.cut_first_offset is not None and s.cut_last_offset is not None else "")
    if s.damage == "hole":
        return [f"{where}: the broker serves the log with this hole",
                f"  skip its offsets without an error, receiving the records before and after it: {readers['skips']}",
                "  followers replicate around it: a replica's log has the same hole, and it joins the ISR",
                f"  cut it: {cut} truncates the log at the hole{loses}",
                f"  salvage first: {salvage} reads every record around it"]
    if s.damage == "tornEnd":
        spanned = s.served_to_once_spanned or {}
        until = (f"until the broker has appended {s.span_bytes:,d} bytes after them (the rest of the torn batch's declared "
                 "size)" if s.span_bytes is not None else
                 "(too few torn bytes to declare a batch size: what they get after the first append is not known)")
        lines = [f"{where}: the broker keeps the torn bytes at the end of its log and appends after them",
                 f"  stall at offset {at} without an error, never receiving a record appended after it, {until}: "
                 f"{readers['stalls']}",
                 f"  followers stall at offset {at} too, while the leader counts them in the ISR: the records "
                 "appended are on the leader alone"]
        if s.span_bytes is not None:
            failing = ", ".join(w for k, w in READERS.items() if spanned.get(k) == "fails")
            still = ", ".join(w for k, w in READERS.items() if spanned.get(k) == "stalls")
            lines.append(f"  then the torn batch fails its CRC at offset {at}: {failing} fail there"
                         + (f"; {still} still stalls" if still else "")
                         + ("; followers fail and leave the ISR" if spanned.get("follower") == "fails" else ""))
        return lines + [
            f"  a start without a clean shutdown then truncates the log at byte {p.note.facts['position']}: every "
            "record appended after the torn bytes is lost",
            f"  cut it before the broker starts: {cut} removes the {p.bytes} torn bytes (no record)"]
    lines = [f"{where}: the broker serves this batch as it is"]
    fail = [w for k, w in READERS.items() if fates[k] == "fails"]
    if fail:
        lines.append(f"  fail at offset {at}, at every poll until the application seeks past it: {', '.join(fail)}")
    silent = [w for k, w in READERS.items() if fates[k] == "delivers"]
    if silent:
        lines.append(f"  receive its damaged records without an error: {', '.join(silent)}")
    if fates["follower"] == "fails":
        lines.append(f"  followers cannot replicate it: a replica's fetch fails at offset {at}, it never catches up "
                     "nor joins the ISR")
    lines.append(f"  cut it: {cut} truncates the log at the batch{loses}")
    lines.append(f"  salvage first: {salvage} reads every record around it")
    return lines


def _seconds(s: float) -> str:
    return "under 0.1 s" if s < 0.1 else f"about {s:,.1f} s"


def run(args: argparse.Namespace) -> int:
    resolver = ConfigResolver(args.server_properties, data_dirs=args.log_dirs)
    now = args.now if args.now is not None else int(time.time() * 1000)
    with progress(None, "doctor: partitions", unit_bytes=False, enabled=False if args.no_progress else None) as bar:
        diag = diagnose(args.log_dirs, now_ms=now, resolver=resolver, node_id=args.node_id,
                        workers=args.workers or 1, progress=bar.advance, on_total=lambda n: bar.update(total=n),
                        scan_rate=args.scan_rate * 1024 * 1024 if args.scan_rate else None,
                        legacy=not args.no_format_check)
    headline = facts.render(diag.headline_note())
    if args.json:
        out = JsonLines()
        for p in diag.problems:
            out.write(p.to_dict() | ({"message": facts.render(p.note)} if p.note is not None else {}))
        out.write(diag.summary() | {"headline": headline})
        return diag.exit_code
    print(_show(headline))
    s = diag.summary()
    if diag.bytes_to_scan:
        rate = f"{human_size(diag.scan_rate)}/s, {diag.scan_rate_source}"
        print(f"recovery scans {human_size(diag.bytes_to_scan)} in {diag.partitions_recovered} of {diag.partitions} "
              f"partition(s): {_seconds(diag.estimate_seconds)} at {rate}")
    if diag.problems:
        print()
        rows = [{"severity": p.severity, "kind": p.kind, "partition": _show(p.partition or p.path),
                 "offsets": _offsets(p), "records": p.records, "bytes": p.bytes,
                 "message": _message(p)} for p in diag.problems]
        render_table(rows, COLUMNS, formats={"bytes": lambda b: "-" if b is None else human_size(b)})
    for p in diag.problems:
        if p.serving is not None:
            print()
            print("\n".join(_serving(p)))
    c = s["counts"]
    print(f"\ndoctor: {c['fatal']} fatal, {c['loss']} loss, {c['recovery']} recovery, {c['warning']} warning(s), "
          f"{c['info']} info over {diag.partitions} partition(s) in {len(diag.log_dirs)} log dir(s)")
    if diag.fatal:
        print("the broker refuses to start on these dirs: run `kafkalog repair --dry-run` to see what repairs the "
              "files it can", file=sys.stderr)
    return diag.exit_code
