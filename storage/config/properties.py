"""Java properties files (``server.properties``, a topic config file) and ``--config name=value`` overrides, read
as ``java.util.Properties`` reads them."""

from __future__ import annotations

import os
from collections.abc import Iterable

from kafkalog.storage.errors import ConfigError

# ---------------------------------------------------------------------------------------------- files


def parse_properties(text: str) -> dict[str, str]:
    """A ``java.util.Properties`` subset good for ``server.properties`` and topic config files:
    ``#``/``!`` comments, ``=``/``:``/whitespace separators, ``\\`` line continuations and escapes."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _odd_backslashes(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        key_chars: list[str] = []
        j = 0
        while j < len(line):
            c = line[j]
            if c == "\\" and j + 1 < len(line):
                key_chars.append(_unescape(line[j + 1]))
                j += 2
                continue
            if c in "=: \t\f":
                break
            key_chars.append(c)
            j += 1
        rest = line[j:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        out["".join(key_chars)] = _unescape_value(rest)
    return out


def _odd_backslashes(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _unescape(c: str) -> str:
    return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c)


def _unescape_value(s: str) -> str:
    out = []
    j = 0
    while j < len(s):
        if s[j] == "\\" and j + 1 < len(s):
            if s[j + 1] == "u" and j + 6 <= len(s):
                try:
                    out.append(chr(int(s[j + 2:j + 6], 16)))
                    j += 6
                    continue
                except ValueError:
                    pass
            out.append(_unescape(s[j + 1]))
            j += 2
        else:
            out.append(s[j])
            j += 1
    return "".join(out)


def read_properties(path: str | os.PathLike) -> dict[str, str]:
    with open(path, "rb") as f:
        data = f.read(1 << 24)
    return parse_properties(data.decode("latin-1"))


def parse_overrides(pairs: Iterable[str], source: str = "--config") -> dict[str, str]:
    """``key=value`` strings (the CLI's repeated ``--config``) to a dict."""
    out = {}
    for p in pairs:
        if "=" not in p:
            raise ConfigError(f"expected key=value, got {p!r}", source)
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out
