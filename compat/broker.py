"""Run a real single-node Apache Kafka broker for tests and fixture capture.

Two backends behind one interface (:class:`KafkaBroker`):

* :class:`Broker` (default) runs the JVM directly from the Maven-resolved jars (:mod:`kafkalog.compat.jars`):
  KRaft combined mode (``kafka.tools.StorageTool format`` first) or, for Kafka < 4, ZooKeeper mode with an
  embedded ``ZooKeeperServerMain`` started from the same jars.
* :class:`ContainerBroker` runs a broker image through testcontainers with host networking (KRaft only): the
  image built on this machine by :mod:`kafkalog.compat.image` (Debian + OpenJDK 17 + the Maven Central jars)
  or, with ``KAFKALOG_IMAGE``, e.g. the official ``apache/kafka``. Select it with :func:`make_broker` and
  ``KAFKALOG_BROKER=container``.

Layout of a broker's work dir (the parent of the data dir)::

    <work>/data/               log.dirs (the Kafka data dir; KRaft's __cluster_metadata-0 lives here too)
    <work>/server.properties   generated config
    <work>/broker.log          broker stdout/stderr (log4j console appender), appended across restarts
    <work>/zookeeper/, zookeeper.log, zoo.cfg   ZooKeeper mode only

Everything binds to 127.0.0.1 on free ports; the ports are kept across restarts.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import uuid
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal, Self, TypeVar

from kafkalog.compat import jars
from kafkalog.compat.errors import BrokerError, HarnessError
from kafkalog.compat.image import LIBS, ensure_image
from kafkalog.storage.files.java import uuid_to_string

Mode = Literal["kraft", "zk"]

#: ``server.properties`` that make a 3.x ZooKeeper-mode broker write message format v1 / v0 (KIP-724: the
#: message format is only honoured while ``inter.broker.protocol.version`` < 3.0).
LEGACY_V1_PROPS: dict[str, str] = {"inter.broker.protocol.version": "2.8", "log.message.format.version": "0.10.0"}
LEGACY_V0_PROPS: dict[str, str] = {"inter.broker.protocol.version": "2.8", "log.message.format.version": "0.9.0"}

NODE_ID = 1
ZK_SESSION_TIMEOUT_MS = 6000
DEFAULT_HEAP = "512m"

_BASE_PROPS: dict[str, str] = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
}

_LOG4J1 = """\
log4j.rootLogger={level}, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.Target={target}
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.kafka.log.LogCleaner=INFO
"""

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.target = {target2}
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
"""


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def cluster_id_from(seed: str) -> str:
    """A valid KRaft cluster id (base64url of 16 bytes, 22 chars) derived from ``seed``: deterministic.

    Like Kafka's ``Uuid.randomUuid``, never one starting with ``-``: ``kafka-storage format -t -Abc…`` would
    read it as an option (about 1 seed in 64 did, failing broker start-up at random)."""
    name = "kafkalog:" + seed
    for attempt in range(1000):
        s = uuid_to_string(uuid.uuid5(uuid.NAMESPACE_URL, name if attempt == 0 else f"{name}:{attempt}").bytes)
        if not s.startswith("-"):
            return s
    raise HarnessError(f"no cluster id for seed {seed!r}")  # pragma: no cover - 64^-1000


def tail(path: Path, lines: int = 40) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def log4j_config(version: str, *, level: str = "INFO", stderr: bool = False) -> tuple[str, str]:
    """(system property assignment, file content) of a console logging config for ``version``."""
    if jars.parse_version(version) >= (4,):
        return "log4j2.configurationFile", _LOG4J2.format(level=level, target2="SYSTEM_ERR" if stderr else "SYSTEM_OUT")
    return "log4j.configuration", _LOG4J1.format(level=level, target="System.err" if stderr else "System.out")


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace("\n", "\\n")

    path.write_text("".join(f"{esc(k)}={esc(str(v))}\n" for k, v in props.items()))


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to SIGTERM the JVM if the Python process dies (no orphan brokers after a crash)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.setsid()


_LIVE: weakref.WeakSet[KafkaBroker] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for broker in list(_LIVE):
        with contextlib.suppress(Exception):
            broker.kill()


class KafkaBroker(ABC):
    """One single-node Kafka cluster. Use as a context manager or call start()/stop()."""

    version: str
    mode: Mode
    data_dir: Path
    work_dir: Path

    def __init__(self, version: str, mode: Mode, data_dir: Path | None, server_properties: Mapping[str, str] | None,
                 cluster_id: str | None, heap: str):
        """``cluster_id``: None for the one derived from the data dir's path; ``heap``: the broker JVM's -Xmx."""
        jars.parse_version(version)
        if mode not in ("kraft", "zk"):
            raise ValueError(f"mode must be 'kraft' or 'zk', not {mode!r}")
        if mode == "zk" and jars.parse_version(version) >= (4,):
            raise ValueError(f"Kafka {version} has no ZooKeeper mode")
        self.version = version
        self.mode = mode
        if data_dir is None:
            data_dir = Path(tempfile.mkdtemp(prefix=f"kafkalog-{version}-{mode}-")) / "data"
        self.data_dir = Path(data_dir).absolute()
        self.work_dir = self.data_dir.parent
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.extra_properties: dict[str, str] = {k: str(v) for k, v in (server_properties or {}).items()}
        self.port = free_port()
        self.controller_port = free_port() if mode == "kraft" else 0
        self.zk_port = free_port() if mode == "zk" else 0
        self.cluster_id = cluster_id or cluster_id_from(str(self.data_dir))
        self.heap = heap

    # ---- lifecycle (backend specific)
    @abstractmethod
    def start(self, *, wait: bool = True, timeout: float = 120.0) -> Self: ...

    @abstractmethod
    def stop(self, timeout: float = 90.0, *, require_clean_marker: bool = True) -> None:
        """Clean shutdown (SIGTERM and wait); raises BrokerError if the clean-shutdown marker is missing."""

    @abstractmethod
    def kill(self) -> None:
        """SIGKILL: no clean shutdown, indexes stay preallocated, no marker."""

    @property
    @abstractmethod
    def running(self) -> bool: ...

    @abstractmethod
    def format(self) -> Path:
        """``kafka-storage format`` the data dir now, without starting the broker (KRaft; as :meth:`start` does
        first): its meta.properties and ``bootstrap.checkpoint``, the records the controller appends to an empty
        metadata log when it activates (``ActivationRecordsGenerator.recordsForEmptyLog``). Returns the data dir."""

    @property
    def formats_offline(self) -> bool:
        """Whether :meth:`format` can format the data dir before the first start."""
        return self.mode == "kraft"

    # ---- paths (both backends: the broker's files beside the data dir, in the work dir)
    @property
    def log_path(self) -> Path:
        """The broker's log (stdout/stderr); print it when a test fails."""
        return self.work_dir / "broker.log"

    @property
    def properties_path(self) -> Path:
        """The ``server.properties`` the broker runs with (:meth:`server_properties`)."""
        return self.work_dir / "server.properties"

    def log_size(self) -> int:
        """How many bytes the broker's log holds now (0 before it exists): where :meth:`log_since` starts."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_since(self, start: int) -> str:
        """The broker's log from byte ``start`` (a :meth:`log_size` taken before an action) to its end."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(start)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    # ---- config (both backends: the broker listens on 127.0.0.1 only, on free ports kept across restarts)
    def server_properties(self) -> dict[str, str]:
        props = dict(_BASE_PROPS)
        props["log.dirs"] = str(self.data_dir)
        listener = f"PLAINTEXT://127.0.0.1:{self.port}"
        if self.mode == "kraft":
            props |= {
                "process.roles": "broker,controller",
                "node.id": str(NODE_ID),
                "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:{self.controller_port}",
                "controller.listener.names": "CONTROLLER",
                "listeners": f"{listener},CONTROLLER://127.0.0.1:{self.controller_port}",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                # a killed broker's registration blocks re-registration until its session expires
                "broker.session.timeout.ms": "3000",
                "broker.heartbeat.interval.ms": "1000",
            }
        else:
            props |= {
                "broker.id": str(NODE_ID),
                "zookeeper.connect": f"127.0.0.1:{self.zk_port}",
                "zookeeper.session.timeout.ms": str(ZK_SESSION_TIMEOUT_MS),
                "listeners": listener,
            }
        props["advertised.listeners"] = listener
        props |= self.extra_properties
        return props

    def jvm_options(self, *, heap: str, log_level: str = "INFO", stderr_log: bool = False) -> list[str]:
        """The broker JVM's options (heap, GC, log4j config written into the work dir), for both backends."""
        prop, content = log4j_config(self.version, level=log_level, stderr=stderr_log)
        cfg = self.work_dir / ("log4j2.properties" if "log4j2" in prop else "log4j.properties")
        if stderr_log:
            cfg = cfg.with_name("tools-" + cfg.name)
        cfg.write_text(content)
        cfg_value = str(cfg) if "log4j2" in prop else cfg.as_uri()
        return [
            f"-Xmx{heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            "-Djava.net.preferIPv4Stack=true",
            "-Dzookeeper.admin.enableServer=false",
            f"-Dkafka.logs.dir={self.work_dir}",
            f"-D{prop}={cfg_value}",
        ]

    # ---- shared behaviour
    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def clean_shutdown_marker(self) -> Path:
        return self.data_dir / ".kafka_cleanshutdown"

    def restart(self, *, timeout: float = 120.0) -> Self:
        """Stop cleanly if running, then start again on the same data dir and ports."""
        if self.running:
            self.stop()
        return self.start(timeout=timeout)

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Block until the broker answers a metadata request listing itself and every partition has a leader
        (after a restart, especially after SIGKILL, leadership comes back some time after the port opens)."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        last: str = "port not open"
        while time.monotonic() < deadline:
            if not self.running:
                raise self.error(f"Kafka {self.version} ({self.mode}) exited during start-up")
            if port_open(self.port):
                admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
                try:
                    md = admin.list_topics(timeout=5)
                    led = {
                        (t.topic, p.id) for t in md.topics.values() if t.error is None
                        for p in t.partitions.values() if p.leader >= 0
                    }  # fmt: skip
                    local = self.local_partitions()
                    waiting = sorted(local - led)
                    if md.brokers and not waiting:
                        if not local or self._serves(admin, local):
                            return
                        last = "partitions not served yet (ListOffsets failed)"
                    else:
                        last = f"no leader yet for {waiting[:5]}" if md.brokers else "no broker registered yet"
                except Exception as exc:  # librdkafka raises KafkaException or plain errors
                    last = str(exc)
            time.sleep(0.3)
        raise self.error(f"Kafka {self.version} ({self.mode}) not ready after {timeout:.0f}s: {last}")

    @staticmethod
    def _serves(admin: Any, partitions: set[tuple[str, int]]) -> bool:
        """True if ListOffsets succeeds for every partition: the metadata can name the broker leader a moment
        before its replica manager has become leader, and clients then get NOT_LEADER_OR_FOLLOWER."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        futures = admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions}, request_timeout=5)
        try:
            for future in futures.values():
                future.result()
        except Exception:  # NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, timeouts: not yet
            return False
        return True

    def local_partitions(self) -> set[tuple[str, int]]:
        """(topic, partition) of the partition dirs in the data dir (internal KRaft log excluded: ``__cluster_metadata``,
        ``@metadata`` in Kafka 2.8): on a restart, the broker is only ready once each of them is served again."""
        out = set()
        if self.data_dir.is_dir():
            for d in self.data_dir.iterdir():
                m = re.fullmatch(r"(.+)-(\d+)", d.name)
                if m and d.is_dir() and m[1] not in ("__cluster_metadata", "@metadata"):
                    out.add((m[1], int(m[2])))
        return out

    def error(self, message: str) -> BrokerError:
        return BrokerError(message, self.log_path, tail(self.log_path))

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None, timeout: float = 30.0
    ) -> None:
        from kafkalog.compat.clients import create_topic

        create_topic(self.bootstrap_servers, name, partitions=partitions, config=config, timeout=timeout)

    def wait_until(self, cond: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``cond`` until it holds; an AssertionError naming ``what`` and the broker log after ``timeout``
        seconds (for tests waiting on the broker's asynchronous work: cleaning, retention, deletion)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            time.sleep(0.3)
        raise AssertionError(f"broker did not {what} within {timeout:.0f}s; log: {self.log_path}")

    def partition_dir(self, topic: str, partition: int = 0) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def close(self) -> None:
        """Kill if still running (use stop() for a clean shutdown)."""
        if self.running:
            self.kill()

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.running:
            if exc[0] is None:
                self.stop()
            else:
                self.kill()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<{type(self).__name__} kafka-{self.version} {self.mode} {self.bootstrap_servers} {state} {self.data_dir}>"


class Broker(KafkaBroker):
    """A broker JVM (and, in ZooKeeper mode, a ZooKeeper JVM) run from the Maven-resolved jars."""

    def __init__(
        self,
        version: str = jars.LATEST_4,
        *,
        mode: Mode = "kraft",
        data_dir: Path | None = None,
        server_properties: Mapping[str, str] | None = None,
        heap: str = DEFAULT_HEAP,
        cluster_id: str | None = None,
        jvm_args: tuple[str, ...] = (),
        extra_classpath: tuple[Path, ...] = (),
    ) -> None:
        """``extra_classpath``: jars appended to the broker's classpath (e.g. :func:`jars.ensure_test_jars` for
        ``LocalTieredStorage``, see :mod:`kafkalog.compat.tiered`)."""
        super().__init__(version, mode, data_dir, server_properties, cluster_id, heap)
        self.extra_classpath = tuple(Path(p) for p in extra_classpath)
        self.libs = jars.ensure_kafka(version)
        self.jvm_args = jvm_args
        self._proc: subprocess.Popen[bytes] | None = None
        self._zk: subprocess.Popen[bytes] | None = None
        self._killed_at: float | None = None
        self._log_fh: IO[bytes] | None = None
        self._cds_dump: Path | None = None
        _LIVE.add(self)

    # ---- paths
    @property
    def zk_log_path(self) -> Path:
        return self.work_dir / "zookeeper.log"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running and self._proc else None

    def _cds_args(self) -> tuple[str, ...]:
        """AppCDS for the broker JVM: the first clean stop of a version dumps the loaded classes into an
        archive in the jar cache; later starts map it (about a third faster on 2 cores). KAFKALOG_CDS=0: off."""
        self._cds_dump = None
        if os.environ.get("KAFKALOG_CDS", "1") == "0":
            return ()
        archive = jars.kafka_home(self.version) / "broker.jsa"
        if archive.is_file():
            return (f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off")
        self._cds_dump = archive.with_name(f"broker.jsa.{os.getpid()}.{id(self)}.tmp")
        return (f"-XX:ArchiveClassesAtExit={self._cds_dump}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off")

    def _keep_cds_dump(self) -> None:
        dump, self._cds_dump = self._cds_dump, None
        if dump is not None and dump.is_file():
            os.replace(dump, dump.with_name("broker.jsa"))

    def _java(
        self, main: str, *args: str, heap: str, log_level: str = "INFO", stderr_log: bool = False,
        extra: tuple[str, ...] = (),
    ) -> list[str]:  # fmt: skip
        return [
            jars.java_executable(),
            *self.jvm_options(heap=heap, log_level=log_level, stderr_log=stderr_log),
            *extra,
            *self.jvm_args,
            "-cp",
            os.pathsep.join([jars.classpath(self.libs), *map(str, self.extra_classpath)]),
            main,
            *args,
        ]

    def format(self) -> Path:
        if self.mode != "kraft":
            raise BrokerError(f"{self!r}: only a KRaft data dir is formatted")
        jars.check_java(self.version)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        write_properties(self.properties_path, self.server_properties())
        self._format()
        return self.data_dir

    def _format(self) -> None:
        """``kafka-storage format`` (KRaft), unless the data dir already holds a meta.properties."""
        if (self.data_dir / "meta.properties").exists():
            return
        cmd = self._java(
            "kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(self.properties_path),
            heap="256m", log_level="WARN", stderr_log=True,
        )  # fmt: skip
        out = ""
        for attempt in (1, 2):  # one retry: a JVM start can fail transiently on a loaded 2-core machine
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=180)
                out = (proc.stdout + proc.stderr).strip()
                ok = proc.returncode == 0
            except subprocess.TimeoutExpired:
                out, ok = "kafka-storage format timed out after 180 s", False
            with open(self.log_path, "a", encoding="utf-8") as log:  # kept for failing tests
                log.write(f"\n===== kafkalog: kafka-storage format (attempt {attempt}) =====\n{out}\n")
            if ok or (self.data_dir / "meta.properties").exists():
                return
        raise BrokerError(f"kafka-storage format failed (Kafka {self.version}): {out[-2000:]}")

    # ---- ZooKeeper
    def create_znodes(self, nodes: Sequence[tuple[str, str]], timeout: float = 120.0) -> None:
        """Start ZooKeeper (ZooKeeper mode; the broker stays stopped) and create each znode (path, data), in order,
        parents first, with ZooKeeper's own shell (``ZooKeeperMain``, its commands on stdin): what a broker then
        starting finds there (``/cluster/id``, ``/brokers/topics/<topic>`` with its ``topic_id``, partition states)
        is the cluster it joins. A node that exists already, or any other refusal, is a :class:`BrokerError`."""
        if self.mode != "zk":
            raise BrokerError(f"{self!r}: znodes only in ZooKeeper mode")
        for path, data in nodes:
            if "'" in data or not path.startswith("/") or any(c.isspace() for c in path):
                raise HarnessError(f"znode {path!r}: the shell cannot quote it")
        jars.check_java(self.version)
        self._start_zookeeper()
        script = "".join(f"create {path} '{data}'\n" for path, data in nodes) + "quit\n"
        cmd = self._java("org.apache.zookeeper.ZooKeeperMain", "-server", f"127.0.0.1:{self.zk_port}",
                         heap="128m", log_level="WARN", stderr_log=True)
        try:
            proc = subprocess.run(cmd, input=script, capture_output=True, text=True, check=False, timeout=timeout)
            out = (proc.stdout + proc.stderr).strip()
        except subprocess.TimeoutExpired:
            out = f"ZooKeeperMain timed out after {timeout:.0f} s"
        with open(self.zk_log_path, "a", encoding="utf-8") as log:  # kept for failing tests
            log.write(f"\n===== kafkalog: {len(nodes)} znode(s) created =====\n{script}{out}\n")
        lines = out.splitlines()
        created = {line.split(" ", 1)[1].strip() for line in lines if line.startswith("Created ")}
        missing = [path for path, _data in nodes if path not in created]
        if missing:
            said = [x for x in lines if x.strip() and not x.startswith(("SLF4J", "WATCHER", "WatchedEvent", "Created "))]
            raise BrokerError(f"ZooKeeper did not create {missing[:3]}: {' / '.join(said[-4:])[-1000:]}",
                              self.zk_log_path)

    def _start_zookeeper(self, timeout: float = 60.0) -> None:
        if self._zk is not None and self._zk.poll() is None:
            return
        zk_dir = self.work_dir / "zookeeper"
        zk_dir.mkdir(exist_ok=True)
        cfg = self.work_dir / "zoo.cfg"
        write_properties(
            cfg,
            {
                "tickTime": "500",
                "dataDir": str(zk_dir),
                "clientPort": str(self.zk_port),
                "clientPortAddress": "127.0.0.1",
                "maxClientCnxns": "0",
                "admin.enableServer": "false",
                "4lw.commands.whitelist": "srvr",
            },
        )
        with open(self.zk_log_path, "ab") as log:
            self._zk = subprocess.Popen(
                self._java("org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg), heap="128m"),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._zk.poll() is not None:
                raise BrokerError("ZooKeeper exited during start-up", self.zk_log_path, tail(self.zk_log_path))
            if self._zk_ok():
                return
            time.sleep(0.2)
        raise BrokerError(f"ZooKeeper not ready after {timeout:.0f}s", self.zk_log_path, tail(self.zk_log_path))

    def _zk_ok(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.zk_port), timeout=1) as s:
                s.sendall(b"srvr")
                return b"Zookeeper version" in s.recv(4096)
        except OSError:
            return False

    def _stop_zookeeper(self) -> None:
        if self._zk is not None and self._zk.poll() is None:
            self._zk.terminate()
            try:
                self._zk.wait(30)
            except subprocess.TimeoutExpired:
                self._zk.kill()
                self._zk.wait()
        self._zk = None

    # ---- lifecycle
    def start(self, *, wait: bool = True, timeout: float = 120.0) -> Self:
        if self.running:
            raise BrokerError(f"{self!r} is already running")
        jars.check_java(self.version)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        write_properties(self.properties_path, self.server_properties())
        if self.mode == "kraft":
            self._format()
        else:
            self._start_zookeeper()
            if self._killed_at is not None:
                # the killed broker's ephemeral /brokers/ids node lives until its session expires
                time.sleep(max(0.0, self._killed_at + ZK_SESSION_TIMEOUT_MS / 1000 + 1.0 - time.monotonic()))
        self._log_fh = open(self.log_path, "ab")  # closed in _reap()
        self._log_fh.write(f"\n===== kafkalog: starting Kafka {self.version} ({self.mode}) =====\n".encode())
        self._log_fh.flush()
        self._proc = subprocess.Popen(
            self._java("kafka.Kafka", str(self.properties_path), heap=self.heap, extra=self._cds_args()),
            stdout=self._log_fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
        )  # fmt: skip
        self._killed_at = None
        if wait:
            try:
                self.wait_ready(timeout)
            except BrokerError:
                self.kill()
                raise
        return self

    def _reap(self) -> None:
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None

    def stop(self, timeout: float = 90.0, *, require_clean_marker: bool = True) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            self._reap()
            self._stop_zookeeper()
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self._reap()
            self._stop_zookeeper()
            raise self.error(f"Kafka {self.version} did not shut down within {timeout:.0f}s (SIGKILLed)") from None
        self._reap()
        self._keep_cds_dump()
        self._stop_zookeeper()
        if require_clean_marker and not self.clean_shutdown_marker.exists():
            raise self.error(f"Kafka {self.version} stopped without writing {self.clean_shutdown_marker}")

    def kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
            self._killed_at = time.monotonic()
        self._reap()
        if self._cds_dump is not None:
            self._cds_dump.unlink(missing_ok=True)
            self._cds_dump = None

    def close(self) -> None:
        """Kill the broker (if running) and stop ZooKeeper."""
        self.kill()
        self._stop_zookeeper()

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self._stop_zookeeper()


class ContainerBroker(KafkaBroker):
    """A broker in a Docker container, run through testcontainers, with host networking (KRaft only).

    The image is ``kafkalog/kafka:<version>``, built on this machine from Debian's packages and the Maven
    Central jars (:mod:`kafkalog.compat.image`, built on first use and reused), or any image given as
    ``image=`` / ``KAFKALOG_IMAGE`` (e.g. the official ``apache/kafka:4.3.1`` from a registry, configured
    through its ``KAFKA_*`` environment variables).

    The container uses the host's network (``network_mode=host``): the broker listens on 127.0.0.1 only, on
    the same free ports and with the same ``server.properties`` as the JVM backend (:meth:`server_properties`).
    The work dir is bind-mounted at its own path, so ``log.dirs`` names the same files inside and outside and
    kafkalog reads and writes the broker's own files; the container runs as the calling user. ``stop`` is
    ``docker stop`` (SIGTERM to the broker, which is the container's PID 1), ``kill`` is ``docker kill``
    (SIGKILL); each start makes a new container on the same dirs and ports, and the logs of every run are
    appended to ``broker.log``.
    """

    OFFICIAL = "apache/kafka"

    def __init__(
        self,
        version: str = jars.LATEST_4,
        *,
        mode: Mode = "kraft",
        data_dir: Path | None = None,
        server_properties: Mapping[str, str] | None = None,
        cluster_id: str | None = None,
        image: str | None = None,
        heap: str = DEFAULT_HEAP,
    ) -> None:
        if mode != "kraft":
            raise ValueError("the container backend runs KRaft mode only")
        super().__init__(version, mode, data_dir, server_properties, cluster_id, heap)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if any(c.isspace() for c in str(self.work_dir)):
            raise HarnessError(f"the container backend needs a work dir without spaces: {self.work_dir}")
        self.image = image or os.environ.get("KAFKALOG_IMAGE") or None
        self._container: Any = None
        self._earlier_logs = b""
        _LIVE.add(self)

    @property
    def official(self) -> bool:
        return (self.image or "").split(":")[0].endswith(self.OFFICIAL)

    def _wrapped(self) -> Any:
        return self._container.get_wrapped_container() if self._container is not None else None

    @property
    def running(self) -> bool:
        wrapped = self._wrapped()
        if wrapped is None:
            return False
        try:
            wrapped.reload()
        except Exception:  # removed behind our back
            return False
        return bool(wrapped.status in ("created", "running"))

    def _official_env(self) -> dict[str, str]:
        env = {"KAFKA_" + k.upper().replace(".", "_"): v for k, v in self.server_properties().items()}
        env["CLUSTER_ID"] = self.cluster_id
        env["KAFKA_HEAP_OPTS"] = f"-Xmx{self.heap}"
        return env

    def _new_container(self, **kwargs: Any) -> Any:
        """A container of the image (not started) on the host's network, as the calling user, the work dir
        bind-mounted at its own path; ``kwargs``: more of the Docker SDK's ``run`` arguments."""
        os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")  # Ryuk's image comes from a registry
        try:
            from testcontainers.core.container import DockerContainer
        except ImportError as exc:
            raise HarnessError("testcontainers is not installed: pip install testcontainers") from exc
        container = DockerContainer(self.image or ensure_image(self.version))
        container.with_volume_mapping(str(self.work_dir), str(self.work_dir), "rw")
        container.with_kwargs(network_mode="host", user=f"{os.getuid()}:{os.getgid()}", **kwargs)
        return container

    @property
    def formats_offline(self) -> bool:
        """The official image formats its storage only as it starts, from its environment."""
        return not self.official

    def format(self) -> Path:
        """As :meth:`Broker.format`, in a container of the image that runs its ``StorageTool`` on the bind-mounted
        data dir and exits (the broker is not started): the start script then finds the dir formatted and runs
        the broker on it as it is (so certify's bootstrap records reach the container's controller too)."""
        if not self.formats_offline:
            raise BrokerError(f"{self!r}: the official image formats its storage only as it starts")
        if (self.data_dir / "meta.properties").exists():
            return self.data_dir
        write_properties(self.properties_path, self.server_properties())
        container = self._new_container(entrypoint=["java"])
        container.with_command([*self.jvm_options(heap="256m", log_level="WARN", stderr_log=True), "-cp",
                                f"{LIBS}/*", "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                                "-c", str(self.properties_path)])
        started = container.start()
        wrapped = started.get_wrapped_container()
        try:
            code = wrapped.wait(timeout=180).get("StatusCode")
            out = wrapped.logs().decode("utf-8", "replace").strip()
        except Exception as exc:  # the Docker SDK's timeout or API errors
            code, out = None, f"kafka-storage format in a container: {exc}"
        finally:
            with contextlib.suppress(Exception):
                wrapped.remove(force=True)
        # kept for failing tests (each start rewrites broker.log from the logs kept so far)
        self._earlier_logs += f"\n===== kafkalog: kafka-storage format (container) =====\n{out}\n".encode()
        self.log_path.write_bytes(self._earlier_logs)
        if code != 0 or not (self.data_dir / "meta.properties").exists():
            raise BrokerError(f"kafka-storage format failed in a container (Kafka {self.version}, exit {code}): "
                              f"{out[-2000:]}")
        return self.data_dir

    def start(self, *, wait: bool = True, timeout: float = 120.0) -> Self:
        if self.running:
            raise BrokerError(f"{self!r} is already running")
        self._discard_container()
        container = self._new_container()
        if self.official:
            for key, value in self._official_env().items():
                container.with_env(key, value)
        else:
            write_properties(self.properties_path, self.server_properties())
            container.with_env("KAFKA_JVM_OPTS", " ".join([*self.jvm_options(heap=self.heap), "-XX:-UsePerfData"]))
            container.with_env("KAFKA_TOOLS_OPTS", " ".join(self.jvm_options(heap="256m", log_level="WARN",
                                                                               stderr_log=True)))
            formatted = (self.data_dir / "meta.properties").exists()  # as Broker._format: never format twice
            container.with_command([str(self.properties_path), "-" if formatted else self.cluster_id])
        self._container = container.start()
        if wait:
            try:
                self.wait_ready(timeout)
            except BrokerError:
                self.kill()
                raise
            finally:
                self._save_logs()
        return self

    def _save_logs(self) -> None:
        wrapped = self._wrapped()
        if wrapped is None:
            return
        with contextlib.suppress(Exception):
            self.log_path.write_bytes(self._earlier_logs + wrapped.logs())

    def _discard_container(self) -> None:
        """Keep the logs of the last container and remove it (a new start makes a new container)."""
        wrapped = self._wrapped()
        if wrapped is None:
            return
        with contextlib.suppress(Exception):
            self._earlier_logs += wrapped.logs()
            self.log_path.write_bytes(self._earlier_logs)
        with contextlib.suppress(Exception):
            wrapped.remove(force=True)
        self._container = None

    def stop(self, timeout: float = 90.0, *, require_clean_marker: bool = True) -> None:
        wrapped = self._wrapped()
        if wrapped is None or not self.running:
            self._save_logs()
            return
        started = time.monotonic()
        wrapped.stop(timeout=int(timeout))  # SIGTERM to the broker (PID 1), SIGKILL after timeout
        wrapped.reload()
        self._save_logs()
        code = wrapped.attrs.get("State", {}).get("ExitCode")
        if code == 137 and time.monotonic() - started >= timeout - 1:
            raise self.error(f"Kafka {self.version} container did not shut down within {timeout:.0f}s (SIGKILLed)")
        if require_clean_marker and not self.clean_shutdown_marker.exists():
            raise self.error(f"Kafka {self.version} container stopped without writing {self.clean_shutdown_marker}")

    def kill(self) -> None:
        wrapped = self._wrapped()
        if wrapped is not None and self.running:
            with contextlib.suppress(Exception):
                wrapped.kill()  # SIGKILL
                wrapped.wait(timeout=30)
            self._save_logs()

    def close(self) -> None:
        """Kill the container if it runs and remove it (its logs stay in broker.log)."""
        self.kill()
        self._discard_container()


def docker_available() -> bool:
    """True if a Docker engine answers (the client alone is not enough)."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        return bool(client.ping())
    except Exception:  # any failure means "no engine"
        return False


BACKENDS = ("jvm", "container")


B = TypeVar("B", bound=KafkaBroker)


class Brokers:
    """The brokers a factory made, each started when asked; :meth:`close` kills whatever still runs (the
    factories of the pytest plugin and of the conformance run are ones)."""

    def __init__(self) -> None:
        self.brokers: list[KafkaBroker] = []

    def _made(self, broker: B, start: bool) -> B:
        self.brokers.append(broker)
        if start:
            broker.start()
        return broker

    def close(self) -> None:
        for b in self.brokers:
            b.close()


def make_broker(version: str = jars.LATEST_4, *, backend: str | None = None, image: str | None = None,
                **kwargs: Any) -> KafkaBroker:
    """The JVM :class:`Broker` or a :class:`ContainerBroker`: ``backend`` (default ``KAFKALOG_BROKER``, else
    ``jvm``); ``image`` (container backend; default ``KAFKALOG_IMAGE``, else the locally built image).

    Asking for containers without a reachable Docker engine is an error, not a silent fallback.
    """
    backend = backend or os.environ.get("KAFKALOG_BROKER", "jvm")
    if backend == "container":
        if not docker_available():
            raise HarnessError("the container backend needs a Docker engine and none is reachable")
        return ContainerBroker(version, image=image, **kwargs)
    if backend != "jvm":
        raise HarnessError(f"the broker backend must be 'jvm' or 'container', not {backend!r}")
    return Broker(version, **kwargs)
