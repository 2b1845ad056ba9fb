"""``dump_log``: the batches (and optionally records) of a ``.log`` file as plain dicts, for ``kafkalog dump``
and for tests (``docs/commands/dump.md``; Kafka's ``DumpLogSegments.dumpLog``).

The file is mmapped (under a URL read in windows through the filesystem seam), never read whole; memory is
bounded by one batch (plus its decompressed records when ``deep``). Every problem is reported in the stream --
the scan keeps going after a bad CRC or an undecodable batch -- so a caller sees all of them:

* one dict per shallow entry (v2 batch, v0/v1 message or compressed wrapper) with the keys
  ``file, baseOffset, lastOffset, count, position, size, magic, codec, crc, isValid, timestampType,
  maxTimestamp, producerId, producerEpoch, baseSequence, lastSequence, partitionLeaderEpoch, isTransactional,
  isControl, deleteHorizonMs`` (``deleteHorizonMs`` is ``None`` when the batch has none), plus ``records``
  (a list of record dicts) when ``deep``, and ``error``/``errorPosition`` when the entry cannot be decoded;
* dicts with an ``event`` key for what is not a batch: ``"invalidBytes"`` (a torn tail or a partial batch at
  the end: ``position``, ``bytes``, ``reason``) and ``"corrupt"`` (framing that stops the scan, e.g. a size
  field below 14: ``position``, ``reason``).

Record dicts: ``offset, timestamp, key, value, headers`` (bytes / ``None``; headers as ``[(str, bytes|None)]``),
``keySize``/``valueSize`` (-1 for null), v2 ``sequence``, legacy ``crc``/``isValid``, and for control records
``controlType`` (COMMIT, ABORT, LEADER_CHANGE, ...) with ``coordinatorEpoch`` for transaction markers.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Callable, Iterator

from kafkalog.storage.codec.compression import CODEC_NAMES, DEFAULT_DECOMPRESS_LIMIT
from kafkalog.storage.errors import CorruptRecordError, KafkaLogError
from kafkalog.storage.io.fs import SegmentFile, UrlPath, fetch, is_url
from kafkalog.storage.io.local import map_regular
from kafkalog.storage.records.batch import HEADER_SIZE, RECORD_CHUNK, TIMESTAMP_TYPE_NAMES, RecordBatch
from kafkalog.storage.records.control import (
    ABORT,
    COMMIT,
    control_type_name,
    parse_control_key,
    parse_end_txn_marker,
)
from kafkalog.storage.records.legacy import LegacyBatch
from kafkalog.storage.records.reader import LogScanner, WindowedScanner
from kafkalog.storage.records.salvage import SkippedRange, salvage_scan

#: called per record of a non-control batch with (batch dict, record dict); may add keys (decoded key/value)
RecordDecoder = Callable[[dict, dict], None]
_OFFSET_SIZE = struct.Struct(">qi")


class RecordStream:
    """The record dicts of a data batch declaring more records than one chunk (``RECORD_CHUNK``), decoded a
    chunk at a time as they are iterated, once: memory stays bounded by the chunk whatever count the batch
    declares. A decoding error ends the iteration and is put into the batch dict (``error``,
    ``errorPosition``), after the records already produced."""

    def __init__(self, b: RecordBatch, d: dict, decoder: RecordDecoder | None,
                 offsets: tuple[int, int] | None = None):
        self._b: RecordBatch | None = b
        self._d = d
        self._decoder = decoder
        self._offsets = offsets

    def __iter__(self) -> Iterator[dict]:
        b, self._b = self._b, None
        if b is None:
            return
        try:
            for chunk in b.record_chunks(full=True):
                if self._offsets is not None:
                    lo, hi = self._offsets
                    chunk = [r for r in chunk if lo <= r.offset < hi]
                yield from _v2_record_dicts(chunk, self._d, self._decoder)
        except KafkaLogError as e:
            self._d["error"] = e.reason
            self._d["errorPosition"] = e.position


def dump_log(path: str | os.PathLike, *, deep: bool = False, max_bytes: int | None = None,
             max_message_size: int | None = None, decompress_limit: int = DEFAULT_DECOMPRESS_LIMIT,
             record_decoder: RecordDecoder | None = None, stream: bool = False, start_position: int = 0,
             offsets: tuple[int, int] | None = None, salvage: bool = False) -> Iterator[dict]:
    """Yield the entries of the ``.log`` (or KRaft ``.checkpoint``) file at ``path``; see the module doc.

    ``max_bytes``: scan only the first N bytes (then a partial batch at the cut is not reported, as
    DumpLogSegments). ``max_message_size``: a size field above it is reported as corrupt (framing stops).
    ``stream``: a data batch declaring more than ``RECORD_CHUNK`` records gets a :class:`RecordStream` as its
    ``records`` (iterate it before asking for the next entry) instead of a list.
    ``offsets``: only entries holding offsets in ``[lo, hi)`` (and, when ``deep``, only those records), scanning
    from ``start_position`` (a batch boundary at or before ``lo``, from the offset index); entries whose offsets
    cannot be read are always yielded.
    ``salvage``: only valid batches (structure, CRC and records: :func:`~kafkalog.storage.records.salvage.salvage_scan`)
    and, for each damaged region in between, ``{"event": "skipped", "position", "bytes", "reason"}``; the scan
    resynchronises after it instead of stopping.
    """
    name = str(path)
    if not is_url(path):
        yield from _dump_mapped(name, name, max_bytes, start_position, offsets, salvage, deep=deep,
                                max_message_size=max_message_size, decompress_limit=decompress_limit,
                                record_decoder=record_decoder, stream=stream)
        return
    url = UrlPath.of(path)  # type: ignore[arg-type]
    if salvage:  # the resynchronising scan reads a mapped file: a local copy, fetched in windows, then removed
        with tempfile.TemporaryDirectory(prefix="kafkalog-dump-") as tmp:
            local = os.path.join(tmp, url.name)
            try:
                fetch(url.spec, url.fspath, local)
            except OSError as e:
                raise CorruptRecordError(f"cannot read: {e}", name) from None
            yield from _dump_mapped(local, name, max_bytes, start_position, offsets, salvage, deep=deep,
                                    max_message_size=max_message_size, decompress_limit=decompress_limit,
                                    record_decoder=record_decoder, stream=stream)
        return
    try:
        file = SegmentFile(url.spec, url.fspath)
    except OSError as e:
        raise CorruptRecordError(f"cannot open: {e}", name) from None
    with file:  # read in windows through the filesystem seam, never whole
        if file.size == 0:
            return
        end = file.size if max_bytes is None else min(file.size, max(0, max_bytes))
        scanner = WindowedScanner(file, min(start_position, end), end, path=name, max_batch_size=max_message_size,
                                  decompress_limit=decompress_limit)
        yield from _scan_dicts(scanner, file.size, name, max_bytes, offsets, deep=deep, record_decoder=record_decoder,
                               stream=stream)


def _dump_mapped(local: str, name: str, max_bytes: int | None, start_position: int,
                 offsets: tuple[int, int] | None, salvage: bool, *, deep: bool, max_message_size: int | None,
                 decompress_limit: int, record_decoder: RecordDecoder | None, stream: bool) -> Iterator[dict]:
    """:func:`dump_log` of the local file ``local`` (mapped), reported as ``name``."""
    mm, size = map_regular(local, CorruptRecordError)  # a FIFO, socket or device is refused, never opened blocking
    if size == 0:
        return
    mv = memoryview(mm)
    try:
        end = size if max_bytes is None else min(size, max(0, max_bytes))
        if salvage:
            yield from _salvage_dicts(mv, min(start_position, end), end, name, deep=deep,
                                      max_message_size=max_message_size, decompress_limit=decompress_limit,
                                      record_decoder=record_decoder, stream=stream)
            return
        scanner = LogScanner(mv, min(start_position, end), end, path=name, max_batch_size=max_message_size,
                             decompress_limit=decompress_limit)
        yield from _scan_dicts(scanner, size, name, max_bytes, offsets, deep=deep, record_decoder=record_decoder,
                               stream=stream)
    finally:
        try:
            mv.release()
            mm.close()
        except BufferError:  # a view is still referenced somewhere; the mmap closes when it is collected
            pass


def _scan_dicts(scanner: LogScanner, size: int, name: str, max_bytes: int | None, offsets: tuple[int, int] | None,
                *, deep: bool, record_decoder: RecordDecoder | None, stream: bool) -> Iterator[dict]:
    """The entries of ``scanner`` (over a file of ``size`` bytes) as :func:`dump_log` yields them."""
    batch = None
    try:
        for batch in scanner:
            d = batch_dict(batch, name, deep=deep, record_decoder=record_decoder, stream=stream, offsets=offsets)
            batch = None  # drop the view into the file's bytes before handing out the dict
            if offsets is not None:
                lo, hi = offsets
                if d["lastOffset"] is not None and d["lastOffset"] < lo:
                    continue
                if d["magic"] == 2 and d["baseOffset"] is not None and (d["baseOffset"] >= hi or lo >= hi):
                    return  # past the range (or an empty range): nothing after it is asked for
                if d["baseOffset"] is not None and (d["baseOffset"] >= hi or lo >= hi):
                    continue
            yield d
    except CorruptRecordError as e:
        yield {"file": name, "event": "corrupt", "position": e.position, "reason": e.reason}
        return
    finally:
        batch = None
    stop = scanner.stop_position
    if max_bytes is None and stop < size:
        yield {"file": name, "event": "invalidBytes", "position": stop, "bytes": size - stop,
               "reason": scanner.stop_reason or "partial batch"}


def _salvage_dicts(mv: memoryview, start: int, end: int, name: str, *, deep: bool, max_message_size: int | None,
                   decompress_limit: int, record_decoder: RecordDecoder | None, stream: bool) -> Iterator[dict]:
    for x in salvage_scan(mv, start, end, path=name, max_batch_size=max_message_size,
                          decompress_limit=decompress_limit):
        if isinstance(x, SkippedRange):
            yield {"file": name, "event": "skipped", "position": x.start, "bytes": x.size, "reason": x.reason}
        else:
            d = batch_dict(x, name, deep=deep, record_decoder=record_decoder, stream=stream)
            del x
            yield d


def batch_dict(batch: RecordBatch | LegacyBatch, file: str | None = None, *, deep: bool = False,
               record_decoder: RecordDecoder | None = None, stream: bool = False,
               offsets: tuple[int, int] | None = None) -> dict:
    """The dump dict of one shallow entry (see the module doc); with ``offsets``, only the records in that
    ``[lo, hi)`` range."""
    if isinstance(batch, RecordBatch):
        d = _v2_dict(batch, file)
    else:
        d = _legacy_dict(batch, file)
    if (deep and stream and "error" not in d and isinstance(batch, RecordBatch) and not d["isControl"]
            and (d["count"] or 0) > RECORD_CHUNK):
        d["records"] = RecordStream(batch, d, record_decoder, offsets)
    elif deep and "error" not in d:
        try:
            recs = _v2_records(batch, d, record_decoder) if isinstance(batch, RecordBatch) \
                else _legacy_records(batch, d, record_decoder)
            d["records"] = recs if offsets is None else [r for r in recs if offsets[0] <= r["offset"] < offsets[1]]
        except KafkaLogError as e:
            d["error"] = e.reason
            d["errorPosition"] = e.position
    return d


def _v2_dict(b: RecordBatch, file: str | None) -> dict:
    if b.size < HEADER_SIZE:
        base, _ = _OFFSET_SIZE.unpack_from(b.buf, 0)
        return {"file": file, "baseOffset": base, "lastOffset": None, "count": None, "position": b.position,
                "size": b.size, "magic": b.magic, "codec": None, "crc": None, "isValid": False,
                "timestampType": None, "maxTimestamp": None, "producerId": None, "producerEpoch": None,
                "baseSequence": None, "lastSequence": None, "partitionLeaderEpoch": None,
                "isTransactional": None, "isControl": None, "deleteHorizonMs": None,
                "error": f"record batch of {b.size} bytes is smaller than the 61-byte v2 header",
                "errorPosition": b.position}
    h = b._header()
    attrs = h[5] & 0xFF
    codec = attrs & 0x07
    d = {
        "file": file, "baseOffset": h[0], "lastOffset": h[0] + h[6], "count": h[12], "position": b.position,
        "size": b.size, "magic": b.magic, "codec": CODEC_NAMES.get(codec, f"unknown({codec})"), "crc": h[4],
        "isValid": b.is_valid(), "timestampType": TIMESTAMP_TYPE_NAMES[b.timestamp_type],
        "maxTimestamp": h[8], "producerId": h[9], "producerEpoch": h[10], "baseSequence": h[11],
        "lastSequence": b.last_sequence, "partitionLeaderEpoch": h[2],
        "isTransactional": bool(attrs & 0x10), "isControl": bool(attrs & 0x20),
        "deleteHorizonMs": h[7] if attrs & 0x40 else None,
    }
    if b.magic != 2:
        d["error"] = f"unsupported magic {b.magic} (expected 0, 1 or 2)"
        d["errorPosition"] = b.position + 16
    return d


def _legacy_dict(b: LegacyBatch, file: str | None) -> dict:
    magic = b.magic
    codec = b.codec
    d = {
        "file": file, "baseOffset": None, "lastOffset": b.last_offset, "count": None, "position": b.position,
        "size": b.size, "magic": magic, "codec": CODEC_NAMES.get(codec, f"unknown({codec})"), "crc": b.crc,
        "isValid": b.is_valid(), "timestampType": TIMESTAMP_TYPE_NAMES[b.timestamp_type],
        "maxTimestamp": b.max_timestamp, "producerId": -1, "producerEpoch": -1, "baseSequence": -1,
        "lastSequence": -1, "partitionLeaderEpoch": -1, "isTransactional": False, "isControl": False,
        "deleteHorizonMs": None,
    }
    if magic not in (0, 1):
        d["error"] = f"unsupported magic {magic} (expected 0, 1 or 2)"
        d["errorPosition"] = b.position + 16
        return d
    if codec == 0:
        d["baseOffset"] = d["lastOffset"]
        d["count"] = 1
    else:
        try:  # the base offset of a wrapper is its first inner offset: needs decompression
            inner = b.inner_messages()
            d["baseOffset"] = inner[0].offset
            d["count"] = len(inner)
        except KafkaLogError as e:
            d["error"] = e.reason
            d["errorPosition"] = e.position
    return d


def _v2_records(b: RecordBatch, d: dict, decoder: RecordDecoder | None) -> list[dict]:
    return list(_v2_record_dicts(b.records(), d, decoder))


def _v2_record_dicts(records, d: dict, decoder: RecordDecoder | None) -> Iterator[dict]:
    control = d["isControl"]
    for r in records:
        rd = {"offset": r.offset, "timestamp": r.timestamp, "key": r.key, "value": r.value,
              "headers": r.headers, "keySize": -1 if r.key is None else len(r.key),
              "valueSize": -1 if r.value is None else len(r.value), "sequence": r.sequence}
        if control:
            _control(rd, r.key, r.value)
        elif decoder is not None:
            decoder(d, rd)
        yield rd


def _control(rd: dict, key, value) -> None:
    try:
        _, ctype = parse_control_key(key)
    except CorruptRecordError as e:
        rd["controlType"] = None
        rd["controlError"] = e.reason
        return
    rd["controlType"] = control_type_name(ctype)
    rd["controlTypeId"] = ctype
    if ctype in (ABORT, COMMIT):
        try:
            rd["coordinatorEpoch"] = parse_end_txn_marker(value)[1]
        except CorruptRecordError as e:
            rd["controlError"] = e.reason


def _legacy_records(b: LegacyBatch, d: dict, decoder: RecordDecoder | None) -> list[dict]:
    out = []
    for offset, timestamp, key, value, magic, crc, valid in b.message_fields():
        rd = {"offset": offset, "timestamp": timestamp, "key": key, "value": value, "headers": [],
              "keySize": -1 if key is None else len(key), "valueSize": -1 if value is None else len(value),
              "magic": magic, "crc": crc, "isValid": valid}
        if decoder is not None:
            decoder(d, rd)
        out.append(rd)
    return out
