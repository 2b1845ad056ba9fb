"""Facts are data (issue 30 item 6): a plan's losses and operations carry their offsets, records, bytes, timestamps
and the setting that decided them as fields; the words are rendered once, in tools/, from those fields, and no
module reads a library sentence back with a regular expression."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from builders import aged_partition
from engines import retain

from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.engine.plan import Loss, Setting
from kafkalog.storage.io.ops import Delete, Op, Truncate, WriteFile
from kafkalog.tools import plan_output
from kafkalog.tools.output import human_size, human_time

NOW = 1_700_000_000_000
ROOT = Path(__file__).resolve().parents[2]


def _retention_plan(tmp_path: Path):
    cfg = LogConfig.defaults().with_overrides({"retention.ms": 4_000})
    return retain(aged_partition(tmp_path, NOW), cfg, NOW, dry_run=True)


def test_a_retention_loss_carries_every_number_as_a_field(tmp_path: Path):
    plan = _retention_plan(tmp_path)
    losses = plan.partitions[0].losses
    assert [(x.first_offset, x.last_offset, x.records, x.position) for x in losses] == [(0, 4, 5, 0), (5, 9, 5, 0)]
    for loss in losses:
        assert loss.bytes == Path(loss.file).stat().st_size > 0
        assert loss.setting == Setting("retention.ms", 4_000, "topic config")
        assert loss.times["now"] == NOW and NOW - 10_000 <= loss.times["largestTimestamp"] <= NOW - 4_000
        # the words hold no number of their own: each is a field, named where the sentence says it
        assert not re.search(r"\d", loss.reason), loss.reason
        assert "{largestTimestamp}" in loss.reason and "{now}" in loss.reason
        d = loss.to_dict()
        assert d["setting"] == {"name": "retention.ms", "value": 4_000, "source": "topic config"}
        assert d["times"] == loss.times and str(NOW) in d["reason"] and "{" not in d["reason"]


def test_the_renderer_in_tools_writes_the_loss_from_its_fields(tmp_path: Path):
    loss = _retention_plan(tmp_path).partitions[0].losses[0]
    ts = loss.times["largestTimestamp"]
    name = Path(loss.file).name
    assert plan_output.describe_loss(loss) == (
        f"5 records, offsets 0..4, {human_size(loss.bytes)} in {name}: retention.ms=4000 (topic config): its largest "
        f"timestamp {human_time(ts)} is more than retention.ms before now {human_time(NOW)}")
    assert plan_output.describe_loss(loss, epoch=True).endswith(
        f"its largest timestamp {ts} is more than retention.ms before now {NOW}")
    # a loss built by hand renders the same way: nothing comes from parsing a sentence
    made = Loss("torn tail", 7, 9, 3, 5_000, "/x/00000000000000000000.log", 123, damage=True)
    assert plan_output.describe_loss(made) == "3 records, offsets 7..9, 4.9 KiB in 00000000000000000000.log: torn tail"
    assert not hasattr(Loss, "describe"), "one renderer: a Loss has fields, tools/plan_output renders them"


def test_operations_render_their_size_fields():
    assert plan_output.describe_op(Delete("/d/t-0/a.log", "why", 2_048)) == "delete /d/t-0/a.log (2.0 KiB): why"
    assert plan_output.describe_op(Truncate("/d/t-0/a.log", "why", 3_072, 1_024)) == \
        "truncate /d/t-0/a.log from 3.0 KiB to 1.0 KiB (2.0 KiB removed): why"
    assert Delete("/d/t-0/a.log", "why", 2_048).describe() == "delete /d/t-0/a.log (2,048 bytes): why"
    # every kind of operation takes the size renderer (its sizes are fields, not words to rewrite)
    kinds = [WriteFile, Delete, Truncate]
    assert all("size" in c.describe.__code__.co_varnames for c in kinds + [Op])


def _regex_calls(tree: ast.AST) -> list[int]:
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "re" and n.attr in ("sub", "subn", "compile", "search", "match", "findall",
                                                   "finditer", "fullmatch", "split")]


def test_no_module_in_tools_reads_library_text_back_with_a_regex():
    # the plan renderer gets fields: it imports no regex at all
    src = (ROOT / "tools" / "plan_output.py").read_text()
    assert not _regex_calls(ast.parse(src)) and "import re" not in src
    # humanize (sizes and times found in library sentences by regex) is gone from every module of tools/
    for path in (ROOT / "tools").rglob("*.py"):
        text = path.read_text()
        assert "humanize" not in text, path
        assert " bytes\\b" not in text and "T[\\d:.]+Z" not in text, f"{path}: a regex over library prose"
    # and storage no longer writes a time for people into a sentence (the `<ms> (<ISO time>)` pairs)
    for path in (ROOT / "storage").rglob("*.py"):
        assert "%Y-%m-%dT" not in path.read_text(), f"{path}: formats a time for people"


def test_a_size_in_a_reason_is_a_field_rendered_as_a_size(tmp_path: Path):
    cfg = LogConfig.defaults().with_overrides({"retention.bytes": 1})
    plan = retain(aged_partition(tmp_path, NOW), cfg, NOW, dry_run=True)
    loss = plan.partitions[0].losses[0]
    assert loss.setting == Setting("retention.bytes", 1, "topic config")
    size = loss.sizes["logSize"]
    assert size == sum(p.stat().st_size for p in Path(plan.partitions[0].dir).glob("*.log")) > 0
    assert not re.search(r"\d", loss.reason) and loss.to_dict()["sizes"] == {"logSize": size}
    assert f"the log holds {size} bytes;" in loss.to_dict()["reason"]
    assert plan_output.describe_loss(loss).endswith(
        f"retention.bytes=1 (topic config): the log holds {human_size(size)}; the oldest segments go until it is "
        "within the limit")
