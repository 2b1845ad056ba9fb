"""kafkalog convert: Kafka 4.0's legacy -> v2 rules, recompression, indexes, crash safety, CLI."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from engines import convert

from kafkalog.storage.codec.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kafkalog.storage.engine.convert import ConvertOptions, convert_batches, convert_segment
from kafkalog.storage.engine.message_format import audit, plan_convert
from kafkalog.storage.engine.plan import PlanError
from kafkalog.storage.engine.swap import recover_swap_files
from kafkalog.storage.errors import ConfigError, LockedError
from kafkalog.storage.files.offset_index import read_offset_index
from kafkalog.storage.files.time_index import read_time_index
from kafkalog.storage.io import fileops
from kafkalog.storage.io.local import mapped
from kafkalog.storage.io.lock import DirLock
from kafkalog.storage.log.segment import recover_segment
from kafkalog.storage.records import build_batch, build_legacy, iter_batches
from kafkalog.storage.reports.diff import diff_paths
from kafkalog.storage.reports.partition_records import iter_partition_records
from kafkalog.tools.cli import main

T0 = 1_700_000_000_000


def legacy_log() -> bytes:
    data = bytearray()
    off = 0
    for i in range(40):
        data += build_legacy([(off, -1, b"k%d" % i, b"v" * 120)], magic=0)
        off += 1
    for i in range(10):
        data += build_legacy([(off, T0 + i, b"k%d" % i, b"w" * 90)], magic=1)
        off += 1
    data += build_legacy([(off + j, T0 + j, b"g", b"x%d" % j) for j in range(5)], magic=1, codec=GZIP)
    off += 5
    data += build_legacy([(off + j, -1, None, b"y%d" % j) for j in range(4)], magic=0, codec=LZ4)
    off += 4
    data += build_legacy([(off + j, T0 + j, b"s", b"z%d" % j) for j in range(3)], magic=1, codec=SNAPPY,
                         timestamp_type=1, log_append_time=T0 + 999)
    off += 3
    data += build_batch([(off + j, T0 + 50 + j, b"a", b"b", [("h", b"1")]) for j in range(3)],
                        partition_leader_epoch=7)
    return bytes(data)


@pytest.fixture
def datadir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    p = d / "legacy-0"
    p.mkdir(parents=True)
    (p / "00000000000000000000.log").write_bytes(legacy_log())
    os.utime(p / "00000000000000000000.log", (1_600_000_000, 1_600_000_000))
    return d


def batches_of(path: Path) -> list:
    with mapped(path) as mm:
        out = [(b.magic, b.base_offset, b.last_offset, b.codec, b.timestamp_type, b.max_timestamp,
                b.partition_leader_epoch, b.producer_id, [(r.offset, r.timestamp, r.key, r.value, r.headers)
                                                         for r in b.records()]) for b in iter_batches(mm)]
    return out


def test_kafka_40_rules(datadir: Path, tmp_path: Path):
    orig = tmp_path / "orig"
    shutil.copytree(datadir, orig)
    report = convert([datadir], backup=False)
    assert report.summary()["segments"] == 1
    seg = datadir / "legacy-0" / "00000000000000000000.log"
    out = batches_of(seg)
    assert all(b[0] == 2 for b in out)
    assert len(out) == 40 + 10 + 1 + 1 + 1 + 1  # wrappers stay one batch each, plain messages one each
    # v0 plain: CreateTime, timestamp -1, PLE -1, no producer
    assert out[0][4] == 0 and out[0][5] == -1 and out[0][6] == -1 and out[0][7] == -1
    assert out[0][8] == [(0, -1, b"k0", b"v" * 120, [])]
    # v1 plain keeps its timestamp
    assert out[40][8][0][1] == T0 and out[40][4] == 0
    gz, lz, sn, v2 = out[50], out[51], out[52], out[53]
    assert (gz[1], gz[2], gz[3]) == (50, 54, GZIP) and [r[1] for r in gz[8]] == [T0 + j for j in range(5)]
    assert (lz[1], lz[2], lz[3], lz[4]) == (55, 58, LZ4, 0) and all(r[1] == -1 for r in lz[8])
    assert sn[3] == SNAPPY and sn[4] == 1 and sn[5] == T0 + 999 and all(r[1] == T0 + 999 for r in sn[8])
    assert v2[6] == 7  # v2 batches verbatim
    assert seg.read_bytes()[-len(build_batch([(62 + j, T0 + 50 + j, b"a", b"b", [("h", b"1")]) for j in range(3)],
                                             partition_leader_epoch=7)):] == \
        build_batch([(62 + j, T0 + 50 + j, b"a", b"b", [("h", b"1")]) for j in range(3)], partition_leader_epoch=7)
    assert diff_paths(orig, datadir).equal
    assert not diff_paths(orig, datadir, level="batches").equal
    assert seg.stat().st_mtime == 1_600_000_000  # mtime kept (time retention of v0 data uses it)
    assert list(audit([datadir])) == []


def test_uncompressed_single_record_batches_are_byte_exact():
    one = build_legacy([(5, -1, b"k", b"v")], magic=0)
    (out,) = list(convert_batches(iter_batches(one), ConvertOptions()))
    assert out == build_batch([(5, -1, b"k", b"v")], base_offset=5, partition_leader_epoch=-1)


def test_indexes_rebuilt_by_recovery_rule(datadir: Path):
    convert([datadir], ConvertOptions(index_interval_bytes=300), backup=False)
    p = datadir / "legacy-0"
    with mapped(p / "00000000000000000000.log") as mm:
        r = recover_segment(mm, 0, index_interval_bytes=300)
        want_oi, want_ti = r.offset_index.to_bytes(trim=True), r.time_index.to_bytes(trim=True)
    with read_offset_index(p / "00000000000000000000.index") as oi:
        assert oi.to_bytes(trim=True) == want_oi and oi.entries > 5
    with read_time_index(p / "00000000000000000000.timeindex") as ti:
        assert ti.to_bytes(trim=True) == want_ti and ti.entries >= 1


def test_group_uncompressed(datadir: Path, tmp_path: Path):
    orig = tmp_path / "orig"
    shutil.copytree(datadir, orig)
    convert([datadir], ConvertOptions(group_uncompressed=True, group_bytes=2000), backup=False)
    out = batches_of(datadir / "legacy-0" / "00000000000000000000.log")
    assert len(out) < 20
    assert max(len(b[8]) for b in out) > 5
    assert diff_paths(orig, datadir).equal


def test_recompress_v2_keeps_header_fields(tmp_path: Path):
    p = tmp_path / "d" / "t-0"
    p.mkdir(parents=True)
    src = build_batch([(10 + j, T0 + j, b"k", b"v" * 50) for j in range(20)], producer_id=42, producer_epoch=3,
                      base_sequence=100, partition_leader_epoch=5, is_transactional=True, last_offset_delta=25)
    (p / "00000000000000000010.log").write_bytes(src)
    convert([tmp_path / "d"], ConvertOptions(codec="zstd"), backup=False)
    (b,) = batches_of(p / "00000000000000000010.log")
    assert b[3] == ZSTD and b[1] == 10 and b[2] == 35 and b[6] == 5 and b[7] == 42
    with mapped(p / "00000000000000000010.log") as mm:
        (nb,) = list(iter_batches(mm))
        assert (nb.base_sequence, nb.producer_epoch, nb.is_transactional, nb.base_timestamp) == (100, 3, True, T0)
        del nb
    # nothing left to do: a second run plans nothing
    assert not plan_convert([tmp_path / "d"], ConvertOptions(codec="zstd")).changes
    assert plan_convert([tmp_path / "d"], ConvertOptions(codec="none")).changes
    convert([tmp_path / "d"], ConvertOptions(codec=NONE), backup=False)
    assert (p / "00000000000000000010.log").read_bytes() == src


def test_dry_run_and_backup(datadir: Path, tmp_path: Path):
    before = (datadir / "legacy-0" / "00000000000000000000.log").read_bytes()
    r = convert([datadir], dry_run=True)
    assert sum(len(p.ops) for p in r.plan.partitions) == 1 and not r.applied
    assert (datadir / "legacy-0" / "00000000000000000000.log").read_bytes() == before
    r = convert([datadir], backup_root=tmp_path / "bk")
    assert (tmp_path / "bk" / "data" / "legacy-0" / "00000000000000000000.log").read_bytes() == before


@pytest.mark.parametrize("step", ["cleaned->swap", "old->deleted", "swap->final", "delete"])
def test_crash_at_every_step_recovers(datadir: Path, tmp_path: Path, step: str):
    orig = tmp_path / "orig"
    shutil.copytree(datadir, orig)

    def hook(kind: str, path: str, target) -> None:
        s = ("delete" if kind == "unlink" and path.endswith(".deleted") else
             "cleaned->swap" if kind == "rename" and path.endswith(".cleaned") else
             "old->deleted" if kind == "rename" and (target or "").endswith(".deleted") else
             "swap->final" if kind == "rename" and path.endswith(".swap") else "")
        if s.startswith(step):
            raise KeyboardInterrupt(s)

    with pytest.raises(KeyboardInterrupt), fileops.observe(hook):
        convert_segment(datadir / "legacy-0" / "00000000000000000000.log", ConvertOptions())
    recover_swap_files(datadir / "legacy-0")
    assert diff_paths(orig, datadir).equal
    names = os.listdir(datadir / "legacy-0")
    assert not [n for n in names if n.endswith((".swap", ".cleaned", ".deleted"))]


def test_corrupt_input_refused_with_position(datadir: Path):
    f = datadir / "legacy-0" / "00000000000000000000.log"
    data = bytearray(f.read_bytes())
    size = len(build_legacy([(0, -1, b"k0", b"v" * 120)], magic=0))
    data[size * 3 + 30] ^= 0xFF  # inside the 4th message
    f.write_bytes(bytes(data))
    with pytest.raises(PlanError, match=f"legacy-0/00000000000000000000.log: byte {size * 3}: "):
        convert([datadir], backup=False)
    assert f.read_bytes() == bytes(data)
    assert not [n for n in os.listdir(f.parent) if n.endswith(".cleaned")]


def test_partial_tail_refused(datadir: Path):
    f = datadir / "legacy-0" / "00000000000000000000.log"
    with open(f, "ab") as g:
        g.write(build_batch([(100, T0, b"k", b"v")])[:40])
    with pytest.raises(PlanError, match="repair"):
        convert([datadir], backup=False)


def test_live_lock_refused(datadir: Path):
    with DirLock(datadir):
        with pytest.raises(LockedError):
            convert([datadir], backup=False)


def test_options_validation():
    with pytest.raises(ConfigError):
        ConvertOptions(to_magic=1)
    with pytest.raises(ConfigError):
        ConvertOptions(codec="brotli")


def test_cli(datadir: Path, tmp_path: Path, capsys):
    assert main(["convert", str(datadir), "--audit", "--json"]) == 0
    assert '"v0Batches": 41' in capsys.readouterr().out
    assert main(["convert", str(datadir), "--dry-run"]) == 0
    assert "replace segment" in capsys.readouterr().out
    assert main(["convert", str(datadir), "--no-backup", "--codec", "lz4"]) == 0
    assert "1 segment(s) converted" in capsys.readouterr().out
    recs = list(iter_partition_records(datadir / "legacy-0"))
    assert [r[0] for r in recs] == list(range(65))
    with pytest.raises(SystemExit) as e:
        main(["convert", str(datadir), "--codec", "brotli"])
    assert e.value.code == 2


@pytest.mark.parametrize("magic,ts_type,key", [(0, 0, b"k"), (1, 0, None), (1, 1, b"x" * 300), (0, 0, None)])
def test_fast_path_equals_builder(magic: int, ts_type: int, key):
    from kafkalog.storage.engine.convert import convert_legacy, plain_legacy_to_v2

    raw = build_legacy([(77, T0 + 5, key, b"v" * 200)], magic=magic, timestamp_type=ts_type,
                       log_append_time=T0 + 9 if ts_type else None)
    (b,) = list(iter_batches(raw))
    assert plain_legacy_to_v2(b) == convert_legacy(b, ConvertOptions())
    (nb,) = list(iter_batches(plain_legacy_to_v2(b)))
    assert nb.is_valid() and nb.records()[0].value == b"v" * 200


def _many_segments(root: Path, parts: int = 3, segs: int = 4) -> Path:
    d = root / "data"
    for p in range(parts):
        pdir = d / f"many-{p}"
        pdir.mkdir(parents=True)
        off = 0
        for s in range(segs):
            base = off
            data = bytearray()
            for i in range(30 + 7 * s):
                data += build_legacy([(off + j, T0 + off + j, b"k%d" % (i % 5), b"v%d" % i * 20) for j in range(3)],
                                     magic=1, codec=(NONE, GZIP, SNAPPY, LZ4)[(i + s + p) % 4])
                off += 3
            (pdir / f"{base:020d}.log").write_bytes(bytes(data))
    return d


def test_parallel_convert_equals_serial(tmp_path: Path):
    serial = _many_segments(tmp_path / "a")
    parallel = _many_segments(tmp_path / "b")
    ticks: list = []
    r1 = convert([serial], backup=False)
    r2 = convert([parallel], backup=False, workers=2, progress=ticks.append)
    assert len(r1.applied) == len(r2.applied) == 12 and sum(ticks) == len({r.partition for r in r2.applied})  # partitions
    assert [(r.partition, r.segment, r.bases) for r in r1.applied] == \
        [(r.partition, r.segment, r.bases) for r in r2.applied]
    for f in sorted(serial.rglob("*")):
        if f.is_file():
            assert (parallel / f.relative_to(serial)).read_bytes() == f.read_bytes(), f
    after = list(audit([parallel], only_legacy=False))
    assert len(after) == 12 and all(a.v0_batches == a.v1_batches == 0 < a.v2_batches for a in after)


def test_a_bad_segment_is_named_and_nothing_is_converted(tmp_path: Path):
    d = _many_segments(tmp_path)
    bad = sorted((d / "many-1").glob("*.log"))[2]
    data = bytearray(bad.read_bytes())
    data[40] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(PlanError, match=f"{bad}: byte 0: "):
        convert([d], backup=False, workers=2)
    assert bad.read_bytes() == bytes(data)
    names = [n.name for n in d.rglob("*")]
    assert not [n for n in names if n.endswith((".swap", ".cleaned", ".deleted"))]
    # planning validates every segment before any is converted: nothing changed anywhere
    assert all(b.magic < 2 for b in iter_batches((d / "many-0" / "00000000000000000000.log").read_bytes()))


def test_a_level_the_codec_does_not_have_is_refused(tmp_path: Path, capsys):
    """--level is checked by Kafka's rule for compression.<codec>.level before anything is planned: --level -999
    with --codec gzip (and --level 99 keeping a v0 fixture's gzip batches) planned a conversion, then failed
    at apply with zlib's "Invalid initialization option", exit 3."""
    from damage import FIXTURES

    from kafkalog.tools.cli import main

    with pytest.raises(ConfigError, match="compression.gzip.level: Value must be -1 or between 1 and 9"):
        ConvertOptions(codec="gzip", level=-999)
    with pytest.raises(ConfigError, match="compression.zstd.level"):
        ConvertOptions(codec="zstd", level=99)
    with pytest.raises(ConfigError, match="compression.gzip.level"):
        ConvertOptions(level=99)  # keeping each batch's codec: the level must be one every codec has
    assert ConvertOptions(codec="zstd", level=19).level == 19 and ConvertOptions(codec="snappy", level=5)
    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "kafka-2.8.2-zk-v0" / "data", data)
    for argv in (["--codec", "gzip", "--level", "-999"], ["--level", "99"]):
        assert main(["convert", *argv, "--no-backup", str(data)]) == 1
        err = capsys.readouterr().err
        assert "Invalid value -999" in err or "Invalid value 99" in err, err
    assert not diff_paths(data, FIXTURES / "kafka-2.8.2-zk-v0" / "data").differences
