"""The words of a note (issue 30 item 6: facts are data): the library says what it observed as a
:class:`~kafkalog.storage.files.findings.Finding` with a ``kind`` code and typed ``facts`` (offsets, counts, bytes,
timestamps, config names and values); this module holds one template per kind and is the one place those notes
become sentences, for every command's human output and for the ``message`` of its ``--json`` notes.

A finding without a template (one the library still words itself) renders as its ``message``.

It lives with the ``kafkalog`` package's own modules (``tools/package``), above ``kafkalog.storage`` and beside
``kafkalog.tools`` and ``kafkalog.compat``, so that the commands and the certify report (``compat/certify``, which
may not import ``kafkalog.tools``) word a finding the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kafkalog.storage.files.checkpoints import REPLICATION_OFFSET_CHECKPOINT
from kafkalog.storage.files.findings import Finding
from kafkalog.storage.files.leader_epoch import LEADER_EPOCH_CHECKPOINT
from kafkalog.storage.files.partition_metadata import PARTITION_METADATA_FILE
from kafkalog.storage.log.loss import CONSUMER_GROUP, PRODUCER_SNAPSHOT

Template = Callable[[str, Mapping[str, Any]], str]


def _files(names: list[str]) -> str:
    """Up to three file names, else how many."""
    return ", ".join(names) if len(names) <= 3 else f"{len(names)} index and snapshot files"


def _unreadable(file: str, x: Mapping[str, Any]) -> str:
    """A file the broker fails on at startup (doctor): what happens, why, and what repairs it."""
    name = Path(file).name
    fix = ("`kafkalog repair` rewrites it from the topic id in __cluster_metadata or --topic-id"
           if name == PARTITION_METADATA_FILE else "`kafkalog repair` rebuilds it from the batches")
    what = "its log dir goes offline while the logs load" if x["offline"] else \
        "loading the logs fails and the broker stops"
    text = f"{name} is unreadable: {what} ({x['cause']}); {fix}"
    return text + f": log dir {x['logDir']} goes offline, its partitions are not served" if "logDir" in x else text


def describe_remembered(r: Mapping[str, Any]) -> str:
    """What remembers an offset past a partition's log end (a ``RememberedOffset.to_dict()``), in words."""
    name, offset = Path(r["file"]).name, r["offset"]
    if r["source"] == REPLICATION_OFFSET_CHECKPOINT:
        return f"{name} holds the high watermark {offset}"
    if r["source"] == LEADER_EPOCH_CHECKPOINT:
        return f"{name} starts epoch {r['epoch']} at offset {offset}"
    if r["source"] == PRODUCER_SNAPSHOT:
        return f"the producer snapshot {name} was taken at offset {offset}"
    if r["source"] == CONSUMER_GROUP:
        return f"consumer group {r['group']} committed offset {offset}"
    return f"{name} holds {offset}"


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


def _problem(p: Mapping[str, Any]) -> str:
    """The words of a finding a note carries as data (``file``, ``code``, ``facts``, ``message``)."""
    return render(Finding(p["file"], None, "", "error", p.get("message", ""), p["facts"], p["code"]))


def _routine(items: list[Mapping[str, Any]]) -> str:
    words = [(ROUTINE.get(i["action"]) or f"{i['action']} {i.get('file', '')}".rstrip(), i["count"]) for i in items]
    return "; ".join(f"{k} ({n})" for k, n in sorted(words))


def _batch(b: Mapping[str, Any]) -> str:
    """A batch where diff found it: ``segment@position (base..last, magic m)``."""
    return f"{b['segment']}@{b['position']} ({b['baseOffset']}..{b['lastOffset']}, magic {b['magic']})"


def _starts(x: Mapping[str, Any]) -> str:
    """doctor's verdict line when the broker starts (``doctor.verdictRecovery``; h9): what it recovers, truncates,
    warns about."""
    what = []
    if x["recordsTruncated"]:
        what.append(f"truncating {x['recordsTruncated']:,d} record{'s' * (x['recordsTruncated'] != 1)}")
    elif x["bytesTruncated"]:
        what.append(f"truncating {x['bytesTruncated']:,d} bytes of invalid data")
    if x["warnings"]:
        what.append(f"{x['warnings']} warning{'s' * (x['warnings'] != 1)}")
    tail = f" ({', '.join(what)})" if what else ""
    if x["partitionsRecovered"]:
        k = x["partitionsRecovered"]
        return f"WILL START, RECOVERING {k} PARTITION{'S' * (k != 1)}{tail}"
    if x["loss"]:
        return f"WILL START, WITH LOSS{tail}"
    return f"WILL START{tail or ' (with warnings)'}"


#: verify's words for a leftover file of an interrupted operation, by its suffix (h8)
_LEFTOVERS = {".swap": "a replacement segment whose swap was interrupted; Kafka completes the swap at load",
              ".cleaned": "output of an interrupted cleaning or split; Kafka deletes it at load",
              ".deleted": "a deleted file awaiting removal; Kafka deletes it at load",
              ".tmp": "temporary file of an interrupted atomic write; ignored by Kafka"}


def _cause(x: Mapping[str, Any], at: int) -> str:
    """Why a segment's recovery stops at byte ``at`` (its ``stop`` and ``error`` facts): the corrupt batch's error,
    or what the scanner met there (``torn tail at byte 123``)."""
    if x["stop"] is None:
        return "invalid bytes"
    return str(x["error"]) if x["error"] is not None else f"{x['stop']} at byte {at}"


def _located(x: Mapping[str, Any]) -> str:
    """An error where it is, as a ``KafkaLogError`` says it: ``file: byte N: error`` from its ``file``, ``position``
    and ``error`` facts (a part that is None left out)."""
    where = [str(w) for w in (x["file"], None if x["position"] is None else f"byte {x['position']}") if w is not None]
    return ": ".join([*where, str(x["error"])])


def _os_error(file: str, x: Mapping[str, Any]) -> str:
    """An OS error about a file: ``file: the OS's words``."""
    return f"{x['file']}: {x['error']}"


#: retention's reason for a segment below the log start offset (its loss and its files' renames)
_BELOW_LOG_START = ("every offset is below the log start offset {logStartOffset} (log-start-offset-checkpoint: "
                    "delete-records or an earlier retention run)")


#: kind -> the sentence: a format string over the facts and ``{file}`` (the path), ``{name}`` (its last part),
#: ``{parent}`` (its folder's name) and ``{at}`` (``name: ``, or nothing without a path); or, where the words
#: depend on the values, a function of the path and the facts
TEMPLATES: dict[str, str | Template] = {
    # the cleaner (kafkalog compact): LogCleanerManager's eligibility
    "compact.policy": lambda f, x: f"not compacted: {_setting(x['setting'])}",
    "compact.cleanerDisabled": lambda f, x: f"not compacted: {_setting(x['setting'])}",
    "compact.noSegments": "no segments (run repair): nothing to compact",
    "compact.cleanPointReset": "the clean point {cleanPoint} is outside the log: reset to {firstDirtyOffset}, as the "
                               "broker does",
    "compact.emptyLog": "empty log: nothing to compact",
    "compact.activeOnly": "only the active segment holds data ({bytes} bytes, offsets {firstOffset}..{lastOffset}), "
                          "and the cleaner never cleans the active segment: nothing to compact until the broker rolls "
                          "it (segment.bytes, segment.ms)",
    "compact.notEligible": lambda f, x: (
        f"not eligible: dirty ratio {x['dirtyRatio']:.3f} <= {_setting(x['setting'], ' ')} and no segment past "
        "max.compaction.lag.ms (--all cleans anyway)"),
    "compact.nothingCleanable": "nothing cleanable",
    # the config resolver: the KRaft metadata of a data dir
    "metadata.readStopped": "{error}: the metadata after this point is not read",
    "metadata.snapshotUnreadable": lambda f, x: f"{f}: unreadable snapshot ({'; '.join(x['errors'])}); an older "
                                                "one is used",
    "metadata.logUnreadable": "{file}: {error}",
    "metadata.undecodable": "{file}: {records} metadata records could not be decoded and were skipped",
    "config.zookeeperDir": "{file}: a ZooKeeper-mode data dir: topic config overrides live in ZooKeeper, not in the "
                           "data dir; pass them with --config or --topic-config",
    "config.noMetadataDir": "{file}: KRaft data dir without {metadataDir} (it lives in the broker's "
                            "metadata.log.dir): topic overrides are unknown unless that dir is given too, or "
                            "--config/--topic-config",
    # a data dir's own files
    "checkpoint.unreadable": "{file}: {error} (the broker reads it as empty)",
    "lock.held": "{file}: its .lock is held by {holders} (a running broker?): applying this plan will be refused "
                 "until it stops",
    "lock.unreadable": "{file}: {error}",
    "lock.notChecked": "not checked: the data dir is read through a URL, where no broker holds a lock (a prediction "
                       "only: nothing under a URL is changed)",
    # repair
    "repair.noCleanShutdown": "{file}: no clean shutdown marker: segments above each recovery point are recovered",
    "repair.full": "{file}: --full: every segment is recovered, as the broker would without a recovery point",
    "repair.deleteDir": "{file}: queued for deletion: the broker loads it without recovery and deletes it; left as "
                        "is",
    "repair.strayDir": "{file}: a stray replica: the broker loads it aside and never deletes it; left as is",
    "repair.healthy": lambda f, x: (f"{f}: healthy, nothing to repair" + (
        f". At its next start the broker will itself: {_routine(x['routine'])}" if x.get("routine") else "")),
    "repair.topicIdUnknown": "{file}: unreadable ({error}) and no topic id is known (no {metadataDir}, no "
                             "--topic-id): left as is. The broker stops at startup on it (fatal: Error starting "
                             "LogManager); with the file removed, a KRaft broker would treat the partition as a "
                             "stray replica unless the metadata still lists it. Pass --topic-id TOPIC=ID to rewrite "
                             "it.",
    "repair.topicIdDiffers": "{file}: holds topic id {topicId}, --topic-id says {given}: left as is (the broker "
                             "would treat the replica as stray if the cluster metadata disagrees)",
    # the loader (the broker's LogLoader, as repair and doctor run it): {name} is the partition dir's name
    "loader.swapCompleted": "{name}: an interrupted segment replacement is completed, as the broker does",
    "loader.split": lambda f, x: (
        f"{Path(f).name}: segment {x['baseOffset']}: {x['reason']} (KAFKA-6264): split into segments "
        f"{', '.join(map(str, x['newSegments']))} as the broker does, then loaded again"),
    "loader.indexRebuilt": lambda f, x: (f"{Path(f).name}: segment {x['baseOffset']}: "
                                         f"{_problem({'file': f, **x['defect']})}; the segment is recovered and its "
                                         "indexes rebuilt"),
    "loader.epochCheckpointUnreadable": "{name}: leader-epoch-checkpoint is unreadable ({error}); rebuilt from the "
                                        "batches (the broker would fail to load this partition)",
    "loader.truncated": lambda f, x: (f"{Path(f).name}: segment {x['baseOffset']}: valid region ends at byte "
                                      f"{x['validBytes']}: {_cause(x, x['validBytes'])}"),
    "loader.endBelowStart": "{name}: log end offset {logEndOffset} is below the checkpointed log start offset "
                            "{logStartOffset}: every segment is deleted (as the broker does)",
    # retention
    "retain.noSegments": "{file}: no segments (run repair): nothing retained or deleted",
    "retain.tiered": "{file}: a tiered-storage topic (remote.storage.enable): its local segments are deleted by the "
                     "broker once uploaded to the remote store; nothing retained or deleted",
    "retain.cleanerDisabled": "cleanup.policy contains compact and log.cleaner.enable=false: the broker runs no "
                              "retention on this log",
    # flush
    "flush.noSegments": "{file}: no segments: NOT flushed; run repair",
    "flush.notVerified": "{file}: NOT flushed: {problem}; its recovery point stays {recoveryPoint}: run repair first",
    # doctor: what the broker does at its next start
    "doctor.recovers": lambda f, x: (f"recovers {x['segments']} segment(s)"
                                     + (f", rebuilding {_files(x['rebuilt'])}" if x["rebuilt"] else "")
                                     + f"; the log ends at offset {x['lastOffset']}"),
    "doctor.rebuilds": lambda f, x: f"rebuilds {_files(x['rebuilt'])}",
    "doctor.swapCompleted": lambda f, x: f"completes an interrupted segment replacement: {', '.join(x['files'])}",
    "doctor.unreadable": lambda f, x: _unreadable(f, x),
    "doctor.noCleanShutdown": "no clean shutdown marker: every segment above each partition's recovery point is "
                              "recovered",
    "doctor.deleteDir": "queued for deletion: the broker loads it without recovery and deletes it",
    "doctor.strayDir": "a stray replica: the broker loads it aside, never serves it and never deletes it",
    "doctor.futureDir": "a replica being moved to this log dir: the broker resumes the move once the partition is "
                        "online",
    "doctor.noTopicId": "no partition.metadata (no topic id): the broker treats it as a stray log and renames it "
                        "{strayName}; it is not served",
    "doctor.unknownTopic": "topic {topic} is not in {metadataDir}: the broker treats it as a stray log and renames "
                           "it {strayName}",
    "doctor.topicIdDiffers": "topic id {topicId} is not the id {expected} of topic {topic} in {metadataDir}: the "
                             "broker treats it as a stray log (a deleted, recreated topic) and renames it {strayName}; "
                             "it is not served",
    "doctor.planError": lambda f, x: ("kafkalog cannot predict this partition's recovery: "
                                      + _problem({"file": f, **x["planError"]})),
    "doctor.hole": "{name}: {reason}; the broker does not recover this segment at load and serves the log with the "
                   "hole",
    "doctor.corruptBatch": "{name}: {reason}; the broker does not recover this segment at load and serves the batch "
                           "as it is",
    "doctor.tornEnd": "{name}: {stopReason}: the last {bytes} bytes from byte {position} are not a complete batch; the "
                      "broker does not recover this active segment at load (a clean shutdown): it keeps them, its log "
                      "ends at offset {firstOffset}, and it appends new records after them, where its fetches do not find them",
    "doctor.legacyFormat": "{segments} segment(s) hold {batches:,d} message format v0/v1 batch(es): a 4.x broker "
                           "still loads and serves them as they are and appends only v2 batches after them (KIP-724: "
                           "no message.format.version, no fetch down-conversion); its cleaner rewrites them as v2 "
                           "when it compacts them; `kafkalog convert` rewrites them offline",
    # verify: a partition's files checked against each other
    "verify.baseBelowPrevious": "base offset {baseOffset} is below the previous segment's next offset "
                                "{previousNextOffset}",
    "verify.logStartAboveEnd": "{checkpoint} says {offset}, above the log end offset {logEndOffset}: Kafka deletes "
                               "every segment at load",
    "verify.logStartNotAboveBase": "{checkpoint} entry {offset} is not above the first segment's base offset (Kafka "
                                   "only writes entries above it)",
    "verify.recoveryPointAboveEnd": "{checkpoint} says {offset}, above the log end offset {logEndOffset} (Kafka uses "
                                    "the log end offset)",
    "verify.highWatermarkOutside": "{checkpoint} high watermark {offset} is outside [{logStartOffset}, "
                                   "{logEndOffset}]",
    "verify.cleanPointOutside": "{checkpoint} first dirty offset {offset} is outside [{logStartOffset}, "
                                "{logEndOffset}] (Kafka resets it)",
    "verify.epochAfterEnd": "epoch {epoch} starts at {startOffset}, after the log end offset {logEndOffset} (Kafka "
                            "truncates it at load)",
    "verify.epochMissing": "epoch {epoch} (first batch at offset {firstBatchOffset}) is missing",
    "verify.epochStartDiffers": "epoch {epoch} recorded at {startOffset}, first batch of that epoch starts at "
                                "{firstBatchOffset}",
    "verify.metadataVersion": "version {version} (Kafka writes 0)",
    "verify.snapshotUnreadable": "{error} (Kafka deletes it and falls back to an older snapshot)",
    "verify.snapshotAboveEnd": "snapshot offset {offset} is above the log end offset {logEndOffset} (Kafka deletes "
                               "it)",
    "verify.notTruncated": lambda f, x: (
        f"{x['reason']}; the broker will NOT truncate this at startup ("
        + ("the data dir had a clean shutdown" if x["cleanShutdown"] else
           f"the segment lies below the recovery point {x['recoveryPoint']}")
        + f"): it would serve and replicate the segment as it is. `kafkalog repair {x['dataDir']} --full --dry-run` "
        f"shows the cut (the records from byte {x['cutAt']} on, and every later segment), `kafkalog repair "
        f"{x['dataDir']} --full` makes it"),
    "verify.lockUnreadable": "{error}; a broker cannot start on it either",
    "verify.lockNotChecked": "not checked: the data dir is read through a URL, where no broker holds a lock",
    "verify.lockHeld": lambda f, x: (f".lock is held by {', '.join(f'pid {p}' for p in x['pids']) or 'another process'}"
                                     ": a broker is running and files may change while being read"),
    "verify.entryNotHosted": "entry for {topic}-{partition}, which is not hosted in this data dir",
    "verify.topicIdDiffers": "topic id {topicId} differs from {otherTopicId} in {otherPartition}",
    "verify.notInRecoveryPoints": "not in {checkpoint}: after an unclean shutdown every segment is recovered",
    "verify.snapshotMagic": "magic {magic}: a KRaft snapshot holds only v2 record batches (magic 2)",
    "verify.crc": "CRC mismatch (stored 0x{storedCrc:08x}, computed 0x{computedCrc:08x})",
    "verify.tail": "{reason}: {bytes} bytes after the last complete batch",
    "verify.noLogFile": "missing: {given} has no log file",
    "verify.zookeeperTopicIds": "a ZooKeeper-mode data dir: {partitions} partitions of {topics} topics have no topic "
                                "id (partition.metadata). A ZooKeeper broker does not need one; after a migration to "
                                "KRaft, a KRaft broker treats such a replica as stray. Before migrating, give each "
                                "topic its id (kafka-topics.sh --describe shows it): kafkalog topic-id {file} --topics "
                                "TOPIC --set TOPIC_ID",
    # verify: one segment's .log batch by batch, and its indexes against it (storage/log/segment_check)
    "verify.indexLastOffsetOfAppend": "{entries} entries carry the last offset of a multi-batch append (follower or "
                                      "cleaner write), not of the batch at their position",
    "verify.timeIndexInsideBatch": "{entries} entries point inside a batch (offset of the record with the max "
                                   "timestamp, as leaders before Kafka 3.8 wrote them)",
    "verify.timeIndexFinalEntry": "last entry has timestamp {lastTimestamp} but the segment's max timestamp is "
                                  "{maxTimestamp}: the final entry written at roll/close is missing, so Kafka "
                                  "under-reports the segment's largest timestamp (retention)",
    "verify.indexInsideBatch": "entry {entry} ({offset}, {filePosition}): offset inside the batch there (last offset "
                               "{lastOffset}); Kafka before 0.10.1 indexed the first offset of an append",
    "verify.timeIndexTimestampDiffers": "entry {entry} ({timestamp}, {offset}): the batch holding offset {offset} has "
                                        "max timestamp {maxTimestamp}",
    "verify.timeIndexNotAboveEarlier": "entry {entry} ({timestamp}, {offset}): an earlier batch already reached "
                                       "timestamp {earlierTimestamp}",
    "verify.notTrimmed": "not trimmed: {zeroSlots} zero slots after {entries} entries (preallocated file of an active "
                         "segment or of a broker that crashed)",
    "verify.controlRecord": "control record: {error}",
    "verify.recordOutsideBatch": "record offset {offset} outside the batch range [{baseOffset}, {lastOffset}]",
    "verify.recordOffsetBack": "record offset {offset} after {previousOffset}",
    "verify.innerOffsetBack": "inner message offset {offset} after {previousOffset}",
    "verify.recordsUndecodable": "records cannot be decoded: {error}",
    "verify.recordCount": "header says {declared} records, {decoded} decoded",
    "verify.maxTimestamp": "max timestamp {headerMaxTimestamp} in the header, {recordsMaxTimestamp} over the records",
    "verify.wrapperOffset": "wrapper offset {wrapperOffset} differs from the last inner offset {lastInnerOffset}",
    "verify.logTooLarge": "log file of {bytes} bytes exceeds {limit} bytes",
    "verify.unknownMagic": "unknown magic {magic}",
    "verify.crcTruncates": "CRC mismatch (stored 0x{storedCrc:08x}, computed 0x{computedCrc:08x}); recovery "
                           "truncates the segment here",
    "verify.negativeLastOffsetDelta": "negative last offset delta {lastOffsetDelta}",
    "verify.firstOffsetUnreadable": "cannot read the first offset: {error}",
    "verify.firstBelowBase": "first offset {firstOffset} is below the segment base offset {baseOffset}",
    "verify.overlapsPrevious": "first offset {firstOffset} overlaps the previous segment (next offset "
                               "{previousNextOffset})",
    "verify.offsetsNotIncreasing": "offsets do not increase: batch starting at {firstOffset} follows last offset "
                                   "{previousLastOffset}",
    "verify.offsetBeyondInt32": "last offset {lastOffset} does not fit the segment's int32 range from base offset "
                                "{baseOffset} (Kafka splits such segments)",
    "verify.corruptTruncates": "{reason}; recovery truncates the segment here",
    "verify.tailTruncates": "{stopReason}: {bytes} bytes after the last complete batch; recovery truncates them",
    "verify.emptySegment": "empty segment",
    # verify: the layout of data dirs and partition dirs (storage/log/datadir, partition_files)
    "layout.symlinkOutOfDataDir": "symlink leaving the data directory: not followed",
    "layout.notRegular": "not a regular file ({entry}): not read",
    "layout.tmpFile": "temporary file of an interrupted atomic write (Kafka ignores it)",
    "layout.unusedInDataDir": "file Kafka does not use in a data directory",
    "metadata.directoryIdReused": "directory.id {directoryId} also used by {other}",
    "metadata.clusterIdsDiffer": lambda f, x: f"data dirs disagree on cluster.id: {x['clusterIds']}",
    "metadata.nodeIdsDiffer": lambda f, x: f"data dirs disagree on the node id: {x['nodeIds']}",
    "layout.alsoLive": "{partition} is also live in {other}; Kafka refuses to start",
    "layout.metadataDirTwice": "{metadataDir} found in several data dirs",
    "layout.symlinkOutOfPartitionDir": "symlink leaving the partition directory: not followed",
    "layout.kafkaNameNotAFile": lambda f, x: (
        ("a directory" if x["directory"] else "not a regular file (a FIFO, socket or device)")
        + " with the name of a Kafka file: not read; the broker cannot load or write it (move it away)"),
    "layout.subdirectory": "unexpected sub-directory in a partition directory",
    "layout.special": "not a regular file (a FIFO, socket or device): not read",
    "layout.danglingSymlink": "dangling or looping symlink: not read",
    "layout.logNameNoOffset": "log file name does not start with an offset",
    "layout.negativeBaseOffset": "negative base offset {baseOffset}",
    "layout.baseOffsetTwice": "two log files with base offset {baseOffset}: {first}, {second}",
    "layout.snapshotNameNoOffset": "snapshot file name does not start with an offset",
    "layout.unusedInPartitionDir": "file Kafka does not use in a partition directory",
    "layout.orphanedIndex": "orphaned index file without a .log (Kafka deletes it at load)",
    # remote verify: a tiered-storage store against __remote_log_metadata (storage/remote/inspect)
    "remote.fileMissing": "the segment's {fileKind} file is missing (LocalTieredStorage writes it with every upload)",
    "remote.noBatch": "the remote segment holds no batch",
    "remote.endDiffers": "the segment ends at offset {endOffset}, __remote_log_metadata says {metadataEndOffset}",
    "remote.noMetadata": "no __remote_log_metadata partition in the data dirs: nothing to cross-check the store with",
    "remote.absent": "COPY_SEGMENT_FINISHED in __remote_log_metadata (offsets {startOffset}..{endOffset}) but absent "
                     "from the store",
    "remote.undeleted": "DELETE_SEGMENT_FINISHED in __remote_log_metadata but its files are still in the store",
    "remote.unreferenced": "no __remote_log_metadata record references this segment (an upload whose metadata was "
                           "lost, or another cluster's)",
    "remote.gap": "gap in the remote log of {topic}-{partition}: offsets {firstOffset}..{lastOffset} are in no remote "
                  "segment",
    "remote.localGap": "gap between the remote log (ends at {remoteEnd}) and the local log (first segment at "
                       "{localStart})",
    "remote.contiguous": "remote offsets {remoteStart}..{remoteEnd}, local log from {localStart}: contiguous",
    # offsets a partition's files remember beyond its log end (verify, doctor)
    "loss.remembered": lambda f, x: (f"offsets {x['logEndOffset']}..{x['lastMissing']} are gone: the log ends at "
                                     f"offset {x['logEndOffset']}, but "
                                     + "; ".join(map(describe_remembered, x["remembered"]))),
    # rehydrate (tiered storage back to local segments)
    "rehydrate.skipped": lambda f, x: (f"remote segment {x['startOffset']}-{x['segmentId']} skipped: " + (
        f"its metadata state is {x['state']}" if x["state"] else "no __remote_log_metadata record references it")),
    "rehydrate.indexesRebuilt": lambda f, x: ("indexes rebuilt (the remote ones failed verification or were "
                                              "absent) for the segments at " + ", ".join(map(str, x["baseOffsets"]))),
    # groups (the __consumer_offsets replay): {at} is "<partition>: " once the report knows the partition
    "groups.unknownRecordType": "{at}offset {offset}: unknown record type {recordType}, ignored",
    "groups.assignmentUndecodable": "{at}group {group}: member {member}: assignment not decodable",
    "groups.tornTail": "{parent}: {name}: {bytes} bytes at the end (from byte {position}) are not a complete batch "
                       "(a torn write): ignored, as the broker's recovery truncates them",
    # h9: a __consumer_offsets partition groups could not read to its end, a partition whose end offset it could
    # not read (GroupsReport.errors), and doctor's verdict line (Diagnosis.headline_note)
    "groups.crcMismatch": "{file}: byte {position}: batch at offset {offset} has a CRC mismatch: groups read up to it",
    "groups.recordUndecodable": "{file}: byte {position}: record at offset {offset}: {reason}: groups read up to it",
    "groups.unreadable": "{error}: groups read up to it",
    "groups.logEndOffsetUnreadable": "{file}: log end offset: {error}",
    "doctor.verdictHealthy": "HEALTHY",
    "doctor.verdictFatal": lambda f, x: (f"WILL NOT START: {x['brokerMessage']}"
                                          + (f" (and {x['more']} more)" if x["more"] else "")),
    "doctor.verdictRecovery": lambda f, x: _starts(x),
    # h3: a file's own checks (storage/files: validate(), problems()), one segment's indexes against its .log
    # (storage/log/segment_check) and a data dir's partition dirs (storage/log/datadir); the facts of an index
    # entry: its slot (entry) and fields (offset, filePosition, timestamp)
    "checkpoint.duplicate": "duplicate entry for {topic}-{partition}",
    "checkpoint.negativeOffset": "negative offset {offset} for {topic}-{partition}",
    "checkpoint.negativePartition": "negative partition {partition} for topic {topic}",
    "checkpoint.notCanonical": "not in the exact form Kafka writes (spacing, line ends or count line differ)",
    "epochCheckpoint.negative": "invalid entry {epoch} {startOffset}: negative epoch or start offset",
    "epochCheckpoint.notIncreasing": "entry {epoch} {startOffset} does not increase after {previousEpoch} "
                                     "{previousStartOffset}",
    "epochCheckpoint.notCanonical": "not in the exact form Kafka writes",
    "snapshot.trailingBytes": "{bytes} bytes after the last entry (ignored by Kafka)",
    "snapshot.producerTwice": "producer id {producerId} appears twice",
    "snapshot.negativeProducerId": "negative producer id {producerId}",
    "metaProperties.invalid": "{error}",
    "metaProperties.noClusterId": "v1 meta.properties without cluster.id",
    "metaProperties.directoryIdUnreadable": "unable to read directory.id as a Uuid: {error}",
    "metaProperties.directoryIdReserved": "directory.id {directoryId} is a reserved id",
    "cleanShutdown.notJson": "content is neither empty nor Kafka's JSON form; Kafka reads it as 'no broker epoch'",
    "quorumState.nullVoters": "currentVoters is null: ElectionState.fromQuorumStateData fails on it "
                              "(NullPointerException) and the broker does not start",
    "quorumState.negativeEpoch": "leaderEpoch {leaderEpoch} with a leader or a vote",
    "quorumState.epochBelowLog": "leaderEpoch {leaderEpoch} is below the last epoch {logEndEpoch} written in the "
                                 "metadata log: the broker starts unattached at that epoch (it logs a warning)",
    "index.length": "length {length} is not a multiple of {entrySize}",
    "index.negative": "entry {entry}: negative {field} {value}",
    "index.notIncreasing": "entry {entry}: {field} {value} does not increase (previous {previous})",
    "index.decreases": "entry {entry}: {field} {value} decreases (previous {previous})",
    "index.nonZeroPadding": "non-zero bytes after the last valid entry",
    "txnIndex.version": "entry {entry}: version field {version} (Kafka only checks its first byte)",
    "txnIndex.belowBase": "entry {entry}: last offset {lastOffset} below the segment base offset {baseOffset}",
    "txnIndex.firstAfterLast": "entry {entry}: first offset {firstOffset} after last offset {lastOffset}",
    "txnIndex.lastStableOutOfRange": "entry {entry}: last stable offset {lastStableOffset} out of range",
    "txnIndex.notIncreasing": "entry {entry}: last offset {lastOffset} does not increase (previous "
                              "{previousLastOffset})",
    "txnIndex.unreadable": "{error}",
    "txnIndex.partialEntry": "{bytes} trailing bytes (partial entry)",
    "verify.indexMissing": "missing: Kafka rebuilds it by recovering the segment",
    "verify.timeIndexMissing": "missing: Kafka creates it empty at load",
    "verify.indexSanityCheck": lambda f, x: (f"Kafka's sanity check fails: {x['error']}"
                                             + (" (zero padding of an untrimmed file)" if x["untrimmed"] else "")),
    "verify.txnIndexOversized": "{name}: {entries:,d} entries, more than the {bound:,d} batches a {bytes:,d}-byte "
                                "segment can hold (one entry per abort marker); not read further (`kafkalog repair` "
                                "rebuilds it from the log)",
    # why the loader recovers a segment and rebuilds its indexes (storage/files/segment.py's index checks);
    # {index}: the index file's name
    "segment.indexMissing": "missing .index",
    "segment.indexSanityCheck": "{index}: {error}",
    "segment.indexPadding": "{index}: non-zero bytes after the last entry",
    "segment.txnIndexOversized": "{index}: {entries:,d} entries, more than the {bound:,d} batches a {bytes:,d}-byte "
                                 "segment can hold (one entry per abort marker)",
    "verify.txnIndexSanityCheck": "Kafka's sanity check fails (the segment is recovered at load): {error}",
    "verify.txnIndexNoMarker": "entry {entry}: no transaction marker at offset {lastOffset} in the segment",
    "verify.indexNoBatchEnds": "entry {entry} ({offset}, {filePosition}): no batch from position {filePosition} up "
                               "to the next entry ends at offset {offset}",
    "verify.indexNotBatchStart": "entry {entry} ({offset}, {filePosition}): position is not the start of a batch",
    "verify.indexOffsetNotAbove": "entry {entry} ({offset}, {filePosition}): offset not above the previous batch's "
                                  "last offset {previousLastOffset}: lookups would start too late",
    "verify.indexBeyondLog": "entry {entry} ({offset}, {filePosition}): position beyond the end of the log",
    "verify.indexNotAtBatchStart": "entry {entry} ({offset}, {filePosition}): position not at a batch start",
    "verify.timeIndexBeyondLastBatch": "entry {entry} ({timestamp}, {offset}): offset beyond the last batch",
    "layout.notPartitionDir": "{dirName!r} is not in the form of topic-partition or topic-partition.uniqueId-delete "
                              "(if marked for deletion); Kafka refuses to load this data directory",
    # reindex: the error verify reports for a segment's index file, the reason it rebuilds the segment's indexes
    "reindex.indexProblem": lambda f, x: (f"{Path(x['finding']['file']).name}: {_problem(x['finding'])}: rebuilt "
                                          f"from {x['log']} by the broker's recovery rule"),
    "reindex.recoveryRule": "rebuilt from {log} by the broker's recovery rule",
    # a partition a plan cannot plan (PartitionPlan.error; the whole plan is refused): an exception met while
    # planning (its words stay its own), a segment reindex leaves to repair, a round the broker would refuse
    "plan.failed": lambda f, x: _located(x),
    "plan.osError": _os_error,
    "reindex.mustSplit": "{error}: the segment must be split (KAFKA-6264); run repair",
    "reindex.invalidBytes": lambda f, x: (f"{x['segment']}: invalid bytes from position {x['validBytes']} "
                                          f"({_cause(x, x['validBytes'])}): indexes are not rebuilt over them; run "
                                          "repair"),
    "compact.uncleanable": lambda f, x: f"the broker would mark this partition uncleanable: {_located(x)}",
    # h8: verify's own checks of a partition dir and a data dir (storage/reports/verify), the files given to
    # verify or dump alone, and an index dump's entries against its companion .log (storage/reports/dump/indexes)
    "verify.noSegments": "no segments: Kafka creates an empty one at the log start offset",
    "verify.leftover": lambda f, x: _LEFTOVERS[x["suffix"]],
    "verify.epochCheckpointMissing": "missing (Kafka recreates it from the log)",
    "verify.metadataNotCanonical": "not in the exact form Kafka writes",
    "verify.noTopicId": "missing: no topic id (a KRaft broker treats such a replica as stray)",
    "verify.quorumStateMissing": "missing: the raft client starts unattached and writes it",
    "verify.metaPropertiesMissing": "missing",
    "verify.metaPropertiesNotCanonical": "not in the exact form Properties.store writes",
    "verify.checkpointMissing": "missing",
    "verify.cannotOpen": "cannot open: {error}",
    "verify.unknownFileKind": "not a file kind Kafka keeps in a data dir: not checked",
    "file.noSuchFile": "no such file",
    "dump.companionMissing": "the companion log file {log} does not exist",
    "dump.companionUnreadable": "the companion log file {log} cannot be read: {error}",
    "dump.entryBeyondLog": "entry {entry} ({offset}, {filePosition}): position is beyond the end of {log} "
                           "({logBytes} bytes)",
    "dump.entryCorrupt": "entry {entry} ({offset}, {filePosition}): {error} at position {errorPosition} of {log}",
    "dump.entryNoBatch": "entry {entry} ({offset}, {filePosition}): no complete batch within {maxMessageSize} bytes "
                         "(--max-message-size) at position {filePosition} of {log}",
    "dump.timeEntryCorrupt": "entry {entry} ({timestamp}, {offset}): {error} at position {errorPosition} of {log}",
    "dump.timeEntryUndecodable": "entry {entry} ({timestamp}, {offset}): the batch at position {batchPosition} cannot "
                                 "be decoded: {error}",
    # the start-up gate (storage/reports/startup_gate): what is wrong, beside the broker's own message
    "startup.noMetaProperties": "no data dir has a readable meta.properties",
    "startup.noClusterId": "v1 meta.properties without cluster.id",
    "startup.clusterIdDiffers": "cluster.id {clusterId} differs from {expected} in another data dir",
    "startup.noNodeId": "v1 meta.properties without node.id",
    "startup.nodeIdDiffers": "node.id {nodeId} differs from {expected}",
    "startup.directoryIdReserved": "directory.id {directoryId} is one of the 100 ids Kafka reserves",
    "startup.directoryIdTwice": "directory.id {directoryId} also used by {other}",
    "startup.metadataDirOutside": "{metadataDir} outside the metadata dir {metadataLogDir} (the first of log.dirs)",
    "startup.notFormatted": "missing: the dir is not formatted",
    "startup.alsoLive": "{partition} is also live in {otherDir}",
    # why a plan removes records (a Loss's note) and why it runs an operation (an Op's why): the loader (repair,
    # doctor), the swap recovery, producer snapshots and leader epochs, the cleaner, rehydrate
    "loss.truncatedAt": lambda f, x: f"{_cause(x, x['position'])} (the broker truncates the log at byte {x['position']})",
    "loss.afterInvalidByte": "a segment after the first invalid byte of segment {baseOffset}: the broker deletes "
                             "every later segment when it truncates the log",
    "loss.endBelowStart": "the log end offset {logEndOffset} is below the checkpointed log start offset "
                          "{logStartOffset}: the broker deletes every segment",
    "loss.compaction": "compaction: records superseded by a later record with the same key, tombstones and "
                       "transaction markers older than delete.retention.ms, and records of aborted transactions",
    "loss.remoteDeleted": "remote segment {segmentId} is {state} in __remote_log_metadata: deleted by retention, "
                          "cannot be recovered",
    "op.orphanIndex": "an index file without its .log: the broker deletes it at load",
    "op.missingTimeIndex": "missing .timeindex: the broker creates it empty at load",
    "op.invalidBytes": lambda f, x: f"first invalid byte at {x['validBytes']}: {_cause(x, x['validBytes'])}",
    "op.recoveredIndex": "rebuilt by the broker's segment recovery of {baseOffset:020d}.log",
    "op.recoveredSnapshot": "producer state after recovering segment {baseOffset}, as the broker snapshots it",
    "op.emptyActiveSegment": "an empty active segment at the log start offset, as the broker creates it for an empty "
                             "log",
    "op.epochsTruncated": "leader epochs truncated to the log [{logStartOffset}, {logEndOffset}), as the broker does "
                          "at load",
    "op.activeIndexesTrimmed": "trimmed to its entries, as the broker closes the active segment",
    "op.deletedFile": "a file the broker had scheduled for deletion (.deleted): it deletes it at load",
    "op.swapRolledBack": "part of an interrupted segment replacement that had not completed (a .cleaned file of the "
                         "same or an earlier segment remains): the broker rolls it back",
    "op.cleanedDeleted": "a new segment of an interrupted cleaning or conversion that never replaced the old one: "
                         "the broker deletes it (the original is intact)",
    "op.swapReplaced": "replaced by the completed swap of offsets {firstOffset}..{lastOffset}: the broker deletes "
                       "the old file when it completes the interrupted replacement",
    "op.swapCompleted": "complete an interrupted segment replacement (the .swap file is durable and whole)",
    "op.straySnapshot": "a stray producer snapshot (no segment starts at its offset): the broker removes it at load",
    "op.snapshotBelowLastSegment": "a stray producer snapshot below the last segment: the broker removes it at load",
    "op.snapshotUnreadable": "unreadable producer snapshot ({error}): the broker deletes it and uses an older one",
    "op.snapshotAboveEnd": "producer snapshot above the log end offset {logEndOffset}",
    "op.snapshotAtOrBelowStart": "producer snapshot at or below the log start offset {logStartOffset}",
    "op.producerSnapshot": "producer state at offset {offset}",
    "op.cleanShutdownSnapshot": "producer snapshot the broker takes at load after a clean shutdown",
    "op.rebuildSnapshot": "producer snapshot at a segment base offset, as the broker's rebuild takes it",
    "op.endSnapshot": "producer state at the log end offset {offset}",
    "op.leaderEpochs": "leader epochs as the broker writes them",
    "op.rehydratedCheckpoint": "the rehydrated partitions' entries (log start offset = the first remote segment's; "
                               "recovery point and high watermark = the log end of a partition rebuilt from the store "
                               "alone)",
    "op.rehydratedPartition": lambda f, x: (f"{x['remoteSegments']} remote segment(s) of {x['store']}" + (
        f" before the {x['localSegments']} local one(s)" if x["localSegments"] else "")),
    # transactions: why an open transaction is open, hanging or unknown ({topic}-{partition} its partition)
    "transactions.open": lambda f, x: (
        f"transactional id {x['transactionalId']!r} is {x['state']} with {x['topic']}-{x['partition']}: the "
        "coordinator will write its marker" + (" (commit)" if x["state"] == "PrepareCommit" else " (abort)"
                                               if x["state"] == "PrepareAbort" else
                                               f" or abort it after its timeout ({x['timeoutMs']} ms)")),
    "transactions.notListed": "transactional id {transactionalId!r} ({coordinatorPartition}) is {state} and does not "
                              "list {topic}-{partition}: no marker will ever be written",
    "transactions.noTransactionalId": "no transactional id has producer id {producerId} in __transaction_state: no "
                                      "marker will ever be written",
    "transactions.unknown": lambda f, x: (
        f"producer id {x['producerId']} is not in the __transaction_state partitions of these dirs"
        + (" (some are missing: pass every broker's data dirs)" if x["someFound"] else
           " (none found: pass the dirs holding them)")),
    # transactions: a partition it cannot read (the error where it is, and what repair would do about it)
    "transactions.partitionUnreadable": lambda f, x: (
        f"{_located(x)} (the broker's recovery truncates a corrupt log: `kafkalog repair --dry-run {x['dataDir']}` "
        "shows what it would keep)"),
    "transactions.partitionOsError": _os_error,
    # diff: what differs between A and B ({file} the relative path; side "a" or "b")
    "diff.fileOnlyIn": lambda f, x: f"{f} exists only in {x['side'].upper()}",
    "diff.partitionOnlyIn": lambda f, x: f"partition {f} exists only in {x['side'].upper()}",
    "diff.fileDiffers": "{file} differs from byte {position} (sizes {sizeA} and {sizeB})",
    "diff.filesDiffer": "files differ from byte {position}",
    "diff.batch": lambda f, x: (
        f"first differing batch at offset {x['offset']}: A {_batch(x['a'])} vs B {_batch(x['b'])}; differs in "
        + ", ".join(x["fields"])),
    "diff.batchOnlyIn": lambda f, x: f"batch {x['baseOffset']}..{x['lastOffset']} only in {x['side'].upper()}",
    "diff.moreBatchesOnlyIn": lambda f, x: f"... and {x['batches']} more batches only in {x['side'].upper()}",
    "diff.record": lambda f, x: (f"first differing record at offset {x['offset']}: {', '.join(x['fields'])} differ"
                                 + (f" ({x['records']} differing records in all)" if x["records"] > 1 else "")),
    "diff.offsetsOnlyIn": lambda f, x: (
        f"{x['offsets']} offsets only in {x['side'].upper()}: "
        + ", ".join(f"{a}" if a == b else f"{a}..{b}" for a, b in x["ranges"])
        + (f" (+{x['dropped']} more)" if x["dropped"] else "")),
    # why retention removes records (a Loss's note) and runs an operation (an Op's why) (h7); a loss's timestamps
    # and sizes (its ``times``/``sizes``) are words of tools/plan_output: ISO or epoch ms, KiB... or bytes
    "loss.belowLogStart": _BELOW_LOG_START,
    "loss.retentionBytes": "the log holds {logSize}; the oldest segments go until it is within the limit",
    "loss.retentionMs": "its largest timestamp {largestTimestamp} is more than retention.ms before now {now}",
    "op.retentionDeleted": "segment {baseOffset} deleted by retention: {setting[name]}={setting[value]} "
                           "({setting[source]})",
    "op.belowLogStartDeleted": "segment {baseOffset} deleted by retention: " + _BELOW_LOG_START,
    "op.rollSnapshot": "the producer snapshot the broker takes when it rolls a new segment at {offset}",
    "op.rollEmptySegment": "every segment goes: the broker first rolls a new empty active segment at the log end "
                           "offset {logEndOffset}",
    "op.deletedSegmentSnapshot": "the producer snapshot of deleted segment {baseOffset}",
    "op.deletedFileRemoved": "the broker removes .deleted files once no reader uses them (file.delete.delay.ms)",
    "op.epochsFromStart": "the first leader epoch moves to the new log start offset {logStartOffset} "
                          "(LeaderEpochFileCache.truncateFromStart)",
    "op.retainedLogStarts": "the log start offsets after retention",
    "op.recoveryPointsRaised": "recovery points raised to the new log start offsets",
    # the ops of compact, flush and repair (h7)
    "op.compactRound": "one cleaning round from the clean point {cleanPoint}, as the broker's log cleaner runs it",
    "op.cleanPoints": "the new clean points (the first dirty offset of each compacted partition)",
    "op.syncAboveRecoveryPoint": "make durable what lies above the recovery point {recoveryPoint}",
    "op.syncUnflushed": "make durable what the broker wrote after its last flush",
    "op.flushedRecoveryPoints": "each partition's recovery point: its log end offset once verified and flushed",
    "op.cleanShutdownRecoveryPoints": "the checkpoint a clean shutdown writes: every partition flushed to its log "
                                      "end offset",
    "op.cleanShutdownLogStarts": "the log start offsets above each partition's first segment, as a clean shutdown "
                                 "writes them",
    "op.cleanShutdownMarker": "the clean shutdown marker: the broker will load the dir without recovery",
    "op.markerRemoved": "some partitions did not verify: a marker would make the broker skip the recovery of data "
                        "that did not verify",
    "op.partitionMetadataRewritten": lambda f, x: (
        f"unreadable ({x['error']}): rewritten with topic id {x['topicId']} from "
        + ("--topic-id" if x["fromOption"] else f"the topic id in {x['metadataDir']}")
        + "; the broker would stop at startup on it (fatal: Error starting LogManager)"),
    # the ops of migrate, checkpoints --set, topic-id --set, convert, append and the loader's split (h7)
    "op.newDataDir": "a new destination data dir",
    "op.newMetaProperties": "meta.properties of a new data dir (v1, KRaft) for --cluster-id/--node-id",
    "op.partitionCopy": lambda f, x: f"copy of {x['source']}" + (" (replacing the existing partition)"
                                                                 if x["replaces"] else ""),
    "op.migratedCheckpoints": "the migrated partitions' entries (recovery point = log end offset, log start, high "
                              "watermark, clean point)",
    "op.checkpointsSet": "entries set by `kafkalog checkpoints --set`",
    "op.topicIdSet": lambda f, x: (
        "topic id " + (str(x["oldTopicId"]) if x["unreadable"] is None else f"unreadable ({x['unreadable']})")
        + f" -> {x['topicId']} (`kafkalog topic-id --set`)"),
    "op.newPartitionEpochs": "a new partition's leader epochs",
    "op.convertSegment": lambda f, x: (
        f"rewrite {x['batches']} batch(es) ({x['bytes']:,d} bytes) as v{x['magic']}"
        + (f", codec {x['codec']}" if x["codec"] is not None else "")
        + ", with offsets, base offset, producer snapshots and leader epochs unchanged"),
    "op.convertNow": "convert",
    "op.splitOverflow": "offsets {firstOverflow}+ past the base offset do not fit segment {baseOffset} (KAFKA-6264): "
                        "the broker splits it into segments that fit, byte for byte, and loads again",
}


def render(finding: Finding) -> str:
    """The sentence of a note or finding: its kind's template over its facts, or its own ``message``."""
    text = _words(finding)
    if finding.facts.get("bootstrap"):  # a finding about bootstrap.checkpoint
        text += " (the bootstrap metadata every KRaft node reads at start-up, without checking CRCs)"
    return text


def _words(finding: Finding) -> str:
    template = TEMPLATES.get(finding.code or finding.kind)
    if template is None or finding.message:
        return finding.message
    if isinstance(template, str):
        path = Path(finding.file)
        return template.format(file=finding.file, name=path.name, parent=path.parent.name, at=_at(finding.file),
                               **finding.facts)
    return template(finding.file, finding.facts)


def to_json(finding: Finding) -> dict[str, Any]:
    """A note for ``--json``: its fields (``kind``, ``file``, ``facts``...) and ``message``, its rendered words."""
    return finding.to_dict() | {"message": render(finding), "facts": dict(finding.facts)}


def line(finding: Finding) -> str:
    """``severity: file[@position]: [kind] words``: a finding on one line."""
    where = finding.file if finding.position is None else f"{finding.file}@{finding.position}"
    return f"{finding.severity}: {where}: [{finding.kind}] {render(finding)}"


def finding_json(finding: Finding) -> dict[str, Any]:
    """A finding for ``--json`` (verify, remote verify, spark verify): its fields, ``message`` its words."""
    return finding.to_dict() | {"message": render(finding)}


def render_all(findings: list[Finding]) -> list[str]:
    return [render(f) for f in findings]


__all__ = ["TEMPLATES", "describe_remembered", "finding_json", "line", "render", "render_all", "to_json"]
