import os

from engines import recover

from kafkalog.facts import render
from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.engine.flush import plan_flush
from kafkalog.storage.engine.plan import apply
from kafkalog.storage.engine.repair import plan_repair
from kafkalog.storage.engine.writer import LogWriter
from kafkalog.storage.files.checkpoints import read_offset_checkpoint
from kafkalog.storage.files.offset_index import read_offset_index
from kafkalog.storage.records import build_batch, iter_batches
from kafkalog.tools.cli import main

NOW = 1_700_000_000_000
CFG = LogConfig.from_topic_props({"segment.bytes": "20000", "index.interval.bytes": "1000"})


def _make(tmp_path, n=200):
    data = tmp_path / "data"
    d = data / "t-0"
    with LogWriter(d, CFG, now_ms=NOW) as w:
        for i in range(n):
            w.append(build_batch([(None, NOW + i, b"k%d" % i, b"v" * 100)], base_offset=0))
    return data, d


def _logs(d):
    return sorted(p for p in os.listdir(d) if p.endswith(".log"))


def test_torn_tail_truncated(tmp_path):
    _, d = _make(tmp_path)
    last = d / _logs(d)[-1]
    size = os.path.getsize(last)
    with open(last, "r+b") as f:
        f.truncate(size - 5)
    r = recover(d, config=CFG, now_ms=NOW)
    assert r.log_end_offset == 199
    assert r.truncated and r.truncated[0][2] < size - 5
    assert (d / "00000000000000000199.snapshot").exists()
    assert not (d / "00000000000000000200.snapshot").exists()


def test_crc_flip_mid_segment_deletes_later_segments(tmp_path):
    _, d = _make(tmp_path)
    first = d / _logs(d)[0]
    data = bytearray(first.read_bytes())
    batches = list(iter_batches(bytes(data)))
    pos = batches[50].position
    data[pos + 70] ^= 0xFF
    first.write_bytes(bytes(data))
    preview = recover(d, config=CFG, now_ms=NOW, dry_run=True)
    assert preview.truncated == [(str(first), len(data), pos)]
    assert any(p.endswith("00000000000000000115.log") for p in preview.deleted)
    assert preview.records_dropped == 150
    r = recover(d, config=CFG, now_ms=NOW)
    assert r.log_end_offset == 50 and _logs(d) == ["00000000000000000000.log"]
    assert r.records_dropped == 150
    with read_offset_index(d / "00000000000000000000.index") as idx:
        assert all(e.position < pos for e in idx)


def test_missing_index_rebuilt_even_after_clean_shutdown(tmp_path):
    _, d = _make(tmp_path)
    idx = d / "00000000000000000000.index"
    original = idx.read_bytes()
    idx.unlink()
    (d / "00000000000000000000.timeindex").unlink()
    recover(d, config=CFG, had_clean_shutdown=True, recovery_point=200, now_ms=NOW)
    assert idx.read_bytes() == original  # leader appends of one batch: both rules agree
    assert (d / "00000000000000000000.timeindex").exists()


def test_untrimmed_active_index_and_leftovers(tmp_path):
    _, d = _make(tmp_path)
    active = d / "00000000000000000115.index"
    body = active.read_bytes()
    active.write_bytes(body + bytes(8 * 100))
    (d / "00000000000000000000.log.deleted").write_bytes(b"x")
    (d / "00000000000000000777.index").write_bytes(b"")  # orphan
    r = recover(d, config=CFG, recovery_point=200, had_clean_shutdown=True, now_ms=NOW)
    assert active.read_bytes() == body
    assert not (d / "00000000000000000000.log.deleted").exists()
    assert not (d / "00000000000000000777.index").exists()
    assert r.changed


def test_repair_plan_cli_and_flush(tmp_path):
    data, d = _make(tmp_path)
    (data / "recovery-point-offset-checkpoint").write_text("0\n1\nbad line\n")
    last = d / _logs(d)[-1]
    with open(last, "ab") as f:
        f.write(b"\x00" * 10)  # torn tail
    plan = plan_repair([data], now_ms=NOW)
    kinds = [op.kind for op in plan.ops()]
    assert "truncate" in kinds and plan.data_dirs[0].ops[-1].path.endswith(".kafka_cleanshutdown")
    assert any("bad line" in n or "malformed" in n for n in map(render, plan.data_dirs[0].notes))
    assert plan.losses and plan.losses[0][1].damage
    assert main(["repair", str(data), "--dry-run", "--json"]) == 1
    assert last.read_bytes().endswith(b"\x00" * 10)
    assert main(["repair", str(data), "--backup", str(tmp_path / "bk"), "--workers", "2"]) == 1
    assert not last.read_bytes().endswith(b"\x00" * 10)
    assert (tmp_path / "bk").exists()
    assert read_offset_checkpoint(data / "recovery-point-offset-checkpoint").to_dict() == {("t", 0): 200}
    assert (data / ".kafka_cleanshutdown").read_bytes() == b'{"version":0,"brokerEpoch":-1}'
    # a second run finds nothing to do
    assert main(["repair", str(data), "--no-backup"]) == 0


def test_flush_refuses_to_advance_past_corrupt_data(tmp_path):
    data, d = _make(tmp_path)
    apply(plan_flush([data], now_ms=NOW))
    assert (data / ".kafka_cleanshutdown").exists()
    (data / ".kafka_cleanshutdown").unlink()
    (data / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 115\n")
    last = d / _logs(d)[-1]
    raw = bytearray(last.read_bytes())
    raw[100] ^= 1
    last.write_bytes(bytes(raw))
    plan = plan_flush([data], now_ms=NOW)
    assert not plan.partitions[0].facts["verified"]
    apply(plan)
    assert not (data / ".kafka_cleanshutdown").exists()
    assert read_offset_checkpoint(data / "recovery-point-offset-checkpoint").to_dict() == {("t", 0): 115}
    assert main(["flush", str(data)]) == 1


def test_apply_plan_api(tmp_path):
    data, _ = _make(tmp_path, n=10)
    plan = plan_repair([data], now_ms=NOW)
    apply(plan, backup=False)
    assert (data / ".kafka_cleanshutdown").exists()


def test_backup_keeps_exactly_the_changed_originals(tmp_path):
    data, d = _make(tmp_path)
    logs = _logs(d)
    last = d / logs[-1]
    original = last.read_bytes() + b"\x00" * 10
    last.write_bytes(original)  # torn tail
    bk = tmp_path / "bk"
    assert main(["repair", str(data), "--backup", str(bk), "--workers", "1"]) == 1
    kept = bk / "data" / "t-0"  # --backup DIR holds one folder per data dir
    assert (kept / logs[-1]).read_bytes() == original  # a copy: the truncation did not reach it
    assert not (kept / logs[0]).exists()  # untouched: no link left behind pinning disk space
    assert (kept / "00000000000000000000.index").exists()  # replaced by the rebuilt one
    assert os.stat(kept / "00000000000000000000.index").st_ino != os.stat(d / "00000000000000000000.index").st_ino


def test_run_partition_tasks_keeps_order_across_processes():
    from kafkalog.storage.parallel import run_partition_tasks

    seen = []
    out = run_partition_tasks(abs, list(range(-40, 0)), workers=2, threads=3, progress=seen.append)
    assert out == list(range(40, 0, -1)) and sum(seen) == 40
