"""The decompression bound every codec framing applies: output past ``limit`` bytes is an error, so a
decompression bomb costs at most ``limit`` bytes of memory."""

from __future__ import annotations

from kafkalog.storage.errors import CompressionError


def too_big(name: str, limit: int) -> CompressionError:
    return CompressionError(
        f"{name} payload decompresses to more than {limit} bytes (decompression bomb or corrupt data)", position=0
    )
