"""Shared pytest configuration for every test directory. Keep it small: put fixtures that only one area
needs in a ``conftest.py`` next to those tests.

* ``kafkalog.compat.pytest_plugin`` supplies the ``kafka`` marker handling (run when a JDK + Maven are
  present, skip otherwise, *fail* under ``CI=true``) and the fixtures ``kafka_versions``, ``kafka_libs``,
  ``broker_factory``, ``module_broker_factory``.
* ``fixtures_dir``: the repository's ``fixtures/`` (real broker data dirs, see fixtures/README.md).
* ``s3_endpoint``: a local moto S3 server on 127.0.0.1 (its ``http://`` URL), for ``s3://`` reads.
"""

import socket
from pathlib import Path

import pytest

pytest_plugins = ["kafkalog.compat.pytest_plugin"]

FIXTURES_DIR = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES_DIR


@pytest.fixture(scope="module")
def s3_endpoint():
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
