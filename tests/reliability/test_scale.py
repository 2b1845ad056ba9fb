"""Scale and memory, bounded for CI (issue 17): ``verify``, ``describe``, ``repair --dry-run`` and ``export`` on
5,000 partitions and on a 200 MB segment stay within the memory bound stated in
``tests/benchmarks/bench_scale.py`` (peak anonymous memory below ``BASE_MB`` + ``PER_PARTITION_KB`` per
partition, measured from /proc over the command's process tree) and draw their progress bar on a terminal. The
full run (100,000 partitions, a 20 GB segment) is the benchmark itself. Prints what it measured.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from builders import big_segment_data_dir, many_partitions_data_dir

_spec = importlib.util.spec_from_file_location(
    "bench_scale", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_scale.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

PARTITIONS = 5000


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, tuple[Path, int]]:
    root = tmp_path_factory.mktemp("scale")
    return {f"{PARTITIONS:,d} partitions": (many_partitions_data_dir(root / "many", PARTITIONS), PARTITIONS),
            "one 200 MB segment": (big_segment_data_dir(root / "big", 200_000_000), 1)}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("command", sorted(bench.COMMANDS))
def test_memory_stays_bounded_with_progress(inputs, command: str) -> None:
    rows = []
    for label, (d, partitions) in inputs.items():
        m = bench.measure([a.format(d=d) for a in bench.COMMANDS[command]], timeout=240)
        bound = bench.bound_mb(partitions)
        rows.append(f"{command} on {label}: exit {m['exit']}, {m['wall']:.1f} s, peak RSS {m['rssMB']:.0f} MB, "
                    f"anonymous {m['anonMB']:.0f} MB (bound {bound:.0f} MB), progress: {m['progress']}")
        print(rows[-1])
        assert m["exit"] in (0, 1), m["stderr"]
        assert m["anonMB"] < bound, rows[-1]
        assert m["progress"], f"{rows[-1]}: no progress bar on a terminal\n{m['stderr'][-1000:]}"
