"""The entry object of the public API: :class:`LogDirs`, the data dirs of one broker."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from kafkalog.storage.api import sql as _sql
from kafkalog.storage.api.partition import (
    DEFAULT_ARROW_ROWS,
    Offsets,
    Partition,
    PathLike,
    Window,
    _now_ms,
    _reader,
    _spec,
    _topic_set,
)
from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.cleaner.manager import plan_compact
from kafkalog.storage.engine.convert import ConvertOptions
from kafkalog.storage.engine.flush import plan_flush
from kafkalog.storage.engine.import_ import ImportStats, import_files, preview_import
from kafkalog.storage.engine.message_format import plan_convert
from kafkalog.storage.engine.migrate import MigrateOptions, plan_migrate
from kafkalog.storage.engine.offset_checkpoints import plan_set_checkpoints
from kafkalog.storage.engine.plan import Plan
from kafkalog.storage.engine.reindex import plan_reindex
from kafkalog.storage.engine.repair import plan_repair
from kafkalog.storage.engine.retention import plan_retention
from kafkalog.storage.engine.topic_id import plan_topic_id
from kafkalog.storage.engine.validator import preview_append
from kafkalog.storage.engine.writer import append_to_partition
from kafkalog.storage.errors import LogDirError
from kafkalog.storage.io.fs import UrlPath, absolute, is_url, local_path
from kafkalog.storage.log.datadir import DataDir, check_topics, require_url_dir
from kafkalog.storage.log.paths import DATA_DIR, PARTITION_DIR
from kafkalog.storage.log.paths import require as require_path
from kafkalog.storage.log.topic_partition import live_topic_partition
from kafkalog.storage.remote.layout import LocalTieredStorageLayout
from kafkalog.storage.remote.rehydrate import RehydrateOptions, plan_rehydrate
from kafkalog.storage.reports.describe import describe_paths
from kafkalog.storage.reports.diff import DiffResult, diff_paths
from kafkalog.storage.reports.doctor import Diagnosis, diagnose
from kafkalog.storage.reports.groups import GroupsReport, load_groups
from kafkalog.storage.reports.transactions import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    TransactionReport,
    find_transactions,
)
from kafkalog.storage.reports.verify import VerifyReport, verify_paths

if TYPE_CHECKING:
    import duckdb
    import pyarrow


class LogDirs:
    """The data dirs of one broker (``log.dirs``; one or several: JBOD), read-only until a plan is applied.

    Open it with :func:`open`. Each live partition is found once, whichever data dir holds it.

    >>> dirs = kafkalog.open("fixtures/kafka-4.3.1-kraft/data")
    >>> "codec-zstd" in dirs.topics()
    True
    >>> [p.name for p in dirs.partitions("multi-segment")]
    ['multi-segment-0', 'multi-segment-1']
    >>> dirs.to_arrow(topics=["codec-zstd"]).read_all().num_rows
    60
    >>> dirs.verify().ok
    True
    >>> plan = dirs.plan_retention(now_ms=1_900_000_000_000)   # retention.ms: Kafka's default, 7 days
    >>> plan.summary()["partitionsChanged"], plan.summary()["recordsRemoved"]
    (14, 823)
    >>> dirs.close()
    """

    def __init__(self, paths: Iterable[PathLike], *, server_properties: PathLike | Mapping[str, Any] | None = None,
                 topic_config_file: PathLike | None = None, config_overrides: Mapping[str, Any] | None = None,
                 filesystem_options: Mapping[str, str] | None = None):
        self.paths: list[Path] = []
        """The paths as given (data dirs, or partition dirs: then only those partitions)."""
        self.dirs: list[DataDir] = []
        """The :class:`~kafkalog.storage.log.datadir.DataDir` of each data dir, in the order given."""
        self._only: dict[Path, set[Path]] = {}  # data dir -> the partition dirs given (a data dir given: absent)
        by_path: dict[Path, DataDir] = {}
        for raw in map(local_path, paths):  # (a file:// URL is the local path it names)
            if is_url(raw):  # read-only, through the filesystem seam
                url, what = require_url_dir(UrlPath.of(cast(str, raw), filesystem_options))
                p, kind_name = cast(Path, url), what
            else:
                kind = require_path(raw, (DATA_DIR, PARTITION_DIR))
                p, kind_name = kind.path, kind.kind
            self.paths.append(p)
            ddir_path = p.parent if kind_name == PARTITION_DIR else p
            key = absolute(ddir_path)
            if key not in by_path:
                by_path[key] = DataDir(ddir_path)
                self.dirs.append(by_path[key])
                if kind_name == PARTITION_DIR:
                    self._only[key] = set()
            if kind_name == PARTITION_DIR:
                if key in self._only:
                    self._only[key].add(absolute(p))
            else:
                self._only.pop(key, None)
        if not self.paths:
            raise LogDirError("no data dir given", "")
        self._server_properties = server_properties
        self._topic_config_file = topic_config_file
        self._overrides = dict(config_overrides or {})
        self._resolver: ConfigResolver | None = None
        self._partitions: list[Partition] | None = None

    def __repr__(self) -> str:
        return f"LogDirs({[str(p) for p in self.paths]!r})"

    # ---- partitions ---------------------------------------------------------------------------------------
    def _all(self) -> list[Partition]:
        if self._partitions is None:
            found: dict[tuple[str, int], Partition] = {}
            for d in self.dirs:
                only = self._only.get(absolute(d.path))
                for p, tp in d.partition_dirs.items():
                    if tp.kind != "live" or (tp.topic, tp.partition) in found:
                        continue
                    if only is not None and absolute(p) not in only:
                        continue
                    found[(tp.topic, tp.partition)] = Partition(d.open_partition(p), d, self)
            self._partitions = [found[k] for k in sorted(found)]
        return self._partitions

    def topics(self) -> list[str]:
        """The topics with a live partition here, sorted (internal topics included)."""
        return sorted({p.topic for p in self._all()})

    def partitions(self, topics: str | Iterable[str] | None = None,
                   partitions: Iterable[int] | None = None) -> list[Partition]:
        """The live partitions, by topic then partition: of ``topics`` (None: every topic; a topic with no
        partition here is an error listing the topics there are) and partition numbers ``partitions``."""
        wanted = _topic_set(topics)
        out = self._all()
        check_topics(wanted, {p.topic for p in out}, ", ".join(map(str, self.paths)))
        nums = None if partitions is None else set(partitions)
        return [p for p in out if (wanted is None or p.topic in wanted) and (nums is None or p.partition in nums)]

    def __iter__(self) -> Iterator[Partition]:
        return iter(self._all())

    def partition(self, topic: str, partition: int) -> Partition:
        """The live partition ``topic``-``partition`` (:class:`LogDirError` if no data dir holds it)."""
        for p in self._all():
            if p.topic == topic and p.partition == partition:
                return p
        raise LogDirError(f"no partition {topic}-{partition} here", ", ".join(map(str, self.paths)))

    # ---- configuration --------------------------------------------------------------------------------------
    @property
    def resolver(self) -> ConfigResolver:
        """The :class:`~kafkalog.storage.config.resolver.ConfigResolver` of these dirs (the configuration every
        plan uses: ``server_properties``, ``topic_config_file`` and ``config_overrides`` of :func:`open`, and
        the topic configs of ``__cluster_metadata``)."""
        if self._resolver is None:
            self._resolver = ConfigResolver(self._server_properties, self._topic_config_file, self._overrides,
                                            data_dirs=[d.path for d in self.dirs])
        return self._resolver

    def config(self, topic: str) -> LogConfig:
        """The effective configuration of ``topic`` (values and their sources)."""
        return self.partitions(topic)[0].config

    # ---- records --------------------------------------------------------------------------------------------
    def records(self, topics: str | Iterable[str] | None = None, offsets: Offsets = None, *,
                partitions: Iterable[int] | None = None, include_control: bool = False,
                read_committed: bool = False) -> Iterator[dict[str, Any]]:
        """The records of the selected partitions as rows (:meth:`Partition.records`), partition by partition."""
        for p in self.partitions(topics, partitions):
            yield from p.records(offsets, include_control=include_control, read_committed=read_committed)

    def to_arrow(self, topics: str | Iterable[str] | None = None, offsets: Offsets = None, *,
                 partitions: Iterable[int] | None = None, include_control: bool = False,
                 read_committed: bool = False, batch_rows: int = DEFAULT_ARROW_ROWS,
                 time_range: tuple[int | None, int | None] | None = None,
                 columns: Sequence[str] | None = None, threads: int | None = None,
                 binary_view: bool = False, ordered: bool = True) -> pyarrow.RecordBatchReader:
        """The records of the selected partitions as a ``pyarrow.RecordBatchReader``, read lazily a batch of about
        ``batch_rows`` rows (:data:`DEFAULT_ARROW_ROWS`) at a time, partition by partition. The schema is the Spark source's and
        ``export --format parquet``'s (``key, value, topic, partition, offset, timestamp, ...``); the rows are
        ``export``'s. ``time_range`` keeps the records with ``from <= timestampMs < to`` (epoch ms, None:
        unbounded; batches entirely before ``from`` are skipped undecoded), ``columns`` only those columns, in that
        order (the others are never built: no key, value or header bytes are copied unless asked for).
        ``threads`` partitions are decoded at once (default: one per CPU, fewer for less than 16 MiB of segments
        per thread: ``partition.BYTES_PER_THREAD``), by the compiled core without the GIL; each partition is
        read in pieces of about one batch (small segments together, a big one cut at its offset index's batch
        boundaries, under a URL too: there without an index it is one piece), opened once for all its pieces and
        closed once its last piece is read or the reader stops (dropped, or failed: its threads ended; pyarrow's
        ``close()`` of a reader of Python batches does not reach them, dropping it does). The threads decode
        the next pieces while the reader takes a batch, each at most one batch ahead of the reader: at most
        ``threads`` batches are held, and the batches come in the same order as on one thread (the pieces
        depend on the segments and ``batch_rows`` alone; a batch ends where its piece does). ``ordered=False``:
        each batch as soon as a thread made it, each piece's batches in offset order, the pieces' interleaved
        (also those of one partition), as SQL scans read. With ``binary_view``, ``key`` and ``value`` are Arrow ``binary_view``
        columns that point into the segments' mapped bytes (uncompressed batches) or into each compressed batch's
        decompressed records, instead of copies: no copy per record; a segment stays mapped as long as any of its
        views lives, after the reader and this object are closed. ``reader.read_pandas()`` gives a pandas
        DataFrame. Needs pyarrow."""
        window = None if time_range is None else Window(from_time=time_range[0], to_time=time_range[1])
        return _reader(self.partitions(topics, partitions), offsets, include_control, read_committed, batch_rows,
                       window=window, columns=columns, threads=threads, views=binary_view, ordered=ordered)

    def sql(self, query: str, *, pushdown: bool = True, include_control: bool = False,
            read_committed: bool = False) -> duckdb.DuckDBPyRelation:
        """``query`` (DuckDB's SQL) over the relation ``records`` (:meth:`to_arrow`'s columns; quote ``"offset"``,
        a keyword in SQL) as a DuckDB relation, run when it is fetched. Predicates on ``topic``, ``partition``,
        ``offset`` and ``timestamp``/``timestampMs`` and the columns used go into the reader (``pushdown=False``
        reads everything: the same rows); see :mod:`kafkalog.storage.api.sql`. A query that does not parse or
        bind is a :class:`~kafkalog.storage.api.sql.SqlError`; an error while DuckDB fetches the rows (a corrupt
        batch) is DuckDB's, carrying kafkalog's message (file and byte): ``kafkalog.storage.api.sql.execute``
        raises kafkalog's own. Needs duckdb and pyarrow (the ``sql`` extra).

        >>> dirs = kafkalog.open("fixtures/kafka-4.3.1-kraft/data")
        >>> dirs.sql("SELECT count(*) FROM records WHERE topic = 'multi-segment' AND partition = 0").fetchall()
        [(150,)]
        >>> dirs.close()
        """
        return _sql.relation(self, query, pushdown=pushdown, include_control=include_control,
                             read_committed=read_committed)

    # ---- reports (data, never text) -------------------------------------------------------------------------
    def verify(self, *, deep: bool = False, workers: int | None = 1) -> VerifyReport:
        """``kafkalog verify``: findings (file, byte position, kind, severity) of every file; ``deep`` decodes
        every record. ``workers``: processes (None: one per CPU)."""
        return verify_paths(list(self.paths), deep=deep, workers=workers)

    def doctor(self, *, now_ms: int | None = None, node_id: int | None = None) -> Diagnosis:
        """``kafkalog doctor``: what the broker's next start on these dirs will do (the first is the metadata
        dir). Over a URL it is a prediction only (the repair plan ``kafkalog repair`` would apply to a local copy;
        nothing is written), with the ``.lock`` not checked (an info problem says so)."""
        return diagnose(self.paths, now_ms=now_ms, resolver=self.resolver, node_id=node_id)

    def groups(self, group: str | None = None) -> GroupsReport:
        """``kafkalog groups``: consumer groups from ``__consumer_offsets``, members, committed offsets, lag."""
        return load_groups(self.paths, group=group, workers=1)

    def transactions(self, *, now_ms: int | None = None, topics: str | Iterable[str] | None = None,
                     expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> TransactionReport:
        """``kafkalog transactions``: open transactions, joined with ``__transaction_state``."""
        return find_transactions(self.paths, now_ms=now_ms, expiration_ms=expiration_ms, topics=_topic_set(topics),
                                 workers=1)

    def describe(self, *, scan: bool = True) -> list[dict[str, Any]]:
        """``kafkalog describe``: one JSON-ready dict per partition (a URL's as a local dir's)."""
        return list(describe_paths(list(self.paths), scan=scan))

    def diff(self, other: PathLike | LogDirs, *, level: str = "records", offsets: Offsets = None,
             limit: int = 20) -> DiffResult:
        """``kafkalog diff``: compare these dirs (one path) with ``other`` at ``level`` (``bytes``, ``batches``,
        ``records``), over the offset range ``offsets`` of each partition; the differences as data."""
        other = other._one_path("diff") if isinstance(other, LogDirs) else local_path(other)
        return diff_paths(self._one_path("diff"), other, level=level, limit=limit, offset_spec=_spec(offsets))

    def _writable(self, what: str) -> None:
        """Refuse an operation that changes files when a path is a URL (read-only through the filesystem seam)."""
        for p in self.paths:
            if is_url(p):
                raise LogDirError(f"{what} changes files, and a URL is read-only: kafkalog changes local data dirs "
                                  "only (copy the data dir to a local disk first)", str(p))

    def _one_path(self, what: str) -> Path:
        if len(self.paths) != 1:
            raise LogDirError(f"{what} takes one path (a data dir or a partition dir)", ", ".join(map(str, self.paths)))
        return self.paths[0]

    # ---- plans: nothing is written until kafkalog.apply(plan) --------------------------------------------------
    def plan_retention(self, *, now_ms: int | None = None, topics: str | Iterable[str] | None = None,
                       keep_deleted: bool = False) -> Plan:
        """``kafkalog retain``: the segments the broker's retention would delete at ``now_ms`` (default: now)."""
        self._writable("retain")
        return plan_retention(self.paths, now_ms=_now_ms() if now_ms is None else now_ms, resolver=self.resolver,
                              topics=_topic_set(topics), keep_deleted=keep_deleted)

    def plan_compact(self, *, now_ms: int | None = None, topics: str | Iterable[str] | None = None,
                     force: bool = False, exact: bool = False, keep_deleted: bool = False) -> Plan:
        """``kafkalog compact``: one log cleaner round per compacted partition."""
        self._writable("compact")
        return plan_compact(self.paths, now_ms=_now_ms() if now_ms is None else now_ms, resolver=self.resolver,
                            topics=_topic_set(topics), force=force, exact=exact, keep_deleted=keep_deleted)

    def plan_repair(self, *, now_ms: int | None = None, full: bool = False,
                    topic_ids: Mapping[str, str] | None = None) -> Plan:
        """``kafkalog repair``: what the broker's startup recovery would do (``full``: every segment)."""
        self._writable("repair")
        return plan_repair(self._data_dirs(), now_ms=_now_ms() if now_ms is None else now_ms,
                           resolver=self.resolver, full=full, topic_ids=dict(topic_ids or {}))

    def plan_flush(self, *, now_ms: int | None = None) -> Plan:
        """``kafkalog flush``: the checkpoints and marker of a clean shutdown."""
        self._writable("flush")
        return plan_flush(self._data_dirs(), now_ms=_now_ms() if now_ms is None else now_ms, resolver=self.resolver)

    def plan_reindex(self, *, topics: str | Iterable[str] | None = None, all_segments: bool = False) -> Plan:
        """``kafkalog reindex``: rebuild offset and time indexes that need it (``all_segments``: every one)."""
        self._writable("reindex")
        return plan_reindex(self.paths, resolver=self.resolver, topics=_topic_set(topics), all_segments=all_segments)

    def plan_convert(self, options: ConvertOptions | None = None, *,
                     topics: str | Iterable[str] | None = None) -> Plan:
        """``kafkalog convert``: rewrite segments (v0/v1 to v2, codec) as ``options`` say."""
        self._writable("convert")
        return plan_convert(self.paths, options, topics=_topic_set(topics), resolver=self.resolver)

    def plan_migrate(self, dest: PathLike, options: MigrateOptions | None = None) -> Plan:
        """``kafkalog migrate``: copy these partitions into the data dir ``dest`` (one source path)."""
        self._writable("migrate")
        return plan_migrate(self._one_path("migrate"), local_path(dest), options)

    def plan_topic_id(self, topic: str, topic_id: str) -> Plan:
        """``kafkalog topic-id``: write ``partition.metadata`` with ``topic_id`` in every partition of ``topic``."""
        self._writable("topic-id")
        return plan_topic_id([p.path for p in self.partitions(topic)], topic_id)

    def plan_rehydrate(self, store: LocalTieredStorageLayout, options: RehydrateOptions | None = None) -> Plan:
        """``kafkalog rehydrate``: copy the remote segments of a tiered store (open it with
        :func:`~kafkalog.storage.remote.layout.open_remote_store`, and keep it open until the plan is applied)
        back into the (one) data dir as local segments."""
        self._writable("rehydrate")
        return plan_rehydrate(store, self._one_data_dir("rehydrate"), options)

    def plan_checkpoint(self, name: str, updates: Mapping[tuple[str, int], int | None]) -> Plan:
        """``kafkalog checkpoints set``: entries of the checkpoint ``name`` (``recovery-point``, ``log-start``,
        ``replication``, ``cleaner``; None removes one) in the data dir holding each partition."""
        self._writable("checkpoints set")
        plans = []
        for d in self.dirs:
            mine = {tp: v for tp, v in updates.items() if any(
                t.topic == tp[0] and t.partition == tp[1] for t in d.partition_dirs.values())}
            if mine:
                plans.append(plan_set_checkpoints(d.path, name, mine))
        if not plans:
            raise LogDirError("no data dir here holds those partitions", ", ".join(map(str, self.paths)))
        merged = plans[0]
        for extra in plans[1:]:
            merged = replace(merged, data_dirs=merged.data_dirs + extra.data_dirs, notes=merged.notes + extra.notes)
        return merged

    # ---- writes that are all or nothing by themselves (no plan: each runs staged, under the data dir's lock) ----
    def _one_data_dir(self, what: str) -> Path:
        if len(self.dirs) != 1:
            raise LogDirError(f"{what} writes into one data dir; open that one", ", ".join(map(str, self.paths)))
        return self.dirs[0].path

    def import_files(self, files: Iterable[PathLike], *, topic: str | None = None, topic_id: str | None = None,
                     append: bool = False, dry_run: bool = False) -> ImportStats:
        """``kafkalog import``: rows of ``export`` JSON Lines or Parquet files into the (one) data dir, new
        partitions only unless ``append``; ``dry_run`` checks every row and returns what it would write. All or
        nothing."""
        self._writable("import")
        ddir = self._one_data_dir("import")
        if dry_run:
            return preview_import(files, ddir, topic=topic, append=append)
        stats = import_files(files, ddir, topic=topic, topic_id=topic_id, append=append)
        self._reload()
        return stats

    def append(self, partition: str, batches: Iterable[bytes], *, keep_offsets: bool = False,
               dry_run: bool = False, now_ms: int | None = None) -> tuple[int, int]:
        """``kafkalog append``: record batches (bytes) to the partition ``<topic>-<n>`` of the (one) data dir, as a
        leader assigns offsets (or, ``keep_offsets``, as a follower keeps them), with the topic's effective
        configuration. Returns ``(appends, log end offset after)``; ``dry_run`` checks every batch and touches
        nothing. All or nothing."""
        self._writable("append")
        ddir = self._one_data_dir("append")
        config = self.resolver.log_config(ddir, live_topic_partition(partition)[0])
        if dry_run:
            appends, _records, leo = preview_append(ddir, partition, batches, config=config,
                                                    keep_offsets=keep_offsets)
            return appends, leo
        self.close()  # the partition's files change: reopen them afterwards
        out = append_to_partition(ddir, partition, batches, config=config, keep_offsets=keep_offsets,
                                  now_ms=now_ms)
        self._reload()
        return out

    def _reload(self) -> None:
        """Read the data dirs again (after a write through this object)."""
        self.close()
        self.dirs = [DataDir(d.path) for d in self.dirs]

    def _data_dirs(self) -> list[Path]:
        return [d.path for d in self.dirs]

    # ---- lifetime -------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Unmap every segment (a batch or record view taken before is invalid after)."""
        for d in self.dirs:
            d.close()
        self._partitions = None

    def __enter__(self) -> LogDirs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["LogDirs"]
