"""``kafkalog remote ls|verify``: a remote store's segments, checked file by file and against the
``__remote_log_metadata`` records found in the data dirs.

The metadata is replayed as ``TopicBasedRemoteLogMetadataManager`` builds its cache
(``RemoteLogMetadataCache.addCopyInProgressSegment`` / ``updateRemoteLogSegmentMetadata``): a
``RemoteLogSegmentMetadata`` record (state ``COPY_SEGMENT_STARTED``) introduces a segment with its offsets,
epochs and size; each ``RemoteLogSegmentMetadataUpdate`` moves it to ``COPY_SEGMENT_FINISHED``,
``DELETE_SEGMENT_STARTED`` or ``DELETE_SEGMENT_FINISHED``; ``RemotePartitionDeleteMetadata`` marks the whole
partition. A segment's status is then:

* ``present``: metadata and files agree (a ``COPY_SEGMENT_FINISHED`` or ``*_STARTED`` segment with its files);
* ``missing``: ``COPY_SEGMENT_FINISHED`` (the broker serves it) but files are absent (an error);
* ``deleted``: ``DELETE_SEGMENT_FINISHED`` and gone, as expected; ``undeleted`` if files are still there;
* ``unreferenced``: files no metadata record mentions (an upload whose metadata was lost, or a store of
  another cluster);
* ``unchecked``: no data dir was given, so nothing to cross-check.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from kafkalog.storage.decoders.remote_log_metadata import REMOTE_LOG_METADATA_TOPIC
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files.findings import Finding, error, info, warning
from kafkalog.storage.files.leader_epoch import read_leader_epoch_checkpoint
from kafkalog.storage.files.producer_snapshot import read_producer_snapshot
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.log.datadir import list_partition_dirs
from kafkalog.storage.log.dir_checkpoints import open_partition_log
from kafkalog.storage.log.segment_check import verify_segment
from kafkalog.storage.remote.layout import REQUIRED_KINDS, LocalTieredStorageLayout, RemoteSegment
from kafkalog.storage.remote.metadata import iter_remote_log_metadata


@dataclass
class SegmentMetadata:
    """What ``__remote_log_metadata`` says about one remote segment (the RLMM cache's entry)."""

    topic: str | None
    partition: int | None
    topic_id: str | None
    segment_id: str
    start_offset: int | None = None
    end_offset: int | None = None
    size: int | None = None
    state: str | None = None
    epochs: list[tuple[int, int]] = field(default_factory=list)
    offset: int | None = None  # of the last metadata record
    metadata_partition: str | None = None


@dataclass
class RemoteMetadata:
    segments: dict[str, SegmentMetadata] = field(default_factory=dict)
    partition_states: dict[tuple[str, int], str] = field(default_factory=dict)  # (topic id, partition) -> state
    local_log_start: dict[tuple[str, int], int] = field(default_factory=dict)  # (topic, partition) -> first base
    found: bool = False  # any __remote_log_metadata partition


def read_remote_metadata(data_dirs: Iterable[str | os.PathLike]) -> RemoteMetadata:
    """Replay every ``__remote_log_metadata`` partition of ``data_dirs`` (and note the first local segment of each
    partition, for the contiguity check)."""

    md = RemoteMetadata()
    dirs = [os.fspath(d) for d in data_dirs]
    for pdir_name, _p, offset, rec in iter_remote_log_metadata(dirs):
        md.found = True
        t = rec["type"]
        if t in ("RemoteLogSegmentMetadata", "RemoteLogSegmentMetadataUpdate"):
            sid = rec["remoteLogSegmentId"]
            tip = sid["topicIdPartition"]
            m = md.segments.get(sid["id"])
            if m is None:
                m = md.segments[sid["id"]] = SegmentMetadata(tip["name"], tip["partition"], tip["id"], sid["id"])
            if t == "RemoteLogSegmentMetadata":
                m.start_offset, m.end_offset = rec["startOffset"], rec["endOffset"]
                m.size = rec["segmentSizeInBytes"]
                m.epochs = [(e["leaderEpoch"], e["offset"]) for e in rec["segmentLeaderEpochs"]]
            m.state = rec["remoteLogSegmentState"]
            m.offset, m.metadata_partition = offset, pdir_name
        elif t == "RemotePartitionDeleteMetadata":
            tip = rec["topicIdPartition"]
            md.partition_states[(tip["id"], tip["partition"])] = rec["remotePartitionDeleteState"]
        elif t == "RemoteLogSegmentMetadataSnapshot":
            m = md.segments.setdefault(rec["segmentId"], SegmentMetadata(None, None, None, rec["segmentId"]))
            m.start_offset, m.end_offset, m.size = rec["startOffset"], rec["endOffset"], rec["segmentSizeInBytes"]
            m.state = rec["remoteLogSegmentState"]
    for d in dirs:
        if not Path(d).is_dir():
            continue
        for path, tp in list_partition_dirs(d):
            if tp.topic == REMOTE_LOG_METADATA_TOPIC:
                continue
            log = open_partition_log(path)
            try:
                if log.segments:
                    md.local_log_start[(tp.topic, tp.partition)] = log.segments[0].base_offset
            finally:
                log.close()
    return md


@dataclass
class RemoteSegmentRow:
    """One row of ``kafkalog remote ls``."""

    topic: str
    partition: int
    topic_id: str
    segment_id: str
    start_offset: int | None
    end_offset: int | None
    size: int | None
    state: str | None
    status: str
    file: str | None

    def to_dict(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "topicId": self.topic_id,
                "segmentId": self.segment_id, "startOffset": self.start_offset, "endOffset": self.end_offset,
                "size": self.size, "state": self.state, "status": self.status, "file": self.file}


def _end_offset(store: LocalTieredStorageLayout, seg: RemoteSegment) -> int | None:
    p = store.local_path(seg, "log")
    if p is None:
        return None
    with Segment(p, seg.start_offset) as s:
        try:
            nxt = s.read_next_offset()
        except KafkaLogError:
            return None
    return nxt - 1 if nxt > seg.start_offset else None


def list_remote(store: LocalTieredStorageLayout, data_dirs: Iterable[str | os.PathLike] = (), *,
                metadata: RemoteMetadata | None = None, topic: str | None = None,
                partition: int | None = None) -> list[RemoteSegmentRow]:
    """Every segment of the store and of the metadata, with its state and status (module docstring)."""
    dirs = list(data_dirs)
    md = metadata if metadata is not None else (read_remote_metadata(dirs) if dirs else RemoteMetadata())
    rows: list[RemoteSegmentRow] = []
    seen: set[str] = set()
    for seg in store.all_segments():
        if (topic is not None and seg.topic != topic) or (partition is not None and seg.partition != partition):
            continue
        seen.add(seg.segment_id)
        m = md.segments.get(seg.segment_id)
        if not dirs:
            status = "unchecked"
        elif m is None:
            status = "unreferenced"
        elif m.state == "DELETE_SEGMENT_FINISHED":
            status = "undeleted"
        else:
            status = "present"
        end = m.end_offset if m is not None and m.end_offset is not None else _end_offset(store, seg)
        rows.append(RemoteSegmentRow(seg.topic, seg.partition, seg.topic_id, seg.segment_id, seg.start_offset, end,
                                     seg.size if "log" in seg.files else None, m.state if m else None, status,
                                     store.display(seg.files.get("log", next(iter(seg.files.values()))))))
    for sid, m in md.segments.items():
        if sid in seen or m.topic is None:
            continue
        if (topic is not None and m.topic != topic) or (partition is not None and m.partition != partition):
            continue
        status = "deleted" if m.state == "DELETE_SEGMENT_FINISHED" else (
            "missing" if m.state == "COPY_SEGMENT_FINISHED" else "absent")
        rows.append(RemoteSegmentRow(m.topic, m.partition or 0, m.topic_id or "", sid, m.start_offset, m.end_offset,
                                     m.size, m.state, status, None))
    rows.sort(key=lambda r: (r.topic, r.partition, r.start_offset if r.start_offset is not None else -1,
                             r.segment_id))
    return rows


@dataclass
class RemoteVerifyReport:
    findings: list[Finding] = field(default_factory=list)
    segments: int = 0
    bytes: int = 0
    rows: list[RemoteSegmentRow] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]


def verify_remote_segment(store: LocalTieredStorageLayout, seg: RemoteSegment, *, deep: bool = False,
                          expected_end: int | None = None) -> list[Finding]:
    """One remote segment: every file ``LocalTieredStorage`` writes is there; the ``.log``'s batches and CRCs
    and its indexes against it (:func:`~kafkalog.storage.log.segment_check.verify_segment`, the same checks as
    ``kafkalog verify``); the producer snapshot and epoch checkpoint readable; the end offset the metadata says."""

    out: list[Finding] = []
    where = store.display(seg.files.get("log") or next(iter(seg.files.values())))
    for kind in REQUIRED_KINDS:
        if kind not in seg.files:
            out.append(error(where, None, "remote", code="remote.fileMissing", fileKind=kind))
    p = store.local_path(seg, "log")
    if p is not None:
        with Segment(p, seg.start_offset) as s:
            found, summary = verify_segment(s, deep=deep)
        for f in found:
            name = os.path.basename(f.file)
            out.append(replace(f, file=store.display(seg.files.get(_kind_of(name), f.file))))
        if summary.first_offset is None:
            out.append(error(where, 0, "remote", code="remote.noBatch"))
        elif expected_end is not None and summary.next_offset is not None and summary.next_offset - 1 != expected_end:
            out.append(error(where, None, "remote", code="remote.endDiffers", endOffset=summary.next_offset - 1,
                             metadataEndOffset=expected_end))
    sp = store.local_path(seg, "snapshot")
    if sp is not None:
        try:
            read_producer_snapshot(sp)
        except KafkaLogError as e:
            out.append(error(store.display(seg.files["snapshot"]), e.position, "snapshot", e.reason))
    ep = store.local_path(seg, "leader_epoch_checkpoint")
    if ep is not None:
        try:
            out += [d.finding(store.display(seg.files["leader_epoch_checkpoint"]), "leader-epoch", "error")
                    for d in read_leader_epoch_checkpoint(ep).validate()]
        except KafkaLogError as e:
            out.append(error(store.display(seg.files["leader_epoch_checkpoint"]), e.position, "leader-epoch",
                             e.reason))
    return out


def _kind_of(name: str) -> str:
    for kind, suffix in (("index", ".index"), ("timeindex", ".timeindex"), ("txnindex", ".txnindex"),
                         ("log", ".log")):
        if name.endswith(suffix):
            return kind
    return "log"


def verify_remote(store: LocalTieredStorageLayout, data_dirs: Iterable[str | os.PathLike] = (), *,
                  deep: bool = False, topic: str | None = None, partition: int | None = None,
                  progress=None) -> RemoteVerifyReport:
    """``kafkalog remote verify``: every remote segment (:func:`verify_remote_segment`) and, with data dirs, the
    cross-check against ``__remote_log_metadata`` (module docstring) and the contiguity of the remote offsets
    (``COPY_SEGMENT_FINISHED`` segments) with each other and with the local log's first segment."""
    dirs = list(data_dirs)
    md = read_remote_metadata(dirs) if dirs else RemoteMetadata()
    rep = RemoteVerifyReport()
    if dirs and not md.found:
        rep.findings.append(warning(os.fspath(dirs[0]), None, "remote-metadata", code="remote.noMetadata"))
    rep.rows = list_remote(store, dirs, metadata=md, topic=topic, partition=partition)
    by_id = {s.segment_id: s for s in store.all_segments()}
    for row in rep.rows:
        seg = by_id.get(row.segment_id)
        if seg is not None:
            m = md.segments.get(row.segment_id)
            rep.findings += verify_remote_segment(store, seg, deep=deep,
                                                  expected_end=m.end_offset if m is not None else None)
            rep.segments += 1
            rep.bytes += seg.size
            if progress is not None:
                progress(seg.size)
        where = row.file or f"{row.topic}-{row.partition}/{row.segment_id}"
        if row.status == "missing":
            rep.findings.append(error(where, None, "remote", code="remote.absent", startOffset=row.start_offset,
                                      endOffset=row.end_offset))
        elif row.status == "undeleted":
            rep.findings.append(warning(where, None, "remote", code="remote.undeleted"))
        elif row.status == "unreferenced":
            rep.findings.append(warning(where, None, "remote", code="remote.unreferenced"))
    if dirs:
        _contiguity(rep, md)
    return rep


def _contiguity(rep: RemoteVerifyReport, md: RemoteMetadata) -> None:
    parts: dict[tuple[str, int], list[RemoteSegmentRow]] = {}
    for r in rep.rows:
        if r.state == "COPY_SEGMENT_FINISHED" and r.start_offset is not None and r.end_offset is not None:
            parts.setdefault((r.topic, r.partition), []).append(r)
    for (topic, partition), rows in parts.items():
        rows.sort(key=lambda r: (r.start_offset, r.end_offset))
        nxt = None
        for r in rows:
            if nxt is not None and r.start_offset > nxt:  # type: ignore[operator]
                rep.findings.append(error(r.file or r.segment_id, None, "remote", code="remote.gap", topic=topic,
                                          partition=partition, firstOffset=nxt,
                                          lastOffset=r.start_offset - 1))  # type: ignore[operator]
            nxt = max(nxt or 0, r.end_offset + 1)  # type: ignore[operator]
        local = md.local_log_start.get((topic, partition))
        if local is not None and nxt is not None and local > nxt:
            rep.findings.append(error(f"{topic}-{partition}", None, "remote", code="remote.localGap", remoteEnd=nxt - 1,
                                      localStart=local))
        elif local is not None and nxt is not None:
            rep.findings.append(info(f"{topic}-{partition}", None, "remote", code="remote.contiguous",
                                     remoteStart=rows[0].start_offset, remoteEnd=nxt - 1, localStart=local))


def iter_remote_segments(store: LocalTieredStorageLayout, *, topic: str | None = None,
                         partition: int | None = None) -> Iterator[tuple[RemoteSegment, Path]]:
    """``(segment, local path of its .log)`` for every remote segment with a ``.log``, by partition and offset."""
    for seg in store.all_segments():
        if (topic is not None and seg.topic != topic) or (partition is not None and seg.partition != partition):
            continue
        p = store.local_path(seg, "log")
        if p is not None:
            yield seg, p
