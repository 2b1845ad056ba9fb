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
import types
import zlib

import cramjam
import zstandard

from kafkalog.storage.codec.bounds import too_big
from kafkalog.storage.codec.crc import crc32
from kafkalog.storage.codec.lz4_frame import compress_lz4_frame, decompress_lz4_frame
from kafkalog.storage.codec.native import active, core
from kafkalog.storage.codec.zstd_frame import decompress_zstd_frames
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
        return compress_lz4_frame(data, magic, level)
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
            return decompress_lz4_frame(data, magic, limit)
        if codec == ZSTD:
            if magic < 2:
                raise CompressionError("zstd compression is not allowed with message format v0/v1", position=0)
            return decompress_zstd_frames(data, limit)
        if codec == NONE:
            return bytes(data)
    except CompressionError:
        raise
    except (*_INFLATE_ERRORS, zstandard.ZstdError, ValueError, RuntimeError, cramjam.DecompressionError) as e:
        raise CompressionError(f"{CODEC_NAMES.get(codec, codec)} payload cannot be decompressed: {e}",
                               position=0) from None
    raise CompressionError(f"unknown compression type id {codec}", position=0)


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
                raise too_big("gzip", limit)
            out.append(chunk)
        pos = p - len(d.unused_data)
    return out[0] if len(out) == 1 else b"".join(out)


def _snappy_raw(block, limit: int, total: int) -> bytes:
    n = cramjam.snappy.decompress_raw_len(block)
    if n + total > limit:
        raise too_big("snappy", limit)
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
