"""The JVM ``kafkalog`` source keeps one planner process (``python -m kafkalog.tools.spark.jvm_plan --serve``) for
the Spark application's batch reads (``Planner.java``): the queries of a session share it, each plans the files as
they are then (segments appended or deleted between two queries are read as a fresh read reads them), a planner
that died is started again, a planning error reaches the user and leaves the planner serving, and the planner
stops with the session (``spark.stop()``) or with its JVM, leaving no process behind. On S3: test_jvm_s3a.py."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from builders import generated_data_dir
from test_jvm_scan import jvm as jvm  # the module-scoped fixture: the session, with the JVM source
from test_read import spark_rows

pytestmark = pytest.mark.spark

PLANNER = "kafkalog.tools.spark.jvm_plan"


def planners(parent: int) -> list[int]:
    """The pids of the kept planners (``jvm_plan --serve``) whose parent is the process ``parent``."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and PLANNER.encode() in cmd and b"--serve" in cmd:
            out.append(int(d))
    return sorted(out)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def segments(pdir: Path) -> list[Path]:
    return sorted(pdir.glob("*.log"))


def move_segment(log: Path, to: Path) -> None:
    """A segment's files (``.log``, ``.index``, ``.timeindex``, ``.snapshot``) moved into the directory ``to``."""
    for f in log.parent.glob(log.stem + ".*"):
        shutil.move(str(f), str(to / f.name))


def changing_dir(root: Path) -> tuple[Path, Path, list[Path]]:
    """A data dir of two partitions of 5 segments, its last segment of each held aside (in ``root/aside``): the
    data dir, the aside dir and the held segments' ``.log`` files as they will be named once appended."""
    data = generated_data_dir(root / "data", {"g": 2}, 3000, segment_bytes=1 << 18, value_size=400)
    aside = root / "aside"
    held = []
    for p in sorted(data.glob("g-*")):
        (aside / p.name).mkdir(parents=True)
        last = segments(p)[-1]
        move_segment(last, aside / p.name)
        held.append(last)
    return data, aside, held


def _rows(spark, fmt: str, path: Path) -> list[tuple]:
    return spark_rows(spark.read.format(fmt).load(str(path)))


def test_batch_queries_share_the_kept_planner_and_plan_the_files_as_they_are(jvm, tmp_path):
    """Three queries of one session, one planner: before and after segments are appended, and after the oldest is
    deleted (as retention deletes it), each reads the rows a fresh read (the Python data source) reads."""
    from kafkalog.tools.spark.jvm import PYTHON_NAME

    data, aside, held = changing_dir(tmp_path)
    jvm_pid = jvm._jvm.ProcessHandle.current().pid()
    df = jvm.read.format("kafkalog").load(str(data))
    assert "kafkalog segment scan" in df._jdf.queryExecution().executedPlan().toString()
    first = spark_rows(df)
    kept = planners(jvm_pid)
    assert len(kept) == 1, kept
    assert first == _rows(jvm, PYTHON_NAME, data)

    for log in held:  # appended: the partitions' last segments
        move_segment(aside / log.parent.name / log.name, log.parent)
    appended = _rows(jvm, "kafkalog", data)
    assert len(appended) == 2 * 3000 > len(first)
    assert appended == _rows(jvm, PYTHON_NAME, data)

    oldest = segments(data / "g-0")[0]
    oldest_records = sum(1 for r in appended if r[1] == 0 and r[16].endswith(oldest.name))
    for f in data.glob("g-0/" + oldest.stem + ".*"):
        f.unlink()
    deleted = _rows(jvm, "kafkalog", data)
    assert len(deleted) == len(appended) - oldest_records and oldest_records > 0
    assert deleted == _rows(jvm, PYTHON_NAME, data)
    assert planners(jvm_pid) == kept


def test_a_planning_error_reaches_the_user_and_the_planner_serves_on(jvm, tmp_path):
    data, _, _ = changing_dir(tmp_path)
    n = jvm.read.format("kafkalog").load(str(data)).count()
    jvm_pid = jvm._jvm.ProcessHandle.current().pid()
    kept = planners(jvm_pid)
    with pytest.raises(Exception) as ei:
        jvm.read.format("kafkalog").option("level", "nope").load(str(data)).count()
    assert "option level: expected 'record' or 'batch', got 'nope'" in str(ei.value)
    assert jvm.read.format("kafkalog").load(str(data)).count() == n
    assert planners(jvm_pid) == kept


def test_a_planner_that_died_is_started_again(jvm, tmp_path):
    data, _, _ = changing_dir(tmp_path)
    jvm_pid = jvm._jvm.ProcessHandle.current().pid()
    n = jvm.read.format("kafkalog").load(str(data)).count()
    (killed,) = planners(jvm_pid)
    os.kill(killed, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(killed) and time.monotonic() < deadline:
        time.sleep(0.05)
    df = jvm.read.format("kafkalog").load(str(data))
    assert df.count() == n
    assert "kafkalog segment scan" in df._jdf.queryExecution().executedPlan().toString()
    (again,) = planners(jvm_pid)
    assert again != killed


def test_queries_planned_at_once_each_get_a_planner(jvm, tmp_path):
    """Queries of several threads plan at the same time (a kept planner is busy: another is started, then kept
    too), each with its own rows."""
    from concurrent.futures import ThreadPoolExecutor

    data, _, _ = changing_dir(tmp_path)
    want = {p: jvm.read.format("kafkalog").load(str(data / f"g-{p}")).count() for p in (0, 1)}
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: jvm.read.format("kafkalog").option("partitions", str(i % 2))
                            .load(str(data)).count(), range(8)))
    assert got == [want[i % 2] for i in range(8)]
    assert 1 <= len(planners(jvm._jvm.ProcessHandle.current().pid())) <= 4


SESSION_JOB = """
import json, os, sys
from kafkalog.tools.spark import session
s = session("local[1]", conf={"spark.ui.enabled": "false"}, jvm_scan=True)
for _ in range(2):
    s.read.format("kafkalog").load(sys.argv[1]).count()
print(json.dumps({"jvm": s._jvm.ProcessHandle.current().pid()}), flush=True)
if sys.argv[2] == "stop":
    s.stop()
    print("stopped", flush=True)
    sys.stdin.readline()  # (the test looks at the processes while this one runs)
else:
    os._exit(0)  # the driver's Python gone without stopping Spark: its JVM exits
"""


@pytest.mark.parametrize("how", ["stop", "exit"])
def test_the_kept_planner_stops_with_the_session_or_its_jvm(jvm, tmp_path, how):
    """``spark.stop()`` stops the kept planner (the Spark application's end); a JVM that exits without it leaves
    none behind either (the planner reads the end of its stdin)."""
    import json

    data, _, _ = changing_dir(tmp_path)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    job = subprocess.Popen([sys.executable, "-c", SESSION_JOB, str(data), how], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert job.stdout is not None and job.stdin is not None
        jvm_pid = json.loads(job.stdout.readline())["jvm"]
        kept = planners(jvm_pid)
        assert len(kept) == 1, kept
        if how == "stop":
            assert job.stdout.readline().strip() == "stopped"
            assert alive(jvm_pid)  # (the JVM runs on; its planner does not)
        else:
            job.wait(timeout=120)
        gone = kept if how == "stop" else [*kept, jvm_pid]
        deadline = time.monotonic() + 60
        while any(map(alive, gone)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(alive, gone)), gone
        if how == "stop":
            job.stdin.write("\n")
            job.stdin.flush()
            assert job.wait(timeout=120) == 0
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()


def test_the_served_planner_plans_each_request_anew(tmp_path):
    """No Spark: ``jvm_plan --serve`` answers each plan request as a planner started for it (the one-request
    ``jvm_plan``) does, with segments appended and deleted between the requests."""
    import json

    data, aside, held = changing_dir(tmp_path)
    request = json.dumps({"request": "plan", "options": {"path": str(data)}}) + "\n"

    def once() -> dict:
        p = subprocess.run([sys.executable, "-m", PLANNER], input=request, capture_output=True, text=True, check=True)
        return json.loads(p.stdout)

    served = subprocess.Popen([sys.executable, "-m", PLANNER, "--serve"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert served.stdin is not None and served.stdout is not None
    try:
        def ask() -> dict:
            served.stdin.write(request)
            served.stdin.flush()
            return json.loads(served.stdout.readline())

        answers = [ask()]
        assert answers[0] == once()
        for log in held:
            move_segment(aside / log.parent.name / log.name, log.parent)
        answers.append(ask())
        assert answers[1] == once()
        for f in data.glob("g-1/" + segments(data / "g-1")[0].stem + ".*"):
            f.unlink()
        answers.append(ask())
        assert answers[2] == once()
        assert len({json.dumps(a, sort_keys=True) for a in answers}) == 3
    finally:
        served.stdin.close()
        assert served.wait(timeout=60) == 0
