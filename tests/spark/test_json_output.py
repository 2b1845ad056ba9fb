"""`kafkalog spark verify --json` on a real local Spark: every line validates against docs/schemas (docs/json.md)
and every key is camelCase (the other jobs' JSON: tests/storage/test_json_schemas.py, tasks run in-process)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import referencing

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def _validator(name: str):
    registry = referencing.Registry().with_resources(
        (s["$id"], referencing.Resource.from_contents(s))
        for s in (json.loads(p.read_text()) for p in (ROOT / "docs" / "schemas").glob("*.schema.json")))
    return jsonschema.Draft202012Validator({"$ref": f"{name}.schema.json"}, registry=registry)


def _keys(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _keys(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _keys(v)


def test_spark_verify_json_follows_its_schemas():
    data = ROOT / "fixtures" / "kafka-4.3.1-kraft" / "data"
    p = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "spark", "verify", str(data), "--master",
                        "local[1]", "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    *rows, summary = [json.loads(x) for x in p.stdout.splitlines()]
    finding = _validator("finding")
    for r in rows:
        finding.validate(r)
    _validator("sparkSummary").validate(summary)
    assert summary["job"] == "verify" and summary["summary"]["partitions"] > 0
    assert all(re.fullmatch(r"[a-z][a-zA-Z0-9]*", k) for obj in [*rows, summary] for k in _keys(obj))
