"""The JMX collector against a real Kafka 0.9 broker's JMX agent, through real JVMs running
jmxquery (the one-JVM-per-round launcher, and the one-JVM-per-broker fallback): what 0.9
exposes, batching, and failures (refused, hanging) that cost the other brokers nothing."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.config import ClusterConfig, JmxEndpoint
from monitor.dev.localkafka import LocalKafka
from monitor.evaluate.cluster_health import assess
from monitor.ingest import jmx_launcher
from monitor.ingest.jmx import (
    ClassDataArchive,
    JmxCollector,
    broker_deadline,
    query_command,
    scrape_broker,
    scrape_cluster,
)
from monitor.ingest.jmx_launcher import Launcher
from monitor.model.jmx_metrics import BY_NAME
from monitor.serve.metrics.health import health_metric_families
from monitor.store.store import Store

pytestmark = pytest.mark.kafka


def cluster_config(kafka: LocalKafka, extra: list[dict[str, Any]] | None = None) -> ClusterConfig:
    broker = kafka.brokers[0]
    return ClusterConfig(
        name="one",
        bootstrap_servers=kafka.bootstrap_servers.split(","),
        jmx=[{"broker_id": broker.id, "host": "127.0.0.1", "port": broker.jmx_port},
             *(extra or [])],
    )


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP port that accepts connections and never answers (a hung JMX agent)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for s in held:
            s.close()
        server.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def jvm_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], str]]:
    """Every JVM the collector starts (command line, stdin); the JVMs still run for real."""
    calls: list[tuple[list[str], str]] = []
    real_run = subprocess.run

    def counting_run(cmd: list[str], **kwargs: Any) -> Any:
        calls.append((cmd, kwargs.get("input") or ""))
        return real_run(cmd, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting_run)
    return calls


@pytest.fixture
def no_javac(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Launcher:
    """A JRE-only machine: ``java`` on PATH, no ``javac``, nothing compiled in the cache."""
    java = shutil.which("java")
    assert java is not None
    bin_dir = tmp_path / "jre-bin"
    bin_dir.mkdir()
    (bin_dir / "java").symlink_to(java)
    monkeypatch.setenv("PATH", str(bin_dir))
    return Launcher(tmp_path / "cache")


def test_one_jvm_per_round_reads_the_catalogue(
    kafka: LocalKafka, jvm_calls: list[tuple[list[str], str]]
) -> None:
    store = Store()
    collector = JmxCollector(cluster_config(kafka), 30, 20, store)
    try:
        assert collector.run_once(), collector.health.last_error
    finally:
        collector.close()
    [(cmd, stdin)] = [c for c in jvm_calls if "javac" not in Path(c[0][0]).name]
    assert cmd[-1] == jmx_launcher.MAIN_CLASS and stdin.count(";") >= 15
    broker = store.broker_health_input("one")[2].brokers[0]  # type: ignore[union-attr]
    assert broker.ok and broker.uptime_seconds and broker.uptime_seconds > 0
    get = lambda name: broker.get(BY_NAME[name])  # noqa: E731
    assert get("active_controller_count") == 1
    assert get("under_replicated_partitions") == 0 and get("offline_partitions") == 0
    assert get("partition_count") >= 4 and get("leader_count") == get("partition_count")
    # Kafka computes both idle ratios from time samples that can overlap, so an idle broker
    # reads a little over 1 now and then (1.006 and 1.000002 seen here): exported as the
    # broker says it.
    assert 0 <= get("request_handler_avg_idle_ratio") <= 1.05  # type: ignore[operator]
    assert 0 <= get("network_processor_avg_idle_ratio") <= 1.05  # type: ignore[operator]
    for name in ("bytes_in", "bytes_out", "messages_in", "isr_shrinks", "isr_expands",
                 "bytes_in_per_second", "isr_expands_per_second"):
        assert get(name) is not None, name
    # Kafka 0.9 has no UnderMinIsrPartitionCount: absent, not 0.
    assert get("under_min_isr_partitions") is None
    health = assess("one", None, jmx=store.broker_health_input("one")[2]).as_dict()
    assert health["jmx"]["0"]["absent"] == ["under_min_isr_partitions"]  # type: ignore[index]


def test_configured_wildcard_mbeans_are_exported(kafka: LocalKafka) -> None:
    store = Store()
    mbeans = ["kafka.server:type=KafkaServer,name=*",
              BY_NAME["under_replicated_partitions"].query]
    collector = JmxCollector(cluster_config(kafka), 30, 20, store, mbeans)
    try:
        scrape = collector.scrape()
    finally:
        collector.close()
    values = scrape.brokers[0].values
    # 3 RunningAsBroker, 4 RunningAsController (a lone broker is its own controller)
    assert values[("kafka.server:type=KafkaServer,name=BrokerState", "Value")] in (3, 4)
    assert values[(BY_NAME["under_replicated_partitions"].mbean, "Value")] == 0
    text = _exposition(assess("one", None, jmx=scrape))
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = families["kafka_broker_jmx_value"].samples
    assert any(
        s.labels["mbean"].endswith("name=BrokerState") and s.value in (3, 4) for s in samples
    )
    assert families["kafka_broker_under_replicated_partitions"].samples[0].labels == {
        "cluster": "one", "broker": "0"}


def _exposition(health: Any) -> str:
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()

    class One:
        def collect(self) -> Any:
            return iter(health_metric_families([health]))

    registry.register(One())  # type: ignore[arg-type]
    return generate_latest(registry).decode()


@pytest.mark.parametrize("one_jvm", [True, False], ids=["one-jvm", "jvm-per-broker"])
def test_refused_and_hung_brokers_fail_alone_within_the_timeout(
    kafka: LocalKafka, silent_port: int, one_jvm: bool, request: pytest.FixtureRequest,
    jvm_calls: list[tuple[list[str], str]],
) -> None:
    launcher = None if one_jvm else request.getfixturevalue("no_javac")
    refused = {"broker_id": 7, "host": "127.0.0.1", "port": free_port()}
    hung = {"broker_id": 8, "host": "127.0.0.1", "port": silent_port}
    timeout = 4.0
    collector = JmxCollector(cluster_config(kafka, [refused, hung]), 30, timeout, Store(),
                             launcher=launcher)
    try:
        collector.scrape()  # compiles the launcher if needed, writes the CDS archive
        jvm_calls.clear()
        started = time.monotonic()
        scrape = collector.scrape()
        elapsed = time.monotonic() - started
    finally:
        collector.close()
    assert len(jvm_calls) == (1 if one_jvm else 3)
    good, bad, slow = scrape.brokers[0], scrape.brokers[7], scrape.brokers[8]
    # The hung broker costs the others nothing: they answered long before its deadline.
    cut = broker_deadline(timeout) if one_jvm else timeout
    assert good.ok and good.duration < cut - 1.0, good
    assert good.get(BY_NAME["leader_count"]) is not None and good.last_success is not None
    assert not bad.ok and "Connection refused" in (bad.error or ""), bad.error
    assert bad.values == {} and bad.duration < cut - 1.0
    assert not slow.ok and slow.error == f"timed out after {cut:g}s"
    assert slow.values == {} and slow.last_success is None
    # One JVM: cut at its own deadline inside the JVM, before the hard kill at the timeout.
    assert elapsed < (timeout if one_jvm else timeout + 2.0), elapsed
    status = assess("one", None, jmx=scrape)
    assert {(r.code, r.broker) for r in status.reasons if r.code == "jmx_unreachable"} == {
        ("jmx_unreachable", 7), ("jmx_unreachable", 8)}


def test_every_broker_failing_fails_the_round() -> None:
    config = ClusterConfig(name="gone", bootstrap_servers=["127.0.0.1:1"],
                           jmx=[{"broker_id": 1, "host": "127.0.0.1", "port": free_port()}])
    collector = JmxCollector(config, 30, 10, Store())
    try:
        assert not collector.run_once()
    finally:
        collector.close()
    assert "no broker answered" in (collector.health.last_error or "")


def test_credentials_go_to_the_jar_and_queries_are_batched() -> None:
    endpoint = JmxEndpoint(broker_id=1, host="h", port=9999, username="u", password="s3cret")
    cmd = query_command(endpoint, ["a:b=c/Value", "a:b=c/Value", "d:e=f"])
    assert cmd[cmd.index("-u") + 1] == "u" and cmd[cmd.index("-p") + 1] == "s3cret"
    assert cmd[-1] == "java.lang:type=Runtime/Uptime;a:b=c/Value;d:e=f;"
    assert "service:jmx:rmi:///jndi/rmi://h:9999/jmxrmi" in cmd


def test_launcher_reads_credentials_on_stdin_not_argv(tmp_path: Path) -> None:
    endpoints = [JmxEndpoint(broker_id=1, host="h", port=9999, username="u", password="s3cret"),
                 JmxEndpoint(broker_id=2, host="h", port=9998)]
    cmd = jmx_launcher.command("java", tmp_path / "l.jar", ["-Xmx8m"])
    assert not any("s3cret" in part or "9999" in part for part in cmd)
    stdin = jmx_launcher.request(endpoints, "a:b=c/Value;", 1700000000.5)
    deadline, first, second = stdin.splitlines()
    assert deadline == "1700000000500"
    assert first.split("\t") == ["1", "service:jmx:rmi:///jndi/rmi://h:9999/jmxrmi", "dQ==",
                                 "czNjcmV0", "a:b=c/Value;"]
    assert second.split("\t")[2:4] == ["", ""]
    assert jmx_launcher.parse_output("warning\n2\t1700000000250\t[]\n") == {
        2: (1700000000.25, "[]")}


def test_without_javac_each_broker_gets_its_own_jvm_and_the_reason_is_logged_once(
    kafka: LocalKafka, no_javac: Launcher,
    jvm_calls: list[tuple[list[str], str]], caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "monitor.collectors.jmx")
    refused = {"broker_id": 7, "host": "127.0.0.1", "port": free_port()}
    collector = JmxCollector(cluster_config(kafka, [refused]), 30, 20, Store(),
                             launcher=no_javac)
    try:
        first, second = collector.scrape(), collector.scrape()
    finally:
        collector.close()
    assert len(jvm_calls) == 4 and all("-jar" in cmd for cmd, _ in jvm_calls)
    assert first.brokers[0].ok and second.brokers[0].get(BY_NAME["leader_count"]) is not None
    assert not second.brokers[7].ok and second.brokers[0].last_success is not None
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "no 'javac' on PATH" in warnings[0], warnings
    assert not any(no_javac.directory.glob("*.jar"))


def test_a_launcher_that_does_not_run_falls_back_in_the_same_round(
    kafka: LocalKafka, tmp_path: Path, caplog: pytest.LogCaptureFixture,
    jvm_calls: list[tuple[list[str], str]],
) -> None:
    caplog.set_level(logging.WARNING, "monitor.collectors.jmx")
    launcher = Launcher(tmp_path)
    launcher.path.write_bytes(b"not a jar")  # a cached build that cannot load JmxMulti
    collector = JmxCollector(cluster_config(kafka), 30, 20, Store(), launcher=launcher)
    try:
        scrape = collector.scrape()
        assert collector.scrape().brokers[0].ok
    finally:
        collector.close()
    assert scrape.brokers[0].ok, scrape.brokers[0].error
    assert [c[0][-1] == jmx_launcher.MAIN_CLASS for c in jvm_calls] == [True, False, False]
    [warning] = [r.getMessage() for r in caplog.records]
    assert "JMX launcher exited with 1" in warning, warning


def test_launcher_is_compiled_into_the_cache_once(tmp_path: Path) -> None:
    launcher = Launcher(tmp_path)
    jar = launcher.jar()
    assert jar == launcher.path and jar.is_file() and launcher.jar() is jar
    stamp = jar.stat().st_mtime_ns
    assert Launcher(tmp_path).jar().stat().st_mtime_ns == stamp  # reused, not rebuilt
    assert [p.name for p in tmp_path.iterdir()] == [jar.name]  # no build leftovers


def test_class_data_archive_is_written_once_then_used(kafka: LocalKafka, tmp_path: Path) -> None:
    java = shutil.which("java")
    assert java is not None
    archive = ClassDataArchive(java, tmp_path)
    endpoint = cluster_config(kafka).jmx[0]
    # A value other tests on the shared broker cannot change between the two reads (its
    # leader count moves as they create topics): the one broker is the controller.
    controller = BY_NAME["active_controller_count"]
    first = scrape_broker(endpoint, [controller.query], 20, java, None, archive)
    assert first.ok and archive.path.is_file(), first.error
    flags, tmp = archive.flags()
    assert flags[-1] == f"-XX:SharedArchiveFile={archive.path}" and tmp is None
    second = scrape_broker(endpoint, [controller.query], 20, java, None, archive)
    assert second.ok and second.get(controller) == first.get(controller) == 1
    assert [p.name for p in archive.path.parent.iterdir()] == [archive.path.name]  # no temp left


def test_hard_kill_at_the_timeout_keeps_the_answers_already_printed(tmp_path: Path) -> None:
    """A stand-in for a launcher JVM that hangs after answering for one broker (a real JVM
    cannot be made to ignore its own deadline on demand): the process is killed at the
    collector's timeout, and what it printed before still counts."""
    uptime = ('[{"mBeanName": "java.lang:type=Runtime", "attribute": "Uptime", '
              '"value": 5000}]')
    stand_in = tmp_path / "java"
    stand_in.write_text(f"#!/bin/sh\nprintf '0\\t%s000\\t%s\\n' \"$(date +%s)\" '{uptime}'\n"
                        "exec sleep 60\n")
    stand_in.chmod(0o755)
    endpoints = [JmxEndpoint(broker_id=0, host="127.0.0.1", port=1),
                 JmxEndpoint(broker_id=1, host="127.0.0.1", port=2)]
    started = time.monotonic()
    brokers = scrape_cluster(endpoints, [], 1.5, str(stand_in), tmp_path / "l.jar", {1: 42.0})
    assert time.monotonic() - started < 3
    assert brokers[0].ok and brokers[0].uptime_seconds == 5.0
    assert brokers[1].error == "timed out after 1.5s" and brokers[1].last_success == 42.0
