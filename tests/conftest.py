"""Shared pytest configuration for every test directory. Keep it small: put fixtures that only one area
needs in a ``conftest.py`` next to those tests.

* ``kafkalog.compat.pytest_plugin`` supplies the ``kafka`` marker handling (run when a JDK + Maven are
  present, skip otherwise, *fail* under ``CI=true``) and the fixtures ``kafka_versions``, ``kafka_libs``,
  ``broker_factory``, ``module_broker_factory``.
* ``fixtures_dir``: the repository's ``fixtures/`` (real broker data dirs, see fixtures/README.md).
* ``s3_endpoint``: a local moto S3 server on 127.0.0.1 (its ``http://`` URL), for ``s3://`` reads; ``s3_env``: its
  endpoint and keys in the environment (``AWS_ENDPOINT_URL``, ...), as a user of the command line gives them.
* ``hdfs_cluster``: Hadoop's MiniDFSCluster of pyspark's Hadoop version (namenode, datanode, WebHDFS), for
  ``hdfs://`` reads (:class:`kafkalog.compat.hdfs.MiniDfs`: its URL, HTTP address, ``HADOOP_CONF_DIR``, ``put``).
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


@pytest.fixture(scope="module")
def hdfs_cluster(tmp_path_factory):
    import pyspark

    from kafkalog.compat.hdfs import MiniDfs

    with MiniDfs.start(tmp_path_factory.mktemp("hdfs"), Path(pyspark.__file__).parent / "jars") as dfs:
        yield dfs


@pytest.fixture
def s3_env(s3_endpoint, monkeypatch):
    """The endpoint and keys of the moto server in the environment, as a user of the command line gives them;
    returns the endpoint."""
    for k, v in {"AWS_ENDPOINT_URL": s3_endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                 "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(k, v)
    return s3_endpoint
