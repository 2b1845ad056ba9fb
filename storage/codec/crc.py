"""CRC32 (legacy messages, zlib polynomial) and CRC32C (v2 batches, producer snapshots).

The ``crc32c`` package (C, SSE4.2/ARMv8 accelerated) is mandatory: the pure-Python fallback is ~1000x slower.
Both functions accept any buffer (bytes, bytearray, memoryview over an mmap) without copying.
"""

from __future__ import annotations

import zlib

from crc32c import crc32c as _crc32c


def crc32(data, value: int = 0) -> int:
    return zlib.crc32(data, value) & 0xFFFFFFFF


def crc32c(data, value: int = 0) -> int:
    return _crc32c(data, value) & 0xFFFFFFFF
