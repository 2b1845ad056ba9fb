"""Counted fuzz runs: every atheris target (``make fuzz``) or every cargo-fuzz target (``make fuzz-native``)
for a number of inputs, one process at a time, with libFuzzer's limits; prints one table row per target
(inputs run, crashes, hangs over the timeout, peak RSS) and appends them as JSON lines to ``--log``.

    python tests/fuzz/run_fuzz.py atheris [--runs N | --seconds S] [--only T,...] [--log FILE]
    python tests/fuzz/run_fuzz.py native  [--runs N | --seconds S] [--only T,...] [--log FILE]

The limits: ``-timeout=1`` (an input taking over 1 s is a hang, reported as a failure), ``-max_len`` 1 MiB,
``-rss_limit_mb`` and, for the native targets (built with AddressSanitizer, whose allocator libFuzzer hooks),
``-malloc_limit_mb=64``: no single allocation above 64 MiB for an input of at most 1 MiB. A run stops at its
first failure and leaves the input in ``artifacts/``; the exit status is non-zero if any target failed.

libFuzzer's ``-timeout`` is wall-clock time: on a loaded machine a fuzzer starved of CPU for a second reports an
input that runs in milliseconds as a hang and stops. For long runs on a shared machine, ``--hang-seconds 10``
stops a run only at 10 s, and saves every input over 1 s as it goes (``-report_slow_units=1``, artifacts
``slow-unit-*``); after the run each of those is run again alone with ``-timeout=1``: one that takes over 1 s
again is counted as a hang (the run fails), one that does not is reported as starved (``slow_units_starved``).
``kill -INT`` on a fuzzer stops its run early: the row is logged with ``interrupted`` (not a crash). A run's
libFuzzer output is written as it goes to ``artifacts/<target>.out`` (watch a long run with ``tail -f``).

atheris cannot bound single allocations on CPython (no malloc hooks without a sanitizer build), so after a Python
run its final corpus is replayed under ``tracemalloc``: the row gets the peak Python allocation of any input and
the count of inputs over ``atheris_targets.memory_bound`` (64 times the input, as the native malloc limit, plus
twice the decompression limit); a count above 0 fails the run.

A campaign longer than one sitting is run in slices over one kept corpus: ``--corpus DIR`` (for example under
``~/.cache/kafkalog/fuzz-corpus/``) is seeded again (a no-op for seeds it has) and grown by each slice, and every
row names its corpus and how many inputs the corpus held when the slice started. The slices of one corpus add
up the way libFuzzer's own ``-fork`` mode adds the runs of its jobs, each of which starts from the merged corpus.
Several fuzzers may share one corpus at once, as libFuzzer's ``-jobs`` do (each reloads the inputs the others
add); give each its own ``--artifacts`` dir. The memory replay of a run that ends while another still fuzzes
reads the corpus as it is then; the last run to end replays the final one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NATIVE = ROOT / "storage" / "native" / "fuzz"
NATIVE_TARGETS = ["records", "arrow", "cleaner", "convert", "codecs", "views"]
MAX_LEN = 1 << 20


def atheris_targets() -> list[str]:
    sys.path.insert(0, str(HERE))
    from atheris_targets import TARGETS
    return list(TARGETS)


def native_binary(target: str) -> Path:
    return NATIVE / "target" / "x86_64-unknown-linux-gnu" / "release" / target


def build_native() -> None:
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    subprocess.run(["cargo", "fuzz", "build", "-O"], cwd=NATIVE, env=env, check=True)


def _alone(kind: str, cmd: list[str], unit: str) -> subprocess.CompletedProcess:
    """Run one saved input again, alone, with the 1 s limit."""
    return subprocess.run([*cmd[:3], "-timeout=1", unit] if kind == "atheris" else [cmd[0], "-timeout=1", unit],
                          capture_output=True, text=True, errors="replace")


def replay_memory(target: str, corpus: Path) -> dict:
    """The corpus a Python run ends with, replayed under ``tracemalloc`` (``atheris_targets.replay_memory``):
    the peak Python allocation of an input, and how many inputs exceed the memory bound."""
    p = subprocess.run([sys.executable, str(HERE / "atheris_targets.py"), "--replay-memory", target, str(corpus)],
                       capture_output=True, text=True, errors="replace")
    if p.returncode != 0:
        return {"replay_error": (p.stderr or p.stdout)[-2000:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_one(kind: str, target: str, corpus: Path, runs: int | None, seconds: int | None,
            artifacts: Path, hang_seconds: int = 1) -> dict:
    limits = [f"-timeout={hang_seconds}", f"-max_len={MAX_LEN}", "-print_final_stats=1",
              f"-artifact_prefix={artifacts}/{target}-"]
    if hang_seconds > 1:
        limits.append("-report_slow_units=1")
    if runs:
        limits.append(f"-runs={runs}")
    if seconds:
        limits.append(f"-max_total_time={seconds}")
    if kind == "native":
        cmd = [str(native_binary(target)), str(corpus), "-rss_limit_mb=2048", "-malloc_limit_mb=64", *limits]
    else:
        cmd = [sys.executable, str(HERE / "atheris_targets.py"), target, str(corpus), "-rss_limit_mb=1024", *limits]
    artifacts.mkdir(parents=True, exist_ok=True)
    slow_before = set(artifacts.glob(f"{target}-slow-unit-*"))
    corpus.mkdir(parents=True, exist_ok=True)
    corpus_before = sum(1 for _ in corpus.iterdir())
    # libFuzzer's output goes to a file as it runs, so a long run can be watched (`tail -f`) while it goes
    live = artifacts / f"{target}.out"
    t0 = time.monotonic()
    with live.open("wb") as sink:
        p = subprocess.run(cmd, stdout=sink, stderr=subprocess.STDOUT)
    elapsed = time.monotonic() - t0
    out = live.read_text(errors="replace")
    stat = {k: int(v) for k, v in re.findall(r"stat::(\w+):\s+(\d+)", out)}
    done = re.search(r"Done (\d+) runs in (\d+) second", out)
    inputs = stat.get("number_of_executed_units") or (int(done.group(1)) if done else 0)
    if not inputs:
        m = re.findall(r"^#(\d+)\s", out, re.M)
        inputs = int(m[-1]) if m else 0
    timeouts = len(re.findall(r"ERROR: libFuzzer: timeout", out))
    starved = None
    m = re.search(r"Test unit written to (\S+)", out)
    if timeouts and m:
        # libFuzzer's -timeout is wall-clock: a fuzzer starved of CPU on a loaded machine reports an input that
        # runs in milliseconds. Run the input alone: a real hang hangs again
        if _alone(kind, cmd, m.group(1)).returncode == 0:
            starved = m.group(1)
    slow = sorted(set(artifacts.glob(f"{target}-slow-unit-*")) - slow_before)
    slow_hangs = [str(u) for u in slow if _alone(kind, cmd, str(u)).returncode != 0]
    oom = len(re.findall(r"ERROR: libFuzzer: out-of-memory|malloc\(\d+\) exceeds|-malloc_limit_mb", out))
    # SIGINT (Ctrl-C, or `kill -INT` to stop a long run): libFuzzer prints its stats and exits 72; not a crash
    interrupted = "libFuzzer: run interrupted" in out
    crashes = 0 if p.returncode == 0 or interrupted else (1 if not (timeouts or oom) else 0)
    row = {"kind": kind, "target": target, "inputs": inputs, "seconds": round(elapsed, 1),
           "exec_per_s": round(inputs / elapsed) if elapsed else 0, "crashes": crashes, "hangs_over_1s": timeouts,
           "oom": oom, "peak_rss_mb": stat.get("peak_rss_mb"), "slowest_unit_s": stat.get("slowest_unit_time_sec"),
           "new_units": stat.get("new_units_added"), "returncode": p.returncode,
           "corpus": str(corpus), "corpus_units_before": corpus_before}
    if hang_seconds > 1:
        row["timeout_s"] = hang_seconds
        row["slow_units_starved"] = len(slow) - len(slow_hangs)
        if slow_hangs:  # over 1 s again when run alone: a hang
            row["hangs_over_1s"] += len(slow_hangs)
            row["slow_unit_hangs"] = slow_hangs
            row["returncode"] = row["returncode"] or 1
    if starved:  # not a hang: the run stopped early, the input is fine
        row["hangs_over_1s"] = 0
        row["false_timeout"] = f"{starved} runs within the limit alone (the fuzzer was starved of CPU)"
    if interrupted:
        row["interrupted"] = True
    if kind == "atheris":
        row.update(replay_memory(target, corpus))
    if p.returncode != 0 and not interrupted:
        row["tail"] = out[-3000:]
    return row


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["atheris", "native"])
    ap.add_argument("--runs", type=int)
    ap.add_argument("--seconds", type=int)
    ap.add_argument("--only", default="")
    ap.add_argument("--log", type=Path)
    ap.add_argument("--corpus", type=Path, help="corpus root (default: a fresh temporary one, seeded)")
    ap.add_argument("--artifacts", type=Path,
                    help="where crashes, slow inputs and the live output go (default: artifacts/ next to the "
                         "targets); give each of several fuzzers on one corpus its own")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--hang-seconds", type=int, default=1,
                    help="stop a run at an input over this many seconds (wall clock); above 1, inputs over 1 s are "
                         "saved and run again alone afterwards (for long runs on a loaded machine)")
    a = ap.parse_args(argv)
    if not a.runs and not a.seconds:
        a.runs = 10_000_000
    targets = NATIVE_TARGETS if a.kind == "native" else atheris_targets()
    if a.only:
        targets = [t for t in a.only.split(",") if t in targets]  # in the order given
    if a.kind == "native" and not a.no_build:
        build_native()
    with tempfile.TemporaryDirectory(prefix="kafkalog-fuzz-") as tmp:
        corpus = a.corpus or Path(tmp) / "corpus"
        subprocess.run([sys.executable, str(HERE / "seed_corpus.py"), a.kind, str(corpus)], check=True,
                       stdout=subprocess.DEVNULL)
        artifacts = a.artifacts or (NATIVE if a.kind == "native" else HERE) / "artifacts"
        failed = 0
        print(f"{'target':<20} {'inputs':>12} {'s':>8} {'exec/s':>8} {'crashes':>7} {'hangs>1s':>8} "
              f"{'oom':>4} {'rss MB':>7}", flush=True)
        for t in targets:
            row = run_one(a.kind, t, corpus / t, a.runs, a.seconds, artifacts, a.hang_seconds)
            failed += ((row["returncode"] != 0 and not row.get("interrupted")) or row.get("replay_over_bound", 0) > 0
                       or "replay_error" in row)
            print(f"{t:<20} {row['inputs']:>12} {row['seconds']:>8} {row['exec_per_s']:>8} {row['crashes']:>7} "
                  f"{row['hangs_over_1s']:>8} {row['oom']:>4} {row['peak_rss_mb']!s:>7}", flush=True)
            if "tail" in row:
                print(row["tail"], file=sys.stderr)
            if a.log:
                with a.log.open("a") as f:
                    f.write(json.dumps(dict(row, when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
