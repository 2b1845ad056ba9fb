"""zstd frames (RFC 8878) as Kafka reads them through zstd-jni's ``ZstdInputStream`` (v2 batches only): every
frame decoded in sequence, each bounded by its block count before anything is allocated, and a frame whose window
is above the limit Kafka's reader accepts refused.
"""

from __future__ import annotations

import struct
import threading

import zstandard

from kafkalog.storage.codec.bounds import too_big
from kafkalog.storage.errors import CompressionError

_U32LE = struct.Struct("<I")


def decompress_zstd_frames(data, limit: int) -> bytes:
    """All zstd frames in ``data`` (as zstd-jni's ``ZstdInputStream``: frames are decoded in sequence, a
    truncated frame or trailing garbage is an error). The frame/block structure is walked first (cheap), which
    bounds each frame's output by its block count (128 KiB per block); the frame is then decoded in one call
    into a buffer of at most that size (trying 8x the input first: small buffers avoid page faults)."""
    mv = memoryview(data)
    frames = zstd_frames(mv)
    out = []
    total = 0
    for start, end, blocks, content_size, window in frames:
        if blocks == 0:  # skippable frame
            continue
        room = limit - total
        # python-zstandard allocates a frame's declared content size up front, whatever max_output_size says:
        # a declared size past the limit, or past what the frame's blocks can hold (128 KiB each), is refused
        # here, before any allocation (a 30-byte frame could otherwise ask for terabytes)
        if content_size > room:
            raise too_big("zstd", limit)
        if content_size > blocks * _ZSTD_BLOCK_MAX:
            raise CompressionError(f"zstd payload cannot be decompressed: the frame declares {content_size} "
                                   f"bytes but its {blocks} block(s) hold at most {blocks * _ZSTD_BLOCK_MAX}",
                                   position=start)
        if window > _ZSTD_WINDOW_MAX and not (0 <= content_size <= _ZSTD_ONE_PASS and end - start <= _ZSTD_IN_MAX):
            raise CompressionError(f"zstd payload cannot be decompressed: the frame asks for a {window}-byte window, "
                                   f"above the {_ZSTD_WINDOW_MAX} bytes Kafka's zstd reader accepts (Frame requires "
                                   "too much memory for decoding)", position=start)
        bound = blocks * _ZSTD_BLOCK_MAX if content_size < 0 else content_size
        frame = mv[start:end]
        chunk = None
        for cap in sorted({min(bound, room, max(1 << 16, 8 * (end - start))), min(bound, room)}):
            try:
                chunk = decompressor().decompress(frame, max_output_size=cap, allow_extra_data=False)
                break
            except zstandard.ZstdError as e:
                err = e
        if chunk is None:
            if bound > room:
                raise CompressionError(f"zstd payload decompresses to more than {limit} bytes (decompression "
                                       f"bomb) or is corrupt: {err}", position=start)
            raise CompressionError(f"zstd payload cannot be decompressed: {err}", position=start)
        total += len(chunk)
        if total > limit:
            raise too_big("zstd", limit)
        out.append(chunk)
    return out[0] if len(out) == 1 else b"".join(out)


_ZSTD_LOCAL = threading.local()


def decompressor() -> zstandard.ZstdDecompressor:
    """This thread's decompressor: a ``ZstdDecompressor`` must never be used by two threads at once (python-
    zstandard's rule; sharing one corrupted the heap when engines ran partitions in worker threads)."""
    d = getattr(_ZSTD_LOCAL, "d", None)
    if d is None:
        d = _ZSTD_LOCAL.d = zstandard.ZstdDecompressor()
    return d

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024
# Kafka reads zstd through zstd-jni's stream decoder, which refuses a frame whose window is above libzstd's default
# limit (ZSTD_WINDOWLOG_LIMIT_DEFAULT, 2^27 bytes): "Frame requires too much memory for decoding". libzstd skips
# that check when it can decode the whole frame in one pass: the frame declares its content size, that size fits
# the caller's output (Kafka reads through a 16 KiB buffer, ZstdCompression.decompressionOutputSize) and the whole
# frame is in the decoder's input (zstd-jni reads ZSTD_DStreamInSize(), 128 KiB + 3, at a time). Proven on Kafka's
# DumpLogSegments: tests/kafka/test_compression_parity.py::test_zstd_window_limit_is_kafkas. A frame after the first
# in one payload (producers write one) is judged as if it were first.
_ZSTD_WINDOW_MAX = 1 << 27
_ZSTD_ONE_PASS = 16 * 1024
_ZSTD_IN_MAX = _ZSTD_BLOCK_MAX + 3


def zstd_frames(mv: memoryview) -> list[tuple[int, int, int, int, int]]:
    """``(start, end, block count, content size or -1, window size)`` per frame (RFC 8878 §3.1); skippable
    frames have 0 blocks. Raises CompressionError for a truncated frame or bytes that are not a frame."""
    n = len(mv)
    pos = 0
    frames = []
    if n == 0:
        raise CompressionError("zstd payload is empty", position=0)
    while pos < n:
        if n - pos < 4:
            raise CompressionError("zstd: truncated frame magic", position=pos)
        (magic,) = _U32LE.unpack_from(mv, pos)
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            if n - pos < 8:
                raise CompressionError("zstd: truncated skippable frame", position=pos)
            size = _U32LE.unpack_from(mv, pos + 4)[0]
            if size > n - pos - 8:
                raise CompressionError("zstd: truncated skippable frame", position=pos)
            frames.append((pos, pos + 8 + size, 0, 0, 0))
            pos += 8 + size
            continue
        if magic != _ZSTD_MAGIC:
            raise CompressionError(f"zstd: unknown frame descriptor 0x{magic:08x}", position=pos)
        start = pos
        if n - pos < 5:
            raise CompressionError("zstd: truncated frame header", position=pos)
        fhd = mv[pos + 4]
        fcs_flag = fhd >> 6
        single = (fhd >> 5) & 1
        checksum = (fhd >> 2) & 1
        dict_id_size = (0, 1, 2, 4)[fhd & 3]
        fcs_size = (1 if single else 0, 2, 4, 8)[fcs_flag]
        p = pos + 5 + (0 if single else 1) + dict_id_size
        if p + fcs_size > n:
            raise CompressionError("zstd: truncated frame header", position=pos)
        content_size = -1
        if fcs_size:
            content_size = int.from_bytes(mv[p:p + fcs_size], "little") + (256 if fcs_size == 2 else 0)
        if single:  # the window is the content (RFC 8878 §3.1.1.1.2)
            window = content_size
        else:
            wd = mv[pos + 5]
            base = 1 << (10 + (wd >> 3))
            window = base + (base >> 3) * (wd & 7)
        p += fcs_size
        blocks = 0
        while True:
            if n - p < 3:
                raise CompressionError("zstd: truncated source (block header)", position=p)
            bh = mv[p] | (mv[p + 1] << 8) | (mv[p + 2] << 16)
            last = bh & 1
            btype = (bh >> 1) & 3
            bsize = bh >> 3
            if btype == 3:
                raise CompressionError("zstd: reserved block type", position=p)
            p += 3 + (1 if btype == 1 else bsize)
            if p > n:
                raise CompressionError("zstd: truncated source (block)", position=p - 3)
            blocks += 1
            if last:
                break
        if checksum:
            p += 4
            if p > n:
                raise CompressionError("zstd: truncated source (content checksum)", position=p - 4)
        frames.append((start, p, blocks, content_size, window))
        pos = p
    return frames
