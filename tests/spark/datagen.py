"""Generated Kafka data dirs for the Spark tests and benchmark, written through the write path (LogWriter)."""

from __future__ import annotations

import os
from pathlib import Path

from kafkalog.storage.config import LogConfig
from kafkalog.storage.engine.writer import LogWriter

BASE_TS = 1_700_000_000_000


def record(i: int, *, headers: bool, value_size: int = 40) -> tuple:
    key = None if i % 7 == 3 else f"key-{i % 101}".encode()
    value = None if i % 13 == 5 else (f"value-{i}-".encode() * (value_size // 8 + 1))[:value_size]
    hs = [("h", f"{i}".encode()), ("n", None)] if headers and i % 3 == 0 else []
    return (None, BASE_TS + i * 10 + (i % 5) * 3, key, value, hs)


def write_partition(pdir: str | os.PathLike, n: int, *, batch_records: int = 50, codec: int = 0,
                    segment_bytes: int | None = None, headers: bool = True, value_size: int = 40,
                    producer_id: int = -1) -> None:
    props = {"segment.bytes": str(segment_bytes)} if segment_bytes else {}
    cfg = LogConfig.from_topic_props(props) if props else LogConfig()
    with LogWriter(pdir, cfg, leader_epoch=3, now_ms=BASE_TS, fsync=False) as w:
        seq = 0
        for start in range(0, n, batch_records):
            recs = [record(i, headers=headers, value_size=value_size) for i in range(start, min(n, start + batch_records))]
            kw = {}
            if producer_id >= 0:
                kw = {"producer_id": producer_id, "producer_epoch": 0, "base_sequence": seq}
                seq += len(recs)
            w.append_records(recs, codec=codec, **kw)


def make_data_dir(root: str | os.PathLike, layout: dict[str, int], n: int, **kw) -> Path:
    """``layout`` maps topic -> partition count; every partition gets ``n`` records."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for topic, parts in layout.items():
        for p in range(parts):
            write_partition(root / f"{topic}-{p}", n, **kw)
    return root
