"""Plan == apply, for every mutating command, on damaged copies of every real-broker fixture.

For each command: the dry-run plan is made (nothing on disk may change); then the command's real run plans again
and applies. The test records every file mutation the apply performs (the library's one I/O seam,
``kafkalog.storage.io.fileops``) and checks that

* apply ran exactly the dry-run plan's operations, in order (``ApplyResult.traces == plan.traces()``);
* every mutation belongs to the operation running at the time, and touches only the files that operation names
  (its temporary file, its partition dir for segment replacements, the backup folder);
* the directories end up with exactly the files (and sizes, where the plan knew them) the plan predicted;
* a second run plans nothing and makes no backup.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from damage import FIXTURE_NAMES, FIXTURES, INDEX_DAMAGES, damaged_copy, tree

from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.engine.cleaner.manager import plan_compact
from kafkalog.storage.engine.convert import ConvertOptions
from kafkalog.storage.engine.flush import plan_flush
from kafkalog.storage.engine.message_format import plan_convert
from kafkalog.storage.engine.migrate import MigrateOptions, plan_migrate
from kafkalog.storage.engine.offset_checkpoints import plan_set_checkpoints
from kafkalog.storage.engine.plan import PlanError, Setting, apply
from kafkalog.storage.engine.reindex import plan_reindex
from kafkalog.storage.engine.repair import plan_repair
from kafkalog.storage.engine.retention import plan_retention
from kafkalog.storage.engine.topic_id import plan_topic_id
from kafkalog.storage.io import fileops
from kafkalog.storage.log.partition import PartitionLog

NOW = 1_900_000_000_000


def _roll_active(d: Path) -> None:
    """Give the cleaner work on a real fixture: roll every partition's active segment (an empty segment at the log
    end offset, as the broker's roll leaves it), so the dirty tails become cleanable."""
    for p in sorted(d.iterdir()):
        if not p.is_dir() or p.name.startswith("__cluster_metadata") or not any(p.glob("*.log")):
            continue
        with PartitionLog(p) as log:
            leo = log.log_end_offset
            if log.active_segment is not None and log.active_segment.size and leo > log.active_segment.base_offset:
                (p / f"{leo:020d}.log").touch()


def _allowed(op_kind: str, op_path: str, step: tuple[str, str, str | None], backup_root: Path | None) -> bool:
    kind, path, target = step
    if backup_root is not None and (path.startswith(str(backup_root)) or (target or "").startswith(str(backup_root))):
        return True
    if kind == "link":  # a backup: the source is an existing file of the op
        return target is not None and backup_root is not None and target.startswith(str(backup_root))
    if op_kind in ("replace-segments", "compact"):
        return Path(path).parent == Path(op_path) or Path(path) == Path(op_path)
    if op_kind in ("install-partition", "create-dir"):
        return Path(path).parent.parent == Path(op_path).parent.parent or \
            Path(path).parent == Path(op_path).parent.parent or Path(path).parent == Path(op_path).parent or \
            Path(path) == Path(op_path) or str(path).startswith(str(Path(op_path).parent.parent))
    if op_kind == "fsync":
        return True  # fsyncs change no bytes
    allowed = {op_path, str(fileops.tmp_path(op_path)), str(Path(op_path).parent)}
    if target is not None:
        allowed.add(target)
    return path in allowed and (target is None or target in allowed)


def _check(make_plan, dirs: list[Path], *, exact_plan=None, backup: bool = True, again: bool = True) -> None:
    before = {d: tree(d) for d in dirs if d.exists()}
    dry = (exact_plan or make_plan)()
    assert {d: tree(d) for d in dirs if d.exists()} == before, "planning changed files"
    dry.check()
    assert dry.changes, "the damaged fixture needs no change: the test would prove nothing"
    real = make_plan()
    steps: list[tuple[int, str, str, str | None]] = []  # partitions run in threads: steps carry their thread
    with fileops.observe(lambda k, p, t: steps.append((threading.get_ident(), k, p, t))):
        res = apply(real, backup=backup, backup_root=dirs[0].parent / "backup" if backup else None)
    assert res.traces == dry.traces(), "apply did not run the dry-run plan's operations"
    # every mutation belongs to the op running at the time and touches what that op names
    backup_root = dirs[0].parent / "backup" if backup else None
    running: dict[int, tuple[str, str]] = {}  # thread -> the op it runs
    for thread, k, p, t in steps:
        if k == "begin-op":
            running[thread] = (t or "", p)
            continue
        current = running.get(thread)
        assert current is not None, f"a file mutation outside any planned operation: {k} {p}"
        assert _allowed(current[0], current[1], (k, p, t), backup_root), \
            f"{current[0]} {current[1]} touched {k} {p} {t or ''}"
    # the directories hold exactly what the plan predicted
    for pp in dry.partitions:
        if pp.expected is None:
            continue
        actual = {f.name: f.stat().st_size for f in Path(pp.dir).iterdir() if f.is_file() and f.name != ".lock"}
        assert set(actual) == set(pp.expected), f"{pp.dir}: files differ from the plan"
        for name, size in pp.expected.items():
            if size is not None:
                assert actual[name] == size, f"{pp.dir}/{name}: {actual[name]} bytes, planned {size}"
    # a second run has nothing to do
    if again:
        second = make_plan()
        assert not second.changes, [op.describe() for op in second.ops()][:5]


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_repair(tmp_path, fixture):
    d = tmp_path / "data"
    damaged_copy(fixture, d)
    _check(lambda: plan_repair([d], now_ms=NOW), [d])


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_repair_full(tmp_path, fixture):
    d = tmp_path / "data"
    damaged_copy(fixture, d, ("crc_mismatch",))
    _check(lambda: plan_repair([d], now_ms=NOW, full=True), [d])


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_reindex(tmp_path, fixture):
    d = tmp_path / "data"
    damaged_copy(fixture, d, INDEX_DAMAGES)
    _check(lambda: plan_reindex([d]), [d])


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_reindex_refuses_invalid_bytes(tmp_path, fixture):
    d = tmp_path / "data"
    damaged_copy(fixture, d, ("torn_tail",))
    before = tree(d)
    plan = plan_reindex([d])
    assert plan.errors
    with pytest.raises(Exception, match="nothing was changed"):
        apply(plan)
    assert tree(d) == before


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_flush(tmp_path, fixture):
    d = tmp_path / "data"
    damaged_copy(fixture, d, ("unclean", "bad_checkpoint"))
    _check(lambda: plan_flush([d], now_ms=NOW), [d])


def test_flush_never_advances_past_invalid_bytes(tmp_path):
    d = tmp_path / "data"
    damaged_copy("kafka-4.3.1-kraft", d, ("bad_checkpoint", "torn_tail"))
    plan = plan_flush([d], now_ms=NOW)
    torn = next(p for p in plan.partitions if p.name == "multi-segment-0")
    assert not torn.facts["verified"] and torn.facts["recoveryPoint"] == 0
    apply(plan)
    assert not (d / ".kafka_cleanshutdown").exists()
    from kafkalog.storage.files.checkpoints import read_offset_checkpoint

    rp = read_offset_checkpoint(d / "recovery-point-offset-checkpoint").to_dict()
    assert rp[("multi-segment", 0)] == 0 and rp[("codec-none", 0)] == 60


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_retain(tmp_path, fixture):
    d = tmp_path / "data"
    damaged_copy(fixture, d, ("unclean",))
    _check(lambda: plan_retention([d], now_ms=NOW), [d])


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_compact(tmp_path, fixture):
    d = tmp_path / "data"
    damaged_copy(fixture, d, ())
    _roll_active(d)
    cfg = dict(force=True, kafka_version=(4, 0))
    _check(lambda: plan_compact([d], now_ms=NOW, **cfg), [d],
           exact_plan=lambda: plan_compact([d], now_ms=NOW, exact=True, **cfg))


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_convert(tmp_path, fixture):
    d = tmp_path / "data"
    damaged_copy(fixture, d, ())
    opts = ConvertOptions(codec="zstd") if "kraft" in fixture else ConvertOptions()
    _check(lambda: plan_convert([d], opts), [d])


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_migrate(tmp_path, fixture):
    src = tmp_path / "src"
    damaged_copy(fixture, src, ())
    dst = tmp_path / "dst"
    part = sorted(p for p in src.iterdir() if p.is_dir() and not p.name.startswith("__") and any(p.glob("*.log")))[0]
    opts = MigrateOptions(topic="moved", cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=1)
    _check(lambda: plan_migrate(part, dst, opts), [dst], again=False)  # a second copy is refused: it exists


def test_checkpoints_and_topic_id(tmp_path):
    d = tmp_path / "data"
    damaged_copy("kafka-4.3.1-kraft", d, ())
    _check(lambda: plan_set_checkpoints(d, "recovery-point", {("codec-none", 0): 7}), [d])
    _check(lambda: plan_topic_id([d / "codec-none-0"], "AAAAAAAAAAAAAAAAAAAAAQ"), [d])


def test_no_op_makes_no_backup_and_no_lock(tmp_path):
    d = tmp_path / "data"
    damaged_copy("kafka-4.3.1-kraft", d, ())
    before = tree(d)
    for plan in (plan_repair([d], now_ms=NOW), plan_reindex([d]), plan_flush([d], now_ms=NOW),
                 plan_compact([d], now_ms=NOW)):
        assert not plan.changes, (plan.operation, [op.describe() for op in plan.ops()][:3])
        res = apply(plan)
        assert res.operations == 0 and not res.backups
    assert tree(d) == before
    assert not (d / ".lock").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["data"], "a backup folder was created"


def test_two_runs_never_share_a_backup_folder(tmp_path):
    roots = set()
    for i in range(2):
        d = tmp_path / f"d{i}" / "data"
        damaged_copy("kafka-4.3.1-kraft", d, ("unclean",))
        res = apply(plan_retention([d], now_ms=NOW))
        roots.update(res.backups)
        assert res.backups and all(os.path.isdir(b) for b in res.backups)
    assert len(roots) == 2


def test_a_backup_folder_inside_a_data_dir_is_refused(tmp_path):
    """`repair --backup DATA/bk DATA` kept the originals in DATA/bk/DATA and exited 0, leaving a folder the broker
    refuses to load the data dir for ('bk' is not in the form of topic-partition): refused before any change."""
    d = tmp_path / "data"
    damaged_copy("kafka-4.3.1-kraft", d, ("unclean", "torn_tail"))
    before = tree(d)
    for root in (d / "bk", d, d / "multi-segment-0" / "bk"):
        with pytest.raises(PlanError, match=f"the backup folder {root} is inside the data dir {d}"):
            apply(plan_repair([d], now_ms=NOW), backup_root=root)
        assert tree(d) == before
    other = tmp_path / "other"
    damaged_copy("kafka-4.3.1-kraft", other, ())
    with pytest.raises(PlanError, match=f"the backup folder {other / 'bk'} is inside the data dir {other}"):
        apply(plan_repair([d], now_ms=NOW), backup_root=other / "bk")
    assert tree(d) == before and not (other / "bk").exists()
    assert apply(plan_repair([d], now_ms=NOW), backup_root=tmp_path / "bk").backups == [str(tmp_path / "bk" / "data")]


def test_settings_and_sources_are_in_the_plan(tmp_path):
    d = tmp_path / "data"
    damaged_copy("kafka-4.3.1-kraft", d, ())
    plan = plan_retention([d], now_ms=NOW)
    none = next(p for p in plan.partitions if p.name == "codec-none-0")
    assert {"name": "retention.ms", "value": 604800000, "source": "Kafka default"} in none.settings
    compacted = next(p for p in plan.partitions if p.name == "compacted-0")
    policy = next(s for s in compacted.settings if s["name"] == "cleanup.policy")
    assert policy["value"] == "compact" and "__cluster_metadata snapshot" in policy["source"]
    assert not compacted.ops, "a compacted topic whose policy lives only in a metadata snapshot lost segments"
    assert none.losses and none.losses[0].setting == Setting("retention.ms", 604800000, "Kafka default")


def test_fixed_config_is_used_for_every_topic(tmp_path):
    d = tmp_path / "data"
    damaged_copy("kafka-4.3.1-kraft", d, ())
    from kafkalog.storage.config.resolver import ConfigResolver

    cfg = LogConfig().with_overrides({"retention.ms": "-1"})
    plan = plan_retention([d], now_ms=NOW, resolver=ConfigResolver(config=cfg))
    assert not plan.changes


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_commands_on_every_pristine_fixture(tmp_path, fixture, capsys):
    """`repair`, `reindex`, `compact` and `retain --dry-run` succeed on every bundled fixture as the broker left it;
    on a dir that shut down cleanly, `repair` and `reindex` change nothing, exit 0 and make no backup."""
    from kafkalog.tools.cli import main

    d = tmp_path / "data"
    damaged_copy(fixture, d, ())
    clean = (d / ".kafka_cleanshutdown").exists()
    before = tree(d)
    for argv in (["repair", str(d)], ["reindex", str(d)]):
        rc = main(argv)
        assert rc in (0, 1) and (rc == 0 or not clean), (argv, capsys.readouterr().out[-3000:])
    if clean:
        assert tree(d) == before
        assert [p.name for p in tmp_path.iterdir()] == ["data"], "a no-op run made a backup folder"
    assert main(["retain", str(d), "--dry-run", "--now", str(NOW)]) == 0
    assert main(["compact", str(d), "--no-backup", "--now", str(NOW)]) == 0
    assert "ERROR" not in capsys.readouterr().out


def test_repair_keeps_a_tiered_partitions_log_start(tmp_path, capsys):
    """`repair` on the tiered fixture as the broker left it (clean shutdown) changes nothing: for a
    remote.storage.enable topic Kafka 4.3.1 takes the log start offset from log-start-offset-checkpoint alone
    (LogLoader: isRemoteLogEnabled ? checkpoint : max(checkpoint, first segment)), below the local log start."""
    from kafkalog.tools.cli import main

    d = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-tiered" / "data", d)
    before = tree(d)
    assert main(["repair", str(d)]) == 0
    assert tree(d) == before, capsys.readouterr().out[-3000:]


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_compact_from_a_reset_clean_point(tmp_path, fixture):
    """With cleaner-offset-checkpoint gone, the cleaner starts over from the log start: broker-written empty
    batches (count 0, kept for producer state) are in its way and must be handled, as the broker does (issue 17:
    this was an internal error)."""
    d = tmp_path / "data"
    damaged_copy(fixture, d, ())
    (d / "cleaner-offset-checkpoint").unlink(missing_ok=True)
    if not plan_compact([d], now_ms=NOW, exact=True).changes:  # nothing compacted in this broker's dir
        assert apply(plan_compact([d], now_ms=NOW)).operations == 0
        return
    _check(lambda: plan_compact([d], now_ms=NOW), [d], exact_plan=lambda: plan_compact([d], now_ms=NOW, exact=True))


def test_rehydrate(tmp_path):
    from builders import local_tiered_storage

    from kafkalog.storage.remote import open_remote_store
    from kafkalog.storage.remote.rehydrate import RehydrateOptions, plan_rehydrate

    src = tmp_path / "src"
    damaged_copy("kafka-4.3.1-kraft", src, ())
    local_tiered_storage(tmp_path / "remote", src / "multi-segment-0")
    d = tmp_path / "data"
    damaged_copy("kafka-4.3.1-kraft", d, ())
    shutil.rmtree(d / "multi-segment-0")
    store = open_remote_store(tmp_path / "remote")
    _check(lambda: plan_rehydrate(store, d, RehydrateOptions(topic="multi-segment")), [d], again=False)


def test_flush_and_retain_keep_a_tiered_partitions_log_start_and_segments(tmp_path, capsys):
    """`flush` keeps a tiered partition's checkpointed log start (below its first local segment), as the broker's
    clean shutdown writes it (LogManager.checkpointLogStartOffsetsInDir: remoteLogEnabled || start > first base);
    `retain` never deletes a tiered partition's local segments (the broker does, once they are uploaded)."""
    from kafkalog.tools.cli import main

    d = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-4.3.1-tiered" / "data", d)
    ckpt = (d / "log-start-offset-checkpoint").read_bytes()
    assert b"tiered 0 0" in ckpt
    assert main(["flush", str(d), "--no-backup"]) == 0
    assert (d / "log-start-offset-checkpoint").read_bytes() == ckpt
    tiered = {p: sorted(x.name for x in (d / p).iterdir()) for p in ("tiered-0", "tiered-1")}
    assert main(["retain", str(d), "--no-backup", "--now", str(NOW)]) == 0
    out = capsys.readouterr().out
    assert "a tiered-storage topic (remote.storage.enable)" in out
    assert {p: sorted(x.name for x in (d / p).iterdir()) for p in tiered} == tiered
    assert b"tiered 0 0" in (d / "log-start-offset-checkpoint").read_bytes()
