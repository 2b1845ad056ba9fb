"""Streaming: ``spark.readStream.format("kafkalog")`` over live data dirs (a ``DataSourceStreamReader``).

The stream's offsets are Spark's Kafka source's: JSON ``{"topic": {"partition": nextOffset}}``. Each trigger
lists the partitions under the paths and takes, per partition, the offset after the last *complete* batch on
disk (a broker appending to the active segment may leave a torn batch at its end: never read past the last
whole batch with a valid CRC), optionally bounded by the high watermark of ``replication-offset-checkpoint``, and
rate-limited like Spark's Kafka source. A micro-batch is one input partition per topic-partition ``[start, end)``,
planned on the executor with the batch reader's planner (the offset index finds where ``start`` is) and read with
the batch reader's scan: the same schema, options and Arrow path.

Stream options (besides the read options of :mod:`.options`, which apply as in a batch read, except the offset and
timestamp ranges, which ``startingOffsets`` replaces)::

    startingOffsets         earliest (default), latest, or JSON {"t": {"0": 23, "1": -2}} (-2 earliest, -1 latest;
                            partitions left out start at the earliest); only for a new query: a restarted query
                            continues from its checkpoint
    maxOffsetsPerTrigger    at most this many offsets per trigger over all partitions, spread in proportion to
                            what each has ready (Spark's Kafka source's rule: a small share is rounded up, so the
                            total may exceed it by up to the number of partitions); alias maxRecordsPerTrigger
    failOnDataLoss          true (default): fail the query when offsets it has not read are gone (segments deleted
                            by retention, a partition dir deleted, offsets going backwards) or a segment was
                            replaced between the plan and the read (:func:`.scan.planned_file`); false: warn and go
                            on from what is there
    boundedByHighWatermark  false (default); true: never beyond the partition's high watermark as the broker last
                            checkpointed it (``replication-offset-checkpoint``, every
                            ``replication.high.watermark.checkpoint.interval.ms``, 5 s by default): what a
                            consumer could read at that time; partitions without an entry are not bounded
    remote                  the tiered-storage stores of the topics (as in a batch read): a partition the store holds
                            starts at its log start offset (Kafka's, below its local segments) and offsets below its
                            local log start are read from the store, the others from the local segments, each once
                            (``storage.remote.tiered``). A local path or a URL (``s3://...``, with the ``s3.*``
                            options). The store is listed at each trigger; a data dir view of a partition's store
                            segments (hard links; a URL store's files fetched first) is made when a micro-batch
                            plans offsets below the local log start, reused while the listing stays the same, and
                            removed once every micro-batch planned on it is committed and no later one can need it
                            (a newer listing, or the stream past the local log start), or when the stream stops;
                            the executors must see it. Without it, a partition whose ``log-start-offset-checkpoint``
                            puts its log start below its local segments (a tiered topic's older offsets, in its
                            remote store) starts at its local log start, with one warning naming those offsets

``commit`` changes nothing on disk: the files are the broker's (it only releases the store's views no micro-batch
needs any more).
"""

from __future__ import annotations

import atexit
import json
import logging
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from kafkalog.storage.errors import ConfigError, CorruptRecordError, KafkaLogError
from kafkalog.storage.files.segment import WindowedScanner
from kafkalog.storage.io.fs import SegmentFile, as_path, display, split_uri
from kafkalog.storage.log.dir_checkpoints import (
    CheckpointTables,
    checkpoint_tables,
    open_partition_log,
    partition_checkpoints,
)
from kafkalog.storage.log.segment_ref import SegmentRef
from kafkalog.storage.records import LogScanner
from kafkalog.storage.remote.layout import LocalTieredStorageLayout, open_remote_store, remote_partition_view
from kafkalog.storage.remote.tiered import by_tier, remote_part, tiered_log_start

from .options import ReadOptions, _bool, _int, _list, parse_read_options
from .plan import Piece, discover, partition_segments, plan_pieces
from .scan import DataLossError

log = logging.getLogger("kafkalog.spark.stream")

TP = tuple[str, int]
EARLIEST, LATEST = -2, -1

DATA_LOSS_FAIL = ("Some data may have been lost because they are not available in Kafka any more; either the data "
                  "was aged out by Kafka or the topic may have been deleted before all the data in the topic was "
                  "processed. If you don't want your streaming query to fail on such cases, set the source option "
                  "\"failOnDataLoss\" to \"false\".")
DATA_LOSS_WARN = ("Some data may have been lost because they are not available in Kafka any more; either the data "
                  "was aged out by Kafka or the topic may have been deleted before all the data in the topic was "
                  "processed. If you want your streaming query to fail on such cases, set the source option "
                  "\"failOnDataLoss\" to \"true\".")


@dataclass(frozen=True)
class StreamOptions:
    starting: str | dict[TP, int] = "earliest"
    max_offsets: int | None = None
    fail_on_data_loss: bool = True
    bounded_by_hw: bool = False
    remote: tuple[str, ...] = ()  # tiered-storage stores


def parse_starting_offsets(text: str) -> str | dict[TP, int]:
    s = text.strip()
    if s.lower() in ("earliest", "latest"):
        return s.lower()
    try:
        raw = json.loads(s)
        return {(str(t), int(p)): int(o) for t, parts in raw.items() for p, o in parts.items()}
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(f"option startingOffsets: expected earliest, latest or JSON such as "
                          f"{{\"topic\": {{\"0\": 23}}}}, got {text!r}") from None


def parse_stream_options(options: Mapping[str, str]) -> StreamOptions:
    opts = {str(k).lower(): v for k, v in dict(options).items()}
    for name in ("startingOffset", "endingOffset", "startingTimestamp", "endingTimestamp", "offset", "endingOffsets"):
        if opts.get(name.lower()) not in (None, ""):
            raise ConfigError(f"option {name} is for batch reads; a stream starts at startingOffsets and never ends")
    max_offsets = _int(opts, "maxOffsetsPerTrigger", None)
    if max_offsets is None:
        max_offsets = _int(opts, "maxRecordsPerTrigger", None)
    if max_offsets is not None and max_offsets <= 0:
        raise ConfigError("option maxOffsetsPerTrigger must be positive")
    return StreamOptions(
        starting=parse_starting_offsets(str(opts.get("startingoffsets") or "earliest")),
        max_offsets=max_offsets,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        bounded_by_hw=_bool(opts, "boundedByHighWatermark", False),
        remote=tuple(_list(opts.get("remote"))),
    )


# --------------------------------------------------------------------------------------------- offsets JSON
def to_json_offsets(offsets: Mapping[TP, int]) -> dict:
    """``{topic: {partition: offset}}`` in a stable order (Spark compares offsets as JSON text)."""
    out: dict[str, dict[str, int]] = {}
    for (t, p) in sorted(offsets):
        out.setdefault(t, {})[str(p)] = int(offsets[(t, p)])
    return out


def from_json_offsets(d: Mapping | None) -> dict[TP, int]:
    return {(str(t), int(p)): int(o) for t, parts in (d or {}).items() for p, o in parts.items()}


# --------------------------------------------------------------------------------------------- the log on disk
@dataclass(frozen=True)
class PartitionState:
    """One partition as a trigger sees it: its segments, log start, complete end and high watermark; for a tiered
    partition whose store is read, where its local segments take over and the store's segments."""

    segments: tuple[SegmentRef, ...]
    log_start: int
    end: int  # offset after the last complete batch with a valid CRC
    end_position: int  # byte position after that batch in the last segment
    high_watermark: int | None
    local_start: int | None = None  # the local log start: offsets below it are read from ``remote``
    remote: RemoteTier | None = None
    in_remote: tuple[int, int] | None = None  # no store given: offsets its checkpoint puts in a remote store

    def by_tier(self, lo: int, hi: int) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """``[lo, hi)`` as ``(remote, local)`` (storage's one rule); all local when no store is read."""
        return by_tier(lo, hi, self.local_start) if self.remote is not None and self.local_start is not None \
            else (None, (lo, hi) if lo < hi else None)


@dataclass(frozen=True)
class RemoteTier:
    """A partition's segments in a tiered-storage store as a trigger listed them (``(segment id, start offset)``)."""

    store: str
    fs_opts: tuple[tuple[str, str], ...]
    topic: str
    partition: int
    segments: tuple[tuple[str, int], ...]

    @property
    def first(self) -> int:
        return min(o for _, o in self.segments)


@lru_cache(maxsize=16)
def _store(store: str, fs_opts: tuple[tuple[str, str], ...]) -> LocalTieredStorageLayout:
    st = open_remote_store(store, options=dict(fs_opts))
    atexit.register(st.close)
    return st


@dataclass
class _View:
    """One data dir view of a partition's store segments: its partition dir, the end of the offsets micro-batches
    planned on it, and the partition's local log start when they were planned (below it the store serves)."""

    pdir: str
    until: int
    local_start: int


class RemoteViews:
    """The data dir views of the tiered-storage stores (``remote``) that a stream's micro-batches read, under one
    directory of the stream's: one per listing of a partition's store segments (:class:`RemoteTier`), made when a
    micro-batch plans offsets below the partition's local log start and reused by the next ones while the listing
    stays the same. :meth:`release` (at ``commit``) removes every view whose planned micro-batches are all committed
    and that no later micro-batch can need: a newer listing took its place, or the committed offset reached the
    local log start (the store serves nothing above it); with a partition's last view go the store's local copies
    of its files (a URL store's, fetched for it). :meth:`close` (at ``stop``, or when the driver exits) removes
    them all. So the views a long-running stream keeps are bounded by its partitions and uncommitted
    micro-batches."""

    def __init__(self) -> None:
        self.root: str | None = None
        self._views: dict[RemoteTier, _View] = {}
        self._current: dict[TP, RemoteTier] = {}  # each partition's latest listing a micro-batch was planned on

    def __len__(self) -> int:
        return len(self._views)

    def partition_dir(self, tier: RemoteTier, hi: int, local_start: int) -> str:
        """The partition dir of ``tier``'s view (made now unless it exists) for a micro-batch reading offsets below
        ``hi`` from it (``local_start``: the partition's local log start)."""
        tp = (tier.topic, tier.partition)
        view = self._views.get(tier)
        if view is None:
            if self.root is None:
                self.root = tempfile.mkdtemp(prefix="kafkalog-spark-stream-remote-")
                atexit.register(self.close)
            data = tempfile.mkdtemp(prefix="view-", dir=self.root)
            try:
                remote_partition_view(_store(tier.store, tier.fs_opts), data, topic=tier.topic,
                                      partition=tier.partition)
            except BaseException:
                shutil.rmtree(data, ignore_errors=True)
                raise
            view = self._views[tier] = _View(str(as_path(data) / f"{tier.topic}-{tier.partition}"), hi, local_start)
        view.until, view.local_start = max(view.until, hi), local_start
        self._current[tp] = tier
        return view.pdir

    def release(self, committed: Mapping[TP, int]) -> None:
        """Remove the views no micro-batch planned or to come needs once the offsets ``committed`` are (see the
        class doc)."""
        for tier, view in list(self._views.items()):
            tp = (tier.topic, tier.partition)
            done = committed.get(tp)
            if done is None or done < view.until:
                continue  # a micro-batch planned on it is not committed
            if self._current.get(tp) == tier and done < view.local_start:
                continue  # the partition's latest listing, and the stream still has offsets in the store to read
            self._drop(tier)

    def close(self) -> None:
        """Remove every view (the stream stopped)."""
        for tier in list(self._views):
            self._drop(tier)
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def _drop(self, tier: RemoteTier) -> None:
        view = self._views.pop(tier)
        shutil.rmtree(str(as_path(view.pdir).parent), ignore_errors=True)
        tp = (tier.topic, tier.partition)
        if self._current.get(tp) == tier:
            del self._current[tp]
        if not any((t.topic, t.partition) == tp for t in self._views):  # (a view's files are its own hard links)
            _store(tier.store, tier.fs_opts).evict(tier.topic, tier.partition)


def remote_tiers(stores: tuple[str, ...], fs_opts: tuple[tuple[str, str], ...]) -> dict[TP, RemoteTier]:
    """The partitions of the stores, as listed now (a partition in several stores: the one holding its lowest
    offset)."""
    out: dict[TP, RemoteTier] = {}
    for store in stores:
        st = _store(store, fs_opts)
        for t, p, tid in st.partitions():
            segs = tuple((s.segment_id, s.start_offset) for s in st.segments(t, p, tid) if "log" in s.files)
            if segs and ((t, p) not in out or min(o for _, o in segs) < out[(t, p)].first):
                out[(t, p)] = RemoteTier(store, fs_opts, t, p, segs)
    return out


def complete_end(seg: SegmentRef, position: int, next_offset: int, opts: ReadOptions) -> tuple[int, int]:
    """``(position, next offset)`` after the last whole batch of ``seg`` from ``position`` (a batch boundary whose
    next offset is ``next_offset``): a batch being appended (a torn tail, or a last batch failing its CRC with
    ``verifyCrc``) or garbage ends the scan. A batch failing its CRC with whole batches after it is corruption,
    not an append in progress: it is included, for the scan to report (failfast) or show (permissive)."""
    with SegmentFile(seg.spec, seg.path) as f:
        if f.size <= position:
            return position, next_offset
        buf = f.view(position, f.size - position) if f.is_mapped else memoryview(b"")
        try:  # (a segment under a URL is read in bounded windows)
            scanner = LogScanner(buf, 0, len(buf), path=seg.name, position_base=position,
                                 max_batch_size=opts.max_batch_size) if f.is_mapped else \
                WindowedScanner(f, position, path=seg.name, max_batch_size=opts.max_batch_size)
            pending = None  # the last batch failed its CRC: still being written, unless another batch follows
            try:
                for b in scanner:
                    cur = (b.position + b.size, b.next_offset)
                    if pending is not None:  # corrupt, not in progress: read it (failfast reports it, with its place)
                        position, next_offset = pending
                        pending = None
                    if opts.verify_crc and not b.is_valid():
                        pending = cur
                    else:
                        position, next_offset = cur
                    del b
            except (CorruptRecordError, KafkaLogError):
                pass
        finally:
            del scanner
            buf.release()
    return position, next_offset


class LogView:
    """The partitions under the stream's paths, re-listed at each trigger; the scan of each active segment resumes
    where the previous trigger's ended."""

    def __init__(self, opts: ReadOptions, remote: tuple[str, ...] = ()):
        self.opts = opts
        self.remote = remote
        self._tails: dict[str, tuple[int, int]] = {}  # segment path -> (position, next offset) of a complete end

    def partitions(self) -> dict[TP, PartitionState]:
        by_tp: dict[TP, list[SegmentRef]] = {}
        for seg in discover(self.opts):
            if seg.topic is None or seg.partition is None:
                continue
            by_tp.setdefault((seg.topic, seg.partition), []).append(seg)
        out = {}
        tables: dict[str, CheckpointTables] = {}  # each data dir's checkpoints, read once this trigger
        tiers = remote_tiers(self.remote, self.opts.fs_opts) if self.remote else {}
        for tp, segs in by_tp.items():
            last = segs[-1]
            pos, nxt = self._tail(last)
            log_start, hw = segs[0].base_offset, None
            # where the local log starts and the high watermark are the partition log's (storage's one rule, the
            # data dir's checkpoints read through the filesystem seam for a local dir and a URL alike), the local log
            # start capped at the complete end this trigger may read to; a tiered partition whose store is read
            # starts at its log start offset (storage.remote.tiered), its offsets below the local log start read
            # from the store
            pdir = last.partition_dir
            ddir = str(as_path(pdir).parent)
            if ddir not in tables:
                tables[ddir] = checkpoint_tables(as_path(pdir).parent)
            tier, local_start, in_remote = tiers.get(tp), None, None
            with open_partition_log(pdir, partition_checkpoints(pdir, tables[ddir])) as plog:
                if plog.segments:
                    log_start = local_start = plog.readable_start(nxt)
                    hw = None if plog.high_watermark_checkpoint is None else plog.high_watermark
                    if tier is not None:
                        log_start = min(tiered_log_start(plog, tier.first), local_start)
                    else:
                        in_remote = remote_part(plog)
            out[tp] = PartitionState(tuple(segs), log_start, nxt, pos, hw, local_start,
                                     tier if log_start < (local_start or 0) else None, in_remote)
        self._tails = {k: v for k, v in self._tails.items() if any(k == s.segments[-1].path for s in out.values())}
        return out

    def _tail(self, seg: SegmentRef) -> tuple[int, int]:
        cached = self._tails.get(seg.path)
        if cached is not None and cached[0] <= seg.size:
            pos, nxt = cached
        else:
            pos, nxt = 0, seg.base_offset
            with seg.open() as s:  # a live broker's index is preallocated: its zero tail is not an entry
                index = s.read_index(seg.size)
                last = index.entry(len(index) - 1).position if index is not None and len(index) else None
            if last is not None:
                p, n = complete_end(seg, last, -1, self.opts)
                if n >= 0:  # the last index entry points at a whole batch: scan on from there
                    pos, nxt = p, n
        pos, nxt = complete_end(seg, pos, nxt, self.opts)
        self._tails[seg.path] = (pos, nxt)
        return pos, nxt


def available(state: PartitionState, bounded_by_hw: bool) -> int:
    if bounded_by_hw and state.high_watermark is not None:
        return min(state.end, state.high_watermark)
    return state.end


def rate_limit(limit: int, start: Mapping[TP, int], until: Mapping[TP, int]) -> dict[TP, int]:
    """Spark's ``KafkaMicroBatchStream.rateLimit``: ``limit`` offsets shared in proportion to each partition's
    ready offsets (a share below 1 is rounded up, so that small partitions are not starved)."""
    sizes = {tp: end - start[tp] for tp, end in until.items() if tp in start and end - start[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(until)
    out = {}
    for tp, end in until.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        prorate = limit * (size / total)
        step = int(-(-prorate // 1)) if prorate < 1 else int(prorate // 1)
        out[tp] = min(end, start[tp] + step)
    return out


# --------------------------------------------------------------------------------------------- the reader
class StreamPartition(InputPartition):
    """One topic-partition's offsets ``[lo, hi)`` of a micro-batch; ``tail_path`` was its last segment when the
    driver looked, complete up to byte ``tail_end``."""

    def __init__(self, topic: str, partition: int, path: str, lo: int, hi: int, tail_path: str, tail_end: int):
        super().__init__((topic, partition, lo, hi))
        self.topic, self.partition, self.path = topic, partition, path
        self.lo, self.hi, self.tail_path, self.tail_end = lo, hi, tail_path, tail_end


class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafkalog")``: see the module's docstring for the options."""

    def __init__(self, schema: StructType, options: Mapping[str, str]):
        self.schema = schema
        self.sopts = parse_stream_options(options)
        # the local segments; a store's segments are read beside them by offset (PartitionState.by_tier), not
        # as a data dir of their own
        self.opts = parse_read_options({k: v for k, v in dict(options).items() if str(k).lower() != "remote"})
        self.view = LogView(self.opts, self.sopts.remote)
        self.remote_views = RemoteViews()  # the store's views micro-batches read (released at commit and stop)
        self._target: dict[TP, int] | None = None
        self._told: set[TP] = set()  # partitions whose offsets in a remote store were named

    # ---- data loss (Spark's Kafka source's reportDataLoss) ----------------------------------------------
    def _data_loss(self, message: str) -> None:
        if self.sopts.fail_on_data_loss:
            raise DataLossError(f"{message}. {DATA_LOSS_FAIL}")
        log.warning("%s. %s", message, DATA_LOSS_WARN)

    def _in_remote(self, tp: TP, state: PartitionState) -> None:
        """Once per partition: a stream starting at the local log start of a partition whose older offsets its
        checkpoint puts in a remote store (a tiered topic's) says so."""
        if state.in_remote is None or tp in self._told:
            return
        self._told.add(tp)
        log.warning("offsets %d to %d of %s-%d are not read: the data dir's log-start-offset-checkpoint puts the "
                    "partition's log start at %d, below its local segments (a tiered topic's older offsets, in its "
                    "remote store); the stream starts at its local log start %d. Give the option remote (the "
                    "tiered-storage store) to read them", *state.in_remote, *tp, *state.in_remote)

    # ---- offsets -----------------------------------------------------------------------------------------
    def _available(self, states: Mapping[TP, PartitionState]) -> dict[TP, int]:
        return {tp: available(s, self.sopts.bounded_by_hw) for tp, s in states.items()}

    def initialOffset(self) -> dict:  # noqa: N802 - Spark's name
        states = self.view.partitions()
        avail = self._available(states)
        start = self.sopts.starting
        if start == "latest":
            return to_json_offsets(avail)
        out = {tp: s.log_start for tp, s in states.items()}
        for tp in sorted(out):
            if not isinstance(start, dict) or start.get(tp, EARLIEST) == EARLIEST:
                self._in_remote(tp, states[tp])
        if isinstance(start, dict):
            for tp, o in start.items():
                if o == LATEST:
                    out[tp] = avail.get(tp, 0)
                elif o == EARLIEST:
                    out[tp] = states[tp].log_start if tp in states else 0
                else:
                    out[tp] = o
        return to_json_offsets(out)

    def getDefaultReadLimit(self):  # noqa: N802 - Spark's name
        return ReadAllAvailable() if self.sopts.max_offsets is None else ReadMaxRows(self.sopts.max_offsets)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        self._target = self._available(self.view.partitions())

    def available_now(self, target: Mapping[TP, int]) -> None:
        """An availableNow query's offsets as :meth:`prepareForTriggerAvailableNow` took them when it started (the
        JVM stream keeps them: each of its triggers asks a new reader)."""
        self._target = dict(target)

    def latestOffset(self, start: dict, limit) -> dict:  # noqa: N802 - Spark's name
        begin = from_json_offsets(start)
        states = self.view.partitions()
        until = self._available(states)
        for tp, o in begin.items():  # a high watermark checkpointed behind the stream is no reason to go back
            if tp in until and states[tp].end >= o:
                until[tp] = max(until[tp], o)
        if self._target is not None:  # availableNow: nothing written after the query started
            capped = {}
            for tp, end in until.items():
                if tp in self._target:
                    capped[tp] = min(end, max(self._target[tp], begin.get(tp, self._target[tp])))
                elif tp in begin:
                    capped[tp] = begin[tp]
            until = capped
        if isinstance(limit, ReadMaxRows):
            frm = {tp: begin.get(tp, states[tp].log_start) for tp in until}
            frm = {tp: max(o, states[tp].log_start) if states[tp].log_start <= until[tp] else o
                   for tp, o in frm.items()}
            until = rate_limit(limit.max_rows, frm, until)
        return to_json_offsets(until)

    def reportLatestOffset(self):  # noqa: N802 - Spark's name
        return to_json_offsets(self._available(self.view.partitions()))

    # ---- planning ----------------------------------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> list:
        begin, until = from_json_offsets(start), from_json_offsets(end)
        states = self.view.partitions()
        for tp in sorted(set(begin) - set(until)):
            self._data_loss(f"{tp[0]}-{tp[1]} is gone (its partition dir is no longer under the paths); offsets "
                            f"from {begin[tp]} were not read")
        out = []
        for tp in sorted(until):
            hi = until[tp]
            state = states.get(tp)
            lo = begin.get(tp)
            if lo is not None and hi < lo:
                self._data_loss(f"{tp[0]}-{tp[1]}'s offset was changed from {lo} to {hi}, some data may have been "
                                "missed")
                continue
            if state is None:
                if lo is None or hi > lo:
                    self._data_loss(f"{tp[0]}-{tp[1]} is gone (its partition dir is no longer under the paths); "
                                    f"offsets {lo if lo is not None else 'from its start'} to {hi} were not read")
                continue
            if lo is None:
                lo = state.log_start  # a partition that appeared: from its start
                self._in_remote(tp, state)
            elif lo < state.log_start:
                where = "are no longer on disk" if state.in_remote is None or lo < state.in_remote[0] else \
                    "are below its local segments: in its remote store if the topic is tiered (give the option " \
                    "remote to read them), else gone"
                self._data_loss(f"offsets {lo} to {state.log_start} of {tp[0]}-{tp[1]} {where} (its log now starts "
                                f"at {state.log_start})")
                lo = state.log_start
            if hi > state.end:
                self._data_loss(f"offsets {max(lo, state.end)} to {hi} of {tp[0]}-{tp[1]} are no longer on disk "
                                f"(its log now ends at {state.end})")
                hi = state.end
            if lo >= hi:
                continue
            out.extend(self._plan(tp, state, lo, hi))
        return out

    def _plan(self, tp: tuple[str, int], state: PartitionState, lo: int, hi: int) -> list:
        """One input partition per tier of ``[lo, hi)``: the remote store's below the local log start (a view of
        its segments, complete: no tail), the local segments' from it."""
        last = state.segments[-1]
        remote, local = state.by_tier(lo, hi)
        out = []
        if remote is not None:
            assert state.remote is not None and state.local_start is not None
            pdir = self.remote_views.partition_dir(state.remote, remote[1], state.local_start)
            out.append(StreamPartition(*tp, pdir, *remote, "", 0))
        if local is not None:
            out.append(StreamPartition(*tp, display(last.spec, last.dir), *local, last.path,
                                       state.end_position))
        return out

    # ---- reading (on the executors) ----------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator:
        """The partition's ``[lo, hi)``: planned here, at read time (a segment the cleaner replaced or retention
        deleted since the driver looked is seen as it is now: :meth:`pieces`), and read by the batch reader's
        scan."""
        from .reader import KafkaLogPartition, KafkaLogReader

        part = partition
        assert isinstance(part, StreamPartition)  # Spark hands back the partitions planned above
        reader = KafkaLogReader(self.schema, self.opts)
        for piece in self.pieces(part):
            try:
                yield from reader.read(KafkaLogPartition([piece]))
            except FileNotFoundError:  # deleted by retention between planning and opening (nothing of it read)
                self._data_loss(f"{piece.name} (offsets from {piece.base_offset} of {part.topic}-{part.partition}) "
                                "was deleted before it was read")

    def pieces(self, part: StreamPartition) -> list[Piece]:
        """The pieces of a micro-batch's partition ``[lo, hi)`` as its files are now, by the batch reader's
        planner, each with the window ``[lo, hi)``; the last segment the driver saw only up to its last complete
        batch then. Offsets already deleted are data loss (:meth:`_data_loss`)."""
        # the driver chose this partition with the query's topic and partition options: its own dir is listed
        # here, not discovered again with them (a topic option applied to one partition's dir refuses it)
        opts = replace(self.opts, paths=(part.path,), topics=None, topic_in=None,
                       partitions=None).narrowed(start_offset=part.lo, end_offset=part.hi)
        spec, pdir = split_uri(part.path, self.opts.fs_options())
        segments = partition_segments(spec, pdir)  # a dir that cannot be read raises: never taken for data loss
        first = segments[0].base_offset if segments else None
        if first is None or first > part.lo:
            self._data_loss(f"offsets {part.lo} to {part.hi if first is None else min(first, part.hi)} of "
                            f"{part.topic}-{part.partition} were deleted before they were read")
        pieces = []
        for p in plan_pieces(segments, opts):
            if p.path == part.tail_path:
                if p.start >= part.tail_end:
                    continue
                p = replace(p, end=min(p.end, part.tail_end), file_size=min(p.file_size, part.tail_end))
            pieces.append(replace(p, window=(part.lo, part.hi)))
        return pieces

    def commit(self, end: dict) -> None:
        """Spark processed every offset up to ``end``: the store's views no micro-batch needs any more are removed
        (:meth:`RemoteViews.release`); the files are the broker's, nothing else changes."""
        self.remote_views.release(from_json_offsets(end))

    def stop(self) -> None:
        """The query stopped: every view of the store is removed."""
        self.remote_views.close()
