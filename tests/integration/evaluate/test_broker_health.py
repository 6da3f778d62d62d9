"""Broker and cluster health on a real 3-broker Kafka 0.9 cluster with JMX: healthy, a broker
killed and restarted, and a broker whose JMX port is wrong. Collectors are driven round by
round (real metadata requests, real jmxquery JVMs) into a store served by the real service over
HTTP. The cluster is this module's own, since it kills brokers."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from prometheus_client.parser import text_string_to_metric_families

from monitor.config import MonitorConfig, parse_config
from monitor.dev.localkafka import LocalKafka
from monitor.evaluate.cluster_health import ClusterHealth
from monitor.ingest.jmx import JmxCollector
from monitor.ingest.jmx_launcher import MAIN_CLASS, Launcher
from monitor.ingest.metadata import MetadataCollector
from monitor.model.jmx_metrics import BY_NAME
from monitor.serve.metrics.health import cluster_health, thresholds_for
from monitor.service import Service
from monitor.store.store import Store
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.polling import wait_for as _wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.own_cluster]
wait_for = partial(_wait_for, interval=0.5, retry_on=(KafkaException, OSError))
CLUSTER = "health3"


@pytest.fixture(scope="module")
def cluster3() -> Iterator[LocalKafka]:
    with LocalKafka(3, offsets_topic_partitions=3) as cluster:
        cluster.create_topic(make_unique_name("health"), partitions=3, replication_factor=3)
        yield cluster
        cluster.stop(graceful=False)


def monitor_config(kafka: LocalKafka, wrong_jmx: int | None = None) -> MonitorConfig:
    jmx = [
        {"broker_id": b.id, "host": "127.0.0.1",
         "port": b.jmx_port if b.id != wrong_jmx else b.port}  # the Kafka port: not JMX
        for b in kafka.brokers
    ]
    return parse_config({
        "clusters": [{"name": CLUSTER, "bootstrap_servers": kafka.bootstrap_servers,
                      "broker_version_fallback": "0.9.0.1", "jmx": jmx,
                      "client_properties": {"api.version.request": False}}],
        "collectors": {"metadata_interval": "1h", "jmx_interval": "1h", "jmx_timeout": "5s"},
        "http": {"host": "127.0.0.1", "port": 0},
    })


class Monitor:
    """The real service (HTTP, /metrics) over a store the test fills round by round."""

    def __init__(self, config: MonitorConfig) -> None:
        self.config = config
        self.store = Store()
        cluster = config.clusters[0]
        self.metadata = MetadataCollector(cluster, 3600, self.store)
        self.jmx = JmxCollector(cluster, 3600, config.collectors.jmx_timeout, self.store)
        self.service = Service(config, self.store, collectors=[])
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.service.start(), self._loop).result(30)

    def round(self) -> ClusterHealth:
        self.metadata.run_once()
        self.jmx.run_once()
        return cluster_health(self.store, CLUSTER, thresholds_for(self.config))

    def get(self, path: str) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.service.http_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.service.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self.metadata.close()
        self.jmx.close()


@pytest.fixture
def monitor(cluster3: LocalKafka) -> Iterator[Monitor]:
    m = Monitor(monitor_config(cluster3))
    try:
        yield m
    finally:
        m.close()


def jmx_sum(health: ClusterHealth, name: str) -> float:
    assert health.jmx is not None
    return sum(b.get(BY_NAME[name]) or 0 for b in health.jmx.brokers.values() if b.ok)


def test_healthy_cluster_is_ok_over_http_and_prometheus(monitor: Monitor) -> None:
    # Idle ratios are 1-minute rates: a just-started broker's first reading comes after ~5 s.
    health = wait_for(monitor.round, 60, "status OK", ok=lambda h: h.status == "OK")
    assert health.active_controllers == 1 and health.diagnosis is not None
    assert health.diagnosis.live_brokers == (0, 1, 2) and health.diagnosis.suspect_broker is None

    status, body = monitor.get(f"/v3/kafka/{CLUSTER}/health")
    answer = json.loads(body)
    assert status == 200 and answer["error"] is False
    assert answer["health"]["status"] == "OK" and answer["health"]["active_controllers"] == 1
    assert answer["request"]["url"] == f"/v3/kafka/{CLUSTER}/health"
    assert sorted(answer["health"]["jmx"]) == ["0", "1", "2"]
    assert all(b["absent"] == ["under_min_isr_partitions"]
               for b in answer["health"]["jmx"].values())

    status, body = monitor.get("/v3/kafka/nope/health")
    assert status == 404 and json.loads(body)["error"] is True

    status, text = monitor.get("/metrics")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert status == 200
    assert [s.value for s in families["kafka_monitor_cluster_status"].samples] == [0]
    controllers = families["kafka_broker_active_controller_count"].samples
    assert sorted(s.labels["broker"] for s in controllers) == ["0", "1", "2"]
    assert sum(s.value for s in controllers) == 1
    assert not families["kafka_broker_under_min_isr_partitions"].samples


def test_killed_broker_is_named_suspect_then_recovers(
    cluster3: LocalKafka, monitor: Monitor
) -> None:
    wait_for(monitor.round, 60, "status OK", ok=lambda h: h.status == "OK")
    victim = 1
    survivors = [0, 2]
    cluster3.kill_broker(victim)
    try:
        def degraded(h: ClusterHealth) -> bool:
            d = h.diagnosis
            return bool(
                d is not None and d.suspect_broker == victim and d.missing_brokers == (victim,)
                and len(d.under_replicated) >= 6  # the topic's 3 + __consumer_offsets' 3
                and jmx_sum(h, "under_replicated_partitions") >= 6
            )

        health = wait_for(monitor.round, 60, "under-replication seen by JMX and metadata",
                          ok=degraded)
        assert health.status == "ERR"
        codes = {(r.code, r.broker) for r in health.reasons}
        assert ("broker_missing", victim) in codes
        assert ("under_replicated_partitions", victim) in codes  # metadata, with its suspect
        assert ("jmx_unreachable", victim) in codes
        assert health.active_controllers == 1  # re-elected among the survivors if it moved
        assert health.jmx is not None
        assert all(health.jmx.brokers[b].ok for b in survivors)
        answer = json.loads(monitor.get(f"/v3/kafka/{CLUSTER}/health")[1])["health"]
        assert answer["status"] == "ERR" and answer["metadata"]["suspect_broker"] == victim
        text = monitor.get("/metrics")[1]
        suspect = {s.labels["broker"]: s.value for f in text_string_to_metric_families(text)
                   if f.name == "kafka_monitor_broker_suspect" for s in f.samples}
        assert suspect == {"0": 0, "1": 1, "2": 0}
    finally:
        cluster3.start_broker(victim)
    health = wait_for(monitor.round, 90, "status OK after the restart",
                      ok=lambda h: h.status == "OK")
    assert jmx_sum(health, "under_replicated_partitions") == 0
    assert health.diagnosis is not None and health.diagnosis.under_replicated == ()


def count_jvms(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The command line of every JVM started from now on (they still run for real)."""
    calls: list[list[str]] = []
    real_run = subprocess.run

    def counting_run(cmd: list[str], **kwargs: Any) -> Any:
        calls.append(cmd)
        return real_run(cmd, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting_run)
    return calls


def test_one_jvm_for_all_brokers_reads_what_a_jvm_per_broker_reads(
    cluster3: LocalKafka, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster3.wait_fully_replicated()
    config = monitor_config(cluster3).clusters[0]
    one_jvm = JmxCollector(config, 3600, 10, Store())
    per_broker = JmxCollector(config, 3600, 10, Store(), launcher=Launcher(tmp_path, javac=""))
    try:
        one_jvm.scrape()  # the launcher is compiled (if not cached) outside the count
        jvms = count_jvms(monkeypatch)
        together = one_jvm.scrape()
        assert [c[-1] for c in jvms] == [MAIN_CLASS]
        apart = per_broker.scrape()
        assert len(jvms) == 4 and all("-jar" in c for c in jvms[1:])
    finally:
        one_jvm.close()
        per_broker.close()
    assert sorted(together.brokers) == sorted(apart.brokers) == [0, 1, 2]
    stable = ("partition_count", "leader_count", "active_controller_count",
              "under_replicated_partitions", "offline_partitions")
    for broker_id, broker in together.brokers.items():
        other = apart.brokers[broker_id]
        assert broker.ok and other.ok, (broker.error, other.error)
        assert set(broker.values) == set(other.values) and len(broker.values) >= 18
        assert [broker.get(BY_NAME[n]) for n in stable] == [other.get(BY_NAME[n]) for n in stable]
        assert broker.uptime_seconds and other.uptime_seconds
        assert 0 <= other.uptime_seconds - broker.uptime_seconds < 30
    assert sum(b.get(BY_NAME["active_controller_count"]) or 0
               for b in together.brokers.values()) == 1


def test_wrong_jmx_port_fails_that_broker_only(
    cluster3: LocalKafka, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster3.wait_fully_replicated()
    monitor = Monitor(monitor_config(cluster3, wrong_jmx=2))
    try:
        monitor.jmx.scrape()  # the launcher is compiled (if not cached) outside the count
        jvms = count_jvms(monkeypatch)
        health = monitor.round()
        assert [c[-1] for c in jvms] == [MAIN_CLASS]  # one JVM for the whole round
        assert health.jmx is not None
        bad = health.jmx.brokers[2]
        assert not bad.ok and bad.error and bad.values == {}
        assert all(health.jmx.brokers[b].ok and health.jmx.brokers[b].duration < 5
                   for b in (0, 1))
        reasons = {(r.code, r.broker, r.status) for r in health.reasons}
        # When broker 2 is the controller, its count is unknown: WARN, never a false ERR.
        assert reasons - {("active_controllers", None, "WARN")} == {
            ("jmx_unreachable", 2, "WARN")}
        assert health.status == "WARN" and monitor.jmx.health.consecutive_errors == 0
        answer: dict[str, Any] = json.loads(monitor.get(f"/v3/kafka/{CLUSTER}/health")[1])
        assert answer["health"]["jmx"]["2"]["ok"] is False
        assert answer["health"]["jmx"]["0"]["metrics"]["partition_count"] > 0
        text = monitor.get("/metrics")[1]
        up = {s.labels["broker"]: s.value for f in text_string_to_metric_families(text)
              if f.name == "kafka_monitor_broker_jmx_up" for s in f.samples}
        assert up == {"0": 1, "1": 1, "2": 0}
    finally:
        monitor.close()
