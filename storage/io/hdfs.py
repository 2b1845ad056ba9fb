"""HDFS for the filesystem seam (:mod:`kafkalog.storage.io.fs`): ``hdfs://``, ``webhdfs://`` and ``swebhdfs://``.

``hdfs://namenode:port/path`` is read through libhdfs (pyarrow's ``HadoopFileSystem``) where it loads (a JVM,
Hadoop's jars on ``CLASSPATH``, ``libhdfs.so``); without it (most client machines) through WebHDFS, the
namenode's HTTP API (fsspec's ``webhdfs``: plain HTTP, nothing of Hadoop on the client). The namenode's HTTP
address is the first of:

1. the option ``hdfs.httpAddress`` (``host:port``, or ``http://host:port`` / ``https://host:port``);
2. the environment variable ``KAFKALOG_HDFS_HTTP_ADDRESS`` (the same forms);
3. Hadoop's client configuration, ``hdfs-site.xml`` in ``$HADOOP_CONF_DIR`` (else ``$HADOOP_HOME/etc/hadoop``):
   ``dfs.namenode.http-address`` (``dfs.namenode.https-address`` under ``dfs.http.policy`` ``HTTPS_ONLY``);
   when the URL's host is a nameservice, the key suffixed with it (``.NS.NN``, for the first namenode of
   ``dfs.ha.namenodes.NS``, else ``.NS``); otherwise the plain key, when its host is the URL's or a wildcard
   (``0.0.0.0``: the URL's host on its port);
4. the URL's host on Hadoop 3's default port, 9870 (9871 for HTTPS).

``webhdfs://host:port/path`` names the HTTP address itself (``swebhdfs://``: HTTPS; default ports as above). The
user is the option ``hdfs.user``, else ``HADOOP_USER_NAME``, else the login name: Hadoop's simple authentication
(a Kerberos cluster needs libhdfs here).

The JVM scan reads ``hdfs://`` through Hadoop's own RPC client (Spark's ``hadoop-client-runtime``), not
``webhdfs://``: that shaded client's ``WebHdfsFileSystem`` fails on its first response (Hadoop 3.5.0:
``ClassNotFoundException: org.apache.hadoop.shaded.org.glassfish.jersey.internal.RuntimeDelegateImpl``, the JAX-RS
API is shaded in without an implementation), so ``format("kafkalog")`` over ``webhdfs://`` is the Python source's,
which reads it here.
"""

from __future__ import annotations

import getpass
import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlparse

from kafkalog.storage.errors import LogDirError

#: the URL schemes of this module
SCHEMES = ("hdfs", "webhdfs", "swebhdfs")
#: the filesystem option holding a URL's namenode (``host[:port]``; :func:`kafkalog.storage.io.fs.split_uri`)
NAMENODE = "hdfs.namenode"
#: the options a reader gives (Spark option names, case-insensitive): the namenode's HTTP address, the user
HTTP_ADDRESS, USER = "hdfs.httpaddress", "hdfs.user"
HTTP_ADDRESS_ENV = "KAFKALOG_HDFS_HTTP_ADDRESS"
HTTP_PORT, HTTPS_PORT = 9870, 9871


class HttpAddress(NamedTuple):
    """Where a namenode serves WebHDFS."""

    host: str
    port: int
    https: bool = False

    def __str__(self) -> str:
        return f"{'https' if self.https else 'http'}://{self.host}:{self.port}"


def parse_address(value: str, https: bool = False) -> HttpAddress:
    """``host:port``, ``http://host:port`` or ``https://host:port`` as an :class:`HttpAddress` (without a port:
    the default one)."""
    u = urlparse(value if "://" in value else ("https://" if https else "http://") + value)
    https = u.scheme == "https"
    if not u.hostname:
        raise LogDirError("not a namenode HTTP address (host:port)", value)
    return HttpAddress(u.hostname, u.port or (HTTPS_PORT if https else HTTP_PORT), https)


def site_config(name: str = "hdfs-site.xml") -> dict[str, str]:
    """The properties of Hadoop's client configuration file ``name`` (in ``$HADOOP_CONF_DIR``, else
    ``$HADOOP_HOME/etc/hadoop``); empty when there is none."""
    conf_dir = os.environ.get("HADOOP_CONF_DIR") or (os.environ.get("HADOOP_HOME") and
                                                     f"{os.environ['HADOOP_HOME']}/etc/hadoop")
    path = Path(conf_dir) / name if conf_dir else None
    if path is None or not path.is_file():
        return {}
    return read_config(path)


def read_config(path: Path) -> dict[str, str]:
    """The properties (name: value) of the Hadoop configuration file ``path`` (``<configuration><property>``)."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise LogDirError(f"not a Hadoop configuration file: {e}", str(path)) from None
    return {p.findtext("name", "").strip(): p.findtext("value", "").strip() for p in root.iter("property")}


def hadoop_version(spark_jars: Path) -> str | None:
    """The Hadoop version of a Spark distribution's ``jars/`` (its ``hadoop-client-api`` jar's), None without one:
    the version of hadoop-aws (``s3a://``) and of a test HDFS a Spark session reads with."""
    api = sorted(spark_jars.glob("hadoop-client-api-*.jar"))
    return api[-1].name.removeprefix("hadoop-client-api-").removesuffix(".jar") if api else None


def http_address(scheme: str, netloc: str, options: Mapping[str, str]) -> HttpAddress:
    """The WebHDFS address of the namenode of a ``scheme://netloc/...`` URL (the order of the module's doc)."""
    host = urlparse(f"//{netloc}").hostname or "localhost"
    if scheme in ("webhdfs", "swebhdfs"):
        return parse_address(netloc, scheme == "swebhdfs")
    given = options.get(HTTP_ADDRESS) or os.environ.get(HTTP_ADDRESS_ENV)
    if given:
        return parse_address(given)
    conf = site_config()
    https = conf.get("dfs.http.policy", "").upper() == "HTTPS_ONLY"
    key = "dfs.namenode.https-address" if https else "dfs.namenode.http-address"
    namenodes = [n.strip() for n in conf.get(f"dfs.ha.namenodes.{host}", "").split(",") if n.strip()]
    for k in ([f"{key}.{host}.{namenodes[0]}"] if namenodes else []) + [f"{key}.{host}"]:
        if conf.get(k):
            return parse_address(conf[k], https)
    if conf.get(key):
        found = parse_address(conf[key], https)
        if found.host in (host, "0.0.0.0"):
            return HttpAddress(host, found.port, https)
    return HttpAddress(host, HTTPS_PORT if https else HTTP_PORT, https)


def user(options: Mapping[str, str]) -> str:
    return options.get(USER) or os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


def libhdfs(pafs, netloc: str, options: Mapping[str, str]):
    """pyarrow's ``HadoopFileSystem`` for the namenode ``netloc`` (``pafs``: ``pyarrow.fs``), or None where
    libhdfs (or the JVM it runs in) cannot be loaded."""
    u = urlparse(f"//{netloc}")
    try:  # (port 0: a nameservice, resolved by Hadoop's configuration)
        return pafs.HadoopFileSystem(u.hostname or "default", u.port or 0, user=user(options))
    except OSError:
        return None


def webhdfs(fsspec, scheme: str, netloc: str, options: Mapping[str, str]):
    """fsspec's WebHDFS filesystem (``fsspec``: the module) for the namenode of ``scheme://netloc``, listing each
    file's modification time (``mtime``: a file's stamp, compared with Hadoop's ``FileStatus``)."""
    addr = http_address(scheme, netloc, options)
    cls = _with_mtime(fsspec.get_filesystem_class("webhdfs"))
    return cls(addr.host, addr.port, user=user(options), use_https=addr.https, skip_instance_cache=True)


@cache
def _with_mtime(base: type) -> type:
    """``base`` (fsspec's ``WebHDFS``), its listings and ``info`` giving ``mtime`` (a UTC datetime to the ms) from
    WebHDFS's ``modificationTime`` (ms), which fsspec leaves out; a namenode it cannot reach named with where its
    address comes from."""

    def process_info(info: dict) -> dict:
        info = base._process_info(info)  # type: ignore[attr-defined]
        ms = int(info.get("modificationTime", 0))
        info["mtime"] = datetime.fromtimestamp(ms // 1000, tz=UTC) + timedelta(milliseconds=ms % 1000)
        return info

    def call(self, *args, **kwargs):
        try:
            return base._call(self, *args, **kwargs)  # type: ignore[attr-defined]
        except RuntimeError as e:  # (the namenode's other exceptions: a standby's, safe mode's)
            raise OSError(f"WebHDFS at {self.url}: {e}") from None
        except OSError as e:
            if not any(c.__name__ == "ConnectionError" and c.__module__.startswith("requests")
                       for c in type(e).__mro__):  # (FileNotFoundError, PermissionError, HTTPError: as they are)
                raise
            raise OSError(f"no WebHDFS at {self.url} ({type(e).__name__}); the namenode's HTTP address is the option "
                          f"hdfs.httpAddress, else ${HTTP_ADDRESS_ENV}, else dfs.namenode.http-address in "
                          f"$HADOOP_CONF_DIR/hdfs-site.xml, else port {HTTP_PORT}") from None

    return type(base)(f"{base.__name__}Mtime", (base,), {"_process_info": staticmethod(process_info), "_call": call})
