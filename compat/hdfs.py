"""Run an HDFS for tests: Hadoop's ``MiniDFSCluster`` (a namenode and a datanode, WebHDFS on) in its own JVM.

:meth:`MiniDfs.start` runs ``org.apache.hadoop.mapreduce.MiniHadoopClusterManager -nomr`` (Hadoop's own launcher of
its test cluster) from the shaded ``hadoop-client-minicluster`` jar (:func:`kafkalog.compat.jars.
ensure_hadoop_minicluster`, Maven Central) with the Hadoop client of a Spark distribution (``hadoop-client-api``,
``hadoop-client-runtime`` and the loggers of pyspark's ``jars/``: the cluster is the Hadoop version Spark's client
speaks). Everything binds to localhost on free ports. The cluster writes its configuration, which
:attr:`MiniDfs.conf_dir` holds as a client's ``HADOOP_CONF_DIR`` (``core-site.xml`` naming the namenode,
``hdfs-site.xml`` with ``dfs.namenode.http-address``), as a Hadoop user has it. :meth:`MiniDfs.put` copies local
files in with ``hadoop fs -put -t 8`` (Hadoop's ``FsShell``, eight files at once).

Layout of its work dir::

    <work>/target/test/data/   the namenode's and datanode's storage (MiniDFSCluster's base dir)
    <work>/conf.xml            the configuration the cluster wrote; <work>/details.json its namenode port
    <work>/conf/               a client's HADOOP_CONF_DIR (core-site.xml, hdfs-site.xml)
    <work>/minidfs.log         the cluster's output
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Self

from kafkalog.compat import jars
from kafkalog.compat.broker import _die_with_parent, tail
from kafkalog.compat.errors import HarnessError
from kafkalog.storage.io import hdfs

#: Hadoop's launcher of its test clusters (``mapred minicluster``)
MANAGER = "org.apache.hadoop.mapreduce.MiniHadoopClusterManager"
#: the jars of a Spark distribution's ``jars/`` a Hadoop client JVM needs besides the mini cluster's
CLIENT_JARS = ("hadoop-client-api-", "hadoop-client-runtime-", "slf4j-api-", "log4j-slf4j2-impl-", "log4j-api-",
               "log4j-core-", "log4j-1.2-api-", "jcl-over-slf4j-")
#: the client's first wait for a block's completion (Hadoop's 400 ms, paid on every file a test cluster's datanode
#: has not reported yet: 36 s instead of 5 s to put the 203 files of a fixture)
FAST_CLOSE = "dfs.client.block.write.locateFollowingBlock.initial.delay.ms=5"


def hadoop_version(spark_jars: Path) -> str:
    """The Hadoop version of a Spark distribution's ``jars/`` (:func:`kafkalog.storage.io.hdfs.hadoop_version`)."""
    version = hdfs.hadoop_version(spark_jars)
    if version is None:
        raise HarnessError(f"{spark_jars}: no hadoop-client-api jar (not a Spark distribution's jars/ directory)")
    return version


def client_classpath(spark_jars: Path) -> list[Path]:
    found = [p for p in sorted(spark_jars.glob("*.jar")) if p.name.startswith(CLIENT_JARS)]
    missing = [n for n in CLIENT_JARS if not any(p.name.startswith(n) for p in found)]
    if missing:
        raise HarnessError(f"{spark_jars}: no {', '.join(n + '*.jar' for n in missing)}")
    return found


class MiniDfs:
    """A running MiniDFSCluster; a context manager that stops it."""

    def __init__(self, work: Path, proc: subprocess.Popen, classpath: list[Path], port: int, conf: dict[str, str]):
        self.work, self.proc, self.classpath, self.port, self.conf = work, proc, classpath, port, conf

    @classmethod
    def start(cls, work: Path, spark_jars: Path, timeout: float = 120.0) -> Self:
        """Start a cluster of Spark's Hadoop version in the new or empty dir ``work`` (the mini cluster's jars
        resolved first: :func:`~kafkalog.compat.jars.ensure_hadoop_minicluster`)."""
        work.mkdir(parents=True, exist_ok=True)
        client = client_classpath(spark_jars)
        cp = [*jars.ensure_hadoop_minicluster(hadoop_version(spark_jars)), *client]
        log = open(work / "minidfs.log", "wb")  # noqa: SIM115 - the cluster's output for its lifetime
        cmd = [jars.java_executable(), "-Xmx512m", "-cp", os.pathsep.join(map(str, cp)), MANAGER, "-nomr", "-format",
               "-writeConfig", "conf.xml", "-writeDetails", "details.json"]  # fmt: skip
        proc = subprocess.Popen(cmd, cwd=work, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + timeout
        while not (work / "details.json").is_file() or not (work / "conf.xml").is_file():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise HarnessError(f"MiniDFSCluster did not start (exit {proc.poll()}):\n{tail(work / 'minidfs.log')}")
            time.sleep(0.2)
        time.sleep(0.2)  # (both files written, each whole)
        port = int(json.loads((work / "details.json").read_text())["namenode_port"])
        conf = hdfs.read_config(work / "conf.xml")
        dfs = cls(work, proc, client, port, conf)
        dfs._write_client_conf()
        return dfs

    @property
    def url(self) -> str:
        """The namenode's URL (``hdfs://localhost:PORT``)."""
        return f"hdfs://localhost:{self.port}"

    @property
    def http_address(self) -> str:
        """The namenode's HTTP address (``localhost:PORT``: WebHDFS)."""
        return self.conf["dfs.namenode.http-address"].replace("127.0.0.1", "localhost")

    @property
    def conf_dir(self) -> Path:
        """A client's ``HADOOP_CONF_DIR`` for this cluster."""
        return self.work / "conf"

    def _write_client_conf(self) -> None:
        self.conf_dir.mkdir(exist_ok=True)
        for name, props in (("core-site.xml", {"fs.defaultFS": self.url}),
                            ("hdfs-site.xml", {"dfs.namenode.http-address": self.http_address})):
            body = "".join(f"  <property><name>{k}</name><value>{v}</value></property>\n" for k, v in props.items())
            (self.conf_dir / name).write_text(f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n')

    def hadoop_fs(self, *args: str, timeout: float = 300.0) -> str:
        """``hadoop fs ARGS`` against this cluster (its output; HarnessError when it fails)."""
        cp = os.pathsep.join(map(str, [self.conf_dir, *self.classpath]))
        cmd = [jars.java_executable(), "-cp", cp, "org.apache.hadoop.fs.FsShell", "-D", FAST_CLOSE, *args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if p.returncode != 0:
            raise HarnessError(f"hadoop fs {' '.join(args)}: exit {p.returncode}\n{p.stderr[-2000:]}")
        return p.stdout

    def put(self, local: Path, path: str) -> str:
        """``local`` (a file or a tree) copied to ``path`` (absolute, its parent made); its ``hdfs://`` URL."""
        parent = path.rstrip("/").rsplit("/", 1)[0]
        if parent:
            self.hadoop_fs("-mkdir", "-p", self.url + parent)
        self.hadoop_fs("-put", "-t", "8", str(local), self.url + path)
        return self.url + path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
