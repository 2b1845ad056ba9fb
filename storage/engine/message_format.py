"""Message formats in a log: which segments still hold v0/v1 batches, and with which codecs (:func:`audit`), and
the ``kafkalog convert`` plan (:func:`plan_convert`): one segment replacement (:class:`ConvertBuild`, by the
rules in :mod:`.convert`) per segment that holds something to convert, refused where the conversion would stop
on a corrupt batch or a partial tail.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

from kafkalog.storage.codec.compression import CODEC_NAMES
from kafkalog.storage.codec.native import active, core
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.convert import ConvertBuild, ConvertOptions, needs_conversion
from kafkalog.storage.engine.plan import PartitionPlan, Plan, Runner, default_runner
from kafkalog.storage.engine.swap import NewSegment, ReplaceSegments, segment_files
from kafkalog.storage.engine.targets import Target, group_partitions, plan_partitions
from kafkalog.storage.errors import CorruptRecordError
from kafkalog.storage.files.findings import note
from kafkalog.storage.files.names import segment_log_files, segment_logs_named
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io.dirview import DirView
from kafkalog.storage.io.fs import UrlPath, is_url
from kafkalog.storage.log.datadir import resolve_partition_dirs
from kafkalog.storage.log.partition import PartitionLog


# -------------------------------------------------------------------------------------------- audit
@dataclass
class SegmentAudit:
    partition: str
    segment: str
    size: int
    batches: int
    v0_batches: int
    v1_batches: int
    v2_batches: int
    legacy_bytes: int
    codecs: dict[str, int]

    @property
    def legacy(self) -> bool:
        return bool(self.v0_batches or self.v1_batches)

    def to_dict(self) -> dict:
        return {"partition": self.partition, "segment": self.segment, "size": self.size, "batches": self.batches,
                "v0Batches": self.v0_batches, "v1Batches": self.v1_batches, "v2Batches": self.v2_batches,
                "legacyBytes": self.legacy_bytes, "codecs": dict(self.codecs)}


def audit_segment(log_path: str | os.PathLike | Segment) -> SegmentAudit:
    """Shallow scan: counts of v0/v1/v2 batches, legacy bytes and codecs (no decompression). ``log_path``: a
    ``.log`` file, or a :class:`Segment` (one under a URL is read in windows)."""
    seg = log_path if isinstance(log_path, Segment) else Segment(Path(log_path), 0)
    p = seg.path
    counts = [0, 0, 0]
    legacy_bytes = 0
    codecs: dict[str, int] = {}
    n = 0
    with seg:
        size = seg.size
        if size:
            for b in seg.iter_batches():
                n += 1
                m = min(b.magic, 2)
                counts[m] += 1
                if m < 2:
                    legacy_bytes += b.size
                c = b.codec_name
                codecs[c] = codecs.get(c, 0) + 1
                del b
    return SegmentAudit(p.parent.name, p.name, size, n, counts[0], counts[1], counts[2], legacy_bytes, codecs)


def audit(paths: Iterable[str | os.PathLike | UrlPath], *, topics: set[str] | None = None,
          only_legacy: bool = True) -> Iterator[SegmentAudit]:
    """Segments (of every partition under ``paths``, local or under a URL) still holding v0/v1 batches (all with
    ``only_legacy=False``)."""
    for pdir in resolve_partition_dirs(cast(list[str], list(paths)), topics, read_only=True):  # (URLs: read_only)
        for seg in _segment_logs(pdir):
            a = audit_segment(seg)
            if a.legacy or not only_legacy:
                yield a


def _segment_logs(pdir: Path) -> list[Path] | list[Segment]:
    """The ``.log`` files of a partition dir (under a URL, its segments through a read-only view)."""
    if not is_url(pdir):
        return segment_log_files(pdir)
    view = DirView(pdir, DirView.READONLY)
    return [Segment.in_view(view, base, name) for base, name in segment_logs_named(view.names())]


# --------------------------------------------------------------------------------------------- plan
def _segment_needs(seg: Segment, opts: ConvertOptions) -> tuple[int, int]:
    """(batches to convert, their bytes), by a shallow scan. A segment that needs converting is validated (every
    batch's CRC, no partial tail): the plan refuses what the conversion would stop on."""
    if active().records is not None:
        return _segment_needs_runs(seg, opts)
    n = nbytes = 0
    for b in seg.iter_batches():
        if needs_conversion(b, opts) or (opts.group_uncompressed and b.magic < 2):
            n += 1
            nbytes += b.size
        del b
    if n:
        scanner = seg.scanner()
        for b in scanner:
            b.ensure_valid()
            del b
        if scanner.stop_reason is not None:
            raise CorruptRecordError(f"{scanner.stop_reason} at the end of the segment: run `kafkalog repair` first",
                                     str(seg.path), scanner.stop_position)
    return n, nbytes


def _segment_needs_runs(seg: Segment, opts: ConvertOptions) -> tuple[int, int]:
    """:func:`_segment_needs` in one pass with the compiled core: runs of plain v0/v1 messages with intact CRCs
    (which always need converting) are counted natively; every other entry is looked at here, and the first
    invalid one is reported -- only if something needs converting, as in the two-pass scan."""
    assert core is not None  # (only called with the compiled core)
    n = nbytes = 0
    first_error: CorruptRecordError | None = None
    buf, size, pos = seg.buf, seg.size, 0
    while True:
        k, kb, pos = core.legacy_plain_run(buf, pos, size)
        n += k
        nbytes += kb
        scanner = seg.scanner(pos)
        b = next(iter(scanner), None)
        if b is None:
            stop = (scanner.stop_reason, scanner.stop_position)
            break
        pos = b.position + b.size
        if needs_conversion(b, opts) or (opts.group_uncompressed and b.magic < 2):
            n += 1
            nbytes += b.size
        if first_error is None:
            try:
                b.ensure_valid()
            except CorruptRecordError as e:
                first_error = e
        del b, scanner
    if n:
        if first_error is not None:
            raise first_error
        if stop[0] is not None:
            raise CorruptRecordError(f"{stop[0]} at the end of the segment: run `kafkalog repair` first",
                                     str(seg.path), stop[1])
    return n, nbytes


def _plan_partition(task: tuple) -> PartitionPlan:
    data_dir, pdir, topic, part, opts = task
    pp = PartitionPlan(data_dir, pdir, topic, part, settings=[])
    codec = CODEC_NAMES[opts.codec] if opts.codec is not None else None
    with pp.planning(), DirView(pdir) as view:
        log = PartitionLog(view)
        converted = 0
        for seg in log.segments:
            n, nbytes = _segment_needs(seg, opts)
            if not n:
                continue
            base = seg.base_offset
            files: dict[str, int | None] = {".log": None, ".index": None, ".timeindex": None}
            if seg.has_txn_index:
                files[".txnindex"] = seg.file_size(".txnindex")
            op = ReplaceSegments(str(view.path), note(view.path, "op.convertSegment", batches=n, bytes=nbytes,
                                                      magic=opts.to_magic, codec=codec),
                                 sources=[base], new=[NewSegment(base, files)],
                                 build=ConvertBuild(seg.path.name, base, opts),
                                 source_files=segment_files(view, base), source_bytes=seg.size)
            op.plan_on(view)
            converted += 1
        pp.facts = {"segments": converted}
        pp.seal(view)
        log.close()
    return pp


def plan_convert(paths: Iterable[str | os.PathLike], opts: ConvertOptions | None = None, *,
                 topics: set[str] | None = None, resolver: ConfigResolver | None = None,
                 runner: Runner | None = None, workers: int = 1, progress=None) -> Plan:
    """The plan of ``kafkalog convert``: one segment replacement per segment that holds something to convert.
    ``index.interval.bytes`` and ``segment.index.bytes`` are each topic's effective settings unless ``opts``
    sets them."""
    opts = opts or ConvertOptions()
    groups = group_partitions(paths, topics=topics, include_metadata=False)
    resolver = resolver or ConfigResolver(data_dirs=list(groups))

    def task(t: Target) -> tuple:
        cfg = t.config
        o = replace(opts, index_interval_bytes=cfg.index_interval_bytes if opts.index_interval_bytes is None
                    else opts.index_interval_bytes,
                    max_index_size=cfg.segment_index_bytes if opts.max_index_size is None else opts.max_index_size)
        return (str(t.data_dir), str(t.path), t.topic, t.partition, o)

    return plan_partitions(Plan("convert"), groups, resolver, runner or default_runner(workers, progress),
                           _plan_partition, task, notes=False)


__all__ = ["SegmentAudit", "audit", "audit_segment", "plan_convert"]
