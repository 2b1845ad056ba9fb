"""What every mutating command shares: its safety options, how a plan is printed (``--dry-run`` prints exactly
the plan that applying runs), and the apply step itself, which lives in the library
(:func:`kafkalog.storage.engine.plan.apply`: lock, backup, operations)."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

from kafkalog import facts
from kafkalog.storage.engine.plan import ApplyResult, Loss, Plan, PlanError, Setting, apply, concurrent_writer
from kafkalog.storage.files.findings import Finding
from kafkalog.storage.io.ops import Op
from kafkalog.tools.output import add_epoch_argument, human_size, human_time, positive_int, progress


def add_plan_arguments(p: argparse.ArgumentParser, *, workers: bool = True) -> None:
    """``--dry-run``, ``--backup``, ``--no-backup``, ``--json`` (and ``--workers``)."""
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (every file operation, every record lost and why) and change nothing")
    p.add_argument("--backup", metavar="DIR",
                   help="keep the originals of changed and deleted files under DIR/<data dir name> (default: a new "
                   "folder beside each data dir, created only when something changes)")
    p.add_argument("--no-backup", action="store_true", help="keep no originals")
    p.add_argument("--json", action="store_true",
                   help="JSON Lines on stdout: the plan (one object per partition that changes, one per data dir), its "
                   "summary, then what was applied (camelCase keys; schemas in docs/json.md)")
    add_epoch_argument(p)
    if workers:
        p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                       help="partitions planned and applied N at a time in parallel processes (default: 1)")


def _settings_line(settings: list[dict]) -> str:
    """``name=value (source)``; a setting without a value (``internal.segment.bytes`` unset) is left out."""
    return ", ".join(f"{s['name']}={s['value']} ({s['source']})" for s in settings if s["value"] is not None)


def _why(op: Op) -> str:
    """What an op is for, in words: its ``why``, or the words of its code and facts."""
    return op.why if isinstance(op.why, str) else facts.render(cast(Finding, op.why))


def worded_op(op: Op) -> Op:
    """The op with its ``why`` in words (a copy when it is a code and facts): what ``op.describe()`` prints."""
    if isinstance(op.why, str):
        return op
    out = copy.copy(op)
    out.why = _why(op)
    return out


def _compact_words(op, size: Callable[[int], str]) -> str:
    """A cleaning round (``CompactRound``): its segments and bytes before (and after, when measured), the new
    segments, the last offset it cleans."""
    before = sum(g.source_bytes for g in op.groups)
    after = "" if any(g.size is None for g in op.groups) else f" -> {size(sum(g.size or 0 for g in op.groups))}"
    segs = sum(len(g.sources) for g in op.groups)
    return (f"compact {segs} segment(s) ({size(before)}{after}) into {len(op.groups)} new segment(s), "
            f"offsets up to {op.end_offset - 1}: {op.why}")


def _replace_words(op, size: Callable[[int], str]) -> str:
    """A segment replacement (``ReplaceSegments``): the segments replaced, their bytes, the new ones (and their
    bytes, when known)."""
    new = ", ".join(str(s.base_offset) for s in op.new)
    sizes = [v for s in op.new for k, v in s.files.items() if k == ".log"]
    after = f" ({size(sum(v or 0 for v in sizes))})" if None not in sizes else ""
    return (f"replace segment(s) {', '.join(map(str, op.sources))} of {Path(op.path).name} "
            f"({size(op.source_bytes)}) by {new}{after}: {op.why}")


def _install_words(op, size: Callable[[int], str]) -> str:
    """A migrated partition put in place (``InstallPartition``): created or replacing one, its files and bytes."""
    verb = "replace" if op.replaces else "create"
    return f"{verb} partition {op.path} ({len(op.files)} files, {size(sum(f.blob.size for f in op.files))}): {op.why}"


#: the engines' own operations, by kind: their words from their fields (the file operations of io/ops describe
#: themselves)
_OP_WORDS: dict[str, Callable[[Op, Callable[[int], str]], str]] = {
    "compact": _compact_words, "replace-segments": _replace_words, "install-partition": _install_words}


def describe_op(op: Op, size: Callable[[int], str] = human_size) -> str:
    """An operation for people: its sizes (fields of the op) in KiB/MiB... (or ``size``), why in words."""
    worded = worded_op(op)
    words = _OP_WORDS.get(op.kind)
    return words(worded, size) if words is not None else worded.describe(size=size)


def op_json(op: Op) -> dict:
    """An operation for ``--json``: its fields, ``why`` in words, and a coded why's ``code`` and ``facts``."""
    if isinstance(op.why, str):
        return op.to_dict()
    return worded_op(op).to_dict() | {"code": op.why.kind, "facts": dict(op.why.facts)}


def _loss_reason(loss: Loss, time: Callable[[int], str], size: Callable[[int], str]) -> str:
    """A loss's reason in words: its note's template over its facts, those named in ``times`` (epoch ms) and
    ``sizes`` (bytes) written by ``time`` and ``size``; or its ``reason``, whose ``{name}`` placeholders they fill."""
    shown = {name: time(ms) for name, ms in loss.times.items()} | {name: size(n) for name, n in loss.sizes.items()}
    if loss.note is not None:
        return facts.render(dataclasses.replace(loss.note, facts=dict(loss.note.facts) | shown))
    reason = loss.reason
    for name, words in shown.items():
        reason = reason.replace("{" + name + "}", words)
    return reason


def loss_json(loss: Loss) -> dict:
    """A loss for ``--json``: its fields, ``reason`` in words (timestamps as epoch ms, sizes in bytes, as
    :meth:`Loss.to_dict` writes them), and a coded reason's ``code`` and ``facts``."""
    if loss.note is None:
        return loss.to_dict()
    worded = copy.copy(loss)
    worded.reason, worded.note = _loss_reason(loss, str, lambda n: f"{n} bytes"), None
    return worded.to_dict() | {"code": loss.note.kind, "facts": dict(loss.note.facts)}


def describe_setting(setting: Setting) -> str:
    """``name=value (source)``."""
    return f"{setting.name}={setting.value} ({setting.source})"


def describe_loss(loss: Loss, epoch: bool = False) -> str:
    """A :class:`Loss` for people, from its fields: records, offsets, the size in KiB/MiB..., the file, the setting
    that removes it and the reason, whose ``{name}`` timestamps print as ISO-8601 UTC (raw epoch ms with
    ``epoch``) and sizes in KiB/MiB... The one rendering of a loss: the library gives fields, never a sentence to read back."""
    what = []
    if loss.records is not None:
        what.append(f"{loss.records:,d} records")
    if loss.first_offset is not None and loss.last_offset is not None:
        what.append(f"offsets {loss.first_offset}..{loss.last_offset}")
    elif loss.first_offset is not None:
        what.append(f"from offset {loss.first_offset}")
    what.append(human_size(loss.bytes))
    where = f" in {Path(loss.file).name}" if loss.file else ""
    reason = _loss_reason(loss, lambda ms: human_time(ms, epoch), human_size)
    if loss.setting is not None:
        reason = f"{describe_setting(loss.setting)}: {reason}"
    return f"{', '.join(what)}{where}: {reason}"


def error_lines(errors: list[Finding]) -> list[str]:
    """The partitions a plan could not plan (:attr:`Plan.errors`, notes about their dirs): ``dir: words``."""
    return [f"{e.file}: {facts.render(e)}" for e in errors]


def invalid_plan(e: PlanError) -> str:
    """The words of a :class:`PlanError`: for a plan with errors, the first partition's (and how many more);
    otherwise its own message (the files changed since planning)."""
    if not e.errors:
        return str(e)
    first, *more = error_lines(e.errors)
    return f"nothing was changed: the plan is invalid: {first}" + (f" (and {len(more)} more)" if more else "")


def _op_lines(ops, base: str) -> list[str]:
    """One line per operation; consecutive operations of one kind and reason (the files of one segment) share a
    line."""
    lines: list[str] = []
    i = 0
    while i < len(ops):
        j = i + 1
        while j < len(ops) and ops[j].kind == ops[i].kind and ops[j].why == ops[i].why and ops[i].kind in (
                "rename", "delete", "create"):
            j += 1
        if j - i == 1:
            lines.append(describe_op(ops[i]).replace(base + "/", ""))
        else:
            names = ", ".join(Path(op.path).name for op in ops[i:j])
            if ops[i].kind == "rename" and all(op.target == op.path + ".deleted" for op in ops[i:j]):
                names += " to *.deleted"
            lines.append(f"{ops[i].kind} {names}: {_why(ops[i])}")
        i = j
    return lines


def render_plan(plan: Plan, *, as_json: bool, dry_run: bool, verbose: bool = False, out=None,
                epoch: bool = False) -> None:
    """Print a plan: per partition that changes or loses data, its settings, operations, losses and notes; then
    the data dirs' own operations and notes. Partitions without anything to say are counted, not listed. Sizes
    print in KiB/MiB..., timestamps in ISO-8601 UTC (raw epoch ms with ``epoch``)."""
    out = out or sys.stdout
    if as_json:
        for d in plan.data_dirs:
            for p in d.partitions:
                if p.ops or p.losses or p.notes or p.error or verbose:
                    print(json.dumps({"operation": plan.operation, "dryRun": dry_run, **p.to_dict(),
                                      "operations": [op_json(op) for op in p.ops],
                                      "losses": [loss_json(loss) for loss in p.losses],
                                      "notes": [facts.to_json(n) for n in p.notes],
                                      **({"error": facts.render(p.error)} if p.error is not None else {})}),
                          file=out)
            if d.ops or d.notes:
                print(json.dumps({"operation": plan.operation, "dryRun": dry_run, "dataDir": d.path,
                                  "operations": [op_json(op) for op in d.ops],
                                  "notes": [facts.to_json(n) for n in d.notes]}), file=out)
        errors = plan.errors
        summary = plan.summary() | {"errors": error_lines(errors), "notes": [facts.to_json(n) for n in plan.all_notes()],
                                    **({"errorNotes": [facts.to_json(e) for e in errors]} if errors else {})}
        print(json.dumps({"summary": summary, "dryRun": dry_run}), file=out)
        return
    for d in plan.data_dirs:
        quiet = 0
        print(f"{d.path}:", file=out)
        for p in d.partitions:
            if not (p.ops or p.losses or p.notes or p.error or verbose):
                quiet += 1
                continue
            print(f"  {p.name}", file=out)
            if p.error:
                print(f"    ERROR: {facts.render(p.error)}", file=out)
            if p.settings and (p.ops or p.losses or verbose):
                print(f"    settings: {_settings_line(p.settings)}", file=out)
            for line in _op_lines(p.ops, p.dir):
                print(f"    {line}", file=out)
            for loss in p.losses:
                label = "LOSS" if loss.damage else "removes"
                print(f"    {label}: {describe_loss(loss, epoch)}", file=out)
            for n in p.notes:
                print(f"    note: {facts.render(n)}", file=out)
        for line in _op_lines(d.ops, d.path):
            print(f"  {line}", file=out)
        for n in d.notes:
            print(f"  note: {facts.render(n)}", file=out)
        if quiet:
            print(f"  {quiet} other partition(s): nothing to do", file=out)
    s = plan.summary()
    removed, lost = s["recordsRemoved"], s["recordsLost"]
    print(f"{plan.operation}: {s['operations']} operation(s) on {s['partitionsChanged']} of {s['partitions']} "
          f"partition(s)" + (f", {removed:,d} record(s) removed" if removed else "")
          + (f", {human_size(plan.bytes)} freed" if plan.bytes > 0 else "")
          + (f" ({lost:,d} lost to damage)" if lost else "")
          + (" (dry run: nothing changed)" if dry_run else ""), file=out)


def render_result(result: ApplyResult, *, as_json: bool, out=None) -> None:
    out = out or sys.stdout
    if as_json:
        print(json.dumps({"applied": result.summary()}), file=out)
        return
    if result.operations:
        print(f"applied {result.operations} operation(s)", file=out)
    for b in result.backups:
        print(f"originals kept in {b}", file=sys.stderr if out is sys.stdout else out)


def run_plan(args: argparse.Namespace, plan: Plan, *, progress_label: str | None = None,
             exit_code: Callable[[Plan], int] | None = None,
             on_applied: Callable[[ApplyResult], None] | None = None) -> int:
    """The CLI flow of a mutating command: print the plan; unless ``--dry-run``, apply it (lock, backup,
    operations) and print what was done. Exit 1 if the plan is invalid (nothing changed), else
    ``exit_code(plan)`` (default 0)."""
    render_plan(plan, as_json=args.json, dry_run=args.dry_run, epoch=getattr(args, "epoch", False))
    if plan.errors:
        busy = concurrent_writer(plan)  # the errors may be another writer's changes, made while planning
        if busy is not None:
            print(f"kafkalog {plan.operation}: {busy}", file=sys.stderr)
            return 1
        print(f"kafkalog {plan.operation}: nothing was changed: {len(plan.errors)} partition(s) could not be "
              "planned (see ERROR above)", file=sys.stderr)
        return 1
    if not args.dry_run and plan.changes:
        todo = sum(1 for d in plan.data_dirs for p in d.partitions if p.ops)
        with progress(todo, progress_label or plan.operation, unit_bytes=False) as bar:
            result = apply(plan, backup=not args.no_backup,
                           backup_root=Path(args.backup) if args.backup else None,
                           workers=getattr(args, "workers", None) or 1, progress=bar.advance)
        if on_applied is not None:
            on_applied(result)
        render_result(result, as_json=args.json)
    return exit_code(plan) if exit_code is not None else 0
