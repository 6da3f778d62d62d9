"""A real ZooKeeper + Apache Kafka 0.9.0.1 cluster running as local ``java`` subprocesses.

Used by the real-Kafka tests (``tests/harness/kafka_fixtures.py``) and by ``make demo``.

Design choices, and why:

* Every JVM is started directly with ``java -cp ...`` (not ``bin/*.sh``: ``kafka-server-start.sh``
  breaks on Java 17), on ports picked at run time (other services on the machine own some fixed
  ports, and several clusters may run at once).
* Every process is stopped by the handle we got when starting it (SIGTERM, wait, SIGKILL); never
  by name, because other Kafka/ZooKeeper processes may be running on the same machine.
* A finalizer (also run at interpreter exit) SIGKILLs whatever is still running, and on Linux each
  JVM gets ``PDEATHSIG=SIGKILL`` (via ``setpriv``) so that even a SIGKILLed test run leaves no
  orphan JVMs. Caveat: Linux delivers the parent-death signal when the *thread* that started the
  JVM exits, so start/restart brokers from a long-lived thread (the main thread in pytest and in
  the demo), or pass ``die_with_parent=False``.
* Readiness is checked with the Kafka wire protocol itself (Metadata v0 / GroupCoordinator v0
  sent to each broker in turn), not with librdkafka: a librdkafka client asks *some* broker, while
  "the cluster is ready" means *every* running broker's metadata cache lists every running
  broker and every partition has a leader.
* Settings that make failure scenarios fast (measured on this machine, see ``_BROKER_DEFAULTS``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any

from . import dist

__all__ = [
    "BrokerInfo",
    "LocalKafka",
    "LocalKafkaError",
    "PartitionState",
]

_HOST = "127.0.0.1"
OFFSETS_TOPIC = "__consumer_offsets"

# Broker settings on top of the ones derived from the cluster layout. Why each one:
_BROKER_DEFAULTS: dict[str, str] = {
    # ZooKeeper session of a broker: a SIGKILLed broker is noticed (the controller moves its
    # leaders and removes it from every ISR) when its session expires. 0.9 default is 6000 ms;
    # 4000 ms keeps kill tests short while leaving room for GC pauses on a busy 2-CPU machine
    # (ZooKeeper runs with tickTime=500, so sessions between 1 s and 10 s are allowed).
    # Measured here: leaders moved and ISR shrunk in client metadata 3.7-4.5 s after SIGKILL.
    "zookeeper.session.timeout.ms": "4000",
    "zookeeper.connection.timeout.ms": "15000",
    # A follower that is alive but not fetching (hung, partitioned) leaves the ISR after this
    # long (0.9 default 10000 ms); must stay well above replica.fetch.wait.max.ms (500 ms).
    # Not involved after a SIGKILL (see above) and not measured. Note that ISR changes made by
    # leaders (this shrink, and re-expansion after a restart) reach the metadata caches only
    # after a hard-coded 5 s delay in 0.9: a restarted broker is back in every ISR in client
    # metadata 6.6-7.3 s after start_broker() returns (measured).
    "replica.lag.time.max.ms": "4000",
    # Graceful stop: controlled shutdown is retried with a 5 s backoff by default.
    "controlled.shutdown.retry.backoff.ms": "500",
    "controlled.shutdown.max.retries": "2",
    # Small thread pools: up to 4 brokers share a 2-CPU test machine.
    "num.network.threads": "2",
    "num.io.threads": "4",
    "background.threads": "4",
    "num.replica.fetchers": "1",
    # The log cleaner (needed: __consumer_offsets is compacted) allocates its dedupe buffer on
    # the heap at start-up, 128 MiB by default: half of the 256 MiB heap.
    "log.cleaner.dedupe.buffer.size": "16777216",
    "log.cleaner.threads": "1",
    # Auto-created topics (producer/consumer metadata requests) get one partition.
    "num.partitions": "1",
    "default.replication.factor": "1",
}


class LocalKafkaError(RuntimeError):
    """The local cluster could not be started, or an operation on it failed or timed out."""


@dataclass(frozen=True)
class BrokerInfo:
    """Snapshot of one broker: id, Kafka port, JMX port, PID (``None`` if never started)."""

    id: int
    port: int
    jmx_port: int
    pid: int | None
    running: bool
    ssl_port: int | None = None  # the SSL listener's port, when the cluster has one


@dataclass(frozen=True)
class PartitionState:
    """One partition as a broker reports it in Metadata v0 (leader -1 means no leader)."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: int


@dataclass
class _Node:
    """One JVM: ZooKeeper or a broker."""

    name: str
    directory: Path
    port: int
    jmx_port: int = 0
    broker_id: int | None = None
    proc: subprocess.Popen[bytes] | None = None
    ssl_port: int | None = None
    pid: int | None = None  # of a JVM another process started (an attached cluster)

    @property
    def log_path(self) -> Path:
        return self.directory / "console.log"

    @property
    def running(self) -> bool:
        if self.proc is None:
            return self.pid is not None and _pid_alive(self.pid)
        return self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


# --------------------------------------------------------------------------- process handling

_LIVE_PROCS: set[subprocess.Popen[bytes]] = set()
_LIVE_LOCK = threading.Lock()


def _kill_procs(procs: Iterable[subprocess.Popen[bytes]]) -> None:
    """SIGKILL and reap the given processes (only ours: these are our Popen handles)."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.kill()
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.wait(timeout=10)
        with _LIVE_LOCK:
            _LIVE_PROCS.discard(proc)


@atexit.register
def _kill_all_at_exit() -> None:
    with _LIVE_LOCK:
        procs = list(_LIVE_PROCS)
    _kill_procs(procs)


def _terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM, wait up to ``timeout`` s, then SIGKILL. Works on our handle, i.e. by PID."""
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    _kill_procs([proc])


def _pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not reaped by its parent, is not running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _pdeathsig_prefix() -> list[str]:
    setpriv = shutil.which("setpriv")
    if setpriv is None or os.uname().sysname != "Linux":
        return []
    return [setpriv, "--pdeathsig", "KILL", "--"]


def _remove_orphaned_work_dirs() -> None:
    """Delete temporary work dirs left by runs that were killed before ``stop()`` (their JVMs
    died with them, see PDEATHSIG): ``localkafka-<pid>-*`` whose creating process is gone."""
    for path in Path(tempfile.gettempdir()).glob("localkafka-*-*"):
        match = re.fullmatch(r"localkafka-(\d+)-.+", path.name)
        if not match or not (path / "log4j.properties").is_file():
            continue
        try:
            os.kill(int(match.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass  # alive (or not ours to check): leave it


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports free right now (held open together so they cannot repeat)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((_HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection((_HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


# --------------------------------------------------------------------------- wire protocol


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _unpack(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def int16(self) -> int:
        return int(self._unpack(">h"))

    def int32(self) -> int:
        return int(self._unpack(">i"))

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            return ""
        value = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return value

    def int32_array(self) -> tuple[int, ...]:
        return tuple(self.int32() for _ in range(self.int32()))


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _request(port: int, api_key: int, body: bytes, timeout: float = 3.0) -> _Reader:
    """Send one v0 request to the broker on ``port`` and return its response (after the id)."""
    correlation_id = 1
    header = struct.pack(">hhi", api_key, 0, correlation_id) + _string("localkafka-harness")
    payload = header + body
    with socket.create_connection((_HOST, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size_raw = _recv_exact(sock, 4)
        (size,) = struct.unpack(">i", size_raw)
        reader = _Reader(_recv_exact(sock, size))
    if reader.int32() != correlation_id:
        raise LocalKafkaError("unexpected correlation id")
    return reader


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        buf.extend(chunk)
    return bytes(buf)


def _metadata(port: int, topics: list[str] | None = None) -> tuple[set[int], list[PartitionState]]:
    """Metadata v0 from one broker: (live broker ids, partitions).

    ``topics=None`` asks for all topics, which never auto-creates anything; naming a topic
    auto-creates it (``auto.create.topics.enable=true``), which is how ``__consumer_offsets`` is
    created with the broker's own settings.
    """
    names = topics or []
    body = struct.pack(">i", len(names)) + b"".join(_string(t) for t in names)
    r = _request(port, 3, body)
    brokers = set()
    for _ in range(r.int32()):
        brokers.add(r.int32())
        r.string()
        r.int32()
    partitions = []
    for _ in range(r.int32()):
        topic_error = r.int16()
        topic = r.string()
        n_parts = r.int32()
        if n_parts == 0:
            partitions.append(PartitionState(topic, -1, -1, (), (), topic_error))
        for _ in range(n_parts):
            error = r.int16()
            pid = r.int32()
            leader = r.int32()
            replicas = r.int32_array()
            isr = r.int32_array()
            partitions.append(PartitionState(topic, pid, leader, replicas, isr, error))
    return brokers, partitions


def _group_coordinator_error(port: int, group: str) -> int:
    """GroupCoordinator v0: 0 once the coordinator for ``group`` has loaded its offsets."""
    return _request(port, 10, _string(group)).int16()


# --------------------------------------------------------------------------- the cluster


class LocalKafka:
    """ZooKeeper plus ``num_brokers`` Kafka 0.9.0.1 brokers, each a local ``java`` process.

    Use as a context manager (``with LocalKafka(3) as kafka: ...``) or call ``start()`` and
    ``stop()``. Broker ids are ``0 .. num_brokers-1``; every port (Kafka, JMX, ZooKeeper) is
    picked free at ``start()``. Data and logs go to ``work_dir`` (a temporary directory removed by
    ``stop()`` unless one was given or ``keep_work_dir`` is set); each process writes its log to
    ``<work_dir>/<node>/console.log``.
    """

    def __init__(
        self,
        num_brokers: int = 1,
        *,
        work_dir: str | os.PathLike[str] | None = None,
        offsets_topic_partitions: int = 4,
        broker_props: Mapping[str, object] | None = None,
        ssl: Mapping[str, object] | None = None,
        heap: str = "256m",
        startup_timeout: float = 90.0,
        keep_work_dir: bool = False,
        die_with_parent: bool = True,
    ) -> None:
        if num_brokers < 1:
            raise ValueError("num_brokers must be >= 1")
        self.num_brokers = num_brokers
        self.offsets_topic_partitions = offsets_topic_partitions
        self.broker_props = {k: _prop(v) for k, v in (broker_props or {}).items()}
        # With ``ssl`` (the brokers' ``ssl.*`` properties: keystore, truststore, passwords,
        # client auth) every broker also listens for SSL on a port of its own; the cluster's
        # own checks and ``bootstrap_servers`` stay on PLAINTEXT.
        self.ssl_props = {k: _prop(v) for k, v in (ssl or {}).items()}
        self.heap = heap
        self.startup_timeout = startup_timeout
        self._work_dir_arg = Path(work_dir) if work_dir is not None else None
        self._keep_work_dir = keep_work_dir or self._work_dir_arg is not None
        self._prefix = _pdeathsig_prefix() if die_with_parent else []
        self.work_dir: Path | None = None
        self._zk: _Node | None = None
        self._brokers: dict[int, _Node] = {}
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.RLock()
        self._java = ""
        self._cp = ""
        self._attached = False
        # Kills every JVM still running when this object is collected or the interpreter exits.
        self._finalizer = weakref.finalize(self, _kill_procs, self._procs)

    # ------------------------------------------------------------------ sharing

    def describe(self) -> dict[str, Any]:
        """What another process needs to use this running cluster (:meth:`attach`): plain
        data (ports, PIDs, directories), picklable and JSON-able."""
        if self._zk is None or self.work_dir is None:
            raise LocalKafkaError("not started")
        return {
            "offsets_topic_partitions": self.offsets_topic_partitions,
            "ssl_props": dict(self.ssl_props),
            "work_dir": str(self.work_dir),
            "zookeeper": {"port": self._zk.port, "pid": self._zk.proc.pid if self._zk.proc
                          else self._zk.pid},
            "brokers": [
                {"id": bid, "port": n.port, "jmx_port": n.jmx_port, "ssl_port": n.ssl_port,
                 "pid": n.proc.pid if n.proc is not None else n.pid}
                for bid, n in sorted(self._brokers.items())
            ],
        }

    @classmethod
    def attach(cls, description: Mapping[str, Any]) -> LocalKafka:
        """A view of a cluster another process started and owns (:meth:`describe`): topics,
        clients, metadata, JMX and logs work as on the owner's object; stopping, killing or
        restarting a broker does not, because other users of the cluster would see it (a test
        that does so starts a cluster of its own). ``stop()`` leaves the cluster running."""
        brokers = description["brokers"]
        view = cls(len(brokers), offsets_topic_partitions=description["offsets_topic_partitions"],
                   ssl=description.get("ssl_props") or None, die_with_parent=False)
        view._attached = True
        view.work_dir = Path(description["work_dir"])
        view._keep_work_dir = True
        zk = description["zookeeper"]
        view._zk = _Node("zookeeper", view.work_dir / "zookeeper", zk["port"], pid=zk["pid"])
        for b in brokers:
            view._brokers[b["id"]] = _Node(
                f"broker-{b['id']}", view.work_dir / f"broker-{b['id']}", b["port"],
                jmx_port=b["jmx_port"], broker_id=b["id"], ssl_port=b["ssl_port"], pid=b["pid"])
        view._java = dist.java_executable()
        view._cp = dist.classpath(dist.ensure_kafka_dist())
        return view

    def _own(self, action: str) -> None:
        if self._attached:
            raise LocalKafkaError(
                f"cannot {action}: this cluster is shared with other users (an attached "
                "view); start a cluster of your own to stop, kill or restart brokers")

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> LocalKafka:
        """Start ZooKeeper and all brokers; return once every running broker's metadata lists
        every broker and ``__consumer_offsets`` exists (created by the broker itself, with its
        compaction settings) with a leader for each partition that GroupCoordinator requests
        resolve to, so the first consumer group does not pay for creating it."""
        with self._lock:
            if self._zk is not None:
                raise LocalKafkaError("already started")
            self._own("start it")
            home = dist.ensure_kafka_dist()
            self._java = dist.java_executable()
            self._cp = dist.classpath(home)
            if self._work_dir_arg is not None:
                self.work_dir = self._work_dir_arg
                self.work_dir.mkdir(parents=True, exist_ok=True)
            else:
                _remove_orphaned_work_dirs()
                self.work_dir = Path(tempfile.mkdtemp(prefix=f"localkafka-{os.getpid()}-"))
            try:
                self._write_log4j()
                self._start_zookeeper()
                self._start_brokers(list(range(self.num_brokers)))
                self._create_offsets_topic()
            except BaseException as exc:
                # Keep the logs of a failed start for diagnosis.
                keep, self._keep_work_dir = self._keep_work_dir, True
                self.stop(graceful=False)
                self._keep_work_dir = keep
                exc.add_note(f"LocalKafka logs kept in {self.work_dir}")
                raise
        return self

    def stop(self, timeout: float = 20.0, graceful: bool = True) -> None:
        """Stop every process this object started, by PID: brokers first (SIGTERM, in parallel,
        up to ``timeout`` s each for controlled shutdown, then SIGKILL), then ZooKeeper.
        ``graceful=False`` SIGKILLs at once (for throw-away test clusters: no 1-4 s controlled
        shutdown). Idempotent. Removes the temporary work directory. On an attached view,
        forgets the cluster and leaves it to its owner."""
        with self._lock:
            if self._attached:
                self._zk = None
                self._brokers = {}
                return
            if not graceful:
                _kill_procs(list(self._procs))
            brokers = [n for n in self._brokers.values() if n.proc is not None]
            threads = [
                threading.Thread(target=_terminate, args=(n.proc, timeout), daemon=True)
                for n in brokers
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if self._zk is not None and self._zk.proc is not None:
                _terminate(self._zk.proc, 5.0)
            _kill_procs(list(self._procs))
            self._procs.clear()
            self._zk = None
            self._brokers = {}
            if self.work_dir is not None and not self._keep_work_dir:
                shutil.rmtree(self.work_dir, ignore_errors=True)
                self.work_dir = None

    # ------------------------------------------------------------------ properties

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of every broker (including stopped ones, as a client would be given)."""
        return ",".join(f"{_HOST}:{n.port}" for n in self._brokers.values())

    @property
    def ssl_bootstrap_servers(self) -> str:
        """``host:port`` of every broker's SSL listener (a cluster started with ``ssl``)."""
        if not self.ssl_props:
            raise LocalKafkaError("started without an SSL listener")
        return ",".join(f"{_HOST}:{n.ssl_port}" for n in self._brokers.values())

    @property
    def zookeeper_connect(self) -> str:
        """ZooKeeper connect string (for TopicCommand, Burrow, MirrorMaker ...)."""
        if self._zk is None:
            raise LocalKafkaError("not started")
        return f"{_HOST}:{self._zk.port}"

    @property
    def brokers(self) -> list[BrokerInfo]:
        """Snapshot of every broker, ordered by id."""
        return [
            BrokerInfo(
                id=bid,
                port=n.port,
                jmx_port=n.jmx_port,
                pid=n.proc.pid if n.proc is not None else n.pid,
                running=n.running,
                ssl_port=n.ssl_port,
            )
            for bid, n in sorted(self._brokers.items())
        ]

    def broker(self, broker_id: int) -> BrokerInfo:
        """Snapshot of one broker."""
        for info in self.brokers:
            if info.id == broker_id:
                return info
        raise KeyError(broker_id)

    def client_config(self, **overrides: object) -> dict[str, object]:
        """librdkafka settings for this 0.9 cluster, updated with ``overrides``
        (e.g. ``client_config(**{"group.id": "g"})``).

        * ``api.version.request=false`` + ``broker.version.fallback=0.9.0.1``: 0.9 brokers do
          not implement ApiVersions, so librdkafka must be told which protocol versions to use.
        * ``topic.metadata.refresh.interval.ms=5000`` (default 300000): a consumer subscribed to
          a topic that is created (or gets partitions) later sees it within seconds.

        Consumers also need ``session.timeout.ms`` <= 30000 (broker maximum in 0.9; librdkafka's
        45 s default never joins); ``monitor.dev.localkafka.workload`` uses 6000.
        """
        config: dict[str, object] = {
            "bootstrap.servers": self.bootstrap_servers,
            "api.version.request": False,
            "broker.version.fallback": dist.KAFKA_VERSION,
            "topic.metadata.refresh.interval.ms": 5000,
        }
        config.update(overrides)
        return config

    def jmx_service_url(self, broker_id: int) -> str:
        """JMX service URL of a broker, e.g. for ``jmxquery.JMXConnection``."""
        port = self._broker_node(broker_id).jmx_port
        return f"service:jmx:rmi:///jndi/rmi://{_HOST}:{port}/jmxrmi"

    def log_path(self, broker_id: int | None = None) -> Path:
        """Console log of a broker (or of ZooKeeper when ``broker_id`` is None)."""
        node = self._zk if broker_id is None else self._broker_node(broker_id)
        if node is None:
            raise LocalKafkaError("not started")
        return node.log_path

    # ------------------------------------------------------------------ topics

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, object] | None = None,
        timeout: float = 30.0,
        replica_assignment: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Create a topic with ``kafka.admin.TopicCommand`` (0.9 has no CreateTopics API) and
        wait until every partition has a leader in every running broker's metadata.
        ``replica_assignment`` (replicas per partition, preferred leader first) replaces
        ``partitions`` and ``replication_factor``: how a canary topic gets a leader on every
        broker."""
        args = ["--create", "--topic", name]
        if replica_assignment is not None:
            partitions = len(replica_assignment)
            args += ["--replica-assignment",
                     ",".join(":".join(str(b) for b in r) for r in replica_assignment)]
        else:
            args += ["--partitions", str(partitions),
                     "--replication-factor", str(replication_factor)]
        for key, value in (config or {}).items():
            args += ["--config", f"{key}={_prop(value)}"]
        out = self._topic_command(args)
        if "Created topic" not in out:
            raise LocalKafkaError(f"TopicCommand did not create {name!r}: {out.strip()}")
        self._wait(
            lambda: self._topic_ready(name, partitions),
            timeout,
            f"every partition of {name!r} to have a leader",
        )

    def add_partitions(self, name: str, total: int) -> None:
        """Grow ``name`` to ``total`` partitions (0.9 has no CreatePartitions API)."""
        self._topic_command(["--alter", "--topic", name, "--partitions", str(total)])

    def delete_topic(self, name: str, timeout: float = 30.0) -> None:
        """Delete a topic (``delete.topic.enable=true``) and wait until no running broker lists
        it. Deletion needs every replica's broker running (a 0.9 limitation)."""
        out = self._topic_command(["--delete", "--topic", name])
        if "marked for deletion" not in out:
            raise LocalKafkaError(f"TopicCommand did not delete {name!r}: {out.strip()}")
        self._wait(
            lambda: all(
                all(p.topic != name for p in _metadata(n.port)[1]) for n in self._running()
            ),
            timeout,
            f"topic {name!r} to disappear",
        )

    def partitions(
        self, topic: str | None = None, broker_id: int | None = None
    ) -> list[PartitionState]:
        """Partition leaders/replicas/ISR as one broker (default: first running) reports them.
        Never auto-creates ``topic``."""
        node = self._broker_node(broker_id) if broker_id is not None else self._running()[0]
        parts = _metadata(node.port)[1]
        return [p for p in parts if topic is None or p.topic == topic]

    def wait_fully_replicated(self, timeout: float = 60.0) -> None:
        """Wait until, in every running broker's metadata, every partition of every topic has
        a leader, all its assigned replicas alive and all of them in the ISR. After a broker
        restart this takes ~5-8 s: 0.9 leaders publish ISR changes with a 5 s delay."""

        def replicated() -> bool:
            for node in self._running():
                brokers, parts = _metadata(node.port)
                for p in parts:
                    if p.error or p.leader < 0 or set(p.isr) != set(p.replicas):
                        return False
                    if not set(p.replicas) <= brokers:
                        return False
            return True

        self._wait(replicated, timeout, "every partition to be fully replicated")

    # ------------------------------------------------------------------ broker faults

    def kill_broker(self, broker_id: int, wait: bool = True, timeout: float = 30.0) -> None:
        """SIGKILL a broker (a crash: no controlled shutdown, its ZooKeeper session lingers until
        ``zookeeper.session.timeout.ms``). With ``wait``, return once no surviving broker lists
        it any more, i.e. leaders have moved and the ISR has shrunk."""
        self._own("kill a broker")
        node = self._broker_node(broker_id)
        if node.proc is None or not node.running:
            raise LocalKafkaError(f"broker {broker_id} is not running")
        _kill_procs([node.proc])
        if wait:
            self._wait_broker_gone(broker_id, timeout)

    def stop_broker(self, broker_id: int, timeout: float = 30.0) -> None:
        """Stop a broker gracefully (SIGTERM → controlled shutdown moves its leaders first;
        SIGKILL after ``timeout``) and wait until no surviving broker lists it."""
        self._own("stop a broker")
        node = self._broker_node(broker_id)
        if node.proc is None or not node.running:
            raise LocalKafkaError(f"broker {broker_id} is not running")
        _terminate(node.proc, timeout)
        self._wait_broker_gone(broker_id, timeout)

    def start_broker(self, broker_id: int, timeout: float | None = None) -> None:
        """Restart a stopped/killed broker with the same id, ports and log dir; return once
        every running broker (itself included) lists it in its metadata."""
        self._own("restart a broker")
        with self._lock:
            node = self._broker_node(broker_id)
            if node.running:
                raise LocalKafkaError(f"broker {broker_id} is already running")
            self._launch(node, self._broker_cmd(node))
            self._wait_brokers_registered([node], timeout or self.startup_timeout)

    # ------------------------------------------------------------------ internals

    def _broker_node(self, broker_id: int) -> _Node:
        try:
            return self._brokers[broker_id]
        except KeyError:
            raise KeyError(f"no broker {broker_id}") from None

    def _running(self) -> list[_Node]:
        nodes = [n for _, n in sorted(self._brokers.items()) if n.running]
        if not nodes:
            raise LocalKafkaError("no broker is running")
        return nodes

    def _write_log4j(self) -> None:
        assert self.work_dir is not None
        (self.work_dir / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, stdout\n"
            "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.kafka.request.logger=WARN\n"
            "log4j.logger.kafka.network.RequestChannel$=WARN\n"
            "log4j.logger.kafka.controller=INFO\n"
            "log4j.logger.state.change.logger=INFO\n"
            "log4j.logger.org.apache.zookeeper=WARN\n"
            "log4j.logger.org.I0Itec.zkclient=WARN\n"
        )
        (self.work_dir / "tools-log4j.properties").write_text(
            "log4j.rootLogger=WARN, stderr\n"
            "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.appender.stderr.Target=System.err\n"
        )

    def _jvm(self, log4j: str, heap: str | None = None) -> list[str]:
        assert self.work_dir is not None
        heap = heap or self.heap
        return [
            self._java,
            f"-Xmx{heap}",
            f"-Xms{heap}",
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{self.work_dir / log4j}",
            # Kafka 0.9 unmaps index files through sun.nio.ch.DirectBuffer.
            "--add-exports",
            "java.base/sun.nio.ch=ALL-UNNAMED",
        ]

    def _launch(self, node: _Node, cmd: list[str]) -> None:
        node.directory.mkdir(parents=True, exist_ok=True)
        with open(node.log_path, "ab") as log:
            log.write(f"\n===== {time.strftime('%H:%M:%S')} {' '.join(cmd)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                [*self._prefix, *cmd],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=node.directory,
                # Own session: Ctrl-C on the terminal reaches pytest, which then stops us.
                start_new_session=True,
            )
        node.proc = proc
        self._procs.add(proc)
        with _LIVE_LOCK:
            _LIVE_PROCS.add(proc)

    def _start_zookeeper(self) -> None:
        assert self.work_dir is not None
        for attempt in range(3):
            (port,) = _free_ports(1)
            node = _Node("zookeeper", self.work_dir / "zookeeper", port)
            node.directory.mkdir(parents=True, exist_ok=True)
            props = node.directory / "zookeeper.properties"
            props.write_text(
                _props(
                    {
                        "dataDir": node.directory / "data",
                        "clientPort": port,
                        "clientPortAddress": _HOST,
                        # tickTime 500 ms allows broker sessions from 1 s to 10 s.
                        "tickTime": 500,
                        "maxClientCnxns": 0,
                    }
                )
            )
            cmd = [
                *self._jvm("log4j.properties", heap="128m"),
                "-cp",
                self._cp,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(props),
            ]
            self._launch(node, cmd)
            self._zk = node
            try:
                self._wait(partial(_zk_ok, node.port), 30.0, "ZooKeeper", watch=[node])
                return
            except LocalKafkaError:
                if node.proc is not None:
                    _kill_procs([node.proc])
                if attempt == 2 or "BindException" not in node.log_tail(200):
                    raise

    def _start_brokers(self, ids: list[int]) -> None:
        assert self.work_dir is not None
        ports = _free_ports(2 * len(ids))
        ssl_ports = _free_ports(len(ids)) if self.ssl_props else []
        nodes = []
        for i, bid in enumerate(ids):
            node = _Node(
                f"broker-{bid}",
                self.work_dir / f"broker-{bid}",
                port=ports[2 * i],
                jmx_port=ports[2 * i + 1],
                broker_id=bid,
                ssl_port=ssl_ports[i] if ssl_ports else None,
            )
            self._brokers[bid] = node
            nodes.append(node)
        for node in nodes:
            self._launch(node, self._broker_cmd(node))
        for attempt in range(3):
            try:
                self._wait_brokers_registered(nodes, self.startup_timeout)
                return
            except LocalKafkaError:
                # A port picked free may have been taken before the JVM bound it: retry those.
                clashed = [n for n in nodes if not n.running and "BindException" in n.log_tail(200)]
                if attempt == 2 or not clashed:
                    raise
                for node in clashed:
                    node.port, node.jmx_port = _free_ports(2)
                    if node.ssl_port is not None:
                        (node.ssl_port,) = _free_ports(1)
                    self._launch(node, self._broker_cmd(node))

    def _broker_cmd(self, node: _Node) -> list[str]:
        assert node.broker_id is not None and self._zk is not None
        props = {
            "broker.id": node.broker_id,
            "listeners": f"PLAINTEXT://{_HOST}:{node.port}",
            "advertised.host.name": _HOST,
            "advertised.port": node.port,
            "log.dirs": node.directory / "data",
            "zookeeper.connect": self.zookeeper_connect,
            "offsets.topic.replication.factor": min(3, self.num_brokers),
            "offsets.topic.num.partitions": self.offsets_topic_partitions,
            "group.min.session.timeout.ms": 1000,
            "auto.create.topics.enable": "true",
            "delete.topic.enable": "true",
            **_BROKER_DEFAULTS,
            **self.broker_props,
        }
        if node.ssl_port is not None:
            listeners = f"PLAINTEXT://{_HOST}:{node.port},SSL://{_HOST}:{node.ssl_port}"
            del props["advertised.host.name"], props["advertised.port"]
            props.update({"listeners": listeners, "advertised.listeners": listeners,
                          **self.ssl_props})
        path = node.directory / "server.properties"
        node.directory.mkdir(parents=True, exist_ok=True)
        path.write_text(_props(props))
        jmx = [
            "-Dcom.sun.management.jmxremote",
            f"-Dcom.sun.management.jmxremote.port={node.jmx_port}",
            f"-Dcom.sun.management.jmxremote.rmi.port={node.jmx_port}",
            f"-Dcom.sun.management.jmxremote.host={_HOST}",
            f"-Djava.rmi.server.hostname={_HOST}",
            "-Dcom.sun.management.jmxremote.authenticate=false",
            "-Dcom.sun.management.jmxremote.ssl=false",
        ]
        return [*self._jvm("log4j.properties"), *jmx, "-cp", self._cp, "kafka.Kafka", str(path)]

    def _wait(
        self,
        predicate: Callable[[], bool],
        timeout: float,
        what: str,
        watch: Iterable[_Node] | None = None,
    ) -> None:
        """Poll ``predicate`` (exceptions count as False) until true; fail early with the log
        tail if a watched process died."""
        watch = list(watch or [])
        deadline = time.monotonic() + timeout
        last_exc: BaseException | None = None
        delay = 0.05
        while True:
            try:
                if predicate():
                    return
            except (OSError, struct.error, LocalKafkaError) as exc:
                last_exc = exc
            dead = [n for n in watch if not n.running]
            if dead:
                logs = "\n".join(f"--- {n.name} ({n.log_path}):\n{n.log_tail()}" for n in dead)
                raise LocalKafkaError(
                    f"{', '.join(n.name for n in dead)} exited while waiting for {what}\n{logs}"
                )
            if time.monotonic() > deadline:
                hint = f" (last error: {last_exc!r})" if last_exc else ""
                raise LocalKafkaError(f"timed out after {timeout:.0f}s waiting for {what}{hint}")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)

    def _wait_brokers_registered(self, nodes: list[_Node], timeout: float) -> None:
        def ready() -> bool:
            running = self._running()
            expected = {n.broker_id for n in running}
            return all(_metadata(n.port)[0] == expected for n in running)

        ids = ", ".join(str(n.broker_id) for n in nodes)
        self._wait(ready, timeout, f"broker(s) {ids} in every broker's metadata", watch=nodes)

    def _wait_broker_gone(self, broker_id: int, timeout: float) -> None:
        def gone() -> bool:
            nodes = [n for n in self._brokers.values() if n.running]
            return all(broker_id not in _metadata(n.port)[0] for n in nodes)

        self._wait(gone, timeout, f"broker {broker_id} to leave every broker's metadata")

    def _topic_ready(self, name: str, partitions: int) -> bool:
        for node in self._running():
            parts = [p for p in _metadata(node.port)[1] if p.topic == name]
            if len(parts) != partitions or any(p.error or p.leader < 0 for p in parts):
                return False
        return True

    def _create_offsets_topic(self) -> None:
        first = self._running()[0]
        probes = _groups_covering(self.offsets_topic_partitions)

        def ready() -> bool:
            _metadata(first.port, [OFFSETS_TOPIC])  # auto-creates it with the broker's config
            if not self._topic_ready(OFFSETS_TOPIC, self.offsets_topic_partitions):
                return False
            return all(_group_coordinator_error(first.port, g) == 0 for g in probes)

        self._wait(ready, self.startup_timeout, f"{OFFSETS_TOPIC} to be ready")

    def _topic_command(self, args: list[str]) -> str:
        cmd = [
            *self._jvm("tools-log4j.properties", heap="128m"),
            "-cp",
            self._cp,
            "kafka.admin.TopicCommand",
            "--zookeeper",
            self.zookeeper_connect,
            *args,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        out = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise LocalKafkaError(f"TopicCommand {' '.join(args)} failed: {out.strip()}")
        return out


def _java_string_hash(value: str) -> int:
    h = 0
    for unit in value.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def _groups_covering(partitions: int) -> list[str]:
    """Group names whose coordinator lives on each offsets-topic partition in turn
    (Kafka: ``abs(groupId.hashCode) % offsets.topic.num.partitions``)."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < partitions:
        name = f"localkafka-probe-{i}"
        found.setdefault((_java_string_hash(name) & 0x7FFFFFFF) % partitions, name)
        i += 1
    return [found[p] for p in sorted(found)]


def _zk_ok(port: int) -> bool:
    with socket.create_connection((_HOST, port), timeout=1.0) as sock:
        sock.sendall(b"ruok")
        return sock.recv(4) == b"imok"


def _prop(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _props(values: Mapping[str, object]) -> str:
    return "".join(f"{k}={_prop(v)}\n" for k, v in values.items())
