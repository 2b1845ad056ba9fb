"""The scratch dir a benchmark generates its data in."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def scratch_dir(prefix: str, *, keep: bool, path: str | None = None) -> Iterator[Path]:
    """``path`` (new or empty: a benchmark generating into a dir that holds data would append to it, and measure
    other records than it counts), or a new temporary dir named ``prefix...``; removed afterwards unless ``keep``
    (``--keep``)."""
    root = Path(path or tempfile.mkdtemp(prefix=prefix))
    if path and root.is_dir() and any(root.iterdir()):
        raise SystemExit(f"{root}: not empty; give a new or empty --dir (generating into it would append to the "
                         "data already there)")
    try:
        yield root
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
