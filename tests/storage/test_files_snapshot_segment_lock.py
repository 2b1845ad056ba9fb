"""Producer snapshots, Segment (mmap) and the data dir .lock."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import textwrap

import pytest
from builders import write_segment
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.storage.codec.crc import crc32c
from kafkalog.storage.errors import CorruptCheckpointError, CorruptRecordError, LockedError, LogDirError
from kafkalog.storage.files.names import (
    filename_prefix_from_offset,
    is_index_file,
    is_log_file,
    log_file_name,
    offset_from_file_name,
    snapshot_file_name,
    temp_suffix,
)
from kafkalog.storage.files.offset_index import OffsetIndex
from kafkalog.storage.files.producer_snapshot import (
    ProducerSnapshot,
    ProducerSnapshotEntry,
    read_producer_snapshot,
    write_producer_snapshot,
)
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.files.time_index import TimeIndex
from kafkalog.storage.io.lock import DirLock, is_locked, lock_status
from kafkalog.storage.records import build_batch

# ------------------------------------------------------------------------------------------- snapshots


def test_empty_snapshot_vector():
    assert ProducerSnapshot().to_bytes() == bytes.fromhex("000148674bc700000000")
    s = ProducerSnapshot.from_bytes(bytes.fromhex("000148674bc700000000"))
    assert s.entries == [] and s.crc == 0x48674BC7


def test_snapshot_fields_round_trip(tmp_path):
    entries = [
        ProducerSnapshotEntry(1000, 3, 41, 500, 4, 1700000000000, 2, -1),
        ProducerSnapshotEntry(7, 0, -1, -1, 0, 1700000000001, -1, 480),
        ProducerSnapshotEntry(2**63 - 1, -1, 2**31 - 1, 2**63 - 1, -(2**31), -(2**63), 2**31 - 1, 2**63 - 1),
    ]
    raw = ProducerSnapshot(entries).to_bytes()
    assert len(raw) == 10 + 3 * 46
    assert struct.unpack_from(">hIi", raw) == (1, crc32c(raw[6:]), 3)
    p = tmp_path / snapshot_file_name(501)
    p.write_bytes(raw)
    s = read_producer_snapshot(p)
    assert s.entries == entries and s.to_bytes() == raw
    assert entries[0].has_batch_metadata and entries[0].first_offset == 496 and not entries[0].ongoing_txn
    assert not entries[1].has_batch_metadata and entries[1].ongoing_txn
    q = tmp_path / snapshot_file_name(600)
    write_producer_snapshot(q, s)
    assert q.read_bytes() == raw


@pytest.mark.parametrize(
    "mutate,position",
    [
        (lambda b: b[:1], 0),
        (lambda b: b"\x00\x02" + b[2:], 0),  # unknown version
        (lambda b: b[:8], 2),  # truncated header
        (lambda b: b[:6] + struct.pack(">i", -1) + b[10:], 6),
        (lambda b: b[:6] + struct.pack(">i", 2**31 - 1) + b[10:], 6),  # huge count: checked before allocating
        (lambda b: b[:-1], 6),  # entry truncated
        (lambda b: b[:20] + bytes([b[20] ^ 1]) + b[21:], 2),  # CRC mismatch
    ],
)
def test_snapshot_corrupt(mutate, position):
    raw = ProducerSnapshot([ProducerSnapshotEntry(1, 0, 0, 0, 0, 0, 0, -1)]).to_bytes()
    with pytest.raises(CorruptCheckpointError) as ei:
        ProducerSnapshot.from_bytes(mutate(raw), "x.snapshot")
    assert ei.value.position == position and ei.value.path == "x.snapshot"


def test_snapshot_trailing_bytes_kept():
    body = struct.pack(">i", 0) + b"junk"
    raw = struct.pack(">hI", 1, crc32c(body)) + body
    s = ProducerSnapshot.from_bytes(raw)
    assert s.trailing == b"junk" and s.to_bytes() == raw and s.validate()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.booleans())
def test_snapshot_hostile(data, crc):
    try:
        ProducerSnapshot.from_bytes(data, check_crc=crc).validate()
    except CorruptCheckpointError:
        pass


# ------------------------------------------------------------------------------------------- names


def test_names():
    assert filename_prefix_from_offset(1234567) == "00000000000001234567"
    assert log_file_name(0) == "00000000000000000000.log"
    assert offset_from_file_name("00000000000000000042.log.swap") == 42
    assert offset_from_file_name("42.index") == 42  # any digit count is accepted on read
    with pytest.raises(ValueError):
        offset_from_file_name("abc.log")
    with pytest.raises(ValueError):
        offset_from_file_name("99999999999999999999.log")  # beyond a long
    assert is_log_file("0.log") and not is_log_file("0.log.deleted")
    assert is_index_file("0.timeindex") and is_index_file("0.txnindex") and not is_index_file("0.index.swap")
    assert temp_suffix("0.log.cleaned") == ".cleaned" and temp_suffix("0.log") is None


# ------------------------------------------------------------------------------------------- segment


def test_segment_reads_and_lookups(tmp_path):
    batches = [build_batch([(100 + 2 * i + j, 1000 + 2 * i + j, b"k", b"v" * 40) for j in range(2)],
                           base_offset=100 + 2 * i) for i in range(10)]
    size = len(batches[0])
    idx = OffsetIndex.from_entries(100, [(105, 2 * size), (111, 5 * size)]).to_bytes()
    tidx = TimeIndex.from_entries(100, [(1005, 105), (1011, 111), (1019, 119)]).to_bytes()
    p = write_segment(tmp_path, 100, batches, index=idx, timeindex=tidx)
    with Segment(p) as seg:
        assert seg.base_offset == 100 and seg.size == size * 10
        assert [b.base_offset for b in seg.iter_batches()] == list(range(100, 120, 2))
        assert seg.read_at(3 * size).base_offset == 106
        with pytest.raises(CorruptRecordError):
            seg.read_at(10)  # not a batch start: size field garbage or past the end
        with pytest.raises(CorruptRecordError):
            seg.read_at(seg.size)
        t = seg.translate_offset(107)
        assert (t.position, t.size) == (3 * size, size)
        assert seg.translate_offset(120) is None
        assert seg.read_next_offset() == 120
        assert seg.max_timestamp_so_far().timestamp == 1019
        assert seg.largest_timestamp() == 1019
        assert seg.find_offset_by_timestamp(1007) == (1007, 107)
        assert seg.find_offset_by_timestamp(1007, starting_offset=110) == (1010, 110)
        assert seg.find_offset_by_timestamp(5000) is None
        assert seg.offset_index.lookup(107).offset == 105
        assert seg.first_batch().base_offset == 100
        assert [f.name for f in seg.files()] == [
            "00000000000000000100.log", "00000000000000000100.index", "00000000000000000100.timeindex"]


def test_segment_empty_and_missing_indexes(tmp_path):
    p = write_segment(tmp_path, 5, [])
    with Segment(p) as seg:
        assert seg.size == 0 and list(seg.iter_batches()) == []
        assert seg.read_next_offset() == 5
        assert not seg.has_offset_index and seg.offset_index.entries == 0
        assert seg.time_index.last_valid_entry.timestamp == -1
        assert seg.txn_index.entries == 0


def test_segment_first_batch_above_base_and_bad_index(tmp_path):
    # compaction: segment 0 starts at offset 52; an index pointing outside the log is ignored for reads
    b = build_batch([(52, 1, b"k", b"v")], base_offset=52)
    p = write_segment(tmp_path, 0, [b], index=struct.pack(">ii", 60, 10**6))
    with Segment(p) as seg:
        assert seg.read_next_offset() == 53
        assert seg.translate_offset(0).position == 0


def test_segment_name_must_parse(tmp_path):
    with pytest.raises(LogDirError):
        Segment(tmp_path / "abc.log")


def test_segment_close_with_live_batch_views(tmp_path):
    p = write_segment(tmp_path, 0, [build_batch([(0, 1, b"k", b"v")], base_offset=0)])
    seg = Segment(p)
    batch = seg.first_batch()
    seg.close()  # views still alive: no exception
    assert batch.base_offset == 0


# ------------------------------------------------------------------------------------------- lock

HOLD_PY = textwrap.dedent(
    """
    import fcntl, sys, time
    f = open(sys.argv[1], "a+")
    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("locked", flush=True)
    time.sleep(60)
    """
)


def test_lock_status_and_dirlock(tmp_path):
    assert not lock_status(tmp_path).exists and not is_locked(tmp_path)
    with DirLock(tmp_path) as lk:
        assert lk.locked and (tmp_path / ".lock").exists()
        st_ = lock_status(tmp_path)
        assert st_.held and st_.holders
        with pytest.raises(LockedError):
            DirLock(tmp_path).acquire()
        # a status query on another descriptor does not drop our lock (OFD lock)
        assert is_locked(tmp_path) and is_locked(tmp_path)
    assert not is_locked(tmp_path)


def test_lock_held_by_another_process(tmp_path):
    lock = tmp_path / ".lock"
    lock.touch()
    proc = subprocess.Popen([sys.executable, "-c", HOLD_PY, str(lock)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"locked"
        st_ = lock_status(tmp_path)
        assert st_.held and any(h.pid == proc.pid for h in st_.holders)
        with pytest.raises(LockedError) as ei:
            DirLock(tmp_path).acquire()
        assert str(proc.pid) in str(ei.value)
    finally:
        proc.kill()
        proc.wait()
    assert not lock_status(tmp_path).held  # a dead holder's lock is gone
    with DirLock(tmp_path):
        pass


JAVA_HOLD = textwrap.dedent(
    """
    import java.nio.channels.FileChannel;
    import java.nio.file.*;
    public class Hold {
        public static void main(String[] a) throws Exception {
            FileChannel ch = FileChannel.open(Paths.get(a[0]), StandardOpenOption.CREATE,
                StandardOpenOption.READ, StandardOpenOption.WRITE);
            if (ch.tryLock() == null) { System.out.println("busy"); return; }
            System.out.println("locked");
            System.out.flush();
            Thread.sleep(60000);
        }
    }
    """
)


@pytest.mark.kafka
def test_lock_interop_with_java_filechannel_trylock(tmp_path):
    """The JVM's FileChannel.tryLock (what Kafka's FileLock uses) and ours exclude each other."""
    java = shutil.which("java")
    assert java, "a JDK is needed for this differential test"
    src = tmp_path / "Hold.java"
    src.write_text(JAVA_HOLD)
    lock = tmp_path / ".lock"
    proc = subprocess.Popen([java, str(src), str(lock)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"locked"
        assert lock_status(tmp_path).held
        with pytest.raises(LockedError):
            DirLock(tmp_path).acquire()
    finally:
        proc.kill()
        proc.wait()
    with DirLock(tmp_path):
        out = subprocess.run([java, str(src), str(lock)], capture_output=True, timeout=120)
        assert out.stdout.strip() == b"busy"
