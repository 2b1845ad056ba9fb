"""Human output (issue 13): one ``rich`` table renderer for every command, rpk-style UPPER-CASE headers, colour
only on a terminal (``NO_COLOR``, ``FORCE_COLOR``, ``TERM=dumb``), plain grep/awk-safe text in pipes (no escapes,
no box drawing, no wrapped or truncated cells), sizes and ISO-8601 UTC timestamps for people, ``--epoch`` for
raw epoch ms. ``dump``'s text stays Kafka's (tested against DumpLogSegments elsewhere)."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest
from builders import TOPIC_ID, mixed_format_data_dir

from kafkalog.tools import output
from kafkalog.tools.cli import main
from kafkalog.tools.output import human_size, human_time, render_table

ANSI = re.compile(r"\x1b\[")
BOX = re.compile("[\u2500-\u257f]")
ROWS = [{"name": "orders-0", "size": 1, "state": "error"}, {"name": "orders-10", "size": 12345, "state": None}]


@pytest.fixture(autouse=True)
def _no_colour_env(monkeypatch):
    for var in ("NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _table(stream=None, rows=ROWS, **kw) -> str:
    s = stream if stream is not None else io.StringIO()
    render_table(rows, ["name", "size", "state"], s, **kw)
    return s.getvalue()


def test_plain_table_in_a_pipe():
    text = _table()
    assert not ANSI.search(text) and not BOX.search(text)
    assert text.splitlines() == ["NAME        SIZE  STATE",
                                 "orders-0       1  error",
                                 "orders-10  12345  -"]
    assert all(line == line.rstrip() for line in text.splitlines())
    assert [line.split()[0] for line in text.splitlines()[1:]] == ["orders-0", "orders-10"]  # awk '{print $1}'


def test_colour_only_on_a_terminal_and_without_no_color(monkeypatch):
    assert ANSI.search(_table(_Tty()))  # a terminal: bold headers, red errors
    monkeypatch.setenv("NO_COLOR", "1")
    assert not ANSI.search(_table(_Tty()))
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not ANSI.search(_table(_Tty()))
    monkeypatch.delenv("TERM")
    monkeypatch.setenv("FORCE_COLOR", "1")  # forced colour into a pipe
    forced = _table()
    assert ANSI.search(forced) and "\x1b[1m" in forced and "error" in forced
    monkeypatch.setenv("NO_COLOR", "1")  # NO_COLOR wins
    assert not ANSI.search(_table())
    assert ANSI.search(_table(color=True)) and not ANSI.search(_table(_Tty(), color=False))


def test_long_cells_are_never_truncated_or_wrapped(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    long = "/var/lib/kafka/data/" + "x" * 500 + "/00000000000000000000.log"
    rows = [{"name": long, "size": 1, "state": "[bold]not markup[/bold] " + "y" * 300}]
    for stream in (io.StringIO(), _Tty()):
        lines = _table(stream, rows).splitlines()
        assert len(lines) == 2 and long in lines[1] and "[bold]not markup[/bold] " + "y" * 300 in lines[1]
        assert "\u2026" not in lines[1]  # no ellipsis


@pytest.mark.parametrize("n, text", [(0, "0 B"), (512, "512 B"), (1023, "1023 B"), (1024, "1.0 KiB"),
                                     (1536, "1.5 KiB"), (int(1.4 * 1024 * 1024), "1.4 MiB"),
                                     (5 * 1024 ** 3, "5.0 GiB"), (3 * 1024 ** 4, "3.0 TiB"), (None, "-")])
def test_human_size(n, text):
    assert human_size(n) == text


@pytest.mark.parametrize("ms, text, raw", [
    (1795711200123, "2026-11-26T16:40:00.123Z", "1795711200123"),
    (0, "1970-01-01T00:00:00.000Z", "0"),
    (1003, "1970-01-01T00:00:01.003Z", "1003"),
    (-1, "-", "-"),
    (None, "-", "-"),
    (2 ** 63 - 1, str(2 ** 63 - 1), str(2 ** 63 - 1)),  # beyond datetime: the raw value, not a crash
])
def test_human_time(ms, text, raw):
    assert human_time(ms) == text and human_time(ms, epoch=True) == raw


def test_describe_sizes_and_iso_timestamps(tmp_path, capsys):
    root = mixed_format_data_dir(tmp_path / "data")
    assert main(["describe", "--segments", str(root)]) == 0
    out = capsys.readouterr().out
    assert not ANSI.search(out)
    assert re.search(r"^Data dir .*: 1 partitions, \d+ B$", out, re.M)
    seg = next(line for line in out.splitlines() if line.startswith("00000000000000000000.log"))
    assert "170 B" in seg and seg.endswith("1970-01-01T00:00:01.003Z")
    header = next(line for line in out.splitlines() if line.startswith("FILE"))
    assert header.endswith("MAX TIMESTAMP")
    assert main(["describe", "--segments", "--epoch", str(root)]) == 0
    seg = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("00000000000000000010.log"))
    assert seg.split()[-1] == "2000" and "Z" not in seg


def test_plan_sizes_and_timestamps(tmp_path, capsys):
    root = mixed_format_data_dir(tmp_path / "data")
    args = ["retain", str(root), "--dry-run", "--now", str(10 ** 12), "--config", "retention.ms=1000"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "largest timestamp 1970-01-01T00:00:01.003Z is more than retention.ms before now " \
        "2001-09-09T01:46:40.000Z" in out
    assert "removes: offsets 0..9, 170 B in 00000000000000000000.log: retention.ms=1000" in out
    assert re.search(r"^retain: \d+ operation\(s\) .* 252 B freed \(dry run: nothing changed\)$", out, re.M)
    assert main([*args, "--epoch"]) == 0
    out = capsys.readouterr().out
    assert f"largest timestamp 1003 is more than retention.ms before now {10 ** 12}" in out and "1970-" not in out


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    """A human-output invocation of every command that prints a table."""
    root = mixed_format_data_dir(tmp_path / "data")
    bad = tmp_path / "bad"
    shutil.copytree(root, bad)
    (bad / "orders-7" / "00000000000000000000.index").write_bytes(b"\0\0\0\x05\0\0\0\x07")
    other = tmp_path / "other"
    shutil.copytree(root, other)
    with open(other / "orders-7" / "00000000000000000010.log", "r+b") as f:
        f.seek(-1, 2)
        f.write(b"!")
    export = tmp_path / "orders.jsonl"
    assert main(["export", str(root), "--out", str(export), "--no-progress"]) == 0
    return {
        "describe": ["describe", str(root)],
        "verify": ["verify", "--no-progress", str(bad)],
        "diff": ["diff", str(root), str(other), "--level", "bytes"],
        "checkpoints": ["checkpoints", str(root)],
        "checkpoints --set": ["checkpoints", str(root), "--file", "cleaner", "--set", "orders-7=5", "--dry-run"],
        "topic-id": ["topic-id", str(root)],
        "convert --audit": ["convert", "--audit", str(root)],
        "import": ["import", str(export), str(tmp_path / "new"), "--dry-run"],
    }


def test_every_command_renders_through_the_one_renderer(tmp_path, capsys, monkeypatch):
    commands = _commands(tmp_path)
    capsys.readouterr()
    consoles = []
    real = output.console
    monkeypatch.setattr(output, "console", lambda *a, **kw: consoles.append(1) or real(*a, **kw))
    for name, argv in commands.items():
        consoles.clear()
        main(argv)
        out = capsys.readouterr().out
        assert consoles, f"{name}: its table did not go through kafkalog.tools.output.render_table"
        assert not ANSI.search(out) and not BOX.search(out), name
        headers = [line for line in out.splitlines() if re.match(r"^[A-Z][A-Z0-9 ()]+$", line)]
        assert headers, f"{name}: no UPPER-CASE header line in {out!r}"
        assert all(re.fullmatch(r"[A-Z0-9]+(?: {1,2}[A-Z0-9()]+)*(?:  +[A-Z0-9()]+(?: [A-Z0-9()]+)*)*", h)
                   for h in headers), (name, headers)
    monkeypatch.setenv("FORCE_COLOR", "1")  # forced colour reaches every command's table the same way
    for name, argv in commands.items():
        main(argv)
        assert "\x1b[1m" in capsys.readouterr().out, name


def test_tables_of_small_commands(tmp_path, capsys):
    root = mixed_format_data_dir(tmp_path / "data")
    assert main(["topic-id", str(root)]) == 0
    assert capsys.readouterr().out.splitlines() == ["PARTITION  TOPIC ID", f"orders-7   {TOPIC_ID}"]
    assert main(["checkpoints", str(root)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "PARTITION  RECOVERY POINT  LOG START  HIGH WATERMARK  CLEANER",
        "orders-7               10          1              11        4"]


def test_epoch_option_on_commands_with_timestamps():
    from kafkalog.tools.cli import build_parser

    for name in ("describe", "diff", "repair", "reindex", "flush", "retain", "compact", "convert", "migrate",
                 "topic-id", "checkpoints"):
        args = build_parser(name).parse_args([name, "--epoch", *(["a", "b"] if name in ("diff", "migrate") else
                                                                   ["a"])])
        assert args.epoch is True, name
