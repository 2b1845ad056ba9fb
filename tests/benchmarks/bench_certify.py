"""``kafkalog conformance certify`` on a generated data dir of about ``--mb`` MB: its wall time, per GB, by phase.

    python tests/benchmarks/bench_certify.py --mb 1000            # ~1 GB, Kafka 4.3.1, JVM backend
    python tests/benchmarks/bench_certify.py --mb 100 --kafka 3.9.2 --keep /tmp/bench-certify
    python tests/benchmarks/bench_certify.py --keep /tmp/bench-certify --at HEAD~1   # certify as it was there

The data dir (``tests/builders.py`` :func:`generated_data_dir`, then flushed as a cleanly stopped broker leaves
it) holds 4 partitions of 1 KB records with headers on every third, in batches of 50, 64 MiB segments, each
partition with a topic id. :func:`kafkalog.compat.certify.certify` runs on it in this process; its own phase
timer (``DirReport.seconds``: reading the files, broker start, consuming per client, DumpLogSegments, verify) is
printed with the load average before and after and the peak resident memory of this process (kafkalog's side
and the clients) and of its largest child (a child forked from this process counts this process's pages too). ``--at COMMIT`` runs
``compat/certify.py`` as it is at that commit (the rest of the tree as it is): before -> after in the same
conditions, one run after the other. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from builders import KRAFT_META, TS, _scale_topic_id, generated_data_dir, write_data_dir_files  # noqa: E402

from kafkalog.compat import jars  # noqa: E402
from kafkalog.storage.engine.flush import plan_flush  # noqa: E402
from kafkalog.storage.engine.plan import apply  # noqa: E402
from kafkalog.storage.files.partition_metadata import write_partition_metadata  # noqa: E402

PARTITIONS = 4
VALUE = 1000
#: bytes a generated record takes in a batch of 50 (value, key, headers on every third, record framing)
RECORD_BYTES = 945


def build(root: Path, mb: int) -> Path:
    n = mb * 1_000_000 // (PARTITIONS * RECORD_BYTES)
    generated_data_dir(root, {"bench": PARTITIONS}, n, value_size=VALUE, segment_bytes=64 << 20)
    for p in range(PARTITIONS):
        write_partition_metadata(root / f"bench-{p}" / "partition.metadata", _scale_topic_id(2000), fsync=False)
    write_data_dir_files(root, meta=KRAFT_META)
    apply(plan_flush([root], now_ms=TS + 200_000), backup=False)
    return root


def certify_module(commit: str | None):
    """``kafkalog.compat.certify``, or its source at ``commit`` loaded in its place."""
    if commit is None:
        import kafkalog.compat.certify as mod
        return mod
    root = Path(__file__).resolve().parents[2]
    src = subprocess.run(["git", "show", f"{commit}:compat/certify.py"], cwd=root, capture_output=True, text=True,
                         check=True).stdout
    path = Path(tempfile.mkdtemp(prefix="bench-certify-src-")) / "certify.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("kafkalog.compat.certify", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kafkalog.compat.certify"] = mod
    spec.loader.exec_module(mod)
    shutil.rmtree(path.parent)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=1000)
    ap.add_argument("--kafka", default=jars.LATEST_4)
    ap.add_argument("--backend", default="jvm", choices=("jvm", "container"))
    ap.add_argument("--keep", type=Path, help="build (or reuse) the data dir here and keep it")
    ap.add_argument("--at", metavar="COMMIT", help="run compat/certify.py as it is at COMMIT")
    a = ap.parse_args()
    certify = certify_module(a.at).certify
    base = a.keep or Path(tempfile.mkdtemp(prefix="bench-certify-"))
    data = base / "data"
    try:
        if not (data / "meta.properties").exists():
            t = time.perf_counter()
            build(data, a.mb)
            print(f"built {data} in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        work = base / "work"
        shutil.rmtree(work, ignore_errors=True)
        load0 = os.getloadavg()
        t = time.perf_counter()
        rep = certify([data], kafka=a.kafka, backend=a.backend, workdir=work,
                      on_phase=lambda p: print(f"  {time.perf_counter() - t:6.1f} s {p}", file=sys.stderr, flush=True))
        wall = time.perf_counter() - t
        d = rep.dirs[0]
        gb = d.bytes / 1e9
        print(json.dumps({
            "at": a.at or "worktree", "kafka": a.kafka, "backend": a.backend, "bytes": d.bytes, "conformant": rep.conformant,
            "divergences": len(d.divergences), "wall_s": round(wall, 1), "s_per_gb": round(wall / gb, 1),
            "phases_s": {k: round(v, 1) for k, v in d.seconds.items()},
            "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
            "peak_child_rss_gib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20, 2),
            "load_before": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in os.getloadavg()],
        }, indent=1))
    finally:
        if a.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
