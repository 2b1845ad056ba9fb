"""The documentation lives in the repository and only refers to the repository.

* no file under storage/, tools/, compat/, tests/, docs/ (nor README.md, CONTRIBUTING.md) cites a path outside the
  repository (``../shared``, an absolute ``/work/`` path) or a "spec NN-name" section of a document that is not
  here: the formats and rules are in ``docs/formats.md`` and ``docs/semantics.md``;
* every relative link of README.md, CONTRIBUTING.md and docs/**.md points at a file that exists, and a
  ``#anchor`` into a markdown file at one of its headings;
* every ``docs/...md#anchor`` cited in a docstring or comment exists;
* every command of ``kafkalog --help`` has its page in docs/commands/ and docs/README.md links every page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED_DIRS = ["storage", "tools", "compat", "tests", "docs"]
SCANNED_FILES = ["README.md", "CONTRIBUTING.md"]
SUFFIXES = {".py", ".md", ".txt", ".toml", ".cfg", ".ini", ".sh", ".rs"}
SKIP_PARTS = {"__pycache__", "target", ".pytest_cache", ".hypothesis"}

# "../shared/...", "/work/...", "spec 40-log-engine §5", "(20-indexes §4.2)", "50-cleaner §8"
OUTSIDE = re.compile(r"\.\./shared|(?<![\w.])/work/")
SPEC_CITATION = re.compile(r"\bspec \d{2}\b|\b\d{2}-(?:layout|records|indexes|checkpoints|log-engine|cleaner|tools|"
                           r"versions)\b(?:\.md)?(?:\s*§|\b)")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
DOC_ANCHOR_CITE = re.compile(r"docs/([\w/.-]+\.md)#([\w-]+)")
THIS_FILE = Path(__file__).resolve()


def _scanned() -> list[Path]:
    files = [ROOT / f for f in SCANNED_FILES]
    for d in SCANNED_DIRS:
        for p in sorted((ROOT / d).rglob("*")):
            if p.is_file() and p.suffix in SUFFIXES and not SKIP_PARTS & set(p.relative_to(ROOT).parts):
                files.append(p)
    return [p for p in files if p.resolve() != THIS_FILE]


def _markdown() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (but - and _), spaces -> -."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(md: Path) -> set[str]:
    found: set[str] = set()
    in_code = False
    for line in md.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            base = slug(line.lstrip("#"))
            name, n = base, 1
            while name in found:
                name, n = f"{base}-{n}", n + 1
            found.add(name)
    return found


def test_nothing_refers_outside_the_repository() -> None:
    bad = []
    for p in _scanned():
        for no, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line) or SPEC_CITATION.search(line):
                bad.append(f"{p.relative_to(ROOT)}:{no}: {line.strip()[:120]}")
    assert not bad, ("cite docs/formats.md#..., docs/semantics.md#... or Kafka's source instead of a document "
                     "outside the repository:\n" + "\n".join(bad))


def _links(md: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", md.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return LINK.findall(text)


@pytest.mark.parametrize("md", _markdown(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(md: Path) -> None:
    bad = []
    for target in _links(md):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
            continue  # https:, mailto: ...
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        if path and not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and dest.is_file() and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}")
        elif path and not dest.resolve().is_relative_to(ROOT):
            bad.append(f"{target}: outside the repository")
    assert not bad, f"{md.relative_to(ROOT)}:\n" + "\n".join(bad)


def test_docstring_citations_of_docs_resolve() -> None:
    bad = []
    cache: dict[Path, set[str]] = {}
    for p in _scanned():
        for no, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            for page, anchor in DOC_ANCHOR_CITE.findall(line):
                md = ROOT / "docs" / page
                if not md.is_file():
                    bad.append(f"{p.relative_to(ROOT)}:{no}: docs/{page} does not exist")
                    continue
                if md not in cache:
                    cache[md] = anchors(md)
                if anchor not in cache[md]:
                    bad.append(f"{p.relative_to(ROOT)}:{no}: docs/{page} has no heading #{anchor}")
    assert not bad, "\n".join(bad)


def test_every_command_has_a_page_linked_from_the_index() -> None:
    from kafkalog.tools.cli import COMMANDS

    commands = sorted(COMMANDS)
    pages = {p.stem for p in (ROOT / "docs" / "commands").glob("*.md")}
    assert not set(commands) - pages, f"commands without a page in docs/commands/: {set(commands) - pages}"
    index = (ROOT / "docs" / "README.md").read_text()
    unlinked = [p for p in sorted((ROOT / "docs").rglob("*.md"))
                if p.name != "README.md" and f"({p.relative_to(ROOT / 'docs')})" not in index]
    assert not unlinked, f"docs/README.md does not link {unlinked}"
    assert "docs/README.md" in (ROOT / "README.md").read_text(), "README.md does not link docs/README.md"


def test_slug() -> None:
    assert slug("Segment replacement: .cleaned, .swap, .deleted") == "segment-replacement-cleaned-swap-deleted"
    assert slug("`partition.metadata`") == "partitionmetadata"
    assert slug("Record batches (v2)") == "record-batches-v2"
