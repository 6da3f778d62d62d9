"""``kafka-monitor run`` against a real Kafka broker: health and readiness, and a clean, quick
shutdown on SIGTERM and SIGINT with structured logs. With the cluster unreachable:
tests/unit/test_service.py."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.harness.net import free_port, http, wait_for
from tests.harness.run_process import Running, write_config


@pytest.mark.kafka
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_run_serves_health_and_stops_cleanly(
    kafka: Any, tmp_path: Path, sig: signal.Signals
) -> None:
    port = free_port()
    running = Running(write_config(tmp_path, kafka.bootstrap_servers, port))
    base = f"http://127.0.0.1:{port}"
    try:
        status, body = wait_for(
            lambda: (r := http("GET", f"{base}/ready"))[0] == 200 and r, 30, "/ready 200"
        )
        assert body["error"] is False and body["waiting_for"] == []
        status, body = http("GET", f"{base}/healthz")
        assert status == 200 and body["status"] == "ok"
        assert body["clusters"]["local"]["brokers"] == 1
        health = body["collectors"]["metadata/local"]
        assert health["runs"] >= 1 and health["last_success"] is not None
        assert health["errors"] == 0
        elapsed, logs = running.stop(sig)
    finally:
        running.kill()
    assert running.proc.returncode == 0
    assert elapsed < 5.0, f"shutdown took {elapsed:.1f}s"
    messages = [line["msg"] for line in logs]
    assert "service started" in messages and "service stopped" in messages
    assert any(line.get("signal") == sig.name for line in logs)
    assert all({"ts", "level", "logger", "msg"} <= line.keys() for line in logs)
