"""Kafka 4.3.1's DumpLogSegments, run live with ``--remote-log-metadata-decoder`` and
``--share-group-state-decoder`` on the ``__remote_log_metadata`` and ``__share_group_state`` segments of the real
fixture ``fixtures/kafka-4.3.1-tiered``, prints line for line what ``kafkalog dump`` prints with the same option."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.compat import jars
from kafkalog.compat.tools import dump_class, run_tool
from kafkalog.tools.cli import main

pytestmark = pytest.mark.kafka

TIERED = Path(__file__).resolve().parents[2] / "fixtures" / f"kafka-{jars.LATEST_4}-tiered"
DECODERS = {"remote-log-metadata": "__remote_log_metadata", "share-group-state": "__share_group_state"}


@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_decoder_text_matches_dump_log_segments(decoder: str, capsys: pytest.CaptureFixture[str]) -> None:
    logs = sorted((TIERED / "data").absolute().glob(f"{DECODERS[decoder]}-*/*.log"))
    assert logs
    run = run_tool(jars.LATEST_4, dump_class(jars.LATEST_4), [f"--{decoder}-decoder", "--files", ",".join(map(str, logs))])
    assert run.returncode == 0, run.stderr[-2000:]
    assert main(["dump", f"--{decoder}-decoder", *map(str, logs)]) == 0
    ours = capsys.readouterr().out.splitlines()
    theirs = run.stdout.splitlines()
    assert len(theirs) > 10
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert a == b, f"line {i + 1}"
