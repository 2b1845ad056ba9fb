"""The words of a note (issue 30 item 6: facts are data): the library says what it observed as a
:class:`~kafkalog.storage.files.findings.Finding` with a ``kind`` code and typed ``facts`` (offsets, counts, bytes,
timestamps, config names and values); this module holds one template per kind and is the one place those notes
become sentences, for every command's human output and for the ``message`` of its ``--json`` notes.

A finding without a template (one the library still words itself) renders as its ``message``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kafkalog.storage.files.findings import Finding

Template = Callable[[str, Mapping[str, Any]], str]


def _name(file: str) -> str:
    return Path(file).name


def _at(file: str) -> str:
    """``<partition dir name>: `` when the note knows its partition."""
    return f"{Path(file).name}: " if file else ""


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v))
    return str(v)


def _setting(s: Mapping[str, Any], sep: str = "=") -> str:
    """``name=value (source)`` (``name value (source)`` with ``sep=" "``); no source: ``name=value``."""
    text = f"{s['name']}{sep}{_value(s['value'])}"
    return f"{text} ({s['source']})" if s.get("source") else text


#: what the broker does by itself at every start (repair leaves it to the broker): action code -> words
ROUTINE = {"deletedFiles": "delete files left by asynchronous deletions (.deleted)",
           "epochCheckpoint": "rewrite leader-epoch-checkpoint to the log's range",
           "producerSnapshots": "write or remove producer snapshots",
           "activeIndexes": "trim the active segment's indexes"}


def _routine(items: list[Mapping[str, Any]]) -> str:
    words = [(ROUTINE.get(i["action"]) or f"{i['action']} {i.get('file', '')}".rstrip(), i["count"]) for i in items]
    return "; ".join(f"{k} ({n})" for k, n in sorted(words))


#: kind -> the sentence, from the finding's ``file`` and ``facts``
TEMPLATES: dict[str, Template] = {
    # the cleaner (kafkalog compact): LogCleanerManager's eligibility
    "compact.policy": lambda f, x: f"not compacted: {_setting(x['setting'])}",
    "compact.cleanerDisabled": lambda f, x: f"not compacted: {_setting(x['setting'])}",
    "compact.noSegments": lambda f, x: "no segments (run repair): nothing to compact",
    "compact.cleanPointReset": lambda f, x: (f"the clean point {x['cleanPoint']} is outside the log: reset to "
                                             f"{x['firstDirtyOffset']}, as the broker does"),
    "compact.emptyLog": lambda f, x: "empty log: nothing to compact",
    "compact.activeOnly": lambda f, x: (
        f"only the active segment holds data ({x['bytes']} bytes, offsets {x['firstOffset']}..{x['lastOffset']}), "
        "and the cleaner never cleans the active segment: nothing to compact until the broker rolls it "
        "(segment.bytes, segment.ms)"),
    "compact.notEligible": lambda f, x: (
        f"not eligible: dirty ratio {x['dirtyRatio']:.3f} <= {_setting(x['setting'], ' ')} and no "
        "segment past max.compaction.lag.ms (--all cleans anyway)"),
    "compact.nothingCleanable": lambda f, x: "nothing cleanable",
    # the config resolver: the KRaft metadata of a data dir
    "metadata.readStopped": lambda f, x: f"{x['error']}: the metadata after this point is not read",
    "metadata.snapshotUnreadable": lambda f, x: f"{f}: unreadable snapshot ({'; '.join(x['errors'])}); an older "
                                                "one is used",
    "metadata.logUnreadable": lambda f, x: f"{f}: {x['error']}",
    "metadata.undecodable": lambda f, x: f"{f}: {x['records']} metadata records could not be decoded and were "
                                         "skipped",
    "config.zookeeperDir": lambda f, x: (f"{f}: a ZooKeeper-mode data dir: topic config overrides live in "
                                         "ZooKeeper, not in the data dir; pass them with --config or --topic-config"),
    "config.noMetadataDir": lambda f, x: (
        f"{f}: KRaft data dir without {x['metadataDir']} (it lives in the broker's metadata.log.dir): topic "
        "overrides are unknown unless that dir is given too, or --config/--topic-config"),
    # a data dir's own files
    "checkpoint.unreadable": lambda f, x: f"{f}: {x['error']} (the broker reads it as empty)",
    "lock.held": lambda f, x: (f"{f}: its .lock is held by {x['holders']} (a running broker?): applying this plan "
                               "will be refused until it stops"),
    "lock.unreadable": lambda f, x: f"{f}: {x['error']}",
    # repair
    "repair.noCleanShutdown": lambda f, x: (f"{f}: no clean shutdown marker: segments above each recovery point "
                                            "are recovered"),
    "repair.full": lambda f, x: f"{f}: --full: every segment is recovered, as the broker would without a recovery "
                                "point",
    "repair.deleteDir": lambda f, x: (f"{f}: queued for deletion: the broker loads it without recovery and deletes "
                                      "it; left as is"),
    "repair.strayDir": lambda f, x: (f"{f}: a stray replica: the broker loads it aside and never deletes it; left "
                                     "as is"),
    "repair.healthy": lambda f, x: (f"{f}: healthy, nothing to repair" + (
        f". At its next start the broker will itself: {_routine(x['routine'])}" if x.get("routine") else "")),
    "repair.topicIdUnknown": lambda f, x: (
        f"{f}: unreadable ({x['error']}) and no topic id is known (no {x['metadataDir']}, no --topic-id): left as "
        "is. The broker stops at startup on it (fatal: Error starting LogManager); with the file removed, a KRaft "
        "broker would treat the partition as a stray replica unless the metadata still lists it. Pass --topic-id "
        "TOPIC=ID to rewrite it."),
    "repair.topicIdDiffers": lambda f, x: (
        f"{f}: holds topic id {x['topicId']}, --topic-id says {x['given']}: left as is (the broker would treat the "
        "replica as stray if the cluster metadata disagrees)"),
    # the loader (the broker's LogLoader, as repair and doctor run it)
    "loader.swapCompleted": lambda f, x: (f"{_name(f)}: an interrupted segment replacement is completed, as the "
                                          "broker does"),
    "loader.split": lambda f, x: (
        f"{_name(f)}: segment {x['baseOffset']}: {x['reason']} (KAFKA-6264): split into segments "
        f"{', '.join(map(str, x['newSegments']))} as the broker does, then loaded again"),
    "loader.indexRebuilt": lambda f, x: (f"{_name(f)}: segment {x['baseOffset']}: {x['reason']}; the segment is "
                                         "recovered and its indexes rebuilt"),
    "loader.epochCheckpointUnreadable": lambda f, x: (
        f"{_name(f)}: leader-epoch-checkpoint is unreadable ({x['error']}); rebuilt from the batches (the broker "
        "would fail to load this partition)"),
    "loader.truncated": lambda f, x: (f"{_name(f)}: segment {x['baseOffset']}: valid region ends at byte "
                                      f"{x['validBytes']}: {x['reason']}"),
    "loader.endBelowStart": lambda f, x: (
        f"{_name(f)}: log end offset {x['logEndOffset']} is below the checkpointed log start offset "
        f"{x['logStartOffset']}: every segment is deleted (as the broker does)"),
    # retention
    "retain.noSegments": lambda f, x: f"{f}: no segments (run repair): nothing retained or deleted",
    "retain.tiered": lambda f, x: (f"{f}: a tiered-storage topic (remote.storage.enable): its local segments are "
                                   "deleted by the broker once uploaded to the remote store; nothing retained or "
                                   "deleted"),
    "retain.cleanerDisabled": lambda f, x: ("cleanup.policy contains compact and log.cleaner.enable=false: the "
                                            "broker runs no retention on this log"),
    # flush
    "flush.noSegments": lambda f, x: f"{f}: no segments: NOT flushed; run repair",
    "flush.notVerified": lambda f, x: (f"{f}: NOT flushed: {x['problem']}; its recovery point stays "
                                       f"{x['recoveryPoint']}: run repair first"),
    # rehydrate (tiered storage back to local segments)
    "rehydrate.skipped": lambda f, x: (f"remote segment {x['startOffset']}-{x['segmentId']} skipped: " + (
        f"its metadata state is {x['state']}" if x["state"] else "no __remote_log_metadata record references it")),
    "rehydrate.indexesRebuilt": lambda f, x: ("indexes rebuilt (the remote ones failed verification or were "
                                              "absent) for the segments at " + ", ".join(map(str, x["baseOffsets"]))),
    # groups (the __consumer_offsets replay)
    "groups.unknownRecordType": lambda f, x: (f"{_at(f)}offset {x['offset']}: unknown record type "
                                              f"{x['recordType']}, ignored"),
    "groups.assignmentUndecodable": lambda f, x: (f"{_at(f)}group {x['group']}: member {x['member']}: "
                                                  "assignment not decodable"),
    "groups.tornTail": lambda f, x: (
        f"{_name(str(Path(f).parent))}: {_name(f)}: {x['bytes']} bytes at the end (from byte {x['position']}) are "
        "not a complete batch (a torn write): ignored, as the broker's recovery truncates them"),
}


def render(finding: Finding) -> str:
    """The sentence of a note or finding: its kind's template over its facts, or its own ``message``."""
    template = TEMPLATES.get(finding.kind)
    if template is None or finding.message:
        return finding.message
    return template(finding.file, finding.facts)


def to_json(finding: Finding) -> dict[str, Any]:
    """A note for ``--json``: its fields (``kind``, ``file``, ``facts``...) and ``message``, its rendered words."""
    d = finding.to_dict()
    d["message"] = render(finding)
    d.setdefault("facts", {})
    return d


def render_all(findings: list[Finding]) -> list[str]:
    return [render(f) for f in findings]


__all__ = ["TEMPLATES", "render", "render_all", "to_json"]
