"""`convert` with the compiled core (runs of plain v0/v1 messages rewritten natively, ``convert.rs``) against the
pure-Python conversion: the same files byte for byte (segments, indexes, segment splits), the same plan, and the
same error (class, file, byte position, reason) on a damaged segment."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest
from engines import convert

from kafkalog.storage.codec.compression import GZIP
from kafkalog.storage.codec.native import backend, core
from kafkalog.storage.engine.convert import ConvertOptions
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.records import build_batch, build_legacy, build_legacy_message

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TS = 1_700_000_000_000

pytestmark = pytest.mark.skipif(core is None and os.environ.get("CI") != "true",
                                reason="the compiled record core is not built")


def _legacy_dir(root: Path, seed: int) -> Path:
    """A partition of v0 and v1 messages: plain (null keys and values, empty ones, LogAppendTime), gzip
    wrappers, and a few v2 batches in between."""
    rnd = random.Random(seed)
    pdir = root / "t-0"
    pdir.mkdir(parents=True)
    out = bytearray()
    off = 0
    for _ in range(400):
        r = rnd.random()
        if r < 0.1:
            recs = [(off + j, TS + j, b"k%d" % j, b"w" * rnd.randint(0, 300)) for j in range(rnd.randint(1, 5))]
            out += build_legacy(recs, magic=1, codec=GZIP)
            off += len(recs)
        elif r < 0.15:
            out += build_batch([(off, TS, b"v2", b"x")], base_offset=off)
            off += 1
        else:
            magic = rnd.choice((0, 1, 1))
            key = rnd.choice((None, b"", b"key-%d" % rnd.randint(0, 50)))
            value = rnd.choice((None, b"", rnd.randbytes(rnd.randint(1, 2000))))
            out += build_legacy_message(magic, off, TS + rnd.randint(-10, 10**6), key, value,
                                        attributes=0x08 if magic == 1 and rnd.random() < 0.1 else 0)
            off += 1
    (pdir / "00000000000000000000.log").write_bytes(bytes(out))
    return pdir


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _both(tmp_path: Path, make, opts: ConvertOptions | None, monkeypatch) -> tuple:
    results = []
    for name, native in (("native", True), ("python", False)):
        root = tmp_path / name
        make(root)
        with backend("native" if native else "python"):
            try:
                out = convert([root], opts, backup=False)
                results.append(("ok", [r.to_dict() for r in out.applied], _tree(root)))
            except KafkaLogError as e:
                results.append(("error", type(e).__name__, str(e).replace(str(root), "ROOT"), _tree(root)))
    return results[0], results[1]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("opts", [None, ConvertOptions(index_interval_bytes=0), ConvertOptions(codec="lz4"),
                                  ConvertOptions(group_uncompressed=True)], ids=["default", "index-all", "lz4",
                                                                                   "grouped"])
def test_native_convert_writes_the_python_bytes(tmp_path, monkeypatch, seed, opts):
    native, python = _both(tmp_path, lambda root: _legacy_dir(root, seed), opts, monkeypatch)
    assert native[0] == "ok" and native == python


def test_real_v0_v1_fixtures_convert_the_same(tmp_path, monkeypatch):
    sources = [d for d in FIXTURES.glob("kafka-3.9.2-zk-v*") if d.is_dir()]
    assert sources or os.environ.get("CI") != "true"
    for src in sources:
        def make(root, src=src):
            shutil.copytree(src / "data", root)

        native, python = _both(tmp_path / src.name, make, None, monkeypatch)
        assert native[0] == "ok" and native == python


@pytest.mark.parametrize("damage", ["crc", "size", "torn", "magic"])
def test_a_damaged_segment_fails_the_same_way(tmp_path, monkeypatch, damage):
    def make(root):
        pdir = _legacy_dir(root, 9)
        log = pdir / "00000000000000000000.log"
        data = bytearray(log.read_bytes())
        at = len(data) // 2
        from kafkalog.storage.records import iter_batches

        pos = next(b.position for b in iter_batches(bytes(data)) if b.position >= at)
        if damage == "crc":
            data[pos + 30] ^= 0xFF
        elif damage == "size":
            data[pos + 8:pos + 12] = (3).to_bytes(4, "big")
        elif damage == "magic":
            data[pos + 16] = 0x81
        else:
            data += b"\x00" * 9
        log.write_bytes(bytes(data))

    native, python = _both(tmp_path, make, None, monkeypatch)
    assert native[0] == "error" and native == python


@pytest.mark.parametrize("limit", [1, 5_000, 20_000, 1 << 30])
def test_a_run_splits_segments_and_indexes_like_batch_by_batch_appends(tmp_path, limit):
    """``_append_run`` (one write per run) against ``_append_converted`` per batch: the same segments, split at
    the same batches, with the same index entries."""
    from kafkalog.storage.engine.convert import _append_converted, _append_run
    from kafkalog.storage.log.segment import SegmentWriter

    rnd = random.Random(3)
    data = b"".join(build_legacy_message(rnd.choice((0, 1)), off, TS + off, b"k", rnd.randbytes(rnd.randint(0, 900)))
                    for off in range(300))
    chunk, metas, pos = core.legacy_to_v2(data, 0, len(data), 1 << 30)
    assert len(metas) == 300 and pos == len(data)
    trees = []
    for name in ("run", "each"):
        out = tmp_path / name
        out.mkdir()

        def writer(base, out=out):
            return SegmentWriter(out, base, index_interval_bytes=700, per_batch=False)

        writers = [writer(0)]
        if name == "run":
            _append_run(chunk, metas, writers, writer, limit)
        else:
            pos = 0
            for size, _, _ in metas:
                _append_converted(chunk[pos:pos + size], writers, writer, limit)
                pos += size
        for w in writers:
            w.finish()
        trees.append(_tree(out))
    assert trees[0] == trees[1] and len(trees[0]) >= 3
