"""The start-up gate of a KRaft broker: why it refuses its ``log.dirs`` before loading any log, in its own words.

``KafkaRaftServer.initializeLogDirs`` and ``MetaPropertiesEnsemble.verify``: missing or disagreeing
``meta.properties`` (cluster id, node id, directory id used twice or reserved), ``__cluster_metadata-0`` outside
the metadata dir; ``LogManager``'s duplicate live partitions and dirs that are not partitions'. Each refusal
carries the broker's own message (the text of the exception it dies with). ``kafkalog doctor``
(:func:`~kafkalog.storage.reports.doctor.diagnose`) reports each as a fatal ``startup`` finding;
``tests/kafka/test_doctor_broker.py`` checks every one against a real broker.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkalog.storage.config.resolver import METADATA_DIR
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.files.findings import Finding, note
from kafkalog.storage.files.java import uuid_from_string, uuid_to_string
from kafkalog.storage.files.meta_properties import directory_id_reserved
from kafkalog.storage.log.datadir import DataDir
from kafkalog.storage.log.topic_partition import METADATA_TOPIC


@dataclass(frozen=True)
class Refusal:
    """One reason the broker stops at start-up: the file or dir (``path``), what is wrong with it (``message``, or
    ``note``: the data dir's finding, a code and its facts), the message of the exception the broker stops with
    (``broker_message``) and, when it logs another one first, that exception's message (``cause``)."""

    path: str
    message: str
    broker_message: str
    cause: str | None = None
    note: Finding | None = None


def java_sorted(keys: list[str]) -> list[str]:
    """``keys`` in ``String.compareTo`` order (UTF-16 code units): the order ``MetaPropertiesEnsemble.verify`` meets
    the log dirs (its ``logDirProps`` is a ``TreeMap``), which decides which dir its message names."""
    return sorted(keys, key=lambda k: k.encode("utf-16-be", "surrogatepass"))


def _agree(path: Path, first: Any, value: Any, version: int | None, missing: Callable[[Path], None],
           differs: Callable[[Path, Any, Any], None]) -> Any:
    """``MetaPropertiesEnsemble.verify``'s check of one id (cluster.id, node.id) across the ``meta.properties``
    files: a v1 file must have it (``missing``), and a file that has it has the one met first (``differs``).
    Returns the one met first (``first``, or ``value`` when it is the first)."""
    if value is None:
        if version == 1:
            missing(path)
        return first
    if first is not None and value != first:
        differs(path, value, first)
    return value if first is None else first


def startup_gate(dirs: list[DataDir], *, kraft: bool, node_id: int | None = None) -> list[Refusal]:
    """Why a broker refuses these ``log.dirs`` before loading any log, in its own words (the first one it meets
    is the one it dies with; the later ones are reported too). ``node_id``: the configured ``node.id``."""
    out: list[Refusal] = []

    def fatal(path: Path | str, broker: str, *, code: str, **facts) -> None:
        """A refusal: what is wrong as ``code`` and its facts, what the broker says as it stops (``broker``)."""
        out.append(Refusal(str(path), "", broker, note=note(path, code, **facts)))

    names = [str(d.path) for d in dirs]
    by_name = dict(zip(names, dirs, strict=True))
    if kraft:
        props = {n: by_name[n].meta_properties for n in names if by_name[n].meta_properties is not None}
        if not props:
            fatal(dirs[0].path / "meta.properties", "No readable meta.properties files found.",
                  code="startup.noMetaProperties")
        cluster: str | None = None
        node = node_id
        seen: dict[str, str] = {}
        for n in java_sorted(list(props)):
            m = props[n]
            assert m is not None
            path = Path(n) / "meta.properties"
            version = _safe(lambda m=m: m.version)
            cluster = _agree(path, cluster, m.cluster_id, version, lambda p: fatal(
                p, f"cluster.id was not specified in the v1 file: {p}", code="startup.noClusterId"),
                lambda p, cid, first: fatal(p, f"Invalid cluster.id in: {p}. Expected {first}, but read {cid}",
                                            code="startup.clusterIdDiffers", clusterId=cid, expected=first))
            node = _agree(path, node, _safe(lambda m=m: m.node_id), version, lambda p: fatal(
                p, f"node.id was not specified in {p}", code="startup.noNodeId"),
                lambda p, nid, first: fatal(
                    p, f"Stored node id {nid} doesn't match previous node id {first} in {p}. If you moved your "
                    "data, make sure your configured node id matches. If you intend to create a new node, you should "
                    "remove all data in your data directories.", code="startup.nodeIdDiffers", nodeId=nid,
                    expected=first))
            did = m.directory_id
            if did is not None and directory_id_reserved(did):
                fatal(path,  # Kafka 4.x's spelling (checked with 4.3.1); 3.9 logs "Invalid resrved directory ID"
                      f"Invalid reserved directory ID {uuid_to_string(uuid_from_string(did))} found in {n}",
                      code="startup.directoryIdReserved", directoryId=did)
            elif did is not None:
                if did in seen:
                    fatal(path, f"Duplicate directory ID Optional[{did}] found. It was the ID of {seen[did]}, but "
                          f"also of {n}", code="startup.directoryIdTwice", directoryId=did, other=seen[did])
                seen.setdefault(did, n)
        for n in names[1:]:
            md = Path(n) / METADATA_DIR
            if n in props and md.is_dir():
                fatal(md, f"Found unexpected metadata location in data directory `{md}` (the configured metadata "
                      f"directory is {names[0]}).", code="startup.metadataDirOutside", metadataDir=METADATA_DIR,
                      metadataLogDir=names[0])
        for n in java_sorted(names):
            if n not in props:
                fatal(Path(n) / "meta.properties", f"No `meta.properties` found in {n} (have you run "
                      "`kafka-storage.sh` to format the directory?)", code="startup.notFormatted")
    live: dict[tuple[str, int], Path] = {}
    for d in dirs:
        for p, tp in d.partition_dirs.items():
            if tp.kind != "live" or tp.topic == METADATA_TOPIC:
                continue
            key = (tp.topic, tp.partition)
            if key in live:
                fatal(p, f"Duplicate log directories for {tp.topic}-{tp.partition} are found in both {p} and "
                      f"{live[key]}. It is likely because log directory failure happened while broker was "
                      "replacing current replica with future replica. Recover broker from this failure by manually "
                      "deleting one of the two directories for this partition. It is recommended to delete the "
                      "partition in the log directory that is known to have failed recently.",
                      code="startup.alsoLive", partition=tp.name, otherDir=str(live[key].parent))
            live.setdefault(key, p)
        for f in d.findings:
            if f.severity == "error" and f.kind == "layout" and f.facts.get("refuses"):
                # LocalLog.parseTopicPartitionName, in a log-loading thread: the fatal fault of any such failure
                p = Path(f.file)
                out.append(Refusal(str(p), "", "Error starting LogManager",
                                   cause=f"Found directory {os.path.realpath(p)}, '{p.name}' is not in the form of "
                                   "topic-partition or topic-partition.uniqueId-delete (if marked for deletion).",
                                   note=f))
    return out


def _safe(fn):
    try:
        return fn()
    except KafkaLogError:
        return None


__all__ = ["Refusal", "java_sorted", "startup_gate"]
