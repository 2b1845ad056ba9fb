"""``kafkalog``'s dumps of ``.index``, ``.timeindex``, ``.txnindex`` and ``.snapshot`` files
(:mod:`kafkalog.storage.reports.dump`) against Kafka's own DumpLogSegments, field by field, for every file of every
fixture data dir (real broker dirs from 4.x, 3.9 KRaft and 3.9 ZooKeeper v0/v1).

DumpLogSegments runs once per fixture and mode (plain, ``--verify-index-only``, ``--index-sanity-check``);
files on which it crashes are isolated (``on_error="split"``). One intentional difference: an index file of
zeros only (preallocated by a broker that was killed before the segment's first index entry) is "empty" for
kafkalog, while DumpLogSegments reads slot 0 as an entry ``(baseOffset, 0)`` and then either crashes (empty
``.log``) or reports it as a mismatch.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from kafkalog.storage.reports.dump import FileDump, dump_file

pytestmark = pytest.mark.kafka

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FIXTURE_DATA = sorted(FIXTURES.glob("*/data")) if FIXTURES.is_dir() else []
SUFFIXES = (".index", ".timeindex", ".txnindex", ".snapshot")


def _files(data: Path) -> list[Path]:
    return sorted(p for p in data.glob("*/*") if p.is_file() and p.suffix in SUFFIXES)


def _preallocated(path: Path) -> bool:
    raw = path.read_bytes()
    return path.suffix in (".index", ".timeindex") and len(raw) > 0 and not any(raw)


def _version(data: Path, kafka_versions: list[str]) -> str:
    wanted = json.loads((data.parent / "manifest.json").read_text())["kafka_version"]
    return wanted if wanted in kafka_versions else kafka_versions[0]


def test_fixtures_are_present():
    assert FIXTURE_DATA, f"no fixture data dirs under {FIXTURES}"


@pytest.mark.parametrize("data", FIXTURE_DATA, ids=[p.parent.name for p in FIXTURE_DATA])
def test_dump_parity(data: Path, kafka_versions: list[str], kafka_libs):
    from kafkalog.compat.tools import dump_log_segments

    files = _files(data)
    assert files
    version = _version(data, kafka_versions)
    run = dump_log_segments(version, files, deep=False, print_data=False, on_error="split")
    kafka = {Path(f.path): f for f in run.files}
    ours = {p: dump_file(p) for p in files}
    not_found: list[tuple[int, int]] = []
    checked = Counter()
    for p in files:
        k, o = kafka[p.absolute()], ours[p]
        if _preallocated(p):
            assert o.empty and o.ok
            assert k.error is not None or [e["offset"] for e in k.entries] == [o.info["baseOffset"]], p
            continue
        assert k.error is None, f"{p}: DumpLogSegments failed: {k.error}"
        assert not k.unparsed, (p, k.unparsed)
        assert o.entries == k.entries, p
        assert o.empty == k.empty, p
        assert o.problems == [], p
        if p.suffix == ".index":
            assert Counter(o.index_mismatches) == Counter(k.index_mismatches), p
        if p.suffix == ".timeindex":
            assert Counter(o.timestamp_mismatches) == Counter(k.timestamp_mismatches), p
            assert Counter(o.out_of_order_timestamps) == Counter(k.out_of_order_timestamps), p
            not_found += o.offsets_not_found
        checked[p.suffix] += 1
    assert Counter(not_found) == Counter(run.timeindex_not_found)
    assert checked[".index"] and checked[".timeindex"] and checked[".snapshot"], checked


@pytest.mark.parametrize("data", FIXTURE_DATA, ids=[p.parent.name for p in FIXTURE_DATA])
def test_verify_index_only_and_sanity_check_parity(data: Path, kafka_versions: list[str], kafka_libs):
    from kafkalog.compat.tools import dump_log_segments

    files = [p for p in _files(data) if p.suffix in (".index", ".timeindex") and not _preallocated(p)]
    version = _version(data, kafka_versions)
    verify = dump_log_segments(version, files, deep=False, print_data=False, verify_index_only=True,
                               on_error="split")
    sanity = dump_log_segments(version, files, deep=False, print_data=False, index_sanity_check=True,
                               on_error="split")
    kv = {Path(f.path): f for f in verify.files}
    ks = {Path(f.path): f for f in sanity.files}
    for p in files:
        o: FileDump = dump_file(p, verify_index_only=True)
        k = kv[p.absolute()]
        assert k.error is None and k.entries == [] and o.entries == [], p
        assert Counter(o.index_mismatches) == Counter(k.index_mismatches), p
        assert Counter(o.timestamp_mismatches) == Counter(k.timestamp_mismatches), p
        s: FileDump = dump_file(p, index_sanity_check=True)
        ksan = ks[p.absolute()]
        if ksan.empty:
            assert s.empty, p
        else:
            assert s.passed_sanity_check is (ksan.error is None and ksan.passed_sanity_check), p


def test_text_lines_match_dumplogsegments_stdout(kafka_versions: list[str], kafka_libs):
    """The human lines, byte for byte, for one file of each kind (the transactional fixture partitions)."""
    from kafkalog.compat.tools import dump_class, run_tool

    data = next((d for d in FIXTURE_DATA if (d / "transactions-0").is_dir()), None)
    assert data is not None
    files = [p for p in _files(data) if p.parent.name in ("transactions-0", "multi-segment-0", "idempotent-0")]
    assert {p.suffix for p in files} == set(SUFFIXES)
    version = _version(data, kafka_versions)
    proc = run_tool(version, dump_class(version), ["--files", ",".join(str(p) for p in files)])
    assert proc.returncode == 0, proc.stderr
    expected = []
    for p in files:
        expected.append(f"Dumping {p}")
        expected += dump_file(p).text()
    assert proc.stdout.splitlines() == expected
