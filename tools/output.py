"""Output helpers shared by the ``kafkalog`` commands: JSON Lines, payload rendering, human tables and a
progress bar on stderr.

* :class:`JsonLines` writes one compact JSON object per line (bytes become base64 unless rendered first).
* :func:`render_bytes` renders a key/value/header as ``base64`` (default for JSON), ``utf8`` or ``hex``;
  ``None`` stays ``None``. In JSON, ``utf8`` is exact (undecodable bytes become ``\\udcNN`` escapes that
  ``append --payload utf8`` reverses); for people, undecodable bytes print as ``\\xNN``.
* :func:`render_table` is the one human table renderer (``rich``; colour only on a terminal, ``NO_COLOR``
  respected); :func:`human_size` and :func:`human_time` render bytes and timestamps for people.
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
from typing import IO, TYPE_CHECKING, Any

from kafkalog.storage.log.paths import data_dir_holding

if TYPE_CHECKING:
    from rich.console import JustifyMethod

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


#: ``--epoch``'s help, shared by every command that shows timestamps to people
EPOCH_HELP = "human output: timestamps as raw epoch milliseconds instead of ISO-8601 UTC"
_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
#: a non-terminal table is rendered this wide: no column is ever shrunk, truncated or wrapped
_WIDE = 1 << 20
#: cell values that get a colour on a terminal
_VALUE_STYLES = {"error": "bold red", "ERROR": "bold red", "FAIL": "bold red", "FAILED": "bold red",
                 "warning": "yellow", "WARNING": "yellow", "info": "cyan", "pass": "green", "PASS": "green",
                 "OK": "green", "skip": "dim", "SKIP": "dim"}


def human_size(n: int | float | None) -> str:
    """Bytes for people: ``512 B``, ``1.4 KiB``, ``1.4 MiB``... (binary units, one decimal); ``None`` is ``-``."""
    if n is None:
        return "-"
    if abs(n) < 1024:
        return f"{int(n)} B"
    v = float(n)
    for unit in _UNITS:
        v /= 1024
        if abs(v) < 1024 or unit == _UNITS[-1]:
            return f"{v:.1f} {unit}"
    raise AssertionError("unreachable")


def human_time(ms: int | None, epoch: bool = False) -> str:
    """A Kafka timestamp (epoch ms) for people: ISO-8601 UTC with milliseconds (``2026-11-26T16:40:00.123Z``),
    or the raw epoch ms with ``epoch``; ``None`` and ``-1`` (no timestamp) are ``-``."""
    if ms is None or ms == -1:
        return "-"
    if epoch:
        return str(ms)
    import datetime as _dt

    try:
        t = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(milliseconds=int(ms))
    except (OverflowError, ValueError):
        return str(ms)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}Z"


def time_format(epoch: bool = False) -> Callable[[Any], str]:
    """A ``formats`` entry of :func:`render_table` for a timestamp column (ISO-8601 UTC is left-aligned)."""
    def fmt(ms: Any) -> str:
        return human_time(ms, epoch)

    fmt.justify = "right" if epoch else "left"  # type: ignore[attr-defined]
    return fmt


def auto_formats(columns: Iterable[str], epoch: bool = False) -> dict[str, Callable[[Any], str]]:
    """``formats`` for :func:`render_table` guessed from column names (rows whose keys are not known in
    advance, e.g. a Spark job's): ``size``/``*bytes*`` as sizes, ``*timestamp*`` as times; list values joined
    with ``; ``."""
    out: dict[str, Callable[[Any], str]] = {}
    for c in columns:
        low = c.lower()
        if low == "size" or "bytes" in low:
            out[c] = lambda v: human_size(v) if _is_number(v) else _cell(v)
        elif "timestamp" in low:
            out[c] = time_format(epoch)
        else:
            out[c] = _cell
    return out


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, (list, tuple)):
        return "; ".join(_cell(x) for x in v) or "-"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_cell(x)}" for k, x in v.items()) or "-"
    return str(v)


def wants_color(stream: IO[str] | None = None) -> bool:
    """Colour and styling for ``stream``: never with ``NO_COLOR`` (non-empty), always with ``FORCE_COLOR``
    (non-empty), else only on a terminal that is not ``TERM=dumb``."""
    import os

    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") in ("dumb", "unknown"):
        return False
    isatty = getattr(stream if stream is not None else sys.stdout, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def console(stream: IO[str] | None = None, *, color: bool | None = None):
    """The ``rich`` console every human table goes through: writes to ``stream`` (stdout by default), styled only
    when :func:`wants_color` says so, never markup/highlighting, as wide as the content (a terminal wraps long
    lines itself; a pipe gets every character)."""
    from rich.console import Console

    out = stream if stream is not None else sys.stdout
    color = wants_color(out) if color is None else color
    return Console(file=out, width=_WIDE, color_system="standard" if color else None, force_terminal=color,
                   no_color=not color, markup=False, highlight=False, emoji=False, soft_wrap=False,
                   legacy_windows=False, _environ={})


def header(column: str) -> str:
    """A column's header, rpk style: ``logStartOffset`` -> ``LOG START OFFSET``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", column).replace("_", " ").replace("-", " ").upper()


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def render_table(rows: Sequence[dict], columns: Sequence[str], stream: IO[str] | None = None,
                 headers: Sequence[str] | None = None, *,
                 formats: dict[str, Callable[[Any], str]] | None = None, color: bool | None = None) -> None:
    """The one human table renderer (every command's tables go through it): ``rows`` as rpk-style columns
    with UPPER-CASE headers, two spaces apart, no box. ``None`` prints as ``-``; a column whose values are all
    numbers (or ``None``) is right-aligned; ``formats`` maps a column to the function that renders its values
    (:func:`human_size`, :func:`human_time`). Colour (bold headers, red errors) only when
    :func:`wants_color`; otherwise plain text without escapes, trailing spaces or wrapped/truncated cells,
    safe for ``grep``/``awk``."""
    from rich.table import Table
    from rich.text import Text

    out = stream if stream is not None else sys.stdout
    color = wants_color(out) if color is None else color
    formats = formats or {}
    titles = [t.upper() for t in headers] if headers is not None else [header(c) for c in columns]
    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=False,
                  header_style="bold" if color else None, expand=False, show_header=True)
    for title, c in zip(titles, columns, strict=True):
        right = all(_is_number(r.get(c)) or r.get(c) is None for r in rows) and any(
            _is_number(r.get(c)) for r in rows)
        justify: JustifyMethod = getattr(formats.get(c), "justify", "right" if right else "left")
        table.add_column(title, justify=justify, no_wrap=True, overflow="crop")
    if not color and len(rows) > PLAIN_TABLE_ROWS:
        _plain_table(rows, columns, titles, [col.justify for col in table.columns], formats, out)
        return
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c)
            text = formats[c](v) if c in formats else ("-" if v is None else str(v))
            cells.append(Text(text, style=_VALUE_STYLES.get(text, "") if color else ""))
        table.add_row(*cells)
    con = console(out, color=color)
    if color:
        con.print(table)
        return
    with con.capture() as cap:
        con.print(table)
    out.write("".join(line.rstrip() + "\n" for line in cap.get().splitlines()))


#: above this many rows a plain (uncoloured) table is laid out directly, with the same text as rich's: rich
#: spends about 1 ms and 10 KB per row (100,000 partitions under ``describe``: minutes and a gigabyte)
PLAIN_TABLE_ROWS = 2000


def _plain_table(rows: Sequence[dict], columns: Sequence[str], titles: Sequence[str], justify: Sequence[str],
                 formats: dict[str, Callable[[Any], str]], out: IO[str]) -> None:
    from rich.cells import cell_len

    cells = [[formats[c](r.get(c)) if c in formats else ("-" if r.get(c) is None else str(r.get(c))) for c in columns]
             for r in rows]
    widths = [max([cell_len(t)] + [cell_len(row[i]) for row in cells]) for i, t in enumerate(titles)]

    def line(values: Sequence[str]) -> str:
        parts = []
        for v, w, j in zip(values, widths, justify, strict=True):
            pad = " " * (w - cell_len(v))
            parts.append(pad + v if j == "right" else v + pad)
        return "  ".join(parts).rstrip() + "\n"

    out.write(line(titles))
    for row in cells:
        out.write(line(row))


def render_kv(pairs: Sequence[tuple[str, Any]], stream: IO[str] | None = None) -> None:
    """A two-column KEY VALUE table (e.g. a job's summary) through :func:`render_table`."""
    render_table([{"key": k, "value": v} for k, v in pairs], ["key", "value"], stream)


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


def add_epoch_argument(parser) -> None:
    """The common ``--epoch`` option (``args.epoch``): timestamps in human output as raw epoch ms."""
    parser.add_argument("--epoch", action="store_true", help=EPOCH_HELP)


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


def time_spec(text: str) -> str:
    """argparse type of ``--time``: a time range in rpk's grammar (``@T1:T2``, ``@T``, ``@T:``, ``@:T``; the
    leading ``@`` may be left out), handed on as the ``-o`` spec it is (one grammar, one parser)."""
    import argparse

    from kafkalog.storage.errors import ConfigError
    from kafkalog.storage.log.offset_spec import parse_offset_spec

    spec = text.strip()
    if not spec.startswith("@"):
        spec = "@" + spec
    try:
        parse_offset_spec(spec)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(e.reason) from None
    return spec


#: ``--now``'s metavar and the grammar its help names (the same as a ``-o @T``)
NOW_METAVAR = "TIME"
NOW_GRAMMAR = "epoch ms or s, ISO-8601 date or time, or a duration relative to the wall clock (--now=-1d)"


def timestamp_ms(text: str) -> int:
    """argparse type of ``--now`` and other points in time: epoch ms of a timestamp in rpk's grammar, the one
    ``-o @T`` and ``--time`` take (:func:`kafkalog.storage.log.offset_spec.parse_timestamp`)."""
    import argparse

    from kafkalog.storage.errors import ConfigError
    from kafkalog.storage.log.offset_spec import parse_timestamp

    try:
        return parse_timestamp(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(e.reason) from None


def add_time_argument(parser, where: str = "of each partition") -> None:
    """``--time T1:T2``: the ``-o @T1:T2`` of rpk's grammar, as its own option (both may be given)."""
    parser.add_argument("--time", dest="offset_specs", action="append", type=time_spec, metavar="T1:T2",
                        help=f"only the records {where} with timestamps in this range, rpk's time grammar: epoch "
                        "ms or s, ISO-8601 dates and times, durations relative to now (--time=-48h:-24h) or to T1 "
                        "(2026-11-01:+1d); the same as -o @T1:T2, resolved through the time index")


class OutputDirRefused(Exception):
    """An output directory a command will not write: ``-`` (stdout), a file, or a non-empty directory without
    ``--overwrite``. The message says why; the command exits 2."""


class OutputDir:
    """Where a command that writes a directory (``export --format parquet``, ``spark export``) writes: a fresh
    sibling of the target (``.NAME.kafkalog-XXXX`` in the same parent, so one rename moves it), moved into place
    only when the whole output is written. ``path`` is that staging dir; ``replaced`` tells whether an earlier
    non-empty directory was replaced (``--overwrite``) and ``note`` says which happened, for the summary."""

    def __init__(self, target: str, *, overwrite: bool, what: str):
        import os

        if target == "-":
            raise OutputDirRefused(f"{what} writes a directory of files: it cannot go to stdout (--out -); give a "
                                   "directory")
        self.target = os.path.abspath(target)
        self.replaced = False
        if os.path.lexists(self.target) and not os.path.isdir(self.target):
            raise OutputDirRefused(f"{target}: exists and is not a directory ({what} writes a directory)")
        data_dir = data_dir_holding(self.target)
        if data_dir is not None:
            raise OutputDirRefused(f"{target}: inside the data dir {data_dir}, where the broker would refuse to load "
                                   f"the data dir (a folder that is not a partition); give an --out outside it")
        if os.path.isdir(self.target) and os.listdir(self.target):
            if not overwrite:
                raise OutputDirRefused(f"{target}: not empty (an earlier export?): its files would mix with this "
                                       "export's; give --overwrite to replace it, or another --out")
            self.replaced = True
        self.path = ""

    @property
    def note(self) -> str:
        return "replaced the earlier contents" if self.replaced else "new directory"

    def __enter__(self) -> OutputDir:
        import os
        import tempfile

        parent = os.path.dirname(self.target)
        os.makedirs(parent, exist_ok=True)
        self.path = tempfile.mkdtemp(prefix=f".{os.path.basename(self.target)}.kafkalog-", dir=parent)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        import os
        import shutil

        if exc_type is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        os.chmod(self.path, 0o777 & ~_umask())  # mkdtemp's 0700 -> what mkdir would have made
        old = None
        if os.path.isdir(self.target):
            if os.listdir(self.target):  # --overwrite: the earlier output goes aside, the new one takes its name
                old = self.path + ".old"
                os.rename(self.target, old)
            else:
                os.rmdir(self.target)
        os.rename(self.path, self.target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def final(self, path: str) -> str:
        """Where a file written under :attr:`path` is once the output is in place."""
        import os

        rel = os.path.relpath(path, self.path)
        return self.target if rel == "." else os.path.join(self.target, rel)


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask
