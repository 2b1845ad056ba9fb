"""kafkalog: read, verify, repair, compact and migrate Apache Kafka broker log directories offline.

Everything a program needs is here: ``kafkalog.open(paths)`` opens the log dirs of one broker (one data dir,
several: JBOD, or partition dirs) as a :class:`LogDirs`; its :class:`Partition` objects have Kafka's offsets,
configuration, segments, batches and records, and Arrow output; reports come back as data and every change as
a :class:`Plan` that :func:`apply` executes. ``docs/api.md`` lists every name.

>>> import kafkalog
>>> with kafkalog.open("fixtures/kafka-4.3.1-kraft/data") as dirs:
...     p = dirs.partition("codec-gzip", 0)
...     (p.log_start_offset, p.log_end_offset)
(0, 60)

The implementation is :mod:`kafkalog.storage` (the library), the command line :mod:`kafkalog.tools`
(``kafkalog`` or ``python -m kafkalog``), the differential-test harness :mod:`kafkalog.compat`. This package's
own files live in ``tools/package/`` of the repository (``package-dir`` in ``pyproject.toml``). Importing it
loads none of them: each name below is imported on first use (``kafkalog --version`` stays fast).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkalog.storage.api import DEFAULT_ARROW_ROWS, LogDirs, Offsets, Partition, apply, open
    from kafkalog.storage.config.log_config import LogConfig
    from kafkalog.storage.config.resolver import ConfigResolver
    from kafkalog.storage.engine.convert import ConvertOptions
    from kafkalog.storage.engine.migrate import MigrateOptions
    from kafkalog.storage.engine.plan import ApplyResult, Loss, Plan, PlanError
    from kafkalog.storage.errors import (
        ConfigError,
        CorruptIndexError,
        CorruptRecordError,
        KafkaLogError,
        LockedError,
        LogDirError,
        MissingDependencyError,
    )
    from kafkalog.storage.files.findings import Finding
    from kafkalog.storage.files.segment import Segment
    from kafkalog.storage.log.datadir import DataDir
    from kafkalog.storage.log.offset_spec import OffsetSpec, parse_offset_spec
    from kafkalog.storage.log.partition import PartitionLog
    from kafkalog.storage.log.paths import PathError
    from kafkalog.storage.records import Record
    from kafkalog.storage.remote.layout import open_remote_store
    from kafkalog.storage.remote.rehydrate import RehydrateOptions
    from kafkalog.storage.reports.diff import DiffResult
    from kafkalog.storage.reports.doctor import Diagnosis, Problem
    from kafkalog.storage.reports.groups import GroupsReport
    from kafkalog.storage.reports.transactions import TransactionReport
    from kafkalog.storage.reports.verify import VerifyReport

# public name -> the module that defines it (imported on first access: PEP 562)
_EXPORTS: dict[str, str] = {
    # entry points
    "open": "kafkalog.storage.api",
    "apply": "kafkalog.storage.api",
    "LogDirs": "kafkalog.storage.api",
    "Partition": "kafkalog.storage.api",
    "Offsets": "kafkalog.storage.api",
    "DEFAULT_ARROW_ROWS": "kafkalog.storage.api",
    # what the entry points return
    "Plan": "kafkalog.storage.engine.plan",
    "ApplyResult": "kafkalog.storage.engine.plan",
    "Loss": "kafkalog.storage.engine.plan",
    "ConvertOptions": "kafkalog.storage.engine.convert",
    "MigrateOptions": "kafkalog.storage.engine.migrate",
    "RehydrateOptions": "kafkalog.storage.remote.rehydrate",
    "open_remote_store": "kafkalog.storage.remote.layout",
    "OffsetSpec": "kafkalog.storage.log.offset_spec",
    "parse_offset_spec": "kafkalog.storage.log.offset_spec",
    "LogConfig": "kafkalog.storage.config.log_config",
    "ConfigResolver": "kafkalog.storage.config.resolver",
    "Segment": "kafkalog.storage.files.segment",
    "PartitionLog": "kafkalog.storage.log.partition",
    "DataDir": "kafkalog.storage.log.datadir",
    "Record": "kafkalog.storage.records",
    "Finding": "kafkalog.storage.files.findings",
    "VerifyReport": "kafkalog.storage.reports.verify",
    "Diagnosis": "kafkalog.storage.reports.doctor",
    "DiffResult": "kafkalog.storage.reports.diff",
    "Problem": "kafkalog.storage.reports.doctor",
    "GroupsReport": "kafkalog.storage.reports.groups",
    "TransactionReport": "kafkalog.storage.reports.transactions",
    # errors (every one a KafkaLogError: the command line prints it as one line and exits 1)
    "KafkaLogError": "kafkalog.storage.errors",
    "LogDirError": "kafkalog.storage.errors",
    "PathError": "kafkalog.storage.log.paths",
    "LockedError": "kafkalog.storage.errors",
    "ConfigError": "kafkalog.storage.errors",
    "CorruptRecordError": "kafkalog.storage.errors",
    "CorruptIndexError": "kafkalog.storage.errors",
    "MissingDependencyError": "kafkalog.storage.errors",
    "PlanError": "kafkalog.storage.engine.plan",
}


def _version() -> str:
    """The installed distribution's version; from a source checkout that is not installed, ``pyproject.toml``'s."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kafkalog")
    except PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"  # (tools/package/__init__.py)
    try:
        import tomllib

        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        if project.get("name") == "kafkalog" and project.get("version"):
            return str(project["version"])
    except (OSError, ValueError):
        pass
    return "0+unknown"


__version__ = _version()

__all__ = [
    "__version__",
    "open", "apply", "LogDirs", "Partition", "Offsets", "DEFAULT_ARROW_ROWS",
    "Plan", "ApplyResult", "Loss", "ConvertOptions", "MigrateOptions", "RehydrateOptions", "open_remote_store",
    "OffsetSpec", "parse_offset_spec",
    "LogConfig", "ConfigResolver", "Segment", "PartitionLog", "DataDir", "Record", "Finding", "VerifyReport",
    "Diagnosis", "Problem", "DiffResult", "GroupsReport", "TransactionReport",
    "KafkaLogError", "LogDirError", "PathError", "LockedError", "ConfigError", "CorruptRecordError",
    "CorruptIndexError", "MissingDependencyError", "PlanError",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkalog' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
