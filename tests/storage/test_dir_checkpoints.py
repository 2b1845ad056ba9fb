"""A data dir's offset checkpoints as its partitions read them (``log/dir_checkpoints``): parsed once per version
of the file, and never a stale version: a rewrite of the same size within the clock's granularity (a reused
inode, the same mtime) is read again (the stream saw a high watermark of 10 after it was 70 and reported its
offsets going back)."""

from __future__ import annotations

import os
from pathlib import Path

from kafkalog.storage.files.checkpoints import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpoint
from kafkalog.storage.log.dir_checkpoints import checkpoint_tables, partition_checkpoints


def _write(d: Path, hw: int) -> None:
    (d / REPLICATION_OFFSET_CHECKPOINT).write_bytes(OffsetCheckpoint.from_mapping({("t", 0): hw}).to_bytes())


def test_a_rewrite_with_the_same_stamp_is_read_again(tmp_path: Path):
    d = tmp_path / "data"
    (d / "t-0").mkdir(parents=True)
    _write(d, 10)
    st = (d / REPLICATION_OFFSET_CHECKPOINT).stat()
    assert partition_checkpoints(d / "t-0")[REPLICATION_OFFSET_CHECKPOINT] == 10
    _write(d, 70)  # in place: the same inode and size
    os.utime(d / REPLICATION_OFFSET_CHECKPOINT, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same mtime
    assert partition_checkpoints(d / "t-0")[REPLICATION_OFFSET_CHECKPOINT] == 70


def test_an_old_file_is_parsed_once(tmp_path: Path, monkeypatch):
    d = tmp_path / "data"
    d.mkdir()
    _write(d, 10)
    old = 1_600_000_000_000_000_000
    os.utime(d / REPLICATION_OFFSET_CHECKPOINT, ns=(old, old))
    first = checkpoint_tables(d)[REPLICATION_OFFSET_CHECKPOINT]
    assert first == {("t", 0): 10}
    assert checkpoint_tables(d)[REPLICATION_OFFSET_CHECKPOINT] is first  # the cached parse
