"""Shared builders of synthetic batches, segments, partition dirs and data dirs for the tests.

Everything is built with the library's own writers (``build_batch``/``build_legacy``/``build_end_txn_marker``
for records, ``recover_segment`` for indexes by the broker's recovery rule, ``LogWriter`` for the broker's write
path, the ``files`` writers for checkpoints and metadata), so a test states *what* it needs, not bytes. A test
that deliberately needs hand-made bytes (a corrupt header, a torn tail) writes them itself, next to the check.

Test files do not define their own ``write_segment``/``make_partition``/``make_data_dir``-style helpers:
``tests/compat/test_builders.py`` fails if one comes back. Add what is missing here.

Builders:

* batches: :func:`numbered_batches`, :func:`kv_batch`, :func:`offset_batches`, :func:`batch_at`,
  :func:`single_record_batches`, :func:`every_kind_of_batch`, :func:`legacy_message_sets`,
  :func:`legacy_segment_bytes` (v0/v1), :func:`zstd_window_batches` (zstd frames asking for large windows);
* one segment: :func:`write_segment` (a ``.log``, optionally with rebuilt or given indexes, a temp suffix, an
  mtime), :func:`indexed_segment` (n batches of ``per`` records and where each batch is), :func:`single_record_segment`;
* partition dirs: :func:`write_partition_files` (leader epochs, topic id, snapshots), :func:`three_segment_partition`,
  :func:`indexed_partition`, :func:`aged_partition`;
* data dirs: :func:`write_data_dir_files` (meta.properties, checkpoints, .lock, clean-shutdown marker),
  :func:`three_segment_data_dir`, :func:`multi_partition_data_dir`, :func:`mixed_format_data_dir`,
  :func:`writer_data_dir` (through ``LogWriter``, as a broker appends);
* internal topics: :func:`remote_log_metadata_values` (one value of each ``__remote_log_metadata`` record type),
  :func:`remote_log_metadata_partition`;
* generated data for the Spark tests (any size, through ``LogWriter``): :func:`generated_record`,
  :func:`generated_partition`, :func:`generated_data_dir`, :func:`corrupt_generated_partition` (a CRC mismatch);
* object storage: :func:`s3_upload` (a tree onto the moto S3 server), :func:`spy_url_reads` (the windows a file
  under a URL is read in).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from kafkalog.storage.codec.compression import compress
from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.engine.writer import LogWriter
from kafkalog.storage.files.checkpoints import write_offset_checkpoint
from kafkalog.storage.files.leader_epoch import EpochEntry, write_leader_epoch_checkpoint
from kafkalog.storage.files.meta_properties import MetaProperties, write_meta_properties
from kafkalog.storage.files.names import log_file_name, offset_file_name, snapshot_file_name
from kafkalog.storage.files.partition_metadata import write_partition_metadata
from kafkalog.storage.files.producer_snapshot import ProducerSnapshot
from kafkalog.storage.io import dirview as dirview_module
from kafkalog.storage.io import fs as fs_module
from kafkalog.storage.log.segment import recover_segment
from kafkalog.storage.records import build_batch, build_end_txn_marker, iter_batches
from kafkalog.storage.records.builder import build_legacy
from kafkalog.storage.records.control import LEADER_CHANGE, control_key

TOPIC_ID = "l5y0MjLvQdypLcP9XmR7bw"
TOPIC_IDS = ["l5y0MjLvQdypLcP9XmR7bw", "pKnJ0cAhRMqJ0g3Tt0Vv0A", "MkU3OEVBNTcwNTJENDM2Qg"]
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
TS = 1_700_000_000_000


def hex_bytes(s: str) -> bytes:
    """Bytes written in hex with spaces anywhere (test vectors as docs/formats.md prints them)."""
    return bytes.fromhex(s.replace(" ", ""))


# ------------------------------------------------------------------------------------------------ batches


def numbered_batches(first: int, n: int, ts0: int = 1000, epoch: int = 0, per: int = 2,
                     value: bytes = b"v" * 30) -> list[bytes]:
    """``n`` v2 batches of ``per`` records from offset ``first``: record ``o`` has timestamp ``ts0 + o - first``,
    key ``k<j>`` (j = its index in the batch) and ``value``; partition leader epoch ``epoch``."""
    return [
        build_batch([(first + per * i + j, ts0 + per * i + j, b"k%d" % j, value) for j in range(per)],
                    base_offset=first + per * i, partition_leader_epoch=epoch)
        for i in range(n)
    ]


def kv_batch(offset: int, key: bytes | None, value: bytes | None, ts: int) -> bytes:
    """One record at ``offset`` (a tombstone when ``value`` is None)."""
    return build_batch([(offset, ts, key, value)], base_offset=offset)


def single_record_batches(recs: Sequence[tuple[bytes | None, bytes | None]], *, ts: int = TS,
                          control: bool = False) -> bytes:
    """One batch per ``(key, value)`` at offsets 0, 1, ...; ``control``: transactional control batches of
    producer 5 (as a coordinator writes them)."""
    out = bytearray()
    for i, (k, v) in enumerate(recs):
        out += build_batch([(i, ts, k, v)], is_control=control, producer_id=5 if control else -1,
                           producer_epoch=0 if control else -1, is_transactional=control)
    return bytes(out)


def offset_batches(offsets: Iterable[int], ts0: int = TS) -> list[bytes]:
    """One single-record batch per offset ``o``: timestamp ``ts0 + o``, key ``k<o % 3>``, value ``v<o>``."""
    return [build_batch([(o, ts0 + o, b"k%d" % (o % 3), b"v%d" % o)]) for o in offsets]


def batch_at(base: int, n: int = 5, ts0: int = TS, value: bytes = b"v" * 300) -> bytes:
    """One batch of ``n`` records from ``base`` (timestamps ``ts0 + base + i``, keys ``k<i>``)."""
    return build_batch([(None, ts0 + base + i, b"k%d" % i, value) for i in range(n)], base_offset=base)


def every_kind_of_batch(ts: int = TS) -> list[bytes]:
    """Offsets 0..8, one of each: v2 with headers and a null record, zstd transactional, a COMMIT marker, a
    KRaft control batch, a batch with a delete horizon, a v1 gzip wrapper, a v0 message."""
    return [
        build_batch([(0, ts, b"k", b"hello", [("h", b"x"), ("n", None)]), (1, ts + 1, None, None)],
                    partition_leader_epoch=3),
        build_batch([(2, ts + 2, b"k2", b"zz")], codec=4, producer_id=5, producer_epoch=1, base_sequence=0,
                    is_transactional=True),
        build_end_txn_marker(offset=3, producer_id=5, producer_epoch=1, coordinator_epoch=7, commit=True,
                             timestamp=ts),
        build_batch([(4, ts, control_key(LEADER_CHANGE), b"\x00\x01")], is_control=True),
        build_batch([(5, ts, b"t", None)], delete_horizon_ms=ts + 1000),
        build_legacy([(6, ts, None, b"a"), (7, ts, b"b", b"c")], magic=1, codec=1),
        build_legacy([(8, -1, None, b"v0")], magic=0),
    ]


def zstd_window_batches(ts: int = TS) -> dict[str, tuple[bytes, bool]]:
    """zstd batches whose frame asks for a large window, each with whether Kafka decodes it (its zstd reader
    refuses a window above 2^27 bytes unless the frame declares a content size of at most 16 KiB: see
    ``_ZSTD_WINDOW_MAX`` in ``storage/codec/zstd_frame.py``). The frame is kafkalog's own (Kafka's: no content
    size), its window descriptor byte rewritten, or a content size put in."""
    out = {}
    for name, n, wd, fcs, ok in [("no content size, window 2^27", 100, 0x88, False, True),
                                 ("no content size, window 2^28", 100, 0x90, False, False),
                                 ("no content size, window 1.5 GiB", 100, 0xA4, False, False),
                                 ("content size 5030, window 2^28", 20, 0x90, True, True),
                                 ("content size 25262, window 2^28", 100, 0x90, True, False)]:
        recs = [(i, ts + i, b"k%d" % i, (b"v%03d" % i) * 60, []) for i in range(n)]
        plain = build_batch(recs)[61:]
        frame = compress(4, plain)
        assert frame[4] == 0x00  # no content size, no checksum: the window descriptor is byte 5
        head = bytes([0x80, wd]) + len(plain).to_bytes(4, "little") if fcs else bytes([0x00, wd])
        out[name] = (build_batch(recs, codec=4, compressed_payload=frame[:4] + head + frame[6:], records_count=n), ok)
    return out


def legacy_message_sets(ts: int = TS) -> list[bytes]:
    """v0/v1 entries of every shape the decoders meet, each a message set of its own: for magic 0 and 1 plain
    messages and wrappers of every codec (gzip, snappy, lz4) with null and empty keys and values, LogAppendTime
    plain messages and wrappers, a wrapper at offset 0 (inner offsets taken as they are), a v1 wrapper holding
    v0 messages."""
    recs = [(None, ts + i, k, v) for i, (k, v) in enumerate([(b"k0", b"v0"), (None, b"x" * 40), (b"", None),
                                                              (b"key", b"")])]
    out = []
    for magic in (0, 1):
        for codec in (0, 1, 2, 3):
            out.append(build_legacy(recs, magic=magic, codec=codec, base_offset=100 + 10 * codec))
    for codec in (0, 1, 2, 3):
        out.append(build_legacy(recs, magic=1, codec=codec, base_offset=200 + 10 * codec, timestamp_type=1,
                                log_append_time=ts + 999))
    out.append(build_legacy(recs, magic=1, codec=2, base_offset=0, wrapper_offset=0))
    out.append(build_legacy(recs, magic=1, codec=1, base_offset=300, wrapper_offset=0, timestamp_type=1,
                            log_append_time=ts + 5))
    v0_inner = b"".join(build_legacy([(i, -1, b"a", b"b")], magic=0) for i in range(3))
    out.append(build_legacy([], magic=1, codec=1, wrapper_offset=402, wrapper_timestamp=ts,
                            compressed_payload=compress(1, v0_inner, magic=1)))
    return out


def legacy_segment_bytes(n: int, *, magic: int = 1, codec: int = 0, per: int = 1, value_size: int = 100,
                         ts0: int = TS) -> bytes:
    """``n`` records of message format ``magic`` as one segment's bytes: plain messages (``codec`` 0) or
    wrappers of ``per`` messages each (keys ``key-<i>``, values of ``value_size`` bytes, half random)."""
    import random

    rng = random.Random(n * 31 + codec)
    recs = [(i, ts0 + i, b"key-%06d" % i, rng.randbytes(value_size // 2).ljust(value_size, b"."))
            for i in range(n)]
    if codec == 0:
        return build_legacy(recs, magic=magic)
    return b"".join(build_legacy(recs[i:i + per], magic=magic, codec=codec) for i in range(0, n, per))


# ------------------------------------------------------------------------------------------------ segments


def _set_mtime(p: Path, mtime_ms: int) -> None:
    os.utime(p, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))


def write_segment(pdir: Path, base: int, batches: Iterable[bytes] | bytes, *, suffix: str = "",
                  rebuild_indexes: bool = False, interval: int = 4096, trim: bool = True,
                  preallocate: tuple[int, int] | None = None, index: bytes | None = None,
                  timeindex: bytes | None = None, empty_indexes: bool = False,
                  mtime_ms: int | None = None) -> Path:
    """``<base>.log<suffix>`` holding ``batches`` (``pdir`` created if needed); returns its path.

    * ``rebuild_indexes``: ``.index``/``.timeindex`` by the broker's recovery rule at ``interval`` (trimmed, or
      untrimmed to ``preallocate`` = (index bytes, time index bytes) as an active segment after a crash);
    * ``index``/``timeindex``: these bytes as the index files; ``empty_indexes``: 0-byte index files;
    * ``mtime_ms``: the ``.log``'s modification time."""
    log = batches if isinstance(batches, bytes) else b"".join(batches)
    pdir.mkdir(parents=True, exist_ok=True)
    p = pdir / (log_file_name(base) + suffix)
    p.write_bytes(log)
    if rebuild_indexes:
        r = recover_segment(log, base, index_interval_bytes=interval, on_overflow="stop")
        isize, tsize = preallocate if preallocate else (None, None)
        index = r.offset_index.to_bytes(trim=trim, size=None if trim else isize)
        timeindex = r.time_index.to_bytes(trim=trim, size=None if trim else tsize)
    if empty_indexes:
        index = timeindex = b""
    if index is not None:
        (pdir / (offset_file_name(base, ".index") + suffix)).write_bytes(index)
    if timeindex is not None:
        (pdir / (offset_file_name(base, ".timeindex") + suffix)).write_bytes(timeindex)
    if mtime_ms is not None:
        _set_mtime(p, mtime_ms)
    return p


def replace_segment(log: Path, how: str) -> None:
    """Change the segment file ``log`` under its name, as after a read was planned: ``swap`` (a new file of its
    first half renamed over it, the log cleaner's ``.cleaned`` -> ``.swap`` -> rename: a new inode, smaller),
    ``truncate`` (cut to its first half in place, as recovery does), ``rewrite`` (its bytes in a new file renamed
    over it, 2 s later: the same size, a new inode and modification time)."""
    data = log.read_bytes()
    mtime = log.stat().st_mtime_ns
    if how == "truncate":
        os.truncate(log, len(data) // 2)
        return
    new = log.with_name(log.name + ".swap")
    new.write_bytes(data if how == "rewrite" else data[:len(data) // 2])
    os.utime(new, ns=(mtime + 2_000_000_000, mtime + 2_000_000_000))
    os.replace(new, log)


def single_record_segment(pdir: Path, base: int, n: int, ts: int, value: bytes = b"v" * 50) -> Path:
    """``n`` single-record batches from ``base``, all with timestamp ``ts`` and key ``k``; no indexes."""
    return write_segment(pdir, base, [build_batch([(base + i, ts, b"k", value)], base_offset=base + i)
                                      for i in range(n)])


def indexed_segment(pdir: Path, base: int = 100, n: int = 12, per: int = 3,
                    interval: int = 300) -> tuple[bytes, list[tuple[int, int, int]]]:
    """``n`` batches of ``per`` records from ``base`` (timestamps 1000 + 10 i + j, 50-byte values) with trimmed
    indexes at ``interval``; returns the log and ``(position, last offset, max timestamp)`` per batch."""
    pdir.mkdir(parents=True, exist_ok=True)
    log = b""
    info = []
    for i in range(n):
        first = base + i * per
        ts = 1_000 + 10 * i
        b = build_batch([(first + j, ts + j, b"k%d" % j, b"v" * 50) for j in range(per)], base_offset=first)
        info.append((len(log), first + per - 1, ts + per - 1))
        log += b
    write_segment(pdir, base, log, rebuild_indexes=True, interval=interval)
    return log, info


# ------------------------------------------------------------------------------------------------ partitions


def write_partition_files(pdir: Path, *, epochs: Sequence[tuple[int, int]] | None = None,
                          topic_id: str | None = None, snapshots: Iterable[int] = ()) -> Path:
    """``leader-epoch-checkpoint`` (``(epoch, start offset)`` pairs), ``partition.metadata`` and empty producer
    snapshots at ``snapshots``."""
    if epochs is not None:
        write_leader_epoch_checkpoint(pdir / "leader-epoch-checkpoint", [EpochEntry(e, o) for e, o in epochs])
    if topic_id is not None:
        write_partition_metadata(pdir / "partition.metadata", topic_id)
    for offset in snapshots:
        (pdir / snapshot_file_name(offset)).write_bytes(ProducerSnapshot().to_bytes())
    return pdir


def three_segment_partition(root: Path, name: str = "orders-3") -> Path:
    """Three segments: [0..19], [20..39] (epoch 1 from 30), active [40..49] with preallocated indexes;
    snapshots at 40 and 50; indexes at interval 200."""
    d = root / name
    d.mkdir(parents=True)
    write_segment(d, 0, numbered_batches(0, 10), rebuild_indexes=True, interval=200)
    write_segment(d, 20, numbered_batches(20, 5, 2000) + numbered_batches(30, 5, 3000, epoch=1),
                  rebuild_indexes=True, interval=200)
    write_segment(d, 40, numbered_batches(40, 5, 4000, epoch=1), rebuild_indexes=True, interval=200, trim=False,
                  preallocate=(800, 1200))  # active: preallocated indexes
    return write_partition_files(d, epochs=[(0, 0), (1, 30)], topic_id=TOPIC_ID, snapshots=(40, 50))


def aged_partition(root: Path, now: int) -> Path:
    """``root/d/t-0`` with three segments of 5 records: [0..4] 10 s, [5..9] 5 s and the active [10..14] 1 s
    older than ``now`` (timestamps only: no indexes, no checkpoints)."""
    pdir = root / "d" / "t-0"
    pdir.mkdir(parents=True)
    for base, age in ((0, 10_000), (5, 5_000), (10, 1_000)):
        single_record_segment(pdir, base, 5, now - age)
    return pdir


def indexed_partition(root: Path, name: str, n: int = 20, topic_id: str = TOPIC_IDS[0]) -> Path:
    """One segment of ``n`` batches of 2 records (offsets 0 .. 2n-1), indexes at interval 256, epoch 0 from 0,
    an empty snapshot at the log end."""
    d = root / name
    d.mkdir(parents=True)
    log = b"".join(build_batch([(i * 2 + j, 1000 + i, b"k", b"v" * 40) for j in range(2)], base_offset=i * 2,
                               partition_leader_epoch=0) for i in range(n))
    write_segment(d, 0, log, rebuild_indexes=True, interval=256)
    return write_partition_files(d, epochs=[(0, 0)], topic_id=topic_id, snapshots=(2 * n,))


# ------------------------------------------------------------------------------------------------ data dirs


def write_data_dir_files(root: Path, *, meta: Mapping | None = None,
                         recovery: Mapping | None = None, log_start: Mapping | None = None,
                         replication: Mapping | None = None, cleaner: Mapping | None = None,
                         lock: bool = False, clean_shutdown: bytes | None = None) -> Path:
    """The data dir files: ``meta.properties`` from ``meta`` (``MetaProperties.new`` keyword arguments), the four
    offset checkpoints (``{(topic, partition): offset}``; None leaves a file out), ``.lock`` and the
    clean-shutdown marker's bytes."""
    root.mkdir(parents=True, exist_ok=True)
    if meta is not None:
        write_meta_properties(root / "meta.properties", MetaProperties.new(**meta))
    for name, entries in (("recovery-point-offset-checkpoint", recovery), ("log-start-offset-checkpoint", log_start),
                          ("replication-offset-checkpoint", replication), ("cleaner-offset-checkpoint", cleaner)):
        if entries is not None:
            write_offset_checkpoint(root / name, dict(entries))
    if lock:
        (root / ".lock").touch()
    if clean_shutdown is not None:
        (root / ".kafka_cleanshutdown").write_bytes(clean_shutdown)
    return root


KRAFT_META = {"version": 1, "cluster_id": CLUSTER_ID, "node_id": 1, "now": 0}


def three_segment_data_dir(root: Path) -> Path:
    """:func:`three_segment_partition` ``orders-3`` in a KRaft data dir with all checkpoints, a ``.lock`` and a
    clean-shutdown marker of broker epoch 5."""
    root.mkdir(parents=True, exist_ok=True)
    three_segment_partition(root)
    return write_data_dir_files(root, meta=KRAFT_META, recovery={("orders", 3): 40}, log_start={("orders", 3): 4},
                                replication={("orders", 3): 50}, cleaner={}, lock=True,
                                clean_shutdown=b'{"version":0,"brokerEpoch":5}')


def multi_partition_data_dir(root: Path, partitions: int = 4) -> Path:
    """``orders-0..`` (:func:`indexed_partition` of 10 + p batches) and ``payments.v1-0`` (another topic id), with
    recovery points and high watermarks at the log ends."""
    root.mkdir(parents=True)
    for p in range(partitions):
        indexed_partition(root, f"orders-{p}", n=10 + p)
    indexed_partition(root, "payments.v1-0", topic_id=TOPIC_IDS[1])
    rp = {("orders", p): 2 * (10 + p) for p in range(partitions)} | {("payments.v1", 0): 40}
    return write_data_dir_files(root, meta=KRAFT_META, recovery=rp, replication=rp, log_start={}, cleaner={})


def mixed_format_data_dir(root: Path) -> Path:
    """``orders-7``: segment 0 with a v1 message set and a gzip v2 batch (epoch 3), segment 10 with a zstd batch
    (epoch 5); checkpoints: recovery 10, log start 1, clean point 4, high watermark 11; no meta.properties."""
    d = root / "orders-7"
    d.mkdir(parents=True)
    seg0 = build_legacy([(0, 1000, b"a", b"x"), (1, 1001, b"b", b"y")], magic=1, codec=0, base_offset=0) + \
        build_batch([(2, 1002, b"c", b"z"), (3, 1003, None, b"w")], base_offset=2, codec=1, partition_leader_epoch=3)
    seg1 = build_batch([(10, 2000, b"k", b"v")], base_offset=10, codec=4, partition_leader_epoch=5)
    write_segment(d, 0, seg0)
    write_segment(d, 10, seg1)
    write_partition_files(d, epochs=[(3, 2), (5, 10)], topic_id=TOPIC_ID)
    return write_data_dir_files(root, recovery={("orders", 7): 10}, log_start={("orders", 7): 1},
                                cleaner={("orders", 7): 4}, replication={("orders", 7): 11})


def writer_data_dir(root: Path, codec: int = 0, t0: int = TS) -> Path:
    """Written through ``LogWriter`` as a leader appends (``segment.bytes`` 4000): ``orders-0`` with 30 batches of
    3 records with headers (epoch 2), then a committed transaction of producer 9; ``audit-0`` with one record."""
    cfg = LogConfig.from_topic_props({"segment.bytes": 4000})
    with LogWriter(root / "orders-0", cfg, topic_id=TOPIC_ID, leader_epoch=2, now_ms=t0) as w:
        for i in range(30):
            w.append(build_batch([(None, t0 + i * 10 + j, b"k%d" % j, b"v%d" % i * 20, [("h", b"x"), ("n", None)])
                                  for j in range(3)], codec=codec))
        w.append(build_batch([(None, t0 + 500, b"t", b"txn")], producer_id=9, producer_epoch=1, base_sequence=0,
                             is_transactional=True))
        w.append(build_end_txn_marker(offset=0, producer_id=9, producer_epoch=1, coordinator_epoch=4, commit=True,
                                      timestamp=t0 + 501))
    with LogWriter(root / "audit-0", cfg, topic_id="AAAAAAAAAAAAAAAAAAAAAQ", leader_epoch=0, now_ms=t0) as w:
        w.append(build_batch([(None, t0, None, b"a")]))
    return root


# ------------------------------------------------------------------------------------------------ generated data

BASE_TS = TS


def generated_record(i: int, *, headers: bool, value_size: int = 40) -> tuple:
    """Record ``i`` of a generated partition: null keys and values now and then, headers on every third."""
    key = None if i % 7 == 3 else f"key-{i % 101}".encode()
    value = None if i % 13 == 5 else (f"value-{i}-".encode() * (value_size // 8 + 1))[:value_size]
    hs = [("h", f"{i}".encode()), ("n", None)] if headers and i % 3 == 0 else []
    return (None, BASE_TS + i * 10 + (i % 5) * 3, key, value, hs)


def generated_partition(pdir: str | os.PathLike, n: int, *, batch_records: int = 50, codec: int = 0,
                        segment_bytes: int | None = None, headers: bool = True, value_size: int = 40,
                        producer_id: int = -1, first: int = 0) -> None:
    """``n`` :func:`generated_record` s in batches of ``batch_records``, appended as a leader (epoch 3) would;
    ``producer_id``: idempotent batches with sequences; ``first``: the records from ``first`` on, appended to
    what the partition holds (a partition grown by calls with ``first`` = the records so far)."""
    props = {"segment.bytes": str(segment_bytes)} if segment_bytes else {}
    cfg = LogConfig.from_topic_props(props) if props else LogConfig()
    with LogWriter(pdir, cfg, leader_epoch=3, now_ms=BASE_TS, fsync=False) as w:
        seq = first
        for start in range(first, first + n, batch_records):
            recs = [generated_record(i, headers=headers, value_size=value_size)
                    for i in range(start, min(first + n, start + batch_records))]
            kw = {}
            if producer_id >= 0:
                kw = {"producer_id": producer_id, "producer_epoch": 0, "base_sequence": seq}
                seq += len(recs)
            w.append_records(recs, codec=codec, **kw)


def corrupt_generated_partition(pdir: Path, n: int = 500, batch: int = 3) -> tuple[Path, int]:
    """A :func:`generated_partition` of ``n`` records (batches of 50) whose first segment's batch number ``batch``
    has a flipped byte inside its CRC-covered bytes: ``(that .log file, the batch's position)``."""
    generated_partition(pdir, n, batch_records=50)
    log = pdir / log_file_name(0)
    data = bytearray(log.read_bytes())
    pos = [b.position for b in iter_batches(bytes(data))][batch]
    data[pos + 100] ^= 0xFF
    log.write_bytes(bytes(data))
    return log, pos


def every_codec_data_dir(root: Path) -> Path:
    """``plain-0`` and ``plain-1`` (4000 idempotent records of 300 bytes, 1 MiB segments), ``gz-0``, ``snappy-0``,
    ``lz4-0`` and ``zstd-0`` (1500 records in batches of 100), and ``legacy-0``: v0 and v1 messages and a gzip v1
    wrapper (5 records each); no data dir files."""
    generated_data_dir(root, {"plain": 2}, 4000, segment_bytes=1 << 20, value_size=300, producer_id=42)
    for codec, name in ((1, "gz"), (2, "snappy"), (3, "lz4"), (4, "zstd")):
        generated_partition(root / f"{name}-0", 1500, codec=codec, batch_records=100)
    data = b""
    for i, magic in enumerate((0, 1, 1)):
        recs = [(None, BASE_TS + j, f"k{j}".encode(), f"v{j}".encode()) for j in range(5)]
        data += build_legacy(recs, magic=magic, codec=1 if i == 2 else 0, base_offset=i * 5)
    write_segment(root / "legacy-0", 0, data)
    return root


def generated_data_dir(root: str | os.PathLike, layout: dict[str, int], n: int, **kw) -> Path:
    """``layout`` maps topic -> partition count; every partition gets ``n`` records (:func:`generated_partition`
    options in ``kw``)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for topic, parts in layout.items():
        for p in range(parts):
            generated_partition(root / f"{topic}-{p}", n, **kw)
    return root


# ------------------------------------------------------------------------------------------ internal topics

RLM_SEGMENT_ID = "Zf3nTQk8QgGJ1Ji0aW4Kxw"


def remote_log_metadata_values(topic: str = "tiered", topic_id: str = TOPIC_ID, partition: int = 0,
                               segment_id: str = RLM_SEGMENT_ID) -> list[bytes]:
    """``__remote_log_metadata`` record values as ``RemoteLogMetadataSerde`` writes them: a segment's
    COPY_SEGMENT_STARTED metadata, its COPY_SEGMENT_FINISHED update, DELETE_PARTITION_MARKED, and a snapshot
    record (api keys 0, 1, 2, 3)."""
    from kafkalog.storage.decoders.common import kafka_str_to_uuid
    from kafkalog.storage.decoders.remote_log_metadata import encode_remote_log_metadata

    tip = {"name": topic, "id": kafka_str_to_uuid(topic_id), "partition": partition}
    sid = {"topicIdPartition": tip, "id": kafka_str_to_uuid(segment_id)}
    epochs = [{"leaderEpoch": 0, "offset": 0}, {"leaderEpoch": 2, "offset": 7}]
    return [
        encode_remote_log_metadata(0, {"remoteLogSegmentId": sid, "startOffset": 0, "endOffset": 9, "brokerId": 1,
                                       "maxTimestampMs": TS + 9, "eventTimestampMs": TS + 100,
                                       "segmentLeaderEpochs": epochs, "segmentSizeInBytes": 1234,
                                       "customMetadata": None, "remoteLogSegmentState": 0, "txnIndexEmpty": True}),
        encode_remote_log_metadata(1, {"remoteLogSegmentId": sid, "brokerId": 1, "eventTimestampMs": TS + 200,
                                       "customMetadata": b"\x01\x02", "remoteLogSegmentState": 1}),
        encode_remote_log_metadata(2, {"topicIdPartition": tip, "brokerId": 3000, "eventTimestampMs": TS + 300,
                                       "remotePartitionDeleteState": 0}),
        encode_remote_log_metadata(3, {"segmentId": kafka_str_to_uuid(segment_id), "startOffset": 0, "endOffset": 9,
                                       "brokerId": 1, "maxTimestampMs": TS + 9, "eventTimestampMs": TS + 200,
                                       "segmentLeaderEpochs": epochs, "segmentSizeInBytes": 1234,
                                       "customMetadata": None, "remoteLogSegmentState": 1}),
    ]


def remote_log_metadata_partition(root: Path, partition: int, values: Sequence[bytes | None]) -> Path:
    """``root/__remote_log_metadata-<partition>``: one null-key record per value from offset 0 (as the RLMM
    produces them), indexes rebuilt."""
    d = root / f"__remote_log_metadata-{partition}"
    write_segment(d, 0, [build_batch([(i, TS + i, None, v)], base_offset=i) for i, v in enumerate(values)],
                  rebuild_indexes=True)
    return write_partition_files(d, epochs=[(0, 0)], topic_id=TOPIC_IDS[1])


# ------------------------------------------------------------------------------------------- object storage


def s3_upload(local: str | os.PathLike, endpoint: str, key: str) -> str:
    """``local`` (a file tree) copied to the S3 server at ``endpoint`` (a local moto server: the ``s3_endpoint``
    fixture) as ``s3://logs/<key>``, the bucket made if needed; returns that URL."""
    import pyarrow.fs as pafs  # (the spark extra)

    fs = pafs.S3FileSystem(endpoint_override=endpoint.removeprefix("http://"), scheme="http", access_key="test",
                           secret_key="test", region="us-east-1", allow_bucket_creation=True)
    fs.create_dir("logs")
    pafs.copy_files(os.fspath(local), f"logs/{key}", source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=fs)
    return f"s3://logs/{key}"


class UrlReads:
    """What is read through the filesystem seam while :func:`spy_url_reads` watches: ``windows`` has ``(path, bytes
    read, file size)`` of each window of a file that is not memory-mapped (a file under a URL), ``whole`` the paths
    a :class:`~kafkalog.storage.io.dirview.DirView` read whole as small files."""

    def __init__(self) -> None:
        self.windows: list[tuple[str, int, int]] = []
        self.whole: list[str] = []

    def logs(self) -> list[tuple[int, int]]:
        """``(bytes read, file size)`` of each window of a ``.log``."""
        return [(n, size) for path, n, size in self.windows if path.endswith(".log")]

    def clear(self) -> None:
        self.windows.clear()
        self.whole.clear()


def spy_url_reads(monkeypatch) -> UrlReads:
    """Record the seam's reads of files under a URL (:class:`UrlReads`) for the rest of a test (``monkeypatch``:
    pytest's), so it can check that a ``.log`` is read in windows, never whole."""
    reads = UrlReads()
    view, read_bytes = fs_module.SegmentFile.view, dirview_module.read_bytes

    def spy_view(self, start, length):
        if not self.is_mapped:
            reads.windows.append((self.path, min(length, self.size - start), self.size))
        return view(self, start, length)

    def spy_whole(spec, path, limit):
        reads.whole.append(path)
        return read_bytes(spec, path, limit)

    monkeypatch.setattr(fs_module.SegmentFile, "view", spy_view)
    monkeypatch.setattr(dirview_module, "read_bytes", spy_whole)
    return reads


# ------------------------------------------------------------------------------------------- tiered storage


def local_tiered_storage(root: Path, pdir: Path, *, topic: str | None = None, partition: int | None = None,
                         topic_id: str = TOPIC_ID, segment_ids: Sequence[str] | None = None,
                         skip_last: bool = True) -> list[tuple[str, int, int]]:
    """Upload the segments of the partition dir ``pdir`` into a ``LocalTieredStorage`` tree under ``root``
    (``root/kafka-tiered-storage/<topic>-<partition>-<topicId>/<start:020d>-<uuid>.<suffix>``), as
    ``RemoteLogManager.copyLogSegment`` does: the ``.log``, its ``.index``/``.timeindex`` (rebuilt by the
    recovery rule when absent), ``.txnindex`` if any, the epoch cache up to the segment's end as
    ``.leader_epoch_checkpoint`` and an empty producer snapshot. The active (last) segment is not uploaded
    unless ``skip_last`` is False. Returns ``(segment id, start offset, end offset)`` per uploaded segment."""
    import base64
    import uuid as _uuid

    from kafkalog.storage.files.segment import Segment
    from kafkalog.storage.log.leader_epoch_cache import LeaderEpochCache
    from kafkalog.storage.log.topic_partition import parse_topic_partition_name

    tp = parse_topic_partition_name(pdir.name)
    topic = topic or tp.topic
    partition = tp.partition if partition is None else partition
    d = root / "kafka-tiered-storage" / f"{topic}-{partition}-{topic_id}"
    d.mkdir(parents=True, exist_ok=True)
    logs = sorted(p for p in pdir.iterdir() if p.name.endswith(".log"))
    if skip_last:
        logs = logs[:-1]
    out = []
    for i, lp in enumerate(logs):
        sid = (segment_ids[i] if segment_ids else
               base64.urlsafe_b64encode(_uuid.UUID(int=0x5E6 << 64 | i + 1).bytes).decode().rstrip("="))
        with Segment(lp) as seg:
            base, end = seg.base_offset, seg.read_next_offset() - 1
            prefix = f"{base:020d}-{sid}"
            data = lp.read_bytes()
            (d / f"{prefix}.log").write_bytes(data)
            for suffix in (".index", ".timeindex", ".txnindex"):
                src = lp.with_suffix(suffix)
                if src.exists():
                    (d / f"{prefix}{suffix}").write_bytes(src.read_bytes())
            if not lp.with_suffix(".index").exists():
                r = recover_segment(data, base, on_overflow="stop")
                (d / f"{prefix}.index").write_bytes(r.offset_index.to_bytes())
                (d / f"{prefix}.timeindex").write_bytes(r.time_index.to_bytes())
        cache = LeaderEpochCache.load(pdir, auto_flush=False) if (pdir / "leader-epoch-checkpoint").exists() \
            else LeaderEpochCache(None, [], auto_flush=False)
        cache.truncate_from_end(end + 1)
        (d / f"{prefix}.leader_epoch_checkpoint").write_bytes(cache.to_bytes())
        (d / f"{prefix}.snapshot").write_bytes(ProducerSnapshot().to_bytes())
        out.append((sid, base, end))
    return out


def remote_segment_metadata_values(segments: Sequence[tuple[str, int, int]], *, topic: str = "tiered",
                                   topic_id: str = TOPIC_ID, partition: int = 0,
                                   final_state: int = 1) -> list[bytes]:
    """For each ``(segment id, start, end)``: the ``RemoteLogSegmentMetadata`` (COPY_SEGMENT_STARTED) and an
    update to ``final_state`` (1 COPY_SEGMENT_FINISHED, 3 DELETE_SEGMENT_FINISHED) as ``__remote_log_metadata``
    values."""
    from kafkalog.storage.decoders.common import kafka_str_to_uuid
    from kafkalog.storage.decoders.remote_log_metadata import encode_remote_log_metadata

    tip = {"name": topic, "id": kafka_str_to_uuid(topic_id), "partition": partition}
    out = []
    for sid, start, end in segments:
        rid = {"topicIdPartition": tip, "id": kafka_str_to_uuid(sid)}
        out.append(encode_remote_log_metadata(0, {
            "remoteLogSegmentId": rid, "startOffset": start, "endOffset": end, "brokerId": 1,
            "maxTimestampMs": TS, "eventTimestampMs": TS, "segmentLeaderEpochs": [{"leaderEpoch": 0, "offset": start}],
            "segmentSizeInBytes": 0, "customMetadata": None, "remoteLogSegmentState": 0, "txnIndexEmpty": True}))
        out.append(encode_remote_log_metadata(1, {"remoteLogSegmentId": rid, "brokerId": 1, "eventTimestampMs": TS,
                                                  "customMetadata": None, "remoteLogSegmentState": final_state}))
    return out

# ------------------------------------------------------------------------------------------------ scale
def _scale_topic_id(i: int) -> str:
    import base64

    return base64.urlsafe_b64encode(b"scale" + i.to_bytes(11, "big")).rstrip(b"=").decode()


def many_partitions_data_dir(root: str | os.PathLike, partitions: int, *, per_topic: int = 100) -> Path:
    """A KRaft data dir of ``partitions`` small healthy partitions (``scale-NNNNN-P``, ``per_topic`` per topic):
    one segment of one batch of 5 records each, with its indexes, leader epoch, topic id and checkpoint entries,
    as a cleanly shut-down broker leaves them. Fast to build (the files of one partition are computed once and
    copied): 100,000 partitions take about a minute."""
    import tempfile

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    log = build_batch([(i, TS + i, b"k%d" % i, b"v" * 100) for i in range(5)], base_offset=0, partition_leader_epoch=0)
    with tempfile.TemporaryDirectory() as t:  # one partition through the library's writers; its bytes copied
        proto = Path(t)
        write_segment(proto, 0, log, rebuild_indexes=True, trim=True)
        write_partition_files(proto, epochs=[(0, 0)], snapshots=(5,))
        files = {p.name: p.read_bytes() for p in proto.iterdir()}
        write_partition_metadata(proto / "partition.metadata", TOPIC_ID)
        meta = (proto / "partition.metadata").read_bytes()
    ends = {}
    topics = (partitions + per_topic - 1) // per_topic
    for t in range(topics):
        topic = f"scale-{t:05d}"
        tmeta = meta.replace(TOPIC_ID.encode(), _scale_topic_id(t).encode())
        for p in range(min(per_topic, partitions - t * per_topic)):
            pdir = root / f"{topic}-{p}"
            pdir.mkdir()
            for name, data in files.items():
                (pdir / name).write_bytes(data)
            (pdir / "partition.metadata").write_bytes(tmeta)
            ends[(topic, p)] = 5
    return write_data_dir_files(root, meta=KRAFT_META, recovery=ends, log_start={}, replication=ends, cleaner={},
                                clean_shutdown=b'{"version":0,"brokerEpoch":5}')


def repeated_batch(batch: bytes, copies: int, records: int, first: int = 0) -> bytes:
    """``copies`` copies of the v2 ``batch`` (of ``records`` records) one after the other, with consecutive base
    offsets from ``first`` (the base offset is outside the CRC: every copy stays valid): a large log, fast."""
    return b"".join((first + j * records).to_bytes(8, "big") + batch[8:] for j in range(copies))


def big_segment_data_dir(root: str | os.PathLike, size: int, *, record_bytes: int = 8192,
                         batch_records: int = 64) -> Path:
    """A KRaft data dir with one partition ``big-0`` whose only segment holds about ``size`` bytes of v2 batches
    (uncompressed records of ``record_bytes``): one batch is built, its copies get new base offsets (outside the
    CRC) and are written in large chunks, about 1 GB/s. No indexes (positions past 2 GiB do not fit Kafka's int32
    index entries: a segment this size is out of spec, which a broker never writes but a tool must survive)."""
    import random

    root = Path(root)
    pdir = root / "big-0"
    pdir.mkdir(parents=True)
    rnd = random.Random(17)
    value = bytes(rnd.getrandbits(8) for _ in range(record_bytes))
    batch = build_batch([(i, TS + i, b"key-%d" % i, value) for i in range(batch_records)], base_offset=0,
                        partition_leader_epoch=0)
    per_chunk = max(1, (64 << 20) // len(batch))
    count = max(1, size // len(batch))
    offset = 0
    with open(pdir / log_file_name(0), "wb") as f:
        while count:
            k = min(per_chunk, count)
            f.write(repeated_batch(batch, k, batch_records, offset))
            offset += k * batch_records
            count -= k
    write_partition_files(pdir, epochs=[(0, 0)], topic_id=TOPIC_ID)
    return write_data_dir_files(root, meta=KRAFT_META, recovery={("big", 0): offset}, log_start={},
                                replication={("big", 0): offset}, cleaner={},
                                clean_shutdown=b'{"version":0,"brokerEpoch":5}')


# ------------------------------------------------------------------------------------------ certify corpus

CERTIFY_CONFIG = {"segment.bytes": 2000, "index.interval.bytes": 500}


def certify_partition(pdir: str | os.PathLike, *, topic_id: str, open_txn: bool = False) -> Path:
    """A well-formed partition as a leader (epoch 1) writes it through ``LogWriter`` (``segment.bytes`` 2000,
    ``index.interval.bytes`` 500: four segments with index entries): 12 batches of 4 records with headers and
    null keys now and then, 3 idempotent batches of producer 7, a committed transaction of producer 9 (2
    batches + COMMIT), an aborted one of producer 10 (2 batches + ABORT), more plain batches and, with
    ``open_txn``, a transaction of producer 11 left open at the end (no marker). Closed as a broker closes it
    (snapshot at the log end offset, trimmed indexes)."""
    pdir = Path(pdir)
    t0 = TS
    cfg = LogConfig.from_topic_props(CERTIFY_CONFIG)
    with LogWriter(pdir, cfg, topic_id=topic_id, leader_epoch=1, now_ms=t0 + 100_000) as w:
        n = 0

        def recs(k: int) -> list[tuple]:
            nonlocal n
            out = [(None, t0 + (n + j) * 10, None if (n + j) % 5 == 2 else b"k%d" % ((n + j) % 7),
                    b"value-%d-" % (n + j) * 6, [("h", b"%d" % (n + j))] if (n + j) % 3 == 0 else [])
                   for j in range(k)]
            n += k
            return out

        for _ in range(6):
            w.append(build_batch(recs(4)))
        for i in range(3):
            w.append(build_batch(recs(3), producer_id=7, producer_epoch=0, base_sequence=3 * i))
        for pid, commit in ((9, True), (10, False)):
            for i in range(2):
                w.append(build_batch(recs(2), producer_id=pid, producer_epoch=0, base_sequence=2 * i,
                                     is_transactional=True))
            w.append(build_end_txn_marker(offset=0, producer_id=pid, producer_epoch=0, coordinator_epoch=3,
                                          commit=commit, timestamp=t0 + n * 10))
        for _ in range(6):
            w.append(build_batch(recs(4)))
        if open_txn:
            w.append(build_batch(recs(2), producer_id=11, producer_epoch=0, base_sequence=0, is_transactional=True))
    return pdir


def certify_data_dir(root: str | os.PathLike, topics: Sequence[str], *, open_txn: Iterable[str] = ()) -> Path:
    """A KRaft data dir (no ``__cluster_metadata``) with one :func:`certify_partition` ``<topic>-0`` per topic
    (topic ids ``_scale_topic_id(i)``), flushed as a cleanly stopped broker leaves it: checkpoints and the
    clean-shutdown marker written by ``kafkalog flush``."""
    from kafkalog.storage.engine.flush import plan_flush
    from kafkalog.storage.engine.plan import apply

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    opened = set(open_txn)
    for i, topic in enumerate(topics):
        certify_partition(root / f"{topic}-0", topic_id=_scale_topic_id(1000 + i), open_txn=topic in opened)
    write_data_dir_files(root, meta=KRAFT_META)
    apply(plan_flush([root], now_ms=TS + 200_000), backup=False)
    return root
