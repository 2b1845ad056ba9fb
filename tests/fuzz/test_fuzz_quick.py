"""A short always-on version of the fuzz targets (the long runs are in test_fuzz_slow.py, marker ``slow``)."""

from __future__ import annotations

import os

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


SMALL = ft.small_file_seeds()


def test_small_file_seeds_cover_every_parser():
    assert {n for n, _ in SMALL} == set(ft.SMALL_FILE_PARSERS)


@pytest.mark.timeout(120)
@settings(max_examples=int(os.environ.get("KAFKALOG_FUZZ_SMALL", "600")), deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.sampled_from(sorted(ft.SMALL_FILE_PARSERS)), st.data())
def test_small_files_quick(name, data):
    seeds = [d for n, d in SMALL if n == name]
    payload = data.draw(st.one_of(ft.mutated(seeds), st.binary(max_size=200),
                                  st.sampled_from([b"[" * 50000, b"{" * 50000, b"\xff" * 64, b"\n" * 10])))
    ft.small_file_target(name, payload)
