"""``kafkalog describe`` over a URL (issue 30 item 1): a data dir or a partition dir on S3 (a local moto server)
is described through the storage objects the local one is (DataDir, PartitionLog and its read-only DirView,
Segment, through the filesystem seam): for every bundled fixture and damaged copies (every damage of
tests/damage.py on three fixtures, a torn closed segment, a CRC mismatch in a closed v0 segment, a partition without
its .log files, a ``-delete`` dir) the same output, human (``--segments``, ``--fast``, ``--topics``) and ``--json``,
and the same exit code as the local run, the path prefix aside; ``describe_paths`` and ``kafkalog.open(url).describe``
the same data; a ``.log`` is read in windows, never whole; a URL naming nothing is the one path contract's error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import generated_data_dir, spy_url_reads
from builders import s3_upload as upload
from damage import FIXTURES, LOSSES, damaged_copy

import kafkalog
from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.io import fs as fs_module
from kafkalog.storage.log.topic_partition import parse_topic_partition_name
from kafkalog.storage.reports.describe import describe_paths
from kafkalog.tools.cli import main

require_modules("pyarrow", "fsspec", "moto", extra="spark")  # skipped without the spark extra, a failure under CI=true

ALL_FIXTURES = sorted(p.name for p in FIXTURES.iterdir() if (p / "data").is_dir())
#: damaged copies: ``{name: (fixture, damages of DAMAGES, losses of LOSSES)}``
DAMAGED = {
    "damaged": ("kafka-4.3.1-kraft", None, ()),  # every damage
    "damaged-v1": ("kafka-3.9.2-zk-v1", None, ()),  # every damage, message format v1
    "killed-damaged": ("kafka-4.3.1-kraft-killed", None, ()),
    "torn-middle": ("kafka-4.3.1-kraft", (), ("torn_middle",)),  # a closed segment cut inside a batch
    "no-logs": ("kafka-3.9.2-kraft", (), ("no_logs",)),  # a partition's .log files gone
    "crc-closed-v0": ("kafka-3.9.2-zk-v0", (), ("crc_closed",)),  # a CRC mismatch in a closed v0 segment
}
#: the copies describe finds something wrong in (exit 1); it does not read what the others lose (a CRC, a torn
#: tail of an active segment, the .log files of a partition whose checkpoints remain)
FOUND = ("damaged", "damaged-v1", "torn-middle")
DELETE_DIR = "multi-segment-1.0123456789abcdef0123456789abcdef-delete"
#: each data dir and partition dir is described with these options
DIR_OPTIONS = [[], ["--segments"], ["--fast"], ["--segments", "--fast", "--epoch"], ["--json"], ["--json", "--fast"]]
PARTITION_OPTIONS = [["--segments"], ["--json"], ["--json", "--fast"]]


def _copy(name: str, tmp: Path) -> Path:
    if name in ALL_FIXTURES:
        return FIXTURES / name / "data"
    fixture, damages, losses = DAMAGED[name]
    local = tmp / name / "data"
    damaged_copy(fixture, local, *(() if damages is None else (damages,)))
    for loss in losses:
        assert LOSSES[loss](local), loss
    if name == "damaged":  # a partition deleted by the broker, not yet removed (dirKind "delete")
        shutil.copytree(local / "multi-segment-1", local / DELETE_DIR)
    return local


class _Urls(dict):
    """``{name: (local data dir, its copy on the moto S3 server)}``, each uploaded when a test first asks for it."""

    def __init__(self, endpoint: str, tmp: Path):
        super().__init__()
        self.endpoint, self.tmp = endpoint, tmp

    def __missing__(self, name: str) -> tuple[Path, str]:
        local = _copy(name, self.tmp)
        self[name] = (local, upload(local, self.endpoint, f"describe/{name}"))
        return self[name]


@pytest.fixture(scope="module")
def urls(s3_endpoint, tmp_path_factory) -> _Urls:
    return _Urls(s3_endpoint, tmp_path_factory.mktemp("describe"))


def cli(capsys, args: list[str], root: str) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``kafkalog describe ARGS`` with the data dir ``root`` named ``DIR``."""
    capsys.readouterr()
    code = main(["describe", *args])
    out, err = capsys.readouterr()
    return (code, out.replace(root, "DIR"), err.replace(root, "DIR")) if root else (code, out, err)


def _partition_dirs(local: Path) -> list[str]:
    """The partition dirs described alone: a multi-segment one (the killed one, a tiered one), damaged and deleted
    ones."""
    names = [n for n in ("multi-segment-0", "killed-0", "tiered-0", "codec-gzip-0", "idempotent-1", DELETE_DIR)
             if (local / n).is_dir()]
    return names or [sorted(p.name for p in local.iterdir() if p.is_dir())[0]]


#: CI describes over S3 the reference fixture, the copy with every damage and a v0 one; ``-m campaign`` all of them
CI_DESCRIBE = ("kafka-4.3.1-kraft", "damaged", "crc-closed-v0")


@pytest.mark.parametrize("name", [n if n in CI_DESCRIBE else pytest.param(n, marks=pytest.mark.campaign)
                                  for n in [*ALL_FIXTURES, *DAMAGED]])
def test_describe_on_s3_is_the_local_describe(urls, s3_env, capsys, name):
    """``kafkalog describe`` of a data dir, of partition dirs and with ``--topics`` (the endpoint and keys from the
    environment) prints what it prints for the local dir, byte for byte but the path prefix, and exits as it does."""
    local, url = urls[name]
    runs = [[*opts, "{}"] for opts in DIR_OPTIONS]
    runs += [[*opts, "{}/" + p] for p in _partition_dirs(local) for opts in PARTITION_OPTIONS]
    topics = sorted({parse_topic_partition_name(p.name).topic for p in local.iterdir()
                     if p.is_dir() and p.name != "remote-log-index-cache"})
    runs += [["--json", "--topics", ",".join(topics[-2:]), "{}"], ["--topics", topics[0], "{}"]]
    codes = set()
    for args in runs:
        mine = cli(capsys, [a.format(local) for a in args], str(local))
        theirs = cli(capsys, [a.format(url) for a in args], url)
        assert theirs == mine, args
        assert mine[1] and "Traceback" not in mine[2], args
        codes.add(mine[0])
    assert 1 in codes if name in FOUND else codes == {0}  # a damage is found over S3 as it is locally
    if name == "damaged":
        (delete,) = map(json.loads, cli(capsys, ["--json", f"{url}/{DELETE_DIR}"], url)[1].splitlines())
        assert (delete["dirKind"], delete["dataDir"]) == ("delete", "DIR")


def test_describe_paths_of_urls(urls, s3_env):
    """The library call takes URLs as it takes local paths (several, mixed with local ones): the same
    descriptions, their dataDir the URL."""
    local, url = urls["kafka-4.3.1-kraft"]
    here = list(describe_paths([local, local / "multi-segment-0"], topics=["multi-segment"]))
    there = list(describe_paths([url, f"{url}/multi-segment-0"], topics=["multi-segment"]))
    assert [d["dir"] for d in here] == ["multi-segment-0", "multi-segment-1", "multi-segment-0"]
    assert json.dumps(there).replace(url, "DIR") == json.dumps(here).replace(str(local), "DIR")
    assert {d["dataDir"] for d in there} == {url}
    mixed = [d["dataDir"] for d in describe_paths([url, local], scan=False)]
    assert mixed == [url] * (len(mixed) // 2) + [str(local)] * (len(mixed) // 2) and mixed


def test_log_dirs_describe_of_a_url_is_the_local_one(urls, s3_endpoint, monkeypatch):
    """``kafkalog.open(url).describe()`` (the endpoint and keys as filesystem options) describes what
    ``kafkalog.open(local).describe()`` does, through the same call: every partition dir, a ``-delete`` one too."""
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    local, url = urls["damaged"]
    options = {"s3.endpoint": s3_endpoint, "s3.accessKey": "test", "s3.secretKey": "test", "s3.region": "us-east-1"}
    with kafkalog.open(local) as here, kafkalog.open(url, filesystem_options=options) as there:
        for scan in (True, False):
            mine = here.describe(scan=scan)
            assert json.dumps(there.describe(scan=scan)).replace(url, "DIR") == \
                json.dumps(mine).replace(str(local), "DIR")
            assert [d["dir"] for d in mine if d.get("dirKind") == "delete"] == [DELETE_DIR]


@pytest.mark.parametrize("options", [[], ["--fast"], ["--segments", "--json"]])
def test_describe_reads_a_log_on_s3_in_windows(tmp_path, s3_env, capsys, monkeypatch, options):
    """With a window far smaller than a segment (and than some batches), describe of a data dir on S3 prints what
    it prints for the local dir and never reads a .log whole (nor as a small file)."""
    local = generated_data_dir(tmp_path / "data", {"w": 2}, 400, batch_records=10, segment_bytes=8000)
    url = upload(local, s3_env, f"windows/{'-'.join(options) or 'plain'}")
    monkeypatch.setattr(fs_module, "REMOTE_WINDOW", 700)  # about one batch of 10 records
    reads = spy_url_reads(monkeypatch)
    mine = cli(capsys, [*options, str(local)], str(local))
    assert cli(capsys, [*options, url], url) == mine and mine[0] == 0
    biggest = max(f.stat().st_size for f in local.rglob("*.log"))
    assert biggest > 4 * 700
    logs = reads.logs()
    assert logs and all(n < size for n, size in logs if size > 700)  # in windows, never whole
    assert max(n for n, _ in logs) < biggest
    assert not [p for p in reads.whole if p.endswith(".log")]  # (nor as a small file)


@pytest.mark.parametrize("options", [[], ["--json"], ["--segments", "--topics", "t"]])
def test_describe_of_a_url_naming_nothing_is_the_path_contract_error(urls, s3_env, capsys, options):
    """A URL that names nothing is the one path contract's error: one line naming it, no such file or directory,
    exit 1, nothing on stdout (as for a local path that does not exist)."""
    _local, url = urls["kafka-4.3.1-kraft"]
    for missing in (f"{url}/no-such-0", "s3://logs/describe/nothing/data", "s3://no-such-bucket/data"):
        code, out, err = cli(capsys, [*options, missing], "")
        assert (code, out) == (1, ""), missing
        assert err == f"kafkalog describe: error: {missing}: no such file or directory\n", err
