"""kafkalog: read, verify, repair, compact and migrate Apache Kafka broker log directories offline.

The library is :mod:`kafkalog.storage`, the command line :mod:`kafkalog.tools` (``kafkalog`` or
``python -m kafkalog``), the differential-test harness :mod:`kafkalog.compat`. This package's own files live in
``tools/package/`` of the repository (``package-dir`` in ``pyproject.toml``): the top level holds only the
``storage/``, ``tools/`` and ``compat/`` folders.
"""

from __future__ import annotations

from pathlib import Path


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

__all__ = ["__version__"]
