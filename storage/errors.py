"""One error hierarchy for kafkalog.storage.

Every error raised while reading bytes from disk is a :class:`KafkaLogError` carrying the file (when known),
the byte position and a reason, so tools can print one precise line and choose an exit code.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class KafkaLogError(Exception):
    """Base class of every error kafkalog raises on purpose."""

    def __init__(self, reason: str, path: str | None = None, position: int | None = None):
        self.reason = reason
        self.path = path
        self.position = position
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.position is not None:
            where.append(f"byte {self.position}")
        prefix = ": ".join(where)
        return f"{prefix}: {self.reason}" if prefix else self.reason

    def at(self, path: str | None = None, position_base: int = 0) -> KafkaLogError:
        """Return this error with a file path and/or a base added to its position (for nested buffers)."""
        if path is not None and self.path is None:
            self.path = path
        if self.position is not None:
            self.position += position_base
        elif position_base:
            self.position = position_base
        self.args = (self._render(),)
        return self

    def __str__(self) -> str:  # keep str() in sync after .at()
        return self._render()


class CorruptRecordError(KafkaLogError):
    """Bytes that are not a valid record batch / message / record (Kafka's CorruptRecordException and
    InvalidRecordException)."""


class CompressionError(CorruptRecordError):
    """A compressed payload that cannot be decompressed, or a decompression bomb."""


class CorruptIndexError(KafkaLogError):
    """An index file (.index, .timeindex, .txnindex) that fails Kafka's sanity checks."""


class CorruptCheckpointError(KafkaLogError):
    """A checkpoint, snapshot or metadata file that cannot be parsed."""


class LogDirError(KafkaLogError):
    """A data dir or partition dir that cannot be used (bad name, missing files, ...)."""


class LockedError(LogDirError):
    """The data dir's .lock is held by a live process (a running broker)."""


class ConfigError(KafkaLogError):
    """A configuration value that Kafka would reject."""


class OffsetOverflowError(KafkaLogError):
    """A batch whose offsets do not fit its segment's int32 relative range (``LogSegmentOffsetOverflowException``,
    KAFKA-6264): the broker splits the segment and loads the partition again."""

    def __init__(self, reason: str, path: str | None = None, position: int | None = None, *,
                 base_offset: int = 0):
        super().__init__(reason, path, position)
        self.base_offset = base_offset


class MissingDependencyError(KafkaLogError):
    """An optional package a feature needs is not installed (``pyarrow`` for Arrow and Parquet, ``pyspark`` for
    Spark...): the reason says what to install. ``module`` is the missing module, ``extra`` kafkalog's extra
    that installs it."""

    def __init__(self, module: str, extra: str, feature: str | None = None):
        self.module, self.extra = module, extra
        what = f"{feature} needs" if feature else "needs"
        super().__init__(f"{what} the optional package {module!r}, which is not installed: "
                         f"pip install 'kafkalog[{extra}]'")


#: the optional packages kafkalog imports, by top-level module, with the extra of pyproject.toml that installs
#: each (tests/storage/test_cli_conventions.py holds this table to pyproject.toml)
OPTIONAL_PACKAGES: dict[str, str] = {"pyarrow": "spark", "pyspark": "spark", "fsspec": "spark", "s3fs": "spark",
                                     "duckdb": "sql"}


def require(module: str, extra: str | None = None, feature: str | None = None) -> ModuleType:
    """``import module`` for an optional dependency: the module, or :class:`MissingDependencyError` naming the
    ``pip install 'kafkalog[extra]'`` that installs it (``extra`` defaults to the package's in
    :data:`OPTIONAL_PACKAGES`). Every optional import goes through here, so a missing package is one clear line
    (exit 1), never an internal error."""
    try:
        return importlib.import_module(module)
    except ImportError as e:  # ModuleNotFoundError, or a module set to None in sys.modules
        top = (getattr(e, "name", None) or module).split(".")[0]
        if top not in OPTIONAL_PACKAGES and top != module.split(".")[0]:
            raise  # an import error inside the package itself, not a missing one
        raise MissingDependencyError(top, extra or OPTIONAL_PACKAGES.get(top, "all"), feature) from None


def missing_dependency(e: ImportError) -> MissingDependencyError | None:
    """The :class:`MissingDependencyError` an ``ImportError`` of an optional package stands for, else None (the
    CLI's safety net for an optional import that did not go through :func:`require`)."""
    top = (getattr(e, "name", None) or "").split(".")[0]
    extra = OPTIONAL_PACKAGES.get(top)
    return None if extra is None else MissingDependencyError(top, extra)
