"""The layering is enforced, not hoped for: the import contracts (``.importlinter``, checked by ``.ci/imports``
with import-linter, as ``.ci/run`` does) hold on the tree and break on a wrong import; imports inside functions
in ``storage/`` are few, and only of optional dependencies."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]



def _optional_dependencies() -> set[str]:
    """The import names of the optional dependencies: the packages of pyproject's extras but the test one."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[\[<>=!~; ]", req, maxsplit=1)[0].lower().replace("-", "_")
             for extra, reqs in extras.items() if extra not in ("test", "all") for req in reqs}
    return names | {"pyarrow", "pyspark", "fsspec", "duckdb", "s3fs"}


#: imports inside a function or class body allowed in storage/: optional dependencies only, each with a comment
#: saying so
OPTIONAL_DEPENDENCIES = _optional_dependencies()
MAX_FUNCTION_IMPORTS_IN_STORAGE = 10


def _lint(src: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / ".ci" / "imports"), str(src)], capture_output=True, text=True,
                          timeout=300)


def test_the_import_contracts_hold():
    res = _lint()
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    assert " 0 broken" in res.stdout, res.stdout


def _python_only(folder: str, names: list[str]) -> set[str]:
    """copytree's ignore: the code, not the Rust crate, the Java sources or caches."""
    return {n for n in names if n in ("native", "__pycache__", "target")
            or (not n.endswith(".py") and not (Path(folder) / n).is_dir())}


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for p in ("storage", "tools", "compat"):
        shutil.copytree(ROOT / p, src / p, ignore=_python_only)
    return src


PACKAGES = "packages: tools over compat over storage (storage imports neither)"
TOOLS = "tools imports compat (the Kafka harness) only in the conformance command"
LAYERS = "the bottom of storage: files over records over codec over io"
BOTTOM = "codec, records, files and io never import the engines nor the reports"
PRIVATE = "a _private module is imported only inside its package"
ACYCLIC = "no import cycles (between modules of a package, nor between packages)"
STORAGE = "storage's layers point down (api > reports > engine > log > files > io)"
CONTRACTS = (PACKAGES, TOOLS, LAYERS, BOTTOM, PRIVATE, ACYCLIC, STORAGE)

WRONG_IMPORTS = {
    # (module written into the copy, its import, the contract that must break)
    "storage-imports-tools": ("storage/records/wrong.py", "from kafkalog.tools import cli",
                              PACKAGES),
    "storage-imports-compat": ("storage/engine/wrong.py", "from kafkalog.compat import broker",
                               PACKAGES),
    "records-import-an-engine": ("storage/records/wrong.py", "from ..engine import plan",
                                 BOTTOM),
    "files-import-a-report": ("storage/files/wrong.py", "from ..reports import doctor",
                              BOTTOM),
    "the-log-imports-an-engine": ("storage/log/wrong.py", "from ..engine import plan",
                                  STORAGE),
    "an-engine-imports-a-report": ("storage/engine/wrong.py", "from ..reports import groups",
                                   STORAGE),
    "codec-imports-records": ("storage/codec/wrong.py", "from ..records import batch",
                              LAYERS),
    "a-tool-imports-compat": ("tools/wrong.py", "from kafkalog.compat import jars",
                              TOOLS),
    "a-private-module-from-outside": ("storage/engine/wrong.py", "from ..files import _text",
                                      PRIVATE),
    "a-cycle": ("storage/codec/wrong.py", "from . import compression",
                ACYCLIC),
}


@pytest.mark.parametrize("case", sorted(WRONG_IMPORTS))
def test_a_wrong_import_breaks_its_contract(tree_copy, case):
    path, line, contract = WRONG_IMPORTS[case]
    module = tree_copy / path
    extra = []
    if case == "a-cycle":  # compression imports wrong, which imports compression
        extra = [tree_copy / "storage/codec/compression.py"]
    saved = {p: p.read_text() for p in extra}
    module.write_text(f'"""A deliberately wrong import."""\n\n{line}\n')
    for p in extra:
        p.write_text(saved[p] + "\nfrom . import wrong  # noqa\n")
    try:
        res = _lint(tree_copy)
    finally:
        module.unlink()
        for p, text in saved.items():
            p.write_text(text)
    assert res.returncode != 0, res.stdout
    broken = res.stdout.split("Broken contracts", 1)[-1]
    assert f"\n{contract}\n" in broken, res.stdout[-6000:]
    section = broken.split(f"\n{contract}\n", 1)[1]
    for other in CONTRACTS:  # the section ends where the next broken contract's begins
        section = section.split(f"\n{other}\n", 1)[0]
    assert ".wrong" in section, res.stdout[-6000:]


def _function_level_imports(folder: Path) -> list[tuple[str, int, str, str]]:
    """``(file, line, imported module, source line)`` of every import inside a function or class body."""
    out = []
    for path in sorted(folder.rglob("*.py")):
        if "native" in path.relative_to(folder).parts[:1]:
            continue
        text = path.read_text()
        lines = text.splitlines()

        def walk(node: ast.AST, inside: bool, path=path, lines=lines) -> None:
            for child in ast.iter_child_nodes(node):
                if inside and isinstance(child, ast.Import | ast.ImportFrom):
                    if isinstance(child, ast.ImportFrom):
                        name = "." * child.level + (child.module or "")
                    else:
                        name = child.names[0].name
                    out.append((str(path.relative_to(ROOT)), child.lineno, name, lines[child.lineno - 1]))
                walk(child, inside or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))

        walk(ast.parse(text), False)
    return out


def test_storage_imports_inside_functions_only_optional_dependencies():
    """Imports inside functions hide the layering (they dodged cycles): storage/ keeps at most
    MAX_FUNCTION_IMPORTS_IN_STORAGE, each of an optional dependency, with a comment saying so."""
    found = _function_level_imports(ROOT / "storage")
    listing = "\n".join(f"  {f}:{n}: {src.strip()}" for f, n, _, src in found)
    assert len(found) <= MAX_FUNCTION_IMPORTS_IN_STORAGE, (
        f"{len(found)} imports inside functions in storage/ (at most {MAX_FUNCTION_IMPORTS_IN_STORAGE}):\n{listing}")
    wrong = [(f, n, src) for f, n, name, src in found
             if name.split(".")[0] not in OPTIONAL_DEPENDENCIES or "#" not in src]
    assert not wrong, "imports inside functions in storage/ that are not a commented optional dependency:\n" + \
        "\n".join(f"  {f}:{n}: {src.strip()}" for f, n, src in wrong)


def test_the_compiled_core_is_loaded_in_one_module():
    """One native seam: only ``storage/codec/native.py`` imports the extension (``kafkalog.storage._native``);
    everything else asks it (``codec.native.core``, ``active()``, ``backend(...)``)."""
    loaders = []
    for path in sorted((ROOT / "storage").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module or ''}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(n.split(".")[-1] == "_native" for n in names):
                loaders.append(str(path.relative_to(ROOT)))
    assert loaders == ["storage/codec/native.py"], loaders


#: the storage root holds packages; a module there is a layer of its own (errors, parallel) or the package's init
MAX_LOOSE_STORAGE_MODULES = 5
#: no module of storage/ is longer (issue 30); the decoders' schema tables are Kafka's message JSON written out
MAX_STORAGE_MODULE_LINES = 500
GENERATED_TABLES = {"storage/decoders/metadata_schemas.py", "storage/decoders/offsets_schemas.py"}


def test_the_storage_layout_shows_the_layers():
    """storage/'s root has at most MAX_LOOSE_STORAGE_MODULES modules, and no module in storage/ (the schema tables
    aside) is over MAX_STORAGE_MODULE_LINES lines: a longer one holds more than one noun, split it by
    responsibility (CONTRIBUTING.md, "Where things go")."""
    loose = sorted(p.name for p in (ROOT / "storage").glob("*.py"))
    assert len(loose) <= MAX_LOOSE_STORAGE_MODULES, loose
    long = sorted((str(p.relative_to(ROOT)), n) for p in (ROOT / "storage").rglob("*.py")
                  if "target" not in p.parts and str(p.relative_to(ROOT)) not in GENERATED_TABLES
                  and (n := len(p.read_text().splitlines())) > MAX_STORAGE_MODULE_LINES)
    assert not long, f"modules over {MAX_STORAGE_MODULE_LINES} lines: {long}"
