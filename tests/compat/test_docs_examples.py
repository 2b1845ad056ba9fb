"""The examples of ``docs/commands/*.md`` are real: every ``$ kafkalog ...`` line of a ```` ```console ````
block is run from the repository root and its output compared with the lines below it.

Page conventions (see ``docs/README.md``):

* a console block holds one or more ``$ kafkalog ARGS`` lines, each followed by its output (stdout and stderr
  together); ``[exit N]`` as the last output line states a non-zero exit status (none means exit 0);
* a line that is exactly ``...`` matches any number of lines (none too); ``...`` inside a line matches any text;
* read-only commands run on the bundled fixtures (``fixtures/...``; absolute paths under the repository are
  printed relative to it); commands that change a data dir run on
  ``/tmp/copy``, a placeholder this test replaces with a fresh copy of ``fixtures/kafka-4.3.1-kraft/data``
  (``/tmp/copy-killed``: ``fixtures/kafka-4.3.1-kraft-killed/data``) made once per page, so the examples of a
  page run in order on the same copy;
* ``KAFKALOG_UPDATE_DOCS=1 pytest tests/compat/test_docs_examples.py`` rewrites the output blocks with what
  the commands print now instead of failing, keeping the ``...`` cuts of each block (as many leading and
  trailing lines as before) and the in-line ``...`` of lines that still match.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "commands").glob("*.md"))
UPDATE = os.environ.get("KAFKALOG_UPDATE_DOCS") == "1"
# placeholder -> fixture data dir it is a copy of (longest first: /tmp/copy-killed before /tmp/copy)
COPIES = {"/tmp/copy-killed": "fixtures/kafka-4.3.1-kraft-killed/data", "/tmp/copy": "fixtures/kafka-4.3.1-kraft/data"}
PLACEHOLDER_RE = re.compile(r"/tmp/copy(-killed)?(?![A-Za-z0-9_.])|/tmp/copy(?=[-/])")


@dataclass
class Example:
    command: str          # the text after "$ "
    expected: list[str]   # output lines as written on the page (with [exit N])
    start: int            # index of the first output line in the page's lines
    end: int              # index after the last output line


@dataclass
class Page:
    path: Path
    lines: list[str]
    examples: list[Example] = field(default_factory=list)


def parse_page(path: Path) -> Page:
    lines = path.read_text().split("\n")
    page = Page(path, lines)
    i, in_console = 0, False
    current: Example | None = None
    while i < len(lines):
        line = lines[i]
        if not in_console:
            in_console = line.strip() == "```console"
        elif line.strip() == "```":
            if current is not None:
                current.end = i
                page.examples.append(current)
            in_console, current = False, None
        elif line.startswith("$ "):
            if current is not None:
                current.end = i
                page.examples.append(current)
            current = Example(line[2:], [], i + 1, i + 1)
        elif current is not None:
            current.expected.append(line)
        i += 1
    return page


def kafkalog_argv() -> list[str]:
    exe = Path(sys.executable).with_name("kafkalog")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "import sys; from kafkalog.tools.cli import main; sys.exit(main())"]


def run_example(command: str, copies: dict[str, Path]) -> list[str]:
    args = shlex.split(command)
    assert args and args[0] == "kafkalog", f"an example must start with `$ kafkalog`: {command!r}"
    args = [_substitute(a, copies) for a in args[1:]]
    env = dict(os.environ, TZ="UTC", COLUMNS="110", NO_COLOR="1", KAFKALOG_NO_PROGRESS="1")
    env.pop("CI", None)
    proc = subprocess.run(kafkalog_argv() + args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    out = proc.stdout.replace(str(copies["/tmp/copy"].parent), "/tmp").replace(f"{ROOT}/", "")
    lines = out.rstrip("\n").split("\n") if out.strip() else []
    lines = [ln.rstrip() for ln in lines]
    if proc.returncode != 0:
        lines.append(f"[exit {proc.returncode}]")
    return lines


def _substitute(arg: str, copies: dict[str, Path]) -> str:
    """``/tmp/copy...`` -> the page's copy (``/tmp/copy-out.jsonl`` lands beside it, in the test's tmp dir)."""
    return PLACEHOLDER_RE.sub(lambda m: str(copies[m.group(0)]), arg)


_GAP = re.compile(r" {2,}")


def _line_matches(pattern: str, line: str) -> bool:
    # a table's gaps between columns compare as one gap: the temporary paths in a column (substituted after the
    # table was laid out) differ in length from run to run (pytest's numbered base dir), and so do its pads
    pattern, line = _GAP.sub("  ", pattern.rstrip()), _GAP.sub("  ", line.rstrip())
    if "..." not in pattern:
        return pattern == line
    regex = ".*".join(re.escape(part) for part in pattern.split("..."))
    return re.fullmatch(regex, line) is not None


def matches(expected: list[str], actual: list[str]) -> bool:
    """``expected`` (with ``...`` lines and in-line ``...``) against ``actual``."""
    memo: dict[tuple[int, int], bool] = {}

    def go(i: int, j: int) -> bool:
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(expected):
            ok = j == len(actual)
        elif expected[i].strip() == "...":
            ok = go(i + 1, j) or (j < len(actual) and go(i, j + 1))
        else:
            ok = j < len(actual) and _line_matches(expected[i], actual[j]) and go(i + 1, j + 1)
        memo[key] = ok
        return ok

    return go(0, 0)


def updated_block(expected: list[str], actual: list[str]) -> list[str]:
    """The block to write back: ``actual`` cut as ``expected`` was (leading/trailing lines around ``...``)."""
    cuts = [k for k, ln in enumerate(expected) if ln.strip() == "..."]
    if not cuts:
        new = list(actual)
    else:
        head, tail = cuts[0], len(expected) - cuts[-1] - 1
        if head + tail >= len(actual):
            new = list(actual)
        else:
            new = actual[:head] + ["..."] + (actual[len(actual) - tail:] if tail else [])
    # keep in-line "..." of lines that still match (timestamps, durations, temporary names)
    old_plain = [ln for ln in expected if ln.strip() != "..."]
    for k, line in enumerate(new):
        for old in old_plain:
            if "..." in old and old.strip() != "..." and _line_matches(old, line):
                new[k] = old
                break
    return new


def _make_copies(tmp_path: Path) -> dict[str, Path]:
    copies = {}
    for placeholder, fixture in COPIES.items():
        dest = tmp_path / Path(placeholder).name
        shutil.copytree(ROOT / fixture, dest, symlinks=True)
        copies[placeholder] = dest
    return copies


@pytest.mark.parametrize("page_path", PAGES, ids=[p.stem for p in PAGES])
def test_examples(page_path: Path, tmp_path: Path) -> None:
    page = parse_page(page_path)
    assert page.examples, f"{page_path.name}: no ```console example"
    copies = _make_copies(tmp_path)
    failures = []
    replacements: list[tuple[Example, list[str]]] = []
    for ex in page.examples:
        actual = run_example(ex.command, copies)
        if not matches(ex.expected, actual):
            if UPDATE:
                replacements.append((ex, updated_block(ex.expected, actual)))
            else:
                failures.append(f"$ {ex.command}\n--- page says:\n" + "\n".join(ex.expected)
                                + "\n--- command prints:\n" + "\n".join(actual))
    if replacements:
        lines = list(page.lines)
        for ex, new in sorted(replacements, key=lambda r: -r[0].start):
            lines[ex.start:ex.end] = new
        page_path.write_text("\n".join(lines))
    assert not failures, (f"{page_path.relative_to(ROOT)}: {len(failures)} example(s) print something else "
                          "(rerun with KAFKALOG_UPDATE_DOCS=1 to rewrite the page):\n\n" + "\n\n".join(failures))


def test_matcher() -> None:
    assert matches(["a", "...", "z"], ["a", "b", "c", "z"])
    assert matches(["a", "...", "z"], ["a", "z"])
    assert not matches(["a", "z"], ["a", "b", "z"])
    assert matches(["took ...s", "[exit 1]"], ["took 0.12s", "[exit 1]"])
    assert not matches(["[exit 1]"], [])
    assert updated_block(["a", "...", "z"], ["a", "b", "c", "y"]) == ["a", "...", "y"]
    assert updated_block(["t ...ms"], ["t 5ms"]) == ["t ...ms"]
