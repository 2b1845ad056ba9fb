"""A short always-on version of the fuzz targets (the long runs are in test_fuzz_slow.py, marker ``slow``)."""

from __future__ import annotations

import fuzz_targets as ft
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

QUICK = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
PAYLOADS = ft.compressed_payloads()


@pytest.mark.timeout(120)
@QUICK
@given(ft.mutated())
def test_scanner_and_batches_quick(data):
    ft.scan_target(data)


@pytest.mark.timeout(120)
@QUICK
@given(st.binary(max_size=300))
def test_random_bytes_quick(data):
    ft.scan_target(data)
    ft.varint_target(data)


@pytest.mark.timeout(120)
@QUICK
@given(st.sampled_from(PAYLOADS), st.data())
def test_decompressors_quick(seed, data):
    codec, magic, payload = seed
    ft.decompress_target(codec, magic, data.draw(ft.mutated([payload])))
