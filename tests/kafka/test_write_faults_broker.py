"""A real Kafka 4.3.1 broker starts on a data dir whose mutating command failed part-way (issue 17: "after each,
the dir loads in kafkalog and in a real broker"), with no repair in between, and serves exactly the records of
the state before the command or of the state its plan promised.

The storage-level campaigns (``tests/reliability/test_write_faults*.py``, ``tests/storage/test_apply_crash.py``)
check every injection point with kafkalog's own loader; here a sample of them meets the broker. For each
mutating command (``repair``, ``reindex``, ``flush``, ``retain``, ``compact``, ``convert``, ``migrate``,
``import``, ``append``, ``checkpoints --set``, ``topic-id --set``), on a copy of the real 4.3.1 fixture, a fault
(``ENOSPC`` or ``EIO`` raised at the k-th file mutation through the I/O seam, or a kill: ``os._exit`` in a
separate process, as SIGKILL) hits a step in the middle of its run; a broker is started on the result (retention
and the cleaner off, so it changes nothing itself) and every topic is read to its high watermark.

Per partition the broker serves exactly the before-state or the promised after-state (``repair``, ``retain``,
``compact`` and a killed ``append`` may also stop between them, as a broker itself can: segments dropped oldest
first, a cleaning round swapped group by group, whole batches appended in order:
``after <= served <= before``, or ``before <= served <= after`` for ``append``).

``import``, ``migrate`` and ``topic-id --set`` run in the forms a broker can load (``damage.prepare_for``): a
partition the KRaft metadata knows is imported or migrated back into a dir that lacks it (before: the broker
creates it empty), and the topic id the metadata holds is written into partitions that lost their
``partition.metadata`` (before: the broker serves nothing of them, it renames them ``-stray``, as
``kafkalog doctor`` predicts; a torn ``partition.metadata`` would stop the broker's load).

CI runs one fault kind per command (the kinds rotate over the commands: 11 broker starts); every fault kind at
two points per command is ``pytest -m campaign`` (66 broker starts).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from damage import (
    count_mutations,
    damaged_copy,
    prepare_for,
    records,
    repair_dir,
    run_for,
    run_with_fault,
)

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]

FIXTURE = "kafka-4.3.1-kraft"
QUIET = {"log.retention.ms": "-1", "log.retention.bytes": "-1", "log.cleaner.enable": "false",
         "log.retention.check.interval.ms": "3600000"}
#: command (as :func:`damage.run_for` names it) -> the damages it meets
COMMANDS = {
    "repair": ("unclean", "torn_tail", "missing_index", "leftovers"),
    "reindex": ("missing_index",),
    "flush": ("unclean",),
    "retain": (),
    "compact": (),
    "convert": (),
    "migrate-in": (),
    "import": (),
    "append": (),
    "checkpoints": (),
    "topic-id-restore": (),
}
FAULTS = ("ENOSPC", "EIO", "kill")
#: may stop between the before- and after-states, as the broker itself can
BETWEEN = {"repair", "retain", "compact"}


def _served(bootstrap: str, topics: list[str], timeout: float = 90) -> dict[str, set[tuple]]:
    """Every record of ``topics`` up to each partition's high watermark: ``{"topic-p": {(offset, value)}}``."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkalog-faults", "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": "read_uncommitted",
                  "auto.offset.reset": "error"})
    try:
        deadline = time.monotonic() + timeout
        while True:  # right after the start the metadata may not list every partition with a leader yet
            md = c.list_topics(timeout=10)
            parts = {t: sorted(md.topics[t].partitions) for t in topics if t in md.topics}
            leaders = all(md.topics[t].partitions[p].leader >= 0 for t, ps in parts.items() for p in ps)
            if len(parts) == len(topics) and all(parts.values()) and leaders:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"the broker lists {sorted(parts)} of {topics}")
            time.sleep(0.3)
        tps = [TopicPartition(t, p, OFFSET_BEGINNING) for t, ps in parts.items() for p in ps]
        c.assign(tps)
        out: dict[str, set[tuple]] = {f"{tp.topic}-{tp.partition}": set() for tp in tps}
        at_end: set[str] = set()
        while len(at_end) < len(tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"reading stalled: {sorted(set(out) - at_end)} never reached their end")
            m = c.poll(1.0)
            if m is None:
                continue
            name = f"{m.topic()}-{m.partition()}"
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(name)
                    continue
                raise AssertionError(f"{name}: {m.error()}")
            out[name].add((m.offset(), m.value()))
        return out
    finally:
        c.close()


def _values(recs: dict[str, set[tuple]]) -> dict[str, set[tuple]]:
    return {n: {(o, v) for o, _k, v in rs} for n, rs in recs.items() if not n.startswith("__")}


def _states(tmp_path: Path, command: str) -> tuple[Path, dict, dict, int]:
    """The before-state dir ``base`` (prepared and damaged), the records before and after, the step count."""
    base = tmp_path / "base"
    damaged_copy(FIXTURE, base, COMMANDS[command])
    prepare_for(command, base)
    before_dir, after_dir = tmp_path / "before", tmp_path / "after"
    shutil.copytree(base, before_dir)
    shutil.copytree(base, after_dir)
    repair_dir(before_dir)
    steps = count_mutations(lambda: run_for(command, after_dir))
    assert steps > 0, f"{command} changed nothing"
    repair_dir(after_dir)
    before, after = _values(records(before_dir)), _values(records(after_dir))
    if command == "topic-id-restore":  # without a topic id a KRaft broker renames the replica -stray, unserved
        before.update({n: set() for n in before if n.startswith("multi-segment-")})  # (as `doctor` predicts)
    if command in ("retain", "compact", "import", "migrate-in", "append"):
        assert before != after, f"{command}: the promised state holds the same records"
    return base, before, after, steps


def _check(command: str, fault: str, where: str, served: dict, before: dict, after: dict) -> tuple[int, int]:
    """The promise, per partition; returns (partitions exactly in the before-state, in the after-state)."""
    assert served, f"{where}: the broker served nothing"
    at_before = at_after = 0
    for name in sorted(set(before) | set(after)):
        got, b, a = served.get(name, set()), before.get(name, set()), after.get(name, set())
        at_before += got == b
        at_after += got == a
        if got in (b, a):
            continue
        if command in BETWEEN:
            assert a <= got <= b, f"{where}: {name} served records outside the before/after states"
        elif command == "append" and fault == "kill":
            added = sorted(got - b)
            assert b <= got <= a and added == sorted(a - b)[:len(added)], \
                f"{where}: {name} is not its records plus a prefix of the appended batches"
        else:
            raise AssertionError(f"{where}: {name} serves {len(got)} records: neither the {len(b)} before nor the "
                                 f"{len(a)} promised")
    return at_before, at_after


def _run(tmp_path: Path, broker_factory, command: str, faults: tuple[str, ...], points: int) -> list[str]:
    base, before, after, steps = _states(tmp_path, command)
    # ``points`` steps spread over the run; a command with no more steps than that: every one of them
    ks = (list(range(1, steps + 1)) if steps <= points
          else sorted({max(1, round(steps * (i + 1) / (points + 1))) for i in range(points)}))
    topics = sorted({n.rsplit("-", 1)[0] for n in set(before) | set(after)})
    lines = []
    for fault in faults:
        for k in ks:
            d = tmp_path / f"{fault}-{k}" / "data"
            d.parent.mkdir()
            for extra in ("import-rows.jsonl", "migrate-src", "topic-id.txt"):
                src = base.parent / extra
                if src.is_dir():
                    shutil.copytree(src, d.parent / extra)
                elif src.exists():
                    shutil.copy(src, d.parent / extra)
            shutil.copytree(base, d)
            where = f"{command}, {fault} at step {k}/{steps}"
            what = run_with_fault(command, d, k, fault)
            broker = broker_factory("4.3.1", data_dir=d, server_properties=QUIET)
            try:
                served = _values({n: {(o, None, v) for o, v in rs} for n, rs in
                                  _served(broker.bootstrap_servers, topics).items()})
            finally:
                broker.stop()
            nb, na = _check(command, fault, where, served, before, after)
            lines.append(f"{where} ({what}): broker served {len(served)} partitions, {nb} as before, {na} as "
                         "promised, none outside")
            shutil.rmtree(d.parent)
    for line in lines:
        print(line)
    return lines


CI_FAULT = {c: FAULTS[i % len(FAULTS)] for i, c in enumerate(sorted(COMMANDS))}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_broker_loads_a_dir_after_a_fault(tmp_path: Path, broker_factory, command: str) -> None:
    assert len(_run(tmp_path, broker_factory, command, (CI_FAULT[command],), 1)) == 1


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_broker_loads_a_dir_after_every_fault_kind(tmp_path: Path, broker_factory, command: str) -> None:
    assert len(_run(tmp_path, broker_factory, command, FAULTS, 2)) == 2 * len(FAULTS)  # (every command: >= 2 steps)
