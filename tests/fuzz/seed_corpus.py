"""Write the seed corpora of the fuzz targets from the committed fixtures and the spec vectors.

    python tests/fuzz/seed_corpus.py atheris OUT_DIR   # OUT_DIR/<atheris target>/...
    python tests/fuzz/seed_corpus.py native OUT_DIR    # OUT_DIR/<cargo-fuzz target>/... (storage/native/fuzz)

Log segments are split into their batches (one seed per batch, v2 and legacy apart, plus short runs of
consecutive batches); index, time index, transaction index, snapshot, checkpoint and metadata files are
seeds as they are; ``fuzz_targets.seeds()`` adds batches of every codec, control batches and legacy
wrappers built here. Seeds larger than ``MAX_SEED`` bytes are left out. Nothing here is committed: the
corpora are rebuilt on every run (``make fuzz``, ``make fuzz-native``).
"""

from __future__ import annotations

import hashlib
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import fuzz_targets as ft  # noqa: E402
from builders import zstd_window_batches  # noqa: E402

FIXTURES = HERE.parents[1] / "fixtures"
MAX_SEED = 1 << 20
PER_KIND = 400  # at most this many seeds of one kind (the fixtures hold thousands of similar batches)


def split_log(data: bytes) -> list[tuple[int, bytes]]:
    """The entries of a log segment as ``(magic, bytes)``, by their size fields (stops at a torn tail)."""
    out = []
    pos = 0
    while pos + 17 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0]
        if size < 14 or pos + 12 + size > len(data):
            break
        out.append((data[pos + 16], data[pos:pos + 12 + size]))
        pos += 12 + size
    return out


def _logs() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*/data/**/*") if p.is_file() and (p.name.endswith(".log")
                                                                                  or p.name.endswith(".log.deleted")))


def log_seeds() -> tuple[list[bytes], list[bytes]]:
    """(v2 seeds, legacy seeds): single batches, and runs of up to 3 consecutive ones."""
    v2: dict[bytes, None] = {}
    legacy: dict[bytes, None] = {}
    for log in _logs():
        entries = split_log(log.read_bytes())
        for i, (magic, e) in enumerate(entries):
            (legacy if magic < 2 else v2)[e] = None
            run = b"".join(x for _, x in entries[i:i + 3])
            if i % 5 == 0 and len(run) <= MAX_SEED:
                (legacy if magic < 2 else v2)[run] = None
    for s in ft.SEEDS:
        (legacy if len(s) > 16 and s[16] < 2 else v2)[s] = None
    pick = lambda d: sorted((s for s in d if len(s) <= MAX_SEED), key=len)  # noqa: E731
    return _spread(pick(v2)), _spread(pick(legacy))


def _spread(items: list[bytes]) -> list[bytes]:
    """At most PER_KIND of them, spread over the sizes."""
    if len(items) <= PER_KIND:
        return items
    step = len(items) / PER_KIND
    return [items[int(i * step)] for i in range(PER_KIND)]


def files(suffix: str) -> list[bytes]:
    out = {p.read_bytes(): None for p in sorted(FIXTURES.glob(f"*/data/**/*{suffix}")) if p.is_file()}
    return _spread([d for d in out if len(d) <= MAX_SEED])


def atheris_seeds() -> dict[str, list[bytes]]:
    v2, legacy = log_seeds()
    small = {}
    from atheris_targets import SMALL_TARGETS
    for target, name in SMALL_TARGETS.items():
        small[target] = [d for n, d in ft.small_file_seeds() if n == name] + files(name)
    compressed = [bytes([c - 1 + 4 * (m if c != 4 else 0)]) + p for c, m, p in ft.compressed_payloads()]
    seeds = {
        "records": v2,
        "legacy": legacy,
        # and the frames that once split the native and Python paths (a zstd window above Kafka's limit)
        "differential": v2 + legacy + [raw for raw, _ in zstd_window_batches().values()],
        "arrow-views": v2 + legacy,
        "decompress": compressed,
        "varint": [b"\x00", b"\x7f", b"\x80\x01", b"\xff\xff\xff\xff\x0f", b"\xff" * 10 + b"\x01"],
        "index": files(".index"),
        "timeindex": files(".timeindex"),
        "txnindex": files(".txnindex") + files(".txnindex.deleted"),
        "input-lines": input_line_seeds(),
        "decoders": [bytes([min(len(e) - 62, 255) if len(e) > 62 else 0]) + e[61:] for e in v2[:100]],
        **small,
    }
    from atheris_targets import ALL_ORDER
    # the "all" target: each target's seeds behind its number (a few of each)
    seeds["all"] = [bytes([i]) + s for i, t in enumerate(ALL_ORDER) for s in seeds[t][:40]]
    return seeds


def input_line_seeds() -> list[bytes]:
    """Seeds of ``input-lines`` (a payload byte, then lines): exported rows of every fixture partition of the
    4.3.1 data dir, a few at a time, and append lines (a batch object, a single record, utf8 payloads)."""
    import io
    import json

    from kafkalog.storage.engine.export import export_jsonl

    out = io.StringIO()
    export_jsonl([FIXTURES / "kafka-4.3.1-kraft" / "data"], out)
    lines = out.getvalue().splitlines()
    seeds = [b"\x00" + "\n".join(lines[i:i + 3]).encode() + b"\n" for i in range(0, min(len(lines), 600), 20)]
    batch = {"baseOffset": 5, "codec": "gzip", "producerId": 7, "producerEpoch": 1, "baseSequence": 0,
             "isTransactional": True, "partitionLeaderEpoch": 2,
             "records": [{"offset": 5, "timestamp": 1, "key": "aw==", "value": "dg==", "headers": [{"key": "h", "value": None}]},
                         {"timestamp": 2, "key": None, "value": "eHl6"}]}
    seeds += [b"\x00" + json.dumps(batch).encode() + b"\n",
              b"\x01" + json.dumps({"key": "k", "value": "v", "timestamp": 3, "headers": [{"key": "a", "value": "b"}]}).encode(),
              b"\x00" + json.dumps({"key": None, "value": "dmFsdWU=", "timestamp": 1}).encode() + b"\n\n"]
    return seeds


def native_seeds() -> dict[str, list[bytes]]:
    v2, legacy = log_seeds()
    plain = [e for e in legacy if len(e) > 17 and e[17] & 0x07 == 0]
    return {
        "records": v2,
        "arrow": v2,
        "cleaner": v2,
        "convert": legacy + [b"".join(plain[i:i + 4]) for i in range(0, len(plain), 4)],
        "codecs": [b"\x00", b"\x01" + b"a" * 100] + [b"\x02" + e for e in v2[:50]],
        # a flag byte (odd: CRCs checked), then a run of entries as a segment holds them
        "views": [b"\x01" + b"".join(v2[i:i + 4]) for i in range(0, len(v2), 4)] + [b"\x00" + e for e in v2[:50]],
    }


def write(out: Path, seeds: dict[str, list[bytes]]) -> dict[str, int]:
    counts = {}
    for target, items in seeds.items():
        d = out / target
        d.mkdir(parents=True, exist_ok=True)
        for s in items:
            (d / hashlib.sha1(s).hexdigest()).write_bytes(s)
        counts[target] = len(items)
    return counts


def main(argv: list[str]) -> None:
    if len(argv) != 3 or argv[1] not in ("atheris", "native"):
        sys.exit(__doc__)
    seeds = atheris_seeds() if argv[1] == "atheris" else native_seeds()
    for t, n in write(Path(argv[2]), seeds).items():
        print(f"{t}: {n} seeds")


if __name__ == "__main__":
    main(sys.argv)
