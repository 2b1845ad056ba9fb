"""The four Kafka codecs with Kafka's exact framings (docs/formats.md#compression-codecs).

* gzip: one RFC 1952 member written like ``java.util.zip.GZIPOutputStream`` on JDK >= 16 (mtime 0, XFL 0,
  OS 0xff) over zlib's raw deflate; any gzip (several members, optional header fields) is read.
* snappy: xerial ``SnappyOutputStream`` framing (magic, version 1, compat 1, 32 KiB input chunks) on write;
  xerial streams and plain raw snappy blocks on read (as ``SnappyInputStream`` falls back).
* lz4: Kafka's LZ4 frame (FLG 0x60, BD 0x40, 64 KiB independent blocks, no checksums), including the broken
  header checksum written and tolerated for magic 0 (KAFKA-3160).
* zstd: standard frames (v2 only).

With the compiled core, lz4 blocks, snappy blocks and zstd frames are compressed by the C/C++ libraries whose
output Kafka 3.9 and 4.x produce, called as Kafka calls them (``storage/native/src/codec.rs``), so a batch
kafkalog recompresses is byte for byte the broker's; without it, by the Python packages' libraries (the same
records, and for lz4, snappy and zstd often other bytes).

Decompression is bounded: every decoder stops with :class:`CompressionError` once the output would exceed
``limit`` bytes, so a decompression bomb costs at most ``limit`` bytes of memory. With the compiled core,
``codec.rs`` decompresses first with the same framings, checks and bound, and hands anything the decoders here
would reject back to them (``decompress_python``, the reference), so errors are the same either way.
"""

from __future__ import annotations

import importlib
import struct
import threading
import types
import zlib

import cramjam
import lz4.block
import zstandard

from kafkalog.storage.codec.crc import crc32
from kafkalog.storage.codec.native import active, core
from kafkalog.storage.errors import CompressionError

_inflate: types.ModuleType
_INFLATE_ERRORS: tuple
try:  # ISA-L inflates about 2x faster than zlib; optional, identical results
    _inflate = importlib.import_module("isal.isal_zlib")
    _INFLATE_ERRORS = (zlib.error, _inflate.error)
except ImportError:  # pragma: no cover - depends on the environment
    _inflate = zlib
    _INFLATE_ERRORS = (zlib.error,)

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS: dict[str, int | None] = {v: k for k, v in CODEC_NAMES.items()}
CODEC_IDS.update({"uncompressed": NONE, "producer": None})

#: Default bound on the decompressed size of one batch (far above Kafka's default max.message.bytes).
DEFAULT_DECOMPRESS_LIMIT = 256 * 1024 * 1024

_GZIP_HEADER_JDK = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_CHUNK = 32 * 1024
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_HEADER_V1 = _LZ4_MAGIC + b"\x60\x40\x82"  # magic 1 and 2: correct header checksum
_LZ4_HEADER_V0 = _LZ4_MAGIC + b"\x60\x40\x1a"  # magic 0: KAFKA-3160 checksum over magic + FLG + BD
_LZ4_BLOCK = 64 * 1024
_LZ4_HC: dict[bytes, int] = {}  # frame descriptor -> header checksum byte (a handful of distinct values)
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_U32LE = struct.Struct("<I")
_I32BE = struct.Struct(">i")


def codec_name(codec: int) -> str:
    try:
        return CODEC_NAMES[codec]
    except KeyError:
        raise CompressionError(f"unknown compression type id {codec}") from None


# --------------------------------------------------------------------------------------------- compress


def compress(codec: int, data, *, magic: int = 2, level: int | None = None) -> bytes:
    """Compress ``data`` (the concatenated records or inner messages) with Kafka's framing for ``codec``."""
    if codec == GZIP:
        return _gzip_compress(data, 6 if level is None or level == -1 else level)
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        return _lz4_compress(data, magic, level)
    if codec == ZSTD:
        if magic < 2:
            raise CompressionError("zstd compression is not allowed with message format v0/v1")
        if core is not None:
            return core.zstd_stream(data, 3 if level is None else level)
        return zstandard.ZstdCompressor(level=3 if level is None else level, write_content_size=False).compress(
            bytes(data)
        )
    if codec == NONE:
        return bytes(data)
    raise CompressionError(f"unknown compression type id {codec}")


def _gzip_compress(data, level: int) -> bytes:
    co = zlib.compressobj(level, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY)
    body = co.compress(data) + co.flush()
    return b"".join((_GZIP_HEADER_JDK, body, struct.pack("<II", crc32(data), len(data) & 0xFFFFFFFF)))


def _xerial_compress(data) -> bytes:
    mv = memoryview(data)
    parts = [_XERIAL_HEADER]
    for i in range(0, len(mv), _XERIAL_CHUNK):
        chunk = mv[i : i + _XERIAL_CHUNK]
        block = core.snappy_block(chunk) if core is not None else bytes(cramjam.snappy.compress_raw(chunk))
        parts.append(_I32BE.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4_compress(data, magic: int, level: int | None) -> bytes:
    mv = memoryview(data)
    parts = [_LZ4_HEADER_V0 if magic == 0 else _LZ4_HEADER_V1]
    hc = level is not None and level != 9
    for i in range(0, len(mv), _LZ4_BLOCK):
        raw = mv[i : i + _LZ4_BLOCK]
        if core is not None:
            block = core.lz4_block(raw, 9 if level is None else level)
        elif hc:
            block = lz4.block.compress(raw, mode="high_compression", compression=level, store_size=False)
        else:
            block = lz4.block.compress(raw, mode="default", store_size=False)
        if len(block) >= len(raw):
            parts.append(_U32LE.pack(len(raw) | 0x80000000))
            parts.append(bytes(raw))
        else:
            parts.append(_U32LE.pack(len(block)))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)


# ------------------------------------------------------------------------------------------- decompress


def decompress(codec: int, data, *, magic: int = 2, limit: int = DEFAULT_DECOMPRESS_LIMIT) -> bytes:
    """Decompress a Kafka payload. Raises :class:`CompressionError` (position relative to ``data``).

    With the compiled core, its decompressors (the same framings and checks, ``codec.rs``) run first; they hand
    anything this module would reject back to it, which gives the error."""
    nc = active().codecs
    if nc is not None and codec:
        got = nc.decompress(codec, data, magic, limit)
        if got is not None:
            return got
    return decompress_python(codec, data, magic=magic, limit=limit)


def native_codec():
    """The compiled core when it decompresses (``None``: the Python codec packages do; ``native.backend``)."""
    return active().codecs


def decompress_python(codec: int, data, *, magic: int = 2, limit: int = DEFAULT_DECOMPRESS_LIMIT) -> bytes:
    """:func:`decompress` by the Python packages only: the reference the compiled core is tested against."""
    try:
        if codec == GZIP:
            return _gzip_decompress(data, limit)
        if codec == SNAPPY:
            return _snappy_decompress(data, limit)
        if codec == LZ4:
            return _lz4_decompress(data, magic, limit)
        if codec == ZSTD:
            if magic < 2:
                raise CompressionError("zstd compression is not allowed with message format v0/v1", position=0)
            return _zstd_decompress(data, limit)
        if codec == NONE:
            return bytes(data)
    except CompressionError:
        raise
    except (*_INFLATE_ERRORS, zstandard.ZstdError, ValueError, RuntimeError, cramjam.DecompressionError) as e:
        raise CompressionError(f"{CODEC_NAMES.get(codec, codec)} payload cannot be decompressed: {e}",
                               position=0) from None
    raise CompressionError(f"unknown compression type id {codec}", position=0)


def _too_big(name: str, limit: int) -> CompressionError:
    return CompressionError(
        f"{name} payload decompresses to more than {limit} bytes (decompression bomb or corrupt data)", position=0
    )


def _gzip_decompress(data, limit: int) -> bytes:
    """Every gzip member in ``data`` (as ``GZIPInputStream``: concatenated members are read, trailing garbage
    after a member is ignored). Input is fed in steps of ``limit/4096`` bytes (4..64 KiB), so one step cannot
    produce more than a quarter of ``limit`` (deflate's 1032:1 bound) before the ``limit`` check."""
    step = min(max(limit >> 12, 4096), 65536)
    mv = memoryview(data)
    n = len(mv)
    out = []
    total = 0
    pos = 0
    first = True
    while pos < n:
        if n - pos < 2 or mv[pos] != 0x1F or mv[pos + 1] != 0x8B:
            if first:
                raise CompressionError("gzip payload does not start with the gzip magic 1f 8b", position=pos)
            break  # GZIPInputStream ignores what follows a member when it is not another member
        first = False
        d = _inflate.decompressobj(31)
        p = pos
        while not d.eof:
            if p >= n:
                raise CompressionError("gzip payload ends prematurely (truncated deflate stream)", position=n)
            piece = mv[p:p + step]
            p += len(piece)
            chunk = d.decompress(piece)
            total += len(chunk)
            if total > limit:
                raise _too_big("gzip", limit)
            out.append(chunk)
        pos = p - len(d.unused_data)
    return out[0] if len(out) == 1 else b"".join(out)


def _snappy_raw(block, limit: int, total: int) -> bytes:
    n = cramjam.snappy.decompress_raw_len(block)
    if n + total > limit:
        raise _too_big("snappy", limit)
    if n > 32 * len(block) + 64:  # a snappy element expands at most ~22x (a 3-byte copy of 64 bytes)
        raise CompressionError(f"snappy: declared length {n} is impossible for {len(block)} compressed bytes",
                               position=0)
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data, limit: int) -> bytes:
    mv = memoryview(data)
    if len(mv) == 0:
        raise CompressionError("snappy: cannot decompress empty stream", position=0)
    if len(mv) < 16 or mv[:8] != _XERIAL_MAGIC:
        return _snappy_raw(mv, limit, 0)  # a plain snappy block (non-Java producers)
    if _I32BE.unpack_from(mv, 8)[0] < 1:
        raise CompressionError("snappy: incompatible xerial stream version", position=8)
    pos = 16
    out = []
    total = 0
    end = len(mv)
    while end - pos >= 4:
        (n,) = _I32BE.unpack_from(mv, pos)
        if mv[pos : pos + 4] == _XERIAL_MAGIC[:4]:
            if end - pos < 16 or mv[pos : pos + 8] != _XERIAL_MAGIC:
                raise CompressionError("snappy: invalid concatenated xerial stream header", position=pos)
            pos += 16
            continue
        pos += 4
        if n < 0:
            raise CompressionError(f"snappy: negative chunk length {n}", position=pos - 4)
        if n > end - pos:
            raise CompressionError(f"snappy: chunk of {n} bytes runs past the payload end", position=pos - 4)
        chunk = _snappy_raw(mv[pos : pos + n], limit, total)
        total += len(chunk)
        out.append(chunk)
        pos += n
    return b"".join(out)


def _lz4_decompress(data, magic: int, limit: int) -> bytes:
    mv = memoryview(data)
    end = len(mv)
    if end < 7:
        raise CompressionError("lz4: stream ended prematurely (frame header)", position=0)
    if mv[:4] != _LZ4_MAGIC:
        raise CompressionError("lz4: invalid frame magic", position=0)
    flg = mv[4]
    bd = mv[5]
    if flg & 0x03 or (flg >> 6) != 1 or not flg & 0x20:
        raise CompressionError(f"lz4: unsupported frame descriptor FLG=0x{flg:02x}", position=4)
    if bd & 0x8F or (bd >> 4) & 7 not in _LZ4_BLOCK_SIZES:
        raise CompressionError(f"lz4: unsupported block descriptor BD=0x{bd:02x}", position=5)
    block_max = _LZ4_BLOCK_SIZES[(bd >> 4) & 7]
    pos = 6
    desc_end = 6
    if flg & 0x08:
        pos += 8
        desc_end = pos
    if pos >= end:
        raise CompressionError("lz4: stream ended prematurely (frame header)", position=pos)
    hc = mv[pos]
    if magic != 0:
        desc = bytes(mv[4:desc_end])
        expected = _LZ4_HC.get(desc)
        if expected is None:
            expected = (_xxh32(desc) >> 8) & 0xFF
            if len(_LZ4_HC) < 64:  # bounded: hostile input cannot grow it
                _LZ4_HC[desc] = expected
        if hc != expected:
            raise CompressionError("lz4: stream frame descriptor corrupted (header checksum)", position=pos)
    pos += 1
    block_checksum = bool(flg & 0x10)
    out = []
    total = 0
    while True:
        if end - pos < 4:
            raise CompressionError("lz4: stream ended prematurely (missing end mark)", position=pos)
        (word,) = _U32LE.unpack_from(mv, pos)
        pos += 4
        raw = bool(word & 0x80000000)
        size = word & 0x7FFFFFFF
        if size == 0:
            break  # end mark (Lz4BlockInputStream: a zero size with or without the raw bit)
        if size > block_max:
            raise CompressionError(f"lz4: block size {size} exceeds the frame's maximum {block_max}",
                                   position=pos - 4)
        if size > end - pos:
            raise CompressionError("lz4: stream ended prematurely (block)", position=pos)
        block = mv[pos : pos + size]
        pos += size
        if raw:
            chunk = bytes(block)
        else:
            try:
                # LZ4 expands at most ~255x: never allocate more than that for a (hostile) small block
                chunk = lz4.block.decompress(block, uncompressed_size=min(block_max, 255 * size + 64))
            except lz4.block.LZ4BlockError as e:
                raise CompressionError(f"lz4: corrupt block: {e}", position=pos - size) from None
        total += len(chunk)
        if total > limit:
            raise _too_big("lz4", limit)
        out.append(chunk)
        if block_checksum:
            if end - pos < 4:
                raise CompressionError("lz4: stream ended prematurely (block checksum)", position=pos)
            if _U32LE.unpack_from(mv, pos)[0] != _xxh32(bytes(block)):
                raise CompressionError("lz4: block checksum mismatch", position=pos)
            pos += 4
    if flg & 0x04:  # content checksum: read but not verified, as Kafka
        if end - pos < 4:
            raise CompressionError("lz4: stream ended prematurely (content checksum)", position=pos)
    return b"".join(out)


def _zstd_decompress(data, limit: int) -> bytes:
    """All zstd frames in ``data`` (as zstd-jni's ``ZstdInputStream``: frames are decoded in sequence, a
    truncated frame or trailing garbage is an error). The frame/block structure is walked first (cheap), which
    bounds each frame's output by its block count (128 KiB per block); the frame is then decoded in one call
    into a buffer of at most that size (trying 8x the input first: small buffers avoid page faults)."""
    mv = memoryview(data)
    frames = _zstd_frames(mv)
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
            raise _too_big("zstd", limit)
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
                chunk = _zstd().decompress(frame, max_output_size=cap, allow_extra_data=False)
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
            raise _too_big("zstd", limit)
        out.append(chunk)
    return out[0] if len(out) == 1 else b"".join(out)


_ZSTD_LOCAL = threading.local()


def _zstd() -> zstandard.ZstdDecompressor:
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


def _zstd_frames(mv: memoryview) -> list[tuple[int, int, int, int, int]]:
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


# xxHash32 for the LZ4 frame header checksum (only ever over a few bytes).
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32(data: bytes, seed: int = 0) -> int:
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i + 16 <= n:
            lanes = struct.unpack_from("<4I", data, i)
            v1 = (_rotl((v1 + lanes[0] * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + lanes[1] * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + lanes[2] * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + lanes[3] * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
