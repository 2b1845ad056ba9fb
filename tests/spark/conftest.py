"""One local SparkSession for the whole test session (startup costs seconds)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # datagen


@pytest.fixture(scope="session")
def spark():
    from kafkalog.tools.spark import session

    s = session("local[2]", conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                                  "spark.driver.memory": "1g"})
    yield s
    s.stop()
