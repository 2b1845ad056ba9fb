"""A Kafka broker Docker image built on this machine, from Debian's packages and Maven Central only.

No image registry is reachable from the machines kafkalog is built on, so the image the container backend
(:class:`kafkalog.compat.broker.ContainerBroker`) runs is made here, in two layers, each built once per
machine and reused:

1. ``kafkalog/debian-jre:bookworm-17``: a Debian 12 (bookworm) root filesystem made by ``mmdebstrap``
   (variant ``minbase`` plus ``openjdk-17-jre-headless``) from the machine's Debian mirror, with
   ``SOURCE_DATE_EPOCH`` fixed so the same package versions give the same bytes (two builds compared file by
   file differed only in the Java CA keystore, which is left out; with it left out two builds gave the same
   sha256), imported with ``docker import``; the tarball's sha256 is kept as a label.
2. ``kafkalog/kafka:<version>``: that base plus the Kafka jars the project already resolves from Maven
   Central (:func:`kafkalog.compat.jars.ensure_kafka`, ``/opt/kafka/libs``) and a start script
   (``/opt/kafka/bin/kafka-start``) that formats the KRaft storage if the data dir is not formatted
   (``kafka.tools.StorageTool format --ignore-formatted``) and then ``exec``s the broker JVM, so the broker is
   the container's PID 1 and gets ``docker stop``'s SIGTERM (clean shutdown) and ``docker kill``'s SIGKILL.

Each image carries a label with a digest of its inputs (base: the mmdebstrap command; Kafka: the base image
id, the jar names and sizes, the script); an image whose label differs is rebuilt.

Usage::

    python -m kafkalog.compat.image 4.3.1          # build (or reuse) kafkalog/kafka:4.3.1, print its tag
    python -m kafkalog.compat.image 4.3.1 --rebuild

Needs a running Docker engine and, for the base layer, ``mmdebstrap`` (Debian package ``mmdebstrap``) run
as root.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafkalog.compat import jars
from kafkalog.compat.errors import HarnessError

SUITE = "bookworm"
BASE_REPO = "kafkalog/debian-jre"
BASE_TAG = f"{SUITE}-17"
KAFKA_REPO = "kafkalog/kafka"
LABEL = "org.kafkalog.inputs"
#: 2025-01-01T00:00:00Z: file times inside the base image (reproducible builds).
SOURCE_DATE_EPOCH = "1735689600"
MIRROR_ENV = "KAFKALOG_DEBIAN_MIRROR"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("openjdk-17-jre-headless",)
LIBS = "/opt/kafka/libs"
START = "/opt/kafka/bin/kafka-start"

#: The start script. Arguments: the server.properties path (inside the container) and the cluster id; the
#: JVM options come from KAFKA_JVM_OPTS (word-split on purpose).
START_SCRIPT = """\
#!/bin/sh
# kafka-start PROPERTIES CLUSTER_ID: format the KRaft storage (CLUSTER_ID "-": it is formatted already, as
# the JVM backend decides: a data dir holding meta.properties is not formatted again), then run the broker.
set -eu
props="$1"
cluster_id="$2"
cp="/opt/kafka/libs/*"
if [ "$cluster_id" != "-" ] && grep -q '^process.roles=' "$props"; then
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 ${KAFKA_TOOLS_OPTS:-} -cp "$cp" \\
    kafka.tools.StorageTool format -t "$cluster_id" -c "$props" --ignore-formatted
fi
exec java ${KAFKA_JVM_OPTS:-} -cp "$cp" kafka.Kafka "$props"
"""

DOCKERFILE = f"""\
FROM {{base}}
COPY libs/ {LIBS}/
COPY kafka-start {START}
LABEL {LABEL}="{{digest}}" org.kafkalog.kafka-version="{{version}}"
ENTRYPOINT ["{START}"]
"""


def image_tag(version: str) -> str:
    """The local image the container backend runs for Kafka ``version``."""
    return f"{KAFKA_REPO}:{version}"


def docker_client(timeout: int = 600) -> Any:
    """A Docker SDK client; a clear error when no engine answers."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker comes with testcontainers (the test extra)
        raise HarnessError("the Docker SDK is not installed: pip install docker (or kafkalog[test])") from exc
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:
        raise HarnessError(f"no Docker engine answers ({exc}); start dockerd, or see the README's container "
                           "section") from exc
    return client


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _existing(client: Any, tag: str) -> Any:
    import docker.errors

    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def _mmdebstrap_cmd(out: Path, mirror: str) -> list[str]:
    exe = shutil.which("mmdebstrap")
    if exe is None:
        raise HarnessError("mmdebstrap is not installed (Debian: apt-get install mmdebstrap); it builds the "
                           "image's Debian root filesystem")
    return [
        exe, "--variant=minbase", "--include=" + ",".join(BASE_PACKAGES),
        "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
        # the Java trust store is a keystore whose entries carry the time it was made: the one file that
        # differs between two builds; the broker here speaks PLAINTEXT on loopback and needs no CA
        "--customize-hook=rm -f \"$1\"/etc/ssl/certs/java/cacerts",
        "--quiet", SUITE, str(out), mirror,
    ]  # fmt: skip


def ensure_base(*, rebuild: bool = False, log: Any = None) -> str:
    """Build (or reuse) the Debian + JRE base image; return its tag."""
    client = docker_client()
    tag = f"{BASE_REPO}:{BASE_TAG}"
    mirror = os.environ.get(MIRROR_ENV, DEFAULT_MIRROR)
    digest = _digest(" ".join(_mmdebstrap_cmd(Path("base.tar"), mirror)), SOURCE_DATE_EPOCH)
    image = _existing(client, tag)
    if image is not None and not rebuild and (image.labels or {}).get(LABEL) == digest:
        return tag
    old = image
    with tempfile.TemporaryDirectory(prefix="kafkalog-image-") as tmp:
        rootfs = Path(tmp) / "base.tar"
        env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH)
        started = time.monotonic()
        proc = subprocess.run(_mmdebstrap_cmd(rootfs, mirror), env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
            raise HarnessError(f"mmdebstrap could not build the Debian {SUITE} root filesystem "
                               f"(is {mirror} reachable? run as root?)\n{tail}")
        sha = hashlib.sha256()
        with open(rootfs, "rb") as fh:
            while chunk := fh.read(1 << 20):
                sha.update(chunk)
        _say(log, f"root filesystem: {rootfs.stat().st_size / 1e6:.0f} MB in {time.monotonic() - started:.0f} s, "
                  f"sha256 {sha.hexdigest()}")
        # docker import with a label (the API's "changes" are the CLI's --change); given a file name, the SDK
        # streams it with a length (a file object makes the engine fail with "header line too long")
        client.api.import_image(src=str(rootfs), repository=BASE_REPO, tag=BASE_TAG,
                                changes=[f'LABEL {LABEL}="{digest}" org.kafkalog.rootfs-sha256="{sha.hexdigest()}"'])
    if old is not None and client.images.get(tag).id != old.id:
        with contextlib.suppress(Exception):  # in use by the kafka image built on it: kept until that goes
            client.images.remove(old.id)
    return tag


def ensure_image(version: str, *, rebuild: bool = False, log: Any = None) -> str:
    """Build (or reuse) ``kafkalog/kafka:<version>``; return its tag. Resolves the jars first if needed."""
    client = docker_client()
    libs = jars.ensure_kafka(version)
    base = ensure_base(rebuild=rebuild, log=log)
    base_id = client.images.get(base).id
    jar_files = sorted(libs.glob("*.jar"))
    digest = _digest(base_id, version, START_SCRIPT, DOCKERFILE,
                     *(f"{p.name}:{p.stat().st_size}" for p in jar_files))
    tag = image_tag(version)
    image = _existing(client, tag)
    if image is not None and not rebuild and (image.labels or {}).get(LABEL) == digest:
        return tag
    started = time.monotonic()
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        def add(name: str, data: bytes, mode: int = 0o644) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(SOURCE_DATE_EPOCH)
            tar.addfile(info, io.BytesIO(data))

        add("Dockerfile", DOCKERFILE.format(base=base, digest=digest, version=version).encode())
        add("kafka-start", START_SCRIPT.encode(), 0o755)
        for jar in jar_files:
            add(f"libs/{jar.name}", jar.read_bytes())
    context.seek(0)
    try:
        built, _ = client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True,
                                       pull=False)
    except Exception as exc:
        raise HarnessError(f"docker build of {tag} failed: {exc}") from exc
    if image is not None and image.id != built.id:  # the replaced image, now untagged: not left behind
        with contextlib.suppress(Exception):
            client.images.remove(image.id)
    _say(log, f"{tag}: built in {time.monotonic() - started:.0f} s")
    return tag


def _say(log: Any, message: str) -> None:
    if log is not None:
        log(message)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafkalog.compat.image",
        description="Build (once per machine) the local Docker image kafkalog/kafka:VERSION that the container "
        "backend of the differential tests runs: Debian bookworm from Debian's packages (mmdebstrap) with "
        "OpenJDK 17, Kafka's jars from Maven Central, and a start script that formats KRaft storage and runs "
        "the broker.",
    )
    parser.add_argument("versions", nargs="*", default=[jars.LATEST_4], help=f"Kafka versions (default {jars.LATEST_4})")
    parser.add_argument("--rebuild", action="store_true", help="build again even if an up-to-date image exists")
    args = parser.parse_args(argv)

    def build(version: str) -> str:
        started = time.monotonic()
        tag = ensure_image(version, rebuild=args.rebuild, log=lambda m: print(m, file=sys.stderr))
        return f"{tag}\t({time.monotonic() - started:.0f} s)"

    return jars.per_version(args.versions, build)


if __name__ == "__main__":
    sys.exit(main())
