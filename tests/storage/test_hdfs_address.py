"""Where the filesystem seam reaches an ``hdfs://`` URL's namenode over WebHDFS without libhdfs
(:func:`kafkalog.storage.io.hdfs.http_address`): the option, the environment, ``hdfs-site.xml`` (a plain namenode, a
wildcard bind, an HA nameservice, HTTPS only), then the default port; ``webhdfs://`` names it itself. No cluster:
``tests/spark/test_jvm_hdfs.py`` reads a real one."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from kafkalog.compat.pytest_plugin import require_modules
from kafkalog.storage.errors import KafkaLogError, LogDirError
from kafkalog.storage.io.fs import FsSpec, hadoop_url, split_uri
from kafkalog.storage.io.hdfs import HTTP_ADDRESS_ENV, HttpAddress, http_address


def site(conf: Path, props: dict[str, str]) -> None:
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
    (conf / "hdfs-site.xml").write_text(f'<?xml version="1.0"?><configuration>{body}</configuration>')


@pytest.fixture
def conf(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    monkeypatch.delenv(HTTP_ADDRESS_ENV, raising=False)
    return tmp_path


def test_the_namenode_http_address_comes_first_from_the_option_then_the_environment(conf, monkeypatch):
    site(conf, {"dfs.namenode.http-address": "nn:50070"})
    assert http_address("hdfs", "nn:8020", {}) == HttpAddress("nn", 50070)
    monkeypatch.setenv(HTTP_ADDRESS_ENV, "https://gw:14000")
    assert http_address("hdfs", "nn:8020", {}) == HttpAddress("gw", 14000, True)
    assert http_address("hdfs", "nn:8020", {"hdfs.httpaddress": "other:1"}) == HttpAddress("other", 1)


def test_hdfs_site_gives_the_namenode_s_address(conf):
    site(conf, {"dfs.namenode.http-address": "0.0.0.0:9999"})
    assert http_address("hdfs", "nn.example:8020", {}) == HttpAddress("nn.example", 9999)  # a wildcard bind
    site(conf, {"dfs.namenode.http-address": "elsewhere:9999"})
    assert http_address("hdfs", "nn:8020", {}) == HttpAddress("nn", 9870)  # another namenode's: the default
    site(conf, {"dfs.nameservices": "prod", "dfs.ha.namenodes.prod": "nn1,nn2",
                "dfs.namenode.http-address.prod.nn1": "a:9870", "dfs.namenode.http-address.prod.nn2": "b:9870"})
    assert http_address("hdfs", "prod", {}) == HttpAddress("a", 9870)
    site(conf, {"dfs.http.policy": "HTTPS_ONLY", "dfs.namenode.https-address": "nn:9871"})
    assert http_address("hdfs", "nn:8020", {}) == HttpAddress("nn", 9871, True)


def test_without_configuration_the_default_port_and_webhdfs_urls_name_it(conf):
    assert http_address("hdfs", "nn:8020", {}) == HttpAddress("nn", 9870)
    assert http_address("webhdfs", "nn:1234", {}) == HttpAddress("nn", 1234)
    assert http_address("swebhdfs", "nn", {}) == HttpAddress("nn", 9871, True)
    assert str(HttpAddress("nn", 1234, True)) == "https://nn:1234"
    (conf / "hdfs-site.xml").write_text("<configuration><property>")
    with pytest.raises(LogDirError, match="hdfs-site.xml"):
        http_address("hdfs", "nn:8020", {})


def test_a_filesystem_per_namenode_and_hadoop_reads_hdfs_not_webhdfs():
    a, path = split_uri("hdfs://nn1:8020/data", {"hdfs.user": "kafka", "s3.region": "r"})
    b, _ = split_uri("hdfs://nn2:8020/data")
    assert a != b and dict(a.netloc_opts) == {"hdfs.namenode": "nn1:8020", "hdfs.user": "kafka", "s3.region": "r"}
    assert path == "hdfs://nn1:8020/data" and hadoop_url(a, path) == path
    web, path = split_uri("webhdfs://nn1:9870/data")
    assert web.scheme == "webhdfs" and hadoop_url(web, path) is None
    assert hadoop_url(FsSpec(""), "/x") == "/x"


def test_a_namenode_out_of_reach_says_where_its_address_comes_from(conf, monkeypatch):
    """Without libhdfs, a WebHDFS address nothing listens on: exit 1 naming the URL, the address and where it
    comes from (no traceback)."""
    require_modules("pyarrow", "fsspec", extra="spark")
    import kafkalog
    from kafkalog.storage.io.fs import forget_listings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # (closed when the block ends: nothing listens there)
    monkeypatch.setenv(HTTP_ADDRESS_ENV, f"127.0.0.1:{port}")
    forget_listings()
    with pytest.raises(KafkaLogError) as e:
        kafkalog.open("hdfs://nn:8020/kafka/data").topics()
    assert str(e.value).startswith("hdfs://nn:8020/kafka/data: ")
    assert f"no WebHDFS at http://127.0.0.1:{port}/webhdfs/v1" in str(e.value) and HTTP_ADDRESS_ENV in str(e.value)


def test_a_forked_worker_makes_its_own_filesystems():
    """A filesystem made before a fork (its pooled connections) is never a forked worker's (verify's processes):
    two processes reading one HTTP connection get each other's answers."""
    require_modules("pyarrow", extra="spark")
    from kafkalog.storage.io import fs

    fs.FsSpec("").filesystem()
    assert fs._filesystem.cache_info().currsize >= 1
    pid = os.fork()
    if pid == 0:  # the child: nothing made yet
        os._exit(0 if fs._filesystem.cache_info().currsize == 0 else 1)
    assert os.waitpid(pid, 0)[1] == 0
    assert fs._filesystem.cache_info().currsize >= 1
