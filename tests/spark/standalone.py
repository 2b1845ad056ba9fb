"""A real Spark standalone cluster on this machine: one master and worker JVMs started from the pyspark package's
own ``spark-class`` (``org.apache.spark.deploy.master.Master`` / ``...worker.Worker``). Executors run in their
worker's work directory, in their own processes, so what only works in local mode (relative paths, driver-side
state) shows up here as it would on a cluster."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from kafkalog.compat.broker import free_port


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _wait_for(log: Path, needle: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if needle in text:
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{log.name}: the JVM exited ({proc.returncode}):\n{text[-3000:]}")
        time.sleep(0.3)
    raise RuntimeError(f"{log.name}: no {needle!r} within {timeout:.0f}s:\n{log.read_text(errors='replace')[-3000:]}")


@contextlib.contextmanager
def standalone_cluster(root: Path, *, workers: int = 1, cores: int = 2, memory: str = "1g"
                       ) -> Iterator[tuple[str, Path]]:
    """``(master URL, work dir)`` while a master and ``workers`` workers (``cores`` each) run; worker ``i`` keeps
    its executors' directories in ``work/w{i}`` (``work/w{i}/APP_ID/EXECUTOR_ID/stderr``). All are killed on
    exit."""
    home = spark_home()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    cls = str(home / "bin" / "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen] = []
    try:
        mlog = root / "master.log"
        with open(mlog, "wb") as f:
            procs.append(subprocess.Popen(
                [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                 "--webui-port", str(free_port())], stdout=f, stderr=subprocess.STDOUT, env=env,
                start_new_session=True))
        _wait_for(mlog, "Starting Spark master", procs[0], 90)
        for i in range(workers):
            wlog = root / f"worker-{i}.log"
            (work / f"w{i}").mkdir(exist_ok=True)
            with open(wlog, "wb") as f:
                procs.append(subprocess.Popen(
                    [cls, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", str(cores),
                     "--memory", memory, "--webui-port", str(free_port()), "--work-dir", str(work / f"w{i}")],
                    stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True))
            _wait_for(wlog, "Successfully registered with master", procs[-1], 90)
        yield url, work
    finally:
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
