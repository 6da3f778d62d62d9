"""The HTTP front of ``kafka-monitor run`` (``monitor/serve/front.py``) and the reply table it
serves from (``monitor/serve/reply_table.py``).

End to end on the real 0.9 broker, ``kafka-monitor run`` as an operator starts it, real groups,
real sockets: ``/status`` answered by the front is the service's own reply for the round, it
keeps being answered while the service process is frozen (so it really comes from the front),
and never from a service process that is gone; deletions and credentials behave as the
service's own, over TLS.
"""

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
from monitor.serve import reply_table
from monitor.serve.front import RELOAD_EVERY, SOCKET, TABLE
from monitor.serve.reply_table import ReplyTable, TableWriter, write_table
from monitor.supervisor import FRONT_ENV, SERVICE_NICE
from tests.harness.kafka_fixtures import make_unique_name
from tests.test_api import AUTH, TOKEN
from tests.test_http_security import client_context, make_certs
from tests.test_service import free_port, wait_for

# ------------------------------------------------------------------------ the reply table


def test_the_table_finds_every_path_and_nothing_else(tmp_path: Path) -> None:
    replies = [(f"/v3/kafka/c/consumer/g{i}/status", f'{{"n": {i}}}'.encode() * (i % 7))
               for i in range(2000)]
    assert write_table(tmp_path / "t", replies) == 2000
    table = ReplyTable(tmp_path / "t")
    try:
        for path, body in replies:
            assert table.get(path) == body
        assert table.get("/v3/kafka/c/consumer/g2000/status") is None
        assert table.get("/v3/kafka/c/consumer/g1/lag") is None
    finally:
        table.close()


def test_paths_with_one_hash_are_told_apart_by_the_stored_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in hash that collides for every path (no two real paths were found to)."""
    monkeypatch.setattr(reply_table, "path_hash", lambda path: 42)
    replies = [(f"/p/{i}", str(i).encode()) for i in range(50)]
    write_table(tmp_path / "t", replies)
    table = ReplyTable(tmp_path / "t")
    try:
        assert [table.get(p) for p, _ in replies] == [b for _, b in replies]
        assert table.get("/p/50") is None
    finally:
        table.close()


def test_a_table_is_replaced_whole_or_not_at_all(tmp_path: Path) -> None:
    """Until a new table is committed the old one is served whole; a writer that fails
    leaves the old one and no file of its own; a path added twice keeps its first body."""
    target = tmp_path / "t"
    write_table(target, [("/a", b"1"), ("/b", b"1")])
    with pytest.raises(RuntimeError), TableWriter(target) as failing:
        failing.add("/a", b"2")
        raise RuntimeError("a render failed")
    assert list(tmp_path.iterdir()) == [target]
    writer = TableWriter(target)
    writer.add("/a", b"3")
    writer.add("/a", b"4")
    old = ReplyTable(target)
    assert (old.get("/a"), old.get("/b")) == (b"1", b"1")
    old.close()
    assert writer.commit() == 1
    new = ReplyTable(target)
    assert (new.get("/a"), new.get("/b")) == (b"3", None)
    new.close()


def test_an_empty_or_foreign_file_is_refused_or_empty(tmp_path: Path) -> None:
    write_table(tmp_path / "empty", [])
    table = ReplyTable(tmp_path / "empty")
    assert table.get("/anything") is None
    table.close()
    (tmp_path / "foreign").write_bytes(b"not a table at all, long enough to read")
    with pytest.raises(ValueError, match="not a reply table"):
        ReplyTable(tmp_path / "foreign")


# ------------------------------------------------------------------ kafka-monitor run, end to end


class Run:
    """``kafka-monitor run`` on a config file, its log in a file."""

    def __init__(self, tmp: Path, config: dict[str, Any]) -> None:
        path = tmp / "monitor.yaml"
        path.write_text(yaml.safe_dump(config))
        self.log_path = tmp / "monitor.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen([sys.executable, "-m", "monitor", "run", "--config",
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

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(40)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
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


def test_a_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        path = tmp_path / "monitor.yaml"
        path.write_text(yaml.safe_dump({
            "clusters": [{"name": "x", "bootstrap_servers": [f"127.0.0.1:{free_port()}"]}],
            "http": {"host": "127.0.0.1", "port": port}}))
        result = subprocess.run([sys.executable, "-m", "monitor", "run", "--config", str(path)],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"cannot serve http on 127.0.0.1:{port}" in result.stderr
    assert "address already in use" in result.stderr.lower()
