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
