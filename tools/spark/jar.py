"""kafkalog's Spark jar: the JVM ``kafkalog`` source (``KafkaLogSource``, registered for ``format("kafkalog")``
through ``META-INF/services``) and its segment scan (``SegmentScan``), compiled from ``java/`` with ``javac``.

The package build compiles it into the wheel (``setup.py``: :func:`build_for_package`); a checkout without a
built jar compiles it on first use (:func:`kafkalog.tools.spark.jvm.scan_jar`). The standard library only: the
package build loads this file by its path, before kafkalog is installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

JAVA_DIR = Path(__file__).with_name("java")
#: the DataSourceRegister class Spark finds ``format("kafkalog")`` by
SOURCE_CLASS = "io.kafkalog.spark.KafkaLogSource"
SERVICE = "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister"
#: where the wheel carries the jar (in package ``kafkalog.tools.spark``)
PACKAGED = "jars/kafkalog-spark.jar"
#: the kafka-clients whose record classes (``org.apache.kafka.common.record.internal``) the scan is written for
KAFKA_CLIENTS = "4.3.1"
#: its Maven coordinates (``spark.jars.packages``, ``spark-submit --packages``)
KAFKA_CLIENTS_PACKAGE = f"org.apache.kafka:kafka-clients:{KAFKA_CLIENTS}"
#: a kafka-clients jar to use instead of resolving :data:`KAFKA_CLIENTS_PACKAGE`
KAFKA_CLIENTS_JAR_ENV = "KAFKALOG_KAFKA_CLIENTS_JAR"
#: a directory of Spark's jars to compile against when pyspark is not importable (the package build)
SPARK_JARS_ENV = "KAFKALOG_SPARK_JARS"


class JarBuildError(Exception):
    """Why the jar cannot be built here (no JDK, no Spark API jars, javac failed)."""


def sources() -> list[Path]:
    return sorted(JAVA_DIR.rglob("*.java"))


def source_digest(*extra: str) -> str:
    """A digest of the Java sources (and ``extra``: the versions compiled against)."""
    h = hashlib.sha256()
    for f in sources():
        h.update(f.relative_to(JAVA_DIR).as_posix().encode() + b"\0" + f.read_bytes())
    for e in extra:
        h.update(e.encode())
    return h.hexdigest()[:12]


def javac() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "javac", os.X_OK):
        return str(Path(home) / "bin" / "javac")
    found = shutil.which("javac")
    if found is None:
        raise JarBuildError("no JDK: javac is not on PATH and JAVA_HOME has none (a JRE is not enough): install "
                            "openjdk-17-jdk-headless or set JAVA_HOME")
    return found


def maven_local_jar() -> Path:
    """kafka-clients in Maven's local repository (``~/.m2``), where ``mvn`` and Spark's Ivy both look."""
    return (Path.home() / ".m2" / "repository" / "org" / "apache" / "kafka" / "kafka-clients" / KAFKA_CLIENTS
            / f"kafka-clients-{KAFKA_CLIENTS}.jar")


def local_kafka_clients() -> Path | None:
    """kafka-clients already on this machine: ``KAFKALOG_KAFKA_CLIENTS_JAR``, else Maven's local repository or
    Spark's Ivy cache (Spark 4: ``~/.ivy2.5.2``; Spark 3: ``~/.ivy2``)."""
    given = os.environ.get(KAFKA_CLIENTS_JAR_ENV)
    if given:
        p = Path(given).expanduser()
        if not p.is_file():
            raise JarBuildError(f"{KAFKA_CLIENTS_JAR_ENV}={given}: no such file (a kafka-clients jar)")
        return p
    ivy = [d / "jars" / f"org.apache.kafka_kafka-clients-{KAFKA_CLIENTS}.jar"
           for d in (Path.home() / ".ivy2.5.2", Path.home() / ".ivy2")]
    return next((p for p in [maven_local_jar(), *ivy] if p.is_file()), None)


def maven_kafka_clients() -> Path:
    """kafka-clients fetched by Maven from Maven Central into its local repository (``mvn dependency:get``)."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarBuildError(f"no kafka-clients jar (set {KAFKA_CLIENTS_JAR_ENV}, or install Maven to fetch "
                            f"{KAFKA_CLIENTS_PACKAGE})")
    proc = subprocess.run([mvn, "-q", "-B", "dependency:get", f"-Dartifact={KAFKA_CLIENTS_PACKAGE}", "-Dtransitive=false"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if proc.returncode != 0 or not maven_local_jar().is_file():
        raise JarBuildError(f"mvn dependency:get {KAFKA_CLIENTS_PACKAGE} failed: {(proc.stdout + proc.stderr).strip()[-800:]}")
    return maven_local_jar()


def spark_jars_dir() -> Path:
    """Spark's jars to compile against: pyspark's, else ``KAFKALOG_SPARK_JARS``, else ``$SPARK_HOME/jars``."""
    try:
        import pyspark  # optional dependency: the jar is for Spark

        return Path(pyspark.__file__).parent / "jars"
    except ImportError:
        pass
    for d in (os.environ.get(SPARK_JARS_ENV), os.environ.get("SPARK_HOME") and f"{os.environ['SPARK_HOME']}/jars"):
        if d and any(Path(d).glob("spark-sql_*.jar")):
            return Path(d)
    raise JarBuildError(f"no Spark API jars: pyspark is not importable here, and neither {SPARK_JARS_ENV} nor "
                        "SPARK_HOME names a directory holding spark-sql_*.jar")


def build_jar(out: Path, classpath: list[Path | str]) -> Path:
    """Compile the sources against ``classpath`` into the jar ``out`` (written aside, renamed into place)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        classes = Path(tmp) / "classes"
        cmd = [javac(), "-nowarn", "--release", "17", "-cp", os.pathsep.join(map(str, classpath)), "-d", str(classes),
               *map(str, sources())]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise JarBuildError(f"javac failed: {proc.stderr.strip()[-1500:]}")
        part = Path(tmp) / "kafkalog-spark.jar"
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: kafkalog\n\n")
            z.writestr(SERVICE, SOURCE_CLASS + "\n")
            for f in sorted(classes.rglob("*.class")):
                z.write(f, f.relative_to(classes).as_posix())
        part.replace(out)
    return out


def build_for_package(out: Path) -> str | None:
    """The package build's jar: compiled into ``out``; None, or why it was not built (no JDK, no Spark API jars,
    no kafka-clients, javac failed)."""
    try:
        spark = spark_jars_dir()
        clients = local_kafka_clients() or maven_kafka_clients()
        build_jar(out, [f"{spark}/*", clients])
    except JarBuildError as e:
        return str(e)
    return None
