"""Kafka clusters shared by every test of a run, across pytest-xdist's worker processes.

One process owns them: xdist's controller, or pytest itself without xdist. It starts a cluster
the first time a test asks for it (a run that selects no Kafka test starts no JVM), and stops
every one by PID when the run ends. Workers ask it over a Unix socket and get a description
(ports, PIDs, directories), from which :meth:`LocalKafka.attach` makes a view; the owner's
own tests get the same kind of view, so a test behaves alike with and without xdist. A view
refuses to stop, kill or restart a broker: a test that needs that starts a cluster of its own.

Every JVM is started by one long-lived thread of the owner, with ``PDEATHSIG`` (see
``LocalKafka``): if the run is killed, even with SIGKILL, its clusters die with it.
"""

from __future__ import annotations

import contextlib
import queue
import secrets
import tempfile
import threading
from concurrent.futures import Future
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any

from monitor.dev.localkafka import LocalKafka

__all__ = ["CLUSTERS", "ClusterPool", "PoolClient"]

#: The shared clusters by name: how many brokers. Partitions of ``__consumer_offsets`` are few,
#: so a coordinator is ready fast; ``kafka3``'s has replication factor 3.
CLUSTERS: dict[str, int] = {"kafka": 1, "kafka3": 3}


class ClusterPool:
    """Owns the shared clusters; serves their descriptions locally and to workers."""

    def __init__(self) -> None:
        self._clusters: dict[str, LocalKafka] = {}
        self._failed: dict[str, BaseException] = {}
        self._requests: queue.Queue[tuple[str, Future[dict[str, Any]]] | None] = queue.Queue()
        self._starter = threading.Thread(target=self._start_loop, name="cluster-starter",
                                         daemon=True)
        self._starter.start()
        self._dir = Path(tempfile.mkdtemp(prefix="kafka-monitor-test-pool-"))
        self._authkey = secrets.token_bytes(16)
        self._listener: Listener | None = None
        self._served: dict[str, str] | None = None

    # ---------------------------------------------------------------- owner side

    def describe(self, name: str) -> dict[str, Any]:
        """The running cluster ``name``, started now if it is the first request."""
        if name not in CLUSTERS:
            raise KeyError(f"no shared cluster {name!r} (known: {sorted(CLUSTERS)})")
        done: Future[dict[str, Any]] = Future()
        self._requests.put((name, done))
        return done.result()

    def _start_loop(self) -> None:
        """The one thread that starts JVMs: their parent-death signal follows this thread,
        which lives as long as the run."""
        while (request := self._requests.get()) is not None:
            name, done = request
            try:
                if name in self._failed:
                    raise RuntimeError(f"shared cluster {name!r} failed to start earlier") \
                        from self._failed[name]
                if name not in self._clusters:
                    try:
                        cluster = LocalKafka(CLUSTERS[name], offsets_topic_partitions=4)
                        cluster.start()
                    except BaseException as exc:
                        self._failed[name] = exc
                        raise
                    self._clusters[name] = cluster
                done.set_result(self._clusters[name].describe())
            except BaseException as exc:  # handed to the test that asked
                done.set_exception(exc)

    def close(self) -> None:
        """Stop every cluster (SIGKILL: throw-away data) and the socket."""
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
        self._requests.put(None)
        self._starter.join(120)
        for cluster in self._clusters.values():
            cluster.stop(graceful=False)
        self._clusters.clear()
        with contextlib.suppress(OSError):
            for path in self._dir.iterdir():
                path.unlink()
            self._dir.rmdir()

    # ---------------------------------------------------------------- serving workers

    def serve(self) -> dict[str, str]:
        """Listen for workers; returns what a :class:`PoolClient` needs (strings only, as
        xdist's ``workerinput`` must be)."""
        if self._served is not None:
            return self._served
        address = str(self._dir / "pool.sock")
        self._listener = Listener(address, family="AF_UNIX", authkey=self._authkey)
        threading.Thread(target=self._accept_loop, name="cluster-pool", daemon=True).start()
        self._served = {"address": address, "authkey": self._authkey.hex()}
        return self._served

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while True:
            try:
                conn = self._listener.accept()
            except (OSError, EOFError):
                return  # closed at the end of the run
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: Connection) -> None:
        with conn:
            try:
                name = conn.recv()
                try:
                    conn.send(("ok", self.describe(name)))
                except BaseException as exc:
                    conn.send(("error", f"{type(exc).__name__}: {exc}"))
            except (OSError, EOFError):
                pass


class PoolClient:
    """A worker's way to the owner's pool."""

    def __init__(self, address: str, authkey: str) -> None:
        self.address = address
        self.authkey = bytes.fromhex(authkey)

    def describe(self, name: str) -> dict[str, Any]:
        with Client(self.address, family="AF_UNIX", authkey=self.authkey) as conn:
            conn.send(name)
            status, value = conn.recv()
        if status != "ok":
            raise RuntimeError(f"shared cluster {name!r}: {value}")
        return value  # type: ignore[no-any-return]
