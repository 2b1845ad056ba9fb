"""Facts are data (issue 30 item 6): a plan's losses and operations carry their offsets, records, bytes, timestamps
and the setting that decided them as fields; so do the notes of plans, loads, the config resolver and reports (a
:class:`Finding` with a ``kind`` code and typed ``facts``); the words are rendered once, in tools/, from those fields,
and no module reads a library sentence back with a regular expression."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from builders import aged_partition, mixed_format_data_dir, three_segment_data_dir, three_segment_partition
from damage import damaged_copy
from engines import compact, recover, retain

from kafkalog import facts
from kafkalog.storage.config.log_config import LogConfig
from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.storage.engine.plan import Loss, Setting
from kafkalog.storage.files.findings import Finding, defect, note
from kafkalog.storage.files.segment import Segment
from kafkalog.storage.io.ops import Delete, Op, Truncate, WriteFile
from kafkalog.storage.reports.diff import diff_paths
from kafkalog.storage.reports.doctor import diagnose
from kafkalog.storage.reports.verify import verify_data_dir
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
        # no words at all: a code, and each number a fact (the timestamps also named in ``times``)
        assert loss.reason == "" and loss.note is not None and loss.note.kind == "loss.retentionMs"
        assert dict(loss.note.facts) == loss.times
        d = plan_output.loss_json(loss)
        assert d["setting"] == {"name": "retention.ms", "value": 4_000, "source": "topic config"}
        assert d["times"] == loss.times and d["reason"] == (f"its largest timestamp {loss.times['largestTimestamp']} "
                                                            f"is more than retention.ms before now {NOW}")
        assert (d["code"], d["facts"]) == ("loss.retentionMs", loss.times)


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
    assert loss.reason == "" and loss.note is not None and dict(loss.note.facts) == {"logSize": size}
    d = plan_output.loss_json(loss)
    assert d["sizes"] == {"logSize": size} and f"the log holds {size} bytes;" in d["reason"]
    assert plan_output.describe_loss(loss).endswith(
        f"retention.bytes=1 (topic config): the log holds {human_size(size)}; the oldest segments go until it is "
        "within the limit")


# ------------------------------------------------------------------------------------------------ notes


def test_a_not_eligible_note_carries_the_dirty_ratio_and_the_setting_as_numbers(tmp_path: Path):
    pdir = three_segment_partition(tmp_path)
    cfg = LogConfig.defaults().with_overrides({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 1.0})
    out = compact(pdir, cfg, now=NOW)
    assert not out.eligible
    (n,) = out.notes
    assert isinstance(n, Finding) and n.kind == "compact.notEligible" and n.file == str(pdir) and not n.message
    assert n.facts["dirtyRatio"] == out.facts["cleanableRatio"] == 1.0
    assert n.facts["setting"] == {"name": "min.cleanable.dirty.ratio", "value": 1.0, "source": "topic config"}
    assert facts.render(n) == ("not eligible: dirty ratio 1.000 <= min.cleanable.dirty.ratio 1.0 (topic config) and "
                               "no segment past max.compaction.lag.ms (--all cleans anyway)")
    # --json: the fields, and the words the command renders
    assert facts.to_json(n) == {"file": str(pdir), "position": None, "kind": "compact.notEligible",
                                "severity": "info", "message": facts.render(n), "facts": dict(n.facts)}


def test_an_active_only_note_carries_its_bytes_and_offsets(tmp_path: Path):
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    (three_segment_partition(tmp_path, "src") / "00000000000000000040.log").rename(pdir / "00000000000000000040.log")
    out = compact(pdir, LogConfig.defaults().with_overrides({"cleanup.policy": "compact"}), now=NOW)
    (n,) = out.notes
    size = (pdir / "00000000000000000040.log").stat().st_size
    assert (n.kind, n.facts) == ("compact.activeOnly", {"bytes": size, "firstOffset": 40, "lastOffset": 49})
    assert facts.render(n).startswith(f"only the active segment holds data ({size} bytes, offsets 40..49)")


def _torn_tail_load(tmp_path: Path):
    """A three-segment partition whose active segment has a torn tail, loaded (dry run): (dir, valid bytes, load)."""
    pdir = three_segment_partition(tmp_path)
    last = pdir / "00000000000000000040.log"
    size = last.stat().st_size
    with open(last, "ab") as f:
        f.write(b"\x00" * 10)  # a torn tail
    return pdir, size, recover(pdir, now_ms=NOW, dry_run=True)


def test_a_loader_note_carries_the_segment_base_offset_and_the_valid_bytes(tmp_path: Path):
    pdir, size, r = _torn_tail_load(tmp_path)
    (n,) = [n for n in r.notes if n.kind == "loader.truncated"]
    assert n.file == str(pdir) and n.facts["baseOffset"] == 40 and n.facts["validBytes"] == size
    # why it stops there as facts (what the scanner met, the corrupt batch's error), not a `reason` sentence (h10)
    assert dict(n.facts) == {"baseOffset": 40, "validBytes": size, "stop": "torn tail", "error": None}
    assert facts.render(n) == f"orders-3: segment 40: valid region ends at byte {size}: torn tail at byte {size}"


def test_a_rebuilt_index_note_carries_the_segments_index_defect_and_words_it_as_before(tmp_path: Path):
    pdir = three_segment_partition(tmp_path)
    (pdir / "00000000000000000000.index").unlink()
    ti = pdir / "00000000000000000020.timeindex"
    ti.write_bytes(ti.read_bytes() + bytes(11) + b"\x01")  # an entry of timestamp 0 after the last one
    (pdir / "00000000000000000040.txnindex").write_bytes(bytes(34 * 500))  # more entries than batches
    r = recover(pdir, now_ms=NOW, dry_run=True, recovery_point=50, had_clean_shutdown=True)
    notes = {n.facts["baseOffset"]: n for n in r.notes if n.kind == "loader.indexRebuilt"}
    assert {b: n.facts["defect"]["code"] for b, n in notes.items()} == {
        0: "segment.indexMissing", 20: "segment.indexSanityCheck", 40: "segment.txnIndexOversized"}
    assert notes[40].facts["defect"]["facts"] == {"index": "00000000000000000040.txnindex", "entries": 500,
                                                  "bound": 11, "bytes": 695}
    assert notes[20].facts["defect"]["facts"]["index"] == "00000000000000000020.timeindex"
    tail = "; the segment is recovered and its indexes rebuilt"
    assert [facts.render(notes[b]) for b in (0, 20, 40)] == [
        f"orders-3: segment 0: missing .index{tail}",
        "orders-3: segment 20: 00000000000000000020.timeindex: corrupt time index: non-zero size but the last "
        f"timestamp is 0 which is less than the first timestamp 2005{tail}",
        "orders-3: segment 40: 00000000000000000040.txnindex: 500 entries, more than the 11 batches a 695-byte "
        f"segment can hold (one entry per abort marker){tail}"]
    # the files layer's checks give the defect, not its words (non-zero bytes after the last entry: a defect too)
    with Segment.open(pdir / "00000000000000000020.log") as seg:
        assert seg.index_problem() == defect("segment.indexSanityCheck", 60, index="00000000000000000020.timeindex",
                                             error=notes[20].facts["defect"]["facts"]["error"])
        assert seg.txn_index_problem() is None


def test_a_resolver_note_carries_the_data_dir_path(tmp_path: Path):
    data = three_segment_data_dir(tmp_path / "data")
    (n,) = ConfigResolver(data_dirs=[data]).notes(data)
    assert (n.kind, n.file, n.facts) == ("config.noMetadataDir", str(data), {"metadataDir": "__cluster_metadata-0"})
    assert facts.render(n).startswith(f"{data}: KRaft data dir without __cluster_metadata-0 (it lives in the broker's")


def test_every_kind_has_one_template_and_a_note_without_one_renders_its_message():
    assert all(k.count(".") == 1 for k in facts.TEMPLATES)
    assert facts.render(Finding("/x", 3, "crc", "error", "CRC mismatch")) == "CRC mismatch"
    n = note("/d/t-0", "flush.notVerified", problem="torn tail", recoveryPoint=7)
    assert facts.render(n) == "/d/t-0: NOT flushed: torn tail; its recovery point stays 7: run repair first"
    assert facts.to_json(n)["facts"] == {"problem": "torn tail", "recoveryPoint": 7}
    # a finding's --json keeps its five documented keys (finding.schema.json), its message rendered
    f = Finding("/d/t-0/x.log", None, "offsets", "error", code="verify.baseBelowPrevious",
                facts={"baseOffset": 5, "previousNextOffset": 9})
    assert facts.finding_json(f) == {"file": "/d/t-0/x.log", "position": None, "kind": "offsets", "severity": "error",
                                     "message": "base offset 5 is below the previous segment's next offset 9"}


#: the modules whose notes are structured: each builds a note with ``note(subject, kind, **facts)``, never words
STRUCTURED = ["storage/config/resolver.py", "storage/engine/cleaner/manager.py", "storage/engine/loader.py",
              "storage/engine/repair.py", "storage/engine/retention.py", "storage/engine/flush.py",
              "storage/engine/targets.py", "storage/log/dir_checkpoints.py", "storage/reports/group_coordinator.py",
              "storage/remote/rehydrate.py"]


def _worded_notes(tree: ast.AST) -> list[int]:
    """Lines that add a string (an f-string, a literal, a concatenation) to a ``notes`` list."""
    def words(e: ast.AST) -> bool:
        return isinstance(e, ast.JoinedStr) or (isinstance(e, ast.Constant) and isinstance(e.value, str)) or (
            isinstance(e, ast.BinOp) and (words(e.left) or words(e.right)))

    def is_notes(e: ast.AST) -> bool:
        return (isinstance(e, ast.Name) and e.id == "notes") or (isinstance(e, ast.Attribute) and e.attr == "notes")

    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("append", "extend") \
                and is_notes(n.func.value) and n.args and (words(n.args[0]) or (
                    isinstance(n.args[0], ast.GeneratorExp | ast.ListComp) and words(n.args[0].elt))):
            out.append(n.lineno)
    return out


def test_no_storage_module_words_a_note():
    for rel in STRUCTURED:
        src = (ROOT / rel).read_text()
        assert not _worded_notes(ast.parse(src)), f"{rel}: a note built as words, lines {_worded_notes(ast.parse(src))}"
        assert "note(" in src, rel
    # and nowhere else in storage either: a note is a Finding with facts
    for path in (ROOT / "storage").rglob("*.py"):
        assert not _worded_notes(ast.parse(path.read_text())), path


def _note_calls() -> list[tuple[str, str, list[str]]]:
    """Every ``note(subject, "kind", **facts)`` in storage (doctor's ``_noted``, and findings made with a
    ``code=``): (module, kind or code, the facts' names)."""
    out = []
    for path in (ROOT / "storage").rglob("*.py"):
        for n in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)):
                continue
            # note(subject, kind); doctor's _noted(severity, kind, path, code); error/warning/info(..., code=...),
            # and a helper method given the code (segment_check's self.count(code=..., entries=...))
            # a file's own checks: defect("code", position, **facts)
            at = {"note": 1, "_noted": 3, "defect": 0}.get(n.func.id, -1) if isinstance(n.func, ast.Name) else -1
            code = [kw.value for kw in n.keywords if kw.arg == "code"]
            if 0 <= at < len(n.args) or code:
                k = code[0] if code else n.args[at]
                kinds = [e.value for e in ([k.body, k.orelse] if isinstance(k, ast.IfExp) else [k])
                         if isinstance(e, ast.Constant)]
                # a **spread of facts is named "**" (the sample facts stand for it)
                out += [(path.name, k, [kw.arg or "**" for kw in n.keywords if kw.arg != "code"]) for k in kinds]
    return out


def test_every_kind_storage_notes_has_a_template_that_renders_its_facts():
    samples = {"setting": {"name": "x.y", "value": 1.0, "source": "topic config"}, "errors": ["e"],
               "newSegments": [5, 9], "baseOffsets": [0, 5], "routine": [{"action": "deletedFiles", "count": 2}],
               "state": None, "dirtyRatio": 0.25, "rebuilt": ["0.index"], "files": ["0.log.swap"], "offline": True,
               "pids": [12], "logEndOffset": 7, "lastMissing": 9, "suffix": ".swap",
               "remembered": [{"source": "consumer group", "file": "/d", "offset": 10, "logEndOffset": 7, "group": "g",
                               "epoch": None}],
               "finding": {"file": "/d/t-0/0.index", "code": "verify.indexMissing", "facts": {}, "message": ""},
               "defect": {"code": "segment.indexMissing", "facts": {}},
               "planError": {"code": "plan.failed", "facts": {"file": "/d/t-0/0.log", "position": 7, "error": "bad",
                                                                "errorKind": "CorruptRecordError"}},
               "side": "a", "fields": ["crc"], "ranges": [[1, 3]],
               "a": {"segment": "0.log", "position": 0, "baseOffset": 0, "lastOffset": 1, "magic": 2},
               "b": {"segment": "0.log", "position": 0, "baseOffset": 0, "lastOffset": 1, "magic": 2}}
    calls = _note_calls()
    assert len(calls) >= 40, calls
    for module, kind, names in calls:
        assert kind in facts.TEMPLATES, f"{module}: {kind} has no template in tools/package/facts.py"
        given = {k: samples.get(k, 7) for k in names if k != "**"} | (samples if "**" in names else {})
        text = facts.render(note("/d/t-0/x", kind, **given))
        assert text and "{" not in text, (kind, text)
    assert {k for _, k, _ in calls} == set(facts.TEMPLATES), "a template no storage module uses"


def test_doctor_problems_carry_their_numbers_as_facts(tmp_path: Path):
    d = tmp_path / "killed"
    damaged_copy("kafka-4.3.1-kraft-killed", d, ("torn_tail",))
    diag = diagnose([d], now_ms=NOW)
    rec = next(p for p in diag.problems if p.kind == "recovery" and p.partition == "killed-0")
    assert rec.message == "" and rec.note is not None and rec.note.kind == "doctor.recovers"
    assert rec.note.facts["lastOffset"] == rec.last_offset and rec.note.facts["bytes"] == rec.bytes > 0
    assert rec.note.facts["segments"] >= 1 and isinstance(rec.note.facts["rebuilt"], list)
    assert facts.render(rec.note).startswith(f"recovers {rec.note.facts['segments']} segment(s)")
    assert facts.render(rec.note).endswith(f"; the log ends at offset {rec.last_offset}")
    d = rec.to_dict()
    assert d["code"] == "doctor.recovers" and d["facts"]["lastOffset"] == rec.last_offset
    legacy = diagnose([mixed_format_data_dir(tmp_path / "mixed")], now_ms=NOW)
    (p,) = [p for p in legacy.problems if p.kind == "legacyFormat"]
    assert p.note is not None and p.note.facts == {"segments": 1, "batches": 2, "bytes": p.bytes}  # two v1 messages
    assert facts.render(p.note).startswith("1 segment(s) hold 2 message format v0/v1 batch(es)")


def _reads_words_back(tree: ast.AST) -> list[int]:
    """Lines testing a finding's words (``"missing" in f.message``, ``f.message.startswith(...)``)."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in n.ops) and any(
                isinstance(c, ast.Attribute) and c.attr == "message" for c in n.comparators):
            out.append(n.lineno)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                "startswith", "endswith", "find", "index") and isinstance(n.func.value, ast.Attribute) and \
                n.func.value.attr == "message":
            out.append(n.lineno)
    return out


def test_no_module_decides_on_a_findings_words():
    # reindex asks for a missing index file, the startup gate for a dir the broker refuses: both are facts now
    for path in list((ROOT / "storage").rglob("*.py")) + list((ROOT / "tools").rglob("*.py")):
        assert not _reads_words_back(ast.parse(path.read_text())), (path, _reads_words_back(ast.parse(path.read_text())))


#: the modules whose findings are codes and facts (issue 30 item 6): the checks of a segment, of a data dir's and a
#: partition dir's layout, and of a tiered-storage store
STRUCTURED_FINDINGS = ["storage/log/segment_check.py", "storage/log/datadir.py", "storage/log/partition_files.py",
                       "storage/remote/inspect.py"]


def _worded_findings(tree: ast.AST) -> list[int]:
    """Lines that make a finding (error/warning/info/Finding, or a ``level`` standing for one) with words built in
    the module (an f-string, a literal, a concatenation) as its message."""
    def words(e: ast.AST) -> bool:
        return isinstance(e, ast.JoinedStr) or (isinstance(e, ast.Constant) and isinstance(e.value, str)) or (
            isinstance(e, ast.BinOp) and (words(e.left) or words(e.right)))

    out = []
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
            continue
        at = {"error": 3, "warning": 3, "info": 3, "level": 3, "Finding": 4}.get(n.func.id)
        if at is not None and len(n.args) > at and words(n.args[at]):
            out.append(n.lineno)
    return out


#: the checks of the files layer: what each returns is a Defect (a code, its facts, a position), never words
FILE_CHECKS = {"validate", "problems", "fatal_problems", "_entry_problems", "index_problem", "txn_index_problem"}


def _worded_checks(tree: ast.AST) -> list[int]:
    """Lines of a file check (:data:`FILE_CHECKS`) holding words: an f-string, or a string that is neither its
    docstring nor the code of a ``defect(...)``."""
    out = []
    for fn in ast.walk(tree):
        if not (isinstance(fn, ast.FunctionDef) and fn.name in FILE_CHECKS):
            continue
        allowed = {id(fn.body[0].value)} if ast.get_docstring(fn) is not None else set()  # type: ignore[attr-defined]
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "defect" and n.args:
                allowed.add(id(n.args[0]))
        out += [n.lineno for n in ast.walk(fn) if isinstance(n, ast.JoinedStr) or (
            isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in allowed)]
    return sorted(set(out))


def test_the_checks_of_the_files_layer_return_defects_not_words():
    checked = 0
    for path in sorted((ROOT / "storage" / "files").glob("*.py")):
        tree = ast.parse(path.read_text())
        checked += sum(isinstance(n, ast.FunctionDef) and n.name in FILE_CHECKS for n in ast.walk(tree))
        assert not _worded_checks(tree), f"{path.name}: a check returns words, lines {_worded_checks(tree)}"
    assert checked >= 9  # checkpoints, leader epochs, snapshots, meta.properties, quorum-state, marker, indexes
    # and the words come back if a check words a problem again
    bad = ast.parse('def validate(self):\n    """Doc."""\n    return [defect("x.y"), f"entry {self.n}"]\n')
    assert _worded_checks(bad) == [3]


def test_the_checks_of_segments_layouts_and_remote_stores_word_no_finding():
    for rel in STRUCTURED_FINDINGS:
        tree = ast.parse((ROOT / rel).read_text())
        assert not _worded_findings(tree), f"{rel}: a finding built as words, lines {_worded_findings(tree)}"
        assert "code=" in (ROOT / rel).read_text(), rel


def test_a_segment_finding_carries_its_offsets_and_renders_as_before(tmp_path: Path):
    d = tmp_path / "killed"
    damaged_copy("kafka-4.3.1-kraft-killed", d, ("crc_mismatch",))
    crc = [f for f in verify_data_dir(d) if f.kind == "crc"]
    assert crc and all(not f.message for f in crc)
    for f in crc:
        assert f.code in ("verify.crcTruncates", "verify.notTruncated")
        stored, computed = f.facts.get("storedCrc"), f.facts.get("computedCrc")
        if f.code == "verify.crcTruncates":
            assert isinstance(stored, int) and isinstance(computed, int) and stored != computed
            assert facts.render(f) == (f"CRC mismatch (stored 0x{stored:08x}, computed 0x{computed:08x}); recovery "
                                       "truncates the segment here")


# ------------------------------------------------------------------ the whys of plans, transactions and diffs


#: the modules whose plan losses, operation whys, transaction reasons and diff details are codes and facts (issue 30
#: item 6): the loader (repair, doctor), the swap recovery, producer snapshots, rehydrate, transactions, diff
STRUCTURED_WHYS = ["storage/engine/loader.py", "storage/engine/swap.py", "storage/log/producer_state.py",
                   "storage/remote/rehydrate.py", "storage/reports/transactions.py", "storage/reports/diff.py",
                   # the plans of retain, compact, flush, repair, migrate, checkpoints, topic-id, convert,
                   # append and the loader's split (h7)
                   "storage/engine/retention.py", "storage/engine/cleaner/manager.py", "storage/engine/flush.py",
                   "storage/engine/repair.py", "storage/engine/migrate.py", "storage/engine/offset_checkpoints.py",
                   "storage/engine/topic_id.py", "storage/engine/message_format.py", "storage/engine/convert.py",
                   "storage/engine/writer.py", "storage/engine/split.py"]


def _worded_whys(tree: ast.AST) -> list[int]:
    """Lines that give words built in the module (an f-string, a literal, a concatenation) as a why: a ``Loss``'s
    reason, an operation's ``why`` (``view.delete(name, "...")``, ``why=...``, ``delete_segment``), a transaction's
    ``reason``, a ``Difference``'s detail."""
    def words(e: ast.AST | None) -> bool:
        return isinstance(e, ast.JoinedStr) or (isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                and e.value != "") or (
            isinstance(e, ast.BinOp) and (words(e.left) or words(e.right)))

    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            name = n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id if isinstance(n.func, ast.Name) \
                else ""
            # the why's place: Loss(reason, ...), Difference(kind, path, detail), view.op(name, why) (rename: 3rd)
            at = {"Loss": 0, "Difference": 2, "delete": 1, "touch": 1, "write_if_changed": 2, "write": 2,
                  "truncate": 2, "rename": 2, "delete_segment": 1, "_delete_snapshot": 1, "WriteFile": 1,
                  "InstallPartition": 1, "trim_indexes": 2, "write_snapshot": 2, "Sync": 1, "Delete": 1,
                  "CompactRound": 1, "ReplaceSegments": 1, "_NewDataDir": 1}.get(name)
            if at is not None and len(n.args) > at and words(n.args[at]):
                out.append(n.lineno)
            if any(kw.arg in ("why", "reason", "detail") and words(kw.value) for kw in n.keywords):
                out.append(n.lineno)
        if isinstance(n, ast.Assign) and words(n.value) and any(
                (isinstance(t, ast.Name) and t.id == "why") or (isinstance(t, ast.Subscript) and isinstance(
                    t.slice, ast.Constant) and t.slice.value in ("reason", "detail")) for t in n.targets):
            out.append(n.lineno)
    return out


def test_plans_transactions_and_diffs_give_their_whys_as_codes():
    worded = {rel: _worded_whys(ast.parse((ROOT / rel).read_text())) for rel in STRUCTURED_WHYS}
    assert not any(worded.values()), f"whys in words (module: lines): {worded}"
    # the scan finds words where they come back
    assert sorted(_worded_whys(ast.parse('view.delete(n, f"replaced by {lo}")\nLoss("torn tail", 1)\n'
                                  't["reason"] = "x"\npsm.take_snapshot(why="at load")'))) == [1, 2, 3, 4]
    # and in no module of storage at all (h7)
    worded = {str(p): _worded_whys(ast.parse(p.read_text())) for p in (ROOT / "storage").rglob("*.py")}
    assert not any(worded.values()), {p: lines for p, lines in worded.items() if lines}


def test_the_engines_operations_are_worded_in_tools():
    """A cleaning round, a segment replacement and a migrated partition are fields: tools/plan_output words them
    (as io/ops' file operations, they had a describe of their own in storage)."""
    from kafkalog.storage.engine.cleaner.manager import CompactRound, PlannedGroup
    from kafkalog.storage.engine.migrate import InstallPartition
    from kafkalog.storage.engine.swap import NewSegment, ReplaceSegments
    from kafkalog.storage.io.ops import byte_count
    for path in (ROOT / "storage" / "engine").rglob("*.py"):
        assert "def describe(self" not in path.read_text(), path
    op = ReplaceSegments("/d/t-0", note("/d/t-0", "op.convertNow"), sources=[0, 5], new=[NewSegment(0, {".log": 1024})],
                         source_bytes=4096)
    assert plan_output.describe_op(op) == "replace segment(s) 0, 5 of t-0 (4.0 KiB) by 0 (1.0 KiB): convert"
    assert plan_output.describe_op(op, byte_count) == "replace segment(s) 0, 5 of t-0 (4,096 bytes) by 0 (1,024 bytes): convert"
    rnd = CompactRound("/d/t-0", "why", end_offset=10, groups=[PlannedGroup(0, [0, 5], [], 3072, 1024)])
    assert plan_output.describe_op(rnd) == ("compact 2 segment(s) (3.0 KiB -> 1.0 KiB) into 1 new segment(s), offsets "
                                            "up to 9: why")
    assert plan_output.describe_op(InstallPartition("/e/t-0", "why", [], ["00000000000000000000.log"])) == \
        "replace partition /e/t-0 (0 files, 0 B): why"


def test_a_truncation_loss_is_a_code_with_the_byte_as_its_position(tmp_path: Path):
    _pdir, size, r = _torn_tail_load(tmp_path)
    (loss,) = r.loaded.losses
    assert loss.reason == "" and loss.note is not None and loss.note.kind == "loss.truncatedAt"
    assert loss.position == loss.note.facts["position"] == size
    # why it stops there: the scanner's reason and the corrupt batch's error as facts, the byte as the position (h7)
    assert (loss.note.facts["stop"], loss.note.facts["error"]) == ("torn tail", None)
    reason = f"torn tail at byte {size}"
    assert plan_output.describe_loss(loss).endswith(f"{reason} (the broker truncates the log at byte {size})")
    d = plan_output.loss_json(loss)
    assert d["reason"] == f"{reason} (the broker truncates the log at byte {size})"
    assert (d["code"], d["facts"]["position"]) == ("loss.truncatedAt", size)
    (op,) = [op for op in r.ops if op.kind == "truncate"]
    assert getattr(op.why, "kind", None) == "op.invalidBytes" and op.to_dict()["why"] == ""
    assert dict(op.why.facts) == {"validBytes": size, "stop": "torn tail", "error": None}  # type: ignore[union-attr]
    assert plan_output.op_json(op)["why"] == f"first invalid byte at {size}: {reason}"
    assert plan_output.describe_op(op).endswith(f": first invalid byte at {size}: {reason}")


def test_a_partition_transactions_cannot_read_is_a_code_worded_as_before(tmp_path: Path, capsys):
    """transactions' partition read error: the error's file, byte, words and kind as facts (h10); its sentence and
    the advice to run repair are made in kafkalog.facts, and the command prints them as before."""
    import shutil

    from kafkalog.storage.reports.transactions import find_transactions
    from kafkalog.tools.cli import main

    data = tmp_path / "data"
    shutil.copytree(ROOT / "fixtures" / "kafka-4.3.1-kraft-killed" / "data", data)
    log = data / "open-transaction-0" / "00000000000000000000.log"
    with log.open("r+b") as f:
        f.write(b"\xff" * 12)
    for workers in (1, 2):
        (e,) = find_transactions([data], now_ms=NOW, workers=workers).errors
        n = e["error"]
        assert isinstance(n, Finding) and n.kind == "transactions.partitionUnreadable", n
        assert dict(n.facts) == {"file": str(log), "position": 0, "errorKind": "CorruptRecordError",
                                 "error": "Found record size -1 smaller than minimum record overhead (14)",
                                 "dataDir": str(data)}
        old = (f"{log}: byte 0: Found record size -1 smaller than minimum record overhead (14) (the broker's recovery "
               f"truncates a corrupt log: `kafkalog repair --dry-run {data}` shows what it would keep)")
        assert facts.render(n) == old
    assert facts.render(note("/d/t-0", "transactions.partitionUnreadable", file=None, position=None, error="bad",
                             errorKind="KafkaLogError", dataDir="/d")).startswith("bad (the broker's recovery")
    assert facts.render(note("/d/t-0", "transactions.partitionOsError", file="/d/t-0/0.log",
                             error="Permission denied")) == "/d/t-0/0.log: Permission denied"
    assert main(["transactions", "--now", str(NOW), str(data)]) == 1
    assert f"  error: open-transaction-0: {old}\n" in capsys.readouterr().out
    assert main(["transactions", "--json", "--now", str(NOW), str(data)]) == 1
    assert f'"error":{json.dumps(old)}' in capsys.readouterr().out


def test_an_unreadable_old_topic_id_is_a_fact_and_topic_id_json_words_it_as_before(tmp_path: Path, capsys):
    """topic-id --set over an unreadable partition.metadata: the plan's oldTopicId is None and the error is the
    write's ``unreadable`` fact (h10); tools/topic_id.py words --json's oldTopicId ``unreadable (...)`` as before."""
    from kafkalog.storage.engine.topic_id import plan_topic_id
    from kafkalog.tools.cli import main

    pdir = three_segment_partition(tmp_path)
    (pdir / "partition.metadata").write_text("garbage")
    new_id = "AAAAAAAAAAAAAAAAAAAAAQ"
    (pp,) = plan_topic_id([pdir], new_id).partitions
    assert pp.facts == {"oldTopicId": None, "topicId": new_id}
    (op,) = pp.ops
    assert dict(op.why.facts) == {"oldTopicId": None, "unreadable": "line 1: malformed version line 'garbage'",  # type: ignore[union-attr]
                                  "topicId": new_id}
    assert main(["topic-id", str(pdir), "--set", new_id, "--dry-run", "--json"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["oldTopicId"] == "unreadable (line 1: malformed version line 'garbage')"
    assert "unreadable (" not in (ROOT / "storage" / "engine" / "topic_id.py").read_text()


def test_a_diff_detail_is_a_code_with_offsets_and_counts(tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    three_segment_partition(a)
    three_segment_partition(b)
    os.truncate(b / "orders-3" / "00000000000000000040.log", 0)
    res = diff_paths(a, b)
    (d,) = res.differences
    assert d.note.kind == "diff.offsetsOnlyIn" and d.note.facts == {"side": "a", "offsets": 10, "ranges": [[40, 49]],
                                                                   "dropped": 0}
    assert facts.render(d.note) == "10 offsets only in A: 40..49" and "detail" not in d.to_dict()


def test_a_transaction_reason_is_a_code_with_the_producer_id():
    from kafkalog.storage.reports.transactions import find_transactions
    killed = ROOT / "fixtures" / "kafka-4.3.1-kraft-killed" / "data"
    (t,) = find_transactions([killed / "open-transaction-0"], now_ms=NOW).transactions
    r = t["reason"]
    assert isinstance(r, Finding) and (r.kind, dict(r.facts)) == ("transactions.unknown",
                                                                  {"producerId": t["producerId"], "someFound": False})
    assert facts.render(r) == (f"producer id {t['producerId']} is not in the __transaction_state partitions of these "
                               "dirs (none found: pass the dirs holding them)")


# ------------------------------------------------------- index checks, files' own checks, refused dirs (h3)


def test_an_index_finding_carries_its_entry_and_renders_as_before(tmp_path: Path):
    d = tmp_path / "data"
    damaged_copy("kafka-4.3.1-kraft", d, ())
    index = d / "multi-segment-0" / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    offset, position = int.from_bytes(data[8:12], "big"), int.from_bytes(data[12:16], "big")
    data[12:16] = (position + 3).to_bytes(4, "big")  # entry 1 points 3 bytes into its batch
    index.write_bytes(bytes(data))
    [f] = [f for f in verify_data_dir(d) if f.code == "verify.indexNotBatchStart"]
    assert (f.file, f.position, f.kind, f.severity, f.message) == (str(index), 8, "index", "error", "")
    assert dict(f.facts) == {"entry": 1, "offset": offset, "filePosition": position + 3}
    assert facts.render(f) == f"entry 1 ({offset}, {position + 3}): position is not the start of a batch"
    # reindex's reason to rebuild the index is that finding, worded by its template
    from kafkalog.storage.engine.reindex import plan_reindex
    [op] = [op for pp in plan_reindex([d]).partitions for op in pp.ops if op.path == str(index)]
    assert not isinstance(op.why, str) and op.why.kind == "reindex.indexProblem"
    assert op.why.facts["finding"]["code"] == "verify.indexNotBatchStart"
    assert facts.render(op.why) == (f"00000000000000000000.index: entry 1 ({offset}, {position + 3}): position is not "
                                    "the start of a batch: rebuilt from 00000000000000000000.log by the broker's "
                                    "recovery rule")


def test_a_dir_the_broker_refuses_is_a_finding_the_startup_gate_carries(tmp_path: Path):
    d = tmp_path / "data"
    damaged_copy("kafka-4.3.1-kraft", d, ())
    (d / "notapartition").mkdir()
    [p] = [p for p in diagnose([d], now_ms=NOW).problems if p.kind == "startup"]
    assert p.message == "" and p.note is not None and p.note.code == "layout.notPartitionDir"
    assert dict(p.note.facts) == {"dirName": "notapartition", "refuses": True}
    assert facts.render(p.note) == ("'notapartition' is not in the form of topic-partition or "
                                    "topic-partition.uniqueId-delete (if marked for deletion); Kafka refuses to load "
                                    "this data directory")
    assert p.to_dict()["code"] == "layout.notPartitionDir" and p.broker_message == "Error starting LogManager"


def test_a_checkpoints_problems_are_defects_the_dump_and_verify_word_alike(tmp_path: Path, capsys):
    from kafkalog.tools.cli import main
    p = tmp_path / "recovery-point-offset-checkpoint"
    p.write_text("0\n2\nt 0 5\nt 0 -1\n")
    main(["dump", "--json", str(p)])
    errors = [o for o in map(__import__("json").loads, capsys.readouterr().out.splitlines()) if o.get("event")]
    assert errors == [
        {"file": str(p), "kind": "offsetCheckpoint", "event": "info", "checkpoint": p.name, "version": 0, "count": 2,
         "form": errors[0]["form"], "canonical": True},
        {"file": str(p), "kind": "offsetCheckpoint", "event": "error", "position": None,
         "reason": "duplicate entry for t-0", "code": "checkpoint.duplicate", "facts": {"topic": "t", "partition": 0}},
        {"file": str(p), "kind": "offsetCheckpoint", "event": "error", "position": None,
         "reason": "negative offset -1 for t-0", "code": "checkpoint.negativeOffset",
         "facts": {"offset": -1, "topic": "t", "partition": 0}}]
    from kafkalog.storage.reports.verify.files import verify_file
    found, _, _ = verify_file(p)
    assert [facts.line(f) for f in found] == [f"error: {p}: [checkpoint] duplicate entry for t-0",
                                              f"error: {p}: [checkpoint] negative offset -1 for t-0"]


# ------------------------------------------ verify's own checks, index dumps' problems, reindex --all's why (h8)


def _words(e: ast.AST | None) -> bool:
    """An expression of words built in the module: an f-string, a non-empty literal, a concatenation of them."""
    return isinstance(e, ast.JoinedStr) or (isinstance(e, ast.Constant) and isinstance(e.value, str)
                                            and e.value != "") or (
        isinstance(e, ast.BinOp) and (_words(e.left) or _words(e.right)))


def _worded_problems(tree: ast.AST) -> list[int]:
    """Lines giving a dump's problem in words built in the module (``out.problem(position, "...")``)."""
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "problem" and ((len(n.args) > 1 and _words(n.args[1]))
                                              or any(kw.arg == "reason" and _words(kw.value) for kw in n.keywords))]


def test_no_report_words_a_finding_a_dump_problem_or_reindex_a_why():
    # verify's own checks (storage/reports/verify) and every other report: codes and facts (e.reason, an
    # exception's own words, passes through)
    for path in (ROOT / "storage" / "reports").rglob("*.py"):
        tree = ast.parse(path.read_text())
        assert not _worded_findings(tree), f"{path}: a finding built as words, lines {_worded_findings(tree)}"
        assert not _worded_problems(tree), f"{path}: a dump problem built as words, lines {_worded_problems(tree)}"
    for rel in ["storage/reports/verify/partition.py", "storage/reports/verify/datadir.py",
                "storage/reports/verify/files.py", "storage/reports/dump/indexes.py"]:
        assert "code=" in (ROOT / rel).read_text(), rel
    assert not _worded_whys(ast.parse((ROOT / "storage" / "engine" / "reindex.py").read_text()))
    # the scans find words where they come back
    assert _worded_problems(ast.parse('out.problem(None, f"entry {i}")\nout.problem(3, code="dump.x")\n'
                                      'out.problem(1, reason="no such file")')) == [1, 3]
    assert _worded_findings(ast.parse('info(p, None, "checkpoint", "missing")')) == [1]
    # the start-up gate: each refusal's own words are a code (the broker's message, a quote, stays words)
    gate = ast.parse((ROOT / "storage" / "reports" / "startup_gate.py").read_text())
    calls = [n for n in ast.walk(gate) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    fatal = [n for n in calls if n.func.id == "fatal"]  # type: ignore[attr-defined]
    assert len(fatal) >= 10 and all(any(kw.arg == "code" for kw in n.keywords) for n in fatal)
    assert not [n.lineno for n in calls if n.func.id == "Refusal" and _words(n.args[1])]  # type: ignore[attr-defined]


def test_verify_words_its_own_checks_from_codes_as_before(tmp_path: Path):
    d = tmp_path / "data"
    damaged_copy("kafka-3.9.2-kraft", d, ())
    (d / "codec-gzip-0" / "partition.metadata").unlink()
    pm = d / "codec-lz4-0" / "partition.metadata"
    pm.write_text(pm.read_text().replace(": ", ":  "))
    (d / "codec-none-0" / "leader-epoch-checkpoint").unlink()
    (d / "multi-segment-0" / "00000000000000099999.log.swap").write_bytes(b"")
    (d / "multi-segment-0" / "00000000000000099999.log.deleted").write_bytes(b"")
    (d / "cleaner-offset-checkpoint").unlink()
    (d / "meta.properties").write_text((d / "meta.properties").read_text().replace("node.id=", "node.id = "))
    (d / "empty-0").mkdir()
    found = [f for f in verify_data_dir(d) if f.code and f.code.split(".")[1] in (
        "noSegments", "leftover", "epochCheckpointMissing", "metadataNotCanonical", "noTopicId",
        "metaPropertiesNotCanonical", "checkpointMissing") and Path(f.file).parent.name != "compacted-0"]
    assert all(not f.message for f in found)
    # the words verify printed before (one line per finding: its dir and file, severity, code, words)
    said = """\
codec-gzip-0 partition.metadata warning verify.noTopicId missing: no topic id (a KRaft broker treats such a replica as stray)
codec-lz4-0 partition.metadata warning verify.metadataNotCanonical not in the exact form Kafka writes
codec-none-0 leader-epoch-checkpoint info verify.epochCheckpointMissing missing (Kafka recreates it from the log)
data cleaner-offset-checkpoint info verify.checkpointMissing missing
data empty-0 warning verify.noSegments no segments: Kafka creates an empty one at the log start offset
data meta.properties info verify.metaPropertiesNotCanonical not in the exact form Properties.store writes
empty-0 partition.metadata warning verify.noTopicId missing: no topic id (a KRaft broker treats such a replica as stray)
multi-segment-0 00000000000000099999.log.deleted info verify.leftover a deleted file awaiting removal; Kafka deletes it at load
multi-segment-0 00000000000000099999.log.swap warning verify.leftover a replacement segment whose swap was interrupted; \
Kafka completes the swap at load"""
    assert sorted(" ".join([Path(f.file).parent.name, Path(f.file).name, f.severity, f.code or "", facts.render(f)])
                  for f in found) == said.splitlines()
    assert [dict(f.facts) for f in found if f.code == "verify.leftover"] in (
        [{"suffix": ".deleted"}, {"suffix": ".swap"}], [{"suffix": ".swap"}, {"suffix": ".deleted"}])


def test_an_index_dumps_problems_are_codes_with_the_entry_and_word_as_before(tmp_path: Path, capsys):
    import json
    import shutil
    import struct

    from kafkalog.tools.cli import main
    src = ROOT / "fixtures" / "kafka-4.3.1-kraft" / "data" / "multi-segment-0"
    log = tmp_path / "00000000000000000000.log"
    shutil.copy(src / log.name, log)
    size = log.stat().st_size
    idx = tmp_path / "00000000000000000000.index"
    idx.write_bytes(struct.pack(">iiii", 1, size + 100, 2, 3))
    orphan = tmp_path / "00000000000000000777.index"
    shutil.copy(src / "00000000000000000000.index", orphan)
    main(["dump", "--json", str(idx), str(orphan)])
    out, err = capsys.readouterr()
    errors = [o for o in map(json.loads, out.splitlines()) if o.get("event") == "error"]
    assert [(o["position"], o["reason"], o["code"], o["facts"]) for o in errors] == [
        (0, f"entry 0 (1, {size + 100}): position is beyond the end of {log.name} ({size} bytes)",
         "dump.entryBeyondLog", {"entry": 0, "offset": 1, "filePosition": size + 100, "log": log.name,
                                 "logBytes": size}),
        (8, f"entry 1 (2, 3): no complete batch within 5242880 bytes (--max-message-size) at position 3 of {log.name}",
         "dump.entryNoBatch", {"entry": 1, "offset": 2, "filePosition": 3, "maxMessageSize": 5242880,
                               "log": log.name}),
        (None, "the companion log file 00000000000000000777.log does not exist", "dump.companionMissing",
         {"log": "00000000000000000777.log"})]
    assert err.splitlines() == [f"kafkalog dump: {idx}: byte 0: {errors[0]['reason']}",
                                f"kafkalog dump: {idx}: byte 8: {errors[1]['reason']}",
                                f"kafkalog dump: {orphan}: {errors[2]['reason']}"]
    # the entry problems no fixture here reaches: their words, as the dump wrote them
    f = Finding(str(idx), 0, "timeindex", "error", code="dump.timeEntryUndecodable",
                facts={"entry": 2, "timestamp": 5, "offset": 9, "batchPosition": 70, "error": "bad varint"})
    assert facts.render(f) == "entry 2 (5, 9): the batch at position 70 cannot be decoded: bad varint"
    f = Finding(str(idx), 0, "index", "error", code="dump.entryCorrupt",
                facts={"entry": 2, "offset": 9, "filePosition": 70, "error": "bad CRC", "errorPosition": 70, "log": "0.log"})
    assert facts.render(f) == "entry 2 (9, 70): bad CRC at position 70 of 0.log"


def test_reindex_all_gives_its_why_as_a_code(tmp_path: Path):
    from kafkalog.storage.engine.reindex import plan_reindex
    plan = plan_reindex([three_segment_data_dir(tmp_path / "data")], all_segments=True)
    ops = [op for pp in plan.partitions for op in pp.ops]
    assert ops and all(isinstance(op.why, Finding) and op.why.kind == "reindex.recoveryRule" for op in ops)
    for op in ops:
        log = op.why.facts["log"]
        assert Path(op.path).name.split(".")[0] == log.split(".")[0]
        assert plan_output.op_json(op)["why"] == f"rebuilt from {log} by the broker's recovery rule"
        assert plan_output.op_json(op)["code"] == "reindex.recoveryRule"


def test_a_startup_refusal_is_a_code_beside_the_brokers_message(tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    damaged_copy("kafka-4.3.1-kraft", a, ())
    damaged_copy("kafka-4.3.1-kraft", b, ())
    meta = b / "meta.properties"
    meta.write_text(meta.read_text().replace("cluster.id=", "cluster.id=X"))
    fatal = diagnose([a, b], now_ms=NOW).fatal
    assert all(p.message == "" and p.note is not None and p.broker_message for p in fatal)
    [cid] = [p for p in fatal if p.note is not None and p.note.kind == "startup.clusterIdDiffers"]
    expected = cid.note.facts["expected"]  # type: ignore[union-attr]
    assert dict(cid.note.facts) == {"clusterId": "X" + expected, "expected": expected}  # type: ignore[union-attr]
    assert facts.render(cid.note) == f"cluster.id X{expected} differs from {expected} in another data dir"  # type: ignore[arg-type]
    assert cid.to_dict()["code"] == "startup.clusterIdDiffers"
    live = [p for p in fatal if p.note is not None and p.note.kind == "startup.alsoLive"]
    assert live and all(facts.render(p.note) == f"{Path(p.path).name} is also live in {a}"  # type: ignore[arg-type]
                        for p in live)


# h9: doctor's verdict line (Diagnosis.headline_note) and groups' errors (GroupsReport.errors) are codes and facts
WORDLESS_RESULTS = ["storage/reports/doctor.py", "storage/reports/groups.py", "storage/reports/group_coordinator.py"]


def _sentence(e: ast.AST | None) -> bool:
    """Words: an f-string, a literal with a space (not a code such as ``"logEndOffset"``), a concatenation."""
    return isinstance(e, ast.JoinedStr) or (isinstance(e, ast.Constant) and isinstance(e.value, str)
                                            and " " in e.value) or (
        isinstance(e, ast.BinOp) and (_sentence(e.left) or _sentence(e.right)))


def _worded_results(tree: ast.AST) -> list[int]:
    """Lines returning (alone or in a tuple) or appending words built in the module."""
    out = []
    for n in ast.walk(tree):
        values: list[ast.expr] = []
        if isinstance(n, ast.Return) and n.value is not None:
            values = n.value.elts if isinstance(n.value, ast.Tuple) else [n.value]
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("append", "extend"):
            values = n.args
        if any(_sentence(v) for v in values):
            out.append(n.lineno)
    return sorted(out)


def test_doctor_and_groups_return_no_words():
    for rel in WORDLESS_RESULTS:
        tree = ast.parse((ROOT / rel).read_text())
        assert not _worded_results(tree), f"{rel}: words returned or collected, lines {_worded_results(tree)}"
    assert _worded_results(ast.parse('def f():\n    return f"WILL START{x}"\nerrors.append(f"{p}: log end")\n'
                                     'def g():\n    return s, "CRC mismatch: read up to it"\n'
                                     'def h():\n    return leo, "logEndOffset"\n')) == [2, 3, 5]


def test_doctors_verdict_line_is_a_code_worded_as_before():
    from kafkalog.storage.reports.doctor import Diagnosis, Problem

    def line(partitions_recovered=0, records_truncated=0, problems=()):
        d = Diagnosis(["/d"], list(problems), partitions_recovered=partitions_recovered,
                      records_truncated=records_truncated)
        assert d.summary()["headline"] == "" and d.headline_note().kind == f"doctor.verdict{d.verdict.capitalize()}"
        return facts.render(d.headline_note())

    def p(severity, kind="recovery", **kw):
        return Problem(severity, kind, "/d/p-0", "", **kw)

    stop = p("fatal", "startup", broker_message="Error starting LogManager")
    assert line() == "HEALTHY" and line(problems=[p("info", "dirs")]) == "HEALTHY"
    assert line(problems=[stop]) == "WILL NOT START: Error starting LogManager"
    assert line(problems=[stop, stop, p("loss")]) == "WILL NOT START: Error starting LogManager (and 1 more)"
    assert line(13, problems=[p("recovery")]) == "WILL START, RECOVERING 13 PARTITIONS"
    assert line(1, 1, [p("loss", "truncation", bytes=9), p("warning")]) == \
        "WILL START, RECOVERING 1 PARTITION (truncating 1 record, 1 warning)"
    assert line(2, 1234, [p("loss", "truncation")]) == "WILL START, RECOVERING 2 PARTITIONS (truncating 1,234 records)"
    assert line(problems=[p("loss", "truncation", bytes=2048), p("error", "plan"), p("warning")]) == \
        "WILL START, WITH LOSS (truncating 2,048 bytes of invalid data, 2 warnings)"
    assert line(problems=[p("loss", "lostOffsets", bytes=5)]) == "WILL START, WITH LOSS"
    assert line(problems=[p("warning", "stray")]) == "WILL START (1 warning)"
    assert line(problems=[p("recovery", "rebuild")]) == "WILL START (with warnings)"
    facts_ = Diagnosis(["/d"], [p("loss", "truncation", bytes=7), p("warning")], partitions_recovered=3,
                       records_truncated=4).headline_note().facts
    assert dict(facts_) == {"partitionsRecovered": 3, "recordsTruncated": 4, "bytesTruncated": 7, "warnings": 1,
                            "loss": True}


def test_groups_errors_are_codes_worded_as_before(tmp_path: Path, capsys):
    from kafkalog.storage.records import iter_batches
    from kafkalog.storage.reports.groups import load_groups
    from kafkalog.tools.cli import main

    c, d = tmp_path / "crc", tmp_path / "data"
    damaged_copy("kafka-4.3.1-kraft", c, ())
    damaged_copy("kafka-4.3.1-kraft", d, ())
    seg = max(c.glob("__consumer_offsets-*/*.log"), key=lambda s: s.stat().st_size)
    raw = bytearray(seg.read_bytes())
    b = list(iter_batches(bytes(raw)))[1]
    raw[b.position + 30] ^= 0xFF  # the second batch fails its CRC
    seg.write_bytes(bytes(raw))
    active = sorted((d / "codec-none-0").glob("*.log"))[-1]  # a partition with a committed offset: its end unreadable
    with open(active, "r+b") as f:
        f.seek(8)
        f.write(b"\xff\xff\xff\xf0")
    for ix in (d / "codec-none-0").glob("*.index"):
        ix.write_bytes(b"")
    [crc], [leo] = load_groups([c]).errors, load_groups([d]).errors
    assert (crc.kind, crc.file, leo.kind, leo.file) == ("groups.crcMismatch", str(seg), "groups.logEndOffsetUnreadable",
                                                        str(d / "codec-none-0"))
    assert dict(crc.facts) == {"position": b.position, "offset": b.base_offset}
    assert facts.render(crc) == f"{seg}: byte {b.position}: batch at offset {b.base_offset} has a CRC mismatch: " \
        "groups read up to it"
    assert facts.render(leo) == f"{d / 'codec-none-0'}: log end offset: {active}: byte 0: Found record size -16 " \
        "smaller than minimum record overhead (14)"
    for path, e in ((c, crc), (d, leo)):
        assert main(["groups", "--no-progress", str(path)]) == 1
        assert capsys.readouterr().err.splitlines()[-1] == f"kafkalog groups: error: {facts.render(e)}"


# a plan's per-partition error (PartitionPlan.error, Plan.errors, PlanError.errors): a code and its facts, worded in
# kafkalog.facts; the library's exception message stays a generic sentence


def _worded_errors(tree: ast.AST) -> list[int]:
    """Lines that set a plan's ``error`` to words built in the module (an f-string, a literal, a concatenation,
    ``str(e)``, or a choice between them) instead of ``pp.fail(code=..., **facts)``."""
    def words(e: ast.AST | None) -> bool:
        return _words(e) or (isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "str") or (
            isinstance(e, ast.IfExp) and (words(e.body) or words(e.orelse)))

    return sorted(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assign | ast.AnnAssign) and words(n.value)
                  and any(isinstance(t, ast.Attribute) and t.attr == "error"
                          for t in (n.targets if isinstance(n, ast.Assign) else [n.target])))


def test_no_engine_words_a_plan_error():
    """No module of storage sets a partition's plan error in words (the old reindex, compact and planning() did:
    "...: the segment must be split (KAFKA-6264); run repair", str(e), "the broker would mark this partition
    uncleanable: ..."); each refusal is pp.fail(code=...) with facts, and the error is a Finding."""
    from kafkalog.storage.engine.plan import PartitionPlan, Plan

    worded = {str(p): _worded_errors(ast.parse(p.read_text())) for p in (ROOT / "storage").rglob("*.py")}
    assert not any(worded.values()), {p: lines for p, lines in worded.items() if lines}
    for rel in ["storage/engine/plan.py", "storage/engine/reindex.py", "storage/engine/cleaner/manager.py"]:
        fails = [n for n in ast.walk(ast.parse((ROOT / rel).read_text())) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "fail"]
        assert fails and all(any(kw.arg == "code" for kw in n.keywords) for n in fails), rel
    assert PartitionPlan.__dataclass_fields__["error"].type == "Finding | None"
    assert Plan.errors.fget.__annotations__["return"] == "list[Finding]"  # type: ignore[attr-defined]
    # the scan finds words where they come back
    assert _worded_errors(ast.parse('pp.error = f"{e.reason}: run repair"\nself.error = str(e) if k else f"{x}"\n'
                                    'pp.error = ("a " "b")\npp.error = Finding(d, None, "plan.failed", "error")\n'
                                    'x.error: str = "bad"\nerror = "not a plan"')) == [1, 2, 3, 5]


def _reindex_refused(tmp_path: Path) -> tuple[Path, Path, int]:
    """A copy of kafka-4.3.1-kraft whose first segment of multi-segment-0 is cut inside a batch: reindex refuses it."""
    from damage import torn_middle

    d = tmp_path / "data"
    damaged_copy("kafka-4.3.1-kraft", d, ())
    torn_middle(d)
    seg = sorted((d / "multi-segment-0").glob("*.log"))[0]
    return d, seg, seg.stat().st_size


def test_a_segment_reindex_refuses_is_a_code_worded_as_before(tmp_path: Path, capsys):
    """reindex over a segment with invalid bytes: reindex.invalidBytes {segment, validBytes, bytes, stop, error};
    the human ERROR line, the stderr line, --json's error (plus errorCode, errorFacts) and the summary's errors
    (plus errorNotes) as before; apply's PlanError carries the errors and the CLI words it as before."""
    from kafkalog.storage.engine.plan import PlanError, apply
    from kafkalog.storage.engine.reindex import plan_reindex
    from kafkalog.tools.cli import _error_words, main

    d, seg, size = _reindex_refused(tmp_path)
    plan = plan_reindex([d])
    (err,) = plan.errors
    pdir = d / "multi-segment-0"
    assert isinstance(err, Finding) and (err.kind, err.file, err.severity) == ("reindex.invalidBytes", str(pdir),
                                                                               "error")
    at = err.facts["validBytes"]
    assert dict(err.facts) == {"segment": str(seg), "validBytes": at, "bytes": size - at, "stop": "partial batch",
                               "error": None} and 0 < at < size
    old = f"{seg}: invalid bytes from position {at} (partial batch at byte {at}): indexes are not rebuilt over them; " \
          "run repair"
    assert facts.render(err) == old
    with pytest.raises(PlanError) as raised:
        apply(plan)
    assert raised.value.errors == [err] and str(pdir) in str(raised.value) and "invalid bytes" not in str(raised.value)
    assert _error_words(raised.value) == f"nothing was changed: the plan is invalid: {pdir}: {old}"
    assert main(["reindex", "--dry-run", str(d)]) == 1
    out, stderr = capsys.readouterr()
    assert f"  multi-segment-0\n    ERROR: {old}\n" in out
    assert stderr == "kafkalog reindex: nothing was changed: 1 partition(s) could not be planned (see ERROR above)\n"
    assert main(["reindex", "--dry-run", "--json", str(d)]) == 1
    *rows, last = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    (row,) = [r for r in rows if "error" in r]
    assert (row["error"], row["errorCode"], row["errorFacts"]) == (old, "reindex.invalidBytes", dict(err.facts))
    assert list(row)[list(row).index("settings") + 1:][:3] == ["error", "errorCode", "errorFacts"]
    assert last["summary"]["errors"] == [f"{pdir}: {old}"]
    assert last["summary"]["errorNotes"] == [{"file": str(pdir), "position": None, "kind": "reindex.invalidBytes",
                                              "severity": "error", "message": old, "facts": dict(err.facts)}]


def test_each_plan_error_is_a_code_with_facts_worded_as_before(tmp_path: Path):
    """The other refusals: a segment that must be split (reindex.mustSplit), a round the broker would refuse
    (compact.uncleanable), a KafkaLogError or an OS error met while planning (plan.failed, plan.osError: the
    exception's own words and class as facts), and doctor, which passes the plan error on as a fact."""
    import errno

    from builders import batch_at, kv_batch, write_segment
    from engines import resolver

    from kafkalog.storage.engine.cleaner.manager import plan_compact
    from kafkalog.storage.engine.plan import DataDirPlan, PartitionPlan, Plan, PlanError
    from kafkalog.storage.engine.reindex import plan_reindex
    from kafkalog.storage.errors import CorruptRecordError, LogDirError
    from kafkalog.storage.records import build_legacy
    from kafkalog.tools.plan_output import invalid_plan

    # reindex.mustSplit: offsets past the segment's int32 range (KAFKA-6264)
    p = tmp_path / "t-0"
    p.mkdir()
    high = 2**31 + 100
    (p / "00000000000000000000.log").write_bytes(b"".join([batch_at(0), batch_at(5), batch_at(high)]))
    (err,) = plan_reindex([p]).errors
    reason = f"offset {high + 4} cannot be stored relative to the segment base offset 0"
    assert (err.kind, dict(err.facts)) == ("reindex.mustSplit", {
        "segment": str(p / "00000000000000000000.log"), "baseOffset": 0, "position": err.facts["position"],
        "error": reason}) and err.facts["position"] > 0
    assert facts.render(err) == f"{reason}: the segment must be split (KAFKA-6264); run repair"
    # compact.uncleanable: a legacy batch ending the round that v0/v1 cannot keep empty (IllegalStateException)
    c = tmp_path / "c" / "legacy-0"
    c.mkdir(parents=True)
    write_segment(c, 0, [build_legacy([(0, NOW - 9000, b"a", b"1")], magic=1, base_offset=0),
                         build_legacy([(1, NOW - 9000, None, b"x")], magic=1, base_offset=1)], mtime_ms=NOW - 1000)
    write_segment(c, 2, [kv_batch(2, b"c", b"2", NOW - 5000)], mtime_ms=NOW - 1000)
    cfg = LogConfig.defaults().with_overrides({"cleanup.policy": ["compact"]})
    (err,) = plan_compact([c], now_ms=NOW, resolver=resolver(cfg), force=True, exact=True).errors
    seg = c / "00000000000000000000.log"
    assert (err.kind, dict(err.facts)) == ("compact.uncleanable", {
        "file": str(seg), "position": err.facts["position"],
        "error": "Empty batches are only supported for magic v2 and above"})
    assert facts.render(err) == (f"the broker would mark this partition uncleanable: {seg}: byte "
                                 f"{err.facts['position']}: Empty batches are only supported for magic v2 and above")
    # plan.failed and plan.osError: what planning() catches, with str(e)'s and the OS error's old words
    for e in [CorruptRecordError("bad batch", "/d/t-0/0.log", 12), LogDirError("a directory stands there", "/d/t-0/x"),
              CorruptRecordError("no place")]:
        pp = PartitionPlan("/d", "/d/t-0", "t", 0)
        with pp.planning():
            raise e
        assert pp.error is not None and (pp.error.kind, pp.error.file) == ("plan.failed", "/d/t-0")
        assert dict(pp.error.facts) == {"file": e.path, "position": e.position, "error": e.reason,
                                        "errorKind": type(e).__name__}
        assert facts.render(pp.error) == str(e)
    for os_error, words in [(OSError(errno.EIO, "Input/output error", "/d/t-0/0.log"), "/d/t-0/0.log: Input/output error"),
                            (OSError("no errno"), "/d/t-0: no errno")]:
        pp = PartitionPlan("/d", "/d/t-0", "t", 0)
        with pp.planning():
            raise os_error
        assert pp.error is not None and pp.error.kind == "plan.osError" and pp.error.facts["errorKind"] == "OSError"
        assert facts.render(pp.error) == words
    # PlanError.errors, worded by the CLI: the first partition's words and how many more
    two = [PartitionPlan("/d", f"/d/t-{i}", "t", i) for i in range(2)]
    for pp in two:
        pp.fail(code="plan.osError", file=f"{pp.dir}/0.log", error="Input/output error", errorKind="OSError")
    plan = Plan("reindex", [DataDirPlan("/d", two)])
    with pytest.raises(PlanError) as raised:
        plan.check()
    assert raised.value.errors == [pp.error for pp in two]
    assert invalid_plan(raised.value) == ("nothing was changed: the plan is invalid: /d/t-0: /d/t-0/0.log: "
                                          "Input/output error (and 1 more)")
    assert invalid_plan(PlanError("nothing was changed: x changed since the plan was made")) == \
        "nothing was changed: x changed since the plan was made"


def test_doctor_passes_a_plan_error_on_as_its_code_and_facts(tmp_path: Path):
    d = tmp_path / "data"
    damaged_copy("kafka-4.3.1-kraft", d, ())
    victim = sorted((d / "multi-segment-0").glob("*.index"))[0]
    victim.unlink()
    victim.mkdir()
    (p,) = [p for p in diagnose([d], now_ms=NOW).problems if p.kind == "plan"]
    assert p.note is not None and p.note.kind == "doctor.planError"
    err = p.note.facts["planError"]
    assert err["code"] == "plan.failed" and err["facts"]["file"] == str(victim)
    assert err["facts"]["errorKind"] == "LogDirError" and err["facts"]["position"] is None
    assert facts.render(p.note) == (f"kafkalog cannot predict this partition's recovery: {victim}: "
                                    f"{err['facts']['error']}")
