"""`kafkalog completion bash|zsh|fish`: generated from the parsers, so every command, option and choice of this
version completes (issue 13). The bash script is sourced into a real bash and its completion function called."""

from __future__ import annotations

import shutil
import subprocess
import sys

from kafkalog.tools.cli import COMMANDS


def _script(shell: str) -> str:
    r = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "completion", shell], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _complete(script: str, *words: str) -> list[str]:
    """What bash offers for the last of ``words`` (the command line up to the cursor)."""
    arr = " ".join(f"'{w}'" for w in ("kafkalog", *words))
    prog = f'{script}\nCOMP_WORDS=({arr}); COMP_CWORD={len(words)}; _kafkalog; printf "%s\\n" "${{COMPREPLY[@]}}"'
    r = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [x for x in r.stdout.splitlines() if x]


def test_bash_completes_commands_options_and_choices():
    script = _script("bash")
    assert set(_complete(script, "")) >= set(COMMANDS) | {"--version"}
    assert _complete(script, "ver") == ["verify"]
    assert "--payload" in _complete(script, "dump", "--pay")
    assert set(_complete(script, "dump", "--payload", "")) >= {"base64", "utf8"}
    assert "--dry-run" in _complete(script, "append", "--dry")
    assert _complete(script, "completion", "") == ["bash", "zsh", "fish", "--help"]
    assert "fixtures" in _complete(script, "verify", "fix")  # paths elsewhere


def test_zsh_and_fish_scripts_name_every_command():
    zsh, fish = _script("zsh"), _script("fish")
    assert "bashcompinit" in zsh and "complete -o filenames -o bashdefault -F _kafkalog kafkalog" in zsh
    for name in COMMANDS:
        assert f"-a {name} " in fish or f"-a '{name}' " in fish, name
    assert "__fish_seen_subcommand_from dump' -l payload -x -a 'base64 utf8" in fish
    if shutil.which("zsh"):
        assert subprocess.run(["zsh", "-n", "-c", zsh], timeout=60).returncode == 0
    if shutil.which("fish"):
        assert subprocess.run(["fish", "--no-execute", "-c", fish], timeout=60).returncode == 0
