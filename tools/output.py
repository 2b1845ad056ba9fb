"""Output helpers shared by the ``kafkalog`` commands: JSON Lines, payload rendering, human tables and a
progress bar on stderr.

* :class:`JsonLines` writes one compact JSON object per line (bytes become base64 unless rendered first).
* :func:`render_bytes` renders a key/value/header as ``base64`` (default for JSON), ``utf8`` or ``hex``;
  ``None`` stays ``None``. In JSON, ``utf8`` is exact (undecodable bytes become ``\\udcNN`` escapes that
  ``append --payload utf8`` reverses); for people, undecodable bytes print as ``\\xNN``.
* :func:`render_table` prints aligned columns for people.
* :func:`progress` is a context manager yielding an object with ``advance(n)``: a rich progress bar on stderr
  when stderr is a terminal (and not disabled), otherwise a no-op, so pipes and CI logs stay clean.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any

PAYLOAD_FORMATS = ("base64", "utf8", "hex")
_SURROGATE = re.compile("[\ud800-\udfff]")


def render_bytes(data: bytes | bytearray | memoryview | None, fmt: str = "base64", *,
                 exact: bool = False) -> str | None:
    """``exact`` (JSON output): ``utf8`` keeps undecodable bytes as lone surrogates (``surrogateescape``; JSON
    writes them ``\\udcNN``), which ``append --payload utf8`` turns back into the same bytes; for people they
    print ``\\xNN``."""
    if data is None:
        return None
    if fmt == "base64":
        return base64.b64encode(data).decode("ascii")
    if fmt == "utf8":
        return bytes(data).decode("utf-8", "surrogateescape" if exact else "backslashreplace")
    if fmt == "hex":
        return binascii.hexlify(data).decode("ascii")
    raise ValueError(f"unknown payload format {fmt!r} (one of {', '.join(PAYLOAD_FORMATS)})")


def render_headers(headers: Iterable[tuple[str, bytes | None]], fmt: str = "base64", *,
                   exact: bool = False) -> list[dict]:
    return [{"key": k, "value": render_bytes(v, fmt, exact=exact)} for k, v in headers]


def _default(o: Any):
    if isinstance(o, (bytes, bytearray, memoryview)):
        return base64.b64encode(o).decode("ascii")
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


class JsonLines:
    """Write objects as JSON Lines to ``stream`` (stdout by default)."""

    def __init__(self, stream: IO[str] | None = None):
        self.stream = stream if stream is not None else sys.stdout

    @staticmethod
    def encode(obj: Any) -> str:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=_default)
        if _SURROGATE.search(text):  # undecodable bytes kept exactly: written as \udcNN escapes, valid UTF-8
            text = json.dumps(obj, separators=(",", ":"), default=_default)
        return text

    def write(self, obj: Any) -> None:
        self.stream.write(self.encode(obj) + "\n")

    def write_streamed(self, obj: dict, key: str, items: Iterable[Any], tail: Callable[[], dict]) -> None:
        """Write ``obj`` with ``key`` holding the array of ``items``, written as they come (one item in memory
        at a time), followed by the keys of ``tail()`` (asked for once the items are written)."""
        head = self.encode(obj)
        write = self.stream.write
        write(head[:-1] + ("," if len(head) > 2 else "") + json.dumps(key) + ":[")
        first = True
        for item in items:
            write(("" if first else ",") + self.encode(item))
            first = False
        rest = self.encode(tail())
        write("]" + ("," + rest[1:] if len(rest) > 2 else "}") + "\n")

    def write_all(self, objs: Iterable[Any]) -> None:
        for o in objs:
            self.write(o)


def render_table(rows: Sequence[dict], columns: Sequence[str], stream: IO[str] | None = None,
                 headers: Sequence[str] | None = None) -> None:
    """Print ``rows`` as aligned columns (``None`` prints as ``-``; numbers are right-aligned)."""
    out = stream if stream is not None else sys.stdout
    titles = list(headers) if headers is not None else list(columns)
    cells = [["-" if r.get(c) is None else str(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(t)] + [len(row[i]) for row in cells]) for i, t in enumerate(titles)]
    numeric = [all(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool) or r.get(c) is None
                   for r in rows) for c in columns]
    out.write("  ".join(t.ljust(w) for t, w in zip(titles, widths, strict=True)).rstrip() + "\n")
    for row in cells:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(row, widths, numeric, strict=True)]
        out.write("  ".join(parts).rstrip() + "\n")


class _NoProgress:
    def advance(self, n: float = 1) -> None:
        pass

    def update(self, **kwargs: Any) -> None:
        pass


class _RichProgress:
    def __init__(self, progress, task):
        self._p = progress
        self._t = task

    def advance(self, n: float = 1) -> None:
        self._p.advance(self._t, n)

    def update(self, **kwargs: Any) -> None:
        self._p.update(self._t, **kwargs)


@contextlib.contextmanager
def progress(total: float | None, description: str = "", *, enabled: bool | None = None,
             unit_bytes: bool = True) -> Iterator[_NoProgress | _RichProgress]:
    """A progress bar on stderr, shown only when stderr is a terminal (``enabled=None``) or when forced."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield _NoProgress()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    cols = [TextColumn("{task.description}"), BarColumn()]
    cols += [DownloadColumn(), TransferSpeedColumn()] if unit_bytes else [MofNCompleteColumn()]
    cols.append(TimeRemainingColumn())
    with Progress(*cols, console=Console(stderr=True), transient=True) as p:
        yield _RichProgress(p, p.add_task(description, total=total))


def topic_list(text: str) -> set[str]:
    """``--topics a,b``: the set of names (a name that matches no partition is an error when the command runs)."""
    names = {t.strip() for t in text.split(",") if t.strip()}
    if not names:
        import argparse

        raise argparse.ArgumentTypeError("give at least one topic name")
    return names


def add_topics_argument(parser, what: str = "") -> None:
    """The common ``--topics`` option (``args.topics``: a set of names or None for all)."""
    parser.add_argument("--topics", type=topic_list, default=None, metavar="T1,T2",
                        help=f"only these topics{what} (comma-separated; default: all). A name with no partition "
                        "here is an error that lists the topics there are")


def add_output_arguments(parser, *, payload: bool = False) -> None:
    """The common ``--json`` (and ``--payload``) options."""
    parser.add_argument("--json", action="store_true", help="print JSON Lines (one object per line) for machines")
    if payload:
        parser.add_argument("--payload", choices=PAYLOAD_FORMATS, default=None,
                            help="how keys, values and header values are rendered: base64 (JSON default), "
                            "utf8 (human default; undecodable bytes print as \\xNN, and in JSON as \\udcNN "
                            "escapes that `append --payload utf8` turns back into the same bytes) or hex")


def _int_at_least(text: str, minimum: int) -> int:
    import argparse

    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < minimum:
        raise argparse.ArgumentTypeError(f"must be >= {minimum}: {v}")
    return v


def positive_int(text: str) -> int:
    """argparse type for counts such as ``--workers``: an integer >= 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type for sizes and positions: an integer >= 0."""
    return _int_at_least(text, 0)
