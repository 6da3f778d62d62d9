"""The JMX collector against a real Kafka 0.9 broker's JMX agent, through real jmxquery JVMs:
what 0.9 exposes, batching, and failures (refused, hanging) that cost the other brokers
nothing."""

from __future__ import annotations

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

from monitor.cluster_health import assess
from monitor.collectors.jmx import ClassDataArchive, JmxCollector, query_command, scrape_broker
from monitor.config import ClusterConfig, JmxEndpoint
from monitor.health_metrics import health_metric_families
from monitor.jmx_metrics import BY_NAME
from monitor.localkafka import LocalKafka
from monitor.store import Store

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


def test_one_jvm_per_broker_reads_the_catalogue(
    kafka: LocalKafka, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    real_run = subprocess.run

    def counting_run(cmd: list[str], **kwargs: Any) -> Any:
        calls.append(cmd)
        return real_run(cmd, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting_run)
    store = Store()
    collector = JmxCollector(cluster_config(kafka), 30, 20, store)
    try:
        assert collector.run_once(), collector.health.last_error
    finally:
        collector.close()
    assert len(calls) == 1 and calls[0][calls[0].index("-q") + 1].count(";") >= 15
    broker = store.broker_health_input("one")[2].brokers[0]  # type: ignore[union-attr]
    assert broker.ok and broker.uptime_seconds and broker.uptime_seconds > 0
    get = lambda name: broker.get(BY_NAME[name])  # noqa: E731
    assert get("active_controller_count") == 1
    assert get("under_replicated_partitions") == 0 and get("offline_partitions") == 0
    assert get("partition_count") >= 4 and get("leader_count") == get("partition_count")
    assert 0 <= get("request_handler_avg_idle_ratio") <= 1  # type: ignore[operator]
    assert 0 <= get("network_processor_avg_idle_ratio") <= 1  # type: ignore[operator]
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
    assert values[("kafka.server:type=KafkaServer,name=BrokerState", "Value")] == 3  # running
    assert values[(BY_NAME["under_replicated_partitions"].mbean, "Value")] == 0
    text = _exposition(assess("one", None, jmx=scrape))
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = families["kafka_broker_jmx_value"].samples
    assert any(s.labels["mbean"].endswith("name=BrokerState") and s.value == 3 for s in samples)
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


def test_refused_and_hung_brokers_fail_alone_within_the_timeout(
    kafka: LocalKafka, silent_port: int
) -> None:
    refused = {"broker_id": 7, "host": "127.0.0.1", "port": free_port()}
    hung = {"broker_id": 8, "host": "127.0.0.1", "port": silent_port}
    timeout = 3.0
    collector = JmxCollector(cluster_config(kafka, [refused, hung]), 30, timeout, Store())
    try:
        started = time.monotonic()
        scrape = collector.scrape()
        elapsed = time.monotonic() - started
    finally:
        collector.close()
    good, bad, slow = scrape.brokers[0], scrape.brokers[7], scrape.brokers[8]
    assert good.ok and good.duration < timeout, good
    assert not bad.ok and "Connection refused" in (bad.error or ""), bad.error
    assert not slow.ok and slow.error == f"timed out after {timeout:g}s"
    assert slow.values == {} and slow.last_success is None
    assert elapsed < timeout + 2.0, elapsed  # in parallel, and the hung JVM was killed
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


def test_class_data_archive_is_written_once_then_used(kafka: LocalKafka, tmp_path: Path) -> None:
    java = shutil.which("java")
    assert java is not None
    archive = ClassDataArchive(java, tmp_path)
    endpoint = cluster_config(kafka).jmx[0]
    first = scrape_broker(endpoint, [BY_NAME["leader_count"].query], 20, java, None, archive)
    assert first.ok and archive.path.is_file(), first.error
    flags, tmp = archive.flags()
    assert flags[-1] == f"-XX:SharedArchiveFile={archive.path}" and tmp is None
    second = scrape_broker(endpoint, [BY_NAME["leader_count"].query], 20, java, None, archive)
    assert second.ok and second.get(BY_NAME["leader_count"]) == first.get(BY_NAME["leader_count"])
    assert [p.name for p in archive.path.parent.iterdir()] == [archive.path.name]  # no temp left
