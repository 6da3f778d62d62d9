"""The one-JVM-per-round JMX launcher (``JmxMulti.java``): how it is built, started and read.

Starting a JVM is the whole cost of a jmxquery call. One JVM per broker made a round on 3
brokers cost 2.6-2.9x a single one-MBean call on a 2-core machine, while batching all MBeans
into a call cost almost nothing (``bench/bench_jmx.py``). The launcher runs jmxquery's own
query classes for every broker of a cluster in one JVM, one thread per broker, with a deadline
inside the JVM so a hung broker is reported failing while the others' answers still come out.

It is compiled with ``javac`` once, at ``make setup`` (``python -m
monitor.ingest.jmx_launcher --build``) or at first use, into the per-user cache that also
holds the class-data-sharing archives, keyed by the source and jmxquery's jar. It is packed as
a jar because class-data sharing only archives classes loaded from jars. Without ``javac`` (a
JRE-only machine) :meth:`Launcher.jar` says why, once, and the collector falls back to one
jmxquery JVM per broker.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from jmxquery import JAR_PATH

from monitor.config import JmxEndpoint

SOURCE = Path(__file__).with_name("JmxMulti.java")
MAIN_CLASS = "JmxMulti"
# The oldest Java the JVM flags we pass work on; javac from a newer JDK must not emit classes a
# Java 17 runtime cannot load.
JAVA_RELEASE = "11"

_log = logging.getLogger("monitor.collectors.jmx")


def cache_dir() -> Path:
    """Per-user cache of compiled launchers and class-data-sharing archives."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kafka-monitor"


class LauncherUnavailable(RuntimeError):
    """The launcher cannot be built or run here; the reason is the message."""


class Launcher:
    """The compiled launcher jar, built at most once per process (thread-safe). A failure is
    remembered and logged once, so a JRE-only machine logs its reason once, not every round."""

    def __init__(self, directory: Path | None = None, javac: str | None = None) -> None:
        self.directory = directory or cache_dir()
        self.javac = javac if javac is not None else shutil.which("javac")
        self._lock = threading.Lock()
        self._jar: Path | None = None
        self._error: str | None = None

    @property
    def path(self) -> Path:
        """Where the jar for this source and this jmxquery jar lives."""
        digest = hashlib.sha256(JAVA_RELEASE.encode())
        for part in (SOURCE, Path(JAR_PATH)):
            digest.update(part.read_bytes())
        return self.directory / f"jmxmulti-{digest.hexdigest()[:16]}.jar"

    def jar(self) -> Path:
        """The launcher jar, compiling it when it is not cached yet; raises
        :class:`LauncherUnavailable` (now and on every later call) when it cannot be had."""
        with self._lock:
            if self._jar is not None:
                return self._jar
            if self._error is None:
                try:
                    self._jar = self._build()
                    return self._jar
                except (LauncherUnavailable, OSError, subprocess.SubprocessError) as exc:
                    self._fail(str(exc))
            raise LauncherUnavailable(self._error)

    def disable(self, reason: str) -> None:
        """Stops using a launcher that was built but does not run (logged once)."""
        with self._lock:
            self._jar = None
            if self._error is None:
                self._fail(reason)

    def _fail(self, reason: str) -> None:
        self._error = reason
        _log.warning("JMX: one jmxquery JVM per broker instead of one per cluster: %s", reason)

    def _build(self) -> Path:
        try:
            target = self.path
        except OSError as exc:
            raise LauncherUnavailable(f"launcher source unreadable: {exc}") from None
        if target.is_file():
            return target
        if not self.javac:
            raise LauncherUnavailable(
                "no 'javac' on PATH to compile the JMX launcher "
                "(install a JDK, e.g. openjdk-17-jdk-headless)")
        self.directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.directory, prefix="jmxmulti-build-") as tmp:
            classes = Path(tmp) / "classes"
            proc = subprocess.run(
                [self.javac, "--release", JAVA_RELEASE, "-nowarn", "-encoding", "UTF-8",
                 "-cp", JAR_PATH, "-d", str(classes), str(SOURCE)],
                capture_output=True, text=True, timeout=120, check=False,
            )
            if proc.returncode != 0:
                raise LauncherUnavailable(
                    f"javac failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-500:]}")
            jar = Path(tmp) / "launcher.jar"
            with zipfile.ZipFile(jar, "w") as zf:
                for cls in sorted(classes.rglob("*.class")):
                    zf.write(cls, cls.relative_to(classes).as_posix())
            jar.replace(target)  # atomic: a concurrent build by another process is harmless
        return target


_default: Launcher | None = None
_default_lock = threading.Lock()


def default_launcher() -> Launcher:
    """The process-wide launcher, so every cluster's collector shares one build and one log."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Launcher()
        return _default


def batch(queries: Iterable[str]) -> str:
    """jmxquery's ``-q`` syntax: queries joined by ';', duplicates dropped."""
    return ";".join(dict.fromkeys(queries)) + ";"


def command(java: str, jar: Path, jvm_flags: Sequence[str]) -> list[str]:
    """The launcher's command line (no endpoints or credentials: those go on stdin)."""
    return [java, *jvm_flags, "-cp", os.pathsep.join([str(jar), JAR_PATH]), MAIN_CLASS]


def request(endpoints: Sequence[JmxEndpoint], query: str, deadline: float) -> str:
    """The launcher's stdin: the per-broker deadline (unix seconds), then one line per broker."""

    def b64(text: str | None) -> str:
        return base64.b64encode(text.encode()).decode() if text else ""

    lines = [str(int(deadline * 1000))]
    for e in endpoints:
        password = e.password.get_secret_value() if e.password else None
        fields = [str(e.broker_id), e.service_url, b64(e.username), b64(password), query]
        if any(c in f for f in fields for c in "\t\r\n"):
            raise ValueError(f"broker {e.broker_id}: tab or newline in a JMX URL or query")
        lines.append("\t".join(fields))
    return "\n".join(lines) + "\n"


def parse_output(stdout: str) -> dict[int, tuple[float, str]]:
    """``{broker id: (unix time answered, jmxquery JSON)}`` from the launcher's stdout; lines
    that are not answers (a JVM warning) are skipped."""
    answers: dict[int, tuple[float, str]] = {}
    for line in stdout.splitlines():
        parts = line.split("\t", 2)
        if len(parts) == 3 and parts[0].lstrip("-").isdigit() and parts[1].isdigit():
            answers[int(parts[0])] = (int(parts[1]) / 1000.0, parts[2])
    return answers


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the one-JVM-per-round JMX launcher.")
    parser.add_argument("--build", action="store_true", help="compile it into the cache now")
    args = parser.parse_args(argv)
    if not args.build:
        parser.print_help()
        return 2
    try:
        print(Launcher().jar())
    except LauncherUnavailable as exc:
        print(f"JMX launcher unavailable: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
