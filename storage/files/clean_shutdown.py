"""``.kafka_cleanshutdown`` marker of a data dir (``CleanShutdownFileHandler``, docs/formats.md#kafka_cleanshutdown).

Kafka <= 3.6 writes an empty file; >= 3.7 writes ``{"version":0,"brokerEpoch":N}``. The file's presence alone
means "the broker shut down cleanly"; a content that does not parse just means "no epoch".
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from kafkalog.storage.files.checkpoints import read_bytes_bounded
from kafkalog.storage.files.findings import Defect, defect
from kafkalog.storage.io.fileops import atomic_write
from kafkalog.storage.io.fs import UrlPath, is_url
from kafkalog.storage.io.jsonio import loads

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
MAX_BYTES = 1 << 16


@dataclass
class CleanShutdownMarker:
    broker_epoch: int | None = None  # None: empty (pre-3.7) form or unparsable content
    version: int | None = None
    raw: bytes = b""
    path: str | None = None

    @classmethod
    def from_bytes(cls, data: bytes, path: str | os.PathLike | None = None) -> CleanShutdownMarker:
        data = bytes(data)
        p = None if path is None else str(path)
        epoch = version = None
        try:
            obj = loads(data.decode("utf-8")) if data.strip() else None
        except ValueError:  # UnicodeDecodeError, JSONDecodeError, nested too deeply
            obj = None
        if isinstance(obj, dict):
            e, v = obj.get("brokerEpoch"), obj.get("version")
            if isinstance(e, int) and not isinstance(e, bool):
                epoch = e
            if isinstance(v, int) and not isinstance(v, bool):
                version = v
        return cls(epoch, version, data, p)

    @classmethod
    def empty(cls) -> CleanShutdownMarker:
        """The pre-3.7 form."""
        return cls()

    @classmethod
    def with_epoch(cls, broker_epoch: int, version: int = 0) -> CleanShutdownMarker:
        """The 3.7+ form (``brokerEpoch`` is -1 on ZooKeeper brokers)."""
        raw = json.dumps({"version": version, "brokerEpoch": broker_epoch}, separators=(",", ":")).encode()
        return cls(broker_epoch, version, raw)

    @property
    def is_json(self) -> bool:
        return self.broker_epoch is not None

    def to_bytes(self) -> bytes:
        return self.raw

    def validate(self) -> list[Defect]:
        if self.raw and self.broker_epoch is None:
            return [defect("cleanShutdown.notJson")]
        return []


def read_clean_shutdown(path: str | os.PathLike) -> CleanShutdownMarker | None:
    """The marker in the file at ``path`` (under a URL through the filesystem seam), or ``None`` when there is no
    such file (unclean shutdown)."""
    if not (UrlPath.of(path).exists() if is_url(path) else os.path.lexists(path)):  # type: ignore[arg-type]
        return None
    return CleanShutdownMarker.from_bytes(read_bytes_bounded(path, MAX_BYTES), path)


def write_clean_shutdown(path: str | os.PathLike, marker: CleanShutdownMarker, *, fsync: bool = True) -> None:
    atomic_write(path, marker.to_bytes(), fsync=fsync)
