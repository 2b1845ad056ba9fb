"""The offline forensics commands (``groups``, ``transactions``, ``export --salvage``, ``dump --salvage``) on the
project's parallel and progress machinery: ``--workers N`` gives the same result as one worker (the same bytes
out for salvage), and the progress bar is advanced to its total."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from kafkalog.storage.engine.salvage import salvage_bytes, salvage_jsonl
from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.parallel import iter_partition_tasks, run_partition_tasks
from kafkalog.storage.records import iter_batches
from kafkalog.storage.reports.groups import load_groups
from kafkalog.tools.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CLEAN = FIXTURES / "kafka-4.3.1-kraft" / "data"
KILLED = FIXTURES / "kafka-4.3.1-kraft-killed" / "data"


class Recorder:
    """Stands in for :func:`kafkalog.tools.output.progress`: records the total and every advance."""

    def __init__(self) -> None:
        self.bars: list[dict] = []

    @contextlib.contextmanager
    def __call__(self, total=None, description: str = "", **kw):
        bar = {"total": total, "advances": [], "description": description}
        self.bars.append(bar)

        class Bar:
            def advance(self, n: float = 1) -> None:
                bar["advances"].append(n)

            def update(self, **kwargs) -> None:
                if "total" in kwargs:
                    bar["total"] = kwargs["total"]

        yield Bar()

    def only(self) -> dict:
        assert len(self.bars) == 1, self.bars
        return self.bars[0]


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------------------------------ the machinery


def _square(x: int) -> int:
    return x * x


@pytest.mark.parametrize("workers", [1, 2])
def test_run_partition_tasks_weights(workers):
    done: list[int] = []
    tasks = list(range(10))
    assert run_partition_tasks(_square, tasks, workers=workers, threads=1, progress=done.append,
                               weights=[t * 10 for t in tasks]) == [t * t for t in tasks]
    assert sum(done) == 450


@pytest.mark.parametrize("workers", [1, 3])
def test_iter_partition_tasks_in_order(workers):
    assert list(iter_partition_tasks(_square, list(range(20)), workers=workers, ahead=2)) == \
        [t * t for t in range(20)]


# ------------------------------------------------------------------------------------------------ groups


@pytest.mark.parametrize("fixture", ["kafka-4.3.1-kraft", "kafka-3.9.2-zk-v0"])
def test_groups_workers_same_report_and_progress_to_the_total(fixture):
    data = FIXTURES / fixture / "data"
    one = load_groups([data], workers=1)
    rec = Recorder()
    with rec() as bar:
        two = load_groups([data], workers=2, progress=bar)
    assert one.groups and [g.to_json() for g in one.groups] == [g.to_json() for g in two.groups]
    assert (one.partitions, one.errors, one.notes, one.assigned_ends) == \
        (two.partitions, two.errors, two.notes, two.assigned_ends)
    total = sum(p.stat().st_size for p in data.glob("__consumer_offsets-*/*.log"))
    assert rec.only()["total"] == total and sum(rec.only()["advances"]) == total


def test_groups_cli_workers(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr("kafkalog.tools.groups.progress", rec)
    rc1, out1, _ = _run(["groups", "--json", str(CLEAN)])
    rc2, out2, _ = _run(["groups", "--json", "--workers", "2", str(CLEAN)])
    assert rc1 == rc2 == 0 and out1 == out2 and out1
    for bar in rec.bars:
        assert bar["total"] and sum(bar["advances"]) == bar["total"]
    with pytest.raises(SystemExit) as e:
        _run(["groups", "--workers", "0", str(CLEAN)])
    assert e.value.code == 2


# ------------------------------------------------------------------------------------------ transactions


def test_transactions_cli_progress_to_the_total(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr("kafkalog.tools.transactions.progress", rec)
    rc, out, _ = _run(["transactions", "--json", "--now", "1800000000000", "--workers", "2", str(KILLED)])
    assert rc == 1 and out
    bar = rec.only()
    assert bar["total"] == sum(1 for p in KILLED.iterdir() if p.is_dir() and "-" in p.name
                               and not p.name.startswith("__cluster_metadata"))
    assert sum(bar["advances"]) == bar["total"]


# --------------------------------------------------------------------------------------------- salvage


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    """A copy of the 4.3.1 fixture with a batch in the middle of two segments corrupted."""
    data = tmp_path / "data"
    shutil.copytree(CLEAN, data)
    for part in ("multi-segment-1", "codec-zstd-0"):
        seg = sorted((data / part).glob("*.log"))[0]
        raw = bytearray(seg.read_bytes())
        bs = list(iter_batches(bytes(raw)))
        raw[bs[len(bs) // 2].position + 30] ^= 0xFF
        seg.write_bytes(bytes(raw))
    return data


def test_salvage_workers_same_bytes_report_and_skipped_order(damaged: Path, tmp_path: Path):
    runs = []
    for workers in (1, 2, 3):
        out = tmp_path / f"w{workers}.jsonl"
        seen: list = []
        done: list[int] = []
        rep = salvage_jsonl([damaged], out, on_skipped=lambda s, src, seen=seen: seen.append((s, src.path)),
                            progress=done.append, workers=workers)
        assert sum(done) == salvage_bytes([damaged])
        runs.append((out.read_bytes(), {k: v for k, v in rep.to_dict().items() if k != "files"}, rep.skipped,
                     seen))
    assert runs[0][0] and len(runs[0][2]) == 2
    assert runs[0] == runs[1] == runs[2]
    assert not list(tmp_path.glob(".kafkalog-salvage-*"))  # the spools are gone


def test_salvage_progress_advances_within_a_file(damaged: Path):
    seg = sorted((damaged / "multi-segment-1").glob("*.log"))[0]
    done: list[int] = []
    salvage_jsonl([seg], io.StringIO(), progress=done.append)
    assert sum(done) == seg.stat().st_size and len([n for n in done if n]) > 2  # batch by batch, not per file


def test_export_salvage_cli_workers_same_output(damaged: Path, monkeypatch):
    rec = Recorder()
    monkeypatch.setattr("kafkalog.tools.export.progress", rec)
    rc1, out1, err1 = _run(["export", "--salvage", "--json", str(damaged), "--out", "-"])
    rc2, out2, err2 = _run(["export", "--salvage", "--json", "--workers", "2", str(damaged), "--out", "-"])
    assert rc1 == rc2 == 1 and out1 == out2 and out1 and err1 == err2
    assert [json.loads(x).get("event") for x in err1.splitlines()].count("skipped") == 2
    for bar in rec.bars:
        assert bar["total"] == salvage_bytes([damaged]) and sum(bar["advances"]) == bar["total"]
    rc, _, err = _run(["export", "--workers", "2", str(damaged), "--out", "-"])
    assert rc == 2 and "--workers needs --salvage" in err


def test_dump_salvage_progress_to_the_file_size(damaged: Path, monkeypatch):
    rec = Recorder()
    monkeypatch.setattr("kafkalog.tools.dump.progress", rec)
    seg = sorted((damaged / "multi-segment-1").glob("*.log"))[0]
    rc, out, _ = _run(["dump", "--salvage", str(seg)])
    assert rc == 1 and "Skipped bytes" in out
    bar = rec.only()
    assert bar["total"] == seg.stat().st_size and sum(bar["advances"]) == bar["total"]


def test_groups_workers_same_errors_on_a_damaged_partition(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(CLEAN, data)
    seg = max(data.glob("__consumer_offsets-*/*.log"), key=lambda p: p.stat().st_size)
    raw = bytearray(seg.read_bytes())
    bs = list(iter_batches(bytes(raw)))
    raw[bs[len(bs) // 2].position + 30] ^= 0xFF
    seg.write_bytes(bytes(raw))
    one, two = load_groups([data], workers=1), load_groups([data], workers=2)
    assert one.errors and one.errors == two.errors and one.errors[0].file == str(seg)
    assert [g.to_json() for g in one.groups] == [g.to_json() for g in two.groups]


def test_salvage_workers_an_unreadable_file_stops_both_alike(tmp_path: Path):
    import os

    shutil.copytree(CLEAN / "multi-segment-0", tmp_path / "multi-segment-0")
    os.mkfifo(tmp_path / "odd.log")
    shutil.copy(next((CLEAN / "codec-none-0").glob("*.log")), tmp_path / "zz-1.log")
    paths = [tmp_path / "multi-segment-0", tmp_path / "odd.log", tmp_path / "zz-1.log"]
    outs, errors = [], []
    for workers in (1, 2):
        out = io.StringIO()
        with pytest.raises(KafkaLogError) as e:
            salvage_jsonl(paths, out, workers=workers)
        outs.append(out.getvalue())
        errors.append((type(e.value), str(e.value)))
    assert outs[0] and outs[0] == outs[1] and errors[0] == errors[1] and "FIFO" in errors[0][1]
