"""`kafkalog append DIR TOPIC-PARTITION --from FILE.jsonl`: append records as a broker leader would."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

from kafkalog.storage.codec.compression import CODEC_IDS
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.validator import preview_append
from kafkalog.storage.engine.writer import append_to_partition
from kafkalog.storage.errors import ConfigError
from kafkalog.storage.io.jsonio import (
    INT16,
    INT32,
    b64_field,
    header_fields,
    int_field,
    iter_lines,
    loads,
    typed_field,
)
from kafkalog.storage.log.topic_partition import live_topic_partition
from kafkalog.storage.records import build_batch
from kafkalog.tools.output import NOW_GRAMMAR, timestamp_ms

DESCRIPTION = """\
Each input line is either a batch object as printed by `kafkalog dump --json --deep` (its "records" array
becomes one batch; codec, producerId/Epoch, baseSequence, isTransactional, isControl kept) or a single record
{"key":..., "value":..., "timestamp":..., "headers":[...]} (one batch per line). key/value are base64 (null
for null) unless --payload utf8. Keys are camelCase, as dump prints them: another key (producer_id) is an error.

By default offsets are assigned from the log end offset (leader append: partition leader epoch stamped,
LogAppendTime applied when the topic says so, re-compression per compression.type); --keep-offsets appends as
a follower. Segments roll, indexes, .txnindex, producer snapshots and leader-epoch-checkpoint are maintained
as by the broker. Run `kafkalog flush DIR` afterwards to write the data dir's checkpoints.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("data_dir", metavar="DIR")
    p.add_argument("partition", metavar="TOPIC-PARTITION")
    p.add_argument("--from", dest="source", required=True, metavar="FILE.jsonl", help="input ('-' for stdin)")
    p.add_argument("--keep-offsets", action="store_true", help="follower append: keep the input's offsets")
    p.add_argument("--leader-epoch", type=int, default=0, metavar="N", help="partition leader epoch stamped (default 0)")
    p.add_argument("--topic-id", metavar="ID", help="topic id for partition.metadata (22-char base64)")
    p.add_argument("--server-properties", metavar="FILE")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--payload", choices=("base64", "utf8"), default="base64")
    p.add_argument("--now", type=timestamp_ms, metavar="TIME", help=f"the time of the append (producer expiration): {NOW_GRAMMAR}")
    p.add_argument("--dry-run", action="store_true",
                   help="read and check every input line and say what would be appended; change nothing")


def _decode(v, payload: str, field: str) -> bytes | None:
    if payload != "utf8":
        return b64_field(v, field)
    if v is not None and not isinstance(v, str):
        raise ValueError(f"field {field!r}: expected text or null, got {type(v).__name__}")
    return None if v is None else v.encode("utf-8", "surrogateescape")


_CAMEL = re.compile(r"[a-z][a-zA-Z0-9]*")


def _camel_keys(obj, where: str = "") -> None:
    """Keys are camelCase, as `dump --json` prints them (docs/json.md): a ``producer_id`` is refused, not ignored."""
    for k in obj if isinstance(obj, dict) else ():
        if not (isinstance(k, str) and _CAMEL.fullmatch(k)):
            camel = re.sub(r"[_-]+([a-zA-Z0-9])", lambda m: m.group(1).upper(), str(k))
            raise ValueError(f"{where}key {k!r} is not camelCase (the keys are as `kafkalog dump --json` prints "
                             f"them: {camel[:1].lower() + camel[1:]!r})")


def batch_from_json(obj: dict, payload: str = "base64") -> bytes:
    """One v2 batch from a `dump --json --deep` batch object or a single-record object."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object (a batch as `dump --json --deep` prints it, or one record), "
                         f"got {json.dumps(obj)[:40]}")
    _camel_keys(obj)
    batch = isinstance(obj, dict) and isinstance(obj.get("records"), list)
    for i, r in enumerate(obj["records"] if batch else [obj]):
        _camel_keys(r, f"records[{i}]: " if batch else "")
        hs = r.get("headers") if isinstance(r, dict) else None
        for j, h in enumerate(hs if isinstance(hs, list) else ()):  # not a list: header_fields says so
            _camel_keys(h, f"{f'records[{i}].' if batch else ''}headers[{j}]: ")
    recs_in = obj.get("records")
    if recs_in is None:
        recs_in, obj = [obj], {}
    if not isinstance(recs_in, list) or not all(isinstance(r, dict) for r in recs_in):
        raise ValueError("field 'records': expected a list of objects")
    base = int_field(obj.get("baseOffset", 0), "baseOffset")
    recs = []
    for i, r in enumerate(recs_in):
        at = f"records[{i}]." if obj else ""
        headers = header_fields(r.get("headers"), lambda v, f: _decode(v, payload, f), at)
        off = int_field(r.get("offset"), f"{at}offset", null=True)
        recs.append((off if off is not None else base + i,
                     int_field(r.get("timestamp", int(time.time() * 1000)), f"{at}timestamp"),
                     _decode(r.get("key"), payload, f"{at}key"),
                     _decode(r.get("value"), payload, f"{at}value"), headers))
    codec = obj.get("codec", "none")
    codec_id = CODEC_IDS.get(codec) if isinstance(codec, str) else None
    if codec_id is None:  # "producer" names no codec of its own here: there is no producer's batch to keep
        raise ConfigError(f"unknown codec {codec!r}")
    return build_batch(recs, base_offset=base if "baseOffset" in obj else (recs[0][0] if recs else 0),
                       codec=codec_id, producer_id=int_field(obj.get("producerId", -1), "producerId"),
                       producer_epoch=int_field(obj.get("producerEpoch", -1), "producerEpoch", INT16),
                       base_sequence=int_field(obj.get("baseSequence", -1), "baseSequence", INT32),
                       is_transactional=typed_field(obj.get("isTransactional", False), "isTransactional", bool),
                       is_control=typed_field(obj.get("isControl", False), "isControl", bool),
                       partition_leader_epoch=int_field(obj.get("partitionLeaderEpoch", -1), "partitionLeaderEpoch",
                                                        INT32),
                       strict=True)


def _batches(src, args: argparse.Namespace):
    lines = iter_lines(src)
    while True:
        try:
            lineno, line = next(lines)
        except StopIteration:
            return
        except ValueError as e:
            raise ConfigError(str(e), args.source) from None
        if not line.strip():
            continue
        try:
            obj = loads(line)
        except ValueError as e:
            raise ConfigError(f"line {lineno}: not JSON ({e})", args.source) from None
        try:
            batch = batch_from_json(obj, args.payload)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            what = f"missing field {e}" if isinstance(e, KeyError) else str(e)
            raise ConfigError(f"line {lineno}: {what}", args.source) from None
        yield batch


def run(args: argparse.Namespace) -> int:
    topic, _ = live_topic_partition(args.partition)
    resolver = ConfigResolver(args.server_properties, None, args.config, data_dirs=[args.data_dir])
    cfg = resolver.log_config(args.data_dir, topic)
    src = sys.stdin if args.source == "-" else open(args.source, encoding="utf-8")  # noqa: SIM115
    with src:
        if args.dry_run:
            n, records, leo = preview_append(args.data_dir, args.partition, _batches(src, args), config=cfg,
                                             keep_offsets=args.keep_offsets, topic_id=args.topic_id,
                                             leader_epoch=args.leader_epoch)
            print(f"{os.path.join(args.data_dir, args.partition)}: would append {n} batches ({records} records); "
                  f"log end offset would be {leo} (dry run: nothing changed)", file=sys.stderr)
            return 0
        n, leo = append_to_partition(args.data_dir, args.partition, _batches(src, args), config=cfg,
                                     topic_id=args.topic_id, leader_epoch=args.leader_epoch,
                                     keep_offsets=args.keep_offsets, now_ms=args.now)
    print(f"{os.path.join(args.data_dir, args.partition)}: appended {n} batches; log end offset {leo}",
          file=sys.stderr)
    return 0
