"""Synthetic batches, segments, partition dirs and data dirs are built in one place, ``tests/builders.py``: a test
file (``test_*.py``, ``conftest.py``) that defines its own builder function under one of the usual names fails
here, so the copies do not come back. Pytest fixtures are exempt (a fixture named ``partition`` is a use, and
builds through ``builders``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
BUILDER_NAME = re.compile(
    r"^_*(?:make|build|write|mk|new|create|gen)_?"
    r"(?:batch|batches|record_batch|segment|segments|log_segment|partition|partitions|partition_dir|data_?dir|log_dir"
    r"|logdir)$"
    r"|^_(?:batch|segment|partition|data_dir)$"  # a private singular noun builds one (``_segments(d)`` lists them)
)


def _is_fixture(fn: ast.FunctionDef) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Attribute) and target.attr == "fixture":
            return True
        if isinstance(target, ast.Name) and target.id == "fixture":
            return True
    return False


def builder_definitions(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of the builder functions ``source`` defines (at any depth), fixtures excepted."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _is_fixture(node):
            if BUILDER_NAME.match(node.name):
                found.append((node.lineno, node.name))
    return found


def test_builders_are_not_redefined_in_test_files() -> None:
    bad = []
    for p in sorted(TESTS.rglob("*.py")):
        if p.name == "builders.py" or not (p.name.startswith("test_") or p.name == "conftest.py"):
            continue
        for line, name in builder_definitions(p.read_text()):
            bad.append(f"{p.relative_to(TESTS.parent)}:{line}: def {name}")
    assert not bad, ("build synthetic batches/segments/partitions/data dirs with tests/builders.py (add what is "
                     "missing there) instead of a local helper:\n" + "\n".join(bad))


def test_the_check_recognises_builders() -> None:
    src = '''
import pytest
def write_segment(d, base, batches): ...
def _batch(base): ...
def make_data_dir(root): ...
def _write_segment(d, recs): ...
def make_partition(root, name): ...
def records(d): ...
def batches(d): ...
def _segments(d): ...
@pytest.fixture
def partition(tmp_path): ...
def test_x():
    def build_segment(): ...
'''
    assert [n for _, n in builder_definitions(src)] == ["write_segment", "_batch", "make_data_dir", "_write_segment",
                                                        "make_partition", "build_segment"]
