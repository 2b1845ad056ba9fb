"""``df.write.format("kafkalog").save(DIR)``: records into a Kafka data dir, through the write path.

Columns used (others are ignored): ``topic`` (or option ``topic``), ``partition`` (default 0), ``key``,
``value`` (binary or string), ``headers`` (array<struct<key:string,value:binary>>), ``timestamp``
(TIMESTAMP, as ``format("kafkalog")`` and ``format("kafka")`` read it, or bigint epoch ms; without it
``timestampMs``; null/missing = the job's start time; sub-millisecond digits are dropped), ``offset`` (with ``offsets=keep`` only).

Options:

==================  ==========================================================================================
``offsets``         ``assign`` (default): each partition's offsets continue from its log end offset, in Spark
                    partition order then row order; ``keep``: use the ``offset`` column (rows of one topic
                    partition must not overlap across Spark partitions — repartition by topic, partition and
                    sort by offset)
``codec``           ``none`` (default), ``gzip``, ``snappy``, ``lz4``, ``zstd``
``batchSize``       uncompressed bytes per record batch (default 16384, the producer's ``batch.size``)
``maxBatchRecords`` records per batch at most (default 10000)
``leaderEpoch``     partition leader epoch stamped on batches (default 0)
``topic``           topic for rows without a ``topic`` column
``topicIds``        ``TOPIC=ID,...``: topic ids (as Kafka prints them) for ``partition.metadata``; also
                    ``topicId.<topic>=ID`` (Spark lower-cases option names: matched ignoring case)
``config.<name>``   topic configs for the write path (``config.segment.bytes``, ``config.message.timestamp.type``,
                    ``config.compression.type`` ...)
==================  ==========================================================================================

How: each Spark task builds compressed v2 batches (the expensive part, in parallel) into staging files under
``.DIRNAME.kafkalog-staging/<job>/`` beside the data dir; the job commit (driver side) takes the data dir's ``.lock`` and appends the
staged batches partition by partition with :class:`kafkalog.storage.engine.writer.LogWriter` (offsets, leader
epoch, indexes, rolls, producer snapshots, ``leader-epoch-checkpoint``), then flushes the dir
(the library's flush plan: recovery points, log start offsets). Abort deletes the
staging files. The target must be a local directory; ``mode("overwrite")`` is refused (nothing is deleted).
"""

from __future__ import annotations

import os
import shutil
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from kafkalog.storage.codec.compression import CODEC_IDS
from kafkalog.storage.errors import ConfigError, LogDirError
from kafkalog.storage.log.topic_partition import partition_dir_name
from kafkalog.storage.records import build_batch

STAGING = ".kafkalog-staging"


def staging_root(wo: WriteOptions) -> Path:
    """Beside the data dir, never inside it (a broker refuses a data dir holding a directory that is not a
    partition)."""
    p = Path(wo.path)
    return p.parent / f".{p.name}{STAGING}"
_ENTRY_HEAD = struct.Struct(">qi")


@dataclass
class Staged:
    topic: str
    partition: int
    path: str
    task: int
    first_offset: int | None
    last_offset: int | None
    records: int = 0
    batches: int = 0

    @property
    def span(self) -> tuple[int, int] | None:
        """The first and last offset staged; None before the first record."""
        if self.first_offset is None or self.last_offset is None:
            return None
        return self.first_offset, self.last_offset


@dataclass
class KafkaLogCommit(WriterCommitMessage):
    staged: list[Staged] = field(default_factory=list)


@dataclass(frozen=True)
class WriteOptions:
    path: str
    keep_offsets: bool = False
    codec: int = 0
    batch_size: int = 16384
    max_batch_records: int = 10000
    leader_epoch: int = 0
    topic: str | None = None
    topic_ids: tuple[tuple[str, str], ...] = ()
    topic_config: tuple[tuple[str, str], ...] = ()
    now_ms: int = 0
    job: str = ""


def parse_write_options(options: dict[str, str]) -> WriteOptions:
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    path = opts.get("path")
    if not path:
        raise ConfigError("give the target data dir: save(DIR) or option('path', DIR)")
    if "://" in path and not path.startswith("file://"):
        raise ConfigError(f"the kafkalog writer writes local data dirs only, not {path}")
    path = os.path.abspath(path.removeprefix("file://"))
    mode = opts.get("offsets", "assign").lower()
    if mode not in ("assign", "keep"):
        raise ConfigError(f"option offsets: expected 'assign' or 'keep', got {mode!r}")
    codec_name = opts.get("codec", "none").lower()
    codec = CODEC_IDS.get(codec_name)
    if codec is None:  # "producer" names no codec here: a DataFrame's rows are no producer's batches
        names = ", ".join(n for n, c in CODEC_IDS.items() if c is not None)
        raise ConfigError(f"option codec: expected one of {names}, got {codec_name!r}")
    try:
        batch_size = int(opts.get("batchsize", "16384"))
        max_records = int(opts.get("maxbatchrecords", "10000"))
        epoch = int(opts.get("leaderepoch", "0"))
    except ValueError as e:
        raise ConfigError(f"expected an integer option: {e}") from None
    return WriteOptions(
        path=path,
        keep_offsets=mode == "keep",
        codec=codec,
        batch_size=max(1, batch_size),
        max_batch_records=max(1, max_records),
        leader_epoch=epoch,
        topic=opts.get("topic"),
        topic_ids=_topic_ids(opts),
        topic_config=tuple(sorted((k[len("config."):], v) for k, v in opts.items() if k.startswith("config."))),
        now_ms=int(time.time() * 1000),
        job=uuid.uuid4().hex,
    )


def _topic_ids(opts: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """``topicIds=TopicA=id,TopicB=id`` (keeps the case of topic names) and ``topicId.<topic>=id`` (Spark
    lower-cases option names, so this form is matched case-insensitively)."""
    out: dict[str, str] = {}
    for k, v in opts.items():
        if k.startswith("topicid."):
            out[k[len("topicid."):]] = v
    for item in (opts.get("topicids") or "").split(","):
        name, sep, tid = item.strip().partition("=")  # topic names never hold "="
        if sep and name:
            out[name] = tid
        elif item.strip():
            raise ConfigError(f"option topicIds: expected TOPIC=ID[,TOPIC=ID...], got {item!r}")
    return tuple(sorted(out.items()))


def topic_id_for(wo: WriteOptions, topic: str) -> str | None:
    ids = dict(wo.topic_ids)
    if topic in ids:
        return ids[topic]
    lowered = [v for k, v in ids.items() if k.lower() == topic.lower()]
    return lowered[0] if len(lowered) == 1 else None


# ------------------------------------------------------------------------------------------- task side
class _PartitionStager:
    def __init__(self, wo: WriteOptions, topic: str, partition: int, task: int, directory: Path):
        self.wo = wo
        name = partition_dir_name(topic, partition)  # a topic Kafka accepts: never a path out of the staging dir
        directory.mkdir(parents=True, exist_ok=True)
        self.staged = Staged(topic, partition, str(directory / f"{name}.{task}.{uuid.uuid4().hex}"),
                             task, None, None)
        self.f = open(self.staged.path, "wb")
        self.pending: list[tuple] = []
        self.pending_bytes = 0

    def add(self, rec: tuple) -> None:
        self.pending.append(rec)
        self.pending_bytes += 20 + len(rec[2] or b"") + len(rec[3] or b"")
        if self.pending_bytes >= self.wo.batch_size or len(self.pending) >= self.wo.max_batch_records:
            self.flush()

    def flush(self) -> None:
        recs = self.pending
        if not recs:
            return
        if self.wo.keep_offsets:
            recs.sort(key=lambda r: r[0])
            base = recs[0][0]
        else:
            base = 0
            recs = [(i, *r[1:]) for i, r in enumerate(recs)]
        data = build_batch(recs, base_offset=base, codec=self.wo.codec, partition_leader_epoch=self.wo.leader_epoch)
        self.f.write(data)
        s = self.staged
        if self.wo.keep_offsets:
            s.first_offset = base if s.first_offset is None else min(s.first_offset, base)
            s.last_offset = recs[-1][0] if s.last_offset is None else max(s.last_offset, recs[-1][0])
        s.records += len(recs)
        s.batches += 1
        self.pending = []
        self.pending_bytes = 0

    def close(self) -> Staged:
        self.flush()
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        return self.staged


def _as_bytes(v):
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


def _epoch_ms(rb, n: int) -> list:
    """The rows' timestamps as epoch ms (None where null): from ``timestamp`` (TIMESTAMP or bigint epoch ms) or
    else ``timestampMs``; a TIMESTAMP is floored to whole ms, as Kafka stores them."""
    import pyarrow as pa

    for name in ("timestamp", "timestampMs"):
        if name in rb.schema.names:
            c = rb.column(name)
            if not pa.types.is_timestamp(c.type):
                return c.to_pylist()
            per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[c.type.unit]
            raw = c.cast(pa.int64()).to_pylist()
            if per_ms is None:
                return [None if v is None else v * 1000 for v in raw]
            return [None if v is None else v // per_ms for v in raw]
    return [None] * n


def stage_rows(wo: WriteOptions, batches: Iterator, task: int) -> list[Staged]:
    """Turn Arrow batches of rows into staged v2 batches, one staging file per topic partition."""
    directory = staging_root(wo) / wo.job
    stagers: dict[tuple[str, int], _PartitionStager] = {}
    try:
        for rb in batches:
            n = rb.num_rows
            names = rb.schema.names

            def col(name, default=None, _rb=rb, _n=n, _names=names):
                return _rb.column(name).to_pylist() if name in _names else [default] * _n

            if "topic" not in names and wo.topic is None:
                raise ConfigError("rows need a topic column, or option('topic', NAME)")
            topics = col("topic", wo.topic)
            parts = col("partition", 0)
            keys, values, headers = col("key"), col("value"), col("headers")
            stamps = _epoch_ms(rb, n)
            offsets = col("offset") if wo.keep_offsets else [None] * n
            if wo.keep_offsets and "offset" not in names:
                raise ConfigError("offsets=keep needs an offset column")
            for i in range(n):
                topic = topics[i] if topics[i] is not None else wo.topic
                part = parts[i] if parts[i] is not None else 0
                if topic is None:
                    raise ConfigError(f"row {i} has a null topic")
                if wo.keep_offsets and offsets[i] is None:
                    raise ConfigError(f"row {i} has a null offset (offsets=keep)")
                st = stagers.get((topic, part))
                if st is None:
                    st = stagers[(topic, part)] = _PartitionStager(wo, topic, part, task, directory)
                hs = headers[i]
                hs = [(h["key"], _as_bytes(h["value"])) for h in hs] if hs else []
                ts = stamps[i] if stamps[i] is not None else wo.now_ms
                st.add((offsets[i], ts, _as_bytes(keys[i]), _as_bytes(values[i]), hs))
        return [s.close() for s in stagers.values()]
    except BaseException:
        for s in stagers.values():
            s.f.close()
        raise


# ------------------------------------------------------------------------------------------- commit side
def _iter_staged_batches(path: str) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while True:
            head = f.read(12)
            if len(head) < 12:
                return
            _, size = _ENTRY_HEAD.unpack(head)
            yield head + f.read(size)


def commit_staged(wo: WriteOptions, staged: list[Staged]) -> dict[tuple[str, int], int]:
    """Append staged batches into the data dir (the library's :func:`append_partitions`: under the data dir's
    lock, then flushed); returns each written partition's log end offset."""
    from kafkalog.storage.config.log_config import LogConfig
    from kafkalog.storage.engine.writer import append_partitions

    root = Path(wo.path)
    cfg = LogConfig.from_topic_props(dict(wo.topic_config)) if wo.topic_config else LogConfig()
    by_tp: dict[tuple[str, int], list[Staged]] = {}
    for s in staged:
        by_tp.setdefault((s.topic, s.partition), []).append(s)
    ordered: dict[tuple[str, int], list[Staged]] = {}
    for (topic, part), items in sorted(by_tp.items()):
        if wo.keep_offsets:
            spans = sorted(((span, s) for s in items if s.records and (span := s.span) is not None),
                           key=lambda x: x[0][0])
            for ((a_first, a_last), a), ((b_first, b_last), b) in zip(spans, spans[1:], strict=False):
                if b_first <= a_last:
                    raise LogDirError(
                        f"offsets of {topic}-{part} overlap between Spark tasks {a.task} and {b.task} "
                        f"({a_first}..{a_last} and {b_first}..{b_last}): "
                        "repartition by topic, partition and sort by offset first", str(root))
            items = [s for _, s in spans]
        else:
            items = sorted(items, key=lambda s: s.task)
        ordered[(topic, part)] = items

    def batches(items: list[Staged]):
        for s in items:
            yield from _iter_staged_batches(s.path)

    ends = append_partitions(root, {tp: batches(items) for tp, items in ordered.items()}, config=cfg,
                             topic_ids={t: topic_id_for(wo, t) for t, _ in ordered}, leader_epoch=wo.leader_epoch,
                             keep_offsets=wo.keep_offsets, now_ms=wo.now_ms)
    shutil.rmtree(staging_root(wo) / wo.job, ignore_errors=True)
    _remove_if_empty(staging_root(wo))
    return ends


def _remove_if_empty(p: Path) -> None:
    try:
        p.rmdir()
    except OSError:
        pass


class KafkaLogWriter(DataSourceArrowWriter):
    def __init__(self, schema, options: dict[str, str], overwrite: bool):
        if overwrite:
            raise ConfigError("mode('overwrite') is not supported: kafkalog never deletes log data; write to a new "
                              "dir or use mode('append')")
        self.wo = parse_write_options(options)

    def write(self, iterator) -> KafkaLogCommit:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx is not None else 0
        return KafkaLogCommit(stage_rows(self.wo, iterator, task))

    def commit(self, messages) -> None:
        staged = [s for m in messages if m is not None for s in m.staged]
        commit_staged(self.wo, staged)

    def abort(self, messages) -> None:
        shutil.rmtree(staging_root(self.wo) / self.wo.job, ignore_errors=True)
        _remove_if_empty(staging_root(self.wo))
