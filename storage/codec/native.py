"""The compiled core (``storage/native``, Rust + PyO3, built as ``kafkalog.storage._native``): loaded here, once,
at the bottom of storage, and nowhere else.

``core`` is the extension module, or ``None``: when ``pip install`` found no Rust toolchain, or when
``KAFKALOG_NATIVE=0`` is set (the pure-Python code, which stays the reference, then does all the work).
``REASON`` says why it is off. Callers never need the core: every native function has a Python twin that gives
the same results, and the native decoders hand anything unusual back to the Python careful decoders, so errors
(byte position and reason) are the same either way.

Which code decodes is explicit: :func:`active` is the :class:`Backend` in force (the core where it is built), and
``with backend("python"):`` runs a block on the pure-Python reference (the record decoders and the Python codec
packages; what ``KAFKALOG_NATIVE=0`` runs), ``with backend("python-codecs"):`` on the core's record decoders
over the Python codec packages' decompression. The choice is a context variable, so it holds for the block in
this thread (and the tasks it awaits) only. Compression always goes through the core when it is built: its bytes
are Kafka's (``codec.compression``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from types import ModuleType

from kafkalog.storage.errors import ConfigError

core: ModuleType | None = None
REASON: str | None = None

if os.environ.get("KAFKALOG_NATIVE", "1").strip().lower() in ("0", "false", "no", "off"):
    REASON = "disabled by KAFKALOG_NATIVE=0"
else:
    try:
        from kafkalog.storage import _native as core  # type: ignore[attr-defined,no-redef]  # optional extension, no stubs
    except ImportError as e:  # not built (no Rust toolchain at install time)
        REASON = f"not built ({e})"


@dataclass(frozen=True, slots=True)
class Backend:
    """What decodes records (``records``) and what decompresses (``codecs``): the compiled core, or ``None``
    for the pure-Python reference."""

    name: str
    records: ModuleType | None
    codecs: ModuleType | None


BACKENDS = {
    "native": Backend("native", core, core),
    "python": Backend("python", None, None),
    "python-codecs": Backend("python-codecs", core, None),
}
_ACTIVE: ContextVar[Backend] = ContextVar("kafkalog_backend", default=BACKENDS["native" if core else "python"])


def active() -> Backend:
    """The backend in force (the core where it is built and enabled, else the Python reference)."""
    return _ACTIVE.get()


@contextlib.contextmanager
def backend(name: str) -> Iterator[Backend]:
    """For the block, decode with the backend ``name`` (``native``, ``python`` or ``python-codecs``). Without the
    core, ``native`` and ``python-codecs`` are the Python reference too."""
    try:
        chosen = BACKENDS[name]
    except KeyError:
        raise ConfigError(f"unknown backend {name!r} (one of {', '.join(BACKENDS)})") from None
    token = _ACTIVE.set(chosen)
    try:
        yield chosen
    finally:
        _ACTIVE.reset(token)


def describe() -> str:
    """One line for ``kafkalog --version``."""
    if core is not None:
        return core.build_info()
    return REASON or "off"
