"""Damaged copies of the real broker fixtures, for tests of the mutating engines (plan == apply, crashes).

``damaged_copy(fixture, dst, kinds)`` copies ``fixtures/<fixture>/data`` to ``dst`` and applies the damages
named in ``kinds`` (see :data:`DAMAGES`); each damage picks its victim partition deterministically and
returns a description. A damage that does not apply to a fixture (no such partition) is skipped.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from kafkalog.storage.records import iter_batches

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
#: the tiered fixture is left out: kafkalog's engines do not yet apply Kafka's log start offset rule for
#: remote-storage-enabled partitions (see test_plan_apply.test_repair_keeps_a_tiered_partitions_log_start)
FIXTURE_NAMES = sorted(p.name for p in FIXTURES.iterdir() if (p / "data").is_dir() and not (p / "remote").is_dir())


def _partition(d: Path, prefix: str) -> Path | None:
    for p in sorted(d.iterdir()):
        if p.is_dir() and p.name.startswith(prefix) and any(p.glob("*.log")):
            return p
    return None


def _logs(p: Path) -> list[Path]:
    return sorted(p.glob("*.log"))


def unclean(d: Path) -> str | None:
    """The broker was killed: no clean shutdown marker."""
    m = d / ".kafka_cleanshutdown"
    if m.exists():
        m.unlink()
        return "no clean shutdown marker"
    return None


def torn_tail(d: Path) -> str | None:
    """A torn write at the end of the active segment of a multi-segment partition."""
    p = _partition(d, "multi-segment-0") or _partition(d, "killed-0")
    if p is None:
        return None
    with open(_logs(p)[-1], "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00\x01\x00\x00\x00\x00")
    return f"torn tail in {p.name}"


def crc_mismatch(d: Path) -> str | None:
    """A flipped byte inside a record batch (CRC-covered) of a segment in the middle of a partition."""
    p = _partition(d, "multi-segment-1") or _partition(d, "killed-1")
    if p is None:
        return None
    logs = _logs(p)
    return _flip_middle_batch(logs[len(logs) // 2] if len(logs) > 1 else logs[0])


def _flip_middle_batch(seg: Path) -> str | None:
    """Flip a byte inside the records of the middle batch of ``seg`` (v2: covered by the CRC; v0/v1: by the
    message CRC); None when ``seg`` holds no batch."""
    data = bytearray(seg.read_bytes())
    batches = list(iter_batches(bytes(data)))
    if not batches:
        return None
    b = batches[len(batches) // 2]
    data[b.position + b.size - 3] ^= 0x5A
    del batches, b
    seg.write_bytes(bytes(data))
    return f"CRC mismatch in {seg.parent.name}/{seg.name}"


def _delete(d: Path, prefixes: tuple[str, str], patterns: tuple[str, ...], what: str) -> str | None:
    """Delete the files matching ``patterns`` of the first partition of ``d`` named by one of ``prefixes``;
    ``"<what> in <partition>"``, or None when there is no such partition."""
    p = _partition(d, prefixes[0]) or _partition(d, prefixes[1])
    if p is None:
        return None
    for f in [f for pattern in patterns for f in p.glob(pattern)]:
        f.unlink()
    return f"{what} in {p.name}"


def missing_index(d: Path) -> str | None:
    return _delete(d, ("codec-none", "killed-0"), ("*.index",), "missing .index")


def bad_timeindex(d: Path) -> str | None:
    """A time index whose entries go backwards (fails Kafka's sanity checks)."""
    p = _partition(d, "codec-gzip") or _partition(d, "open-transaction")
    if p is None:
        return None
    ti = sorted(p.glob("*.timeindex"))[0]
    ti.write_bytes(b"\x7f" + b"\x00" * 10 + b"\x05" + b"\x00" * 11 + b"\x01")
    return f"bad .timeindex in {p.name}"


def leftovers(d: Path) -> str | None:
    """Leftovers of an interrupted segment replacement and an orphaned index."""
    p = _partition(d, "codec-lz4") or _partition(d, "killed-0")
    if p is None:
        return None
    (p / "00000000000000000000.log.cleaned").write_bytes(b"partial")
    (p / "00000000000000099999.index").write_bytes(b"")
    return f"leftover .cleaned and orphaned index in {p.name}"


def bad_partition_metadata(d: Path) -> str | None:
    p = _partition(d, "idempotent-1") or _partition(d, "codec-snappy")
    if p is None or not (p / "partition.metadata").exists():
        return None
    (p / "partition.metadata").write_bytes(b"")
    return f"zero-length partition.metadata in {p.name}"


def bad_checkpoint(d: Path) -> str | None:
    f = d / "recovery-point-offset-checkpoint"
    f.write_text("0\n2\nfoo 0\n")
    return "malformed recovery-point-offset-checkpoint"


DAMAGES: dict[str, Callable[[Path], str | None]] = {
    "unclean": unclean, "torn_tail": torn_tail, "crc_mismatch": crc_mismatch, "missing_index": missing_index,
    "bad_timeindex": bad_timeindex, "leftovers": leftovers, "bad_partition_metadata": bad_partition_metadata,
    "bad_checkpoint": bad_checkpoint,
}
#: damages only the index files (the .log files stay valid)
INDEX_DAMAGES = ("missing_index", "bad_timeindex")


# ------------------------------------------------------------------ losses (the contract matrix, issue 34)
# Each damages ``multi-segment-0`` (or ``killed-0``), a partition of several segments whose checkpoints remember
# its records; the first three lose records a reader must report, the last loses none.


def torn_middle(d: Path) -> str | None:
    """The first (closed) segment cut in the middle of one of its batches: the records after the cut are gone
    while the next segments still hold theirs."""
    p = _partition(d, "multi-segment-0") or _partition(d, "killed-0")
    if p is None or len(_logs(p)) < 2:
        return None
    seg = _logs(p)[0]
    batches = list(iter_batches(seg.read_bytes()))
    b = batches[len(batches) // 2]
    cut = b.position + b.size // 2
    del batches, b
    os.truncate(seg, cut)
    return f"{seg.parent.name}/{seg.name} cut at byte {cut}, inside a batch"


def crc_closed(d: Path) -> str | None:
    """A flipped byte inside a batch of the first (closed) segment: its CRC fails."""
    p = _partition(d, "multi-segment-0") or _partition(d, "killed-0")
    if p is None or len(_logs(p)) < 2:
        return None
    return _flip_middle_batch(_logs(p)[0])


def no_logs(d: Path) -> str | None:
    """Every ``.log`` file of a partition gone (its indexes, snapshots and the data dir's checkpoints remain)."""
    return _delete(d, ("multi-segment-0", "killed-0"), ("*.log",), "no .log files")


def no_indexes(d: Path) -> str | None:
    """Every offset, time and transaction index of a partition gone (the ``.log`` files stay valid)."""
    return _delete(d, ("multi-segment-0", "killed-0"), ("*.index", "*.timeindex", "*.txnindex"), "no indexes")


def lying_index(pdir: Path, by: int = 10) -> None:
    """Every entry of the partition dir's offset indexes points ``by`` bytes further: into a batch, where none
    starts (the ``.log`` files stay valid)."""
    for index in pdir.glob("*.index"):
        raw = bytearray(index.read_bytes())
        for i in range(0, len(raw), 8):
            raw[i + 4:i + 8] = (int.from_bytes(raw[i + 4:i + 8], "big") + by).to_bytes(4, "big")
        index.write_bytes(bytes(raw))


#: the damages of the contract matrix, and the partition each one damages
LOSSES: dict[str, Callable[[Path], str | None]] = {
    "torn_middle": torn_middle, "crc_closed": crc_closed, "no_logs": no_logs, "no_indexes": no_indexes,
}
#: the losses that take records away (a reader exiting 0 over one of them is silent about a loss)
LOSING = ("torn_middle", "crc_closed", "no_logs")


def damaged_copy(fixture: str, dst: Path, kinds: tuple[str, ...] = tuple(DAMAGES)) -> list[str]:
    """Copy a fixture's data dir to ``dst`` and damage it; returns what was done."""
    shutil.copytree(FIXTURES / fixture / "data", dst)
    done = []
    for k in kinds:
        what = DAMAGES[k](dst)
        if what:
            done.append(what)
    return done


def tree(d: Path, *, ignore: tuple[str, ...] = (".lock",)) -> dict[str, bytes]:
    """Every file under ``d`` (relative path -> bytes)."""
    out = {}
    for p in sorted(d.rglob("*")):
        if p.is_file() and p.name not in ignore:
            out[str(p.relative_to(d))] = p.read_bytes()
    return out


# ------------------------------------------------------------------------------------------------ crashes
#: the fileops steps that change files (a kill is placed before one of them)
MUTATIONS = {"write", "append", "rename", "truncate", "unlink", "mkdir", "rmdir", "utime"}


class Mutations:
    """A ``fileops.observe`` observer: counts the file mutations (``n``) and calls ``before(path)`` just before
    the k-th one (a kill, an injected error)."""

    def __init__(self, k: int = 0, before: Callable[[str], None] | None = None) -> None:
        self.n, self.k, self.before = 0, k, before

    def __call__(self, kind: str, path: str, _target) -> None:
        if kind in MUTATIONS:
            self.n += 1
            if self.n == self.k and self.before is not None:
                self.before(path)


def injected(code: int) -> Callable[[str], None]:
    """A ``Mutations.before`` raising ``OSError(code)`` naming the file, as the OS would."""
    import errno

    def fail(path: str) -> None:
        raise OSError(code, f"{errno.errorcode[code]} (injected)", path)

    return fail


def count_mutations(run) -> int:
    """How many file mutations ``run()`` performs (through ``kafkalog.storage.io.fileops``)."""
    from kafkalog.storage.io import fileops

    seen = Mutations()
    with fileops.observe(seen):
        run()
    return seen.n


NOW = 1_900_000_000_000


def plan_for(command: str, d: Path):
    """The plan a mutating command makes on ``d`` (the crash tests kill its apply)."""
    from kafkalog.storage.engine.cleaner.manager import plan_compact
    from kafkalog.storage.engine.convert import ConvertOptions
    from kafkalog.storage.engine.flush import plan_flush
    from kafkalog.storage.engine.message_format import plan_convert
    from kafkalog.storage.engine.migrate import MigrateOptions, plan_migrate
    from kafkalog.storage.engine.offset_checkpoints import plan_set_checkpoints
    from kafkalog.storage.engine.reindex import plan_reindex
    from kafkalog.storage.engine.repair import plan_repair
    from kafkalog.storage.engine.retention import plan_retention
    from kafkalog.storage.engine.topic_id import plan_topic_id

    return {
        "checkpoints": lambda: plan_set_checkpoints(d, "recovery-point", {("compacted", 0): 0, ("codec-zstd", 0): 7}),
        "topic-id": lambda: plan_topic_id(sorted(d.glob("multi-segment-*")), TOPIC_ID),
        "migrate": lambda: plan_migrate(d / "multi-segment-0", migrate_dest(d), MigrateOptions(topic="moved", cluster_id="Aw5EClUXSoGxHhT0nCIykw", node_id=7)),
        "repair": lambda: plan_repair([d], now_ms=NOW),
        "reindex": lambda: plan_reindex([d]),
        "flush": lambda: plan_flush([d], now_ms=NOW),
        "retain": lambda: plan_retention([d], now_ms=NOW),
        "compact": lambda: plan_compact([d], now_ms=NOW, force=True),
        "convert": lambda: plan_convert([d], ConvertOptions(codec="lz4")),
        "convert-gzip": lambda: plan_convert([d], ConvertOptions(codec="gzip")),
    }[command]()


#: command -> the damages its fault campaigns (crash, ENOSPC, EIO) meet
FAULT_DAMAGES: dict[str, tuple[str, ...]] = {
    "repair": ("unclean", "torn_tail", "crc_mismatch", "missing_index", "leftovers", "bad_checkpoint"),
    "reindex": ("missing_index", "bad_timeindex"),
    "flush": ("unclean", "bad_checkpoint"),
    "retain": (),
    "compact": (),
    "convert": (),
}


TOPIC_ID = "6UQ0zTsHRhGW2-8pjzOGEA"  # the id `topic-id --set` writes in the campaigns


def migrate_dest(d: Path) -> Path:
    """Where the campaigns' ``migrate`` of ``d`` copies to: a data dir beside it."""
    return d.with_name(d.name + "-dest")


def append_batches(n: int = 40) -> list[bytes]:
    """The batches the campaigns' ``append`` adds (several codecs, keys and headers)."""
    from kafkalog.storage.records import build_batch

    codecs = (0, 1, 3, 4)
    return [build_batch([(i * 3 + j, NOW, b"k%d" % (i % 7), b"v%d-" % (i * 3 + j) + b"x" * 200, [("h", b"%d" % i)])
                         for j in range(3)], base_offset=i * 3, codec=codecs[i % 4]) for i in range(n)]


def run_for(command: str, d: Path) -> None:
    """What a mutating command does to ``d``: its plan applied (``plan_for``), or for ``append`` (not a plan)
    the append of :func:`append_batches` to ``codec-none-0``."""
    from kafkalog.storage.engine.plan import apply

    if command == "append":
        from kafkalog.storage.engine.writer import append_to_partition

        append_to_partition(d, "codec-none-0", append_batches(), now_ms=NOW)
    elif command == "import":
        from kafkalog.storage.engine.import_ import import_files

        import_files([import_rows(d)], d)
    elif command == "migrate-in":
        from kafkalog.storage.engine.migrate import MigrateOptions, plan_migrate

        meta = dict(line.split("=", 1) for line in (d / "meta.properties").read_text().splitlines() if "=" in line)
        apply(plan_for_migrate_in(d, plan_migrate, MigrateOptions(cluster_id=meta["cluster.id"],
                                                                  node_id=int(meta["node.id"]))), backup=False)
    elif command == "topic-id-restore":
        from kafkalog.storage.engine.topic_id import plan_topic_id

        apply(plan_topic_id(sorted(d.glob("multi-segment-*")), restored_topic_id(d)), backup=False)
    else:
        apply(plan_for(command, d), backup=False)


# ------------------------------------------------------------------ commands a real broker can load after
# The plain ``import``/``migrate``/``topic-id`` of the campaigns make topics (and ids) the KRaft metadata of the
# fixture does not know, which a broker would not serve; these variants put back what the metadata knows.
#: ``prepare_for(command, base)`` makes the before-state of these commands in a copy of the fixture, and the
#: inputs beside it (shared by every copy of ``base`` in the same folder)
BROKER_LOADABLE = ("import", "migrate-in", "topic-id-restore")


def import_rows(d: Path) -> Path:
    """The JSON Lines the campaigns' ``import`` reads: ``codec-none-0`` exported (made by :func:`prepare_for`)."""
    return d.parent / "import-rows.jsonl"


def plan_for_migrate_in(d: Path, plan_migrate, opts):
    """``migrate`` of a pristine ``multi-segment-0`` (beside ``d``) back into ``d``, which lacks it."""
    return plan_migrate(d.parent / "migrate-src" / "multi-segment-0", d, opts)


def restored_topic_id(d: Path) -> str:
    return (d.parent / "topic-id.txt").read_text()


def prepare_for(command: str, base: Path) -> None:
    """The before-state of ``command`` in ``base`` (a copy of a fixture) and its inputs beside it: ``import``
    re-imports an export of ``codec-none-0`` into a dir without that partition; ``migrate-in`` copies
    ``multi-segment-0`` back into a dir without it; ``topic-id-restore`` writes the topic id the metadata knows
    into ``multi-segment-*`` partitions that lost their ``partition.metadata``. (A broker creates an empty
    partition, or writes the id, for what is missing: the before-states load too.)"""
    if command == "import":
        from kafkalog.storage.engine.export import ExportFilter, export_jsonl

        export_jsonl([base / "codec-none-0"], import_rows(base), ExportFilter(topics={"codec-none"}))
        shutil.rmtree(base / "codec-none-0")
    elif command == "migrate-in":
        src = base.parent / "migrate-src"
        src.mkdir()
        shutil.copytree(base / "multi-segment-0", src / "multi-segment-0")
        shutil.rmtree(base / "multi-segment-0")
    elif command == "topic-id-restore":
        from kafkalog.storage.files.partition_metadata import read_partition_metadata

        pm = read_partition_metadata(base / "multi-segment-0" / "partition.metadata")
        (base.parent / "topic-id.txt").write_text(pm.topic_id)
        for p in base.glob("multi-segment-*"):
            (p / "partition.metadata").unlink()
    elif command == "compact":
        roll_active(base)


def repair_dir(d: Path) -> None:
    """``kafkalog repair`` on ``d``: it must plan without errors, and applies."""
    from kafkalog.storage.engine.plan import apply
    from kafkalog.storage.engine.repair import plan_repair

    plan = plan_repair([d], now_ms=NOW)
    assert not plan.errors, plan.errors
    apply(plan, backup=False)


def sample_points(steps: int, sample: int | None) -> list[int]:
    """The write steps 1..steps a campaign injects at: all of them, or ``sample`` spread evenly (first and last
    included)."""
    points = list(range(1, steps + 1))
    if sample is not None and len(points) > sample:
        points = sorted({points[round(i * (len(points) - 1) / (sample - 1))] for i in range(sample)})
    return points


def fault_campaign(tmp_path: Path, fixture: str, command: str, sample: int | None,
                   fault: Callable[[Path, int, int], None], *, rerun: bool = False) -> tuple[int, int]:
    """Apply ``command`` to damaged copies of ``fixture`` with a fault at its k-th file mutation, for a sample of
    k (every k when ``sample`` is None): ``fault(copy, k, steps)`` runs the faulted apply and checks how it
    failed. After each: the copy loads (:func:`repair_dir`) and every partition holds the records of the state
    before the apply, of the state its plan promised, or one in between (``after <= faulted <= before``); with
    ``rerun``, the same command applied again then reaches the promised state. Returns ``(steps, points tried)``.
    """
    from kafkalog.storage.engine.plan import apply

    base = tmp_path / "base"
    damaged_copy(fixture, base, FAULT_DAMAGES[command])
    if command == "compact":
        roll_active(base)
    before_dir = tmp_path / "before"
    shutil.copytree(base, before_dir)
    repair_dir(before_dir)
    before = records(before_dir)
    after_dir = tmp_path / "after"
    shutil.copytree(base, after_dir)
    steps = count_mutations(lambda: apply(plan_for(command, after_dir), backup=False))
    repair_dir(after_dir)
    after = records(after_dir)
    points = sample_points(steps, sample)
    for k in points:
        d = tmp_path / f"k{k}"
        shutil.copytree(base, d)
        fault(d, k, steps)
        repair_dir(d)
        got = records(d)
        assert set(got) == set(before), f"{command}: fault at step {k}/{steps}: partitions differ"
        for name, recs in got.items():
            assert after[name] <= recs <= before[name], \
                f"{command}: fault at step {k}/{steps}: {name} holds records outside the before/after states"
        if rerun:
            apply(plan_for(command, d), backup=False)  # the same command again, on the repaired dir
            repair_dir(d)
            assert records(d) == after, f"{command}: after a fault at step {k}/{steps}, a re-run does not finish"
        shutil.rmtree(d)
    return steps, len(points)


def killed_at(command: str, d: Path, k: int) -> int:
    """Apply ``command``'s plan on ``d`` in a new Python process that is killed (``os._exit``: no cleanup runs,
    as with SIGKILL) before its k-th file mutation; returns its exit status (137 when the kill happened).

    A new process, not a fork: the test process may hold threads (a Spark gateway) whose locks a fork would
    inherit."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, __file__, "kill", command, str(d), str(k)], capture_output=True, text=True,
                       timeout=300)
    if r.returncode not in (0, 137):
        raise AssertionError(f"the killed apply failed unexpectedly (exit {r.returncode}): {r.stderr[-3000:]}")
    return r.returncode


def _kill_child(command: str, d: str, k: int) -> None:  # pragma: no cover - runs in the child process
    import os

    from kafkalog.storage.io import fileops

    with fileops.observe(Mutations(k, lambda _path: os._exit(137))):
        run_for(command, Path(d))


def run_with_fault(command: str, d: Path, k: int, fault: str) -> str:
    """Run ``command`` (:func:`run_for`) on ``d`` with ``fault`` at its k-th file mutation: ``ENOSPC``/``EIO``
    raised through the I/O seam (the command must fail naming the file), or ``kill`` (:func:`killed_at`).
    Returns what happened, in a few words."""
    import errno

    from kafkalog.storage.errors import KafkaLogError
    from kafkalog.storage.io import fileops

    if fault == "kill":
        assert killed_at(command, d, k) == 137, f"{command}: the kill before step {k} never came"
        return "killed"
    code = getattr(errno, fault)
    with fileops.observe(Mutations(k, injected(code))):
        try:
            run_for(command, d)
        except OSError as e:
            assert e.errno == code and e.filename, f"{command}: step {k}: {e!r} names no file"
            return f"{fault}: {e.filename}"
        except KafkaLogError as e:
            assert e.path and fault in e.reason, f"{command}: step {k}: {e} is not clear"
            return f"{fault}: {e.path}"
    raise AssertionError(f"{command}: step {k} never came, or the fault was swallowed")


def roll_active(d: Path) -> None:
    """Give the cleaner work on a real fixture: an empty segment at each partition's log end offset (as a roll
    leaves it), so the dirty tails become cleanable."""
    from kafkalog.storage.log.datadir import partition_dirs
    from kafkalog.storage.log.partition import PartitionLog

    for p, _t, _n in partition_dirs(d):
        with PartitionLog(p) as log:
            leo = log.log_end_offset
            if log.active_segment is not None and log.active_segment.size and leo > log.active_segment.base_offset:
                (p / f"{leo:020d}.log").touch()


def records(d: Path) -> dict[str, set[tuple]]:
    """Per partition: the records a consumer can read, from the log start offset: ``(offset, key, value)``."""
    from kafkalog.storage.log.datadir import partition_dirs
    from kafkalog.storage.log.dir_checkpoints import read_checkpoint_or_empty
    from kafkalog.storage.log.partition import PartitionLog

    lso = read_checkpoint_or_empty(d / "log-start-offset-checkpoint")
    out = {}
    for p, topic, part in partition_dirs(d):
        with PartitionLog(p, log_start_offset_checkpoint=lso.get((topic, part))) as log:
            start = log.log_start_offset
            recs = set()
            for _seg, b in log.iter_batches():
                if b.is_control:
                    continue
                for r in b.records():
                    if r.offset >= start:
                        recs.add((r.offset, bytes(r.key) if r.key is not None else None,
                                  bytes(r.value) if r.value is not None else None))
                del b
            out[p.name] = recs
    return out


if __name__ == "__main__":  # python tests/damage.py kill COMMAND DIR K
    import sys as _sys

    if _sys.argv[1] == "kill":
        _kill_child(_sys.argv[2], _sys.argv[3], int(_sys.argv[4]))


# ------------------------------------------------------------------------ non-conformant writers (certify)
# Each takes a well-formed partition dir (tests/builders.certify_partition, in a data dir made by
# certify_data_dir) and makes it wrong in one way Kafka cares about, as a faulty writer would; returns what it did.


def _segments(p: Path) -> list[Path]:
    return sorted(p.glob("*.log"))


def _v2_crc(batch: bytearray) -> None:
    from kafkalog.storage.codec.crc import crc32c

    batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")


def _rewrite_batch(seg: Path, index: int, change: Callable[[bytearray], None]) -> tuple[int, int]:
    """Apply ``change`` to the bytes of batch ``index`` of ``seg`` in place (same size); returns its position
    and base offset."""
    data = bytearray(seg.read_bytes())
    b = list(iter_batches(bytes(data)))[index]
    pos, size, base = b.position, b.size, b.base_offset
    del b
    one = data[pos:pos + size]
    change(one)
    data[pos:pos + size] = one
    seg.write_bytes(bytes(data))
    return pos, base


def index_entry_misplaced(p: Path) -> str:
    """An offset index entry of a closed segment points two batches further than its offset's batch."""
    seg = _segments(p)[0]
    idx = seg.with_suffix(".index")
    entries = bytearray(idx.read_bytes())
    positions = [b.position for b in iter_batches(seg.read_bytes())]
    rel = int.from_bytes(entries[0:4], "big")
    pos = int.from_bytes(entries[4:8], "big")
    later = positions[min(positions.index(pos) + 2, len(positions) - 1)]
    entries[4:8] = later.to_bytes(4, "big")
    idx.write_bytes(bytes(entries))
    return f"{idx.name}: entry for offset {rel} points at byte {later}, not {pos}"


def timeindex_not_monotonic(p: Path) -> str:
    """The time index of a closed segment goes back in time."""
    seg = _segments(p)[0]
    tix = seg.with_suffix(".timeindex")
    data = bytearray(tix.read_bytes())
    if len(data) < 24:
        raise AssertionError(f"{tix} has fewer than 2 entries")
    first = int.from_bytes(data[0:8], "big")
    data[12:20] = (first - 60_000).to_bytes(8, "big")
    tix.write_bytes(bytes(data))
    return f"{tix.name}: entry 1 has timestamp {first - 60_000}, before entry 0's {first}"


def segment_misnamed(p: Path) -> str:
    """A closed segment's files are named 2 above its first batch's base offset."""
    seg = _segments(p)[1]
    base = int(seg.stem)
    new = f"{base + 2:020d}"
    for f in sorted(p.glob(f"{seg.stem}.*")):
        f.rename(p / (new + f.suffix))
    return f"{seg.name} renamed {new}.log (its first batch is at offset {base})"


def offsets_go_back(p: Path) -> str:
    """The last batch of a closed segment starts 3 offsets below where the previous batch ended."""
    seg = _segments(p)[1]
    n = len(list(iter_batches(seg.read_bytes())))

    def back(b: bytearray) -> None:
        b[0:8] = (int.from_bytes(b[0:8], "big") - 3).to_bytes(8, "big")  # baseOffset: not covered by the CRC

    pos, base = _rewrite_batch(seg, n - 1, back)
    return f"{seg.name}@{pos}: batch at offset {base} rewritten to start at {base - 3}"


def producer_snapshot_missing(p: Path) -> str:
    """Every producer snapshot deleted (the partition has an open transaction the snapshot recorded)."""
    gone = sorted(s.name for s in p.glob("*.snapshot"))
    for s in p.glob("*.snapshot"):
        s.unlink()
    return f"deleted {', '.join(gone)}"


def control_payload_malformed(p: Path) -> str:
    """The COMMIT marker's value carries an unknown EndTxnMarker version (65535), CRC recomputed."""
    for seg in _segments(p):
        for i, b in enumerate(iter_batches(seg.read_bytes())):
            if b.is_control:

                def bad(batch: bytearray) -> None:
                    batch[-7:-5] = b"\xff\xff"  # the value's version (the record ends with 0 headers)
                    _v2_crc(batch)

                pos, base = _rewrite_batch(seg, i, bad)
                return f"{seg.name}@{pos}: control batch at offset {base} with marker version 65535"
    raise AssertionError(f"{p}: no control batch")


def leader_epoch_ahead(p: Path) -> str:
    """leader-epoch-checkpoint gains an entry starting 50 offsets past the log end."""
    from kafkalog.storage.files.leader_epoch import (
        EpochEntry,
        read_leader_epoch_checkpoint,
        write_leader_epoch_checkpoint,
    )

    f = p / "leader-epoch-checkpoint"
    entries = list(read_leader_epoch_checkpoint(f).entries)
    end = max(b.last_offset for s in _segments(p) for b in iter_batches(s.read_bytes())) + 1
    entries.append(EpochEntry(entries[-1].epoch + 4, end + 50))
    write_leader_epoch_checkpoint(f, entries)
    return f"epoch {entries[-1].epoch} from offset {end + 50}, past the log end {end}"


def crc_closed_segment(p: Path) -> str:
    """A flipped byte in a record of the first (closed) segment's second batch: its CRC fails."""
    return _crc_fails(_segments(p)[0])


def crc_active_segment(p: Path) -> str:
    """A flipped byte in a record of the last (active) segment's second batch: its CRC fails."""
    return _crc_fails(_segments(p)[-1])


def _crc_fails(seg: Path) -> str:
    def flip(b: bytearray) -> None:
        b[-10] ^= 0x55

    pos, base = _rewrite_batch(seg, 1, flip)
    return f"{seg.name}@{pos}: batch at offset {base}, a value byte flipped"


def partition_metadata_no_topic_id(p: Path) -> str:
    """partition.metadata with its version line only."""
    (p / "partition.metadata").write_text("version: 0\n")
    return "partition.metadata: version 0, no topic_id line"


def wrong_last_offset_delta(p: Path) -> str:
    """A v2 batch of a closed segment declares one more offset than its records have (CRC recomputed)."""
    seg = _segments(p)[0]

    def more(b: bytearray) -> None:
        b[23:27] = (int.from_bytes(b[23:27], "big") + 1).to_bytes(4, "big")
        _v2_crc(b)

    pos, base = _rewrite_batch(seg, 2, more)
    return f"{seg.name}@{pos}: batch at offset {base}, lastOffsetDelta one too many"


def log_start_past_end(p: Path) -> str:
    """log-start-offset-checkpoint puts the partition's log start 100 offsets past its log end."""
    from kafkalog.storage.files.checkpoints import read_offset_checkpoint, write_offset_checkpoint

    f = p.parent / "log-start-offset-checkpoint"
    entries = read_offset_checkpoint(f).to_dict() if f.exists() else {}
    end = max(b.last_offset for s in _segments(p) for b in iter_batches(s.read_bytes())) + 1
    topic, part = p.name.rsplit("-", 1)
    entries[(topic, int(part))] = end + 100
    write_offset_checkpoint(f, entries)
    return f"log start {end + 100}, log end {end}"


def unterminated_transaction(p: Path) -> str:
    """Nothing to change: the partition was built with a transaction left open (certify_partition(open_txn=True))."""
    return "producer 11's transaction has no marker"


#: the damages that need an open transaction in the built partition, and those that stop the broker loading the
#: whole dir
_NEEDS_OPEN_TXN = (producer_snapshot_missing, unterminated_transaction)
_STOPS_LOADING = (partition_metadata_no_topic_id,)

#: class (the damage's name, with dashes) -> (damage, needs an open transaction in the built partition, stops the
#: broker loading the whole dir)
CERTIFY_DAMAGES: dict[str, tuple[Callable[[Path], str], bool, bool]] = {
    damage.__name__.replace("_", "-"): (damage, damage in _NEEDS_OPEN_TXN, damage in _STOPS_LOADING)
    for damage in (index_entry_misplaced, timeindex_not_monotonic, segment_misnamed, offsets_go_back,
                   producer_snapshot_missing, control_payload_malformed, leader_epoch_ahead, crc_closed_segment,
                   partition_metadata_no_topic_id, wrong_last_offset_delta, log_start_past_end,
                   unterminated_transaction)
}
