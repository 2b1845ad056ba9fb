"""The bounded CI slice of the coverage-guided fuzzers (the long counted runs are ``make fuzz`` and
``make fuzz-native``, see CONTRIBUTING.md).

* every atheris target (atheris_targets.py) accepts its seeds: the contract holds on the fixtures' batches
  and files (in-process, no fuzzer needed);
* atheris runs the ``all`` target -- every Python parser and the native-vs-Python differential, picked by the
  first byte -- for a bounded number of inputs (about 20 s) with libFuzzer's limits (-timeout=1,
  -rss_limit_mb): no crash, no hang, no memory blow-up; its final corpus is then replayed under tracemalloc,
  with no input's Python allocations over ``atheris_targets.memory_bound``;
* the cargo-fuzz targets are not built here (an AddressSanitizer build of the core takes minutes): their
  sources must at least name every target ``make fuzz-native`` runs, and the native core is exercised through
  the differential target.

Under CI=true a missing atheris (or a missing compiled core) is a failure; elsewhere the test skips.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import atheris_targets as at  # noqa: E402
import run_fuzz  # noqa: E402
import seed_corpus  # noqa: E402

CI = os.environ.get("CI") == "true"
RUNS = int(os.environ.get("KAFKALOG_FUZZ_CI_RUNS", "30000"))
SECONDS = int(os.environ.get("KAFKALOG_FUZZ_CI_SECONDS", "20"))


def _have_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def _need(ok: bool, why: str) -> None:
    if not ok:
        if CI:
            pytest.fail(f"{why} (required under CI=true)")
        pytest.skip(why)


@pytest.fixture(scope="module")
def seeds() -> dict[str, list[bytes]]:
    return seed_corpus.atheris_seeds()


def test_every_parser_has_a_target_and_seeds(seeds):
    assert set(seeds) == set(at.TARGETS)
    for name, items in seeds.items():
        assert items, f"no seeds for {name}"
    assert {"records", "legacy", "decompress", "index", "timeindex", "txnindex", "snapshot", "checkpoint",
            "leader-epoch", "partition-metadata", "meta-properties", "quorum-state", "differential"} <= set(at.TARGETS)


@pytest.mark.timeout(120)
def test_the_seeds_keep_the_contract(seeds):
    from kafkalog.storage.codec.native import core
    for name, items in seeds.items():
        if name in ("differential", "all") and core is None:
            _need(False, "the compiled core is not built: no differential")
            continue
        for s in items[:60]:
            at.TARGETS[name](s)


@pytest.mark.timeout(180)
def test_atheris_bounded_run(tmp_path):
    _need(_have_atheris(), "atheris is not installed (pip install atheris)")
    from kafkalog.storage.codec.native import core
    _need(core is not None, "the compiled core is not built: the differential target needs it")
    corpus = tmp_path / "corpus"
    seed_corpus.write(corpus, {"all": seed_corpus.atheris_seeds()["all"]})
    cmd = [sys.executable, str(HERE / "atheris_targets.py"), "all", str(corpus / "all"), f"-runs={RUNS}",
           f"-max_total_time={SECONDS}", "-timeout=1", "-rss_limit_mb=1024", f"-max_len={1 << 20}",
           "-print_final_stats=1", f"-artifact_prefix={tmp_path}/"]
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=SECONDS + 120)
    out = p.stderr + p.stdout
    assert p.returncode == 0, out[-4000:]
    runs = int(re.search(r"stat::number_of_executed_units:\s+(\d+)", out).group(1))
    assert runs >= 1000, f"only {runs} inputs ran:\n{out[-2000:]}"
    assert not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("timeout-*"))
    # the corpus it ends with, replayed under tracemalloc: no input's Python allocations over the bound
    mem = run_fuzz.replay_memory("all", corpus / "all")
    assert mem.get("replay_over_bound") == 0 and mem["replay_units"] >= 10, mem


def test_memory_replay_counts_an_input_over_the_bound(tmp_path, monkeypatch):
    """The replay's check can fail: a target that holds 8 MiB for a 1-byte input is over the bound, one that
    holds its input's size is not."""
    (tmp_path / "a").write_bytes(b"x")
    (tmp_path / "b").write_bytes(b"y" * 5000)
    monkeypatch.setitem(at.TARGETS, "hog", lambda data: bytearray(8 << 20) if len(data) == 1 else bytes(data * 2))
    got = at.replay_memory("hog", tmp_path)
    assert got["replay_units"] == 2 and got["replay_over_bound"] == 1 and got["replay_over_bound_units"] == ["a"]
    assert got["replay_peak_bytes"] >= 8 << 20 and at.memory_bound(1) < 8 << 20


def test_native_targets_are_defined():
    """`make fuzz-native` runs these cargo-fuzz targets; each has its source and its Cargo [[bin]]."""
    cargo = (run_fuzz.NATIVE / "Cargo.toml").read_text()
    for t in run_fuzz.NATIVE_TARGETS:
        assert (run_fuzz.NATIVE / "fuzz_targets" / f"{t}.rs").is_file()
        assert f'name = "{t}"' in cargo
    assert set(seed_corpus.native_seeds()) == set(run_fuzz.NATIVE_TARGETS)
