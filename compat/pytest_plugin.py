"""pytest plugin for tests against real Apache Kafka (marker ``kafka``). Loaded by ``tests/conftest.py``.

* Tests marked ``kafka`` run whenever a JDK and Maven are present (jars are resolved once per session).
  Without them they are skipped, except under ``CI=true``, where a missing JDK, Maven or jar is a failure.
* ``KAFKALOG_KAFKA_VERSIONS=4.3.1,3.9.2`` chooses the versions (default: :data:`jars.DEFAULT_VERSIONS`);
  a test taking a ``kafka_version`` argument is parametrized over them.
* Fixtures: ``kafka_versions``, ``kafka_libs`` (session), ``broker_factory`` (per test) and
  ``module_broker_factory`` (per module: share brokers between the tests of a module).
* When a test that used a broker fails, the tail of each broker's log (and its path) is added to the report.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kafkalog.compat import jars
from kafkalog.compat.broker import Broker, Brokers, KafkaBroker, Mode, tail
from kafkalog.compat.errors import HarnessError


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def configured_versions() -> list[str]:
    env = os.environ.get("KAFKALOG_KAFKA_VERSIONS", "").strip()
    versions = [v.strip() for v in env.split(",") if v.strip()] if env else list(jars.DEFAULT_VERSIONS)
    for v in versions:
        jars.parse_version(v)
    return versions


def _missing_tools() -> str | None:
    """Why Kafka cannot run here (None if java and mvn are present), without resolving jars."""
    try:
        jars.java_executable()
        jars.check_java()
        if not all(jars.is_resolved(v) for v in configured_versions()):
            jars.mvn_executable()
    except HarnessError as exc:
        return str(exc)
    return None


def unavailable(reason: str) -> None:
    """Skip (developer machine) or fail (CI) a test that needs Kafka."""
    if in_ci():
        pytest.fail(f"CI=true and Kafka cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--image", default=None, metavar="IMAGE",
                     help="the container backend's broker image, e.g. apache/kafka:4.3.1 from a registry "
                     "(default: KAFKALOG_IMAGE, else kafkalog/kafka:VERSION built on this machine)")


def missing_modules(*names: str) -> str | None:
    """Why one of the Python modules ``names`` cannot be imported here (None when all can)."""
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            return f"{name} cannot be imported ({exc})"
    return None


def require_modules(*names: str, extra: str) -> None:
    """Skip the calling test (or module, at import) when a module of the optional ``extra`` is not installed;
    under ``CI=true`` fail instead: CI installs every extra, so a missing one is a broken environment."""
    reason = missing_modules(*names)
    if reason is None:
        return
    reason = f"{reason}: install kafkalog[{extra}]"
    if in_ci():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def pytest_configure(config: pytest.Config) -> None:
    if image := config.getoption("--image", default=None):
        os.environ["KAFKALOG_IMAGE"] = image  # read by ContainerBroker and container_image()
    config.addinivalue_line("markers", "kafka: needs a JDK + Kafka jars (real broker or Kafka's tools)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kafka_items = [i for i in items if i.get_closest_marker("kafka")]
    if not kafka_items or in_ci():
        return
    reason = _missing_tools()
    if reason is not None:
        for item in kafka_items:
            item.add_marker(pytest.mark.skip(reason=f"Kafka unavailable: {reason}"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kafka_version" in metafunc.fixturenames:
        metafunc.parametrize("kafka_version", configured_versions(), scope="module")


@pytest.fixture(scope="session")
def kafka_versions() -> list[str]:
    return configured_versions()


def container_image(version: str) -> str:
    """The container backend's image for ``version`` (``KAFKALOG_IMAGE`` or the one built here), or skip
    (developer machine) / fail (CI) when no Docker engine answers or the image cannot be built."""
    from kafkalog.compat.broker import docker_available

    if not docker_available():
        unavailable("no Docker engine answers (CI installs docker.io and starts dockerd; see the README)")
    if image := os.environ.get("KAFKALOG_IMAGE"):
        return image
    from kafkalog.compat.image import ensure_image

    try:
        return ensure_image(version)
    except HarnessError as exc:
        unavailable(str(exc))
        raise  # unreachable


@pytest.fixture(scope="session")
def kafka_libs(kafka_versions: list[str]) -> dict[str, Path]:
    """version -> libs dir, resolved through Maven once per session (and cached across sessions)."""
    try:
        return {v: jars.ensure_kafka(v) for v in kafka_versions}
    except HarnessError as exc:
        unavailable(str(exc))
        raise  # unreachable: unavailable() always raises


def configured_libs(kafka_libs: Mapping[str, Path], version: str) -> Path:
    """The libs dir of Kafka ``version`` (from the ``kafka_libs`` fixture); a test that needs a version the session
    does not configure is skipped."""
    if version not in kafka_libs:
        pytest.skip(f"Kafka {version} not configured (KAFKALOG_KAFKA_VERSIONS)")
    return kafka_libs[version]


class BrokerFactory(Brokers):
    """Starts brokers under a pytest temp dir and kills whatever is still running at teardown."""

    def __init__(self, base: Path, libs: Mapping[str, Path]) -> None:
        super().__init__()
        self.base = base
        self.libs = libs

    def __call__(
        self,
        version: str,
        *,
        mode: Mode = "kraft",
        data_dir: Path | None = None,
        server_properties: Mapping[str, str] | None = None,
        start: bool = True,
        **kwargs: Any,
    ) -> Broker:
        if version not in self.libs:
            try:
                jars.ensure_kafka(version)
            except HarnessError as exc:
                unavailable(str(exc))
        if data_dir is None:
            n = sum(1 for b in self.brokers if b.version == version and b.mode == mode)
            data_dir = self.base / f"kafka-{version}-{mode}-{n}" / "data"
        return self._made(Broker(version, mode=mode, data_dir=data_dir, server_properties=server_properties, **kwargs),
                          start)


@pytest.fixture
def broker_factory(tmp_path: Path, kafka_libs: dict[str, Path]) -> Iterator[BrokerFactory]:
    """``broker_factory("4.3.1", mode="kraft", server_properties={...})`` -> a started :class:`Broker`."""
    factory = BrokerFactory(tmp_path, kafka_libs)
    yield factory
    factory.close()


@pytest.fixture(scope="module")
def module_broker_factory(
    tmp_path_factory: pytest.TempPathFactory, kafka_libs: dict[str, Path]
) -> Iterator[BrokerFactory]:
    """Like ``broker_factory`` but brokers live for the whole module (start once, use in many tests)."""
    factory = BrokerFactory(tmp_path_factory.mktemp("brokers"), kafka_libs)
    yield factory
    factory.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        brokers: list[KafkaBroker] = []
        for value in funcargs.values():
            if isinstance(value, KafkaBroker):
                brokers.append(value)
            elif isinstance(value, BrokerFactory):
                brokers.extend(value.brokers)
        for b in dict.fromkeys(brokers):
            report.sections.append((f"broker log {b.log_path}", tail(b.log_path, 60)))
    return report
