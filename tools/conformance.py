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

Examples:
  kafkalog conformance --kafka 4.3.1
  kafkalog conformance --kafka 3.9.2 --mode zk --scenario recovery index-rebuild
  kafkalog conformance --kafka 4.3.1 --json > conformance.jsonl
  kafkalog conformance --kafka 4.3.1 --backend container
  kafkalog conformance --kafka 4.3.1 --backend container --image apache/kafka:4.3.1
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from kafkalog.compat.jars import LATEST_4

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

    temporary = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix=f"kafkalog-conformance-{args.kafka}-") if temporary else args.workdir)
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
