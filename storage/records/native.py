"""The compiled record core (``storage/native``, Rust + PyO3), when it was built and is enabled.

``core`` is the extension module, or ``None``: when ``pip install`` found no Rust toolchain, or when
``KAFKALOG_NATIVE=0`` is set (the pure-Python decoder, which stays the reference, then does all the work).
``REASON`` says why it is off. Callers never need the core: every native function has a Python twin that
gives the same results, and the native decoder hands anything unusual back to the Python careful decoder, so
errors (byte position and reason) are the same either way.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from types import ModuleType

core: ModuleType | None = None
REASON: str | None = None

if os.environ.get("KAFKALOG_NATIVE", "1").strip().lower() in ("0", "false", "no", "off"):
    REASON = "disabled by KAFKALOG_NATIVE=0"
else:
    try:
        from .. import _native as core  # type: ignore[attr-defined,no-redef]  # optional extension, no stubs
    except ImportError as e:  # not built (no Rust toolchain at install time)
        REASON = f"not built ({e})"


def describe() -> str:
    """One line for ``kafkalog --version``."""
    if core is not None:
        return core.build_info()
    return REASON or "off"


@contextlib.contextmanager
def python_reference() -> Iterator[None]:
    """For the block, no native code at all: the pure-Python record decoder and the Python codec packages (what
    ``KAFKALOG_NATIVE=0`` runs), the reference the core is tested and measured against."""
    from ..codec.compression import python_decompression
    from . import batch as batch_mod
    from .record import PyRecord

    saved = batch_mod._native, batch_mod.Record
    batch_mod._native, batch_mod.Record = None, PyRecord  # type: ignore[misc]  # swapped back below
    try:
        with python_decompression():
            yield
    finally:
        batch_mod._native, batch_mod.Record = saved  # type: ignore[misc]
