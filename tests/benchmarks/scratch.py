"""The scratch dir a benchmark generates its data in."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def scratch_dir(prefix: str, *, keep: bool, path: str | None = None) -> Iterator[Path]:
    """``path``, or a new temporary dir named ``prefix...``; removed afterwards unless ``keep`` (``--keep``)."""
    root = Path(path or tempfile.mkdtemp(prefix=prefix))
    try:
        yield root
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
