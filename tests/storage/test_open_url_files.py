"""``kafkalog dump`` and ``kafkalog verify`` of a single file named by a URL (issue 30 item 1): a file on S3 (a local
moto server) reads through the filesystem seam as the same file on a local disk does, for every file kind (a v2
``.log``, a compressed one, a torn and a CRC-damaged one, ``.index``, ``.timeindex``, ``.txnindex``, a producer
``.snapshot``, a KRaft snapshot, the data dir's checkpoints, ``leader-epoch-checkpoint``, ``partition.metadata``,
``meta.properties``, ``quorum-state``): the same output, human and ``--json``, and the same exit code; a ``.log`` is
read in windows, never whole; a URL that names nothing is one clear error naming it (exit 1)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from builders import generated_data_dir, spy_url_reads
from builders import s3_upload as upload
from damage import damaged_copy

from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.io import fs as fs_module
from kafkalog.tools.cli import main

require_modules("pyarrow", "fsspec", "moto", extra="spark")  # skipped without the spark extra, a failure under CI=true

#: one of each kind, on a copy of kafka-4.3.1-kraft with every damage of tests/damage.py (a torn tail in
#: multi-segment-0, a CRC mismatch in multi-segment-1, a bad .timeindex in codec-gzip-0, no .index in codec-none-0,
#: an empty partition.metadata in idempotent-1, a malformed recovery-point-offset-checkpoint)
FILES = [
    "multi-segment-0/00000000000000000000.log",  # v2, closed
    "multi-segment-0/00000000000000000120.log",  # v2, the active segment: a torn tail
    "multi-segment-1/00000000000000000048.log",  # a CRC mismatch
    "codec-zstd-0/00000000000000000000.log",  # compressed (zstd)
    "codec-gzip-0/00000000000000000000.log",  # compressed (gzip), its .timeindex damaged
    "codec-none-0/00000000000000000000.log",  # no .index
    "multi-segment-0/00000000000000000044.index",
    "multi-segment-0/00000000000000000044.timeindex",
    "codec-gzip-0/00000000000000000000.timeindex",  # fails the sanity check
    "compacted-0/00000000000000000120.txnindex",
    "idempotent-0/00000000000000000040.snapshot",
    "__cluster_metadata-0/00000000000000000036-0000000001.checkpoint",  # a KRaft snapshot
    "__cluster_metadata-0/quorum-state",
    "multi-segment-0/leader-epoch-checkpoint",
    "multi-segment-0/partition.metadata",
    "idempotent-1/partition.metadata",  # empty
    "recovery-point-offset-checkpoint",  # malformed
    "replication-offset-checkpoint",
    "meta.properties",
]
COMMANDS = [["dump"], ["dump", "--json", "--deep"], ["verify", "--info"], ["verify", "--json", "--info", "--deep"]]
_TIMING = re.compile(r" in [0-9.]+ s \([^)]*\)")  # verify's summary: how long it took


@pytest.fixture(scope="module")
def damaged(s3_endpoint, tmp_path_factory) -> tuple[Path, str]:
    """``(local data dir, its copy on the moto S3 server)``: kafka-4.3.1-kraft with every damage."""
    local = tmp_path_factory.mktemp("files") / "data"
    damaged_copy("kafka-4.3.1-kraft", local)
    return local, upload(local, s3_endpoint, "files/data")


def cli(capsys, args: list[str], root: str) -> tuple[int, list[str], list[str]]:
    """``(exit code, stdout lines, stderr lines)`` of ``kafkalog ARGS`` with ``root`` named ``DIR`` (and, for verify's
    human table, its columns' padding, which follows the longest file name, and its timing left out)."""
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    rel = os.path.relpath(root) if "://" not in root else root

    def same(text: str) -> list[str]:
        text = _TIMING.sub("", text.replace(root, "DIR").replace(rel, "DIR"))
        return [" ".join(line.split()) if args[0] == "verify" else line for line in text.splitlines()]

    return code, same(out), same(err)


@pytest.mark.parametrize("name", FILES)
def test_a_file_on_s3_is_the_local_file(damaged, s3_env, capsys, name):
    """dump and verify of one file named by its s3:// URL print what they print for the local file (human and JSON)
    and exit as they do."""
    local, url = damaged
    assert (local / name).is_file()
    seen = set()
    for cmd in COMMANDS:
        mine = cli(capsys, [*cmd, str(local / name)], str(local))
        theirs = cli(capsys, [*cmd, f"{url}/{name}"], url)
        assert theirs == mine, cmd
        seen.add(mine[0])
        assert mine[1] or mine[2], cmd  # (something was said)
    if name in ("multi-segment-0/00000000000000000120.log", "multi-segment-1/00000000000000000048.log",
                "codec-gzip-0/00000000000000000000.timeindex", "recovery-point-offset-checkpoint",
                "idempotent-1/partition.metadata"):
        assert 1 in seen  # the damage is found over S3 as it is locally


def test_dump_options_of_a_log_on_s3(damaged, s3_env, capsys):
    """-o (found through the .index and .timeindex under the URL), --max-bytes, --print-data-log and --salvage (a
    local copy fetched in windows) of a .log on S3 print what they print for the local file; and so do
    --verify-index-only and --index-sanity-check of its indexes."""
    local, url = damaged
    runs = [["-o", "50:60", "--json"], ["-o", "@0:1m"], ["--max-bytes", "3000", "--print-data-log"],
            ["--salvage"], ["--salvage", "--json"]]
    for name, options in [("multi-segment-1/00000000000000000048.log", runs),
                          ("multi-segment-0/00000000000000000044.index", [["--verify-index-only"]]),
                          ("codec-gzip-0/00000000000000000000.timeindex", [["--index-sanity-check", "--json"]])]:
        for opts in options:
            mine = cli(capsys, ["dump", *opts, str(local / name)], str(local))
            assert cli(capsys, ["dump", *opts, f"{url}/{name}"], url) == mine, opts
            assert mine[1], opts


def test_a_partition_dir_on_s3_dumps_as_the_local_one(damaged, s3_env, capsys):
    """dump of a partition dir named by its URL: its segments as one log, the torn tail of the active one not an
    error, as locally."""
    local, url = damaged
    mine = cli(capsys, ["dump", "--json", str(local / "multi-segment-0")], str(local))
    assert cli(capsys, ["dump", "--json", f"{url}/multi-segment-0"], url) == mine and mine[0] == 0


def test_a_log_on_s3_is_read_in_windows(tmp_path, s3_env, capsys, monkeypatch):
    """With a window far smaller than a segment (and than some batches), dump and verify of a .log under a URL, and
    the dump of its .index and .timeindex (each entry checked against the .log), print what they print for the
    local file and never read the .log whole."""
    local = generated_data_dir(tmp_path / "data", {"w": 1}, 400, batch_records=10, segment_bytes=8000)
    url = upload(local, s3_env, "windows/data")
    monkeypatch.setattr(fs_module, "REMOTE_WINDOW", 700)  # about one batch of 10 records
    reads = spy_url_reads(monkeypatch)
    first = sorted((local / "w-0").glob("*.log"))[0]
    assert first.stat().st_size > 4 * 700
    for suffix in (".log", ".index", ".timeindex"):
        name = f"w-0/{first.name[:-4]}{suffix}"
        for cmd in (["dump", "--deep"], ["verify", "--json", "--deep"]):
            reads.clear()
            mine = cli(capsys, [*cmd, str(local / name)], str(local))
            assert cli(capsys, [*cmd, f"{url}/{name}"], url) == mine
            logs = reads.logs()
            assert logs and all(n < size for n, size in logs), (cmd, suffix)  # in windows, never whole
            assert max(n for n, _ in logs) < first.stat().st_size


@pytest.mark.parametrize("command", [["verify"], ["dump"], ["dump", "--json"]])
def test_a_url_naming_nothing_is_a_clear_error(damaged, s3_env, capsys, command):
    _local, url = damaged
    missing = f"{url}/multi-segment-0/00000000000000099999.log"
    capsys.readouterr()
    assert main([*command, missing]) == 1
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and missing in lines[0] and "no such file or directory" in lines[0], lines
    assert "Traceback" not in err
    if "--json" in command:
        assert f'"file":"{missing}"' in out and '"event":"error"' in out


def test_the_filesystem_follows_the_endpoint_in_the_environment(damaged, s3_env, capsys, monkeypatch):
    """A process that changes ``AWS_ENDPOINT_URL`` reaches the new server: the seam's S3 filesystem is made again
    for the environment it is used in, not kept from the first endpoint (c30e7ea's fixture forgot the cached
    filesystem by hand, or test_open_url's verify reached this module's stopped server); the same environment
    reuses the one made."""
    local, url = damaged
    name = "meta.properties"
    mine = cli(capsys, ["dump", str(local / name)], str(local))
    assert cli(capsys, ["dump", f"{url}/{name}"], url) == mine and mine[0] == 0
    first = fs_module.FsSpec("s3").filesystem()
    assert fs_module.FsSpec("s3").filesystem() is first
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # (the discard port: nothing answers there)
    code, out, err = cli(capsys, ["dump", f"{url}/{name}"], url)
    assert code == 1 and "127.0.0.1:9" in " ".join(err) and "Traceback" not in " ".join(err), err
    assert fs_module.FsSpec("s3").filesystem() is not first
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_env)  # back to the server: its filesystem again
    assert cli(capsys, ["dump", f"{url}/{name}"], url) == mine
    assert fs_module.FsSpec("s3").filesystem() is first
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "someone-else")  # another identity: another filesystem
    assert fs_module.FsSpec("s3").filesystem() is not first
