"""Client side of the mock-cluster harness: start and drive ``tests.harness.mock_server``.

Why: fault-injection tests of the collectors need a Kafka that speaks the current protocol
and whose brokers can be taken down, made slow, or have leaders / group coordinators moved on
demand. librdkafka's mock cluster does that; it runs in its own process (see mock_server) and
this class is the typed handle the tests hold on to.

Typical use::

    with MockCluster(brokers=3) as mc:
        mc.create_topic("orders", partitions=3, replication_factor=1)
        admin = AdminClient(mc.client_config())
        consumer = Consumer(mc.client_config({"group.id": "g"}))
        mc.broker_down(2)
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

#: Repository root, so ``python -m tests.harness.mock_server`` resolves from any cwd.
_ROOT = Path(__file__).resolve().parents[2]
_SERVER_MODULE = "tests.harness.mock_server"
_EOF = object()

#: librdkafka settings that make clients of the mock notice injected faults, and their repair,
#: within about a second instead of librdkafka's production defaults. Measured against the
#: mock with confluent-kafka 2.16.1 (see tests/integration/harness/test_mockcluster.py):
#:
#: * topic.metadata.refresh.interval.ms (default 300000): a downed mock broker disappears from
#:   Metadata responses, so a client that refreshed metadata meanwhile drops that broker and
#:   only re-learns it on its next periodic refresh. With the default, a long-lived consumer
#:   still answered ``_UNKNOWN_PARTITION`` for the broker's partitions 20 s after
#:   ``broker_up``; with 500 ms it answered again 0.5 s after it.
#: * reconnect.backoff.max.ms (default 10000): a client that kept the broker but failed to
#:   reconnect backs off exponentially; with the default it took 9.9 s after ``broker_up`` to
#:   answer again.
FAST_FAULT_CONFIG: dict[str, Any] = {
    "topic.metadata.refresh.interval.ms": 500,
    "reconnect.backoff.max.ms": 500,
}


class MockClusterError(RuntimeError):
    """The mock server rejected a command, or could not be started / reached.

    ``error`` is librdkafka's error name (e.g. ``BROKER_NOT_AVAILABLE``, from
    ``rd_kafka_err2name``), ``BAD_REQUEST`` for a malformed command, or a harness-side name
    (``START_FAILED``, ``TIMEOUT``, ``SERVER_GONE``); ``code`` is the numeric
    ``rd_kafka_resp_err_t`` when there is one.
    """

    def __init__(
        self,
        message: str,
        *,
        error: str = "",
        code: int | None = None,
        command: str | None = None,
    ) -> None:
        super().__init__(message)
        self.error = error
        self.code = code
        self.command = command


class MockCluster:
    """A librdkafka mock Kafka cluster running in a child process.

    Start with ``start()`` or by entering the context manager; stop with ``close()`` (also
    run on ``__exit__``). Broker ids are ``1..brokers``; broker ``controller_id`` is reported
    as the controller. ``group_initial_rebalance_delay_ms`` overrides the mock's 3 s wait
    before a new consumer group's first rebalance. ``debug`` is passed to librdkafka's
    ``debug`` setting of the server (its log goes to ``stderr_lines``).

    Behaviour of the injected faults (mock in confluent-kafka 2.16.1):

    * ``broker_down``: the broker's connections are closed and new ones refused, and it is
      left out of Metadata responses; leaders and ISRs are NOT changed, so its partitions stay
      unavailable until ``broker_up`` or ``partition_set_leader``.
    * ``partition_set_leader``: Metadata shows the new leader at once; a client still using
      the old leader gets NOT_LEADER_FOR_PARTITION once, then refreshes.
    * ``coordinator_set``: FindCoordinator answers with the given broker from then on (any
      id is accepted, even one of no broker). With the group's coordinator down, a fresh
      AdminClient's list_consumer_group_offsets times out (``_TIMED_OUT``); after the
      coordinator moves, a fresh AdminClient succeeds but one that had cached the old
      coordinator keeps timing out, and retrying on it can abort the process (librdkafka
      issue #4605) - see tests/integration/harness/test_mockcluster.py.
    * ``set_rtt``: every response of that broker is delayed by the given time.

    Other mock limits: list_consumer_group_offsets needs explicit partitions (else it returns
    []); ``partition_set_leader`` on an unknown topic creates it.
    """

    def __init__(
        self,
        brokers: int = 3,
        *,
        controller_id: int = 1,
        start_timeout: float = 20.0,
        command_timeout: float = 10.0,
        group_initial_rebalance_delay_ms: int | None = None,
        debug: str = "",
        python: str | None = None,
    ) -> None:
        self.brokers = brokers
        self.controller_id = controller_id
        self.start_timeout = start_timeout
        self.command_timeout = command_timeout
        self.group_initial_rebalance_delay_ms = group_initial_rebalance_delay_ms
        self.debug = debug
        self.python = python or sys.executable
        self.info: dict[str, Any] = {}
        self._proc: subprocess.Popen[str] | None = None
        self._replies: queue.Queue[Any] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=200)
        self._lock = threading.Lock()
        self._seq = 0
        self._threads: list[threading.Thread] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> MockCluster:
        """Spawn the server and wait for its ready line (bootstrap servers)."""
        if self._proc is not None:
            raise MockClusterError("MockCluster already started", error="START_FAILED")
        cmd = [
            self.python,
            "-m",
            _SERVER_MODULE,
            "--brokers",
            str(self.brokers),
            "--controller-id",
            str(self.controller_id),
        ]
        if self.group_initial_rebalance_delay_ms is not None:
            cmd += [
                "--group-initial-rebalance-delay-ms",
                str(self.group_initial_rebalance_delay_ms),
            ]
        if self.debug:
            cmd += ["--debug", self.debug]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_ROOT), env.get("PYTHONPATH")]))
        env["PYTHONUNBUFFERED"] = "1"
        self._proc = subprocess.Popen(
            cmd,
            cwd=_ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        # Both pipes are drained by threads: stdout so replies can be awaited with a timeout,
        # stderr so librdkafka's logging can never fill the pipe and block the server.
        self._threads = [
            threading.Thread(
                target=self._pump_stdout,
                args=(self._proc.stdout,),
                daemon=True,
                name=f"mockcluster-stdout-{self._proc.pid}",
            ),
            threading.Thread(
                target=self._pump_stderr,
                args=(self._proc.stderr,),
                daemon=True,
                name=f"mockcluster-stderr-{self._proc.pid}",
            ),
        ]
        for t in self._threads:
            t.start()
        try:
            ready = self._next_reply(self.start_timeout, "start")
        except MockClusterError as exc:
            self.close()
            raise MockClusterError(
                f"mock server did not start: {exc}{self._stderr_tail()}", error="START_FAILED"
            ) from None
        if not ready.get("ok") or not ready.get("bootstrap_servers"):
            self.close()
            raise MockClusterError(
                f"mock server failed to start: {ready.get('error')}: {ready.get('message')}"
                f"{self._stderr_tail()}",
                error="START_FAILED",
            )
        self.info = ready
        return self

    def close(self, timeout: float = 5.0) -> int | None:
        """Stop the server by PID: close stdin (graceful), then SIGTERM, then SIGKILL.

        Idempotent. Returns the server's exit status (None if it was never started).
        """
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()  # server destroys the cluster and exits on EOF
            except OSError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout)
        elif proc.stdin is not None and not proc.stdin.closed:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        for t in self._threads:
            t.join(timeout)
        return proc.returncode

    def __enter__(self) -> MockCluster:
        if self._proc is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- facts -------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """Comma-separated ``host:port`` list of the mock brokers."""
        if not self.info:
            raise MockClusterError("MockCluster not started", error="SERVER_GONE")
        return str(self.info["bootstrap_servers"])

    @property
    def broker_ids(self) -> list[int]:
        """Ids of the mock brokers (1..n)."""
        return list(range(1, self.brokers + 1))

    @property
    def pid(self) -> int | None:
        """PID of the server process (None before start)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        """Server exit status, None while it runs."""
        return self._proc.poll() if self._proc is not None else None

    @property
    def stderr_lines(self) -> list[str]:
        """Last lines the server (librdkafka) wrote to stderr, for diagnostics."""
        return list(self._stderr)

    def client_config(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """librdkafka settings for a client (producer, consumer, admin) of this mock cluster.

        ``bootstrap.servers`` plus FAST_FAULT_CONFIG, then ``overrides`` (librdkafka /
        confluent-kafka keys as-is, e.g. ``{"group.id": "g", "error_cb": f}``), which win.
        """
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        conf.update(FAST_FAULT_CONFIG)
        conf.update(overrides or {})
        return conf

    # -- commands ----------------------------------------------------------------------------

    def ping(self) -> None:
        """Round trip to the server; raises if it is gone."""
        self.command("ping")

    def create_topic(self, topic: str, partitions: int = 1, replication_factor: int = 1) -> None:
        """Create ``topic`` (the mock has no CreateTopics API; clients auto-create with 4/rf3)."""
        self.command("create_topic", topic=topic, partitions=partitions, rf=replication_factor)

    def broker_down(self, broker_id: int) -> None:
        """Disconnect ``broker_id`` and refuse new connections; leaders do NOT move."""
        self.command("broker_down", id=broker_id)

    def broker_up(self, broker_id: int) -> None:
        """Let ``broker_id`` accept connections again."""
        self.command("broker_up", id=broker_id)

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of ``broker_id`` by ``rtt_ms`` (0 removes the delay)."""
        self.command("set_rtt", id=broker_id, ms=rtt_ms)

    def partition_set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move the leader of ``topic``/``partition`` (-1: leaderless).

        Note: the mock auto-creates an unknown ``topic``; an unknown partition of an existing
        topic is an error (UNKNOWN_TOPIC_OR_PART).
        """
        self.command("partition_set_leader", topic=topic, partition=partition, id=broker_id)

    def coordinator_set(self, key: str, broker_id: int, key_type: str = "group") -> None:
        """Make ``broker_id`` the coordinator of group (or transactional id) ``key``.

        The mock accepts any id here, including one of no broker (coordinator unavailable).
        """
        self.command("coordinator_set", type=key_type, key=key, id=broker_id)

    def stop(self) -> None:
        """Destroy the mock cluster and let the server exit (close() does this too)."""
        self.command("stop")
        self.close()

    def command(self, cmd: str, **args: Any) -> dict[str, Any]:
        """Send one command and return its reply; raise MockClusterError on an error reply."""
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdin.closed:
            raise MockClusterError("MockCluster not running", error="SERVER_GONE", command=cmd)
        with self._lock:
            self._seq += 1
            seq = self._seq
            line = json.dumps({"cmd": cmd, "seq": seq, **args})
            try:
                proc.stdin.write(line + "\n")
                proc.stdin.flush()
            except OSError as exc:
                raise MockClusterError(
                    f"mock server gone ({exc}){self._stderr_tail()}",
                    error="SERVER_GONE",
                    command=cmd,
                ) from None
            while True:
                reply = self._next_reply(self.command_timeout, cmd)
                if reply.get("seq") == seq:
                    break  # anything else is a late reply to an earlier timed-out command
        if not reply.get("ok"):
            raise MockClusterError(
                f"{cmd}: {reply.get('message') or reply.get('error')}",
                error=str(reply.get("error")),
                code=reply.get("code"),
                command=cmd,
            )
        return reply

    # -- internals ---------------------------------------------------------------------------

    def _next_reply(self, timeout: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise MockClusterError(
                    f"no reply to {what!r} within {timeout:.1f}s{self._stderr_tail()}",
                    error="TIMEOUT",
                    command=what,
                )
            try:
                item = self._replies.get(timeout=remaining)
            except queue.Empty:
                continue
            if item is _EOF:
                self._replies.put(_EOF)  # stay at EOF for later callers
                status = self._proc.poll() if self._proc else None
                if status is None and self._proc is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        status = self._proc.wait(1.0)
                raise MockClusterError(
                    f"mock server closed its output (exit status {status}) during {what!r}"
                    f"{self._stderr_tail()}",
                    error="SERVER_GONE",
                    command=what,
                )
            try:
                reply = json.loads(item)
            except ValueError:
                self._stderr.append(f"[non-JSON stdout] {item.rstrip()}")
                continue
            if isinstance(reply, dict):
                return reply

    def _pump_stdout(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                self._replies.put(line)
        except (OSError, ValueError):
            pass
        finally:
            self._replies.put(_EOF)

    def _pump_stderr(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                self._stderr.append(line.rstrip("\n"))
        except (OSError, ValueError):
            pass

    def _stderr_tail(self, lines: int = 20) -> str:
        tail = list(self._stderr)[-lines:]
        return ("\n--- mock server stderr ---\n" + "\n".join(tail)) if tail else ""
