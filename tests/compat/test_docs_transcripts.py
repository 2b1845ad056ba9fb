"""The Python transcripts (```` ```pycon ```` blocks) of ``docs/commands/*.md`` are real: each page's ``>>>``
examples run as a doctest from the repository root, against the bundled fixtures."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from kafkalog.compat.pytest_plugin import require_modules

ROOT = Path(__file__).resolve().parents[2]
PAGES = [p for p in sorted((ROOT / "docs" / "commands").glob("*.md")) if "```pycon" in p.read_text(encoding="utf-8")]
#: what each page's transcript imports beyond kafkalog (the extra that brings it)
NEEDS = {"sql.md": (("duckdb", "pyarrow", "pandas", "polars"), "sql")}


def test_the_sql_page_has_a_transcript():
    assert [p.name for p in PAGES] == ["sql.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_transcript(page: Path, monkeypatch):
    modules, extra = NEEDS.get(page.name, ((), ""))
    require_modules(*modules, extra=extra)
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
