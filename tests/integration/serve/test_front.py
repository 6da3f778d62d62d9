"""The HTTP front of ``kafka-monitor run`` end to end on the real 0.9 broker, as an operator
starts it, with real groups and real sockets: ``/status`` answered by the front is the
service's own reply for the round, it keeps being answered while the service process is frozen
(so it really comes from the front), and never from a service process that is gone; deletions
and credentials behave as the service's own, over TLS."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import HealthyConsumer, ProducerLoad, librdkafka_logger
from monitor.serve.front import RELOAD_EVERY, SOCKET, TABLE
from monitor.serve.reply_table import ReplyTable
from monitor.supervisor import FRONT_ENV, SERVICE_NICE
from tests.harness import processes
from tests.harness.api import AUTH, TOKEN
from tests.harness.certs import client_context, make_certs
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.net import free_port, wait_for


class Run:
    """``kafka-monitor run`` on a config file, its log in a file."""

    def __init__(self, tmp: Path, config: dict[str, Any]) -> None:
        path = tmp / "monitor.yaml"
        path.write_text(yaml.safe_dump(config))
        self.log_path = tmp / "monitor.log"
        self._log = self.log_path.open("w")
        self.proc = processes.start([sys.executable, "-m", "monitor", "run", "--config",
                                     str(path)], stdout=self._log, stderr=subprocess.STDOUT)

    def service_pid(self) -> int:
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        (pid,) = map(int, children.split())
        return pid

    def front_dir(self) -> Path:
        environ = Path(f"/proc/{self.service_pid()}/environ").read_bytes().split(b"\0")
        (folder,) = [e.split(b"=", 1)[1] for e in environ if e.startswith(FRONT_ENV.encode())]
        return Path(folder.decode())

    def in_table(self, path: str) -> bool:
        """Whether the front's current table file holds ``path``'s reply."""
        try:
            table = ReplyTable(self.front_dir() / TABLE)
        except FileNotFoundError:
            return False
        try:
            return table.get(path) is not None
        finally:
            table.close()

    def stop(self) -> int | None:
        """SIGTERM; its exit code, or None when it had to be killed."""
        try:
            return processes.stop(self.proc, timeout=40)
        finally:
            self._log.close()


def get(port: int, path: str, headers: dict[str, str] | None = None,
        context: ssl.SSLContext | None = None, method: str = "GET",
        timeout: float = 5) -> tuple[int, bytes]:
    conn: http.client.HTTPConnection = (
        http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=timeout)
        if context is not None else http.client.HTTPConnection("127.0.0.1", port,
                                                                 timeout=timeout))
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def get_unix(sock: Path, path: str) -> tuple[int, bytes]:
    """The service's own answer, over its Unix socket (past the front)."""
    conn = http.client.HTTPConnection("service", timeout=5)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(sock))
    conn.sock = s
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def monitor_config(kafka: LocalKafka, prefix: str, port: int, **http: Any) -> dict[str, Any]:
    """The defaults but for where Kafka is, the test's groups and the port."""
    return {
        "clusters": [{
            "name": "local",
            "bootstrap_servers": kafka.bootstrap_servers.split(","),
            "broker_version_fallback": "0.9.0.1",
            "groups": {"allow": [f"^{prefix}"]},
        }],
        "http": {"host": "127.0.0.1", "port": port, **http},
    }


@pytest.fixture
def healthy_group(kafka: LocalKafka) -> Iterator[tuple[str, str]]:
    """A group keeping up with a producer; yields (prefix, group)."""
    prefix = make_unique_name("front")
    topic, group = f"{prefix}-orders", f"{prefix}-healthy"
    kafka.create_topic(topic, partitions=2)
    cfg: dict[str, Any] = {**kafka.client_config(), "logger": librdkafka_logger}
    with ProducerLoad(cfg, topic, rate=20), HealthyConsumer(cfg, topic, group):
        yield prefix, group


def nice(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def judged(code: int, body: bytes) -> bool:
    return code == 200 and json.loads(body)["status"]["partition_count"] > 0


@pytest.mark.kafka
def test_status_comes_from_the_front_and_never_from_a_service_that_is_gone(
    kafka: LocalKafka, healthy_group: tuple[str, str], tmp_path: Path
) -> None:
    prefix, group = healthy_group
    port = free_port()
    run = Run(tmp_path, monitor_config(kafka, prefix, port))
    path = f"/v3/kafka/local/consumer/{group}/status"
    try:
        wait_for(lambda: judged(*get(port, path)), 120, "the group judged, through the front")
        # Every group's reply is in the table from the round after the collectors caught up.
        wait_for(lambda: run.in_table(path), 30, "the group's reply in the front's table")
        time.sleep(2 * RELOAD_EVERY)  # the front has opened that table
        # The front's reply is the service's own for the round (a round may turn between
        # the two requests: then the next pair agrees).
        sock = run.front_dir() / SOCKET
        pairs = [(get(port, path), get_unix(sock, path)) for _ in range(5)]
        assert any(ours == theirs and ours[0] == 200 for ours, theirs in pairs), pairs
        assert json.loads(pairs[0][0][1])["status"]["status"] == "OK"
        # The service yields the CPU to the front.
        assert nice(run.service_pid()) == nice(run.proc.pid) + SERVICE_NICE

        # The service process frozen: /status still answered (from the front's table) at
        # once, while what the front passes on to the service waits.
        pid = run.service_pid()
        os.kill(pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            for _ in range(20):
                code, body = get(port, path)
                assert code == 200 and json.loads(body)["status"]["group"] == group
            assert time.monotonic() - t0 < 2.0
            with pytest.raises(TimeoutError):
                get(port, "/healthz", timeout=1.5)
        finally:
            os.kill(pid, signal.SIGCONT)

        # The service process killed: its replies go with it (a JSON 503 until the next one
        # is up), then the restarted service's verdicts are served again.
        os.kill(pid, signal.SIGKILL)
        down = wait_for(lambda: (r := get(port, path))[0] == 503 and r, 10,
                        "a 503 while the service restarts")
        body = json.loads(down[1])
        assert body["error"] is True and body["request"]["url"] == path
        wait_for(lambda: judged(*get(port, path)), 120, "the group judged by the new service")
        assert run.service_pid() != pid
    finally:
        code = run.stop()
    assert code == 0, run.log_path.read_text()[-3000:]


@pytest.mark.kafka
def test_credentials_deletion_and_tls_through_the_front(
    kafka: LocalKafka, healthy_group: tuple[str, str], tmp_path: Path
) -> None:
    prefix, group = healthy_group
    certs = make_certs(tmp_path)
    port = free_port()
    run = Run(tmp_path, monitor_config(
        kafka, prefix, port, auth={"tokens": [TOKEN], "reads": True},
        tls={"cert_file": str(certs["server.pem"]), "key_file": str(certs["server.key"])}))
    tls = client_context(certs["ca.pem"])
    path = f"/v3/kafka/local/consumer/{group}/status"
    try:
        wait_for(lambda: judged(*get(port, path, AUTH, tls)), 120, "the group judged over TLS")
        # From here the front could answer the group from its table: what follows is the front
        # keeping to the service's rules, not the service answering.
        wait_for(lambda: run.in_table(path), 30, "the group's reply in the front's table")
        time.sleep(2 * RELOAD_EVERY)  # the front has opened that table
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
            get(port, path)  # plain HTTP on the TLS port
        # Reads need the token: refused (by the service, which counts it) without it.
        code, body = get(port, path, context=tls)
        assert code == 401 and json.loads(body)["message"] == "unauthorized"
        code, body = get(port, path, {"Authorization": "Bearer wrong"}, tls)
        assert code == 401
        code, metrics = get(port, "/metrics", context=tls)
        assert code == 200
        assert b'kafka_monitor_http_auth_failures_total{reason="missing"} 1.0' in metrics
        assert b'kafka_monitor_http_auth_failures_total{reason="invalid"} 1.0' in metrics
        # A deleted group is gone at once, not when the next round's replies arrive.
        code, _ = get(port, f"/v3/kafka/local/consumer/{group}", AUTH, tls, method="DELETE")
        assert code == 200
        code, body = get(port, path, AUTH, tls)
        assert code == 404 and json.loads(body)["status"]["status"] == "NOTFOUND"
    finally:
        code = run.stop()
    assert code == 0, run.log_path.read_text()[-3000:]


