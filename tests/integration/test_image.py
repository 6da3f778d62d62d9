"""The container image (``Dockerfile``), built and run for real without a Docker engine.

The official Python base cannot be pulled here, so the base is a local Debian made with
``debootstrap`` from the machine's apt mirror and imported with ``podman``; it gets this
machine's extra CA certificates, as a base built inside a network with a TLS-inspecting proxy
needs them to reach PyPI. ``buildah bud`` builds the Dockerfile unchanged on it, then
``buildah run`` starts the image's own entrypoint and command (as the image's non-root user)
against the real 0.9 broker, with JMX; the test reads ``/ready``, a group's status and the
JMX figures from it, runs the image's health check, and stops it with SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor import __version__
from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import HealthyConsumer, ProducerLoad, librdkafka_logger
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.net import free_port, http, wait_for
from tests.harness.tools import ROOT, require

# Building the image and running Spark each keep both cores busy for a minute: they take
# turns on one worker (xdist group "cpu") rather than starve the time-judged tests together.
pytestmark = [pytest.mark.kafka, pytest.mark.image, pytest.mark.slow(270),
              pytest.mark.xdist_group("cpu")]

#: Bump the suffix when the base's recipe changes: the tag is the cache key.
BASE = "localhost/kafka-monitor-base:bookworm-1"
IMAGE = f"localhost/kafka-monitor:{__version__}-test"
USER = "65532:65532"


def buildah(*args: str, timeout: float = 120, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require("buildah"), "--storage-driver", "vfs", *args],
                          capture_output=True, text=True, timeout=timeout, check=False, **kwargs)


def debian_mirror() -> str:
    """The machine's Debian mirror (deb822 sources first, then sources.list)."""
    deb822 = Path("/etc/apt/sources.list.d/debian.sources")
    if deb822.is_file():
        match = re.search(r"^URIs:\s*(\S+)", deb822.read_text(), re.M)
        if match:
            return match.group(1)
    legacy = Path("/etc/apt/sources.list")
    if legacy.is_file():
        match = re.search(r"^deb\s+(\S+)\s+\S+\s+main", legacy.read_text(), re.M)
        if match:
            return match.group(1)
    return "http://deb.debian.org/debian"


def make_base(work: Path) -> None:
    """A minimal Debian bookworm with python3 and venv (what the official slim image has)."""
    podman = require("podman")
    rootfs = work / "rootfs"
    subprocess.run(
        [require("debootstrap"), "--variant=minbase",
         "--include=python3,python3-venv,ca-certificates", "bookworm", str(rootfs),
         debian_mirror()],
        check=True, capture_output=True, timeout=900,
    )
    extra = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    for cert in extra:
        shutil.copy(cert, rootfs / "usr/local/share/ca-certificates" / cert.name)
    if extra:
        subprocess.run(["chroot", str(rootfs), "update-ca-certificates"], check=True,
                       capture_output=True, timeout=120)
    # pip trusts its own bundle, not the system's, unless told.
    (rootfs / "etc/pip.conf").write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
    for leftover in [*(rootfs / "var/cache/apt/archives").glob("*.deb"),
                     *(rootfs / "var/lib/apt/lists").glob("*_*")]:
        leftover.unlink()
    tar = work / "base.tar"
    subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tar), "."], check=True, timeout=300)
    # From a file: an import streamed from a pipe gave an image without a working /bin/sh.
    subprocess.run([podman, "--storage-driver", "vfs", "import", str(tar), BASE],
                   check=True, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The image built from the repository's Dockerfile; yields its Docker config."""
    if buildah("inspect", "--type", "image", BASE).returncode != 0:
        make_base(tmp_path_factory.mktemp("image-base"))
    log = tmp_path_factory.mktemp("image") / "build.log"
    built = buildah(
        "bud", "--isolation", "chroot", "--format", "docker", "--build-arg", f"BASE={BASE}",
        "--build-arg", f"VERSION={__version__}", "-t", IMAGE, str(ROOT), timeout=1800,
    )
    log.write_text(built.stdout + built.stderr)
    assert built.returncode == 0, (built.stdout + built.stderr)[-4000:]
    inspected = buildah("inspect", "--type", "image", IMAGE)
    assert inspected.returncode == 0, inspected.stderr
    yield json.loads(inspected.stdout)["Docker"]["config"]
    buildah("rmi", IMAGE)


def test_the_image_is_labelled_unprivileged_and_health_checked(image: dict[str, Any]) -> None:
    assert image["User"] == USER
    assert image["Labels"]["org.opencontainers.image.version"] == __version__
    assert image["Entrypoint"] + image["Cmd"] == [
        "kafka-monitor", "run", "--config", "/etc/kafka-monitor/config.yaml"]
    assert image["Healthcheck"]["Test"] == [
        "CMD", "kafka-monitor", "healthcheck", "--config", "/etc/kafka-monitor/config.yaml"]
    assert "PYTHONUNBUFFERED=1" in image["Env"]


@contextlib.contextmanager
def container() -> Iterator[str]:
    made = buildah("from", IMAGE)
    assert made.returncode == 0, made.stderr
    name = made.stdout.strip()
    try:
        yield name
    finally:
        buildah("rm", name)


def run_in(name: str, command: list[str], etc: Path, *volumes: str) -> list[str]:
    """The ``buildah run`` command line for ``command`` in the container, with the host's
    network and the configuration directory mounted where the image expects it."""
    mounts = [arg for v in (f"{etc}:/etc/kafka-monitor:ro", *volumes) for arg in ("-v", v)]
    return [require("buildah"), "--storage-driver", "vfs", "run", "--isolation", "chroot",
            "--network", "host", *mounts, name, "--", *command]


def uids_of(session: int) -> set[str]:
    """Real uids of the processes in ``session`` running the service (the supervisor, the
    service, the JMX JVM)."""
    uids = set()
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, IndexError):
            if os.getsid(int(proc.name)) != session:
                continue
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if b"buildah" in argv[0] or b"monitor" not in b" ".join(argv):
                continue  # buildah itself runs as root, outside the container
            status = (proc / "status").read_text()
            uids.add(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]
    return uids


def entrypoint_pid(session: int) -> int:
    """The image's entrypoint process (``kafka-monitor run``, the supervisor) in ``session``."""
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if os.getsid(int(proc.name)) != session:
                continue
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            # python3 .../bin/kafka-monitor run (not buildah-chroot-exec, which runs it)
            if (len(argv) > 2 and Path(argv[0].decode()).name.startswith("python")
                    and argv[1].endswith(b"/kafka-monitor") and argv[2] == b"run"):
                return int(proc.name)
    raise LookupError("no kafka-monitor run process")


def test_the_image_monitors_the_real_broker(
    image: dict[str, Any], kafka: LocalKafka, tmp_path: Path
) -> None:
    prefix = make_unique_name("image")
    topic, group = f"{prefix}-orders", f"{prefix}-healthy"
    kafka.create_topic(topic, partitions=2)
    port = free_port()
    broker = kafka.brokers[0]
    etc = tmp_path / "etc"
    etc.mkdir(mode=0o755)
    etc.chmod(0o755)
    config = etc / "config.yaml"
    config.write_text(yaml.safe_dump({
        "clusters": [{
            "name": "local",
            "bootstrap_servers": kafka.bootstrap_servers.split(","),
            "broker_version_fallback": "0.9.0.1",
            "groups": {"allow": [f"^{prefix}"]},
            "jmx": [{"broker_id": broker.id, "host": "127.0.0.1", "port": broker.jmx_port}],
        }],
        "http": {"host": "127.0.0.1", "port": port},
    }))
    config.chmod(0o644)  # read by the image's user
    base = f"http://127.0.0.1:{port}"
    cfg: dict[str, Any] = {**kafka.client_config(), "logger": librdkafka_logger}
    log_path = tmp_path / "container.log"

    with container() as name, log_path.open("wb") as log, \
            ProducerLoad(cfg, topic, rate=20), HealthyConsumer(cfg, topic, group):
        # As the Helm chart runs it, the root file system read-only: at least the cache where
        # the image keeps the JMX launcher (a bind of its own directory, read-only).
        root = Path(buildah("mount", name).stdout.strip())
        cache = "/opt/kafka-monitor/cache"
        read_only_cache = f"{root}{cache}:{cache}:ro"
        proc = subprocess.Popen(
            run_in(name, image["Entrypoint"] + image["Cmd"], etc, read_only_cache),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(lambda: http("GET", f"{base}/ready")[0] == 200, 180, "/ready from the image")
            # Non-root inside: every process of the service runs as the image's user.
            assert uids_of(proc.pid) == {"65532"}

            def ok() -> dict[str, Any] | None:
                # Judged on its offsets: a group known by its members alone, before its first
                # commit was read, is OK with no partitions (nothing to judge yet).
                code, body = http("GET", f"{base}/v3/kafka/local/consumer/{group}/status")
                judged = code == 200 and body["status"]["partition_count"] > 0
                return body if judged and body["status"]["status"] == "OK" else None

            body = wait_for(ok, 120, f"{group} OK from the image")
            assert body["status"]["partition_count"] == 2
            code, lag = http("GET", f"{base}/v3/kafka/local/consumer/{group}/lag")
            assert code == 200 and {p["topic"] for p in lag["status"]["partitions"]} == {topic}

            def jmx_up() -> bool:
                with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
                    text = response.read().decode()
                return f'kafka_monitor_broker_jmx_up{{broker="{broker.id}",cluster="local"}} 1.0' \
                    in text

            wait_for(jmx_up, 120, "JMX read by the image's JVM")
            # The JVM's class-data archive went to the temporary directory instead.
            spares = wait_for(lambda: list((root / "tmp").glob("kafka-monitor-jmxmulti-*.jsa")),
                              60, "the class-data archive kept in /tmp")
            assert spares and not list((root / cache.lstrip("/")).glob("*.jsa"))

            check = subprocess.run(run_in(name, image["Healthcheck"]["Test"][1:], etc,
                                          read_only_cache),
                                   capture_output=True, text=True, timeout=120, check=False)
            assert check.returncode == 0, check.stdout + check.stderr
            assert check.stdout.strip() == f"http://127.0.0.1:{port}/healthz: 200"
        finally:
            # As a container runtime stops it: SIGTERM to the entrypoint's process only.
            with contextlib.suppress(ProcessLookupError, LookupError):
                os.kill(entrypoint_pid(proc.pid), signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    lines = [json.loads(line) for line in log_path.read_text().splitlines()
             if line.startswith("{")]
    messages = [line["msg"] for line in lines]
    assert "service started" in messages and "service stopped" in messages, \
        log_path.read_text()[-3000:]
    assert not [line for line in lines if "JMX: one jmxquery JVM" in line["msg"]], \
        "the launcher compiled into the image was not used"
