"""The JVM segment scan: kafkalog's plan, read in the JVM with column pruning.

Spark's Python data source API moves every column of every row from the Python worker into the JVM: a query
that reads two columns pays for nineteen (``docs/performance.md``). :func:`load` plans the read exactly as the
``kafkalog`` format does (:func:`kafkalog.tools.spark.plan.plan`, the same pieces and the same resolved offset
windows), then hands the pieces to a DataSource V2 scan in the JVM (``java/io/kafkalog/spark/SegmentScan.java``)
that decodes batches with Kafka's own record classes (kafka-clients) into Spark column vectors, only the columns
the query uses. The rows are those of ``format("kafkalog")`` (``tests/spark/test_jvm_scan.py`` compares them on
every fixture).

It needs a JDK (``javac``; the scan is compiled on first use into ``~/.cache/kafkalog/spark-scan/``) and
kafka-clients, found as Spark users find a package: the jar named by ``KAFKALOG_KAFKA_CLIENTS_JAR``, else the
Maven coordinates :data:`KAFKA_CLIENTS_PACKAGE` resolved by Spark's own Ivy (``spark.jars.packages``, from Maven
Central or the repositories ``spark.jars.repositories`` names) into Ivy's cache. :func:`scan_jars` gives the
jars for ``spark.jars``; :func:`kafkalog.tools.spark.session` adds them with ``jvm_scan=True``.

What it reads: local segments at record level, ``mode`` failfast, with every read option that only plans
(``topics``, ``partitions``, ``offset``, ``startingOffset`` and the other ranges, ``verifyCrc``,
``includeControlRecords``). Anything else (``level=batch``, ``mode=permissive``, remote file systems, pushed
filters, segments past 2 GiB) is read by ``format("kafkalog")``: :func:`load` falls back to it, and
:func:`jvm_scan_refusal` and :func:`pieces_refusal` say why.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from kafkalog.storage.errors import ConfigError
from kafkalog.storage.io.fs import split_uri

from .options import ReadOptions, parse_read_options
from .plan import Piece, plan
from .scan import record_filter
from .schema import RECORD_SCHEMA_DDL

CLASS = "io.kafkalog.spark.SegmentScan"
SOURCE = Path(__file__).with_name("java") / "io" / "kafkalog" / "spark" / "SegmentScan.java"
#: the kafka-clients whose record classes (``org.apache.kafka.common.record.internal``) the scan is written for
KAFKA_CLIENTS = "4.3.1"
#: its Maven coordinates (``spark.jars.packages``)
KAFKA_CLIENTS_PACKAGE = f"org.apache.kafka:kafka-clients:{KAFKA_CLIENTS}"
#: a kafka-clients jar to use instead of resolving :data:`KAFKA_CLIENTS_PACKAGE`
KAFKA_CLIENTS_JAR_ENV = "KAFKALOG_KAFKA_CLIENTS_JAR"
_LONG_MAX = (1 << 63) - 1
#: why :func:`load_why` did not use the scan on a session without its jars
NO_SCAN = "the session does not have the scan's jars (session(..., jvm_scan=True))"
_INT_MAX = (1 << 31) - 1


def _spark_jars() -> Path:
    import pyspark  # optional dependency: the scan is for Spark

    return Path(pyspark.__file__).parent / "jars"


def cache_root() -> Path:
    """Where the compiled scan is kept (``KAFKALOG_CACHE``, else ``$XDG_CACHE_HOME/kafkalog`` or
    ``~/.cache/kafkalog``)."""
    env = os.environ.get("KAFKALOG_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kafkalog"


def _javac() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "javac", os.X_OK):
        return str(Path(home) / "bin" / "javac")
    javac = shutil.which("javac")
    if javac is None:
        raise ConfigError("the JVM segment scan is compiled on first use and needs a JDK's javac (a JRE is not "
                          "enough): install openjdk-17-jdk-headless or set JAVA_HOME")
    return javac


def _ivy_jar(ivy_dir: Path) -> Path:
    """Where Spark's Ivy puts the resolved kafka-clients (``<spark.jars.ivy>/jars/<org>_<module>-<rev>.jar``)."""
    return ivy_dir / "jars" / f"org.apache.kafka_kafka-clients-{KAFKA_CLIENTS}.jar"


def _ivy_dirs() -> list[Path]:
    """Ivy's directory as Spark defaults it (Spark 4: ``~/.ivy2.5.2``; Spark 3: ``~/.ivy2``)."""
    return [Path.home() / ".ivy2.5.2", Path.home() / ".ivy2"]


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
    """The kafka-clients jar the scan is compiled against and runs with: ``KAFKALOG_KAFKA_CLIENTS_JAR``, else
    :data:`KAFKA_CLIENTS_PACKAGE` from Ivy's cache, resolved by Spark's Ivy (:func:`resolve_package`) the first
    time."""
    given = os.environ.get(KAFKA_CLIENTS_JAR_ENV)
    if given:
        p = Path(given).expanduser()
        if not p.is_file():
            raise ConfigError(f"{KAFKA_CLIENTS_JAR_ENV}={given}: no such file (a kafka-clients jar)")
        return p
    for d in _ivy_dirs():
        if _ivy_jar(d).is_file():
            return _ivy_jar(d)
    for j in resolve_package(KAFKA_CLIENTS_PACKAGE):
        if j.name.endswith(f"kafka-clients-{KAFKA_CLIENTS}.jar") and j.is_file():
            return j
    raise ConfigError(f"Spark's Ivy did not resolve {KAFKA_CLIENTS_PACKAGE} (set {KAFKA_CLIENTS_JAR_ENV} to a "
                      "kafka-clients jar, or spark.jars.repositories to a reachable Maven repository)")


def scan_jar() -> Path:
    """The compiled scan (built with ``javac`` against this pyspark and kafka-clients on first use)."""
    import pyspark  # optional dependency: the scan is for Spark

    src = SOURCE.read_bytes()
    key = hashlib.sha256(src + pyspark.__version__.encode() + KAFKA_CLIENTS.encode()).hexdigest()[:12]
    out = cache_root() / "spark-scan" / f"kafkalog-spark-scan-{key}.jar"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        cp = f"{_spark_jars()}/*:{kafka_clients_jar()}"
        proc = subprocess.run([_javac(), "-nowarn", "--release", "17", "-cp", cp, "-d", tmp, str(SOURCE)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        if proc.returncode != 0:
            raise ConfigError(f"javac failed for the JVM segment scan: {proc.stderr.strip()[-1500:]}")
        part = Path(tmp) / "scan.jar"
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(Path(tmp).rglob("*.class")):
                z.write(f, f.relative_to(tmp).as_posix())
        part.replace(out)
    return out


def scan_jars() -> list[Path]:
    """The jars the JVM scan needs on Spark's classpath (``spark.jars``)."""
    return [scan_jar(), kafka_clients_jar()]


def jvm_scan_refusal(opts: ReadOptions) -> str | None:
    """Why :func:`load` reads ``opts`` through ``format("kafkalog")`` instead (None: the JVM scan reads it)."""
    if opts.batch_level:
        return "level=batch"
    if opts.permissive:
        return "mode=permissive"
    if opts.push_filters:
        return "pushFilters"
    if any(not split_uri(p)[0].is_local for p in opts.paths):
        return "a remote file system"
    return None


def pieces_refusal(groups: list[list[Piece]]) -> str | None:
    """Why the planned ``groups`` go to ``format("kafkalog")`` instead (None: the JVM scan reads them): Kafka's
    ``FileRecords`` addresses a segment with an int, so a byte past 2 GiB (a segment Kafka never writes, but a
    hand-made one may be larger) is read by the Python source."""
    for group in groups:
        for p in group:
            if not p.spec.is_local:
                return f"a remote segment ({p.name})"
            if p.end > _INT_MAX:
                return f"a segment larger than 2 GiB ({p.name})"
    return None


def _escape(s: str) -> str:
    return quote(s, safe="/:@-._~ ")


def encode_pieces(groups: list[list[Piece]], opts: ReadOptions) -> str:
    """The ``pieces`` option of the JVM scan: one line per input partition (see ``SegmentScan.java``); for
    groups :func:`pieces_refusal` accepts."""
    lines = []
    for group in groups:
        out = []
        for p in group:
            # the Python scan's bounds; its open upper end, 2^63, is Long.MAX_VALUE in the JVM
            lo_o, hi_o, lo_t, hi_t = (min(x, _LONG_MAX) for x in record_filter(opts.in_window(p.window)))
            out.append("|".join([_escape(p.path), _escape(p.topic or ""), str(p.partition if p.partition is not None
                                 else -1), _escape(p.name), str(p.start), str(p.end), str(lo_o), str(hi_o),
                                 str(lo_t), str(hi_t)]))  # fmt: skip
        lines.append("\t".join(out))
    return "\n".join(lines)


def load(spark, path: str | None = None, options: Mapping[str, str] | None = None):
    """A DataFrame of the records under ``path`` with ``format("kafkalog")``'s rows and record schema: read by
    the JVM scan when this session has its jars (``session(..., jvm_scan=True)``) and the options allow it,
    otherwise by ``format("kafkalog")``."""
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
        why = pieces_refusal(groups)
        if why is None:
            return (spark.read.format(CLASS).option("schema", RECORD_SCHEMA_DDL)
                    .option("verifyCrc", str(opts.verify_crc).lower())
                    .option("includeControlRecords", str(opts.include_control).lower())
                    .option("pieces", encode_pieces(groups, opts)).load()), None  # fmt: skip
    return spark.read.format("kafkalog").options(**opts_map).load(), why


def has_scan(spark) -> bool:
    """Whether ``spark``'s JVM can load the scan class (its jars are on the classpath)."""
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName(CLASS, False, jvm.java.lang.Thread.currentThread().getContextClassLoader())
        return True
    except Exception:  # noqa: BLE001 - py4j raises Py4JJavaError (ClassNotFoundException)
        return False
