"""Every command's ``--json`` output, run on the real fixtures (mutating commands on copies, with ``--dry-run`` and
for real, healthy and damaged dirs): each line is one JSON object that validates against its record type's JSON
Schema in docs/schemas/ (docs/json.md), and every key of every object, nested ones too, is camelCase."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import shutil
import sys
from pathlib import Path

import jsonschema
import pytest
import referencing
from builders import local_tiered_storage, remote_log_metadata_partition, remote_segment_metadata_values  # noqa: E402
from damage import damaged_copy, roll_active  # noqa: E402

from kafkalog.compat.conformance import ScenarioResult  # noqa: E402
from kafkalog.tools.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
SCHEMAS = ROOT / "docs" / "schemas"
FIXTURE_NAMES = sorted(p.name for p in FIXTURES.iterdir() if (p / "data").is_dir())
CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
NOW = "1900000000000"
CLUSTER_ID = "3rWq9ZbmQqW8DX6PNjy4uA"


def _registry():
    resources = []
    for f in sorted(SCHEMAS.glob("*.schema.json")):
        schema = json.loads(f.read_text())
        resources.append((schema["$id"], referencing.Resource.from_contents(schema)))
    return referencing.Registry().with_resources(resources)


REGISTRY = _registry()


def validator(name: str):
    return jsonschema.Draft202012Validator({"$ref": f"{name}.schema.json"}, registry=REGISTRY)


# --------------------------------------------------------------------------------------------- the record types

PLAN_COMMANDS = {"repair", "flush", "reindex", "retain", "compact", "convert", "migrate", "topic-id", "checkpoints",
                 "rehydrate"}


def record_type(command: str, obj: dict, argv: list[str]) -> str:
    """The schema a line printed by ``kafkalog COMMAND --json`` follows (docs/json.md lists them)."""
    if command == "verify":
        return "finding"
    if command == "describe":
        return "partition"
    if command == "remote":
        if argv[1] == "ls":
            return "remoteSegment"
        if argv[1] == "verify":
            return "remoteVerifySummary" if "summary" in obj else "finding"
        return "dumpEvent" if "event" in obj else "batch"
    if command == "groups":
        return "group"
    if command == "dump":
        if "kind" in obj:
            return "dumpEntry"
        return "dumpEvent" if "event" in obj else "batch"
    if command == "export" and obj.get("event") == "skipped":
        return "salvageSkipped"
    if command == "export":
        return "exportSummary" if "summary" in obj else "exportRecord"
    if command == "import":
        return "importSummary"
    if command == "doctor":
        return "doctorSummary" if obj.get("type") == "summary" else "doctorProblem"
    if command == "diff":
        return "diffSummary" if "summary" in obj else "difference"
    if command == "conformance":
        return "conformanceScenario"
    if command == "transactions":
        return "openTransaction"
    if command == "convert" and "--audit" in argv:
        return "convertAudit"
    if command in PLAN_COMMANDS:
        if "summary" in obj:
            return "planSummary"
        if "applied" in obj:
            return "applied"
        if "partitionId" in obj:
            return "planPartition"
        if "operation" in obj:
            return "planDataDir"
        if command == "compact":
            return "compactResult"
        if command == "convert":
            return "convertResult"
        if command == "checkpoints":
            return "checkpoint"
        if command == "topic-id":
            return "topicId"
    raise AssertionError(f"kafkalog {command}: no record type for {obj}")


# --------------------------------------------------------------------------------------------- running commands


def run(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    sys.stdin = io.StringIO(stdin) if stdin is not None else old
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as e:
                rc = e.code
    finally:
        sys.stdin = old
    return rc, out.getvalue(), err.getvalue()


class Outputs:
    """Every JSON object printed, as (argv, record type, object)."""

    def __init__(self):
        self.lines: list[tuple[list[str], str, dict]] = []

    def json(self, argv: list[str], *, stream: str = "out", rcs=(0, 1), stdin: str | None = None,
             allow_empty: bool = False) -> list[dict]:
        rc, out, err = run(argv, stdin)
        assert rc in rcs, f"kafkalog {' '.join(argv)}: exit {rc}\n{err[-2000:]}"
        text = out if stream == "out" else err
        objs = []
        for line in text.splitlines():
            if stream == "err" and not line.startswith("{"):
                continue
            obj = json.loads(line)
            assert isinstance(obj, dict), f"kafkalog {argv[0]}: a line that is not an object: {line[:200]}"
            objs.append(obj)
            self.lines.append((argv, record_type(argv[0], obj, argv), obj))
        assert objs or allow_empty, f"kafkalog {' '.join(argv)} printed no JSON\n{err[-2000:]}"
        return objs


def _files(d: Path) -> list[str]:
    return [str(p) for p in sorted(d.rglob("*")) if p.is_file() and p.name != ".lock"]


def _records(objs: list[dict]) -> list[tuple]:
    return [(r["timestamp"], r["key"], r["value"], json.dumps(r["headers"])) for o in objs for r in o.get("records", [])]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> Outputs:
    o = Outputs()
    tmp = tmp_path_factory.mktemp("json")
    n = iter(range(1000))

    def copy_of(fixture: str) -> Path:
        dst = tmp / f"{fixture}-{next(n)}"
        shutil.copytree(FIXTURES / fixture / "data", dst)
        return dst

    for fx in FIXTURE_NAMES:
        data = FIXTURES / fx / "data"
        o.json(["verify", "--json", "--deep", "--info", str(data)])
        o.json(["describe", "--json", "--segments", str(data)])
        o.json(["dump", "--json", "--deep", *_files(data)])
        o.json(["topic-id", "--json", str(data)])
        o.json(["groups", "--json", str(data)])
        o.json(["transactions", "--json", str(data)], allow_empty=not fx.endswith("killed"))
        o.json(["export", str(data), "--out", "-", "--json"])
        o.json(["export", str(data), "--out", "-", "--json"], stream="err")
        o.json(["export", str(data), "--out", "-", "--print-control-records"])
        o.json(["export", str(data), "--out", str(tmp / f"{fx}.jsonl"), "--json"])
        o.json(["convert", "--audit", "--json", str(data)], allow_empty=not fx.endswith(("v0", "v1")))
        o.json(["checkpoints", "--json", str(data)], allow_empty=True)
        o.json(["doctor", "--json", str(data)])
        for command, extra in [("repair", []), ("flush", []), ("reindex", ["--all"]), ("retain", ["--now", NOW]),
                               ("compact", ["--all", "--now", NOW]), ("convert", ["--codec", "zstd"])]:
            d = copy_of(fx)
            if command == "compact":
                roll_active(d)  # dirty tails become cleanable: compactResult lines
            o.json([command, "--json", "--dry-run", *extra, str(d)])
            o.json([command, "--json", "--no-backup", *extra, str(d)])
        dst = tmp / f"migrated-{fx}"
        o.json(["migrate", "--json", "--dry-run", "--cluster-id", CLUSTER_ID, "--node-id", "1", str(data), str(dst)])
        o.json(["migrate", "--json", "--cluster-id", CLUSTER_ID, "--node-id", "1", str(data), str(dst)])
        o.json(["diff", "--json", str(data), str(dst)])

    kraft = FIXTURES / "kafka-4.3.1-kraft" / "data"
    for fx in ("kafka-4.3.1-kraft", "kafka-3.9.2-zk-v1"):
        d = tmp / f"damaged-{fx}"
        damaged_copy(fx, d)
        o.json(["verify", "--json", "--deep", "--info", str(d)])
        o.json(["describe", "--json", "--segments", str(d)])
        o.json(["dump", "--json", "--deep", *_files(d)])
        o.json(["dump", "--json", "--deep", "--salvage", *[f for f in _files(d) if f.endswith(".log")]])
        o.json(["export", "--salvage", "--json", str(d), "--out", "-", "--print-control-records"])
        o.json(["export", "--salvage", "--json", str(d), "--out", "-"], stream="err")
        for level in ("bytes", "batches"):
            o.json(["diff", "--json", "--level", level, str(FIXTURES / fx / "data"), str(d)])
        o.json(["doctor", "--json", str(d)], rcs=(1, 4))
        o.json(["repair", "--json", "--dry-run", str(d)])
        o.json(["repair", "--json", "--no-backup", str(d)])
        o.json(["diff", "--json", str(FIXTURES / fx / "data"), str(d)])
    for decoder in ("--offsets-decoder", "--transaction-log-decoder", "--cluster-metadata-decoder"):
        o.json(["dump", "--json", decoder, *map(str, sorted(kraft.glob("__*/*.log")))])

    d = copy_of("kafka-4.3.1-kraft")
    o.json(["topic-id", "--json", "--dry-run", "--set", "random", str(d), "--topics", "codec-none"])
    o.json(["topic-id", "--json", "--no-backup", "--set", "random", str(d), "--topics", "codec-none"])
    o.json(["checkpoints", "--json", "--dry-run", "--file", "recovery", "--set", "codec-none-0=1", str(d)])
    o.json(["checkpoints", "--json", "--no-backup", "--file", "recovery", "--set", "codec-none-0=1", str(d)])
    o.json(["conformance", "--list", "--json"])

    # tiered storage: a LocalTieredStorage store laid out from a fixture partition, cross-checked with metadata
    store = tmp / "remote"
    segs = local_tiered_storage(store, d / "codec-none-0", skip_last=False)
    remote_log_metadata_partition(tmp / "rlm", 0, remote_segment_metadata_values(segs, topic="codec-none"))
    o.json(["remote", "ls", "--json", str(store), "--data-dir", str(tmp / "rlm")])
    o.json(["remote", "verify", "--json", str(store), "--data-dir", str(tmp / "rlm")])
    o.json(["remote", "dump", "--json", "--deep", str(store)])
    (tmp / "rehydrated").mkdir()
    o.json(["rehydrate", "--json", "--dry-run", str(store), str(tmp / "rehydrated")])
    o.json(["rehydrate", "--json", str(store), str(tmp / "rehydrated")])

    # the round trips: what dump --json --deep prints, append reads; what export prints, import reads
    dumped = o.json(["dump", "--json", "--deep", *map(str, sorted((kraft / "idempotent-0").glob("*.log")))])
    (tmp / "dump.jsonl").write_text("".join(json.dumps(x) + "\n" for x in dumped))
    assert run(["append", "--from", str(tmp / "dump.jsonl"), str(d), "appended-0"])[0] == 0
    again = o.json(["dump", "--json", "--deep", *map(str, sorted((d / "appended-0").glob("*.log")))])
    assert _records(again) == _records(dumped) and len(_records(dumped)) > 0
    o.json(["import", "--json", "--dry-run", str(tmp / "kafka-4.3.1-kraft.jsonl"), str(tmp / "imported")])
    o.json(["import", "--json", str(tmp / "kafka-4.3.1-kraft.jsonl"), str(tmp / "imported")])
    back = o.json(["export", str(tmp / "imported"), "--out", "-"])
    exported = [json.loads(x) for x in (tmp / "kafka-4.3.1-kraft.jsonl").read_text().splitlines()]
    fields = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")
    key = lambda r: tuple(json.dumps(r[f]) for f in fields)  # noqa: E731
    assert sorted(map(key, back)) == sorted(map(key, exported))
    return o


# ------------------------------------------------------------------------------------------------------- tests


def test_the_schemas_are_valid_draft_2020_12():
    names = sorted(f.name[: -len(".schema.json")] for f in SCHEMAS.glob("*.schema.json"))
    assert len(names) >= 20
    for name in names:
        schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema" and schema["$id"] == f"{name}.schema.json"
    doc = (ROOT / "docs" / "json.md").read_text()
    assert not [n for n in names if f"schemas/{n}.schema.json" not in doc], "docs/json.md lists every schema"


def test_every_line_validates_against_its_schema(outputs: Outputs):
    errors = []
    seen: set[str] = set()
    for argv, kind, obj in outputs.lines:
        seen.add(kind)
        for e in validator(kind).iter_errors(obj):
            errors.append(f"kafkalog {argv[0]} ({kind}) at {'/'.join(map(str, e.absolute_path))}: {e.message}")
    assert not errors, f"{len(errors)} errors, first ones:\n" + "\n".join(sorted(set(errors))[:30])
    # every record type a command prints on these fixtures was seen (spark, conformance and certify results: elsewhere)
    nested = {"planStep", "record", "note"}  # validated inside planPartition/planDataDir/planSummary and batch
    printed = {f.name[: -len(".schema.json")] for f in SCHEMAS.glob("*.schema.json")} - nested
    assert printed - seen == {"conformanceResult", "sparkSummary", "sparkPlanRow", "sparkJars", "certifyDir",
                              "certifyDivergence"}, printed - seen  # certify: tests/kafka/test_certify.py; jars: tests/spark


def _keys(obj, path="$"):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield f"{path}.{k}", k
            yield from _keys(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for v in obj:
            yield from _keys(v, f"{path}[]")


def test_every_key_is_camel_case(outputs: Outputs):
    bad = sorted({f"kafkalog {argv[0]}: {path}" for argv, _, obj in outputs.lines for path, k in _keys(obj)
                  if not CAMEL.match(k)})
    assert not bad, "keys that are not camelCase:\n" + "\n".join(bad[:50])


def _snake(key: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), key)


def test_the_schemas_reject_snake_case_keys(outputs: Outputs):
    """A schema catches a snake_case key: each record type's first camelCase key renamed is invalid."""
    checked = set()
    for _, kind, obj in outputs.lines:
        if kind in checked:
            continue
        key = next((k for k in obj if k != _snake(k)), None)
        if key is None:
            continue
        bad = {(_snake(k) if k == key else k): v for k, v in obj.items()}
        assert not validator(kind).is_valid(bad), f"{kind}: {_snake(key)} accepted"
        checked.add(kind)
    assert len(checked) >= 12


def test_nested_snake_case_keys_are_rejected(outputs: Outputs):
    batch = next(o for _, kind, o in outputs.lines if kind == "batch" and o.get("records"))
    bad = copy.deepcopy(batch)
    bad["records"][0]["key_size"] = bad["records"][0].pop("keySize")
    assert not validator("batch").is_valid(bad)
    plan = next(o for _, kind, o in outputs.lines if kind == "planPartition" and o["operations"])
    bad = copy.deepcopy(plan)
    bad["operations"][0]["old_size"] = 1
    assert not validator("planPartition").is_valid(bad)


def test_conformance_result_json():
    r = ScenarioResult("recovery", "4.3.1", "kraft", "repair + flush vs the broker's recovery", seconds=1.23)
    r.stats.update({"files compared": 12, "records consumed": 3, "records": 5})
    obj = json.loads(json.dumps(r.to_json()))
    validator("conformanceResult").validate(obj)
    assert obj["stats"] == {"filesCompared": 12, "recordsConsumed": 3, "records": 5}
    assert all(CAMEL.match(k) for _, k in _keys(obj))


class _StandInSpark:
    """Just enough of a SparkSession for :mod:`kafkalog.tools.spark.jobs`' per-partition tasks, run in-process (the
    JSON the jobs print does not depend on where the tasks ran; tests/spark runs them on a real Spark)."""

    class _RDD:
        def __init__(self, items):
            self.items = list(items)

        def flatMap(self, fn):  # noqa: N802 - Spark's name
            return type(self)(y for x in self.items for y in fn(x))

        def collect(self):
            return self.items

    class _Context:
        defaultParallelism = 1  # noqa: N815 - Spark's name

        def parallelize(self, items, n):
            return _StandInSpark._RDD(items)

    sparkContext = _Context()  # noqa: N815 - Spark's name


def test_spark_jobs_json(tmp_path: Path):
    from kafkalog.tools.spark import jobs
    from kafkalog.tools.spark_cli import _render

    spark = _StandInSpark()
    d = tmp_path / "d"
    damaged_copy("kafka-4.3.1-kraft", d)
    v1 = tmp_path / "v1"
    shutil.copytree(FIXTURES / "kafka-3.9.2-zk-v1" / "data", v1)
    c = tmp_path / "c"
    shutil.copytree(FIXTURES / "kafka-4.3.1-kraft" / "data", c)
    roll_active(c)
    reports = [("finding", jobs.verify(spark, [str(d)], deep=True)),
               ("sparkPlanRow", jobs.convert(spark, [str(v1)], dry_run=True)),
               ("convertResult", jobs.convert(spark, [str(v1)], backup=False)),
               ("sparkPlanRow", jobs.compact(spark, [str(c)], now=int(NOW), dry_run=True, force=True)),
               ("sparkPlanRow", jobs.compact(spark, [str(c)], now=int(NOW), force=True, backup=False))]
    for row_type, report in reports:
        assert report.rows, report.job
        report.summary["seconds"] = 0.5
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            _render(report, True)
        *rows, summary = [json.loads(x) for x in out.getvalue().splitlines()]
        for r in rows:
            validator(row_type).validate(r)
        validator("sparkSummary").validate(summary)
        assert not [p for obj in [*rows, summary] for p, k in _keys(obj) if not CAMEL.match(k)]
    assert any(r.get("bytesReclaimed") for r in reports[-1][1].rows)
