"""``meta.properties`` of a data dir (``MetaProperties``, ``PropertiesUtils``, docs/formats.md#metaproperties).

Written by ``java.util.Properties.store(writer, "")``::

    #
    #Fri Oct 25 03:33:01 UTC 2024
    node.id=1
    directory.id=pKnJ0cAhRMqJ0g3Tt0Vv0A
    version=1
    cluster.id=MkU3OEVBNTcwNTJENDM2Qg

Reading follows ``Properties.load`` (comments ``#``/``!``, separators ``=``/``:``/whitespace, line
continuations, escapes). The file is kept as a list of lines so that writing back reproduces the bytes read:
comment lines verbatim, entries in the order read, rendered as ``Properties.store`` does. Bytes are decoded as
ISO-8859-1 (what ``Properties.load(InputStream)`` does) and encoded back the same way, so any byte survives.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field

from kafkalog.storage.errors import CorruptCheckpointError
from kafkalog.storage.files.checkpoints import read_bytes_bounded
from kafkalog.storage.files.findings import Defect, defect
from kafkalog.storage.files.java import parse_java_int, read_lines, uuid_from_string
from kafkalog.storage.io.fileops import atomic_write

META_PROPERTIES_FILE = "meta.properties"
MAX_BYTES = 1 << 20

VERSION_PROP = "version"
CLUSTER_ID_PROP = "cluster.id"
BROKER_ID_PROP = "broker.id"
NODE_ID_PROP = "node.id"
DIRECTORY_ID_PROP = "directory.id"

# Reserved directory ids (server-common DirectoryId)
DIRECTORY_ID_MIGRATING = "AAAAAAAAAAAAAAAAAAAAAA"
DIRECTORY_ID_UNASSIGNED = "AAAAAAAAAAAAAAAAAAAAAQ"
DIRECTORY_ID_LOST = "AAAAAAAAAAAAAAAAAAAAAg"
RESERVED_DIRECTORY_IDS = (DIRECTORY_ID_MIGRATING, DIRECTORY_ID_UNASSIGNED, DIRECTORY_ID_LOST)

_WS = " \t\f"


_HEX = frozenset("0123456789abcdefABCDEF")
_UNESCAPE = {"t": "\t", "r": "\r", "n": "\n", "f": "\f"}


def _load_convert(s: str, path, pos: int) -> str:
    """``Properties.loadConvert``: ``\\uXXXX`` and the one-letter escapes; any other escaped char is itself."""
    i = s.find("\\")
    if i < 0:
        return s
    out = [s[:i]]
    n = len(s)
    while i >= 0:
        i += 1
        if i >= n:  # a lone trailing backslash is dropped by LineReader
            break
        c = s[i]
        i += 1
        if c == "u":
            hexd = s[i : i + 4]
            if len(hexd) != 4 or not _HEX.issuperset(hexd):
                raise CorruptCheckpointError("malformed \\uxxxx encoding", path, pos)
            out.append(chr(int(hexd, 16)))
            i += 4
        else:
            out.append(_UNESCAPE.get(c, c))
        j = s.find("\\", i)
        out.append(s[i:] if j < 0 else s[i:j])
        i = j
    return "".join(out)


# what Properties.saveConvert escapes, and any char past latin-1
_SAVE_SPECIAL = re.compile("[ \t\n\r\f=:#!\\\\]|[^\x00-\xff]")
_SAVE_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}


def _save_convert(s: str, escape_space: bool) -> str:
    """``Properties.saveConvert`` with ``escUnicode=false`` (the Writer variant of ``store``)."""

    def one(m: re.Match) -> str:
        c = m[0]
        if c == " ":
            return "\\ " if escape_space or m.start() == 0 else " "
        if c in _SAVE_ESCAPES:
            return _SAVE_ESCAPES[c]
        if ord(c) > 0xFF:
            # not latin-1 (only a \uXXXX escape read back makes one): written back as its escape(s), which
            # every Properties.load reads as the same character, as store(OutputStream) writes it
            b = c.encode("utf-16-be", "surrogatepass")
            return "".join(f"\\u{b[j] << 8 | b[j + 1]:04X}" for j in range(0, len(b), 2))
        return "\\" + c  # = : # ! \\

    return _SAVE_SPECIAL.sub(one, s)


# Properties.load0 on one logical line: the key runs to the first unescaped separator or whitespace; then
# whitespace, at most one separator (if the key did not end at one), whitespace
_KEY = re.compile(r"(?:[^\\=: \t\f]|\\.|\\\Z)*", re.DOTALL)
_AFTER_KEY_SEP = re.compile(r"[ \t\f]*")
_AFTER_KEY_WS = re.compile(r"[ \t\f]*(?:[=:][ \t\f]*)?")


def _split_key_value(line: str) -> tuple[str, str]:
    """``Properties.load0`` on one logical line (escapes still present)."""
    key = _KEY.match(line)
    assert key is not None  # the patterns match the empty string too
    key_end = key.end()
    if key_end == len(line):
        return line, ""
    after = (_AFTER_KEY_SEP if line[key_end] in "=:" else _AFTER_KEY_WS).match(line, key_end + 1)
    assert after is not None
    return line[:key_end], line[after.end() :]


def _trailing_backslashes(s: str) -> int:
    return len(s) - len(s.rstrip("\\"))


@dataclass
class MetaProperties:
    """Lines in file order: ``str`` for a verbatim comment/blank line, ``(key, value)`` for an entry."""

    lines: list[str | tuple[str, str]] = field(default_factory=list)
    newline: str = "\n"
    path: str | None = None
    raw: bytes | None = None

    # ---- construction ----------------------------------------------------------------------------------
    @classmethod
    def new(
        cls,
        *,
        version: int,
        cluster_id: str | None,
        node_id: int | None,
        directory_id: str | None = None,
        key_order: str = "jdk17",
        now: float | None = None,
        newline: str = "\n",
    ) -> MetaProperties:
        """A file as ``MetaProperties.toProperties`` + ``Properties.store`` would write it.

        ``key_order``: ``jdk8`` (Hashtable), ``jdk17`` (ConcurrentHashMap, JDK 9-17) or ``sorted`` (JDK 18+).
        """
        props: dict[str, str] = {VERSION_PROP: str(version)}
        if cluster_id is not None:
            props[CLUSTER_ID_PROP] = cluster_id
        if node_id is not None:
            props[BROKER_ID_PROP if version == 0 else NODE_ID_PROP] = str(node_id)
        if directory_id is not None:
            props[DIRECTORY_ID_PROP] = directory_id
        orders = {
            "jdk8": [CLUSTER_ID_PROP, VERSION_PROP, DIRECTORY_ID_PROP, NODE_ID_PROP, BROKER_ID_PROP],
            "jdk17": [BROKER_ID_PROP, NODE_ID_PROP, DIRECTORY_ID_PROP, VERSION_PROP, CLUSTER_ID_PROP],
            "sorted": sorted(props),
        }
        order = orders[key_order]
        date = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(now))
        lines: list[str | tuple[str, str]] = ["#", "#" + date]
        lines.extend((k, props[k]) for k in order if k in props)
        return cls(lines, newline)

    @classmethod
    def from_bytes(cls, data: bytes, path: str | os.PathLike | None = None) -> MetaProperties:
        p = None if path is None else str(path)
        data = bytes(data)
        text = data.decode("latin-1")
        natural = read_lines(text)
        newline = next((t for _, _, t in natural if t), "\n")
        lines: list[str | tuple[str, str]] = []
        i = 0
        while i < len(natural):
            line, start, _ = natural[i]
            stripped = line.lstrip(_WS)
            if not stripped or stripped[0] in "#!":
                lines.append(line)
                i += 1
                continue
            # continuation: an odd number of trailing backslashes (of the lines joined so far) joins the next
            # natural line, without its leading whitespace
            parts = [stripped]
            trail = _trailing_backslashes(stripped)
            while trail % 2 == 1:
                parts[-1] = parts[-1][:-1]  # the last part ends with a backslash while trail is odd
                trail -= 1
                i += 1
                if i >= len(natural):
                    break
                piece = natural[i][0].lstrip(_WS)
                parts.append(piece)
                t = _trailing_backslashes(piece)
                trail = t if t < len(piece) else trail + t
            i += 1
            k, v = _split_key_value("".join(parts))
            lines.append((_load_convert(k, p, start), _load_convert(v, p, start)))
        return cls(lines, newline, p, data)

    def to_bytes(self) -> bytes:
        out = []
        for line in self.lines:
            if isinstance(line, str):
                out.append(line)
            else:
                k, v = line
                out.append(f"{_save_convert(k, True)}={_save_convert(v, False)}")
        return "".join(s + self.newline for s in out).encode("latin-1")

    # ---- properties view ---------------------------------------------------------------------------------
    def properties(self) -> dict[str, str]:
        """As ``Properties`` after ``load``: the last occurrence of a key wins."""
        return {k: v for k, v in (x for x in self.lines if isinstance(x, tuple))}

    def keys(self) -> list[str]:
        return [x[0] for x in self.lines if isinstance(x, tuple)]

    def get(self, key: str) -> str | None:
        return self.properties().get(key)

    def set(self, key: str, value: str) -> None:
        """Set in place (keeps key order); a new key is appended."""
        for i, x in enumerate(self.lines):
            if isinstance(x, tuple) and x[0] == key:
                self.lines[i] = (key, value)
                return
        self.lines.append((key, value))

    @property
    def version(self) -> int:
        """``MetaPropertiesVersion.fromNumberString`` (absent means 0); raises CorruptCheckpointError."""
        v = self.get(VERSION_PROP)
        if v is None:
            return 0
        try:
            n = parse_java_int(v.strip())
        except ValueError:
            raise CorruptCheckpointError(f"invalid version {v!r}", self.path) from None
        if n not in (0, 1):
            raise CorruptCheckpointError(f"unknown meta.properties version {n}", self.path)
        return n

    @property
    def cluster_id(self) -> str | None:
        return self.get(CLUSTER_ID_PROP)

    @property
    def node_id(self) -> int | None:
        """``broker.id`` (v0) or ``node.id`` (v1)."""
        key = BROKER_ID_PROP if self.version == 0 else NODE_ID_PROP
        v = self.get(key)
        if v is None:
            if self.version == 1:
                raise CorruptCheckpointError(f"v1 meta.properties without {NODE_ID_PROP}", self.path)
            return None
        try:
            return parse_java_int(v.strip())
        except ValueError:
            raise CorruptCheckpointError(f"invalid {key} {v!r}", self.path) from None

    @property
    def directory_id(self) -> str | None:
        return self.get(DIRECTORY_ID_PROP)

    @property
    def date_comment(self) -> str | None:
        """The ``#<Date.toString()>`` line ``Properties.store`` writes, when present."""
        comments = [x for x in self.lines if isinstance(x, str) and x.startswith("#")]
        return comments[1][1:] if len(comments) >= 2 else None

    @property
    def canonical(self) -> bool:
        return self.raw is None or self.raw == self.to_bytes()

    def validate(self) -> list[Defect]:
        """Everything ``MetaProperties.Builder`` would reject, plus reserved directory ids."""
        problems = []
        try:
            version = self.version
        except CorruptCheckpointError as e:
            return [defect("metaProperties.invalid", error=e.reason)]
        try:
            _ = self.node_id
        except CorruptCheckpointError as e:
            problems.append(defect("metaProperties.invalid", error=e.reason))
        if version == 1 and self.cluster_id is None:
            problems.append(defect("metaProperties.noClusterId"))
        d = self.directory_id
        if d is not None:
            try:
                uuid_from_string(d)
            except ValueError as e:
                problems.append(defect("metaProperties.directoryIdUnreadable", error=str(e)))
            if directory_id_reserved(d):
                problems.append(defect("metaProperties.directoryIdReserved", directoryId=d))
        return problems


def directory_id_reserved(directory_id: str) -> bool:
    """``DirectoryId.reserved``: the first 100 ids (:data:`RESERVED_DIRECTORY_IDS` among them), i.e. the most
    significant long zero and the least significant one, compared signed, below 100 (so negative ones too)."""
    try:
        raw = uuid_from_string(directory_id)
    except ValueError:
        return False
    return raw[:8] == bytes(8) and int.from_bytes(raw[8:], "big", signed=True) < 100


def read_meta_properties(path: str | os.PathLike) -> MetaProperties:
    return MetaProperties.from_bytes(read_bytes_bounded(path, MAX_BYTES), path)


def write_meta_properties(path: str | os.PathLike, meta: MetaProperties, *, fsync: bool = True) -> None:
    atomic_write(path, meta.to_bytes(), fsync=fsync)
