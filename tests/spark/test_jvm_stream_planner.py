"""No Spark: the JVM stream's questions to ``python -m kafkalog.tools.spark.jvm_plan --serve`` (one process, one
request per line) are answered by the Python stream's own reader: the same offsets, rate limit, pieces and
data-loss rule (``kafkalog.tools.spark.jvm_stream``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from builders import generated_partition
from pyspark.sql.streaming.datasource import ReadMaxRows

from kafkalog.tools.spark.stream import KafkaLogStreamReader

pytestmark = pytest.mark.spark


class Planner:
    """One served planner, as ``KafkaLogMicroBatchStream`` runs it."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "kafkalog.tools.spark.jvm_plan", "--serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, op: str, options: dict[str, str], **body) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"request": "stream", "op": op, "options": options, **body}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(60)


def test_the_served_planner_answers_as_the_python_stream(tmp_path: Path):
    root = tmp_path / "data"
    generated_partition(root / "t-0", 60, batch_records=10, segment_bytes=1500)
    generated_partition(root / "t-1", 20, batch_records=10)
    options = {"path": str(root), "maxOffsetsPerTrigger": "30"}
    reader = KafkaLogStreamReader(None, options)
    planner = Planner()
    try:
        opened = planner.ask("open", options)
        assert opened["initial"] == reader.initialOffset() == {"t": {"0": 0, "1": 0}}
        assert opened["available"] == {"t": {"0": 60, "1": 20}} and opened["maxOffsets"] == 30
        assert opened["failOnDataLoss"] is True and opened["warnings"] == []
        start = opened["initial"]
        latest = planner.ask("latest", options, start=start, maxRows=30, target=None)
        assert latest["end"] == reader.latestOffset(start, ReadMaxRows(30)) == {"t": {"0": 22, "1": 7}}  # 30 * 60/80, 30 * 20/80
        lines = latest["plan"]["pieces"].split("\n")  # one input partition per topic-partition, as the Python stream
        assert len(lines) == len(reader.partitions(start, latest["end"])) == 2
        assert all(p.split("|")[6:8] in (["0", "22"], ["0", "7"]) for line in lines for p in line.split("\t"))
        assert planner.ask("plan", options, start=start, end=latest["end"])["plan"] == latest["plan"]
        # availableNow: the target the JVM side kept caps the end
        capped = planner.ask("latest", options, start=start, maxRows=None, target={"t": {"0": 40, "1": 20}})
        assert capped["end"] == {"t": {"0": 40, "1": 20}}
        # retention deletes the first segment: the micro-batch from 10 is data loss, failed or warned
        first = sorted((root / "t-0").glob("*.log"))
        for f in (root / "t-0").glob(first[0].name[:-4] + ".*"):
            f.unlink()
        new_start = int(first[1].name[:-4])
        after = {"t": {"0": 10, "1": 20}}
        lost = planner.ask("plan", options, start=after, end={"t": {"0": 60, "1": 20}})["plan"]
        assert lost["error"].startswith(f"DataLossError: offsets 10 to {new_start} of t-0 are no longer on disk")
        assert '"failOnDataLoss" to "false"' in lost["error"]
        lenient = {**options, "failOnDataLoss": "false"}
        warned = planner.ask("plan", lenient, start=after, end={"t": {"0": 60, "1": 20}})
        assert "error" not in warned["plan"] and f"offsets 10 to {new_start} of t-0" in warned["warnings"][0]
        shutil.rmtree(root / "t-1")
        gone = planner.ask("plan", options, start=after, end={"t": {"0": 60}})["plan"]
        assert "t-1 is gone" in gone["error"]
        assert planner.ask("nonsense", options)["error"].startswith("ConfigError: unknown stream request")
    finally:
        assert planner.close() == 0
