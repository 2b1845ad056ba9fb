"""The README's Python is real (issue 34, item 5): every ```` ```python ```` block of its "Library" and "Spark"
sections is run as written, each as its own script, by the project virtualenv's interpreter
(``.venv/bin/python script.py``) from an environment that has NOT activated it: no ``VIRTUAL_ENV``, its ``bin``
not on ``PATH``, no ``PYSPARK_PYTHON``. That is how a user runs a script, and where the Spark snippet once failed
(Spark's workers started the system ``python3``, which has no kafkalog).

The blocks are found by their section headings, whatever they hold, so a rewrite of a section is tested as it
stands. They run in a directory holding a copy of the repository's ``fixtures/`` (the paths the snippets read,
relative to the repository root), so a snippet that changes a data dir changes a copy.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SECTIONS = {"Library": [], "Spark": [pytest.mark.spark]}
_FENCE = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def section(text: str, heading: str) -> str:
    """The text under ``## heading`` up to the next ``## `` heading."""
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert m is not None, f"README.md has no '## {heading}' section"
    return m.group(1)


def python_blocks(heading: str) -> list[str]:
    return _FENCE.findall(section(README.read_text(encoding="utf-8"), heading))


def _cases():
    for heading, marks in SECTIONS.items():
        for i, code in enumerate(python_blocks(heading)):
            yield pytest.param(heading, i, code, marks=marks, id=f"{heading.lower()}-{i}")


def test_each_section_has_python():
    for heading in SECTIONS:
        assert python_blocks(heading), f"no ```python block under '## {heading}'"


def venv_python() -> Path:
    """The project virtualenv's interpreter (the one running the tests: ``make test`` runs them from .venv)."""
    assert sys.prefix != sys.base_prefix, "the tests run from a virtualenv (the project's .venv)"
    return Path(sys.prefix) / "bin" / "python"


def non_activated_env() -> dict[str, str]:
    """This process's environment without any trace of an activated virtualenv or a chosen Spark Python."""
    venv_bin = str(Path(sys.prefix) / "bin")
    drop = {"VIRTUAL_ENV", "VIRTUAL_ENV_PROMPT", "PYTHONHOME", "PYTHONPATH", "PYSPARK_PYTHON",
            "PYSPARK_DRIVER_PYTHON", "CONDA_PREFIX"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    path = [p for p in env.get("PATH", "").split(os.pathsep)
            if p and os.path.realpath(p) != os.path.realpath(venv_bin) and not p.rstrip("/").endswith("/.venv/bin")]
    env["PATH"] = os.pathsep.join(path)
    return env


@pytest.mark.parametrize(("heading", "index", "code"), list(_cases()))
def test_readme_snippet_runs_as_written(heading, index, code, tmp_path):
    shutil.copytree(ROOT / "fixtures", tmp_path / "fixtures")
    script = tmp_path / f"readme_{heading.lower()}_{index}.py"
    script.write_text(code, encoding="utf-8")
    env = non_activated_env()
    assert "VIRTUAL_ENV" not in env and "PYSPARK_PYTHON" not in env
    r = subprocess.run([str(venv_python()), script.name], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, (f"README.md '## {heading}' python block {index} failed (exit {r.returncode}):\n"
                               f"{code}\n--- stdout:\n{r.stdout[-3000:]}\n--- stderr:\n{r.stderr[-6000:]}")
    assert r.stdout.strip(), "a README snippet prints what it shows"
