"""``kafkalog.open`` over a URL (issue 30 items 1 and 2): a data dir on S3 (a local moto server) reads through the
filesystem seam as the same data dir on a local disk does: the same partitions, offsets and records, the same Arrow,
and the same reports (effective configs with their sources, verify, doctor, groups, transactions, diff); a segment
under a URL is read in bounded windows; a URL is read-only (a plan refuses it, the command line exits 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import generated_data_dir, spy_url_reads, write_data_dir_files
from builders import s3_upload as upload
from damage import FIXTURES, damaged_copy

import kafkalog
from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.errors import KafkaLogError, LogDirError
from kafkalog.storage.io import fs as fs_module
from kafkalog.storage.log.partition import PartitionLog

require_modules("pyarrow", "fsspec", "moto", extra="spark")  # skipped without the spark extra, a failure under CI=true

import fsspec  # noqa: E402
import pyarrow.fs as pafs  # noqa: E402

N = 400
NOW = 1_900_000_000_000  # (producer expiration: the same now for both sides)


def s3_options(endpoint: str) -> dict[str, str]:
    return {"s3.endpoint": endpoint, "s3.accessKey": "test", "s3.secretKey": "test", "s3.region": "us-east-1"}


@pytest.fixture
def local(tmp_path: Path) -> Path:
    """Two topics, three partitions of several segments; t-1's log starts above its first segment (the
    log-start-offset checkpoint) and its high watermark is behind its end (the replication checkpoint)."""
    root = generated_data_dir(tmp_path / "data", {"t": 2, "u": 1}, N, batch_records=10, segment_bytes=8000)
    write_data_dir_files(root, log_start={("t", 1): 150}, replication={("t", 0): N, ("t", 1): 300, ("u", 0): N})
    return root


def facts(dirs) -> list[tuple]:
    return [(p.name, p.log_start_offset, p.log_end_offset, p.high_watermark, [s.base_offset for s in p.segments])
            for p in dirs.partitions()]


def test_open_s3_reads_what_the_local_dir_holds(local, s3_endpoint, monkeypatch):
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    url = upload(local, s3_endpoint, "open/data")
    with kafkalog.open(local) as here, kafkalog.open(url, filesystem_options=s3_options(s3_endpoint)) as there:
        assert there.topics() == here.topics() == ["t", "u"]
        assert facts(there) == facts(here)
        t1 = there.partition("t", 1)
        assert (t1.log_start_offset, t1.high_watermark) == (150, 300)  # the data dir's checkpoints, read over S3
        assert str(t1.segments[0].path).startswith(f"{url}/t-1/")
        assert list(there.records("t")) == list(here.records("t"))
        assert list(there.records("u", "200:250")) == list(here.records("u", "200:250"))
        assert there.to_arrow().read_all().equals(here.to_arrow().read_all())
        assert there.describe(scan=False)[0]["logStartOffset"] == here.describe(scan=False)[0]["logStartOffset"]
    with kafkalog.open(f"{url}/u-0", filesystem_options=s3_options(s3_endpoint)) as one:  # a partition dir
        assert [p.name for p in one.partitions()] == ["u-0"]


def test_a_url_is_read_only(local, s3_endpoint, monkeypatch, capsys):
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    url = upload(local, s3_endpoint, "readonly/data")
    with kafkalog.open(url, filesystem_options=s3_options(s3_endpoint)) as there:
        with pytest.raises(LogDirError, match=f"{url}: retain changes files, and a URL is read-only"):
            there.plan_retention(now_ms=0)
    from kafkalog.tools.cli import main

    capsys.readouterr()
    assert main(["retain", "--dry-run", url]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a URL: this command reads and changes local data dirs only" in err[0]


def test_a_segment_under_a_url_is_read_in_windows(local, monkeypatch):
    """With a window far smaller than a segment (and than some batches), reading a partition under a URL reads the
    same batches as the local one, and never reads a .log whole."""
    mem = fsspec.filesystem("memory")
    for f in (local / "t-0").iterdir():
        mem.pipe(f"/windows/data/t-0/{f.name}", f.read_bytes())
    monkeypatch.setattr(fs_module, "REMOTE_WINDOW", 700)  # about one batch of 10 records
    reads = spy_url_reads(monkeypatch)
    with PartitionLog(local / "t-0") as here, PartitionLog("memory://windows/data/t-0") as there:
        want = [(b.base_offset, b.last_offset, b.position, bytes(b.buf)) for _, b in here.iter_batches()]
        got = [(b.base_offset, b.last_offset, b.position, bytes(b.buf)) for _, b in there.iter_batches()]
        assert got == want and len(want) == N // 10
        assert there.lookup(255) is not None and there.lookup(255)[1] == here.lookup(255)[1]
        assert there.log_end_offset == here.log_end_offset == N
        biggest_segment = max(s.size for s in there.segments)
        assert reads.windows and max(n for _, n, _ in reads.windows) < biggest_segment
    reads.clear()
    with kafkalog.open(local) as here_dirs, kafkalog.open("memory://windows/data") as there_dirs:  # Arrow too
        want_rows = here_dirs.to_arrow("t", partitions=[0]).read_all()
        assert there_dirs.to_arrow().read_all().equals(want_rows) and want_rows.num_rows == N
    assert reads.windows and max(n for _, n, _ in reads.windows) < biggest_segment


KRAFT, KILLED = "kafka-4.3.1-kraft", "kafka-4.3.1-kraft-killed"  # groups and transactions; an open transaction


@pytest.fixture(scope="module")
def fixture_urls(s3_endpoint, fixtures_dir) -> dict[str, str]:
    """The bundled fixtures' data dirs on the moto S3 server, once per module."""
    return {name: upload(fixtures_dir / name / "data", s3_endpoint, f"fixtures/{name}") for name in (KRAFT, KILLED)}


@pytest.fixture(params=[KRAFT, KILLED])
def both(request, fixture_urls, fixtures_dir, s3_endpoint, monkeypatch):
    """``(local LogDirs, S3 LogDirs, a function naming both dirs alike in a repr)`` of one fixture."""
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    local, url = fixtures_dir / request.param / "data", fixture_urls[request.param]
    with kafkalog.open(local) as here, kafkalog.open(url, filesystem_options=s3_options(s3_endpoint)) as there:
        yield here, there, lambda x: repr(x).replace(url, "DIR").replace(str(local), "DIR")


def test_effective_configs_over_s3_are_the_local_ones(both):
    here, there, same = both
    def configs(dirs):
        return [(p.name, p.config.to_dict(), {n: p.config.source(n) for n in p.config.to_dict()})
                for p in dirs.partitions()]
    assert configs(there) == configs(here)
    assert same(there.resolver.notes(there.dirs[0].path)) == same(here.resolver.notes(here.dirs[0].path))
    if here.dirs[0].is_metadata_dir:  # the topic overrides of the __cluster_metadata snapshot, read over S3
        assert there.config("compacted").source("cleanup.policy").startswith("__cluster_metadata snapshot")


@pytest.mark.parametrize("deep", [False, True])
def test_verify_over_s3_is_the_local_verify(both, deep):
    here, there, same = both
    mine, theirs = here.verify(deep=deep), there.verify(deep=deep)
    skipped = [f for f in theirs.findings if f.code == "verify.lockNotChecked"]
    assert len(skipped) == 1 and skipped[0].severity == "info"  # no lock on a URL: said as data, not refused
    assert same([f for f in theirs.findings if f not in skipped]) == same(mine.findings) and mine.findings
    assert theirs.stats == mine.stats and theirs.ok


def test_groups_over_s3_are_the_local_groups(both):
    here, there, same = both
    mine = here.groups()
    assert same(there.groups()) == same(mine) and mine.groups


def test_transactions_over_s3_are_the_local_ones(both):
    here, there, same = both
    mine = here.transactions(now_ms=1_900_000_000_000)
    assert same(there.transactions(now_ms=1_900_000_000_000)) == same(mine) and mine.coordinator


def test_verify_command_on_s3(fixture_urls, fixtures_dir, s3_env, capsys):
    """``kafkalog verify s3://...`` (the endpoint and keys from the environment) prints what the local dir's verify
    prints, with the lock check it skips said as an info finding, and exits 0."""
    from kafkalog.tools.cli import main

    local, url = fixtures_dir / KRAFT / "data", fixture_urls[KRAFT]
    capsys.readouterr()
    assert main(["verify", "--json", "--info", "--workers", "2", str(local)]) == 0
    mine = capsys.readouterr().out.replace(str(local), "DIR").splitlines()
    assert main(["verify", "--json", "--info", "--workers", "2", url]) == 0
    theirs = capsys.readouterr().out.replace(url, "DIR").splitlines()
    lock = [line for line in theirs if '"file":"DIR/.lock"' in line and '"severity":"info"' in line]
    assert len(lock) == 1 and [line for line in theirs if line not in lock] == mine and mine


@pytest.mark.parametrize("level", ["records", "batches", "bytes"])
def test_diff_with_a_side_on_s3_is_the_local_diff(fixture_urls, fixtures_dir, s3_endpoint, monkeypatch, level):
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    a, b = fixtures_dir / KRAFT / "data", fixtures_dir / KILLED / "data"
    ua, ub = fixture_urls[KRAFT], fixture_urls[KILLED]

    def same(r):
        return repr(r).replace(ub, "B").replace(ua, "A").replace(str(b), "B").replace(str(a), "A")  # (A is a prefix)

    with kafkalog.open(a) as here, kafkalog.open(ua, filesystem_options=s3_options(s3_endpoint)) as there, \
            kafkalog.open(ub, filesystem_options=s3_options(s3_endpoint)) as other:
        mine = here.diff(b, level=level)
        assert mine.differences and same(there.diff(b, level=level)) == same(mine)
        assert same(there.diff(other, level=level)) == same(mine)  # both sides on S3
        if level != "bytes":
            part = here.diff(a, level=level, offsets="5:50")
            assert same(there.diff(a, level=level, offsets="5:50")) == same(part) and part.equal


# ------------------------------------------------------------------------------------------------ doctor over a URL
ALL_FIXTURES = sorted(p.name for p in FIXTURES.iterdir() if (p / "data").is_dir())
LOCK = "lock.notChecked"


def diagnosis(diag, root: str) -> tuple[list[str], dict, str]:
    """``(problems, summary, plan)`` of a diagnosis as JSON text with ``root`` named ``DIR``, without the lock check a
    URL skips (its info problem, its plan note and its count) and the scan rate (measured or not, by the clock)."""
    problems = [json.dumps(p.to_dict(), sort_keys=True).replace(root, "DIR") for p in diag.problems
                if p.note is None or p.note.kind != LOCK]
    summary = diag.summary()
    for k in ("scanRateBytesPerSecond", "scanRateSource", "estimatedRecoverySeconds"):
        summary.pop(k)
    summary["counts"]["info"] -= sum(1 for p in diag.problems if p.note is not None and p.note.kind == LOCK)
    plan = diag.plan
    text = {"summary": plan.summary() | {"notes": [n.to_dict() for n in plan.all_notes() if n.kind != LOCK]},
            "partitions": [p.to_dict() for p in plan.partitions],
            "dirs": [[op.to_dict() for op in [*d.pre_ops, *d.ops]] for d in plan.data_dirs]}
    return problems, json.loads(json.dumps(summary).replace(root, "DIR")), json.dumps(text).replace(root, "DIR")


class _DoctorUrls(dict):
    """Every bundled fixture's data dir, and a torn tail at the end of kafka-4.3.1-kraft's multi-segment-0 after a
    kill (no clean shutdown marker): ``{name: (local dir, its copy on the moto S3 server)}``, each uploaded when a
    test first asks for it."""

    def __init__(self, endpoint: str, tmp: Path):
        super().__init__()
        self.endpoint, self.tmp = endpoint, tmp

    def __missing__(self, name: str) -> tuple[Path, str]:
        local = FIXTURES / name / "data"
        if name == "torn":
            local = self.tmp / "torn" / "data"
            damaged_copy("kafka-4.3.1-kraft", local, ("unclean", "torn_tail"))
        self[name] = (local, upload(local, self.endpoint, f"doctor/{name}"))
        return self[name]


@pytest.fixture(scope="module")
def doctor_urls(s3_endpoint, tmp_path_factory) -> dict[str, tuple[Path, str]]:
    return _DoctorUrls(s3_endpoint, tmp_path_factory.mktemp("doctor"))


#: CI runs doctor over S3 on the killed fixture (recovery) and the torn copy (a repair); ``-m campaign`` on all
CI_DOCTOR = ("kafka-4.3.1-kraft-killed", "torn")


@pytest.mark.parametrize("name", [n if n in CI_DOCTOR else pytest.param(n, marks=pytest.mark.campaign)
                                  for n in [*ALL_FIXTURES, "torn"]])
def test_doctor_over_s3_is_the_local_doctor(doctor_urls, s3_endpoint, monkeypatch, name):
    """doctor of a data dir on S3 predicts what doctor of the same dir on a local disk predicts (problems, verdict,
    the repair plan: its operations, losses and notes), with the .lock not checked, said as an info problem; nothing
    on S3 changes, and the plan (a prediction) cannot be applied."""
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    local, url = doctor_urls[name]
    fs = pafs.S3FileSystem(endpoint_override=s3_endpoint.removeprefix("http://"), scheme="http", access_key="test",
                           secret_key="test", region="us-east-1")
    before = {f.path: (f.size, f.mtime) for f in fs.get_file_info(pafs.FileSelector(url[5:], recursive=True))}
    with kafkalog.open(local) as here, kafkalog.open(url, filesystem_options=s3_options(s3_endpoint)) as there:
        mine, theirs = here.doctor(now_ms=NOW), there.doctor(now_ms=NOW)
    assert diagnosis(theirs, url) == diagnosis(mine, str(local))
    assert theirs.verdict == mine.verdict and theirs.exit_code == mine.exit_code
    lock = [p for p in theirs.problems if p.note is not None and p.note.kind == LOCK]
    assert len(lock) == 1 and lock[0].severity == "info" and lock[0].path == f"{url}/.lock"
    assert {f.path: (f.size, f.mtime) for f in fs.get_file_info(pafs.FileSelector(url[5:], recursive=True))} == before
    if name == "torn":  # the repair doctor proposes: the torn tail cut, predicted from S3
        cut = [op for op in theirs.plan.ops() if op.kind == "truncate"]
        assert [Path(op.path).parent.name for op in cut] == ["multi-segment-0"] and theirs.verdict == "recovery"
        assert [(p.severity, p.kind, p.bytes) for p in theirs.problems if p.kind == "truncation"] == [
            ("loss", "truncation", 15)]
        with pytest.raises(KafkaLogError):
            kafkalog.apply(theirs.plan)
    if name == "kafka-4.3.1-kraft-killed":
        assert theirs.partitions_recovered == mine.partitions_recovered > 0


def test_doctor_command_on_s3(doctor_urls, s3_env, capsys):
    """``kafkalog doctor s3://...`` exits as the local doctor does (1: the broker recovers and truncates) and prints
    the same problems and summary, with the skipped lock check one info problem more."""
    from kafkalog.tools.cli import main

    local, url = doctor_urls["torn"]
    for fmt in (["--json"], []):
        capsys.readouterr()
        assert main(["doctor", "--no-progress", "--now", str(NOW), *fmt, str(local)]) == 1
        mine = capsys.readouterr().out.replace(str(local), "DIR").splitlines()
        assert main(["doctor", "--no-progress", "--now", str(NOW), *fmt, url]) == 1
        theirs = capsys.readouterr().out.replace(url, "DIR").splitlines()
        lock = [line for line in theirs if "DIR/.lock" in line]
        assert len(lock) == 1 and "not checked" in lock[0]
        rest = [line for line in theirs if line not in lock]
        if fmt:  # the summary counts the lock's info problem
            summary = json.loads(rest[-1])
            summary["counts"]["info"] -= 1
            assert rest[:-1] == mine[:-1] and summary == json.loads(mine[-1])
        else:  # the table's column widths follow the longest path; the counts line has one info more
            assert [" ".join(line.split()) for line in rest[:-1]] == [" ".join(line.split()) for line in mine[:-1]]
            assert rest[-1] == mine[-1].replace(" 1 info", " 2 info")
        assert any("truncation" in line for line in mine)


def test_doctor_under_a_url_recovers_segments_in_windows(local, monkeypatch):
    """doctor's recovery scan of a partition under a URL (no clean shutdown: every segment recovered) reads each
    .log in windows far smaller than a segment, never whole, and predicts what the local doctor predicts."""
    (local / ".kafka_cleanshutdown").unlink(missing_ok=True)
    mem = fsspec.filesystem("memory")
    for f in local.rglob("*"):
        if f.is_file():
            mem.pipe(f"/doctor-windows/data/{f.relative_to(local)}", f.read_bytes())
    monkeypatch.setattr(fs_module, "REMOTE_WINDOW", 700)  # about one batch of 10 records
    reads = spy_url_reads(monkeypatch)
    url = "memory://doctor-windows/data"
    with kafkalog.open(local) as here, kafkalog.open(url) as there:
        mine, theirs = here.doctor(now_ms=NOW), there.doctor(now_ms=NOW)
        biggest_segment = max(s.size for p in there.partitions() for s in p.segments)
    assert diagnosis(theirs, url) == diagnosis(mine, str(local))
    assert theirs.partitions_recovered == 3 and theirs.bytes_to_scan == sum(
        f.stat().st_size for f in local.rglob("*.log"))
    logs = [n for n, _ in reads.logs()]
    assert logs and max(logs) < biggest_segment  # every .log read in windows
    assert not [p for p in reads.whole if p.endswith(".log")]  # and none read whole as a small file
