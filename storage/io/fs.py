"""The one filesystem seam at the bottom of storage: where the bytes come from.

Local paths are memory-mapped; ``s3://``, ``gs://``, ``hdfs://`` and a tiered store's URL are read in bounded
windows (:data:`REMOTE_WINDOW`) through ``pyarrow.fs`` or fsspec. Every reader that may meet a URL (the Spark
source and stream, tiered storage in :mod:`kafkalog.storage.remote`) lists and opens files here. pyarrow and
fsspec are optional dependencies: they are imported only when a URL is read. Filesystems: ``s3://`` (pyarrow),
``hdfs://`` (libhdfs where it loads, else WebHDFS: :mod:`kafkalog.storage.io.hdfs`, which also reads
``webhdfs://``; options ``hdfs.httpAddress``, ``hdfs.user``), ``gs://`` (pyarrow, where built with it), and every
other scheme fsspec has a filesystem for once its package is installed (``abfs://`` with adlfs, ...).

Options understood (Spark option names, case-insensitive): ``s3.endpoint`` (e.g. ``http://127.0.0.1:5000``),
``s3.accessKey``, ``s3.secretKey``, ``s3.region``, ``s3.anonymous``. Without them pyarrow's usual AWS
environment variables and credential chain apply (``AWS_ENDPOINT_URL`` is honoured too). A filesystem is made
once per options and :func:`environment` (what in the environment decides the server and the credentials), so a
process that changes ``AWS_ENDPOINT_URL`` reaches the new server.
"""

from __future__ import annotations

import mmap
import os
import stat
import sys
from collections.abc import Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO, NamedTuple, cast
from urllib.parse import unquote, urlparse

from kafkalog.storage.errors import LogDirError
from kafkalog.storage.io import hdfs
from kafkalog.storage.io.closing import Closing, unmap
from kafkalog.storage.io.file_stamp import FileStamp, local_stamp

#: remote reads come in windows of this size (a batch larger than this gets a window of its own size)
REMOTE_WINDOW = 16 * 1024 * 1024
#: the first window of a scan under a URL (then each window doubles, up to :data:`REMOTE_WINDOW`): a read of one
#: batch (an index entry's, a lookup's) reads about that batch, not a whole window
FIRST_WINDOW = 64 * 1024


@dataclass(frozen=True)
class FsSpec:
    """A picklable description of a filesystem (shipped to Spark workers inside input partitions)."""

    scheme: str  # "" for local
    netloc_opts: tuple[tuple[str, str], ...] = ()

    @property
    def is_local(self) -> bool:
        return self.scheme in ("", "file")

    def filesystem(self):
        """The filesystem this spec names here and now: one per spec and :func:`environment` (the variables that
        decide the server reached and the identity used there), made once and reused."""
        return _filesystem(self, environment(self.scheme))


def fs_options(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k.lower(), str(v)) for k, v in options.items() if k.lower().startswith(("s3.", "hdfs."))))


def local_path(path: str | os.PathLike) -> str | os.PathLike:
    """``path``, or for a ``file://`` URL the local path it names (``file:///a%20b`` is ``/a b``), as everywhere a
    local path is taken (the command line, :func:`kafkalog.open`, the Spark source)."""
    if not isinstance(path, str) or not path[:7].lower() == "file://":
        return path
    return os.path.abspath(unquote(urlparse(path).path))


def split_uri(path: str, options: Mapping[str, str] | None = None) -> tuple[FsSpec, str]:
    """``(filesystem spec, path inside that filesystem)`` for a local path or a URI."""
    if "://" not in path:
        return FsSpec(""), os.path.abspath(path)
    u = urlparse(path)
    scheme = u.scheme.lower()
    if scheme == "file":
        return FsSpec(""), cast(str, local_path(path))
    if scheme in ("s3", "s3a", "s3n"):
        return FsSpec("s3", fs_options(options or {})), (u.netloc + u.path).rstrip("/")
    if scheme in hdfs.SCHEMES:  # (a filesystem per namenode)
        return FsSpec(scheme, fs_options({**(options or {}), hdfs.NAMENODE: u.netloc})), path
    return FsSpec(scheme, fs_options(options or {})), path


#: the scheme Hadoop's FileSystem reads the files of each URL scheme of this seam by (``s3://`` is Hadoop's
#: ``s3a://``; :func:`split_uri` takes ``s3a://`` and ``s3n://`` as ``s3://``): what the JVM scan reads (:mod:`.hdfs`)
HADOOP_SCHEMES = {"s3": "s3a", "hdfs": "hdfs"}


def hadoop_url(spec: FsSpec, fspath: str) -> str | None:
    """The name Hadoop's FileSystem opens the file ``fspath`` of ``spec`` by: a local path as it is, ``s3://b/k`` as
    ``s3a://b/k``, an ``hdfs://`` URL as it is; None for another (:data:`HADOOP_SCHEMES`)."""
    if spec.is_local:
        return fspath
    if (scheme := HADOOP_SCHEMES.get(spec.scheme)) is None:
        return None
    return f"{scheme}://{fspath}" if spec.scheme == "s3" else display(spec, fspath)


#: the ``s3.*`` options and the Hadoop ``fs.s3a.*`` keys that say the same (:func:`hadoop_conf`, :func:`s3_options`)
_S3A_KEYS = {"s3.endpoint": "fs.s3a.endpoint", "s3.accesskey": "fs.s3a.access.key", "s3.secretkey": "fs.s3a.secret.key",
             "s3.region": "fs.s3a.endpoint.region"}


def s3_options(hadoop: Mapping[str, str]) -> dict[str, str]:
    """The ``s3.*`` options a Hadoop configuration's ``fs.s3a.*`` keys give (a Spark session's
    ``spark.hadoop.fs.s3a.*``, for the planner of a read the JVM scan makes through them); an endpoint without a
    scheme is ``https://`` unless ``fs.s3a.connection.ssl.enabled`` is false."""
    out = {o: hadoop[k] for o, k in _S3A_KEYS.items() if hadoop.get(k)}
    if "s3.endpoint" in out and "://" not in out["s3.endpoint"]:
        ssl = hadoop.get("fs.s3a.connection.ssl.enabled", "true").strip().lower() != "false"
        out["s3.endpoint"] = ("https://" if ssl else "http://") + out["s3.endpoint"]
    return out


def hadoop_conf(spec: FsSpec) -> dict[str, str]:
    """The Hadoop configuration (``fs.s3a.*``) that reads ``spec``'s files where this seam reads them: the same
    endpoint (with path-style addressing, as pyarrow's with an endpoint), keys, region and anonymity; empty for
    other schemes and for what the options leave to the defaults (then Hadoop's own configuration applies)."""
    if spec.scheme != "s3":
        return {}
    s3 = _s3_settings(dict(spec.netloc_opts))
    out = {}
    if "scheme" in s3:
        out[_S3A_KEYS["s3.endpoint"]] = f"{s3['scheme']}://{s3['endpoint_override']}"
        out["fs.s3a.path.style.access"] = "true"
        out["fs.s3a.connection.ssl.enabled"] = str(s3["scheme"] == "https").lower()
    if "access_key" in s3:
        out[_S3A_KEYS["s3.accesskey"]] = s3["access_key"]
        out[_S3A_KEYS["s3.secretkey"]] = s3["secret_key"]
    if "region" in s3:
        out[_S3A_KEYS["s3.region"]] = s3["region"]
    if s3.get("anonymous"):
        out["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"
    return out


def _s3_settings(opts: Mapping[str, str]) -> dict:
    """``pyarrow.fs.S3FileSystem``'s arguments for the ``s3.*`` options (and ``AWS_ENDPOINT_URL``)."""
    kw: dict = {}
    endpoint = opts.get("s3.endpoint") or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        u = urlparse(endpoint if "://" in endpoint else "https://" + endpoint)
        kw["endpoint_override"] = u.netloc
        kw["scheme"] = u.scheme
    if "s3.accesskey" in opts:
        kw["access_key"] = opts["s3.accesskey"]
        kw["secret_key"] = opts.get("s3.secretkey", "")
    if "s3.region" in opts:
        kw["region"] = opts["s3.region"]
    if opts.get("s3.anonymous", "false").lower() == "true":
        kw["anonymous"] = True
    return kw


def display(spec: FsSpec, fspath: str) -> str:
    """The name a file is reported under (``segment`` column, error messages)."""
    if spec.is_local:
        return fspath
    if spec.scheme == "s3":
        return f"s3://{fspath}"
    return fspath if "://" in fspath else f"{spec.scheme}://{fspath}"


#: the environment variables (by name prefix) a scheme's filesystem reads when it is made, to decide which server
#: it reaches and who it is there: the endpoint, keys, region, profile and credential files of the AWS SDK, Google
#: Cloud's, Hadoop's and Azure's; for every scheme fsspec's own configuration, the proxies and ``<SCHEME>_``
_ENVIRONMENT = {
    "s3": ("AWS_",),
    **dict.fromkeys(("gs", "gcs"), ("GOOGLE_", "GCE_", "GCS_", "STORAGE_EMULATOR_HOST", "CLOUDSDK_")),
    **dict.fromkeys(hdfs.SCHEMES, ("HADOOP_", "LIBHDFS3_", "ARROW_LIBHDFS", "KRB5", "CLASSPATH", "KAFKALOG_HDFS_")),
    "abfs": ("AZURE_",), "abfss": ("AZURE_",), "az": ("AZURE_",),
}
_EVERY_SCHEME = ("FSSPEC_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


def environment(scheme: str) -> tuple[tuple[str, str], ...]:
    """What, besides a :class:`FsSpec`'s options, decides the server a ``scheme`` filesystem made now reaches and
    the credentials it uses there: the environment variables it reads (:data:`_ENVIRONMENT`) and, once fsspec is
    loaded, its configuration for the scheme (``fsspec.config.conf``); empty for a local path. A process that
    changes one of them (``AWS_ENDPOINT_URL``: another server) gets another filesystem, not the first one's."""
    if scheme in ("", "file"):
        return ()
    prefixes = (*_ENVIRONMENT.get(scheme, ()), *_EVERY_SCHEME, f"{scheme.upper()}_")
    found = [(k, v) for k, v in os.environ.items() if k.upper().startswith(prefixes)]
    loaded = sys.modules.get("fsspec.config")  # (read, not imported: a URL pyarrow reads never loads fsspec)
    conf = getattr(loaded, "conf", None)
    if isinstance(conf, dict) and conf.get(scheme):
        found.append((f"fsspec.config.conf[{scheme}]", repr(sorted(conf[scheme].items(), key=repr))))
    return tuple(sorted(found))


@lru_cache(maxsize=16)
def _filesystem(spec: FsSpec, env: tuple[tuple[str, str], ...]):
    """The filesystem of ``spec`` made under the environment ``env`` (:func:`environment`, part of the cache's key;
    the filesystem reads it from ``os.environ`` itself)."""
    import pyarrow.fs as pafs  # optional dependency: only a URL needs it

    if spec.is_local:
        return pafs.LocalFileSystem()
    opts = dict(spec.netloc_opts)
    if spec.scheme == "s3":
        return pafs.S3FileSystem(**_s3_settings(opts))
    namenode = opts.get(hdfs.NAMENODE, "")
    if spec.scheme == "hdfs" and (native := hdfs.libhdfs(pafs, namenode, opts)) is not None:
        return native
    if spec.scheme not in hdfs.SCHEMES:
        with suppress(Exception):  # other schemes pyarrow knows (gs, ...); fsspec for everything else
            return pafs.FileSystem.from_uri(f"{spec.scheme}://x/")[0]
    import fsspec  # optional dependency: the schemes pyarrow has no filesystem for

    # (not fsspec's own instance cache: it keys on arguments only, and this cache is the one that reuses them)
    fs = (hdfs.webhdfs(fsspec, spec.scheme, namenode, opts) if spec.scheme in hdfs.SCHEMES
          else fsspec.filesystem(spec.scheme, skip_instance_cache=True))
    # pyarrow-stubs declare FSSpecHandler's handler methods abstract; pyarrow implements every one
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs))  # type: ignore[abstract]


def forget_listings() -> None:
    """Drops the filesystems made so far, with their listings (an fsspec directory cache): a process that plans read
    after read (the JVM source's kept planner) lists each read's files anew; a forked worker makes its own."""
    _filesystem.cache_clear()


os.register_at_fork(after_in_child=forget_listings)  # (verify's workers: a parent's connections are never theirs)


@dataclass(frozen=True)
class Entry:
    name: str
    path: str
    is_dir: bool
    size: int
    mtime_ns: int = 0
    inode: int = -1  # a local file's, from :func:`info` (-1: not known)

    @property
    def stamp(self) -> FileStamp:
        """The file as listed (:class:`FileStamp`)."""
        return FileStamp(self.size, self.mtime_ns // 1_000_000, self.inode)


class UrlStat(NamedTuple):
    """What :meth:`UrlPath.stat` knows of a file (the fields of ``os.stat_result`` a reader uses)."""

    st_mode: int
    st_size: int
    st_mtime_ns: int


def is_url(path: object) -> bool:
    """``path`` names a file through a filesystem other than the local one (``s3://...``, a :class:`UrlPath`)."""
    if isinstance(path, UrlPath):
        return True
    return isinstance(path, str) and "://" in path and local_path(path) is path


def absolute(path: str | os.PathLike | UrlPath) -> Path:
    """A directory's identity: a local path made absolute, a URL as it is (:func:`as_path`)."""
    return as_path(path) if is_url(path) else Path(os.path.abspath(local_path(cast(str, path))))


def task_path(path: str | os.PathLike | UrlPath) -> str | UrlPath:
    """A path as a worker process's task names it: a local path as a string, a URL as itself (with its options)."""
    return cast(UrlPath, path) if is_url(path) else str(local_path(cast(str, path)))


def as_path(path: str | os.PathLike | UrlPath) -> Path:
    """``path`` as the partition model takes it: a :class:`~pathlib.Path`, or for a URL a :class:`UrlPath` (which
    answers ``name``, ``parent``, ``/`` and ``str()`` as a Path does)."""
    return cast(Path, UrlPath.of(path)) if is_url(path) else Path(local_path(cast(str, path)))  # type: ignore[arg-type]


class UrlPath:
    """A file or directory under a URL, with the part of :class:`pathlib.Path`'s API the partition model uses
    (``name``, ``parent``, ``/``, ``with_name``, ``stem``, ``suffix``); ``str()`` is the URL. Reads go through
    the seam (:func:`info`, :func:`listdir`, :func:`read_bytes`, :class:`SegmentFile`) with :attr:`spec`."""

    __slots__ = ("spec", "fspath")

    def __init__(self, spec: FsSpec, fspath: str):
        self.spec = spec
        self.fspath = fspath.rstrip("/") or fspath

    @classmethod
    def of(cls, path: str | UrlPath, options: Mapping[str, str] | None = None) -> UrlPath:
        if isinstance(path, UrlPath):
            return path
        spec, fspath = split_uri(path, options)
        return cls(spec, fspath)

    @property
    def name(self) -> str:
        return self.fspath.rsplit("/", 1)[-1]

    @property
    def parent(self) -> UrlPath:
        return UrlPath(self.spec, self.fspath.rsplit("/", 1)[0]) if "/" in self.fspath else self

    @property
    def stem(self) -> str:
        return self.name.rsplit(".", 1)[0] if "." in self.name else self.name

    @property
    def suffix(self) -> str:
        return "." + self.name.rsplit(".", 1)[1] if "." in self.name else ""

    def __truediv__(self, name: str) -> UrlPath:
        return UrlPath(self.spec, f"{self.fspath}/{name}")

    def with_name(self, name: str) -> UrlPath:
        return self.parent / name

    def is_dir(self) -> bool:
        e = info(self.spec, self.fspath)
        return e is not None and e.is_dir

    def is_file(self) -> bool:
        e = info(self.spec, self.fspath)
        return e is not None and not e.is_dir

    def exists(self) -> bool:
        return info(self.spec, self.fspath) is not None

    def is_symlink(self) -> bool:
        return False  # (an object store or remote filesystem has no symbolic links)

    def resolve(self) -> UrlPath:
        return self  # a URL is its own absolute, resolved name

    def iterdir(self) -> Iterator[UrlPath]:
        return iter([self / e.name for e in listdir(self.spec, self.fspath)])

    def stat(self) -> UrlStat:
        """Its kind, size and modification time, or :class:`FileNotFoundError` as :meth:`Path.stat`."""
        e = info(self.spec, self.fspath)
        if e is None:
            raise FileNotFoundError(2, "No such file or directory", str(self))
        return UrlStat(stat.S_IFDIR if e.is_dir else stat.S_IFREG, e.size, e.mtime_ns)

    def __str__(self) -> str:
        return display(self.spec, self.fspath)

    def __repr__(self) -> str:
        return f"UrlPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UrlPath) and (self.spec, self.fspath) == (other.spec, other.fspath)

    def __lt__(self, other: UrlPath) -> bool:
        return self.fspath < other.fspath

    def __hash__(self) -> int:
        return hash((self.spec, self.fspath))


def info(spec: FsSpec, path: str) -> Entry | None:
    if spec.is_local:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return Entry(os.path.basename(path), path, stat.S_ISDIR(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino)
    import pyarrow.fs as pafs  # optional dependency: only a URL needs it

    fi = spec.filesystem().get_file_info(path)
    if fi.type == pafs.FileType.NotFound:
        return None
    return _entry(fi, pafs)


def _entry(fi, pafs, path: str | None = None) -> Entry:
    """A ``pyarrow.fs.FileInfo`` as an :class:`Entry` named ``path`` (a listing's: WebHDFS drops the namenode)."""
    return Entry(fi.base_name, path or fi.path, fi.type == pafs.FileType.Directory, fi.size or 0, fi.mtime_ns or 0)


def listdir(spec: FsSpec, path: str) -> list[Entry]:
    if spec.is_local:
        out = []
        with os.scandir(path) as it:
            for e in it:
                try:
                    is_dir = e.is_dir()
                    size = 0 if is_dir else e.stat().st_size
                except FileNotFoundError:  # removed while listing
                    continue
                out.append(Entry(e.name, e.path, is_dir, size))
        return out
    import pyarrow.fs as pafs  # optional dependency: only a URL needs it

    infos = spec.filesystem().get_file_info(pafs.FileSelector(path, recursive=False))
    own = "/" + path.split("://", 1)[-1].strip("/")  # (fsspec's find lists a directory in itself: WebHDFS's as
    return [_entry(fi, pafs, f"{path.rstrip('/')}/{fi.base_name}") for fi in infos  # /dir for hdfs://namenode/dir)
            if not own.endswith("/" + fi.path.split("://", 1)[-1].strip("/"))]


def read_bytes(spec: FsSpec, path: str, limit: int) -> bytes:
    """A small whole file (an index), refusing more than ``limit`` bytes."""
    if spec.is_local:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    else:
        with spec.filesystem().open_input_file(path) as f:
            data = f.read(limit + 1)
    if len(data) > limit:
        raise LogDirError(f"file is larger than {limit} bytes", display(spec, path))
    return bytes(data)


def fetch(spec: FsSpec, path: str, dst: str | os.PathLike) -> None:
    """Copy a file to the local path ``dst`` in windows of :data:`REMOTE_WINDOW` bytes (for a local reader)."""
    with open_input(path if spec.is_local else UrlPath(spec, path)) as src, open(dst, "wb") as out:
        while chunk := src.read(REMOTE_WINDOW):
            out.write(chunk)


class SegmentFile(Closing):
    """Read access to one ``.log`` file: ``windows(start, end)`` yields ``(memoryview, position_of_view[0])``.
    Local files are memory-mapped (one zero-copy window); remote files are read in bounded windows, so memory
    stays bounded by the window (or the largest batch), never by the file."""

    def __init__(self, spec: FsSpec, path: str):
        self.spec = spec
        self.path = path
        self.name = display(spec, path)
        self._mm: mmap.mmap | None = None
        self._remote = None
        stamp: FileStamp | None = None
        if spec.is_local:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                stamp = local_stamp(st)
                self.size = st.st_size
                if self.size:
                    self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        else:
            self._remote = spec.filesystem().open_input_file(path)
            self.size = self._remote.size()
        self._stamp = stamp

    @property
    def stamp(self) -> FileStamp:
        """The file opened (:class:`FileStamp`): a local one's ``fstat``, a URL's as its filesystem lists it."""
        if self._stamp is None:
            e = info(self.spec, self.path)
            if e is None:
                raise FileNotFoundError(f"{self.name}: deleted after it was opened")
            self._stamp = e.stamp
        return self._stamp

    def view(self, start: int, length: int) -> memoryview:
        """``length`` bytes at ``start`` (fewer at the end of the file)."""
        length = max(0, min(length, self.size - start))
        if self._mm is not None:
            return memoryview(self._mm)[start:start + length]
        if self._remote is None or length == 0:
            return memoryview(b"")
        return memoryview(self._remote.read_at(length, start))

    @property
    def is_mapped(self) -> bool:
        return self._mm is not None

    def close(self) -> None:
        if self._mm is not None:
            unmap(self._mm.close)
            self._mm = None
        if self._remote is not None:
            self._remote.close()
            self._remote = None


def open_input(path: str | os.PathLike | UrlPath) -> BinaryIO:
    """A file opened for streaming reads (``read(n)``): a local one by ``open``, one under a URL through its
    filesystem (read as it is consumed, never whole)."""
    if not is_url(path):
        return open(cast(str, path), "rb")
    url = UrlPath.of(path)  # type: ignore[arg-type]
    return cast(BinaryIO, url.spec.filesystem().open_input_stream(url.fspath))


def url_files(root: UrlPath, prefix: str = "") -> Iterator[tuple[str, UrlPath]]:
    """``(name relative to root, file)`` of every file under the directory ``root`` (recursive)."""
    for e in listdir(root.spec, root.fspath):
        if e.is_dir:
            yield from url_files(root / e.name, f"{prefix}{e.name}/")
        else:
            yield prefix + e.name, root / e.name


def iter_files(spec: FsSpec, root: str) -> Iterator[Entry]:
    """Every regular file under ``root`` (recursive)."""
    for e in listdir(spec, root):
        if e.is_dir:
            yield from iter_files(spec, e.path)
        else:
            yield e
