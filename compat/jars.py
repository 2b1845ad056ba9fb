"""Get Apache Kafka's jars from Maven Central (through Maven itself) and find a JDK.

``ensure_kafka("4.3.1")`` returns ``~/.cache/kafkalog/kafka-4.3.1/libs`` (root overridable with the
``KAFKALOG_CACHE`` environment variable), running ``mvn dependency:copy-dependencies`` on
``compat/maven/pom.xml`` the first time only; a ``.complete`` marker makes later calls free.

CLI: ``python -m kafkalog.compat.jars 4.3.1 3.9.2`` (no argument: the default versions).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from kafkalog.compat.errors import HarnessError, JavaNotFound, KafkaResolveError, MavenNotFound

#: Newest 4.x release fully published on Maven Central (4.4.0's kafka_2.13 is there but kafka-tools and
#: kafka-tools-api 4.4.0 are not, so its classpath cannot be resolved) and newest 3.9.x (last with ZooKeeper).
LATEST_4 = "4.3.1"
LATEST_3 = "3.9.2"
#: The older line the upgrade rehearsal starts from (ZooKeeper mode; its committed fixtures, ``make test-older``).
LATEST_2 = "2.8.2"
DEFAULT_VERSIONS: tuple[str, ...] = (LATEST_4, LATEST_3)

POM = Path(__file__).with_name("maven") / "pom.xml"
MARKER = ".complete"


def parse_version(version: str) -> tuple[int, ...]:
    """``"3.9.2"`` -> ``(3, 9, 2)``; raises ValueError on anything else."""
    if not re.fullmatch(r"\d+(\.\d+){1,3}", version):
        raise ValueError(f"not a Kafka release version: {version!r} (expected e.g. 4.3.1)")
    return tuple(int(p) for p in version.split("."))


def cache_root() -> Path:
    env = os.environ.get("KAFKALOG_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kafkalog"


def kafka_home(version: str) -> Path:
    """Directory holding ``libs/`` (and tool helpers) of one Kafka version."""
    parse_version(version)
    return cache_root() / f"kafka-{version}"


def maven_profiles(version: str) -> list[str]:
    v = parse_version(version)
    profiles = ["log4j2" if v >= (4,) else "reload4j"]
    if v >= (3, 7):  # kafka-server is published from 3.7 on
        profiles.append("server")
    return profiles


# --------------------------------------------------------------------------- JDK / Maven discovery


def _java_home_bin(name: str) -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


def _jdk_tool(name: str, missing: str) -> str:
    """Path of the JDK's ``name`` (JAVA_HOME first); JavaNotFound saying ``missing`` (with an install hint)."""
    path = _java_home_bin(name)
    if path is None:
        raise JavaNotFound(missing)
    return path


@cache
def java_executable() -> str:
    """Path of ``java`` (JAVA_HOME first); raises JavaNotFound with an install hint."""
    return _jdk_tool("java", "JDK not found: install openjdk-17 (apt-get install openjdk-17-jdk-headless) or set JAVA_HOME")


@cache
def java_version() -> int:
    """Feature version of the JDK (17 for 17.0.15)."""
    out = subprocess.run([java_executable(), "-version"], capture_output=True, text=True, check=False).stderr
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        raise JavaNotFound(f"cannot tell the Java version from `java -version`: {out.strip()[:200]}")
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


@cache
def javac_executable() -> str:
    return _jdk_tool("javac", "javac not found (a JRE is not enough): install openjdk-17-jdk-headless")


def check_java(version: str | None = None) -> None:
    """Raise JavaNotFound unless a JDK able to run Kafka ``version`` is present."""
    feature = java_version()
    need = 17 if version is None or parse_version(version) >= (4,) else 11
    if feature < need:
        raise JavaNotFound(f"Java {feature} found but Kafka {version or '4.x'} needs Java {need}+: install openjdk-17")


@cache
def mvn_executable() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenNotFound("Maven not found: install maven (apt-get install maven) to fetch Kafka from Maven Central")
    return mvn


# --------------------------------------------------------------------------- resolution


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def is_resolved(version: str) -> bool:
    return (kafka_home(version) / MARKER).is_file()


def ensure_kafka(version: str, *, quiet: bool = True) -> Path:
    """Return the ``libs`` directory of Kafka ``version``, resolving it with Maven on first use.

    Idempotent and safe to call from several processes at once (a file lock serialises Maven runs).
    """
    home = kafka_home(version)
    libs = home / "libs"
    if (home / MARKER).is_file():
        return libs
    check_java(version)
    mvn = mvn_executable()
    with _locked(home.with_name(home.name + ".lock")):
        if (home / MARKER).is_file():
            return libs
        home.mkdir(parents=True, exist_ok=True)
        pom = home / "pom.xml"
        shutil.copyfile(POM, pom)
        cmd = [
            mvn, "-B", "--no-transfer-progress", "-Dstyle.color=never", "-f", str(pom),
            f"-Dkafka.version={version}", f"-Dlibs.dir={libs}",
            "-P" + ",".join(maven_profiles(version)),
            "dependency:copy-dependencies",
        ]  # fmt: skip
        if quiet:
            cmd.insert(1, "-q")
        proc = subprocess.run(cmd, capture_output=quiet, text=True, check=False)
        if proc.returncode != 0:
            tail = "\n".join(((proc.stdout or "") + (proc.stderr or "")).strip().splitlines()[-15:])
            raise KafkaResolveError(
                f"Maven could not resolve Kafka {version} from Maven Central "
                f"(is the version published and the repository reachable?)\n{tail}"
            )
        jars = sorted(p.name for p in libs.glob("*.jar"))
        if not any(j.startswith("kafka_2.13-") for j in jars):
            raise KafkaResolveError(f"Maven finished but {libs} holds no kafka_2.13 jar")
        (home / MARKER).write_text("\n".join(jars) + "\n")
    return libs


#: Test jars some harness features need, as ``(artifactId, classifier)``: ``LocalTieredStorage`` (the
#: RemoteStorageManager that stores on a local dir, in kafka-storage's test jar) and ``org.apache.kafka.test.TestUtils``
#: it refers to (kafka-clients' test jar).
TEST_JARS: tuple[tuple[str, str], ...] = (("kafka-storage", "test"), ("kafka-clients", "test"))
TEST_MARKER = ".complete-test"


def ensure_test_jars(version: str, *, quiet: bool = True) -> list[Path]:
    """The :data:`TEST_JARS` of Kafka ``version`` (``~/.cache/kafkalog/kafka-<v>/test-libs/``, outside ``libs/`` so
    the ordinary classpath does not change), fetched with ``mvn dependency:copy`` on first use."""
    home = kafka_home(version)
    out = home / "test-libs"
    wanted = [out / f"{a}-{version}-{c}.jar" for a, c in TEST_JARS]
    if (home / TEST_MARKER).is_file() and all(p.is_file() for p in wanted):
        return wanted
    ensure_kafka(version, quiet=quiet)
    mvn = mvn_executable()
    with _locked(home.with_name(home.name + ".lock")):
        for (artifact, classifier), jar in zip(TEST_JARS, wanted, strict=True):
            if jar.is_file():
                continue
            out.mkdir(parents=True, exist_ok=True)
            # run outside any project: the cache's pom.xml configures the plugin's own output directory
            cmd = [mvn, "-B", "--no-transfer-progress", "-Dstyle.color=never",
                   f"-Dartifact=org.apache.kafka:{artifact}:{version}:jar:{classifier}", f"-DoutputDirectory={out}",
                   "dependency:copy"]
            if quiet:
                cmd.insert(1, "-q")
            proc = subprocess.run(cmd, capture_output=quiet, text=True, check=False, cwd=out)
            if proc.returncode != 0 or not jar.is_file():
                tail = "\n".join(((proc.stdout or "") + (proc.stderr or "")).strip().splitlines()[-15:])
                raise KafkaResolveError(f"Maven could not fetch {artifact}-{version}-{classifier}.jar\n{tail}")
        (home / TEST_MARKER).write_text("\n".join(p.name for p in wanted) + "\n")
    return wanted


SPARK_KAFKA_POM = Path(__file__).with_name("maven") / "spark-kafka-pom.xml"
#: Spark's Kafka connector (``format("kafka")``) used when the installed pyspark's own version is not on Maven
#: Central (4.3.0 is not published there yet); the DataSource V2 API it uses is the same in 4.2 and 4.3.
SPARK_KAFKA_FALLBACK = "4.2.0"


def ensure_spark_kafka(spark_version: str, *, quiet: bool = True) -> list[Path]:
    """The jars of Spark's own Kafka source (``spark-sql-kafka-0-10_2.13`` with kafka-clients, commons-pool2 and
    spark-token-provider-kafka-0-10; Spark itself comes from pyspark) for pyspark ``spark_version``, resolved
    with Maven into ``~/.cache/kafkalog/spark-kafka-VERSION/libs`` on first use (the connector of that version,
    else of ``SPARK_KAFKA_FALLBACK``); later calls, offline too, read the cache."""
    errors = []
    candidates = tuple(dict.fromkeys((spark_version, SPARK_KAFKA_FALLBACK)))
    for version in candidates:  # a cached one first: no Maven run (offline) once resolved
        if (cache_root() / f"spark-kafka-{version}" / MARKER).is_file():
            return sorted((cache_root() / f"spark-kafka-{version}" / "libs").glob("*.jar"))
    for version in candidates:
        home = cache_root() / f"spark-kafka-{version}"
        failed = _copy_dependencies(home, SPARK_KAFKA_POM, {"spark.version": version}, "spark-sql-kafka-*.jar", quiet)
        if failed:
            errors.append(f"{version}: {failed}")
            continue
        return sorted((home / "libs").glob("*.jar"))
    raise KafkaResolveError("Maven could not resolve Spark's Kafka connector from Maven Central\n" + "\n".join(errors))


HADOOP_MINICLUSTER_POM = Path(__file__).with_name("maven") / "hadoop-minicluster-pom.xml"


def ensure_hadoop_minicluster(hadoop_version: str, *, quiet: bool = True) -> list[Path]:
    """The jars of Hadoop's shaded mini cluster (``hadoop-client-minicluster``, with the JUnit API its test
    utilities call; Hadoop's client and the loggers are pyspark's) for Hadoop ``hadoop_version`` (pyspark's
    own), resolved with Maven into ``~/.cache/kafkalog/hadoop-minicluster-VERSION/libs`` on first use (56 MB)."""
    parse_version(hadoop_version)
    home = cache_root() / f"hadoop-minicluster-{hadoop_version}"
    failed = _copy_dependencies(home, HADOOP_MINICLUSTER_POM, {"hadoop.version": hadoop_version},
                                "hadoop-client-minicluster-*.jar", quiet)
    if failed:
        raise KafkaResolveError(f"Maven could not resolve hadoop-client-minicluster {hadoop_version} from Maven "
                                f"Central\n{failed}")
    return sorted((home / "libs").glob("*.jar"))


def _copy_dependencies(home: Path, pom: Path, properties: dict[str, str], expect: str, quiet: bool) -> str | None:
    """``mvn dependency:copy-dependencies`` of ``pom`` (with ``properties``) into ``home/libs``, once (the marker
    file then says so; a file lock serialises processes): None, or why it failed (Maven's last lines; no jar
    matching ``expect`` copied)."""
    libs = home / "libs"
    if (home / MARKER).is_file():
        return None
    mvn = mvn_executable()
    with _locked(home.with_name(home.name + ".lock")):
        if (home / MARKER).is_file():
            return None
        home.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pom, home / "pom.xml")
        cmd = [mvn, "-B", "--no-transfer-progress", "-Dstyle.color=never", "-f", str(home / "pom.xml"),
               *(f"-D{k}={v}" for k, v in properties.items()), f"-Dlibs.dir={libs}", "dependency:copy-dependencies"]
        if quiet:
            cmd.insert(1, "-q")
        proc = subprocess.run(cmd, capture_output=quiet, text=True, check=False)
        if proc.returncode != 0 or not any(libs.glob(expect)):
            return "\n".join(((proc.stdout or "") + (proc.stderr or "")).strip().splitlines()[-5:])
        (home / MARKER).write_text("\n".join(sorted(p.name for p in libs.glob("*.jar"))) + "\n")
    return None


def classpath(libs: Path) -> str:
    """A JVM ``-cp`` value for every jar of ``libs`` (plus extra dirs appended by callers)."""
    return str(libs / "*")


def find_class(libs: Path, *class_names: str) -> str:
    """First of ``class_names`` present in a jar of ``libs`` (e.g. DumpLogSegments moved packages in 4.x)."""
    wanted = {name: name.replace(".", "/") + ".class" for name in class_names}
    present: set[str] = set()
    for jar in sorted(libs.glob("kafka*.jar")):
        with zipfile.ZipFile(jar) as zf:
            names = set(zf.namelist())
        present.update(n for n, entry in wanted.items() if entry in names)
    for name in class_names:
        if name in present:
            return name
    raise HarnessError(f"none of {', '.join(class_names)} found in {libs}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafkalog.compat.jars",
        description="Fetch Apache Kafka jars from Maven Central into the kafkalog cache.",
    )
    parser.add_argument("versions", nargs="*", default=list(DEFAULT_VERSIONS), help="Kafka versions (e.g. 4.3.1 3.9.2)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show Maven's output")
    args = parser.parse_args(argv)
    return per_version(args.versions, lambda version: f"{version}\t{ensure_kafka(version, quiet=not args.verbose)}")


def per_version(versions: Sequence[str], line: Callable[[str], str]) -> int:
    """The body of compat's per-version commands (``python -m kafkalog.compat.jars``, ``...image``): print
    ``line(version)`` for each version in turn; a HarnessError or ValueError is one ``error:`` line, exit 1."""
    try:
        for version in versions:
            print(line(version))
    except (HarnessError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
