"""The corpus of non-conformant writers: kafkalog's own writer (``tests/builders.certify_partition``) made wrong
in 12 ways Kafka cares about (``tests/damage.CERTIFY_DAMAGES``), each in its own topic, certified against a real
Kafka 4.3.1. ``certify`` must catch each one and explain it (what Kafka did, what the files imply, the Kafka
rule), and must report nothing for the untouched ``clean`` partition beside them.

To keep CI short, the classes the broker loads go into ONE data dir (one broker start for all of them, results
per partition); the class that stops the broker loading the whole dir (``partition.metadata`` without a topic
id) gets a second dir."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from builders import certify_data_dir
from damage import CERTIFY_DAMAGES, tree

from kafkalog.compat.certify import CertifyReport, Divergence, certify

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]

LOADED = [n for n, (_, _, fatal) in CERTIFY_DAMAGES.items() if not fatal]
FATAL = [n for n, (_, _, fatal) in CERTIFY_DAMAGES.items() if fatal]
OPEN_TXN = [n for n, (_, opened, _) in CERTIFY_DAMAGES.items() if opened]


@pytest.fixture(scope="module")
def certified(tmp_path_factory, kafka_libs) -> tuple[CertifyReport, dict[str, str]]:
    root = tmp_path_factory.mktemp("corpus")
    dirs = [certify_data_dir(root / "loaded", [*LOADED, "clean"], open_txn=OPEN_TXN)]
    dirs += [certify_data_dir(root / f"fatal-{i}", [n, "clean"]) for i, n in enumerate(FATAL)]
    done = {}
    for d in dirs:
        for name in CERTIFY_DAMAGES:
            if (d / f"{name}-0").is_dir():
                done[name] = CERTIFY_DAMAGES[name][0](d / f"{name}-0")
    before = [tree(d) for d in dirs]
    report = certify(dirs, kafka="4.3.1", workdir=root / "work")
    assert [tree(d) for d in dirs] == before, "certify wrote an original"
    return report, done


def _of(report: CertifyReport, name: str) -> list[Divergence]:
    return [x for x in report.divergences if x.partition == f"{name}-0"]


def _kinds(xs: list[Divergence]) -> set[str]:
    return {x.kind for x in xs}


def _has(xs: list[Divergence], kind: str, words: str, **fields) -> Divergence:
    found = [x for x in xs if x.kind == kind and (words in x.kafka or words in x.files)
             and all(getattr(x, k) == v for k, v in fields.items())]
    assert found, f"no {kind} divergence with {words!r} {fields} in:\n" + "\n".join(map(str, xs))
    return found[0]


def _index_entry_misplaced(xs):
    # Kafka's own tool: the entry for offset 11 points at the batch ending at 19
    assert "(11, 19)" in _has(xs, "dump", "--verify-index-only: entries").kafka
    x = _has(xs, "verify", "lookups would start too late")
    assert x.file.endswith("00000000000000000000.index") and "[index]" in x.files


def _timeindex_not_monotonic(xs):
    assert "(1699999940110, 1700000000110)" in _has(xs, "dump", "time index timestamps that go back").kafka
    x = _has(xs, "verify", "does not increase")
    assert x.file.endswith(".timeindex")


def _segment_misnamed(xs):
    # the indexes' relative offsets are read from the wrong base: Kafka's tool finds entries off by 2
    assert "(34, 32)" in _has(xs, "dump", "--verify-index-only: entries").kafka
    _has(xs, "verify", "first offset 24 is below the segment base offset 26")


def _offsets_go_back(xs):
    for client in ("kafka-python", "confluent"):  # both clients see offset 40 twice
        x = _has(xs, "serve", "received offset 40 again after offset 41", client=client, isolation="read_uncommitted")
        assert x.first_offset == 40 and "UnifiedLog.read" in x.rule
    assert "(41, 39)" in _has(xs, "dump", "offsets that go back").kafka
    _has(xs, "verify", "batch starting at 39 follows last offset 41")


def _producer_snapshot_missing(xs):
    # a clean shutdown without snapshots: Kafka writes empty ones instead of replaying the log, and forgets the
    # open transaction: read_committed consumers get its records
    assert any(x.kind == "load" and "Wrote producer snapshot" in x.kafka and "0 producer ids" in x.kafka for x in xs)
    x = _has(xs, "transaction", "knows no open transaction")
    assert x.first_offset == 67 and "producer 11" in x.files and "lastStableOffset" in x.rule
    for client in ("kafka-python", "confluent"):
        x = _has(xs, "serve", "served 2 record(s) at offsets 67..68", client=client, isolation="read_committed")
        assert "aborted or past the last stable offset" in x.files


def _control_payload_malformed(xs):
    x = _has(xs, "dump", "Invalid version found for end transaction marker")
    assert "DumpLogSegments" in x.rule
    _has(xs, "verify", "invalid end transaction marker version")


def _leader_epoch_ahead(xs):
    x = _has(xs, "load", "dropped leader epoch entries")
    assert x.first_offset == 117 and "truncateFromEnd" in x.rule and x.file.endswith("leader-epoch-checkpoint")
    _has(xs, "verify", "leader-epoch-checkpoint starts epoch 5 at offset 117")


def _crc_closed_segment(xs):
    corrupt = [x for x in xs if x.kind == "corrupt"]
    assert {(x.client, x.isolation) for x in corrupt} == {(c, i) for c in ("kafka-python", "confluent")
                                                          for i in ("read_uncommitted", "read_committed")}
    for x in corrupt:  # the broker served the batch; each client's own check failed at its offset
        assert x.first_offset == 4 and x.position == 295 and x.file.endswith("00000000000000000000.log")
        assert "stopped with" in x.kafka and ("crc" in x.kafka.lower()) and "ensureValid" in x.rule
    _has(xs, "verify", "the broker will NOT truncate this at startup")


def _partition_metadata_no_topic_id(xs):
    x = _has(xs, "refused", "did not start on the copy")
    assert "NullPointerException" in x.kafka and "PartitionMetadataFile" in x.rule and "repair" in x.command
    _has(xs, "verify", "missing topic_id line")


def _wrong_last_offset_delta(xs):
    # the index entry written for the batch's true last offset (11) now finds a batch ending at 12
    assert "(11, 12)" in _has(xs, "dump", "--verify-index-only: entries").kafka
    _has(xs, "verify", "batch starting at 12 follows last offset 12")


def _log_start_past_end(xs):
    x = _has(xs, "load", "Deleting all segments because logEndOffset (67) is smaller than logStartOffset 167")
    assert x.command == "kafkalog repair"
    _has(xs, "verify", "log-start-offset-checkpoint says 167, above the log end offset 67")


def _unterminated_transaction(xs):
    x = _has(xs, "transaction", "last stable offset 67 below the high watermark 69")
    assert x.first_offset == 67 and x.last_offset == 68 and "kafkalog transactions" in x.command


CHECKS: dict[str, Callable[[list[Divergence]], None]] = {
    "index-entry-misplaced": _index_entry_misplaced,
    "timeindex-not-monotonic": _timeindex_not_monotonic,
    "segment-misnamed": _segment_misnamed,
    "offsets-go-back": _offsets_go_back,
    "producer-snapshot-missing": _producer_snapshot_missing,
    "control-payload-malformed": _control_payload_malformed,
    "leader-epoch-ahead": _leader_epoch_ahead,
    "crc-closed-segment": _crc_closed_segment,
    "partition-metadata-no-topic-id": _partition_metadata_no_topic_id,
    "wrong-last-offset-delta": _wrong_last_offset_delta,
    "log-start-past-end": _log_start_past_end,
    "unterminated-transaction": _unterminated_transaction,
}


def test_the_corpus_has_twelve_distinct_classes():
    assert set(CHECKS) == set(CERTIFY_DAMAGES) and len(CHECKS) >= 12


@pytest.mark.parametrize("name", list(CERTIFY_DAMAGES))
def test_certify_catches_and_explains(certified, name: str):
    report, done = certified
    assert name in done
    xs = _of(report, name)
    assert xs, f"{name} ({done[name]}): certify found nothing"
    for x in xs:  # every divergence is explained: what Kafka did, what the files imply, the rule
        assert x.kafka and x.files and x.rule, x
        assert x.first_offset is not None or x.file is not None or x.kind in ("refused", "load"), x
        assert x.partition == f"{name}-0"
    CHECKS[name](xs)
    d = next(d for d in report.dirs if any(p.partition == f"{name}-0" for p in d.partitions) or
             (Path(d.path) / f"{name}-0").is_dir())
    assert not d.conformant


def test_the_clean_partition_beside_them_is_conformant(certified):
    report, _ = certified
    loaded = report.dirs[0]
    assert loaded.started and len(loaded.partitions) == len(LOADED) + 1
    assert not _of(report, "clean") or all(x.kind == "refused" for x in _of(report, "clean"))
    clean = next(p for p in loaded.partitions if p.partition == "clean-0")
    assert len(clean.served) == 4 and all(c.served == c.expected for c in clean.served)
    assert {c.isolation: c.expected for c in clean.served} == {"read_uncommitted": 65, "read_committed": 61}
