"""Plan, then apply: the one shape of every mutating engine.

An engine's ``plan_<operation>(paths, ...)`` reads every partition it will touch, validates all of them and
returns a :class:`Plan`: per data dir, per partition, the file operations (:class:`~kafkalog.storage.io.ops.Op`)
in order, the records and offset ranges each partition loses and why (:class:`Loss`), the effective settings that
decided it and where each came from, and notes. Nothing on disk changes while planning; a partition that cannot
be planned carries its error (a code and its facts) and :func:`apply` refuses the whole plan.

``--dry-run`` prints that plan. :func:`apply` executes exactly its operations and nothing else:

1. it refuses a plan with errors, and does nothing at all for a plan without changes (no lock, no backup);
2. it takes the ``.lock`` of every data dir that changes (refusing a dir a live broker holds) and checks that no
   file the plan read has changed since (a stale plan is refused, nothing changed);
3. before each operation it keeps the originals of the files the operation changes or removes in the backup
   (created on first use, never shared with another run);
4. it runs each partition's operations in order (partitions in parallel through a runner: threads, processes
   or Spark tasks), then the data dir's own operations (its checkpoints), and releases the locks.

Every operation is crash-safe on its own (new files are written aside, fsynced and renamed; segment replacement
follows Kafka's ``.cleaned``/``.swap``/``.deleted`` protocol), so a crash between two operations leaves a
directory that kafkalog and Kafka both load with nothing lost beyond what the plan said it would remove.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.storage.engine.backup import Backup
from kafkalog.storage.errors import KafkaLogError, LockedError, LogDirError
from kafkalog.storage.files.findings import Finding
from kafkalog.storage.io import fileops
from kafkalog.storage.io.dirview import stale
from kafkalog.storage.io.lock import DirLock, describe_holders, lock_status
from kafkalog.storage.io.ops import Op
from kafkalog.storage.log.paths import require_data_dir, require_destination
from kafkalog.storage.parallel import run_partition_tasks


class PlanError(KafkaLogError):
    """A plan that cannot be applied: a partition failed to plan, or the files changed since planning. ``errors``:
    the partitions' planning errors (:attr:`Plan.errors`: codes and facts), empty when the files changed."""

    def __init__(self, reason: str, path: str | None = None, position: int | None = None, *,
                 errors: list[Finding] | None = None):
        super().__init__(reason, path, position)
        self.errors: list[Finding] = list(errors or [])


@dataclass(frozen=True)
class Setting:
    """The effective value of one setting and where it came from (``--config``, the topic's config, Kafka's
    default...)."""

    name: str
    value: Any
    source: str

    def to_dict(self) -> dict:
        return {"name": self.name, "value": self.value, "source": self.source}


@dataclass
class Loss:
    """Records a plan removes from one partition, and why: every number is a field (offsets, records, bytes, the
    position in the file, the setting that decided it and the timestamps it compared); ``reason`` is the words.
    A timestamp the reason names is a ``{name}`` placeholder of ``times`` (epoch ms), a size one of ``sizes``
    (bytes), which the one renderer (``kafkalog.tools.plan_output``) prints as a time or a size: nothing reads the
    reason back."""

    reason: str  # in words: "torn tail", "CRC mismatch ...", "its largest timestamp {largestTimestamp} is ..."
    first_offset: int | None = None
    last_offset: int | None = None
    records: int | None = None
    bytes: int = 0
    file: str | None = None
    position: int | None = None
    damage: bool = False  # removed because it is invalid (repair), not by a policy (retention, compaction)
    setting: Setting | None = None  # the policy setting that removes these records (retention.ms=..., its source)
    times: dict[str, int] = field(default_factory=dict)  # the reason's {name} timestamps, epoch ms
    sizes: dict[str, int] = field(default_factory=dict)  # the reason's {name} sizes, bytes
    note: Finding | None = None  # why, as a code and facts (instead of ``reason``)

    def to_dict(self) -> dict:
        """JSON: the fields; ``reason`` with its timestamps as epoch ms (as every timestamp of the JSON output) and
        its sizes in bytes, ``setting``, ``times`` and ``sizes`` as they are; with a ``note``, its ``code`` and
        ``facts`` (the command puts their words in ``reason``)."""
        reason = self.reason
        for name, ms in self.times.items():
            reason = reason.replace("{" + name + "}", str(ms))
        for name, n in self.sizes.items():
            reason = reason.replace("{" + name + "}", f"{n} bytes")
        return {"reason": reason, "firstOffset": self.first_offset, "lastOffset": self.last_offset,
                "records": self.records, "bytes": self.bytes, "file": self.file, "position": self.position,
                "damage": self.damage, "setting": self.setting.to_dict() if self.setting else None,
                "times": dict(self.times), "sizes": dict(self.sizes),
                **({"code": self.note.kind, "facts": dict(self.note.facts)} if self.note is not None else {})}


@dataclass
class PartitionPlan:
    """What a plan does to one partition directory."""

    data_dir: str
    dir: str
    topic: str
    partition: int
    ops: list[Op] = field(default_factory=list)
    losses: list[Loss] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)  # structured notes (kind, subject, facts): tools/ words them
    settings: list[dict] = field(default_factory=list)  # [{name, value, source}] that decided the plan
    facts: dict[str, Any] = field(default_factory=dict)  # engine-specific results (new offsets, sizes...)
    fingerprints: dict[str, Any] = field(default_factory=dict)  # files read while planning
    expected: dict[str, int] | None = None  # file name -> size once applied
    error: Finding | None = None  # planning failed (a code and its facts, see :meth:`fail`): the plan is refused

    @property
    def name(self) -> str:
        return Path(self.dir).name

    @property
    def changes(self) -> bool:
        return bool(self.ops)

    def seal(self, view) -> None:
        """The end of planning this partition on ``view``: its operations, the state of every file it read (checked
        again before applying) and the sizes the files will have once applied."""
        self.ops = list(view.ops)
        self.fingerprints = view.fingerprints()
        self.expected = view.expected_state()

    def fail(self, *, code: str, **facts: Any) -> None:
        """This partition cannot be planned: its ``error`` becomes an error note about the partition dir, ``code``
        (its template in ``kafkalog.facts``) with its typed ``facts``, and :func:`apply` refuses the whole plan."""
        self.error = Finding(self.dir, None, code, "error", "", facts)

    @contextlib.contextmanager
    def planning(self):
        """``with pp.planning(): ...``: an error while planning this partition becomes its ``error``:
        ``plan.failed`` for a :class:`KafkaLogError` (its ``file``, byte ``position``, ``error`` (the reason, the
        exception's own words) and ``errorKind``, its class), ``plan.osError`` for an OS error (its ``file``,
        ``error``, the OS's words, and ``errorKind``); :func:`apply` then refuses the whole plan."""
        try:
            yield self
        except KafkaLogError as e:
            self.fail(code="plan.failed", file=None if e.path is None else str(e.path), position=e.position,
                      error=e.reason, errorKind=type(e).__name__)
        except OSError as e:
            self.fail(code="plan.osError", file=str(e.filename or self.dir), error=e.strerror or str(e),
                      errorKind=type(e).__name__)

    def to_dict(self) -> dict:
        """JSON (docs/schemas/planPartition.schema.json): the fixed keys, then the engine's ``facts`` (which never
        replace a fixed key: ``partition`` is always the dir name, ``partitionId`` its number). A partition that
        could not be planned has ``error`` (empty here: the command puts its words there), ``errorCode`` and
        ``errorFacts``."""
        d = {"dataDir": self.data_dir, "partition": self.name, "topic": self.topic,
             "partitionId": self.partition, "operations": [op.to_dict() for op in self.ops],
             "losses": [loss.to_dict() for loss in self.losses], "notes": [n.to_dict() for n in self.notes],
             "settings": list(self.settings),
             **({"error": "", "errorCode": self.error.kind, "errorFacts": dict(self.error.facts)}
                if self.error is not None else {})}
        return d | {k: v for k, v in self.facts.items() if k not in d}


@dataclass
class DataDirPlan:
    """What a plan does to one data dir: its partitions, then its own files (checkpoints, markers)."""

    path: str
    partitions: list[PartitionPlan] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)  # after the partitions
    pre_ops: list[Op] = field(default_factory=list)  # before the partitions (creating a new data dir)
    notes: list[Finding] = field(default_factory=list)
    fingerprints: dict[str, Any] = field(default_factory=dict)

    @property
    def changes(self) -> bool:
        return bool(self.ops or self.pre_ops) or any(p.changes for p in self.partitions)


@dataclass
class Plan:
    operation: str  # repair, reindex, flush, retain, compact, convert, migrate, checkpoints, topic-id
    data_dirs: list[DataDirPlan] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    now: int | None = None
    options: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------------------------------- views
    @property
    def partitions(self) -> list[PartitionPlan]:
        return [p for d in self.data_dirs for p in d.partitions]

    def ops(self) -> Iterator[Op]:
        """Every operation, in the order :func:`apply` runs them."""
        for d in self.data_dirs:
            yield from d.pre_ops
            for p in d.partitions:
                yield from p.ops
            yield from d.ops

    @property
    def changes(self) -> bool:
        return any(d.changes for d in self.data_dirs)

    @property
    def errors(self) -> list[Finding]:
        """The partitions that could not be planned: each one's ``error``, a note about its dir (a code and its
        facts: ``kafkalog.facts`` words it)."""
        return [p.error for p in self.partitions if p.error is not None]

    @property
    def losses(self) -> list[tuple[PartitionPlan, Loss]]:
        return [(p, loss) for p in self.partitions for loss in p.losses]

    @property
    def bytes(self) -> int:
        return sum(op.bytes for op in self.ops())

    def traces(self) -> list[tuple]:
        return [op.trace() for op in self.ops()]

    def check(self) -> None:
        """Raise :class:`PlanError` when partitions could not be planned, with their ``errors`` (codes and facts);
        its message names the first one, in its exception's own words when planning raised one (file, byte)."""
        errs = self.errors
        if errs:
            first, f = errs[0], errs[0].facts
            said = (str(KafkaLogError(f["error"], f.get("file"), f.get("position")))
                    if first.kind in ("plan.failed", "plan.osError") and f.get("error") else f"({first.kind})")
            raise PlanError(f"nothing was changed: the plan is invalid: {first.file}: {said}"
                            + (f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""), errors=errs)

    def summary(self) -> dict:
        """JSON (docs/schemas/planSummary.schema.json): the counts, ``errors`` (each partition's planning error: its
        code as ``kind``, its ``facts``) and ``notes``, whose words the command puts in (``errors`` as
        ``dir: words``, its notes beside as ``errorNotes``)."""
        return {"operation": self.operation, "dataDirs": [d.path for d in self.data_dirs],
                "partitions": len(self.partitions), "partitionsChanged": sum(p.changes for p in self.partitions),
                "operations": sum(1 for _ in self.ops()), "bytes": self.bytes,
                "recordsRemoved": sum(loss.records or 0 for _, loss in self.losses),
                "recordsLost": sum(loss.records or 0 for _, loss in self.losses if loss.damage),
                "errors": [e.to_dict() | {"facts": dict(e.facts)} for e in self.errors],
                "notes": [n.to_dict() for n in self.all_notes()]}

    def all_notes(self) -> list[Finding]:
        """The plan's own notes, then each data dir's."""
        return list(self.notes) + [n for d in self.data_dirs for n in d.notes]


# -------------------------------------------------------------------------------------------------- apply
@dataclass
class ApplyResult:
    plan: Plan
    operations: int = 0
    traces: list[tuple] = field(default_factory=list)  # what each operation did, in order
    backups: list[str] = field(default_factory=list)  # backup folders holding originals
    saved: int = 0  # originals kept
    results: dict[str, list] = field(default_factory=dict)  # partition dir -> what each op returned

    def summary(self) -> dict:
        return {"operation": self.plan.operation, "applied": self.operations, "backups": self.backups,
                "originalsKept": self.saved}


Runner = Callable[[Callable[[Any], Any], list], list]


def _apply_partition(task: tuple[PartitionPlan, Backup | None]) -> tuple[str, list, list[str]]:
    pplan, backup = task
    results = [_run(op, backup) for op in pplan.ops]
    return pplan.dir, results, (backup.saved if backup is not None else [])


def default_runner(workers: int = 1, progress: Callable[[int], None] | None = None) -> Runner:

    return lambda fn, items: run_partition_tasks(fn, items, workers=workers, progress=progress)


def apply(plan: Plan, *, backup: bool = True, backup_root: str | os.PathLike | None = None,
          runner: Runner | None = None, workers: int = 1,
          progress: Callable[[int], None] | None = None, locked: bool = False) -> ApplyResult:
    """Execute ``plan`` (see the module doc). ``backup_root``: keep originals there (one sub-folder per data
    dir) instead of a new folder beside each data dir. ``runner(fn, partition tasks)`` maps the partition work
    (default: ``workers`` processes, several partitions at once in each); ``progress(n)`` is called as
    partitions finish. ``locked``: the caller already holds the ``.lock`` of every data dir involved (a library
    operation made of several steps)."""
    plan.check()
    out = ApplyResult(plan)
    if not plan.changes:
        return out
    run = runner or default_runner(workers, progress)
    with contextlib.ExitStack() as stack:

        changing = [d for d in plan.data_dirs if d.changes]
        if backup and backup_root is not None:
            inside = Backup.inside_data_dir(Path(backup_root), [Path(d.path) for d in changing])
            if inside is not None:
                raise PlanError(f"nothing was changed: the backup folder {backup_root} is inside the data dir {inside}, "
                                "where the broker would refuse to load the data dir (a folder that is not a "
                                "partition); keep the originals outside it", str(backup_root))
        for d in changing:  # nothing is written into a directory that is not (or does not become) a data dir
            require_destination(d.path)
            if not d.pre_ops and not d.partitions and Path(d.path).exists():
                require_data_dir(d.path)  # only the data dir's own files (checkpoints, markers): it must be one
        for d in sorted(changing, key=lambda d: d.path):
            if locked or not Path(d.path).is_dir():
                continue  # held by the caller, or a data dir the plan creates: nobody else can hold it
            try:
                stack.enter_context(DirLock(d.path))
            except LockedError as e:
                raise LockedError(f"nothing was changed: {e.reason}; stop the broker first", e.path) from None
        _check_fresh(changing)
        roots = {d.path: Path(backup_root) / Path(d.path).name if backup_root else
                 Backup.default_root(d.path, plan.operation) for d in changing} if backup else {}
        _check_writable(changing, list(roots.values()))
        for d in changing:
            bk = None
            if backup:
                bk = Backup(roots[d.path], d.path)
            for op in d.pre_ops:
                out.traces.append(op.done_trace(_run(op, None)))
            tasks = [(p, bk) for p in d.partitions if p.changes]
            saved: list[str] = []
            for (pplan, _), (pdir, results, kept) in zip(tasks, run(_apply_partition, tasks), strict=True):
                out.results[pdir] = results
                out.traces += [op.done_trace(r) for op, r in zip(pplan.ops, results, strict=True)]
                saved += kept
            for op in d.ops:
                r = _run(op, bk)
                out.results.setdefault(d.path, []).append(r)
                out.traces.append(op.done_trace(r))
            if bk is not None:
                saved += bk.saved
                if saved:
                    out.backups.append(str(bk.root))
                    out.saved += len(set(saved))
            out.operations += sum(len(p.ops) for p in d.partitions) + len(d.ops) + len(d.pre_ops)
    return out


def _run(op: Op, backup: Backup | None) -> Any:
    """One operation: announced to observers, its originals kept, then run. OS errors name the op's file."""
    fileops.announce("begin-op", op.path, op.kind)
    if backup is not None:
        backup.keep(op)
    try:
        return op.run()
    except KafkaLogError:
        raise
    except OSError as e:
        raise KafkaLogError(f"{op.kind} failed: {e.strerror or e}", e.filename or op.path) from None


def concurrent_writer(plan: Plan) -> str | None:
    """Why a plan with errors may be another writer's doing, or None: a data dir of the plan whose ``.lock`` a
    live process holds now (a broker, another kafkalog applying a plan: it changed files while this plan read
    them), or files the plan read that changed since. The caller reports that instead of the errors."""

    for d in plan.data_dirs:
        try:
            st = lock_status(d.path)
        except KafkaLogError:
            continue
        if st.held:
            return (f"nothing was changed: {d.path}/.lock is held by {describe_holders(st.holders)}, which changed "
                    "the dir while this plan was made; plan again once it is done")
    try:
        _check_fresh(plan.data_dirs)
    except PlanError as e:
        return e.reason
    return None


def _check_fresh(dirs: list[DataDirPlan]) -> None:
    changed = []
    for d in dirs:
        changed += [str(Path(d.path) / n) for n in stale(d.path, d.fingerprints)]
        for p in d.partitions:
            changed += [str(Path(p.dir) / n) for n in stale(p.dir, p.fingerprints)]
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise PlanError(f"nothing was changed: {changed[0]}{more} changed since the plan was made; plan again")


def _writable(path: Path, *, file: bool = False) -> bool:
    """May this process change ``path`` (a file changed in place with ``file``; otherwise the dir in which entries
    are created, renamed and removed: its nearest existing ancestor for a dir still to be created)? Asked of the
    kernel with the effective ids and capabilities (root without CAP_DAC_OVERRIDE is refused like anyone)."""
    if not file:
        while not path.exists() and path != path.parent:
            path = path.parent
    mode = os.W_OK if file else os.W_OK | os.X_OK
    if os.access in os.supports_effective_ids:
        return os.access(path, mode, effective_ids=True)
    return os.access(path, mode)


def require_writable(dirs: list[Path] = (), files: list[Path] = (), *, what: str = "") -> None:  # type: ignore[assignment]
    """Refuse (nothing changed yet) when a dir to create entries in or a file to change in place cannot be
    written by this process: the check :func:`apply` makes for plans, for writers that are not plans (``append``,
    ``import``)."""
    denied = [str(d) for d in dirs if not _writable(Path(d))] + \
        [str(f) for f in files if Path(f).exists() and not _writable(Path(f), file=True)]
    if denied:
        more = f" (and {len(denied) - 1} more)" if len(denied) > 1 else ""
        raise LogDirError(f"{what + ': ' if what else ''}cannot be written (permission denied); nothing was changed"
                          f"{more}; run as the user that owns the data dir", denied[0])


def _check_writable(dirs: list[DataDirPlan], backup_roots: list[Path]) -> None:
    """Every dir the plan creates, renames or removes entries in, every file it changes in place and every backup
    folder can be written: otherwise nothing is changed (a failed first write in one partition after others were
    already changed is what this prevents)."""
    denied: list[str] = []
    seen: set[tuple[str, bool]] = set()

    def need(path: str | os.PathLike, file: bool = False) -> None:
        key = (str(path), file)
        if key not in seen:
            seen.add(key)
            if not _writable(Path(path), file=file):
                denied.append(str(path))

    for d in dirs:
        ops = [*d.pre_ops, *(op for p in d.partitions for op in p.ops), *d.ops]
        for op in ops:
            where = Path(op.path)
            need(where if where.is_dir() else where.parent)  # an op on a whole partition dir writes inside it
            target = getattr(op, "target", "")
            if target:
                need(Path(target).parent)
            for original, in_place in op.originals():
                if in_place and Path(original).exists():
                    need(original, file=True)
    for root in backup_roots:
        need(root.parent)
    if denied:
        more = f" (and {len(denied) - 1} more)" if len(denied) > 1 else ""
        raise PlanError(f"nothing was changed: {denied[0]}{more} cannot be written (permission denied); run as the "
                        "user that owns the data dir")


@contextlib.contextmanager
def data_dir_lock(data_dir: str | os.PathLike):
    """Hold a data dir's ``.lock`` as the broker does (:class:`LockedError` when a live process holds it), for
    writers that are not plans (``append``, ``import``)."""

    require_destination(data_dir, new=False)  # a data dir, or an empty dir a writer makes one
    with DirLock(data_dir):
        yield


__all__ = ["ApplyResult", "Backup", "DataDirPlan", "Loss", "PartitionPlan", "Plan", "PlanError", "apply",
           "concurrent_writer", "data_dir_lock", "default_runner"]
