"""The ``kafkalog`` package itself: ``kafkalog.__version__`` and ``python -m kafkalog`` (its files live in
tools/package, mapped by ``package-dir``)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import kafkalog

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_version_is_the_pyproject_version():
    assert kafkalog.__version__ == PYPROJECT["project"]["version"]


def test_version_from_a_checkout_that_is_not_installed(monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert kafkalog._version() == PYPROJECT["project"]["version"]


def test_python_m_kafkalog(tmp_path: Path):
    r = subprocess.run([sys.executable, "-m", "kafkalog", "--version"], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"kafkalog {kafkalog.__version__} (Python ")
    r = subprocess.run([sys.executable, "-m", "kafkalog"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and "usage: kafkalog" in r.stderr  # no command: the usage, exit 2
    r = subprocess.run([sys.executable, "-m", "kafkalog", "verify", str(ROOT / "fixtures" / "kafka-4.3.1-kraft" /
                                                                       "data" / "compacted-0")],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_package_dir_maps_kafkalog_to_tools_package():
    st = PYPROJECT["tool"]["setuptools"]
    assert st["package-dir"]["kafkalog"] == "tools/package" and "kafkalog" in st["packages"]
    assert (ROOT / "tools" / "package" / "__init__.py").is_file() and (ROOT / "tools" / "package" / "__main__.py").is_file()
    assert not (ROOT / "kafkalog").exists()  # the design card's top level: no kafkalog/ folder
