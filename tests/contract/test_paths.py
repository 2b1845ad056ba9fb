"""The one path contract (issue 34, items 2 and 7): what a command argument is, one message and one exit code per
case, the same from every command; and no command writes into a directory it has not recognised as a data dir.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from builders import KRAFT_META, indexed_partition, write_data_dir_files
from contract_registry import PATH_CASES
from damage import FIXTURES
from test_matrix import snapshot

from kafkalog.storage.engine.migrate import MigrateOptions
from kafkalog.storage.engine.offset_checkpoints import plan_set_checkpoints
from kafkalog.storage.engine.plan import DataDirPlan, Plan, apply
from kafkalog.storage.engine.repair import plan_repair
from kafkalog.storage.io.ops import Blob, WriteFile
from kafkalog.storage.log import paths
from kafkalog.tools import cli

FIXTURE = FIXTURES / "kafka-4.3.1-kraft" / "data"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = cli.main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


# ---------------------------------------------------------------------------------------- what a path is
def test_what_a_data_dir_is(tmp_path: Path) -> None:
    meta = write_data_dir_files(tmp_path / "meta", meta=KRAFT_META)
    cps = write_data_dir_files(tmp_path / "cps", recovery={})
    parts = tmp_path / "parts"
    indexed_partition(parts, "orders-0", n=2)
    deleted = tmp_path / "deleted"
    indexed_partition(deleted, "orders-0.0b2e9c8e1f0a4a0d9a7c4a3b2e1d0c9f-delete", n=2)
    metadata = tmp_path / "kraft"
    (metadata / "__cluster_metadata-0").mkdir(parents=True)
    for d in (meta, cps, parts, deleted, metadata):
        assert paths.classify(d).kind == paths.DATA_DIR, d
    assert paths.classify(parts / "orders-0").kind == paths.PARTITION_DIR
    assert paths.classify(parts / "orders-0" / "00000000000000000000.log").kind == paths.FILE
    # a data dir named like a partition (kafka-logs-0) inside a plain dir: that dir is its parent, not a data dir
    outer = tmp_path / "outer"
    write_data_dir_files(outer / "kafka-logs-0", meta=KRAFT_META)
    with pytest.raises(paths.PathError) as e:
        paths.classify(outer)
    assert e.value.case == paths.PARENT and e.value.data_dirs == (str(outer / "kafka-logs-0"),)


def make_path_case(tmp_path: Path, case: str) -> Path:
    """A path of one case of the contract, made under ``tmp_path``."""
    p = {"missing": tmp_path / "nope", "file": tmp_path / "f.txt", "empty": tmp_path / "e",
         "not_kafka": tmp_path / "docs", "parent": tmp_path / "parent"}[case]
    if case == "file":
        p.write_text("x")
    elif case == "empty":
        p.mkdir()
    elif case == "not_kafka":
        (p / "sub").mkdir(parents=True)
        (p / "notes.md").write_text("x")
    elif case == "parent":
        write_data_dir_files(p / "data", meta=KRAFT_META)
    return p


@pytest.mark.parametrize("case", PATH_CASES)
def test_one_error_per_case(tmp_path: Path, case: str) -> None:
    p = make_path_case(tmp_path, case)
    with pytest.raises(paths.PathError) as e:
        paths.require(p)
    want = {"missing": paths.MISSING, "file": paths.NOT_A_DIRECTORY, "empty": paths.EMPTY,
            "not_kafka": paths.NOT_KAFKA, "parent": paths.PARENT}[case]
    assert e.value.case == want and e.value.path == str(p) and str(e.value).startswith(f"{p}: ")


@pytest.mark.parametrize("case", PATH_CASES)
def test_the_library_answers_as_the_cli(tmp_path: Path, case: str) -> None:
    """describe_paths, verify_paths and diagnose answered a missing path in their own words (a description row
    named after it, ``no such file``, ``not a directory``): library callers get the contract's PathError, the
    one the CLI prints, raised by the call itself."""
    from kafkalog.storage.reports.describe import describe_paths
    from kafkalog.storage.reports.doctor import diagnose
    from kafkalog.storage.reports.verify import verify_paths

    p = make_path_case(tmp_path, case)
    calls = {"describe_paths": (lambda: describe_paths([FIXTURE, p]), paths.require),
             "diagnose": (lambda: diagnose([FIXTURE, p], now_ms=0, legacy=False), paths.require_data_dir)}
    if case != "file":  # verify reads single files
        calls["verify_paths"] = (lambda: verify_paths([FIXTURE, p], workers=1), paths.classify)
    for name, (call, contract) in calls.items():
        with pytest.raises(paths.PathError) as want:
            contract(p)
        with pytest.raises(paths.PathError) as got:
            call()
        assert (got.value.case, str(got.value)) == (want.value.case, str(want.value)), name


def test_a_destination_may_be_new(tmp_path: Path) -> None:
    assert paths.require_destination(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "empty").mkdir()
    assert paths.require_destination(tmp_path / "empty") == tmp_path / "empty"
    with pytest.raises(paths.PathError) as e:
        paths.require_destination(tmp_path / "no" / "new")
    assert e.value.case == paths.MISSING
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("x")
    with pytest.raises(paths.PathError) as e:
        paths.require_destination(tmp_path / "docs")
    assert e.value.case == paths.NOT_KAFKA


def test_a_new_destination_inside_a_data_dir_is_refused(tmp_path: Path, capsys) -> None:
    """`import x.jsonl DATA/new` and `migrate P DATA/new` made DATA/new, a folder the broker refuses to load DATA
    for ('new' is not in the form of topic-partition): refused, nothing written."""
    data = tmp_path / "data"
    shutil.copytree(FIXTURE, data)
    (data / "empty").mkdir()
    for dest in (data / "new", data / "empty", data / "codec-none-0" / "new"):
        with pytest.raises(paths.PathError, match=f"inside the data dir {data}") as e:
            paths.require_destination(dest)
        assert e.value.case == paths.NOT_KAFKA
    (data / "empty").rmdir()
    before = sorted(p.name for p in data.iterdir())
    src = tmp_path / "in.jsonl"
    src.write_text("")
    for argv in (["import", str(src), str(data / "new")],
                 ["migrate", str(data / "codec-none-0"), str(data / "new"), "--cluster-id", "Aw5EClUXSoGxHhT0nCIykw",
                  "--node-id", "1", "--no-backup"]):
        assert cli.main(argv) == 1
        assert f"{data / 'new'}: inside the data dir {data}" in capsys.readouterr().err
    assert sorted(p.name for p in data.iterdir()) == before


# ------------------------------------------------------------------------- item 2: nothing written outside
def test_repair_of_the_parent_of_a_data_dir_writes_nothing(tmp_path: Path, capsys) -> None:
    """Issue 34 item 2: ``repair parent`` wrote .kafka_cleanshutdown, .lock and checkpoints into ``parent/``."""
    parent = tmp_path / "parent"
    shutil.copytree(FIXTURE, parent / "data")
    before = snapshot(tmp_path)
    for argv in (["repair", str(parent)], ["flush", str(parent)], ["retain", "--now", "1900000000000", str(parent)],
                 ["reindex", "--all", str(parent)], ["checkpoints", str(parent), "--file", "recovery-point",
                                                     "--set", "codec-none-0=0"]):
        rc, out, err = _run(capsys, *argv)
        assert rc == 1, (argv, out, err)
        assert err.strip().endswith(f"{parent}: not a Kafka data dir; it contains the data dir(s) {parent / 'data'}: "
                                    "pass those"), (argv, err)
        assert snapshot(tmp_path) == before, argv
    with pytest.raises(paths.PathError):
        plan_repair([parent], now_ms=0)


@pytest.mark.parametrize("what", ["empty", "docs"])
def test_repair_of_a_dir_that_is_not_kafkas_writes_nothing(tmp_path: Path, capsys, what: str) -> None:
    d = tmp_path / what
    d.mkdir()
    if what == "docs":
        (d / "index.md").write_text("# docs\n")
    before = snapshot(tmp_path)
    rc, out, err = _run(capsys, "repair", str(d))
    assert rc == 1 and f"{d}: " in err and "applied" not in out
    assert snapshot(tmp_path) == before


def test_apply_refuses_a_plan_into_a_dir_that_is_not_a_data_dir(tmp_path: Path) -> None:
    """The last line of defence: ``apply`` itself writes only into a data dir (or one the plan creates)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("x")
    plan = Plan("test")
    dp = DataDirPlan(str(docs))
    dp.ops.append(WriteFile(str(docs / "recovery-point-offset-checkpoint"), "a checkpoint", Blob(b"0\n0\n")))
    plan.data_dirs.append(dp)
    before = snapshot(tmp_path)
    with pytest.raises(paths.PathError):
        apply(plan, backup=False)
    assert snapshot(tmp_path) == before


def test_only_a_data_dir_gets_its_own_files_written(tmp_path: Path) -> None:
    """An empty dir may become a new data dir by a plan that installs partitions into it (import, migrate,
    rehydrate), not by one that only writes a data dir's own files (``checkpoints --set`` from the library)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    plan = plan_set_checkpoints(empty, "recovery-point", {("t", 0): 5})
    with pytest.raises(paths.PathError) as e:
        apply(plan, backup=False)
    assert e.value.case == paths.EMPTY and not list(empty.iterdir())


# --------------------------------------------------------------- item 7: one answer for a path that is missing
COMMANDS_ON_A_PATH = [["describe"], ["doctor"], ["repair"], ["export", "--out", "{tmp}/out.jsonl"], ["retain"],
                      ["compact"], ["verify"], ["flush"], ["reindex"], ["convert", "--codec", "zstd"], ["topic-id"],
                      ["checkpoints"]]


def test_a_missing_path_gets_one_answer_from_every_command(tmp_path: Path, capsys) -> None:
    """Issue 34 item 7: ``describe /nonexistent`` printed a row; doctor and repair said ``not a directory`` with
    exit 2; export, retain and compact ``no such directory``; verify ``no such file``."""
    missing = tmp_path / "nonexistent"
    answers = set()
    for cmd in COMMANDS_ON_A_PATH:
        rc, out, err = _run(capsys, *[a.format(tmp=tmp_path) for a in cmd], str(missing))
        assert out == "", (cmd, out)
        answers.add((rc, err.split(": error: ", 1)[-1]))
    assert answers == {(1, f"{missing}: no such file or directory\n")}
    assert not list(tmp_path.iterdir())


def test_a_file_where_a_dir_is_expected_gets_one_answer(tmp_path: Path, capsys) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("x")
    answers = set()
    for cmd in (["describe"], ["export", "--out", "-"], ["retain"], ["compact"], ["reindex"], ["topic-id"]):
        rc, _out, err = _run(capsys, *cmd, str(f))
        answers.add((rc, err.split(": error: ", 1)[-1]))
    assert answers == {(1, f"{f}: not a directory (expected a Kafka data dir (an entry of log.dirs) or a Kafka "
                           "partition dir)\n")}
    for cmd in (["doctor"], ["repair"], ["flush"], ["checkpoints"]):
        rc, _out, err = _run(capsys, *cmd, str(f))
        assert rc == 1 and err.endswith(f"{f}: not a directory (expected a Kafka data dir (an entry of log.dirs))\n")


# ------------------------------------------------------------------- a file:// URL is the local path it names
READING = [["describe", "--json"], ["verify", "--json"], ["doctor", "--json"], ["groups", "--json"],
           ["transactions"], ["sql", "{dir}", "SELECT partition, count(*) n FROM records GROUP BY 1 ORDER BY 1"],
           ["diff", "{dir}"], ["export", "--out", "-"], ["dump", "--json", "{log}"]]


def _file_url(p: Path) -> str:
    return "file://" + str(p).replace(" ", "%20")


@pytest.mark.parametrize("cmd", READING, ids=lambda c: c[0])
def test_a_file_url_is_the_local_path_it_names(tmp_path: Path, capsys, cmd: list[str]) -> None:
    """``kafkalog describe file:///data/kafka`` was refused as 'a URL: this command reads and changes local data
    dirs only', while the commands' help and the planner (``fs.split_uri``) take ``file://`` as local."""
    data = tmp_path / "my data"  # (a space: %20 in the URL)
    shutil.copytree(FIXTURE, data)
    log = sorted((data / "codec-none-0").glob("*.log"))[0]

    def argv(d: Path, as_url: bool) -> list[str]:
        name = _file_url if as_url else str
        args = [a.format(dir=name(d), log=name(log)) for a in cmd]
        return args if "{log}" in "".join(cmd) or cmd[0] == "sql" else [*args, name(d)]

    def run(as_url: bool) -> tuple[int, str, str]:
        rc, out, err = _run(capsys, *argv(data, as_url))
        return rc, out, re.sub(r"[\d.]+ (s|MiB/s)\b", "T", err)  # (verify's summary times itself)

    local, url = run(False), run(True)
    assert local[0] in (0, 4) and (local[1] or local[2]), local  # (doctor: exit 4 for what the fixture holds)
    assert url == local


def test_the_library_and_a_plan_take_a_file_url(tmp_path: Path) -> None:
    import kafkalog

    data = tmp_path / "d"
    shutil.copytree(FIXTURE, data)
    with kafkalog.open(_file_url(data)) as by_url, kafkalog.open(data) as by_path:
        assert by_url.paths == by_path.paths == [data]
        assert by_url.to_arrow().read_all().equals(by_path.to_arrow().read_all())
        assert list(by_url.plan_repair(now_ms=0).ops()) == list(by_path.plan_repair(now_ms=0).ops())
        assert by_url.diff(_file_url(data)).equal
        dest = tmp_path / "copy"
        opts = MigrateOptions(cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=1)
        where = [str(getattr(o, "path", "")) for o in by_path.plan_migrate(dest, opts).ops()]  # (a new directory.id each)
        assert [str(getattr(o, "path", "")) for o in by_url.plan_migrate(_file_url(dest), opts).ops()] == where
        assert any(w.startswith(str(dest)) for w in where)
    assert paths.classify(_file_url(data / "codec-none-0")).path == data / "codec-none-0"
