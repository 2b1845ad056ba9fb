"""The JVM side of the ``kafkalog`` Spark source: kafkalog's plan, read in the JVM with column pruning.

Spark's Python data source API moves every column of every row from the Python worker into the JVM: a query
that reads two columns pays for nineteen (``docs/performance.md``). kafkalog's Spark jar (``java/``, built by
:mod:`.jar`: the wheel carries it, a checkout compiles it on first use) holds two DataSource V2 classes:

* ``KafkaLogSource``, ``format("kafkalog")`` on a session with the jar (``META-INF/services``): on the driver it
  asks kafkalog's planner (``python -m kafkalog.tools.spark.jvm_plan``: :func:`option_refusal`, the plan of
  :func:`kafkalog.tools.spark.plan.plan`, :func:`pieces_refusal`, :func:`encode_pieces`) for the pieces, and hands
  what the scan does not read, streams and writes to the Python data source, registered then as
  :data:`PYTHON_NAME` (:func:`kafkalog.tools.spark.register`);
* ``SegmentScan``, which decodes the planned pieces with Kafka's own record classes (kafka-clients) into Spark
  column vectors, only the columns the query uses. :func:`load` plans in this process and reads through it
  directly.

The rows are those of the Python source (``tests/spark/test_jvm_scan.py`` compares them on every fixture).
kafka-clients is found as Spark users find a package: a local jar (``KAFKALOG_KAFKA_CLIENTS_JAR``, Maven's local
repository, Spark's Ivy cache) or the Maven coordinates :data:`KAFKA_CLIENTS_PACKAGE` (``spark.jars.packages``);
:func:`scan_jars` gives the jars for ``spark.jars``, :func:`submit_args` the arguments of ``spark-submit``
(``kafkalog spark jars``).

What the scan reads: segments at record level, ``mode`` failfast, with every read option that only plans
(``topics``, ``partitions``, ``offset``, ``startingOffset`` and the other ranges, ``verifyCrc``,
``includeControlRecords``): local ones (and ``file://``) with kafka-clients' ``FileRecords``, those under
``s3://``/``s3a://`` and ``hdfs://`` through Hadoop's ``FileSystem`` (:func:`kafkalog.storage.io.fs.hadoop_url`
names them, :func:`kafkalog.storage.io.fs.hadoop_conf` gives it the planner's endpoint and keys; ``s3a://`` needs
hadoop-aws in the session: :func:`hadoop_aws_package`). Anything else (``level=batch``, ``mode=permissive``,
``remote``, other file systems, a scheme with no Hadoop FileSystem in the session, ``pushFilters``, segments past
2 GiB) is read by the Python source, and :func:`option_refusal`, :func:`jvm_scan_refusal`, :func:`pieces_refusal`
and :func:`missing_file_system` say why.
"""

from __future__ import annotations

import importlib.resources
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from kafkalog.storage.errors import ConfigError
from kafkalog.storage.io import hdfs
from kafkalog.storage.io.fs import (
    FIRST_WINDOW,
    HADOOP_SCHEMES,
    REMOTE_WINDOW,
    FsSpec,
    hadoop_conf,
    hadoop_url,
    split_uri,
)

from .jar import (
    KAFKA_CLIENTS,
    KAFKA_CLIENTS_JAR_ENV,
    KAFKA_CLIENTS_PACKAGE,
    PACKAGED,
    SOURCE_CLASS,
    JarBuildError,
    build_jar,
    local_kafka_clients,
    source_digest,
)
from .options import ReadOptions, parse_read_options
from .plan import Piece, plan
from .scan import REPLACED, REPLACED_FAIL, REPLACED_WARN, record_filter
from .schema import RECORD_SCHEMA_DDL

__all__ = ["KAFKA_CLIENTS", "KAFKA_CLIENTS_JAR_ENV", "KAFKA_CLIENTS_PACKAGE", "SOURCE_CLASS"]

CLASS = "io.kafkalog.spark.SegmentScan"
#: the name of the Python data source when the JVM source has ``kafkalog`` (``KafkaLogSource.PYTHON_NAME``)
PYTHON_NAME = "kafkalog_python"
_LONG_MAX = (1 << 63) - 1
#: why :func:`load_why` did not use the scan on a session without its jars
NO_SCAN = "the session does not have kafkalog's jar (session(..., jvm_scan=False), or no JDK to build it)"
_INT_MAX = (1 << 31) - 1


def cache_root() -> Path:
    """Where a checkout's compiled jar is kept (``KAFKALOG_CACHE``, else ``$XDG_CACHE_HOME/kafkalog`` or
    ``~/.cache/kafkalog``)."""
    env = os.environ.get("KAFKALOG_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kafkalog"


def resolve_package(coordinates: str, conf: Mapping[str, str] | None = None) -> list[Path]:
    """The jars of Maven ``coordinates`` as ``spark.jars.packages`` resolves them: a Spark JVM is started with
    the package (Spark's Ivy fetches it and its dependencies from Maven Central, or the repositories of
    ``spark.jars.repositories``, into Ivy's cache), asked for the jars it put on its classpath, and stopped."""
    from pyspark import SparkConf  # optional dependency: the scan is for Spark
    from pyspark.java_gateway import launch_gateway  # optional dependency (as above)

    sc = SparkConf(loadDefaults=False)
    for k, v in dict(conf or {}).items():
        sc.set(k, v)
    sc.set("spark.jars.packages", coordinates)
    gateway = launch_gateway(sc)
    try:
        jars = gateway.jvm.java.lang.System.getProperty("spark.jars") or ""
    finally:
        gateway.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            proc.stdin.close()
            proc.wait(30)
    return [Path(j[len("file:"):] if j.startswith("file:") else j) for j in jars.split(",") if j]


def kafka_clients_jar() -> Path:
    """The kafka-clients jar the scan runs with (and a checkout's jar is compiled against): the one already on this
    machine (``KAFKALOG_KAFKA_CLIENTS_JAR``, Maven's local repository, Spark's Ivy cache), else
    :data:`KAFKA_CLIENTS_PACKAGE` resolved by Spark's Ivy (:func:`resolve_package`)."""
    try:
        found = local_kafka_clients()
    except JarBuildError as e:
        raise ConfigError(str(e)) from None
    if found is not None:
        return found
    for j in resolve_package(KAFKA_CLIENTS_PACKAGE):
        if j.name.endswith(f"kafka-clients-{KAFKA_CLIENTS}.jar") and j.is_file():
            return j
    raise ConfigError(f"Spark's Ivy did not resolve {KAFKA_CLIENTS_PACKAGE} (set {KAFKA_CLIENTS_JAR_ENV} to a "
                      "kafka-clients jar, or spark.jars.repositories to a reachable Maven repository)")


def packaged_jar() -> Path | None:
    """The jar the wheel carries (built with the package), if any."""
    p = importlib.resources.files("kafkalog.tools.spark").joinpath(PACKAGED)
    return Path(str(p)) if p.is_file() else None


def scan_jar() -> Path:
    """kafkalog's Spark jar (the JVM ``kafkalog`` source and segment scan): the wheel's, else compiled from this
    checkout's sources with ``javac`` against this pyspark and kafka-clients (once, into the cache)."""
    jar = packaged_jar()
    if jar is not None:
        return jar
    import pyspark  # optional dependency: the jar is for Spark

    out = cache_root() / "spark-scan" / f"kafkalog-spark-{source_digest(pyspark.__version__, KAFKA_CLIENTS)}.jar"
    if out.is_file():
        return out
    try:
        return build_jar(out, [f"{Path(pyspark.__file__).parent / 'jars'}/*", kafka_clients_jar()])
    except JarBuildError as e:
        raise ConfigError(f"kafkalog's Spark jar cannot be built: {e}") from None


def scan_jars() -> list[Path]:
    """The jars the JVM source and scan need on Spark's classpath (``spark.jars``)."""
    return [scan_jar(), kafka_clients_jar()]


def submit_args(s3a: bool = False) -> dict[str, list[str]]:
    """What ``spark-submit`` needs for the JVM source (``kafkalog spark jars``): ``jars`` (kafkalog's jar, and
    kafka-clients when it is a local file named by ``KAFKALOG_KAFKA_CLIENTS_JAR``) and ``packages`` (kafka-clients'
    Maven coordinates otherwise; with ``s3a``, also hadoop-aws for the scan's ``s3a://`` reads:
    :func:`hadoop_aws_package`)."""
    jars = [str(scan_jar())]
    packages = [KAFKA_CLIENTS_PACKAGE]
    if os.environ.get(KAFKA_CLIENTS_JAR_ENV):
        jars.append(str(kafka_clients_jar()))
        packages = []
    if s3a:
        packages.append(hadoop_aws_package())
    return {"jars": jars, "packages": packages}


def option_refusal(options: Mapping[str, str]) -> str | None:
    """Why the JVM ``kafkalog`` source gives a read with these (unparsed) options to the Python data source
    (None: the scan reads it, unless its planned pieces refuse it: :func:`pieces_refusal`). ``remote`` is refused
    before parsing: its view of the store is made by the process that reads it."""
    if any(str(k).lower() == "remote" for k in options):
        return "remote"
    return jvm_scan_refusal(parse_read_options(options))


def stream_schemes(options: Mapping[str, str]) -> list[str]:
    """The Hadoop FileSystem schemes a stream with these options opens (``s3a``, ``hdfs``; none for local dirs). A
    stream (``readStream``) goes to the Python data source for what a batch read does (:func:`option_refusal`) and
    when its JVM lacks one of these FileSystems (checked by the JVM source); else ``KafkaLogMicroBatchStream`` reads
    it, planned by :mod:`.jvm_stream`."""
    opts = parse_read_options(options)
    return sorted({HADOOP_SCHEMES[s.scheme] for s in _specs(opts) if not s.is_local})


def _specs(opts: ReadOptions) -> list[FsSpec]:
    return [split_uri(p, opts.fs_options())[0] for p in opts.paths]


def jvm_scan_refusal(opts: ReadOptions) -> str | None:
    """Why the JVM scan does not read ``opts`` and the Python data source does (None: the JVM scan reads it)."""
    if opts.batch_level:
        return "level=batch"
    if opts.permissive:
        return "mode=permissive"
    if opts.push_filters:
        return "pushFilters"
    for p in opts.paths:
        spec = split_uri(p)[0]
        if not spec.is_local and spec.scheme not in HADOOP_SCHEMES:
            return f"a file system the scan does not read ({spec.scheme}://)"
    return None


def pieces_refusal(groups: list[list[Piece]]) -> str | None:
    """Why the planned ``groups`` go to the Python data source instead (None: the JVM scan reads them): Kafka's
    ``FileRecords`` addresses a segment with an int, so a byte past 2 GiB (a segment Kafka never writes, but a
    hand-made one may be larger) is read by the Python source."""
    for group in groups:
        for p in group:
            if hadoop_url(p.spec, p.path) is None:
                return f"a remote segment ({p.name})"
            if p.end > _INT_MAX:
                return f"a segment larger than 2 GiB ({p.name})"
    return None


def _escape(s: str) -> str:
    return quote(s, safe="/:@-._~ ")


def encode_pieces(groups: list[list[Piece]], opts: ReadOptions) -> str:
    """The ``pieces`` option of the JVM scan: one line per input partition (see ``SegmentScan.java``); for
    groups :func:`pieces_refusal` accepts. Each piece ends with its segment's stamp as planned (size, modification
    time, inode: :meth:`~kafkalog.storage.io.file_stamp.FileStamp.fields`), which the scan compares with the file it opens
    (:meth:`~kafkalog.storage.io.file_stamp.FileStamp.holds`' comparison)."""
    lines = []
    for group in groups:
        out = []
        for p in group:
            # the Python scan's bounds; its open upper end, 2^63, is Long.MAX_VALUE in the JVM
            lo_o, hi_o, lo_t, hi_t = (min(x, _LONG_MAX) for x in record_filter(opts.in_window(p.window)))
            stamp = p.stamp.fields() if p.stamp is not None else (-1, -1, -1)  # -1: not checked
            out.append("|".join([_escape(str(hadoop_url(p.spec, p.path))), _escape(p.topic or ""), str(p.partition if p.partition is not None
                                 else -1), _escape(p.name), str(p.start), str(p.end), str(lo_o), str(hi_o),
                                 str(lo_t), str(hi_t), *map(str, stamp)]))  # fmt: skip
        lines.append("\t".join(out))
    return "\n".join(lines)


def data_loss_options(opts: ReadOptions) -> dict[str, str]:
    """The JVM scan's options for a piece whose segment was replaced after planning: ``failOnDataLoss`` and the
    words of :mod:`.scan` (``replaced``, whose fields the scan fills, then ``replacedFail`` or ``replacedWarn``)."""
    return {"failOnDataLoss": str(opts.fail_on_data_loss).lower(), "replaced": REPLACED,
            "replacedFail": REPLACED_FAIL, "replacedWarn": REPLACED_WARN}


def scan_options(groups: list[list[Piece]]) -> dict[str, str]:
    """The JVM scan's options for the pieces under a URL of ``groups`` (none when every piece is local): the
    Hadoop configuration that reaches the planner's server (``hadoop.KEY``, :func:`~kafkalog.storage.io.fs.
    hadoop_conf`) and the windows the seam reads in (:data:`~kafkalog.storage.io.fs.FIRST_WINDOW`, then doubling up
    to :data:`~kafkalog.storage.io.fs.REMOTE_WINDOW`)."""
    return spec_scan_options({p.spec for g in groups for p in g})


def stream_scan_options(opts: ReadOptions) -> dict[str, str]:
    """:func:`scan_options` for a stream's data dirs (its micro-batches' pieces are under them), and ``hadoopFiles``
    when one is under a URL: the scan's readers then get a Hadoop configuration whatever a micro-batch holds."""
    out = spec_scan_options(set(_specs(opts)))
    return out | {"hadoopFiles": "true"} if out else out


def spec_scan_options(specs: set[FsSpec]) -> dict[str, str]:
    """:func:`scan_options` of the files of ``specs``."""
    specs = {s for s in specs if not s.is_local}
    if not specs:
        return {}
    out = {"firstWindow": str(FIRST_WINDOW), "maxWindow": str(REMOTE_WINDOW)}
    for spec in sorted(specs, key=repr):
        out.update({f"hadoop.{k}": v for k, v in hadoop_conf(spec).items()})
    return out


def hadoop_schemes(groups: list[list[Piece]]) -> list[str]:
    """The Hadoop FileSystem schemes the JVM scan opens for ``groups`` (``s3a``, ``hdfs``)."""
    return sorted({HADOOP_SCHEMES[p.spec.scheme] for g in groups for p in g if not p.spec.is_local})


def missing_file_system(spark, schemes: list[str]) -> str | None:
    """Why ``spark``'s JVM cannot open ``schemes`` (no Hadoop FileSystem for one: ``s3a`` without hadoop-aws), or
    None (``SegmentBatches.missingFileSystem``, the JVM source's check)."""
    if not schemes:
        return None
    return spark.sparkContext._jvm.io.kafkalog.spark.SegmentBatches.missingFileSystem(",".join(schemes))


def hadoop_aws_package() -> str:
    """The Maven coordinates of hadoop-aws for this pyspark's Hadoop (``s3a://``; its AWS SDK comes with it)."""
    import pyspark  # optional dependency: the scan is for Spark

    version = hdfs.hadoop_version(Path(pyspark.__file__).parent / "jars")
    if version is None:
        raise ConfigError("pyspark has no hadoop-client-api jar: its Hadoop version is unknown")
    return f"org.apache.hadoop:hadoop-aws:{version}"


def load(spark, path: str | None = None, options: Mapping[str, str] | None = None):
    """A DataFrame of the records under ``path`` with ``format("kafkalog")``'s rows and record schema: read by
    the JVM scan when this session has kafkalog's jar and the options allow it, otherwise by the Python data
    source."""
    return load_why(spark, path, options)[0]


def load_why(spark, path: str | None = None, options: Mapping[str, str] | None = None):
    """:func:`load`, and why the JVM scan does not read it (None when it does)."""
    opts_map = {str(k): str(v) for k, v in dict(options or {}).items()}
    if path is not None:
        opts_map["path"] = path
    opts = parse_read_options(opts_map)
    why = jvm_scan_refusal(opts)
    if why is None and not has_scan(spark):
        why = NO_SCAN
    if why is None:
        groups = plan(opts)
        why = pieces_refusal(groups) or missing_file_system(spark, hadoop_schemes(groups))
        if why is None:
            return (spark.read.format(CLASS).option("schema", RECORD_SCHEMA_DDL)
                    .option("verifyCrc", str(opts.verify_crc).lower())
                    .option("includeControlRecords", str(opts.include_control).lower())
                    .options(**scan_options(groups), **data_loss_options(opts))
                    .option("pieces", encode_pieces(groups, opts)).load()), None  # fmt: skip
    return spark.read.format(python_format(spark)).options(**opts_map).load(), why


def _has_class(spark, name: str) -> bool:
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName(name, False, jvm.java.lang.Thread.currentThread().getContextClassLoader())
        return True
    except Exception:  # noqa: BLE001 - py4j raises Py4JJavaError (ClassNotFoundException)
        return False


def has_scan(spark) -> bool:
    """Whether ``spark``'s JVM can load the scan class (kafkalog's jar is on the classpath)."""
    return _has_class(spark, CLASS)


def has_source(spark) -> bool:
    """Whether ``format("kafkalog")`` is the JVM source in ``spark`` (kafkalog's jar is on the classpath)."""
    return _has_class(spark, SOURCE_CLASS)


def python_format(spark) -> str:
    """The name of kafkalog's Python data source in ``spark``: ``kafkalog``, or :data:`PYTHON_NAME` when the JVM
    source has that name."""
    return PYTHON_NAME if has_source(spark) else "kafkalog"
