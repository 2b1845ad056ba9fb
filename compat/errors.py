"""Errors raised by the compat harness: each carries a one-line, actionable message."""

from __future__ import annotations

from pathlib import Path


class HarnessError(RuntimeError):
    """Base class: something needed to run real Apache Kafka is missing or failed."""


class JavaNotFound(HarnessError):
    """No usable JDK (java/javac) on PATH or in JAVA_HOME."""


class MavenNotFound(HarnessError):
    """`mvn` is not installed."""


class KafkaResolveError(HarnessError):
    """Maven could not resolve the Kafka jars of a version."""


class BrokerError(HarnessError):
    """A broker (or its ZooKeeper) failed to start, stop or answer."""

    def __init__(self, message: str, log_path: Path | None = None, log_tail: str = "") -> None:
        self.log_path = log_path
        self.log_tail = log_tail
        text = message
        if log_path is not None:
            text += f" (broker log: {log_path})"
        if log_tail:
            text += "\n--- last lines of the log ---\n" + log_tail
        super().__init__(text)


class ToolError(HarnessError):
    """A Kafka command-line tool (DumpLogSegments, StorageTool, ...) failed."""

    def __init__(self, message: str, *, stdout: str = "", stderr: str = "") -> None:
        super().__init__(message)
        self.stdout = stdout
        self.stderr = stderr
