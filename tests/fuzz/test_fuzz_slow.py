"""Fuzz runs (marker ``slow``, about 60 s in total): every parser of the record layer gets thousands of
structurally mutated inputs; the contract is checked in fuzz_targets.py."""

from __future__ import annotations

import os

import fuzz_targets as ft
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

N = int(os.environ.get("KAFKALOG_FUZZ_EXAMPLES", "3500"))
FUZZ = settings(max_examples=N, deadline=None, suppress_health_check=list(HealthCheck), database=None)
PAYLOADS = ft.compressed_payloads()
V2 = [s for s in ft.SEEDS if s[16] == 2]
LEGACY = [s for s in ft.SEEDS if s[16] < 2]


@FUZZ
@given(ft.mutated(V2))
def test_fuzz_v2_batches_and_records(data):
    ft.scan_target(data)


@FUZZ
@given(ft.mutated(LEGACY))
def test_fuzz_legacy_messages_and_wrappers(data):
    ft.scan_target(data)


@FUZZ
@given(ft.mutated())
def test_fuzz_scanner_mixed(data):
    ft.scan_target(data)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
@settings(max_examples=max(1, N // 3), deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_fuzz_decompressor(codec, data):
    seeds = [p for p in PAYLOADS if p[0] == codec]
    _, magic, payload = data.draw(st.sampled_from(seeds))
    ft.decompress_target(codec, magic, data.draw(ft.mutated([payload])))


@FUZZ
@given(st.binary(max_size=24))
def test_fuzz_varints(data):
    ft.varint_target(data)
