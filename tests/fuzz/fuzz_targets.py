"""Fuzz targets and input strategies shared by the quick (always-on) and the slow fuzz runs.

Every target feeds hostile bytes to one parser and checks the contract: the parser either succeeds or raises
:class:`KafkaLogError` (``CorruptRecordError``/``CompressionError``) carrying a byte position -- never another
exception, never a hang, never an allocation beyond the decompression limit.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

from hypothesis import strategies as st

from kafkalog.storage.codec import compression
from kafkalog.storage.codec.varint import read_uvarint, read_varint, read_varlong
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.records import LogScanner, build_batch, build_end_txn_marker, build_legacy, rebuild
from kafkalog.storage.records.legacy import LegacyBatch

TS = 1_700_000_000_000
LIMIT = 1 << 20  # decompression limit used while fuzzing: a bomb must stop here


def _recs(n: int, headers: bool = True):
    return [(i, TS + i, b"key%d" % i if i % 3 else None, (b"v" * (i * 7)) if i % 4 else None,
             [("h", b"x"), ("n", None)] if headers and i % 2 else []) for i in range(n)]


def seeds() -> list[bytes]:
    """Valid inputs of every kind, the starting points for mutation."""
    out = []
    for codec in (0, 1, 2, 3, 4):
        out.append(build_batch(_recs(6), codec=codec, producer_id=4, producer_epoch=1, base_sequence=0))
    out.append(build_end_txn_marker(offset=6, producer_id=4, producer_epoch=1, coordinator_epoch=2, commit=True,
                                    timestamp=TS))
    out.append(build_batch([], base_offset=7, last_offset_delta=3, max_timestamp=TS))
    for magic in (0, 1):
        for codec in (0, 1, 2, 3):
            out.append(build_legacy([(o, t, k, v) for o, t, k, v, _ in _recs(4, False)], magic=magic,
                                    codec=codec))
    return out


INTERESTING_I32 = [-1, -2, 0, 1, 13, 14, 48, 49, 60, 61, 0x7FFFFFFF, -0x80000000, 0x10000, 1 << 24]


@st.composite
def mutated(draw, base: list[bytes] | None = None) -> bytes:
    """A valid seed (or a concatenation of two) with a few structured mutations applied."""
    pool = base if base is not None else SEEDS
    data = bytearray(draw(st.sampled_from(pool)))
    if draw(st.integers(0, 4)) == 0:
        data += draw(st.sampled_from(pool))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.integers(0, 5))
        if not data:
            data += draw(st.binary(min_size=1, max_size=64))
            continue
        i = draw(st.integers(0, len(data) - 1))
        if op == 0:  # byte flip
            data[i] = draw(st.integers(0, 255))
        elif op == 1:  # truncate
            del data[i:]
        elif op == 2 and i + 4 <= len(data):  # an interesting int32 (length, count, size fields)
            struct.pack_into(">i", data, i, draw(st.sampled_from(INTERESTING_I32)))
        elif op == 3:  # over-long varint / continuation bytes
            data[i:i] = b"\xff" * draw(st.integers(1, 12))
        elif op == 4:  # random insertion
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        else:  # delete a span
            del data[i:i + draw(st.integers(1, 16))]
    return bytes(data)


SEEDS = seeds()


def _check(e: KafkaLogError) -> None:
    assert e.reason, "an error must say what was expected"
    assert e.position is not None, f"an error must carry a byte position: {e!r}"


def scan_target(data: bytes) -> None:
    """LogScanner + every batch accessor + deep iteration + rebuild of what parses."""
    data = bytes(data)
    scanner = LogScanner(data, path="fuzz.log", decompress_limit=LIMIT)
    try:
        for b in scanner:
            b.is_valid()
            b.compute_crc()
            try:
                b.base_offset, b.last_offset, b.max_timestamp, b.timestamp_type, b.codec  # noqa: B018
                b.producer_id, b.base_sequence, b.last_sequence, b.delete_horizon_ms, b.is_control  # noqa: B018
                recs = b.records()
                if isinstance(b, LegacyBatch):
                    b.inner_messages()
                else:
                    list(b.iter_record_tuples())
                if not isinstance(b, LegacyBatch) and b.codec == 0 and b.magic == 2:
                    # what parses rebuilds into a batch that parses to the same records (the bytes may
                    # differ only where the input was non-canonical, e.g. over-long varints)
                    (again,) = LogScanner(rebuild(b, recs))
                    assert again.is_valid() and again.records() == recs
            except KafkaLogError as e:
                _check(e)
    except KafkaLogError as e:
        _check(e)
    assert scanner.stop_position <= len(data)
    _scan_crc_same(data)


def _scan_crc_same(data: bytes) -> None:
    """scan_crc with the compiled core (one native pass) and without (LogScanner + is_valid): same outcome."""
    from kafkalog.storage.records import scan_crc

    def outcome(native: bool):
        try:
            s = scan_crc(data, path="fuzz.log", native=native)
            return list(s.positions), bytes(s.valid), s.stop_position, s.stop_reason
        except KafkaLogError as e:
            _check(e)
            return type(e).__name__, str(e)

    assert outcome(True) == outcome(False)


def decompress_target(codec: int, magic: int, data: bytes) -> None:
    try:
        out = compression.decompress(codec, data, magic=magic, limit=LIMIT)
        assert len(out) <= LIMIT
    except KafkaLogError as e:
        _check(e)


def varint_target(data: bytes) -> None:
    for fn in (read_uvarint, read_varint, read_varlong):
        try:
            _, p = fn(data, 0, len(data))
            assert 0 < p <= len(data)
        except KafkaLogError as e:
            _check(e)


def compressed_payloads() -> list[tuple[int, int, bytes]]:
    """(codec, magic, payload) seeds for the decompressors."""
    raw = b"".join(b"record-%d " % i * 3 for i in range(300))
    out = []
    for codec in (1, 2, 3, 4):
        for magic in ((0, 1, 2) if codec != 4 else (2,)):
            out.append((codec, magic, compression.compress(codec, raw, magic=magic)))
    out.append((2, 2, bytes(__import__("cramjam").snappy.compress_raw(raw))))  # plain snappy block
    return out


# ------------------------------------------------------------------------------ a data dir's small files
def _small_file_parsers() -> dict[str, Callable[[bytes], object]]:
    from kafkalog.storage.files.checkpoints import OffsetCheckpoint
    from kafkalog.storage.files.clean_shutdown import CleanShutdownMarker
    from kafkalog.storage.files.leader_epoch import LeaderEpochCheckpoint
    from kafkalog.storage.files.meta_properties import MetaProperties
    from kafkalog.storage.files.partition_metadata import PartitionMetadata
    from kafkalog.storage.files.producer_snapshot import ProducerSnapshot
    from kafkalog.storage.files.quorum_state import QuorumState

    return {
        "recovery-point-offset-checkpoint": OffsetCheckpoint.from_bytes,
        "leader-epoch-checkpoint": LeaderEpochCheckpoint.from_bytes,
        "partition.metadata": PartitionMetadata.from_bytes,
        "meta.properties": MetaProperties.from_bytes,
        ".kafka_cleanshutdown": CleanShutdownMarker.from_bytes,
        "quorum-state": QuorumState.from_bytes,
        ".snapshot": ProducerSnapshot.from_bytes,
    }


SMALL_FILE_PARSERS = _small_file_parsers()


def small_file_seeds() -> list[tuple[str, bytes]]:
    """Every such file in the committed real-Kafka fixtures, by parser name."""
    fixtures = Path(__file__).resolve().parents[2] / "fixtures"
    out = []
    for name in SMALL_FILE_PARSERS:
        pattern = f"*/data/**/*{name}" if name.startswith(".snapshot") else f"*/data/**/{name}"
        for p in sorted(fixtures.glob(pattern))[:6]:
            out.append((name, p.read_bytes()))
    return out


def small_file_target(name: str, data: bytes) -> None:
    """Parse, validate and re-serialise: only a KafkaLogError (with a reason) may escape."""
    try:
        obj = SMALL_FILE_PARSERS[name](data)
    except KafkaLogError as e:
        assert e.reason
        return
    for method in ("validate", "to_bytes", "to_dict", "properties"):
        fn = getattr(obj, method, None)
        if callable(fn):
            try:
                fn()
            except KafkaLogError as e:
                assert e.reason
