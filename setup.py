"""The package build's one step beyond pyproject.toml: kafkalog's Spark jar (``tools/spark/jar.py``) is compiled
into the wheel (``kafkalog/tools/spark/jars/kafkalog-spark.jar``) when the build machine has a JDK, Spark's API
jars (pyspark importable, or ``KAFKALOG_SPARK_JARS``/``SPARK_HOME``) and kafka-clients (a local jar, or Maven to
fetch it); otherwise the wheel is built without it and the build says why. An editable install compiles nothing
here: a checkout builds the jar on first use."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


def _jar_module():
    spec = importlib.util.spec_from_file_location("kafkalog_jar", Path(__file__).parent / "tools" / "spark" / "jar.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithSparkJar(build_py):
    def run(self) -> None:
        super().run()
        if self.dry_run or getattr(self, "editable_mode", False):
            return
        jar = _jar_module()
        out = Path(self.build_lib) / "kafkalog" / "tools" / "spark" / jar.PACKAGED
        why = jar.build_for_package(out)
        if why is None:
            print(f"kafkalog: built the Spark jar {out}", file=sys.stderr)
        else:
            print(f"kafkalog: WARNING: the wheel is built without its Spark jar: {why}", file=sys.stderr)


setup(cmdclass={"build_py": BuildPyWithSparkJar})
