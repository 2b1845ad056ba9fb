"""The v2 record grammar read fast, once: one record of a (decompressed) records region as spans, without
per-record objects (Kafka's ``DefaultRecord.readFrom``: length, attributes, timestamp delta, offset delta, key,
value, headers).

:func:`read_record` is the one Python reader of that grammar for the fast paths (the records layer's decoder and
the cleaner's keep/drop scan); the careful decoder in :mod:`.batch` and the compiled core (``native/``) are the
others. Varints are decoded inline in their 1- and 2-byte forms. Anything a fast path does not take raises
:class:`Slow` (or ``IndexError`` past the end) and the caller reruns the batch through the careful decoder, which
gives the verdict and a precise error. As in Kafka, a record must end exactly at its declared length.

``strict`` (the cleaner, which copies records verbatim where Kafka's ``MemoryRecordsBuilder`` re-encodes them):
only what Kafka writes is taken -- every varint in its shortest form, the record length, offset delta and the
key and value lengths in at most 2 bytes, a null key or value as length -1; anything else is :class:`Slow`.
"""

from __future__ import annotations

from kafkalog.storage.codec.varint import read_uvarint, read_uvarlong, read_varint
from kafkalog.storage.errors import CorruptRecordError


class Slow(Exception):
    """Something a fast reader does not take: rerun the batch with the careful decoder."""


def _uvarint(data: bytes, p: int, end: int, strict: bool, wide: bool = False) -> tuple[int, int]:
    """An unsigned varint of 2 or more bytes (``data[p] >= 128``; ``wide``: a varlong). Strict: in its shortest
    form, and (not ``wide``) in exactly 2 bytes."""
    b2 = data[p + 1]
    if b2 < 128:
        if strict and b2 == 0:
            raise Slow
        return (data[p] & 127) | (b2 << 7), p + 2
    if strict and not wide:
        raise Slow
    try:
        v, q = read_uvarlong(data, p, end) if wide else read_uvarint(data, p, end)
    except CorruptRecordError:
        raise Slow from None
    if strict and data[q - 1] == 0:
        raise Slow
    return v, q


def _short(data: bytes, p: int, end: int, strict: bool) -> tuple[int, int]:
    """An unsigned varint at ``p``: its 1-byte form inline, longer ones by :func:`_uvarint`."""
    b = data[p]
    if b < 128:
        return b, p + 1
    return _uvarint(data, p, end, strict)


def read_record(data: bytes, p: int, end: int, strict: bool = False) -> tuple:
    """The record at byte ``p`` of a records region ending at ``end``:
    ``(body, tail, rec_end, ts_delta, off_delta, key, value_start, value_end, headers)``.

    ``data[body]`` is the attributes byte (``data[p:rec_end]`` the whole record, length prefix included),
    ``data[tail:rec_end]`` the key/value/headers part, ``key`` the key bytes or None, ``data[value_start:
    value_end]`` the value (``value_end`` -1: null), ``headers`` the position of the header count (read them with
    :func:`read_headers` or :func:`skip_headers`). The caller checks that the headers end at ``rec_end``."""
    # record length
    b, p = _short(data, p, end, strict)
    if b & 1:
        raise Slow  # a negative length
    rec_end = p + (b >> 1)
    if rec_end > end:
        raise Slow
    body = p
    # attributes (data[body]), timestamp delta (varlong)
    b = data[p + 1]
    if b < 128:
        p += 2
    else:
        b, p = _uvarint(data, p + 1, end, strict, True)
    ts_delta = (b >> 1) ^ -(b & 1)
    # offset delta
    b, p = _short(data, p, end, strict)
    off_delta = (b >> 1) ^ -(b & 1)
    tail = p
    # key, value
    ks, ke = _nullable(data, p, end, strict)
    key = data[ks:ke] if ke >= 0 else None
    vs, ve = _nullable(data, ke if ke >= 0 else ks, end, strict)
    p = ve if ve >= 0 else vs
    return body, tail, rec_end, ts_delta, off_delta, key, vs, ve, p


def _nullable(data: bytes, p: int, end: int, strict: bool) -> tuple[int, int]:
    """A nullable bytes field (length varint, then the bytes) at ``p``: ``(start, stop)`` of its bytes, ``stop``
    -1 for null (a negative length; strict: exactly -1)."""
    b, p = _short(data, p, end, strict)
    if b & 1:
        if strict and b != 1:
            raise Slow
        return p, -1
    return p, p + (b >> 1)


def read_headers(data: bytes, p: int, rec_end: int) -> tuple[tuple, int]:
    """The headers at ``p`` (count, then per header key length, key, value length, value) as
    ``((key str, value bytes | None), ...)`` and the position after them."""
    if data[p] == 0:
        return (), p + 1
    n, p = read_varint(data, p, rec_end)
    if n < 0 or n > rec_end - p:
        raise Slow
    headers = []
    for _ in range(n):
        hk, p = read_varint(data, p, rec_end)
        if hk < 0:
            raise Slow
        q = p + hk
        hkey = data[p:q].decode("utf-8", "surrogateescape")
        hv, p = read_varint(data, q, rec_end)
        if hv < 0:
            hval = None
        else:
            q = p + hv
            hval = data[p:q]
            p = q
        headers.append((hkey, hval))
    return tuple(headers), p


def skip_headers(data: bytes, p: int, rec_end: int) -> int:
    """The position after the headers at ``p``, every varint strict (at most 2 bytes, shortest form; a null
    header value as -1)."""
    if data[p] == 0:
        return p + 1
    n, p = _strict_varint(data, p, rec_end)
    if n < 0 or n > rec_end - p:
        raise Slow
    for _ in range(n):
        k, p = _strict_varint(data, p, rec_end)
        if k < 0:
            raise Slow
        p += k
        v, p = _strict_varint(data, p, rec_end)
        if v >= 0:
            p += v
        elif v != -1:
            raise Slow
        if p > rec_end:
            raise Slow
    return p


def _strict_varint(data: bytes, p: int, end: int) -> tuple[int, int]:
    b, p = _short(data, p, end, True)
    return (b >> 1) ^ -(b & 1), p


__all__ = ["Slow", "read_headers", "read_record", "skip_headers"]
