"""The README's main job (`make quickstart`) must stay true: verify + describe every real-Kafka fixture."""

from pathlib import Path

from kafkalog.tools.quickstart import fixture_data_dirs, main

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_finds_every_fixture_data_dir():
    dirs = fixture_data_dirs(ROOT / "fixtures")
    names = {d.parent.name for d in dirs}
    assert {"kafka-4.3.1-kraft", "kafka-3.9.2-kraft", "kafka-3.9.2-zk-v0", "kafka-3.9.2-zk-v1"} <= names


def test_quickstart_passes_on_the_fixtures(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "0 errors" in out and "codec-zstd-0" in out


def test_quickstart_fails_on_a_corrupt_dir(tmp_path, capsys):
    import shutil

    src = ROOT / "fixtures" / "kafka-4.3.1-kraft" / "data"
    dst = tmp_path / "data"
    shutil.copytree(src, dst)
    log = next((dst / "codec-none-0").glob("*.log"))
    data = bytearray(log.read_bytes())
    data[100] ^= 0xFF  # flip a byte inside the first batch: CRC mismatch
    log.write_bytes(bytes(data))
    assert main([str(dst)]) == 1
    assert "crc" in capsys.readouterr().out


def test_quickstart_prints_exactly_the_commands_it_runs(capsys, monkeypatch):
    """Pasting a printed `== kafkalog ...` line runs the same check with the same result (issue 13: it printed
    `kafkalog verify` but ran `verify --independent`)."""
    import shlex
    import subprocess
    import sys

    monkeypatch.chdir(ROOT)
    assert main([]) == 0
    printed = [line[3:] for line in capsys.readouterr().out.splitlines() if line.startswith("== kafkalog ")]
    assert len(printed) == 2 and "--independent" in printed[0]
    for line in printed:
        argv = shlex.split(line)[1:]
        p = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", *argv], cwd=ROOT, capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0, (line, p.stdout[-2000:], p.stderr[-2000:])
