"""Byte-identical compression: kafkalog compresses a records section exactly as Kafka's own ``Compression``
classes do (the producer's and the broker's path), per codec, level and message format, on the JDK.

The compiled core brings the C libraries at the versions Kafka bundles (liblz4 1.10.0 as lz4-java 1.10.x,
libzstd 1.5.6 as zstd-jni 1.5.6) and calls them as ``Lz4BlockOutputStream`` and ``ZstdCompression`` do; gzip
(zlib) and snappy (the xerial framing over C++ snappy's format) already match. Every sample must be identical.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from kafkalog.compat.errors import HarnessError
from kafkalog.compat.tools import compress_with_kafka
from kafkalog.storage.codec.compression import CODEC_IDS, compress
from kafkalog.storage.codec.native import core
from kafkalog.storage.records import RecordBatch, build_batch, iter_batches

pytestmark = pytest.mark.kafka

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LEVELS = {"gzip": [None, 1, 9], "snappy": [None], "lz4": [None, 1, 9, 12, 17], "zstd": [None, -5, 1, 3, 10, 19]}


def _samples() -> dict[str, bytes]:
    rnd = random.Random(42)

    def section(n: int, vsize: int, keys: int) -> bytes:
        recs = [(i, 1_700_000_000_000 + i * 7, b"key-%d" % rnd.randrange(keys),
                 (b"value-%d-" % i) * (vsize // 10) + rnd.randbytes(6), [("h", b"x")] if i % 9 == 0 else [])
                for i in range(n)]
        return bytes(build_batch(recs)[61:])

    out = {"empty": b"", "one byte": b"\x00", "tiny": section(1, 20, 5), "small": section(20, 100, 10),
           "64k+": section(600, 110, 500), "300k": section(2500, 120, 2000), "random 200k": rnd.randbytes(200_000),
           "zeros 1M": bytes(1 << 20)}
    # records sections as real producers wrote them (the fixtures' compressed batches, decompressed)
    seen = 0
    for log in sorted(FIXTURES.rglob("*.log")):
        for b in iter_batches(memoryview(log.read_bytes())):
            if isinstance(b, RecordBatch) and b.codec and seen < 6 and b.is_valid():
                out[f"{log.parent.name} @{b.position}"] = bytes(b.decompressed_payload())
                seen += 1
    return out


def test_compression_is_byte_identical_to_kafkas(kafka_version, tmp_path):
    if kafka_version.startswith("2."):  # no Compression builders with levels before 3.8 (KIP-390): refused clearly
        with pytest.raises(HarnessError, match="Compression builders"):
            compress_with_kafka(kafka_version, [("gzip", None, 2, b"x")], tmp_path / "work")
        return
    samples = _samples()
    tasks, keys = [], []
    for codec, levels in LEVELS.items():
        for level in levels:
            for magic in ((2, 1, 0) if codec != "zstd" else (2,)):
                for name, data in samples.items():
                    if magic < 2 and level not in (None, 9) and codec == "lz4" and name != "small":
                        continue  # keep the run short: levels are covered at magic 2
                    tasks.append((codec, level, magic, data))
                    keys.append((codec, level, magic, name))
    theirs = compress_with_kafka(kafka_version, tasks, tmp_path / "work")
    table: dict[str, list[int]] = {}
    differ = []
    for (codec, level, magic, name), (_, _, _, data), want in zip(keys, tasks, theirs, strict=True):
        got = compress(CODEC_IDS[codec], data, magic=magic, level=level)
        same = got == want
        row = table.setdefault(codec, [0, 0])
        row[0] += same
        row[1] += 1
        if not same:
            differ.append(f"{codec} level {level} magic {magic} {name}: {len(got)} vs {len(want)} bytes")
    print(f"Kafka {kafka_version}: identical per codec " + ", ".join(f"{c} {s}/{n}" for c, (s, n) in table.items()))
    if core is None:
        # the Python packages' lz4 and zstd builds are other versions: only gzip and snappy are held to bytes
        assert os.environ.get("CI") != "true", "the compiled core is not built"
        differ = [d for d in differ if d.startswith(("gzip", "snappy"))]
    assert not differ, differ


def test_zstd_window_limit_is_kafkas(kafka_version, tmp_path):
    """Decompression: Kafka's zstd reader (zstd-jni's stream) refuses a frame asking for a window above 2^27
    bytes, unless the frame declares a content size small enough (16 KiB, Kafka's read buffer) for libzstd to
    decode it in one pass. DumpLogSegments on each batch of ``zstd_window_batches`` against kafkalog's reading of
    the same batch, with and without the compiled core: the same batches decode, the same are refused."""
    from builders import zstd_window_batches

    from kafkalog.compat.errors import ToolError
    from kafkalog.compat.tools import dump_log_segments
    from kafkalog.storage.codec.native import backend
    from kafkalog.storage.errors import CompressionError

    def ours(raw: bytes) -> int | str:
        try:
            return sum(1 for _ in next(iter_batches(memoryview(raw))).records())
        except CompressionError as e:
            return str(e)

    seen = []
    for i, (name, (raw, ok)) in enumerate(zstd_window_batches().items()):
        log = tmp_path / str(i) / "00000000000000000000.log"
        log.parent.mkdir()
        log.write_bytes(raw)
        try:
            theirs: int | str = len(dump_log_segments(kafka_version, [log]).files[0].batches[0]["records"])
        except ToolError as e:
            assert "Frame requires too much memory for decoding" in str(e), (name, str(e)[-800:])
            theirs = "refused"
        native = ours(raw)
        with backend("python"):
            python = ours(raw)
        seen.append((name, theirs, native))
        assert (theirs != "refused") == ok, (name, theirs)
        assert native == python, (name, native, python)
        assert (theirs == "refused") == isinstance(native, str), (name, theirs, native)
        if isinstance(native, int):
            assert native == theirs, (name, native, theirs)
        else:
            assert "window" in native, native
    print(f"Kafka {kafka_version}: zstd windows " + "; ".join(f"{n}: {t}" for n, t, _ in seen))
