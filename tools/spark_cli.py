"""``kafkalog spark verify|export|convert|compact DIR...``: the single-machine engines, distributed by Spark;
``kafkalog spark jars``: the arguments spark-submit needs for the JVM ``kafkalog`` source."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from kafkalog.tools.output import NOW_GRAMMAR, OutputDir, OutputDirRefused, timestamp_ms

DESCRIPTION = """\
The same engines as `kafkalog verify`, `convert` and `compact`, run by Spark tasks one partition (or segment)
at a time, with every result collected into one report; `export` writes Parquet or JSON through the
`kafkalog` Spark data source. Workers use this Python interpreter (PYSPARK_PYTHON defaults to it) and must see
the same paths (local mode, or a filesystem shared by all executors). Mutating jobs hold each data dir's .lock
for the whole job (a running broker makes them refuse) and keep hard-linked originals unless --no-backup.

Jobs:
  verify   findings per file and byte position (exit 1 when any error is found)
  export   records to Parquet partitioned by topic/partition, or JSON Lines (key/value base64)
  convert  rewrite v0/v1 segments as v2 and/or recompress (Kafka 4.0 cleaner rules), crash-safely
  compact  one log-cleaner round per compacted partition
  jars     print the --jars/--packages arguments of spark-submit for format("kafkalog")'s JVM source
           (kafkalog's jar, and kafka-clients as Maven coordinates or, with KAFKALOG_KAFKA_CLIENTS_JAR, a jar)

Examples:
  kafkalog spark verify /var/lib/kafka/data --deep --json > findings.jsonl
  kafkalog spark export /var/lib/kafka/data --out /tmp/orders.parquet --topics orders
  kafkalog spark export /var/lib/kafka/data --out /tmp/last.parquet --topics orders -o -1000 --jvm-scan
  kafkalog spark export s3://bucket/broker-1/data --out /tmp/x.json --format json --option s3.region=eu-west-1
  kafkalog spark convert /var/lib/kafka/data --codec zstd --master local[2] --dry-run
  kafkalog spark compact /var/lib/kafka/data --all --now 1732200000000
  spark-submit $(kafkalog spark jars) --master spark://host:7077 job.py

In Python, the data source itself: spark.read.format("kafkalog").load(DIR) after
kafkalog.tools.spark.register(spark) (see `python -m pydoc kafkalog.tools.spark.options`).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job", choices=["verify", "export", "convert", "compact", "jars"], help="what to run")
    p.add_argument("paths", nargs="*", metavar="DIR", help="data dir(s) or partition dir(s) (export: also .log files, "
                   "s3:// URIs); none for jars")
    p.add_argument("--master", default="local[*]", metavar="URL", help="Spark master (default local[*])")
    p.add_argument("--json", action="store_true", help="JSON Lines on stdout (one row per finding/result, then a "
                   "summary line)")
    g = p.add_argument_group("verify")
    g.add_argument("--deep", action="store_true", help="also decode every record")
    g.add_argument("--independent", action="store_true",
                   help="data dirs belong to different brokers (a fleet): skip the cross-dir log.dirs rules "
                        "(same cluster id and node id) that apply to one broker's data dirs")
    g = p.add_argument_group("export")
    g.add_argument("--out", metavar="PATH", help="output directory (export)")
    g.add_argument("--format", choices=["parquet", "json"], default="parquet", help="export format")
    g.add_argument("--topics", metavar="T1,T2", help="comma-separated topics or glob patterns")
    g.add_argument("-o", "--offset", dest="offset_specs", action="append", default=[], metavar="SPEC",
                   help="a range of each partition, rpk/kcat grammar as `kafkalog export -o` takes it (start, end, "
                        "N, N1:N2, :N, +N, -N, @T1:T2, s@T, e@T), resolved per partition on the driver through its "
                        "offsets and time index (local paths); may be given twice")
    from kafkalog.tools.output import add_time_argument

    add_time_argument(g, "of each partition")
    g.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="data source read option (level=batch, startingOffset=..., s3.endpoint=...)")
    g.add_argument("--overwrite", action="store_true",
                   help="replace a non-empty output directory (the new export is written beside it and renamed "
                        "into place once complete); without it a non-empty directory is refused")
    g.add_argument("--jvm-scan", action="store_true",
                   help="require the JVM segment scan (the default when kafkalog's jar can be had: the same rows, "
                        "decoded by Kafka's record classes in the JVM); without it, a note and the Python data source")
    g = p.add_argument_group("convert / compact")
    g.add_argument("--codec", choices=["none", "gzip", "snappy", "lz4", "zstd"], help="convert: target codec")
    g.add_argument("--now", type=timestamp_ms, metavar="TIME",
                   help=f"compact: cleaning time: {NOW_GRAMMAR} (default: wall clock)")
    g.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="compact: topic config")
    g.add_argument("--server-properties", metavar="FILE", help="compact: the broker's server.properties")
    g.add_argument("--topic-config", metavar="FILE", help="compact: properties file of topic configs")
    g.add_argument("--all", action="store_true", help="compact: clean regardless of min.cleanable.dirty.ratio")
    g.add_argument("--dry-run", action="store_true", help="convert/compact: show what would change; write nothing")
    g.add_argument("--backup", metavar="DIR", help="keep originals here (default: timestamped beside the data dir)")
    g.add_argument("--no-backup", action="store_true", help="keep no originals")
    g = p.add_argument_group("jars")
    g.add_argument("--s3a", action="store_true",
                   help="also hadoop-aws in --packages (Spark's Hadoop version), for the JVM scan's s3a:// reads")


def _kv(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise SystemExit(f"kafkalog spark: {what} expects KEY=VALUE, got {it!r}")
        out[k] = v
    return out


def run(args: argparse.Namespace) -> int:
    from kafkalog.storage.log.offset_spec import parse_offset_specs
    from kafkalog.tools.spark import jobs, session

    if args.job == "jars":
        return _jars(args)
    if not args.paths:
        print(f"kafkalog spark {args.job}: error: the following arguments are required: DIR", file=sys.stderr)
        return 2
    if args.job == "export" and not args.out:
        print("kafkalog spark export: --out is required", file=sys.stderr)
        return 2
    out_dir = None
    if args.job == "export":
        parse_offset_specs(args.offset_specs)  # a bad -o is an error before Spark starts
        if "://" not in args.out:  # a local output: refused or replaced as `export --format parquet` does
            try:
                out_dir = OutputDir(args.out, overwrite=args.overwrite, what="spark export")
            except OutputDirRefused as e:
                print(f"kafkalog spark export: error: {e}", file=sys.stderr)
                return 2
    for raw in args.paths:
        if "://" not in raw and not os.path.exists(raw):
            print(f"kafkalog spark {args.job}: error: {raw}: no such file or directory", file=sys.stderr)
            return 1
    conf = {"spark.ui.showConsoleProgress": "true" if sys.stderr.isatty() else "false"}
    t0 = time.time()
    # export reads through the data source: with kafkalog's jar when there is one (--jvm-scan: say when not);
    # the other jobs run the engines in Python tasks
    jvm_scan: bool | None = False
    if args.job == "export":
        jvm_scan = None
        if args.jvm_scan:
            from kafkalog.tools.spark.jvm import scan_jar

            try:
                scan_jar()
            except Exception as e:  # noqa: BLE001 - no JDK, no Maven, javac failed: the data source reads it
                print(f"kafkalog spark export: the JVM segment scan is not available ({e}); reading through "
                      f"the Python data source", file=sys.stderr)
    spark = session(args.master, app_name=f"kafkalog spark {args.job}", conf=conf, jvm_scan=jvm_scan)
    spark.sparkContext.setLogLevel("ERROR")
    from pyspark.errors import PySparkException

    try:
        if args.job == "verify":
            report = jobs.verify(spark, args.paths, deep=args.deep, independent=args.independent)
        elif args.job == "export":
            opts = _kv(args.option, "--option")
            if args.topics:
                opts["topics"] = args.topics
            if args.offset_specs:
                opts["offset"] = " ".join(args.offset_specs)
            if out_dir is None:
                report = jobs.export(spark, args.paths, args.out, fmt=args.format, options=opts,
                                     mode="overwrite" if args.overwrite else "errorifexists")
            else:  # written into a fresh sibling dir, renamed into place once complete
                with out_dir:
                    report = jobs.export(spark, args.paths, out_dir.path, fmt=args.format, options=opts,
                                         mode="overwrite")
                report.summary.update(out=out_dir.target, replaced=out_dir.replaced)
        elif args.job == "convert":
            from kafkalog.storage.codec.compression import CODEC_IDS
            from kafkalog.storage.engine.convert import ConvertOptions

            copts = ConvertOptions(codec=CODEC_IDS[args.codec] if args.codec else None)
            topics = set(args.topics.split(",")) if args.topics else None
            report = jobs.convert(spark, args.paths, copts, topics=topics, dry_run=args.dry_run,
                                  backup=not args.no_backup, backup_root=args.backup)
        else:
            now = args.now if args.now is not None else int(time.time() * 1000)
            report = jobs.compact(spark, args.paths, now=now, dry_run=args.dry_run, force=args.all,
                                  overrides=_kv(args.config, "--config"), server_properties=args.server_properties,
                                  topic_config=args.topic_config, backup=not args.no_backup, backup_root=args.backup)
    except PySparkException as e:  # a KafkaLogError raised inside Spark arrives wrapped: show its one line
        print(f"kafkalog spark {args.job}: error: {spark_error_line(e)}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    report.summary["seconds"] = round(time.time() - t0, 3)
    _render(report, args.json)
    return 0 if report.ok else 1


def _jars(args: argparse.Namespace) -> int:
    """``kafkalog spark jars``: what ``spark-submit`` needs for the JVM source, one line of arguments."""
    from kafkalog.storage.errors import KafkaLogError
    from kafkalog.tools.spark.jvm import submit_args

    if args.paths:
        print("kafkalog spark jars: error: takes no DIR", file=sys.stderr)
        return 2
    try:
        found = submit_args(s3a=args.s3a)
    except KafkaLogError as e:
        print(f"kafkalog spark jars: error: {e}", file=sys.stderr)
        return 1
    argv = [*(["--jars", ",".join(found["jars"])] if found["jars"] else []),
            *(["--packages", ",".join(found["packages"])] if found["packages"] else [])]
    if args.json:
        print(json.dumps({**found, "args": argv}))
    else:
        print(" ".join(argv))
    return 0


_OUR_ERRORS = ("KafkaLogError", "CorruptRecordError", "CompressionError", "CorruptIndexError",
               "CorruptCheckpointError", "LogDirError", "LockedError", "ConfigError")


def spark_error_line(e: BaseException) -> str:
    """The kafkalog error inside a Spark exception's text (its last ``XxxError: message`` line), else the first
    line of the text."""
    text = str(e)
    for line in reversed(text.splitlines()):
        line = line.strip()
        for name in _OUR_ERRORS:
            marker = f"{name}: "
            i = line.find(marker)
            if i >= 0:
                return line[i + len(marker):]
    return text.strip().splitlines()[0] if text.strip() else type(e).__name__


def _render(report, as_json: bool) -> None:
    out = sys.stdout
    if as_json:
        for r in report.rows:
            out.write(json.dumps(r, default=str) + "\n")
        out.write(json.dumps({"summary": report.summary, "job": report.job}, default=str) + "\n")
        return
    from kafkalog.tools.output import auto_formats, human_size, render_table

    if report.job == "verify":
        rows = [{"severity": r.get("severity"), "kind": r.get("kind"), "file": r.get("file"),
                 "position": r.get("position"), "message": r.get("message")} for r in report.rows]
        if rows:
            render_table(rows, ["severity", "kind", "file", "position", "message"], out)
    elif report.rows:
        columns: list[str] = []
        for r in report.rows:
            columns += [k for k in r if k not in columns]
        render_table(report.rows, columns, out, formats=auto_formats(columns))

    def value(k: str, v) -> str:
        return human_size(v) if ("bytes" in k.lower() and isinstance(v, int) and not isinstance(v, bool)) else str(v)

    out.write(f"{report.job}: " + ", ".join(f"{k} {value(k, v)}" for k, v in report.summary.items()) + "\n")
