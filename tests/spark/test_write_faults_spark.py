"""Faults at every write step of the Spark ``compact`` and ``convert`` jobs (issue 17): ENOSPC, EIO and SIGKILL
injected where the work runs, in the executors' Python worker processes (and the driver's own steps).

The jobs apply the library's plans through a partition runner (``tools/spark/jobs.py``: partitions are planned
and applied by Spark tasks; the driver holds the locks and writes the data dirs' own files). Here that runner is
wrapped so each task runs inside the library's I/O seam observer (:func:`kafkalog.storage.io.fileops.observe`) in
the Python worker that executes it; the function travels to the executors with the task (cloudpickle, by value).
A counter file under an ``flock`` numbers every file mutation of the job across all processes (workers and
driver), so a fault lands on the job's k-th write step wherever it runs:

* ``ENOSPC``/``EIO``: ``OSError`` raised before the k-th step (in a worker: the task fails, Spark fails the job);
  the job must fail naming the file and the error;
* ``kill``: a real ``SIGKILL`` of the Python worker at the first executor step at or after the k-th (steps on
  the driver are the library's ``apply``, whose kills ``tests/storage/test_apply_crash.py`` covers): the task
  crashes, the driver survives and fails the job.

When the job returns, nothing writes any more: the runner fences the tasks still running
(``jobs.spark_runner``; before, a failed job's other tasks went on writing for seconds after the driver had
returned and released the lock). After each (``damage.fault_campaign``): the data dir loads (``repair`` plans without errors and applies), every
partition holds the records of the state before the job, of the state the plan promised, or one in between
that the broker's own cleaner could leave (``after <= faulted <= before``), and running the command again
reaches the promised state. The Spark job's own write steps are the library's: their count equals the library
``apply``'s. CI runs a bounded sample (marker ``spark``); every step of every fault is ``pytest -m campaign``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from damage import MUTATIONS, NOW, count_mutations, fault_campaign, plan_for

from kafkalog.storage.engine.convert import ConvertOptions
from kafkalog.tools.spark import jobs

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]

FIXTURE = "kafka-4.3.1-kraft"
FAULTS = ("ENOSPC", "EIO", "kill")
COMMANDS = ("compact", "convert")
SAMPLE = 2  # fault points per command and fault in CI (the first and the last step)


class _Counter:
    """The job's file mutations, numbered across processes: ``<path>`` holds ``total executor_steps fired``."""

    def __init__(self, path: Path, k: int, fault: str | None):
        self.path, self.k, self.fault = str(path), k, fault
        with open(self.path, "w") as f:
            f.write("0 0 0")

    def step(self, path: str, in_executor: bool) -> None:
        with open(self.path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the process dies: a killed worker never wedges it
            total, execs, fired = self.read()
            total += 1
            execs += in_executor
            fire = False
            if self.fault is not None and not fired:
                fire = in_executor and total >= self.k if self.fault == "kill" else total == self.k
            with open(self.path + ".new", "w") as f:
                f.write(f"{total} {execs} {int(fired or fire)}")
            os.replace(self.path + ".new", self.path)  # whole, even if Spark kills this worker right here
        if not fire:
            return
        if self.fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)  # the Python worker dies mid-task, no cleanup
        code = getattr(errno, self.fault)
        raise OSError(code, f"{self.fault} (injected)", path)

    def read(self) -> tuple[int, int, bool]:
        with open(self.path) as f:
            total, execs, fired = (int(x) for x in f.read().split())
        return total, execs, bool(fired)


class _InSeam:
    """A partition task run inside the I/O seam observer of the process that executes it (an executor)."""

    def __init__(self, fn, counter: _Counter):
        self.fn, self.counter = fn, counter

    def __call__(self, item):
        from kafkalog.storage.io import fileops

        def observe(kind, path, _target):
            if kind in MUTATIONS:
                self.counter.step(path, True)

        with fileops.observe(observe):
            return self.fn(item)


def _run_job(spark, monkeypatch, command: str, d: Path, counter: _Counter) -> Exception | None:
    """The Spark job on ``d`` with every step counted (and the fault injected); the error it raised."""
    from pyspark import cloudpickle

    from kafkalog.storage.io import fileops

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # _InSeam/_Counter travel with the tasks
    real = jobs.spark_runner

    def runner(s, *args):
        run = real(s, *args)
        return lambda fn, items: run(_InSeam(fn, counter), items)

    def on_driver(kind, path, _target):
        if kind in MUTATIONS:
            counter.step(path, False)

    monkeypatch.setattr(jobs, "spark_runner", runner)
    try:
        with fileops.observe(on_driver):
            if command == "compact":
                jobs.compact(spark, [str(d)], now=NOW, force=True, backup=False)
            else:
                jobs.convert(spark, [str(d)], ConvertOptions(codec="lz4"), backup=False)
    except Exception as e:  # noqa: BLE001 - the job's failure, checked by the caller
        return e
    finally:
        monkeypatch.setattr(jobs, "spark_runner", real)
    return None


def _campaign(spark, monkeypatch, tmp_path: Path, command: str, fault: str, sample: int | None) -> tuple[int, int]:
    def fail(d: Path, k: int, steps: int) -> None:
        counter = _Counter(d.parent / f"{d.name}.steps", k, fault)
        err = _run_job(spark, monkeypatch, command, d, counter)
        total, execs, fired = counter.read()
        where = f"spark {command}, {fault} at step {k}/{steps}"
        time.sleep(1)  # unfenced, the job's other tasks went on writing for seconds after it returned
        assert counter.read()[0] == total, f"{where}: tasks still wrote after the job had returned"
        if not fired:  # a kill after the last executor step: nothing left to kill, the job completed
            assert fault == "kill" and err is None, f"{where}: the fault never fired ({err!r})"
            return
        assert err is not None, f"{where}: the job succeeded despite the fault"
        text = str(err)
        if fault == "kill":
            assert "exited unexpectedly" in text or "crashed" in text or "Python worker" in text, f"{where}: {text}"
        else:
            assert fault in text and str(d) in text, f"{where}: the error names neither the file nor {fault}: {text}"

    return fault_campaign(tmp_path, FIXTURE, command, sample, fail, rerun=True)


@pytest.mark.parametrize("command", COMMANDS)
def test_the_spark_job_writes_the_library_plan_steps(spark, monkeypatch, tmp_path: Path, command: str) -> None:
    """Counted across the executors and the driver, the job's write steps are those of the library's apply."""
    from damage import damaged_copy, roll_active

    from kafkalog.storage.engine.plan import apply

    lib, job = tmp_path / "lib", tmp_path / "job"
    for d in (lib, job):
        damaged_copy(FIXTURE, d, ())
        if command == "compact":
            roll_active(d)
    steps = count_mutations(lambda: apply(plan_for(command, lib), backup=False))
    counter = _Counter(tmp_path / "steps", 0, None)
    assert _run_job(spark, monkeypatch, command, job, counter) is None
    total, execs, _ = counter.read()
    print(f"spark {command}: {total} write steps ({execs} in executors), the library's apply: {steps}")
    assert total == steps and execs > 0


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_fault_in_a_spark_job_leaves_a_loadable_dir(spark, monkeypatch, tmp_path: Path, command: str,
                                                      fault: str) -> None:
    steps, tried = _campaign(spark, monkeypatch, tmp_path, command, fault, SAMPLE)
    print(f"spark {command}: {fault} at {tried} of {steps} write steps: every dir loaded, nothing outside the "
          "before/after states, the re-run finished")


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_write_step_of_a_spark_job_fails_safely(spark, monkeypatch, tmp_path: Path, command: str,
                                                      fault: str) -> None:
    steps, tried = _campaign(spark, monkeypatch, tmp_path, command, fault, None)
    print(f"spark {command}: {fault} at every one of {steps} write steps: all safe")
    assert tried == steps
