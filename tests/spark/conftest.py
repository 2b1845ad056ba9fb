"""One local SparkSession for the whole test session (startup costs seconds).

The Spark tests need the ``spark`` extra (pyspark, pyarrow...); collection must work with only the ``test`` extra
installed. When pyspark or pyarrow cannot be imported, every test module here is replaced by a collector that
skips it (developer machine) or reports a collection error naming the missing module (``CI=true``), before the
module itself is imported (several import pyarrow through ``kafkalog.tools.spark`` at module level).
``tests/compat/test_collection.py`` checks both.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kafkalog.compat.pytest_plugin import in_ci, missing_modules

sys.path.insert(0, str(Path(__file__).parent))  # standalone

SPARK_MISSING = missing_modules("pyspark", "pyarrow")


class _SparkUnavailable(pytest.Module):
    """A test module of this directory that cannot run here: skipped, or a collection error under CI."""

    def collect(self):
        reason = f"{SPARK_MISSING}: install kafkalog[spark]"
        if in_ci():
            raise self.CollectError(f"CI=true and {reason}")
        pytest.skip(reason, allow_module_level=True)


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector):
    if SPARK_MISSING is not None and module_path.name.startswith("test_"):
        return _SparkUnavailable.from_parent(parent, path=module_path)
    return None


@pytest.fixture(scope="session")
def spark():
    from kafkalog.tools.spark import session

    conf = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2", "spark.driver.memory": "1g"}
    # format("kafkalog") is the JVM source when kafkalog's jar can be had (a JDK builds it from the checkout);
    # CI=true requires it, so every Spark test reads through the default path
    s = session("local[2]", conf=conf, jvm_scan=True if in_ci() else None)
    yield s
    s.stop()
