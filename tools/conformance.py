"""`kafkalog conformance --kafka VERSION`: the differential scenarios against a real Apache Kafka broker."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

DESCRIPTION = """\
Start a real Apache Kafka broker (jars fetched once from Maven Central with Maven into ~/.cache/kafkalog,
run with the machine's JDK; `--backend container` runs it in a Docker container instead: the image
kafkalog/kafka:VERSION built on this machine, or --image apache/kafka:VERSION) and check that kafkalog and
Kafka agree on the bytes on disk:

  kafka-writes-kafkalog-reads   both clients produce (every codec, headers, transactions, LogAppendTime);
                                `kafkalog dump --deep` must equal Kafka's DumpLogSegments field by field
                                and equal what the producers sent
  kafkalog-writes-kafka-serves  kafkalog writes segments + indexes into a stopped broker's partition dir and
                                `kafkalog flush`es it; DumpLogSegments' index checks pass; the restarted
                                broker serves exactly those records (kafka-python and confluent-kafka,
                                read_uncommitted and read_committed)
  index-rebuild                 the broker rebuilds deleted indexes at start; kafkalog's rebuild must equal
                                them byte for byte
  recovery                      SIGKILL during produce + a torn batch: the broker's recovery of one copy vs
                                `kafkalog repair` + `kafkalog flush` of another, every file compared

Each scenario takes seconds to a minute. The table shows what was compared, pass/FAIL, the time and, for a
failure, the first differences; the work dir with the broker logs is kept when something fails (or with
--keep). Exit 0 when every scenario passed, 1 otherwise, 2 on a usage error.

`kafkalog conformance certify DIR... --kafka VERSION` certifies data dirs written by any system (another
broker, a backup or migration tool, an older Kafka) against that broker: see `kafkalog conformance certify -h`.

Examples:
  kafkalog conformance --kafka 4.3.1
  kafkalog conformance --kafka 3.9.2 --mode zk --scenario recovery index-rebuild
  kafkalog conformance --kafka 4.3.1 --json > conformance.jsonl
  kafkalog conformance --kafka 4.3.1 --backend container
  kafkalog conformance --kafka 4.3.1 --backend container --image apache/kafka:4.3.1
"""


CERTIFY_DESCRIPTION = """\
Certify data dirs written by any system (another Kafka-compatible broker, a backup/restore or migration tool,
an older Kafka: an upgrade rehearsal) against a real Apache Kafka broker of --kafka VERSION. Each DIR (a
broker's log.dirs entry) is copied (the original is only read) and:

  load     a broker loads the copy: what must match the test broker is restamped (meta.properties ids; without
           __cluster_metadata the topics are created with the topic ids of their partition.metadata, and a
           Kafka before 3.3 runs in ZooKeeper mode, as its users ran it); the broker's own log lines about
           loading (recovery, truncation, rebuilt indexes and producer state, stray dirs, errors) are the
           evidence
  serve    every partition is consumed to its end by kafka-python and confluent-kafka (check.crcs=true), at
           read_uncommitted and read_committed, and compared record for record with what kafkalog reads from
           the original files (aborted transactions skipped as the files' markers say)
  tools    Kafka's DumpLogSegments --deep-iteration --index-sanity-check on every segment, kafkalog verify --deep

The report says CONFORMANT or lists each divergence: partition and offsets or file and byte, what Kafka did,
what the files imply, the Kafka rule (class/method) and the kafkalog command that prepares the dir. Internal
topics are loaded and dumped, not consumed. Exit 0 conformant, 1 not (or bad input), 2 usage error.

Examples:
  kafkalog conformance certify /backup/broker-1/data --kafka 4.3.1
  kafkalog conformance certify old-2.8-dir --kafka 4.3.1 --json > rehearsal.jsonl
  kafkalog conformance certify DIR --kafka 4.3.1 --backend container
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from kafkalog.compat.jars import LATEST_4

    sub = p.add_subparsers(dest="conformance_command", metavar="certify", required=False)
    c = sub.add_parser("certify", help="certify data dirs written by any system against a real broker",
                       description=CERTIFY_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("dirs", nargs="+", metavar="DIR", help="data dirs (a broker's log.dirs entries)")
    c.add_argument("--kafka", metavar="VERSION", required=True, help=f"Apache Kafka release to run (e.g. {LATEST_4})")
    c.add_argument("--backend", choices=("jvm", "container"), default=None,
                   help="the broker as a JVM from the Maven jars (default) or in a Docker container")
    c.add_argument("--image", metavar="IMAGE", default=None, help="the container backend's image")
    c.add_argument("--workdir", metavar="DIR", help="where the copies and broker logs go (kept; default: a temp dir, "
                   "kept when not conformant)")
    c.add_argument("--json", action="store_true",
                   help="JSON Lines: one object per divergence, then one summary per dir")
    c.set_defaults(_run=run_certify)

    p.add_argument("--kafka", metavar="VERSION", default=LATEST_4,
                   help=f"Apache Kafka release to run (default {LATEST_4}; e.g. 3.9.2, 2.8.2)")
    p.add_argument("--mode", choices=("kraft", "zk"), default="kraft",
                   help="KRaft (default) or ZooKeeper mode (Kafka 3.x and older only)")
    p.add_argument("--scenario", nargs="+", action="extend", metavar="NAME",
                   help="run only these scenarios (see --list); default: all")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--workdir", metavar="DIR", help="where brokers and data dirs go (kept; default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the temporary work dir even when all passed")
    p.add_argument("--json", action="store_true", help="JSON Lines: one object per scenario")
    p.add_argument("--backend", choices=("jvm", "container"), default=None,
                   help="run the broker as a JVM from the Maven jars (default) or in a Docker container "
                   "(KRaft only; default: $KAFKALOG_BROKER, else jvm)")
    p.add_argument("--image", metavar="IMAGE", default=None,
                   help="the container backend's image (default: kafkalog/kafka:VERSION, built here on first "
                   "use by `python -m kafkalog.compat.image VERSION`; e.g. apache/kafka:4.3.1 from a registry)")


def run(args: argparse.Namespace) -> int:
    from kafkalog.compat import conformance, jars
    from kafkalog.compat.errors import HarnessError
    from kafkalog.tools.output import JsonLines, progress, render_table

    if args.list:
        rows = [{"scenario": s.name, "compares": s.compares} for s in conformance.SCENARIOS.values()]
        if args.json:
            JsonLines().write_all(rows)
        else:
            render_table(rows, ["scenario", "compares"])
        return 0
    try:
        version = jars.parse_version(args.kafka)
    except ValueError as e:
        print(f"kafkalog conformance: --kafka: {e}", file=sys.stderr)
        return 2
    if args.image and (args.backend or os.environ.get("KAFKALOG_BROKER", "jvm")) != "container":
        print("kafkalog conformance: --image needs --backend container", file=sys.stderr)
        return 2
    if args.mode == "zk" and (args.backend or os.environ.get("KAFKALOG_BROKER")) == "container":
        print("kafkalog conformance: the container backend runs KRaft mode only (use --mode kraft)", file=sys.stderr)
        return 2
    if args.mode == "zk" and version >= (4,):
        print(f"kafkalog conformance: Kafka {args.kafka} has no ZooKeeper mode (use --mode kraft)", file=sys.stderr)
        return 2
    names = args.scenario or list(conformance.SCENARIOS)
    if unknown := [n for n in names if n not in conformance.SCENARIOS]:
        print(f"kafkalog conformance: unknown scenario {unknown[0]!r} (one of {', '.join(conformance.SCENARIOS)})",
              file=sys.stderr)
        return 2
    try:
        jars.ensure_kafka(args.kafka)
    except HarnessError as e:
        print(f"kafkalog conformance: {e}", file=sys.stderr)
        return 1

    workdir, temporary = _workdir(args, "conformance")
    out = JsonLines() if args.json else None
    with progress(len(names), f"Kafka {args.kafka} ({args.mode})", unit_bytes=False) as bar:

        def started(name: str) -> None:
            bar.update(description=f"Kafka {args.kafka} ({args.mode}): {name}")

        def finished(r: conformance.ScenarioResult) -> None:
            bar.advance(1)
            if out is not None:
                out.write(r.to_json())
                sys.stdout.flush()

        results = conformance.run_conformance(args.kafka, mode=args.mode, scenarios=names, workdir=workdir,
                                              on_start=started, on_result=finished, backend=args.backend,
                                              image=args.image)
    failed = [r for r in results if not r.passed and r.skipped is None]
    if out is None:
        backend = args.backend or os.environ.get("KAFKALOG_BROKER", "jvm")
        where = "" if backend == "jvm" else f", in a container: {args.image or 'kafkalog/kafka:' + args.kafka}"
        print(f"Apache Kafka {args.kafka} ({args.mode}{where}) vs kafkalog")
        render_table([{"scenario": r.scenario, "compared": r.summary(), "result": r.status,
                       "seconds": round(r.seconds, 1)} for r in results],
                     ["scenario", "compared", "result", "seconds"])
        for r in failed:
            print(f"\n{r.scenario} FAILED:")
            for line in r.detail.splitlines():
                print(f"  {line}")
        print(f"\n{len(results) - len(failed)}/{len(results)} scenarios passed"
              + ("" if not failed else f"; broker logs and data dirs kept in {workdir}"))
    elif failed:
        print(f"kafkalog conformance: {len(failed)} scenario(s) failed; work dir kept: {workdir}", file=sys.stderr)
    if temporary and not failed and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    elif temporary and out is None and not failed:
        print(f"work dir kept: {workdir}")
    return 1 if failed else 0


def _workdir(args: argparse.Namespace, run: str) -> tuple[Path, bool]:
    """The work dir of a run: ``--workdir``, or a new temporary one (``True``: the run may remove it)."""
    if args.workdir is None:
        return Path(tempfile.mkdtemp(prefix=f"kafkalog-{run}-{args.kafka}-")), True
    return Path(args.workdir), False


def run_certify(args: argparse.Namespace) -> int:
    from kafkalog.compat import certify, jars
    from kafkalog.compat.errors import HarnessError
    from kafkalog.tools.output import JsonLines, render_table

    try:
        jars.parse_version(args.kafka)
    except ValueError as e:
        print(f"kafkalog conformance certify: --kafka: {e}", file=sys.stderr)
        return 2
    if args.image and args.backend != "container":
        print("kafkalog conformance certify: --image needs --backend container", file=sys.stderr)
        return 2
    try:
        dirs = [certify.check_input(d) for d in args.dirs]
        jars.ensure_kafka(args.kafka)
    except HarnessError as e:
        print(f"kafkalog conformance certify: error: {e}", file=sys.stderr)
        return 1
    workdir, temporary = _workdir(args, "certify")
    try:
        report = certify.certify(dirs, kafka=args.kafka, backend=args.backend, image=args.image, workdir=workdir)
    except HarnessError as e:
        print(f"kafkalog conformance certify: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        out = JsonLines()
        for d in report.dirs:
            for x in d.divergences:
                out.write({"type": "divergence", "path": d.path, **x.to_json()})
            out.write({"type": "dir", **d.to_json()})
    else:
        for d in report.dirs:
            _render_dir(d, render_table)
    if temporary and report.conformant:
        shutil.rmtree(workdir, ignore_errors=True)
    elif not args.json:
        print(f"copies and broker logs kept in {workdir}")
    return 0 if report.conformant else 1


PHASES = {"expected": "reading the files", "createTopics": "creating topics", "copy": "copying",
          "brokerStart": "broker start", "consume": "consuming", "consumeKafkaPython": "of which kafka-python",
          "consumeLibrdkafka": "of which librdkafka", "dumpLogSegments": "DumpLogSegments", "verify": "verify"}


def _render_dir(d, render_table) -> None:
    backend = ("" if d.backend == "jvm" else f", {d.backend}") + (" (ZooKeeper mode)" if d.mode == "zk" else "")
    print(f"Apache Kafka {d.kafka}{backend} certifying {d.path} ({d.bytes:,} bytes)")
    if d.metadata == "own":
        print("  metadata: the dir's own __cluster_metadata (its topics, topic ids and node id)")
    elif d.mode == "zk":
        print("  metadata: none in the dir; the topics were created in the test broker's ZooKeeper, with their files' "
              "topic ids and leader epochs")
    else:
        print("  metadata: none in the dir; the topics were created on the test broker")
    if d.restamps:
        ids = sum(1 for r in d.restamps if r.field == "topic_id")
        meta = [r for r in d.restamps if r.file == "meta.properties"]
        parts = ([f"{ids} partition.metadata topic id(s)"] if ids else []) + \
            ([f"meta.properties {', '.join(r.field for r in meta)}"] if meta else [])
        print(f"  restamped in the copy: {'; '.join(parts)}")
    if not d.started:
        print("  the broker did NOT start on the copy")
    else:
        n = len([p for p in d.partitions if not p.internal])
        print(f"  loaded {len(d.partitions)} partition(s), {len(d.events)} log line(s) about loading; "
              f"consumed {n} partition(s) with 2 clients x 2 isolation levels; "
              f"DumpLogSegments on {d.segments_dumped} segment(s)")
    rows = []
    for p in d.partitions:
        if p.internal:
            continue
        counts = {(c.client, c.isolation): c for c in p.served}
        row = {"partition": p.partition}
        for iso, short in (("read_uncommitted", "ru"), ("read_committed", "rc")):
            exp = next((c.expected for c in p.served if c.isolation == iso), None)
            row[f"files {short}"] = "-" if exp is None else exp
            for client, cs in (("kafka-python", "kafka-python"), ("confluent", "librdkafka")):
                c = counts.get((client, iso))
                row[f"{cs} {short}"] = "-" if c is None else c.served
        bad = [x for x in d.divergences if x.partition == p.partition]
        row["result"] = "ok" if not bad else f"{len(bad)} divergence(s)"
        rows.append(row)
    if rows:
        render_table(rows, list(rows[0]))
    if d.divergences:
        print(f"\nNOT CONFORMANT: {len(d.divergences)} divergence(s)")
        for i, x in enumerate(d.divergences, 1):
            where = []
            if x.partition:
                where.append(x.partition)
            if x.first_offset is not None:
                where.append(f"offset {x.first_offset}" if x.last_offset in (None, x.first_offset)
                             else f"offsets {x.first_offset}..{x.last_offset}")
            if x.file:
                where.append(x.file if x.position is None else f"{x.file}@{x.position}")
            if x.client:
                where.append(f"{x.client}, {x.isolation}")
            print(f"{i:3}. [{x.kind}] {'; '.join(where) or d.path}")
            print(f"     kafka: {x.kafka}")
            print(f"     files: {x.files}")
            print(f"     rule:  {x.rule}")
            if x.command:
                print(f"     fix:   {x.command}")
    else:
        print("\nCONFORMANT")
    total = sum(v for k, v in d.seconds.items() if not k.startswith("consume") or k == "consume")
    order = [k for k in PHASES if k in d.seconds] + [k for k in d.seconds if k not in PHASES]
    print("time: " + ", ".join(f"{PHASES.get(k, k)} {d.seconds[k]:.1f} s" for k in order)
          + f" (total {total:.1f} s)")
