"""Shared pytest configuration for every test directory. Keep it small: put fixtures that only one area
needs in a ``conftest.py`` next to those tests.

* ``kafkalog.compat.pytest_plugin`` supplies the ``kafka`` marker handling (run when a JDK + Maven are
  present, skip otherwise, *fail* under ``CI=true``) and the fixtures ``kafka_versions``, ``kafka_libs``,
  ``broker_factory``, ``module_broker_factory``.
* ``fixtures_dir``: the repository's ``fixtures/`` (real broker data dirs, see fixtures/README.md).
"""

from pathlib import Path

import pytest

pytest_plugins = ["kafkalog.compat.pytest_plugin"]

FIXTURES_DIR = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES_DIR
