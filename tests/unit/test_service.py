"""The service runtime over real sockets, its cluster unreachable: readiness says why, errors
are JSON, logs are structured, a native crash is restarted, and SIGTERM stops it within
seconds. Against a real broker: tests/integration/test_service.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from monitor.config import parse_config
from monitor.ingest.base import Collector
from tests.harness.net import free_port, http, wait_for
from tests.harness.run_process import Running, write_config
from tests.harness.service_thread import ServiceThread


def test_unreachable_cluster_is_not_ready_never_crashes_and_stops_fast(tmp_path: Path) -> None:
    """Nothing listens at the bootstrap address: the service stays up, says why it is not
    ready, counts the failures, and still stops within seconds (no thread blocks exit)."""
    port = free_port()
    dead = f"127.0.0.1:{free_port()}"
    running = Running(write_config(tmp_path, dead, port))
    base = f"http://127.0.0.1:{port}"
    try:
        # 503 until the service behind the HTTP front answers (the front holds the port).
        wait_for(
            lambda: (r := http("GET", f"{base}/healthz"))[0] == 200
            and r[1]["collectors"]["metadata/local"]["errors"] >= 2,
            40,
            "two failed metadata rounds",
        )
        status, body = http("GET", f"{base}/ready")
        assert status == 503
        assert body["error"] is True
        assert body["waiting_for"] == [
            "broker_offsets/local", "group_offsets/local", "metadata/local", "evaluator/local"
        ]
        status, body = http("GET", f"{base}/healthz")
        assert status == 200 and body["clusters"]["local"] is None
        assert "KafkaException" in body["collectors"]["metadata/local"]["last_error"]
        assert running.proc.poll() is None
        elapsed, logs = running.stop(signal.SIGTERM)
    finally:
        running.kill()
    assert running.proc.returncode == 0
    assert elapsed < 5.0, f"shutdown took {elapsed:.1f}s"
    assert not [line for line in logs if line["level"] == "error"
                and "raised an exception" in line["msg"]], "a round cut short by shutdown"
    failing = [line["collector"] for line in logs if line["msg"] == "collector failing"]
    assert "metadata/local" in failing
    assert len(failing) == len(set(failing)), "a failing collector logs once, not every round"


def serving_unreachable(tmp_path: Path) -> tuple[Running, str]:
    """``kafka-monitor run`` for a cluster nobody listens for, once its HTTP server answers;
    returns it and its base URL."""
    port = free_port()
    running = Running(write_config(tmp_path, f"127.0.0.1:{free_port()}", port))
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: http("GET", f"{base}/healthz")[0] == 200, 30, "server up")
    except BaseException:
        running.kill()
        raise
    return running, base


def test_errors_are_json_in_burrow_shape(tmp_path: Path) -> None:
    running, base = serving_unreachable(tmp_path)
    try:
        status, body = http("GET", f"{base}/no/such/path")
        assert status == 404
        assert body["error"] is True and body["message"] == "Not Found"
        assert body["request"]["url"] == "/no/such/path"
        status, body = http("DELETE", f"{base}/healthz")
        assert status == 405 and body["error"] is True
        status, body = http("GET", f"{base}/%ff%fe/..%2f..%2fetc")
        assert 400 <= status < 500 and body["error"] is True
    finally:
        running.stop(signal.SIGTERM)
        running.kill()


def test_run_with_invalid_config_exits_with_reason(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("clusters:\n  - name: x\n    bootstrap_servers: nohost\n")
    result = subprocess.run(
        [sys.executable, "-m", "monitor", "run", "--config", str(path)],
        capture_output=True, text=True, timeout=30, env={**os.environ},
    )
    assert result.returncode == 2
    assert f"{path}: clusters[0].bootstrap_servers: expected host:port" in result.stderr


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def test_a_crashed_service_is_restarted_on_its_port_and_says_so(tmp_path: Path) -> None:
    """A native crash of the service (SIGSEGV, as librdkafka can cause): the supervisor logs
    it, starts the service again on the same port within seconds, and the new process counts
    it in /metrics; SIGTERM still stops everything with exit code 0."""
    running, base = serving_unreachable(tmp_path)
    try:
        first = running.service_pid()
        os.kill(first, signal.SIGSEGV)
        crashed_at = time.monotonic()

        def restarted() -> bool:
            with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
                text = response.read().decode()
            return 'kafka_monitor_crash_restarts_total{signal="SIGSEGV"} 1.0' in text

        wait_for(restarted, 30, "the restarted service counting the crash")
        back_after = time.monotonic() - crashed_at
        assert running.service_pid() != first and _gone(first)
        assert http("GET", f"{base}/healthz")[0] == 200
        elapsed, logs = running.stop(signal.SIGTERM)
    finally:
        running.kill()
    assert running.proc.returncode == 0
    assert back_after < 10, f"the service was back after {back_after:.1f}s"
    crash = [line for line in logs if line["msg"] == "the service process died; restarting it"]
    assert len(crash) == 1 and crash[0]["signal"] == "SIGSEGV" and crash[0]["pid"] == first
    assert [line["msg"] for line in logs].count("service started") == 2
    assert "service stopped" in [line["msg"] for line in logs]


def test_killing_run_takes_the_service_with_it(tmp_path: Path) -> None:
    """SIGKILL to ``kafka-monitor run`` (the supervisor) leaves no service behind holding the
    port."""
    running, _ = serving_unreachable(tmp_path)
    try:
        child = running.service_pid()
        running.proc.kill()
        running.proc.communicate(timeout=10)
        wait_for(lambda: _gone(child), 10, "the service gone with its supervisor")
    finally:
        running.kill()


class Gate(Collector):
    """A collector whose data becomes servable when the test opens the gate."""

    kind = "gate"

    def __init__(self, cluster: str) -> None:
        super().__init__(cluster, interval=0.2)
        self.open = threading.Event()

    def collect(self) -> None:
        if not self.open.is_set():
            raise RuntimeError("no data yet")


def test_ready_comes_with_the_data_not_a_round_later() -> None:
    """On the default ``evaluator.interval`` (5 s) the scheduled round after the collectors
    became ready could be up to 5 s away: the service brings it forward, so ``/ready`` (and
    the first verdicts) follow the data within a fraction of a second."""
    config = parse_config({
        "clusters": [{"name": "a", "bootstrap_servers": ["127.0.0.1:1"]},
                      {"name": "b", "bootstrap_servers": ["127.0.0.1:1"]}],
        "http": {"host": "127.0.0.1", "port": 0},
    })
    assert config.evaluator.interval == 5.0
    thread = ServiceThread(config)
    gates = {c: Gate(c) for c in ("a", "b")}
    thread.service.collectors = list(gates.values())
    thread.start()
    base = f"http://127.0.0.1:{thread.service.http_port}"
    try:
        time.sleep(1.0)  # the first round (at start) has run on no data
        status, body = http("GET", f"{base}/ready")
        assert status == 503 and body["waiting_for"] == [
            "gate/a", "gate/b", "evaluator/a", "evaluator/b"]
        for name in ("a", "b"):
            opened = time.monotonic()
            gates[name].open.set()
            wait_for(lambda n=name: f"evaluator/{n}" not in http("GET", f"{base}/ready")[1]
                     ["waiting_for"], 10, f"cluster {name} evaluated")
            took = time.monotonic() - opened
            assert took < 1.5, f"cluster {name} was evaluated {took:.1f} s after its data"
            time.sleep(0.5)
        assert http("GET", f"{base}/ready")[0] == 200
    finally:
        thread.stop()
