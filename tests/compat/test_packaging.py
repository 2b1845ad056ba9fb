"""The wheel holds every code package: each folder of storage/, tools/ and compat/ with an ``__init__.py`` is in
pyproject.toml's ``packages`` under its ``kafkalog.`` name (a new package missing there installs from a checkout
but not from the wheel)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_is_in_the_wheel():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = setuptools["package-dir"]
    listed = set(setuptools["packages"])
    found = set()
    for name, folder in dirs.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            if any(part.startswith((".", "_")) or part in {"target", "fuzz", "native"} for part in rel.parts):
                continue
            sub = ".".join((name, *rel.parts)) if rel.parts else name
            # a folder that is itself another package-dir entry (tools/package -> kafkalog) is that entry
            if str((base / rel).relative_to(ROOT)) in dirs.values() and (base / rel) != base:
                continue
            found.add(sub)
    assert found - listed == set(), f"packages missing from pyproject.toml: {sorted(found - listed)}"
