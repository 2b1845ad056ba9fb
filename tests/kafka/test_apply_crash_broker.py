"""A real broker starts on a data dir whose apply was killed part-way, and serves nothing outside the before and
after states (the storage-level campaign, ``tests/storage/test_apply_crash.py``, checks every kill point with
kafkalog's own loader; here a sample of them meets Kafka 4.3.1's).

For each command, the apply on a copy of the real 4.3.1 fixture is killed (``os._exit`` inside the library's
I/O seam, as SIGKILL) before a mutation in the middle of its run; a broker is started on the result, with
retention and the cleaner off so that it changes nothing itself, and every topic is consumed. Per partition the
records served must lie between the state after a complete apply and the state before it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from damage import NOW, count_mutations, damaged_copy, killed_at, plan_for, records, roll_active

from kafkalog.compat.clients import consume
from kafkalog.storage.engine.plan import apply
from kafkalog.storage.engine.repair import plan_repair

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

FIXTURE = "kafka-4.3.1-kraft"
QUIET = {"log.retention.ms": "-1", "log.retention.bytes": "-1", "log.cleaner.enable": "false",
         "log.retention.check.interval.ms": "3600000"}
COMMANDS = {  # command -> the damages it meets
    "repair": ("unclean", "torn_tail", "missing_index", "leftovers"),
    "retain": (),
    "compact": (),
    "convert-gzip": (),
}
#: what CI runs (a broker start each, about 30 s): repair, the command that meets the damages; the others under
#: ``-m campaign`` (``make campaign``)
IN_CI = {"repair"}


def _served(bootstrap: str, d: Path) -> dict[str, set[tuple]]:
    topics = sorted({p.name.rsplit("-", 1)[0] for p in d.iterdir()
                     if p.is_dir() and not p.name.startswith("__") and any(p.glob("*.log"))})
    out: dict[str, set[tuple]] = {}
    for t in topics:
        for c in consume(bootstrap, t, client="confluent", timeout=60, idle=4):
            out.setdefault(f"{t}-{c.partition}", set()).add((c.offset, c.value))
    return out


@pytest.mark.parametrize("command", [c if c in IN_CI else pytest.param(c, marks=pytest.mark.campaign)
                                     for c in sorted(COMMANDS)])
def test_broker_loads_a_dir_killed_mid_apply(tmp_path: Path, broker_factory, command: str) -> None:
    damages = COMMANDS[command]
    base = tmp_path / "base"
    damaged_copy(FIXTURE, base, damages)
    if command == "compact":
        roll_active(base)
    before_dir, after_dir = tmp_path / "before", tmp_path / "after"
    shutil.copytree(base, before_dir)
    shutil.copytree(base, after_dir)
    if command == "repair":
        apply(plan_repair([before_dir], now_ms=NOW), backup=False)
    steps = count_mutations(lambda: apply(plan_for(command, after_dir), backup=False))
    before = {n: {(o, v) for o, _k, v in recs} for n, recs in records(before_dir).items()}
    after = {n: {(o, v) for o, _k, v in recs} for n, recs in records(after_dir).items()}
    crashed = tmp_path / "data"
    shutil.copytree(base, crashed)
    k = max(1, steps // 2)
    assert killed_at(command, crashed, k) == 137
    broker = broker_factory("4.3.1", data_dir=crashed, server_properties=QUIET)
    served = _served(broker.bootstrap_servers, crashed)
    broker.stop()
    assert served, "the broker served nothing"
    for name, recs in served.items():
        assert after.get(name, set()) <= recs <= before.get(name, set()), \
            f"{command} killed at step {k}/{steps}: {name} served records outside the before/after states"
