"""Broker JMX scraping with jmxquery: every configured MBean of every broker, on a schedule.

jmxquery talks JMX through a small Java program, so every call starts a JVM (~0.1-0.3 s of
CPU), and on few cores several JVMs starting at once queue for the CPU. Hence one JVM per
round for all brokers of a cluster (``JmxMulti.java``, see :mod:`.jmx_launcher`): jmxquery's
query for each broker on its own thread, all MBeans batched (wildcards allowed), a deadline per
broker inside the JVM so a broker whose JMX hangs or refuses is reported failing while the
others are read, and a hard kill of the JVM at the collector's timeout as the last resort.
Where the launcher cannot be built (no ``javac``) we fall back to one jmxquery JVM per broker,
in parallel threads, each killed at the timeout.

We run jmxquery's Java classes ourselves (its query syntax and JSON output, through
``jmxquery.JAR_PATH``) instead of ``JMXConnection.query()``, because that call turns a timeout
into an empty result (indistinguishable from "no MBean matched") and drops the reason a
connection failed. The JVM uptime is asked for in every call, so an answer without it is a
failure too.

Credentials: the launcher reads them on stdin; the per-broker fallback passes ``-u``/``-p`` on
the jar's command line (visible to local users in the process list while the ~0.2 s call runs).
TLS: a JMX connector exported over TLS (``com.sun.management.jmxremote.ssl=true``) hands the
client its TLS socket factory in the RMI stub, so it works with ``tls: true`` as long as the
JVM trusts the broker's certificate (the JDK's default trust store, or
``JAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore=...`` in the service's environment, which the
query JVMs inherit). An RMI registry over TLS (``...registry.ssl=true``) cannot be reached.

JVM start-up is the whole cost of a call, so the query JVMs run with start-up-friendly flags
(C1 compiler only, serial GC, small heap) and an application class-data-sharing archive of the
classes a query loads, written once by the first successful call (in :func:`.cache_dir`,
keyed by the Java runtime and the jars). Measured here this cuts a call's CPU time by ~40 %.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from jmxquery import JAR_PATH

from monitor.config import ClusterConfig, JmxEndpoint
from monitor.ingest import jmx_launcher
from monitor.ingest.base import Collector
from monitor.ingest.jmx_launcher import Launcher, LauncherUnavailable, cache_dir
from monitor.model.jmx_metrics import DEFAULT_MBEANS, UPTIME, BrokerJmx, JmxScrape, MBeanAttribute
from monitor.store.store import Store


class JmxError(RuntimeError):
    """A broker's JMX could not be read this round."""


class JmxTimeout(JmxError):
    """The launcher's deadline passed before the broker answered."""


# Start-up-friendly JVM: no log lines on stdout (it carries the JSON), C1 only, serial GC.
JVM_FLAGS = ("-Xlog:disable", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData",
             "-Xmx32m", "-Xms8m", "-XX:CICompilerCount=1", "-XX:ReservedCodeCacheSize=16m")


class ClassDataArchive:
    """The class-data-sharing archive for query JVMs of one class path: ``flags()`` to use it
    once it exists, or to write it (one call at a time) when it does not. Any failure just
    means no archive: ``-Xshare:auto`` ignores an unusable one.

    A JVM asked to write an archive where it cannot (a read-only root file system, as the Helm
    chart runs the image) fails the whole call, so the archive is written in the temporary
    directory (writable there: the chart mounts one) only after checking that a file can be
    made, then moved into the cache; where the cache is read-only it stays in the temporary
    directory and is used from there."""

    def __init__(
        self,
        java: str,
        directory: Path | None = None,
        name: str = "jmxquery",
        classpath: Sequence[str | Path] = (JAR_PATH,),
    ) -> None:
        base = directory / "kafka-monitor" if directory else cache_dir()
        real = Path(java).resolve()
        try:
            stamp = ":".join([f"{real}:{real.stat().st_mtime_ns}",
                              *(f"{p}:{Path(p).stat().st_size}" for p in classpath)])
        except OSError:
            stamp = str(real)
        key = hashlib.sha256(stamp.encode()).hexdigest()[:16]
        self.path = base / f"{name}-{key}.jsa"
        self._spare = Path(tempfile.gettempdir()) / f"kafka-monitor-{self.path.name}"
        self._lock = threading.Lock()
        self._writing = False
        self._unwritable = False

    def flags(self) -> tuple[list[str], Path | None]:
        """JVM flags, and the temporary file to publish with :meth:`written` after a
        successful call (None when not writing)."""
        usable = self._usable()
        if usable is not None:
            return ["-Xshare:auto", f"-XX:SharedArchiveFile={usable}"], None
        with self._lock:
            if self._writing or self._unwritable:
                return [], None
            self._writing = True
        tmp = self._spare.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        try:  # the JVM would fail the call where it cannot create the file
            tmp.touch()
            tmp.unlink()
        except OSError:
            with self._lock:
                self._writing, self._unwritable = False, True
            return [], None
        return [f"-XX:ArchiveClassesAtExit={tmp}"], tmp

    def _usable(self) -> Path | None:
        """The archive to use: the cache's, else the spare where the cache is read-only."""
        if self.path.is_file():
            return self.path
        if self._spare.is_file() and not os.access(self.path.parent, os.W_OK):
            return self._spare
        return None

    def written(self, tmp: Path | None, ok: bool) -> None:
        if tmp is None:
            return
        try:
            if ok and tmp.is_file():
                self._publish(tmp)
            else:
                tmp.unlink(missing_ok=True)
        except OSError:
            pass
        with self._lock:
            self._writing = False

    def _publish(self, tmp: Path) -> None:
        """Into the cache (atomically: a copy beside it, then a rename), else kept as the
        spare in the temporary directory."""
        partial = self.path.with_suffix(f".{os.getpid()}.partial")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tmp, partial)
            partial.replace(self.path)
            tmp.unlink()
        except OSError:
            with contextlib.suppress(OSError):  # a read-only file system refuses even this
                partial.unlink(missing_ok=True)
            tmp.replace(self._spare)


def query_command(
    endpoint: JmxEndpoint,
    queries: Sequence[str],
    java: str = "java",
    jvm_flags: Sequence[str] = (),
) -> list[str]:
    """The jmxquery command line reading ``queries`` (plus the JVM uptime) in one call."""
    cmd = [java, *JVM_FLAGS, *jvm_flags, "-jar", JAR_PATH,
           "-url", endpoint.service_url, "-json"]
    if endpoint.username:
        password = endpoint.password.get_secret_value() if endpoint.password else ""
        cmd += ["-u", endpoint.username, "-p", password]
    return [*cmd, "-q", jmx_launcher.batch([UPTIME.query, *queries])]


def parse_answer(output: str) -> dict[MBeanAttribute, float]:
    """Numeric attribute values from jmxquery's JSON; raises :class:`JmxError` with the jar's
    own message when it reports an error (connection refused, authentication failed ...)."""
    try:
        answer: Any = json.loads(output)
    except json.JSONDecodeError:
        raise JmxError(f"unreadable jmxquery output: {output[:200]!r}") from None
    if isinstance(answer, dict):
        if answer.get("error") == "timeout":
            raise JmxTimeout(str(answer.get("message", "timeout")))
        raise JmxError(f"{answer.get('error', 'error')}: {answer.get('message', answer)}")
    values: dict[MBeanAttribute, float] = {}
    for item in answer:
        value = item.get("value")
        # Booleans and strings (RateUnit, EventType) are not measurements.
        if isinstance(value, int | float) and not isinstance(value, bool) and (
            "attributeKey" not in item
        ):
            values[(item["mBeanName"], item["attribute"])] = float(value)
    if (UPTIME.mbean, UPTIME.attribute) not in values:
        raise JmxError("the JVM did not answer (no java.lang:type=Runtime/Uptime)")
    return values


def scrape_broker(
    endpoint: JmxEndpoint,
    queries: Sequence[str],
    timeout: float,
    java: str = "java",
    last_success: float | None = None,
    archive: ClassDataArchive | None = None,
) -> BrokerJmx:
    """One jmxquery call for one broker; never raises: a failure is part of the answer."""
    started = time.monotonic()
    values: dict[MBeanAttribute, float] = {}
    error: str | None = None
    flags, archive_tmp = archive.flags() if archive is not None else ([], None)
    try:
        # subprocess.run kills the JVM when the timeout expires.
        proc = subprocess.run(
            query_command(endpoint, queries, java, flags),
            capture_output=True, text=True, timeout=timeout, check=False,
        )
        if proc.returncode != 0 and not proc.stdout.strip().startswith("{"):
            raise JmxError(
                f"jmxquery exited with {proc.returncode}: "
                f"{(proc.stderr or proc.stdout).strip()[-300:]}"
            )
        values = parse_answer(proc.stdout)
    except subprocess.TimeoutExpired:
        error = f"timed out after {timeout:g}s"
    except (JmxError, OSError) as exc:
        error = str(exc)
    if archive is not None:
        archive.written(archive_tmp, error is None)
    return _broker(endpoint.broker_id, time.time(), time.monotonic() - started, values, error,
                   last_success)


def _broker(
    broker_id: int,
    now: float,
    duration: float,
    values: dict[MBeanAttribute, float],
    error: str | None,
    last_success: float | None,
) -> BrokerJmx:
    return BrokerJmx(
        broker_id=broker_id,
        observed_at=now,
        duration=duration,
        values=values if error is None else {},
        error=error,
        last_success=now if error is None else last_success,
    )


def broker_deadline(timeout: float) -> float:
    """Seconds after launch at which the launcher stops waiting for a broker: early enough
    that the JVM prints the others' answers and exits before the hard kill at ``timeout``
    (a JVM exiting with a thread blocked in a socket read waits ~0.3 s for it, measured)."""
    return timeout - min(1.0, timeout / 4)


class LauncherFailed(JmxError):
    """The launcher JVM ran but answered for no broker (not a timeout): it is unusable."""


def scrape_cluster(
    endpoints: Sequence[JmxEndpoint],
    queries: Sequence[str],
    timeout: float,
    java: str,
    jar: Path,
    last_success: Mapping[int, float | None],
    archive: ClassDataArchive | None = None,
) -> dict[int, BrokerJmx]:
    """Every broker in one launcher JVM; a broker's failure is part of the answer. Raises
    :class:`LauncherFailed` only when the launcher itself does not work."""
    started_at = time.time()
    per_broker = broker_deadline(timeout)
    flags, archive_tmp = archive.flags() if archive is not None else ([], None)
    stdin = jmx_launcher.request(
        endpoints, jmx_launcher.batch([UPTIME.query, *queries]), started_at + per_broker)
    answers: dict[int, tuple[float, str]] = {}
    failure: str | None = None
    broken = False
    try:
        proc = subprocess.run(
            jmx_launcher.command(java, jar, [*JVM_FLAGS, *flags]),
            input=stdin, capture_output=True, text=True, timeout=timeout, check=False,
        )
        answers = jmx_launcher.parse_output(proc.stdout)
        if not answers:
            broken = True
            failure = (f"JMX launcher exited with {proc.returncode}: "
                       f"{(proc.stderr or proc.stdout).strip()[-300:]}")
    except subprocess.TimeoutExpired as exc:  # the JVM was killed: keep what it printed
        out = exc.stdout or b""
        answers = jmx_launcher.parse_output(out.decode() if isinstance(out, bytes) else out)
        failure = f"timed out after {timeout:g}s"
    except OSError as exc:
        failure = str(exc)
    if archive is not None:
        archive.written(archive_tmp, failure is None)
    if broken:
        raise LauncherFailed(failure)
    brokers = {}
    for e in endpoints:
        values: dict[MBeanAttribute, float] = {}
        error: str | None = failure or "no answer from the JMX launcher"
        answered_at = time.time()
        if e.broker_id in answers:
            answered_at, output = answers[e.broker_id]
            try:
                values, error = parse_answer(output), None
            except JmxTimeout:
                error = f"timed out after {per_broker:g}s"
            except JmxError as exc:
                error = str(exc)
        brokers[e.broker_id] = _broker(
            e.broker_id, answered_at, max(answered_at - started_at, 0.0), values, error,
            last_success.get(e.broker_id))
    return brokers


class JmxCollector(Collector):
    """Scrapes every JMX endpoint of one cluster per round, in parallel."""

    kind = "jmx"
    kafka_client = False  # JMX over RMI: Kafka clients' connection errors do not explain it

    def __init__(
        self,
        cluster: ClusterConfig,
        interval: float,
        timeout: float,
        store: Store,
        mbeans: Sequence[str] = DEFAULT_MBEANS,
        launcher: Launcher | None = None,
    ) -> None:
        """``launcher``: the one-JVM-per-round launcher (default: the process-wide one)."""
        super().__init__(cluster.name, interval)
        if not cluster.jmx:
            raise ValueError(f"cluster {cluster.name}: no jmx endpoints configured")
        self._endpoints = list(cluster.jmx)
        self._timeout = timeout
        self._store = store
        self._queries = tuple(dict.fromkeys(mbeans))
        self._pool = ThreadPoolExecutor(len(self._endpoints), thread_name_prefix=self.name)
        self._last_success: dict[int, float | None] = {}
        self._archive: ClassDataArchive | None = None
        self._launcher = launcher or jmx_launcher.default_launcher()
        self._launcher_archive: ClassDataArchive | None = None
        self.last_scrape: JmxScrape | None = None

    def scrape(self) -> JmxScrape:
        """One round over every broker, bounded by the timeout (plus JVM teardown): in one
        launcher JVM when it can be had, else one jmxquery JVM per broker in parallel."""
        java = shutil.which("java")
        if java is None:
            raise JmxError("no 'java' on PATH: jmxquery needs a Java runtime")
        brokers = self._scrape_in_one_jvm(java)
        if brokers is None:
            brokers = self._scrape_per_broker(java)
        for broker_id, broker in brokers.items():
            self._last_success[broker_id] = broker.last_success
        return JmxScrape(self.cluster, time.time(), brokers, self._queries)

    def _scrape_in_one_jvm(self, java: str) -> dict[int, BrokerJmx] | None:
        """None when the launcher is unavailable (the reason is logged once)."""
        try:
            jar = self._launcher.jar()
        except LauncherUnavailable:
            return None
        if self._launcher_archive is None:
            self._launcher_archive = ClassDataArchive(java, name="jmxmulti",
                                                      classpath=(jar, JAR_PATH))
        try:
            return scrape_cluster(self._endpoints, self._queries, self._timeout, java, jar,
                                  self._last_success, self._launcher_archive)
        except LauncherFailed as exc:
            self._launcher.disable(str(exc))
            return None

    def _scrape_per_broker(self, java: str) -> dict[int, BrokerJmx]:
        if self._archive is None:
            self._archive = ClassDataArchive(java)
        futures = [
            self._pool.submit(
                scrape_broker, e, self._queries, self._timeout, java,
                self._last_success.get(e.broker_id), self._archive,
            )
            for e in self._endpoints
        ]
        return {b.broker_id: b for b in (f.result() for f in futures)}

    def collect(self) -> None:
        scrape = self.last_scrape = self.scrape()
        self._store.put_broker_jmx(scrape)
        failed = {b.broker_id: b.error for b in scrape.brokers.values() if not b.ok}
        if len(failed) == len(scrape.brokers):
            raise JmxError(f"no broker answered: {failed}")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
