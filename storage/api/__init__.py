"""The public library: :func:`open` a broker's log dirs and read, check and change them with Kafka's nouns.

:class:`LogDirs` is what the broker's ``LogManager`` is to its ``log.dirs``: one or several data dirs of one
broker (JBOD), each live partition found once. A :class:`Partition` is one partition log (``UnifiedLog``'s
offsets: log start, log end, high watermark, last stable offset; its effective configuration with the source
of every value; its segments, batches and records over an offset or time range in ``rpk``'s grammar,
:mod:`kafkalog.storage.log.offset_spec`). Arrow output is a ``pyarrow.RecordBatchReader`` over any selection of
topics and partitions (pyarrow is optional: only these methods need it).

Every operation of the command line is here as a function returning data (:meth:`LogDirs.verify`,
:meth:`LogDirs.doctor`, :meth:`LogDirs.groups`, :meth:`LogDirs.transactions`, :meth:`LogDirs.describe`) or as
a plan and an apply (:meth:`LogDirs.plan_retention` ... then :func:`apply`): a plan is data (what would
change, what would be lost) and nothing is written until it is applied.

This package wraps the library's own objects (:class:`~kafkalog.storage.log.datadir.DataDirs`,
:class:`~kafkalog.storage.log.partition.PartitionLog`, :class:`~kafkalog.storage.files.segment.Segment`, the engines'
``plan_*`` functions and :func:`kafkalog.storage.engine.plan.apply`): every Kafka rule stays on the object that
owns it. Paths are checked by the one path contract (:mod:`kafkalog.storage.log.paths`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from kafkalog.storage.api.log_dirs import LogDirs
from kafkalog.storage.api.partition import DEFAULT_ARROW_ROWS, Offsets, Partition, PathLike
from kafkalog.storage.engine import plan as _plan
from kafkalog.storage.engine.plan import ApplyResult, Plan


def open(paths: PathLike | Iterable[PathLike], *, server_properties: PathLike | Mapping[str, Any] | None = None,  # noqa: A001
         topic_config_file: PathLike | None = None, config_overrides: Mapping[str, Any] | None = None,
         filesystem_options: Mapping[str, str] | None = None) -> LogDirs:
    """Open the log dirs of one broker: a data dir, several (JBOD: the ``log.dirs`` of one broker, in their
    configured order) or partition dirs (then only those partitions). Read-only; use it as a context manager or
    :meth:`LogDirs.close` it. ``server_properties`` (a file or a mapping), ``topic_config_file`` and
    ``config_overrides`` (topic config names) set the configuration plans and :attr:`Partition.config` use, as
    the command line's ``--server-properties``, ``--topic-config`` and ``--config`` do.

    A ``file://`` URL is the local path it names. A path may be a URL (``s3://bucket/data``, ``gs://``, ``hdfs://``,
    any fsspec filesystem): its partitions,
    offsets, records and Arrow are read through the filesystem seam (:mod:`kafkalog.storage.io.fs`; small files
    whole, segments in bounded windows), with ``filesystem_options`` (``s3.endpoint``, ``s3.accessKey``,
    ``s3.secretKey``, ``s3.region``, ``s3.anonymous``; else pyarrow's usual AWS environment; for ``hdfs://`` without
    libhdfs, WebHDFS at ``hdfs.httpAddress``, else ``KAFKALOG_HDFS_HTTP_ADDRESS``, else ``$HADOOP_CONF_DIR``'s
    ``hdfs-site.xml``, else port 9870: :mod:`kafkalog.storage.io.hdfs`; ``webhdfs://`` too). The reports read
    it too, as they read a local dir: the effective configs, ``verify``, ``doctor`` (a prediction: the repair plan
    ``kafkalog repair`` would apply to a local copy, nothing written), ``groups``, ``transactions``, ``describe``
    and ``diff``; a ``.lock`` under a URL is not checked (verify and doctor say so, as an info finding). A URL is
    read-only: an operation that changes files (every plan, ``append``, ``apply``) refuses it with a
    :class:`~kafkalog.storage.errors.LogDirError`.

    A path that does not exist, is not a directory or holds nothing of Kafka's is a
    :class:`~kafkalog.storage.log.paths.PathError` (the command line's one-line error).

    >>> with kafkalog.open(["fixtures/kafka-4.3.1-kraft/data"]) as dirs:
    ...     p = dirs.partition("codec-none", 0)
    ...     p.log_end_offset == p.high_watermark
    True
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return LogDirs(paths, server_properties=server_properties, topic_config_file=topic_config_file,
                   config_overrides=config_overrides, filesystem_options=filesystem_options)


def apply(plan: Plan, *, backup: bool = True, backup_root: PathLike | None = None, workers: int = 1) -> ApplyResult:
    """Execute ``plan`` as the command line does: lock each data dir, check nothing changed since planning, keep
    the originals (``backup``: in a folder beside each data dir, or under ``backup_root``), then exactly the
    planned operations, each crash-safe. Raises :class:`~kafkalog.storage.engine.plan.PlanError` (nothing
    changed) if the plan has errors."""
    return _plan.apply(plan, backup=backup, backup_root=backup_root, workers=workers)


__all__ = ["DEFAULT_ARROW_ROWS", "LogDirs", "Offsets", "Partition", "PathLike", "apply", "open"]
