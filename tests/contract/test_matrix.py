"""The contract matrix (issue 34): every registered command x every path case x every damage case.

Generated from :mod:`contract_registry`: a command joins by being registered there (and
:func:`test_every_command_is_registered` fails when ``kafkalog.tools.cli.COMMANDS`` has one that is not). Each
cell runs the command in-process (``kafkalog.tools.cli.main(argv)``, output captured) in its own folder and
asserts:

* the exit code class: a path case is exit 1 (README: 1 is "findings or failure", 2 stays a usage error), never
  a traceback, 2 or 3; a damage cell exits 0 or 1;
* a path case's message names the path (and, for the parent of a data dir, the data dir inside it) and says what
  the one path contract says for the case (:data:`SAYS`, from ``kafkalog.storage.log.paths``), the same from every
  command;
* nothing was written outside a recognised data dir: the whole cell folder is hashed before and after; a path
  case may write nothing at all (a destination may become a new data dir where the command documents it: a
  path that does not exist yet, an empty dir), a damage cell only inside its data dir and the command's
  designated output (``{out}``);
* no record vanished without a report: a reader exiting 0 over a damage that lost records it reads
  (``Invocation.reads``, of :data:`damage.LOSING`) fails; a mutating command that does not remove records by design exiting 0 must leave
  every record it could read before.

The matrix size is :data:`SIZE` (printed by :func:`test_matrix_size`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from contract_registry import EXEMPT, PATH_CASES, REGISTRY, Invocation
from damage import FIXTURES, LOSSES, records

from kafkalog.tools import cli

FIXTURE = FIXTURES / "kafka-4.3.1-kraft" / "data"
STORE = FIXTURES / "kafka-4.3.1-tiered" / "remote"
VICTIM = "multi-segment-0"  # the partition every damage of damage.LOSSES picks on this fixture

PATH_CELLS = [(name, case) for name, inv in REGISTRY.items() for case in inv.cases]
DAMAGE_CELLS = [(name, damage) for name, inv in REGISTRY.items() if inv.target for damage in LOSSES]
#: what the one path contract says for each path case, whichever command meets it
SAYS = {"missing": "no such file or directory", "file": "not a directory", "empty": "empty directory, not a",
        "not_kafka": "not a Kafka data dir", "parent": "not a Kafka data dir; it contains the data dir(s)"}
SIZE = (len(REGISTRY), len(PATH_CASES) + len(LOSSES), len(PATH_CELLS) + len(DAMAGE_CELLS))


# ---------------------------------------------------------------------------------------------------- helpers
def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root``: relative path -> kind and content hash (directories and symlinks included)."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = "file:" + hashlib.sha1(p.read_bytes()).hexdigest()
    return out


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def inside(rel: str, allowed: tuple[str, ...]) -> bool:
    return any(rel == a or rel.startswith(a + os.sep) for a in allowed)


def run(argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse
        rc = e.code if isinstance(e.code, int) else 2
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


def argv_of(inv: Invocation, path: Path, root: Path, inputs: Path) -> list[str]:
    return [a.format(path=path, out=root / "out", inputs=inputs, pristine=FIXTURE, store=STORE) for a in inv.argv]


def make_case(root: Path, case: str) -> tuple[Path, str]:
    """The path of a path case under ``root``, and what its message must also name."""
    if case == "missing":
        return root / "nonexistent", ""
    if case == "file":
        p = root / "notes.txt"
        p.write_text("not Kafka's\n")
        return p, ""
    if case == "empty":
        p = root / "empty"
        p.mkdir()
        return p, ""
    if case == "not_kafka":
        p = root / "docs"
        p.mkdir()
        (p / "README.md").write_text("# notes\n")
        (p / "images").mkdir()
        return p, ""
    if case == "parent":
        p = root / "parent"
        p.mkdir()
        shutil.copytree(FIXTURE, p / "data")
        return p, str(p / "data")
    raise AssertionError(case)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """The inputs of ``append`` and ``import`` (read-only, outside every cell's folder)."""
    from kafkalog.storage.engine.export import ExportFilter, export_jsonl

    d = tmp_path_factory.mktemp("inputs")
    (d / "append.jsonl").write_text("".join(
        json.dumps({"key": None, "value": "dmFsdWU=", "timestamp": 1750000000000 + i}) + "\n" for i in range(5)))
    export_jsonl([FIXTURE / "codec-none-0"], d / "export.jsonl", ExportFilter(topics={"codec-none"}))
    return d


# ------------------------------------------------------------------------------------------------------ cells
def test_every_command_is_registered() -> None:
    registered = {inv.command for inv in REGISTRY.values()}
    missing = set(cli.COMMANDS) - registered - set(EXEMPT)
    assert not missing, f"commands not in tests/contract/contract_registry.py (REGISTRY or EXEMPT): {sorted(missing)}"
    assert not (registered | set(EXEMPT)) - set(cli.COMMANDS), "the registry names commands the CLI does not have"
    assert not registered & set(EXEMPT)


def test_matrix_size() -> None:
    commands, cases, cells = SIZE
    print(f"\ncontract matrix: {commands} invocations ({len(cli.COMMANDS) - len(EXEMPT)} commands) x {cases} cases "
          f"({len(PATH_CASES)} path + {len(LOSSES)} damage) = {cells} cells")
    assert cells == len(PATH_CELLS) + len(DAMAGE_CELLS) > 100


@pytest.fixture
def root(tmp_path: Path, monkeypatch) -> Path:
    """A cell's own folder, the working directory of the command it runs."""
    root = tmp_path / "cell"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def run_cell(cell: str, inv, path: Path, root: Path, inputs: Path, capsys) -> tuple[int, str, set[str]]:
    """Run the invocation ``inv`` of a cell over ``path``: its exit, its output and what it changed under ``root``
    (no traceback, whatever it did)."""
    before = snapshot(root)
    rc, text = run(argv_of(inv, path, root, inputs), capsys)
    diff = changed(before, snapshot(root))
    assert "Traceback" not in text and "internal error" not in text, f"{cell}: {text[-2000:]}"
    return rc, text, diff


@pytest.mark.parametrize(("name", "case"), PATH_CELLS, ids=[f"{n}-{c}" for n, c in PATH_CELLS])
def test_path_case(name: str, case: str, root: Path, inputs: Path, capsys) -> None:
    inv = REGISTRY[name]
    path, also = make_case(root, case)
    rc, text, diff = run_cell(f"{name} {case}", inv, path, root, inputs, capsys)
    new_data_dir = inv.role == "destination" and case in ("missing", "empty")
    if new_data_dir:  # a new data dir, where the command documents it: exit 0 and writes inside it only, or refused
        rel = str(path.relative_to(root))
        assert rc in (0, 1), f"{name} {case}: exit {rc}\n{text[-2000:]}"
        assert all(inside(k, (rel,)) for k in diff), f"{name} {case} wrote outside {path}: {sorted(diff)}"
        if rc == 1:
            assert str(path) in text, f"{name} {case}: the message does not name {path}:\n{text[-2000:]}"
        return
    assert rc == 1, f"{name} {case}: exit {rc}, expected 1\n{text[-2000:]}"
    assert str(path) in text, f"{name} {case}: the message does not name {path}:\n{text[-2000:]}"
    if inv.role != "store":  # a tiered-storage store has its own rules (remote/layout.py)
        assert f"{path}: {SAYS[case]}" in text, f"{name} {case}: not the contract's '{SAYS[case]}':\n{text[-2000:]}"
    if also:
        assert also in text, f"{name} {case}: the message does not name the data dir {also} inside:\n{text[-2000:]}"
    assert not diff, f"{name} {case} wrote into what is not a data dir: {sorted(diff)}"


@pytest.mark.parametrize(("name", "damage"), DAMAGE_CELLS, ids=[f"{n}-{d}" for n, d in DAMAGE_CELLS])
def test_damage_case(name: str, damage: str, root: Path, inputs: Path, capsys) -> None:
    inv = REGISTRY[name]
    data = root / "data"
    shutil.copytree(FIXTURE, data)
    assert LOSSES[damage](data), f"{damage} does not apply to {FIXTURE}"
    path = data / VICTIM if inv.target == "victim" else data
    check_records = inv.mutating and not inv.removes and inv.role != "destination"
    try:
        held = records(data) if check_records else None
    except Exception:  # noqa: BLE001 - the damage makes the dir unreadable to a strict reader: nothing to compare
        held = None
    rc, text, diff = run_cell(f"{name} {damage}", inv, path, root, inputs, capsys)
    assert rc in (0, 1), f"{name} {damage}: exit {rc}\n{text[-2000:]}"
    outside = {k for k in diff if not inside(k, ("data", "out"))}
    assert not outside, f"{name} {damage} wrote outside the data dir: {sorted(outside)}"
    if not inv.mutating:
        assert not {k for k in diff if inside(k, ("data",))}, f"{name} {damage} (a reader) wrote into the data dir"
    if damage in inv.reads:
        assert rc != 0, f"{name} exited 0 over {damage} of {VICTIM}: records lost without a report\n{text[-2000:]}"
    if held is not None and rc == 0:
        now = records(data)
        lost = {p: sorted(held[p] - now.get(p, set()))[:3] for p in held if held[p] - now.get(p, set())}
        assert not lost, f"{name} exited 0 and records vanished over {damage}: {lost}"
