"""Broker JMX scraping with jmxquery: every configured MBean of every broker, on a schedule.

jmxquery talks JMX through a small Java program, so every call starts a JVM (~0.1-0.3 s of
CPU). Hence one call per broker per scrape with all MBeans batched (wildcards allowed), the
brokers in parallel threads, and a hard timeout per call after which the JVM is killed: a
broker whose JMX hangs or refuses costs the others nothing.

We run jmxquery's jar ourselves (its query syntax and JSON output, through
``jmxquery.JAR_PATH``) instead of ``JMXConnection.query()``, because that call turns a timeout
into an empty result (indistinguishable from "no MBean matched") and drops the reason a
connection failed. The JVM uptime is asked for in every call, so an answer without it is a
failure too.

Credentials: the jar takes ``-u``/``-p`` on its command line (visible to local users in the
process list while the ~0.2 s call runs). TLS: a JMX connector exported over TLS
(``com.sun.management.jmxremote.ssl=true``) hands the client its TLS socket factory in the RMI
stub, so it works with ``tls: true`` as long as the JVM trusts the broker's certificate (the
JDK's default trust store, or ``JAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore=...`` in the
service's environment, which the query JVMs inherit). An RMI registry over TLS
(``...registry.ssl=true``) cannot be reached by the jar.

JVM start-up is the whole cost of a call, so the query JVMs run with start-up-friendly flags
(C1 compiler only, serial GC, small heap) and an application class-data-sharing archive of the
classes a query loads, written once by the first successful call
(``$XDG_CACHE_HOME/kafka-monitor/``, keyed by the Java runtime and the jar). Measured here this
cuts a call's CPU time by ~40 %, which matters when several brokers are scraped at once on few
cores (``bench/bench_jmx.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from jmxquery import JAR_PATH

from monitor.collectors.base import Collector
from monitor.config import ClusterConfig, JmxEndpoint
from monitor.jmx_metrics import DEFAULT_MBEANS, UPTIME, BrokerJmx, JmxScrape, MBeanAttribute
from monitor.store import Store


class JmxError(RuntimeError):
    """A broker's JMX could not be read this round."""


# Start-up-friendly JVM: no log lines on stdout (it carries the JSON), C1 only, serial GC.
JVM_FLAGS = ("-Xlog:disable", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData",
             "-Xmx32m", "-Xms8m", "-XX:CICompilerCount=1", "-XX:ReservedCodeCacheSize=16m")


class ClassDataArchive:
    """The class-data-sharing archive for jmxquery JVMs: ``flags()`` to use it once it exists,
    or to write it (one call at a time) when it does not. Any failure just means no archive:
    ``-Xshare:auto`` ignores an unusable one."""

    def __init__(self, java: str, directory: Path | None = None) -> None:
        base = directory or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        real = Path(java).resolve()
        try:
            stamp = f"{real}:{real.stat().st_mtime_ns}:{Path(JAR_PATH).stat().st_size}"
        except OSError:
            stamp = str(real)
        key = hashlib.sha256(stamp.encode()).hexdigest()[:16]
        self.path = base / "kafka-monitor" / f"jmxquery-{key}.jsa"
        self._lock = threading.Lock()
        self._writing = False

    def flags(self) -> tuple[list[str], Path | None]:
        """JVM flags, and the temporary file to publish with :meth:`written` after a
        successful call (None when not writing)."""
        if self.path.is_file():
            return ["-Xshare:auto", f"-XX:SharedArchiveFile={self.path}"], None
        with self._lock:
            if self._writing:
                return [], None
            self._writing = True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return [], None  # no writable cache: run without (and never retry)
        tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        return [f"-XX:ArchiveClassesAtExit={tmp}"], tmp

    def written(self, tmp: Path | None, ok: bool) -> None:
        if tmp is None:
            return
        try:
            if ok and tmp.is_file():
                tmp.replace(self.path)
            else:
                tmp.unlink(missing_ok=True)
        except OSError:
            pass
        with self._lock:
            self._writing = False


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
    batch = dict.fromkeys([UPTIME.query, *queries])
    return [*cmd, "-q", ";".join(batch) + ";"]


def parse_answer(output: str) -> dict[MBeanAttribute, float]:
    """Numeric attribute values from jmxquery's JSON; raises :class:`JmxError` with the jar's
    own message when it reports an error (connection refused, authentication failed ...)."""
    try:
        answer: Any = json.loads(output)
    except json.JSONDecodeError:
        raise JmxError(f"unreadable jmxquery output: {output[:200]!r}") from None
    if isinstance(answer, dict):
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
    now = time.time()
    return BrokerJmx(
        broker_id=endpoint.broker_id,
        observed_at=now,
        duration=time.monotonic() - started,
        values=values,
        error=error,
        last_success=now if error is None else last_success,
    )


class JmxCollector(Collector):
    """Scrapes every JMX endpoint of one cluster per round, in parallel."""

    kind = "jmx"

    def __init__(
        self,
        cluster: ClusterConfig,
        interval: float,
        timeout: float,
        store: Store,
        mbeans: Sequence[str] = DEFAULT_MBEANS,
    ) -> None:
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
        self.last_scrape: JmxScrape | None = None

    def scrape(self) -> JmxScrape:
        """One parallel round over every broker; bounded by the timeout (plus JVM teardown)."""
        java = shutil.which("java")
        if java is None:
            raise JmxError("no 'java' on PATH: jmxquery needs a Java runtime")
        if self._archive is None:
            self._archive = ClassDataArchive(java)
        futures = [
            self._pool.submit(
                scrape_broker, e, self._queries, self._timeout, java,
                self._last_success.get(e.broker_id), self._archive,
            )
            for e in self._endpoints
        ]
        brokers = {b.broker_id: b for b in (f.result() for f in futures)}
        for broker_id, broker in brokers.items():
            self._last_success[broker_id] = broker.last_success
        return JmxScrape(self.cluster, time.time(), brokers, self._queries)

    def collect(self) -> None:
        scrape = self.last_scrape = self.scrape()
        self._store.put_broker_jmx(scrape)
        failed = {b.broker_id: b.error for b in scrape.brokers.values() if not b.ok}
        if len(failed) == len(scrape.brokers):
            raise JmxError(f"no broker answered: {failed}")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
