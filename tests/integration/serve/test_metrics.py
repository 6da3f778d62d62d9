"""``/metrics`` of the real service against the real Kafka 0.9 broker, scraped over a socket.
Off the broker, on a simulated clock: tests/unit/serve/metrics/test_exporter.py."""

from __future__ import annotations

import math
import time
import urllib.request

import pytest

from monitor.config import parse_config
from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import (
    HealthyConsumer,
    ProducerLoad,
    StoppedConsumer,
    librdkafka_logger,
)
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.polling import wait_for
from tests.harness.scrape import Series, scrape_text, value
from tests.harness.service_thread import ServiceThread


@pytest.mark.kafka
def test_metrics_endpoint_on_real_groups(kafka: LocalKafka) -> None:
    """The real service against the real Kafka 0.9 broker, scraped over a socket: a healthy
    group reads OK, a consumer that closes for good turns STOP and keeps reporting a growing
    lag, and the monitor's own health is there."""
    prefix = make_unique_name("exporter")
    topic, healthy, stopped = f"{prefix}-t", f"{prefix}-healthy", f"{prefix}-stopped"
    kafka.create_topic(topic, partitions=2)
    config = parse_config({
        "clusters": [{
            "name": "local",
            "bootstrap_servers": kafka.bootstrap_servers.split(","),
            "broker_version_fallback": "0.9.0.1",
            "offsets_source": "admin",
            "groups": {"allow": [f"^{prefix}"]},
            "topics": {"allow": [f"^{prefix}"]},
        }],
        "collectors": {"metadata_interval": "2s", "broker_offsets_interval": "1s",
                       "group_offsets_interval": "1s"},
        "evaluator": {"interval": "1s", "window": 5},
        "http": {"host": "127.0.0.1", "port": 0},
    })
    cfg = {**kafka.client_config(), "logger": librdkafka_logger}
    with ServiceThread(config) as monitor, ProducerLoad(cfg, topic, rate=20), \
            HealthyConsumer(cfg, topic, healthy), \
            StoppedConsumer(cfg, topic, stopped, stop_after_s=6) as quitter:
        url = f"http://127.0.0.1:{monitor.service.http_port}/metrics"

        def fetch() -> dict[str, Series]:
            with urllib.request.urlopen(url, timeout=5) as response:
                assert response.status == 200
                return scrape_text(response.read().decode())

        def status(m: dict[str, Series], group: str) -> float | None:
            return m.get("kafka_monitor_group_status", {}).get(
                frozenset({("cluster", "local"), ("group", group)}))

        assert quitter.closed.wait(45), "the stopped consumer never closed"
        m = wait_for(fetch, 40, "healthy OK and stopped STOP on /metrics",
                     ok=lambda m: status(m, healthy) == 1 and status(m, stopped) == 5,
                     interval=0.5)
        g = dict(cluster="local", group=stopped)
        assert value(m, "kafka_monitor_group_status_state", **g, status="STOP") == 1
        assert value(m, "kafka_consumergroup_members", **g) == 0
        assert value(m, "kafka_consumergroup_members", cluster="local", group=healthy) == 1
        assert value(m, "kafka_monitor_group_stale", **g) == 0
        last_commit: dict[tuple[str, int], int] = {}
        for c in quitter.commits:
            last_commit.update(c.offsets)
        for p in (0, 1):
            tp = dict(topic=topic, partition=p)
            assert value(m, "kafka_monitor_partition_status", **g, **tp) == 5
            assert value(m, "kafka_consumergroup_group_offset", **g, **tp) == \
                last_commit[(topic, p)]
            assert value(m, "kafka_topic_partition_current_offset", cluster="local", **tp) >= \
                value(m, "kafka_consumergroup_group_offset", **g, **tp)
        lag = value(m, "kafka_consumergroup_group_sum_lag", **g)
        secs = value(m, "kafka_consumergroup_group_max_lag_seconds", **g)
        assert lag > 0 and 0 < secs < 120
        # Stopped is not gone: the series stay and the lag keeps growing with the producer.
        later = wait_for(fetch, 15, "the stopped group's lag growing",
                         ok=lambda m2: value(m2, "kafka_consumergroup_group_sum_lag", **g) > lag
                         and value(m2, "kafka_consumergroup_group_max_lag_seconds", **g) > secs,
                         interval=0.5)
        assert status(later, stopped) == 5
        secs_now = later["kafka_consumergroup_group_lag_seconds"].values()
        assert all(math.isfinite(v) and v >= 0 for v in secs_now)
        # The monitor's own health.
        col = dict(cluster="local", collector="group_offsets")
        assert value(later, "kafka_monitor_collector_last_success_timestamp_seconds", **col) > \
            time.time() - 10
        assert value(later, "kafka_monitor_collector_ready", **col) == 1
        assert value(later, "kafka_monitor_evaluation_timestamp_seconds", cluster="local") > \
            time.time() - 10
