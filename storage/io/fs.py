"""The one filesystem seam at the bottom of storage: where the bytes come from.

Local paths are memory-mapped; ``s3://``, ``gs://``, ``hdfs://`` and a tiered store's URL are read in bounded
windows (:data:`REMOTE_WINDOW`) through ``pyarrow.fs`` or fsspec. Every reader that may meet a URL (the Spark
source and stream, tiered storage in :mod:`kafkalog.storage.remote`) lists and opens files here. pyarrow and
fsspec are optional dependencies: they are imported only when a URL is read.

Filesystems: local paths (mmap) or any ``pyarrow.fs`` / fsspec filesystem: ``s3://`` (pyarrow),
``gs://`` and ``hdfs://`` (pyarrow, where it was built with them), and every other scheme fsspec has a filesystem
for once its package is installed (``abfs://`` with adlfs, ``gs://`` with gcsfs, ...).

Options understood (Spark option names, case-insensitive): ``s3.endpoint`` (e.g. ``http://127.0.0.1:5000``),
``s3.accessKey``, ``s3.secretKey``, ``s3.region``, ``s3.anonymous``. Without them pyarrow's usual AWS
environment variables and credential chain apply (``AWS_ENDPOINT_URL`` is honoured too).
"""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlparse

from kafkalog.storage.errors import LogDirError

#: remote reads come in windows of this size (a batch larger than this gets a window of its own size)
REMOTE_WINDOW = 16 * 1024 * 1024


@dataclass(frozen=True)
class FsSpec:
    """A picklable description of a filesystem (shipped to Spark workers inside input partitions)."""

    scheme: str  # "" for local
    netloc_opts: tuple[tuple[str, str], ...] = ()

    @property
    def is_local(self) -> bool:
        return self.scheme in ("", "file")

    def filesystem(self):
        return _filesystem(self)


def fs_options(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k.lower(), str(v)) for k, v in options.items() if k.lower().startswith("s3.")))


def split_uri(path: str, options: Mapping[str, str] | None = None) -> tuple[FsSpec, str]:
    """``(filesystem spec, path inside that filesystem)`` for a local path or a URI."""
    if "://" not in path:
        return FsSpec(""), os.path.abspath(path)
    u = urlparse(path)
    scheme = u.scheme.lower()
    if scheme == "file":
        return FsSpec(""), os.path.abspath(u.path)
    if scheme in ("s3", "s3a", "s3n"):
        return FsSpec("s3", fs_options(options or {})), (u.netloc + u.path).rstrip("/")
    return FsSpec(scheme, fs_options(options or {})), path


def display(spec: FsSpec, fspath: str) -> str:
    """The name a file is reported under (``segment`` column, error messages)."""
    if spec.is_local:
        return fspath
    if spec.scheme == "s3":
        return f"s3://{fspath}"
    return fspath if "://" in fspath else f"{spec.scheme}://{fspath}"


@lru_cache(maxsize=16)
def _filesystem(spec: FsSpec):
    import pyarrow.fs as pafs  # optional dependency: only a URL needs it

    if spec.is_local:
        return pafs.LocalFileSystem()
    opts = dict(spec.netloc_opts)
    if spec.scheme == "s3":
        kw: dict = {}
        endpoint = opts.get("s3.endpoint") or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get(
            "AWS_ENDPOINT_URL")
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
        return pafs.S3FileSystem(**kw)
    try:  # other schemes pyarrow knows (gs, hdfs, ...)
        fs, _ = pafs.FileSystem.from_uri(f"{spec.scheme}://x/")
        return fs
    except Exception:  # noqa: BLE001 - fall back to fsspec for everything else
        import fsspec  # optional dependency: the schemes pyarrow has no filesystem for
        from pyarrow.fs import FSSpecHandler, PyFileSystem  # optional dependency (as above)

        # pyarrow-stubs declare FSSpecHandler's handler methods abstract; pyarrow implements every one
        return PyFileSystem(FSSpecHandler(fsspec.filesystem(spec.scheme)))  # type: ignore[abstract]


@dataclass(frozen=True)
class Entry:
    name: str
    path: str
    is_dir: bool
    size: int


def info(spec: FsSpec, path: str) -> Entry | None:
    if spec.is_local:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return Entry(os.path.basename(path), path, stat.S_ISDIR(st.st_mode), st.st_size)
    import pyarrow.fs as pafs  # optional dependency: only a URL needs it

    fi = spec.filesystem().get_file_info(path)
    if fi.type == pafs.FileType.NotFound:
        return None
    return Entry(fi.base_name, fi.path, fi.type == pafs.FileType.Directory, fi.size or 0)


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
    return [Entry(fi.base_name, fi.path, fi.type == pafs.FileType.Directory, fi.size or 0) for fi in infos]


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
    """Copy a file to the local path ``dst`` in windows of :data:`REMOTE_WINDOW` bytes (a remote segment for a
    reader that maps local files)."""
    if spec.is_local:
        with open(path, "rb") as src, open(dst, "wb") as out:
            while chunk := src.read(REMOTE_WINDOW):
                out.write(chunk)
        return
    with spec.filesystem().open_input_stream(path) as src, open(dst, "wb") as out:
        while chunk := src.read(REMOTE_WINDOW):
            out.write(chunk)


class SegmentFile:
    """Read access to one ``.log`` file: ``windows(start, end)`` yields ``(memoryview, position_of_view[0])``.

    Local files are memory-mapped (one zero-copy window); remote files are read in bounded windows, so memory
    stays bounded by the window (or the largest batch), never by the file.
    """

    def __init__(self, spec: FsSpec, path: str):
        self.spec = spec
        self.path = path
        self.name = display(spec, path)
        self._mm: mmap.mmap | None = None
        self._remote = None
        if spec.is_local:
            with open(path, "rb") as f:
                self.size = os.fstat(f.fileno()).st_size
                if self.size:
                    self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        else:
            self._remote = spec.filesystem().open_input_file(path)
            self.size = self._remote.size()

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
            try:
                self._mm.close()
            except BufferError:  # views still alive: the mapping goes when they do
                pass
            self._mm = None
        if self._remote is not None:
            self._remote.close()
            self._remote = None

    def __enter__(self) -> SegmentFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def iter_files(spec: FsSpec, root: str) -> Iterator[Entry]:
    """Every regular file under ``root`` (recursive)."""
    for e in listdir(spec, root):
        if e.is_dir:
            yield from iter_files(spec, e.path)
        else:
            yield e
