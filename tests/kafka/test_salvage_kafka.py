"""``kafkalog dump --salvage`` against Kafka's DumpLogSegments on segments with corrupted payloads.

Damage that keeps every size field intact (flipped bytes inside the CRC-covered part of some batches) leaves
Kafka's framing whole, so DumpLogSegments walks every batch and prints ``isvalid: false`` for the damaged ones.
Salvage must agree exactly: the batches Kafka calls valid are the batches salvage prints (the same lines), and
each batch Kafka calls invalid is a skipped range of salvage starting at its position. One JVM per Kafka version
(v2 segments with the fixture's 4.x, v0/v1 segments with 3.9.2, which wrote them); a few seconds in all.
"""

from __future__ import annotations

import io
import json
import random
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from kafkalog.storage.records import iter_batches
from kafkalog.tools.cli import main

pytestmark = pytest.mark.kafka

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SEGMENTS = {  # fixture -> partition dirs whose first segment is damaged (all magics, every codec)
    "kafka-4.3.1-kraft": ["multi-segment-1", "codec-gzip-0", "codec-zstd-0", "codec-lz4-0", "transactions-0"],
    "kafka-3.9.2-zk-v0": ["codec-none-0", "codec-snappy-0", "codec-gzip-0"],
    "kafka-3.9.2-zk-v1": ["mixed-formats-0", "codec-lz4-0", "codec-none-0"],
}


def _version(fixture: str, kafka_versions: list[str]) -> str:
    wanted = json.loads((FIXTURES / fixture / "manifest.json").read_text())["kafka_version"]
    return wanted if wanted in kafka_versions else kafka_versions[0]


def _damage(src: Path, dst: Path, rng: random.Random) -> list[int]:
    """Copy ``src`` to ``dst`` with bytes flipped in the CRC-covered part of every third batch (sizes kept)."""
    data = bytearray(src.read_bytes())
    hit = []
    for i, b in enumerate(list(iter_batches(bytes(data)))):
        if i % 3 != 1:
            continue
        lo = b.position + (21 if b.magic >= 2 else 18)
        if lo >= b.position + b.size:
            continue
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(lo, b.position + b.size)] ^= rng.randint(1, 255)
        hit.append(b.position)
    dst.write_bytes(bytes(data))
    return hit


def _ours(path: Path) -> tuple[list[str], list[int]]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(["dump", "--salvage", str(path)])
    lines = out.getvalue().splitlines()
    batches = [x for x in lines if x.startswith(("baseOffset:", "offset:"))]
    skipped = [int(x.split()[2].split("-")[0]) for x in lines if x.startswith("Skipped bytes")]
    assert rc == (1 if skipped else 0), err.getvalue()
    return batches, skipped


@pytest.mark.parametrize("fixture", sorted(SEGMENTS))
def test_salvage_agrees_with_dump_log_segments(fixture: str, tmp_path: Path, kafka_versions, kafka_libs):
    from kafkalog.compat.tools import dump_class, run_tool

    rng = random.Random(fixture)
    files, hits = [], {}
    for part in SEGMENTS[fixture]:
        src = sorted((FIXTURES / fixture / "data" / part).glob("*.log"))[0]
        dst = tmp_path / part / src.name
        dst.parent.mkdir()
        hits[dst] = _damage(src, dst, rng)
        files.append(dst)
    version = _version(fixture, kafka_versions)
    r = run_tool(version, dump_class(version), ["--files", ",".join(str(f.absolute()) for f in files)])
    assert r.returncode == 0, r.stderr[-2000:]
    sections: dict[str, list[str]] = {}
    cur: list[str] = []
    for line in r.stdout.splitlines():
        if line.startswith("Dumping "):
            cur = sections.setdefault(line[len("Dumping "):], [])
        elif line.startswith(("baseOffset:", "offset:")):
            cur.append(line)
    assert any(hits.values())
    for f in files:
        kafka = sections[str(f.absolute())]
        valid = [x for x in kafka if x.endswith("isvalid: true")]
        invalid = [int(x.split(" position: ")[1].split()[0]) for x in kafka if x.endswith("isvalid: false")]
        batches, skipped = _ours(f)
        assert batches == valid, f
        assert skipped == invalid == hits[f], f
