"""Options of ``spark.read.format("kafkalog")`` (all optional; names are case-insensitive).

=====================  =========================================================================================
``path`` / ``paths``   data dirs, partition dirs or ``.log`` files (local paths or URIs such as ``s3://b/k``);
                       ``load(p)`` / ``load([p1, p2])`` set these; several may also be comma-separated
``remote``             comma-separated tiered-storage remote stores (Kafka's ``LocalTieredStorage`` layout: its
                       ``dir`` or ``kafka-tiered-storage/``, local or ``s3://``), read as ``kafkalog remote`` reads
                       them: the driver makes a data dir view of each (hard links to the remote segments, or
                       copies; a URL store's files fetched), which the executors must see (``local[*]`` or a
                       shared filesystem)
``topics``             comma-separated topic names or glob patterns (``orders,audit-*``); default all
``partitions``         comma-separated partition numbers; default all
``level``              ``record`` (default: one row per record) or ``batch`` (one row per batch, no decoding)
``mode``               ``failfast`` (default: a corrupt batch fails the job with file and byte position) or
                       ``permissive`` (adds a ``_corrupt`` column; corrupt batches become rows describing them)
``includeControlRecords``  ``false`` (default): control records (transaction commit/abort markers) are not rows,
                       as Spark's ``format("kafka")`` never shows them (Kafka's consumer drops them); ``true``
                       adds them (``isControl`` true; their key and value are the marker's bytes). Records of
                       aborted transactions are rows either way, as ``format("kafka")`` with Kafka's default
                       ``isolation.level=read_uncommitted`` shows them. Record level only (batch level lists
                       every batch)
``verifyCrc``          ``true`` (default) checks every batch's CRC; ``false`` skips it
``startingOffset``     first offset to read (inclusive), found through the offset index
``endingOffset``       offset to stop at (exclusive)
``startingTimestamp``  only records with timestamp >= this (epoch ms); segments are skipped through the time index
``endingTimestamp``    only records with timestamp < this (epoch ms)
``offset``             a range of each partition in rpk's grammar, as ``kafkalog export -o`` takes it (``start``,
                       ``end``, ``N``, ``N1:N2``, ``:N``, ``+N``, ``-N``, ``@T1:T2``, kcat's ``s@T`` and ``e@T``;
                       several separated by spaces: ``s@T1 e@T2``): resolved on the driver for each partition
                       through its log start and end offsets and its time index (local paths only), then read
                       like ``startingOffset``/``endingOffset``, intersected with them
``maxPartitionBytes``  bytes of log per Spark input partition (default 128 MiB); large segments are split at
                       batch boundaries taken from their offset index, small ones are packed together
``openCostInBytes``    what opening one more segment costs, in bytes, when packing (default 4 MiB)
``minPartitions``      at least this many input partitions when the data allows (default 1)
``maxBatchSize``       refuse a batch whose size field is larger (default 1 GiB)
``pushFilters``        ``false`` (default) or ``true``: let the query's filters narrow the read (see below)
``failOnDataLoss``     ``true`` (default): a segment replaced between planning and reading (the log cleaner's
                       compaction swaps a new file in under its name; recovery truncates it) fails the query
                       naming it; ``false``: its piece is skipped with a warning, as Spark's Kafka source
                       treats lost data
``s3.*``               ``s3.endpoint``, ``s3.accessKey``, ``s3.secretKey``, ``s3.region``, ``s3.anonymous``
=====================  =========================================================================================

With ``pushFilters`` set to ``true``, filters in a query are pushed down (``spark.sql.python.filterPushdown.enabled``,
which :func:`kafkalog.tools.spark.register` turns on): comparisons on ``offset`` and ``timestamp`` narrow the read through
the offset and time indexes like the options above; any filter of any class (``=``, ``<=>``, ``<``, ``IN``,
``IS NULL``, ``NOT``, ``LIKE 'a%'`` ...) over columns that are constant per batch (``topic``, ``partition``,
``isControl``, ``isTransactional``, ``producerId``, ``codec``, ...; at batch level every column) skips whole
partition dirs and batches without decoding them. Those are applied exactly; everything else is handed back
to Spark.

It is off by default because Spark 4.1 to 4.3 keep the read plan of the last pushdown on the DataFrame's
relation and reuse it for a later action on the same DataFrame that pushes no filter: after
``df.where("offset = 5").count()``, ``df.count()`` would read only offset 5. With ``pushFilters`` on, build a new
DataFrame (``spark.read...load()``) for each query; the options above narrow the read safely in every case.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache

from kafkalog.storage.errors import ConfigError
from kafkalog.storage.io.fs import fs_options
from kafkalog.storage.io.jsonio import loads
from kafkalog.storage.log.offset_spec import OffsetSpec, parse_offset_specs

MIB = 1024 * 1024


@dataclass(frozen=True)
class ReadOptions:
    paths: tuple[str, ...] = ()
    topics: tuple[str, ...] | None = None  # names or glob patterns
    topic_in: frozenset[str] | None = None  # exact names (from pushed filters)
    partitions: frozenset[int] | None = None
    level: str = "record"
    permissive: bool = False
    verify_crc: bool = True
    include_control: bool = False  # record level: control records (transaction markers) as rows
    start_offset: int | None = None
    end_offset: int | None = None  # exclusive
    start_timestamp: int | None = None
    end_timestamp: int | None = None  # exclusive
    max_partition_bytes: int = 128 * MIB
    open_cost: int = 4 * MIB
    min_partitions: int = 1
    max_batch_size: int = 1024 * MIB
    fs_opts: tuple[tuple[str, str], ...] = field(default=())
    push_filters: bool = False
    filters: tuple[tuple, ...] = ()  # filters pushed by Spark and taken (nodes of kafkalog.tools.spark.filters)
    offset_spec: OffsetSpec | None = None  # resolved per partition while planning (plan.partition_windows)
    fail_on_data_loss: bool = True  # a segment replaced after planning fails the read (false: skipped, logged)

    @property
    def batch_level(self) -> bool:
        return self.level == "batch"

    @property
    def has_record_filter(self) -> bool:
        return any(v is not None for v in (self.start_offset, self.end_offset, self.start_timestamp,
                                            self.end_timestamp))

    def in_window(self, window: tuple[int, int] | None) -> ReadOptions:
        """These options narrowed to one partition's resolved ``offset`` range ``[lo, hi)`` (None: as they are)."""
        return self if window is None else self.narrowed(start_offset=window[0], end_offset=window[1])

    def fs_options(self) -> dict[str, str]:
        return dict(self.fs_opts)

    def with_filter(self, node: tuple) -> ReadOptions:
        """These options plus a pushed filter that the reader applies exactly (see :mod:`.filters`)."""
        return replace(self, filters=self.filters + (node,))

    def narrowed(self, **kw) -> ReadOptions:
        """Intersect ranges/sets with pushed-down filters."""
        out = self
        for name, v in kw.items():
            cur = getattr(out, name)
            if name in ("start_offset", "start_timestamp"):
                v = v if cur is None else max(cur, v)
            elif name in ("end_offset", "end_timestamp"):
                v = v if cur is None else min(cur, v)
            elif name in ("topic_in", "partitions"):
                v = frozenset(v) if cur is None else frozenset(cur) & frozenset(v)
            out = replace(out, **{name: v})
        return out


def _int(opts: Mapping[str, str], name: str, default: int | None) -> int | None:
    v = opts.get(name.lower())
    if v is None or str(v).strip() == "":
        return default
    try:
        return int(str(v).strip())
    except ValueError:
        raise ConfigError(f"option {name}: expected an integer, got {v!r}") from None


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    v = opts.get(name.lower())
    if v is None:
        return default
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ConfigError(f"option {name}: expected true or false, got {v!r}")


def _list(v: str | None) -> list[str]:
    if not v:
        return []
    return [p.strip() for p in str(v).split(",") if p.strip()]


def parse_paths(opts: Mapping[str, str]) -> tuple[str, ...]:
    paths: list[str] = []
    raw = opts.get("paths")
    if raw:
        try:
            loaded = loads(raw)
            paths.extend(loaded if isinstance(loaded, list) else [str(loaded)])
        except ValueError:
            paths.extend(_list(raw))
    if opts.get("path"):
        paths.extend(_list(opts["path"]))
    fs = tuple(sorted((k, str(v)) for k, v in opts.items() if k.startswith("s3.")))
    stores = _list(opts.get("remote"))
    starts = _local_starts(tuple(dict.fromkeys(paths)), fs) if stores and paths else ()
    for store in stores:
        paths.append(_remote_view(store, fs, starts))
    return tuple(dict.fromkeys(paths))


def _local_starts(paths: tuple[str, ...], fs_opts: tuple[tuple[str, str], ...]) -> tuple[tuple[tuple[str, int], int], ...]:
    """Where the local segments of each partition under ``paths`` (data dirs, partition dirs, a ``.log``'s dir)
    start: its first segment's base offset (the batch source reads every local segment), for the remote views read
    beside them."""
    from kafkalog.storage.api.log_dirs import LogDirs

    dirs = dict.fromkeys(p.rstrip("/").rsplit("/", 1)[0] if p.endswith(".log") else p for p in paths)
    with LogDirs(list(dirs), filesystem_options=dict(fs_opts)) as local:
        return tuple(sorted(((p.topic, p.partition), p.segments[0].base_offset)
                            for p in local.partitions() if p.segments))


@lru_cache(maxsize=32)
def _remote_view(store: str, fs_opts: tuple[tuple[str, str], ...],
                 local_starts: tuple[tuple[tuple[str, int], int], ...] = ()) -> str:
    """A data dir view of a remote store (``storage.remote.layout.remote_partition_view``), kept until the
    driver exits. Beside local partitions (``local_starts``: where their local segments start) it holds only the
    offsets below them, as Kafka reads a tiered partition (``storage.remote.tiered.by_tier``): each offset is read
    once, from the local segments when both tiers hold it."""
    import atexit
    import shutil
    import tempfile

    from kafkalog.storage.remote import open_remote_store
    from kafkalog.storage.remote.layout import remote_partition_view

    st = open_remote_store(store, options=dict(fs_opts))
    view = tempfile.mkdtemp(prefix="kafkalog-spark-remote-")
    atexit.register(shutil.rmtree, view, True)
    atexit.register(st.close)
    return str(remote_partition_view(st, view, local_starts=dict(local_starts) if local_starts else None))


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    opts = {str(k).lower(): v for k, v in dict(options).items()}
    level = str(opts.get("level", "record")).lower()
    if level not in ("record", "batch"):
        raise ConfigError(f"option level: expected 'record' or 'batch', got {level!r}")
    mode = str(opts.get("mode", "failfast")).lower()
    if mode not in ("failfast", "permissive"):
        raise ConfigError(f"option mode: expected 'failfast' or 'permissive', got {mode!r}")
    parts = _list(opts.get("partitions"))
    try:
        partitions = frozenset(int(p) for p in parts) if parts else None
    except ValueError:
        raise ConfigError(f"option partitions: expected comma-separated integers, got {opts['partitions']!r}") from None
    topics = tuple(_list(opts.get("topics"))) or None
    ro = ReadOptions(
        paths=parse_paths(opts),
        topics=topics,
        partitions=partitions,
        level=level,
        permissive=mode == "permissive",
        verify_crc=_bool(opts, "verifyCrc", True),
        include_control=_bool(opts, "includeControlRecords", False),
        start_offset=_int(opts, "startingOffset", None),
        end_offset=_int(opts, "endingOffset", None),
        start_timestamp=_int(opts, "startingTimestamp", None),
        end_timestamp=_int(opts, "endingTimestamp", None),
        max_partition_bytes=_int(opts, "maxPartitionBytes", 128 * MIB) or 128 * MIB,
        open_cost=_int(opts, "openCostInBytes", 4 * MIB) or 0,
        min_partitions=max(1, _int(opts, "minPartitions", 1) or 1),
        max_batch_size=_int(opts, "maxBatchSize", 1024 * MIB) or 1024 * MIB,
        fs_opts=fs_options(opts),
        push_filters=_bool(opts, "pushFilters", False),
        offset_spec=parse_offset_specs(str(opts.get("offset") or "").split()),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
    )
    if ro.max_partition_bytes <= 0:
        raise ConfigError("option maxPartitionBytes must be positive")
    return ro
