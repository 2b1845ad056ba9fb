"""The cleaner's hot loops over the records region of one v2 batch, without per-record objects.

Both loops walk the (decompressed) records region once, decoding varints inline (1- and 2-byte forms; anything
longer, or anything malformed, raises :class:`~kafkalog.storage.records.record_grammar.Slow` or ``IndexError``
and the caller reruns the batch through the records layer's careful decoder, which gives the verdict and a
precise error); the keep/drop scan reads each record with the records layer's
:func:`~kafkalog.storage.records.record_grammar.read_record` (strict: only what Kafka writes). Like Kafka's
``DefaultRecord.readFrom`` every record must end exactly at its declared length and the region must hold exactly
``count`` records.

* :func:`map_records` puts every keyed record at or above ``start`` into the offset map (key bytes are looked
  up raw; MD5 only for a key not seen before);
* :func:`scan_retained` applies the cleaner's record rule and returns the kept records as byte spans;
* :func:`splice_records` writes the kept records of a rebuilt batch: a record's bytes are copied verbatim when
  its attributes and timestamp delta do not change, else only its prefix (length, attributes, timestamp delta,
  offset delta) is re-encoded and the key/value/headers bytes are copied.
"""

from __future__ import annotations

from kafkalog.storage.codec.native import core
from kafkalog.storage.codec.varint import read_uvarint, read_uvarlong, write_varint, write_varlong
from kafkalog.storage.engine.cleaner.offset_map import OffsetMap
from kafkalog.storage.errors import CorruptRecordError
from kafkalog.storage.records.record_grammar import Slow, read_record, skip_headers


def _uvarint(data: bytes, p: int) -> tuple[int, int]:
    """An unsigned varint of 1 or 2 bytes in its shortest form (anything else: :class:`Slow`)."""
    try:
        v, q = read_uvarint(data, p)
    except CorruptRecordError:
        raise Slow from None
    if q - p > 2 or (q - p == 2 and data[p + 1] == 0):
        raise Slow
    return v, q


def _long_uvarint(data: bytes, p: int) -> tuple[int, int]:
    """An unsigned varint of up to 10 bytes (a varlong) in its shortest form (anything else: :class:`Slow`)."""
    try:
        v, q = read_uvarlong(data, p)
    except CorruptRecordError:
        raise Slow from None
    if q - p > 1 and data[q - 1] == 0:
        raise Slow
    return v, q


_ZZ = tuple((b >> 1) ^ -(b & 1) for b in range(128))  # zig-zag value of a one-byte varint


def map_records(data: bytes, count: int, base_offset: int, offset_map: OffsetMap) -> None:
    """:func:`py_map_records`, by the compiled core when it is built (``cleaner.rs``, the same rules): into
    the native map when ``offset_map`` holds one, else into its dicts."""
    native = getattr(offset_map, "native", None)
    if native is not None:
        if not native.map_records(data if type(data) is bytes else bytes(data), count, base_offset):
            raise Slow
        return
    if core is not None and type(data) is bytes:
        if not core.map_records(data, count, base_offset, offset_map.raw, offset_map.new_cell):
            raise Slow
        return
    py_map_records(data, count, base_offset, offset_map)


def scan_retained(data: bytes, count: int, base_offset: int, base_ts: int, latest: int, offset_map: OffsetMap,
                  keep_tombstones: bool) -> tuple[list, int, int]:
    """:func:`py_scan_retained`, by the compiled core when it is built (``cleaner.rs``, the same rules)."""
    native = offset_map.native
    if native is not None:
        r = native.scan_retained(data if type(data) is bytes else bytes(data), count, base_offset, base_ts, latest,
                                 keep_tombstones)
        if r is None:
            raise Slow
        return r
    if core is not None and type(data) is bytes:
        r = core.scan_retained(data, count, base_offset, base_ts, latest, offset_map.raw, offset_map.get_unknown,
                               keep_tombstones)
        if r is None:
            raise Slow
        return r
    return py_scan_retained(data, count, base_offset, base_ts, latest, offset_map, keep_tombstones)


def py_map_records(data: bytes, count: int, base_offset: int, offset_map: OffsetMap) -> None:
    """Put the keyed records of one batch into ``offset_map`` (the caller makes sure every record is at or above
    the map's start).

    Only the fields the map needs are decoded (length, offset delta, key); the chain of record lengths must end
    exactly at the end of the region and every key must lie inside its record. The caller runs this only on
    batches whose CRC is intact: such a batch holds exactly what the leader validated record by record on append
    (``LogValidator``), so the structure Kafka's ``DefaultRecord.readFrom`` would check again is known good.

    The caller also guarantees the map cannot fill up within the batch (``size + count < capacity``), so a rerun
    after :class:`Slow` is harmless: puts are idempotent in order.
    """
    if getattr(offset_map, "native", None) is not None:
        raise TypeError("py_map_records works on the dict map (a native map takes map_records)")
    raw = offset_map.raw
    new_cell = offset_map.new_cell
    zz = _ZZ
    p = 0
    for _ in range(count):
        b = data[p]
        if b < 128:
            rec_end = p + 1 + (b >> 1)
            p += 2
        else:
            b2 = data[p + 1]
            if b2 > 127:
                raise Slow
            rec_end = p + 2 + (((b & 127) | (b2 << 7)) >> 1)
            p += 3
        # timestamp delta (skipped)
        if data[p] < 128:
            p += 1
        elif data[p + 1] < 128:
            p += 2
        else:
            p = _long_uvarint(data, p)[1]
        # offset delta
        b = data[p]
        if b < 128:
            off = base_offset + zz[b]
            p += 1
        else:
            b2 = data[p + 1]
            if b2 > 127:
                raise Slow
            b = (b & 127) | (b2 << 7)
            off = base_offset + ((b >> 1) ^ -(b & 1))
            p += 2
        # key
        b = data[p]
        if b < 128:
            q = p + 1 + (b >> 1)
            key = data[p + 1:q] if b != 1 else None
        else:
            b, p = _uvarint(data, p)
            q = p + (b >> 1)
            key = data[p:q]
        if q > rec_end:  # a key running past its record: not what the leader validated
            raise Slow
        if key is not None:  # (raw holds no None key: a null key is never put)
            cell = raw.get(key)
            if cell is not None:
                cell[0] = off
            else:
                new_cell(key, off)
        p = rec_end
    if p != len(data):  # (an empty batch, count 0, has no records at all)
        raise Slow


def py_scan_retained(data: bytes, count: int, base_offset: int, base_ts: int, latest: int, offset_map: OffsetMap,
                     keep_tombstones: bool) -> tuple[list, int, int]:
    """Apply ``shouldRetainRecord`` to every record of a data batch whose records are looked at.

    Returns ``(kept, records_read, keyless_dropped)``; ``kept`` holds one tuple per retained record:
    ``(start, tail, end, timestamp, offset_delta, attributes, is_tombstone)`` where ``data[start:end]`` is the
    whole record (length prefix included) and ``data[tail:end]`` its key/value/headers part.
    ``keep_tombstones``: whether a tombstone that is the latest for its key survives (no delete horizon yet, or
    ``now`` before it).
    """
    if offset_map.native is not None:
        raise TypeError("py_scan_retained works on the dict map (a native map takes scan_retained)")
    raw = offset_map.raw
    get_unknown = offset_map.get_unknown
    end = len(data)
    kept: list = []
    keep = kept.append
    invalid = 0
    p = 0
    for _ in range(count):
        start = p
        body, tail, rec_end, ts_delta, off_delta, key, _, value_end, p = read_record(data, p, end, True)
        p = skip_headers(data, p, rec_end)
        if p != rec_end:
            raise Slow
        tomb = value_end < 0
        attrs = data[body]
        off = base_offset + off_delta
        if off > latest:
            pass  # beyond the map: always kept
        elif key is None:
            invalid += 1
            continue
        else:
            cell = raw.get(key)
            mapped = cell[0] if cell is not None else get_unknown(key)
            if off < mapped or (tomb and not keep_tombstones):
                continue
        keep((start, tail, rec_end, base_ts + ts_delta, off_delta, attrs, tomb))
    if p != end:
        raise Slow
    return kept, count, invalid


def splice_records(data: bytes, kept: list, old_base_ts: int, new_base_ts: int, out: bytearray) -> None:
    """Append the kept records to ``out`` as ``MemoryRecordsBuilder`` writes them: attributes 0, timestamp delta
    against ``new_base_ts``, offset delta unchanged (the base offset is kept). A record whose stored attributes
    are 0 and whose delta does not change (same base timestamp) is copied byte for byte."""
    same_base = old_base_ts == new_base_ts
    for start, tail, end, ts, off_delta, attrs, _ in kept:
        if same_base and attrs == 0:
            out += data[start:end]
            continue
        body = bytearray(b"\x00")
        write_varlong(ts - new_base_ts, body)
        write_varint(off_delta, body)
        body += data[tail:end]
        write_varint(len(body), out)
        out += body
