"""End to end, as an operator runs it: ``kafka-monitor run`` as a child process on a config
file, watching the real Kafka 0.9 broker where real consumer groups are driven by the test;
assertions on the v3 API's answers and on the parsed ``/metrics`` text."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import (
    HealthyConsumer,
    ProducerLoad,
    StoppedConsumer,
    librdkafka_logger,
)
from tests.harness import processes
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.net import free_port, http, wait_for

pytestmark = pytest.mark.kafka


@pytest.fixture
def monitor(kafka: LocalKafka, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The monitor running on the broker, watching groups under a fresh prefix; yields
    (base URL, prefix). Logs go to a file (a pipe left unread could block the child)."""
    prefix = make_unique_name("e2e")
    port = free_port()
    config = {
        "clusters": [
            {
                "name": "local",
                "bootstrap_servers": kafka.bootstrap_servers.split(","),
                "broker_version_fallback": "0.9.0.1",
                "offsets_source": "offsets_topic",
                "groups": {"allow": [f"^{prefix}"]},
            }
        ],
        "collectors": {
            "metadata_interval": "2s",
            "broker_offsets_interval": "1s",
            "group_offsets_interval": "1s",
        },
        "evaluator": {"interval": "1s"},
        "http": {"host": "127.0.0.1", "port": port},
    }
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump(config))
    log = (tmp_path / "monitor.log").open("w")
    proc = processes.start(
        [sys.executable, "-m", "monitor", "run", "--config", str(path)],
        stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        yield f"http://127.0.0.1:{port}", prefix
    finally:
        try:
            assert processes.stop(proc, 30) == 0, (tmp_path / "monitor.log").read_text()[-3000:]
        finally:
            log.close()


def metrics(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def group_status_gauge(base: str, group: str) -> float | None:
    return metrics(base).get(
        ("kafka_monitor_group_status", (("cluster", "local"), ("group", group)))
    )


def test_run_reports_ok_stop_and_notfound_over_http_and_metrics(
    kafka: LocalKafka, monitor: tuple[str, str]
) -> None:
    base, prefix = monitor
    topic = f"{prefix}-orders"
    kafka.create_topic(topic, partitions=2)
    healthy, stopped = f"{prefix}-healthy", f"{prefix}-stopped"
    cfg: dict[str, Any] = {**kafka.client_config(), "logger": librdkafka_logger}
    with (
        ProducerLoad(cfg, topic, rate=20),
        HealthyConsumer(cfg, topic, healthy),
        StoppedConsumer(cfg, topic, stopped, stop_after_s=8) as dead,
    ):
        wait_for(lambda: http("GET", f"{base}/ready")[0] == 200, 90, "/ready 200")

        def status(group: str) -> tuple[int, dict[str, Any]]:
            return http("GET", f"{base}/v3/kafka/local/consumer/{group}/status")

        code, body = wait_for(
            lambda: (r := status(healthy))[1]["status"]["partition_count"] == 2 and r,
            60, "the healthy group evaluated",
        )
        assert code == 200 and body["status"]["status"] == "OK", body
        assert body["status"]["partitions"] == []  # /status lists non-OK partitions only

        assert dead.closed.wait(60)
        code, body = wait_for(
            lambda: (r := status(stopped))[1]["status"]["status"] == "STOP" and r,
            60, "the stopped group STOP",
        )
        s = body["status"]
        assert code == 200 and s["partition_count"] == 2 and s["totallag"] > 0
        assert {p["status"] for p in s["partitions"]} == {"STOP"}
        assert s["lag_seconds"] > 0 and s["members"] == 0

        code, body = http("GET", f"{base}/v3/kafka/local/consumer/{prefix}-nobody/status")
        assert code == 404 and body["status"]["status"] == "NOTFOUND"
        code, body = http("GET", f"{base}/v3/kafka/local/consumer")
        assert {healthy, stopped} <= set(body["consumers"])

        # The same verdicts on /metrics: status codes 1 (OK) and 5 (STOP), lag growing.
        wait_for(lambda: group_status_gauge(base, stopped) == 5.0, 30, "STOP on /metrics")
        assert group_status_gauge(base, healthy) == 1.0
        first = metrics(base)
        key = ("kafka_consumergroup_group_sum_lag", (("cluster", "local"), ("group", stopped)))
        lag0 = first[key]
        wait_for(lambda: metrics(base)[key] > lag0, 30, "the stopped group's lag to grow")
        state = (
            "kafka_monitor_group_status_state",
            (("cluster", "local"), ("group", stopped), ("status", "STOP")),
        )
        assert first[state] == 1.0
