"""kafkalog.compat.jars without Maven or a JVM: versions, cache layout, the completion marker, class lookup."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from kafkalog.compat import jars


def test_versions_and_profiles() -> None:
    assert jars.parse_version("3.9.2") == (3, 9, 2)
    with pytest.raises(ValueError, match="not a Kafka release"):
        jars.parse_version("latest")
    assert jars.maven_profiles(jars.LATEST_4) == ["log4j2", "server"]
    assert jars.maven_profiles(jars.LATEST_3) == ["reload4j", "server"]
    assert jars.maven_profiles("2.8.2") == ["reload4j"]
    assert jars.POM.is_file() and "${kafka.version}" in jars.POM.read_text()


def test_cache_root_override_and_marker_short_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKALOG_CACHE", str(tmp_path))
    assert jars.kafka_home("9.9.9") == tmp_path / "kafka-9.9.9"
    assert not jars.is_resolved("9.9.9")
    (tmp_path / "kafka-9.9.9" / "libs").mkdir(parents=True)
    (tmp_path / "kafka-9.9.9" / jars.MARKER).write_text("kafka_2.13-9.9.9.jar\n")
    # the marker means "done": no Maven run (9.9.9 does not exist on Maven Central)
    assert jars.ensure_kafka("9.9.9") == tmp_path / "kafka-9.9.9" / "libs"


def test_find_class_looks_inside_kafka_jars(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "kafka-tools-9.9.9.jar", "w") as zf:
        zf.writestr("org/apache/kafka/tools/DumpLogSegments.class", b"\xca\xfe\xba\xbe")
    name = jars.find_class(tmp_path, "org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments")
    assert name == "org.apache.kafka.tools.DumpLogSegments"
    with pytest.raises(jars.HarnessError, match="none of"):
        jars.find_class(tmp_path, "kafka.tools.DumpLogSegments")


def test_cli_reports_errors_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert jars.main(["not-a-version"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: not a Kafka release version") and "Traceback" not in err


def test_cluster_ids_never_start_with_a_dash():
    """kafka-storage reads ``-t -Abc…`` as an option; Kafka's Uuid.randomUuid avoids such ids, so must we."""
    from kafkalog.compat.broker import cluster_id_from

    ids = [cluster_id_from(f"/tmp/pytest-of-root/pytest-{i}/data") for i in range(5000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 for i in ids)
    assert cluster_id_from("same") == cluster_id_from("same")
