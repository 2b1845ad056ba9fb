"""Collection works with only the ``test`` extra installed: with pyspark and pyarrow not importable (stub packages
that raise ImportError, first on the path), ``pytest --collect-only`` of the whole suite exits 0 and reports the
Spark modules as skipped; under ``CI=true`` (where every extra is installed) it fails, naming the missing module.
The mechanism is in ``tests/spark/conftest.py`` and ``kafkalog.compat.pytest_plugin.require_modules``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = ("pyspark", "pyarrow")


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("blocked-modules")
    for name in BLOCKED:
        (d / name).mkdir()
        (d / name / "__init__.py").write_text(f"raise ImportError('{name} is blocked by test_collection')\n")
    return d


def _collect(stubs: Path, ci: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env["PYTHONPATH"] = os.pathsep.join([str(stubs), *filter(None, [os.environ.get("PYTHONPATH")])])
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_stubs_block_the_modules(stubs: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(stubs), os.environ.get("PYTHONPATH", "")]))
    for name in BLOCKED:
        r = subprocess.run([sys.executable, "-c", f"import {name}"], env=env, capture_output=True, text=True)
        assert r.returncode != 0 and "blocked by test_collection" in r.stderr


def test_collection_without_the_spark_extra_skips_spark_modules(stubs: Path) -> None:
    r = _collect(stubs, ci=False)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "error" not in r.stdout.splitlines()[-1].lower()
    assert "SKIPPED" in r.stdout and "install kafkalog[spark]" in r.stdout
    assert "tests/storage/test_export.py::" in r.stdout  # the rest of the suite is collected


def test_collection_under_ci_fails_clearly_without_the_spark_extra(stubs: Path) -> None:
    r = _collect(stubs, ci=True)
    assert r.returncode != 0
    assert "CI=true and pyspark cannot be imported" in r.stdout + r.stderr
    assert "ERROR tests/spark/" in r.stdout
