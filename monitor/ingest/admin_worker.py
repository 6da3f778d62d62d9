"""Consumer-group Admin-API calls, run in a child process that may die without harm.

Why a process: librdkafka 2.16 (confluent-kafka 2.16.1) can abort the whole process with
``rd_kafka_enq_once_del_source_return: Assertion 'eonce->refcnt > 0' failed`` (SIGABRT,
librdkafka issue #4605) when an AdminClient that had a group request time out on a dead
coordinator is used again after the coordinator moved; reproduced here against the mock
cluster with librdkafka's default reconnect settings. An abort in the service would take every
collector and the HTTP server down with it; in this worker it costs one round of some groups'
offsets (they are reported stale) and a new worker is started for the next round.

The worker only talks to Kafka: it gets plain data (the librdkafka configuration, group names,
partitions) and sends back plain data (names, ints, strings), so nothing librdkafka-owned
crosses the process boundary and the collector keeps all the logic.

It is a plain ``python -m monitor.ingest.admin_worker`` subprocess talking over a socket
pair, not a ``multiprocessing`` process: the ``spawn`` start method also starts a resource
tracker process that outlives the service for a moment, and re-imports the service's main
module in the child. The configuration (which may hold SASL or TLS key passwords) goes over the
socket, never on the command line.

Protocol: ``multiprocessing.connection`` messages (pickled tuples, lists, dicts, str, int,
float, None) over the socket.

* parent -> worker: first ``(librdkafka config, log setup)``, then ``(op, args)`` with ``op``
  one of ``list``, ``describe``, ``offsets``. The worker ends when the socket closes (the
  collector, or the whole service, is gone); the collector never stops it gracefully but
  SIGKILLs it (see :meth:`AdminWorker.kill`).
* worker -> parent: any number of ``("items", [(group, result), ...])`` as results arrive (so
  a worker that dies mid-round still delivered what it had), then ``("done", summary)``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_ready
from pathlib import Path
from typing import Any

from monitor.logs import JsonFormatter, RepeatLimit, TextFormatter

#: An error as plain data: (librdkafka error name or exception type, message).
ErrorInfo = tuple[str, str]
#: (topic, partition, offset, error name or None); offset -1001 = no committed offset.
OffsetEntry = tuple[str, int, int, str | None]
Items = Callable[[list[tuple[str, Any]]], None]

#: Error name of a request never sent because the op's time budget ran out.
BUDGET_EXHAUSTED = "_ROUND_BUDGET"
TIMED_OUT = "_TIMED_OUT"

_STATE_NAMES = {
    "UNKNOWN": "Unknown",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "STABLE": "Stable",
    "DEAD": "Dead",
    "EMPTY": "Empty",
}
#: The directory holding the ``monitor`` package, so the child imports this same code.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class AdminWorkerError(RuntimeError):
    """The worker process died, hung past its deadline, or could not be started."""


# ============================================================================ parent side


class AdminWorker:
    """The collector's handle on one worker process: start it, run ops on it, kill it.

    ``config`` is a complete librdkafka configuration (built with ``client_config``);
    the worker creates one AdminClient from it and reuses it until the process ends.
    """

    def __init__(self, config: dict[str, Any], name: str) -> None:
        self.name = name
        self._config = config
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start the worker. A fresh interpreter, not a fork: a fork of a process running
        librdkafka threads would inherit locks held by threads that do not exist in it."""
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno()), self.name],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # it has nothing to say there; logs go to stderr
                pass_fds=(theirs.fileno(),),
                env=env,
            )
        finally:
            theirs.close()
        self._process = process
        self._conn = Connection(ours.detach())
        # The error callback stays here: it is this process's, and a function does not
        # cross the socket (the worker's own errors come back as plain data).
        config = {k: v for k, v in self._config.items() if k != "error_cb"}
        self._conn.send((config, _log_setup()))

    def call(self, op: str, args: dict[str, Any], timeout: float, on_items: Items) -> Any:
        """Run ``op`` and return its summary; streamed results go to ``on_items`` as they
        arrive. Raises :class:`AdminWorkerError` (after killing the worker) if it dies or does
        not finish within ``timeout`` s."""
        conn = self._conn
        if conn is None:
            raise AdminWorkerError("admin worker not started")
        try:
            conn.send((op, args))
        except (OSError, ValueError):  # ValueError: closed by kill() from another thread
            raise self._died(op) from None
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise AdminWorkerError(f"admin worker did not finish {op!r} within {timeout:g}s")
            try:
                # The worker's end of the socket closes when it dies: EOF wakes us at once.
                if not wait_ready([conn], remaining):
                    continue
                kind, payload = conn.recv()
            except (EOFError, OSError, ValueError):
                raise self._died(op) from None
            if kind == "items":
                on_items(payload)
                continue
            return payload

    def _died(self, op: str) -> AdminWorkerError:
        process = self._process
        if process is None:  # kill() from another thread (the collector was closed)
            return AdminWorkerError(f"admin worker stopped during {op!r}")
        try:
            code: int | None = process.wait(1.0)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        return AdminWorkerError(f"admin worker died during {op!r} ({_exit_reason(code)})")

    def kill(self) -> None:
        """SIGKILL the worker, by its own PID, and reap it. Never a graceful close: destroying
        a client with requests pending on a dead coordinator can block or abort."""
        process, self._process = self._process, None
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        if process is not None:
            if process.poll() is None:
                process.kill()
            # Unkillable (D state) for now: nothing more to do, it is never reused.
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5.0)


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _log_setup() -> tuple[str, str] | None:
    """The service's logging (level, format), so the worker logs like the service does."""
    root = logging.getLogger()
    for handler in root.handlers:
        if isinstance(handler.formatter, JsonFormatter | TextFormatter):
            fmt = "json" if isinstance(handler.formatter, JsonFormatter) else "text"
            return logging.getLevelName(root.level), fmt
    return None


# ============================================================================ worker side


class _DropDeprecationWarnings(logging.Filter):
    """librdkafka warns at every client creation that the settings 0.9 brokers need
    (``api.version.request``, ``broker.version.fallback``) are deprecated: noise, per worker."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not ("CONFWARN" in message and "is deprecated" in message)


def main(argv: list[str]) -> None:
    """Entry point of the worker process: ``<socket fd> <name>`` (the name is for ``ps``)."""
    # The service decides when the worker ends; a terminal's Ctrl-C goes to it, not here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(int(argv[0]))
    try:
        config, log_setup = conn.recv()
    except (EOFError, OSError):
        os._exit(0)
    serve(conn, config, log_setup)


def serve(conn: Connection, config: dict[str, Any], log_setup: tuple[str, str] | None) -> None:
    """The worker's main loop: one op at a time until the parent goes away."""
    if log_setup is not None:
        from monitor.logs import setup_logging

        setup_logging(*log_setup)
    logging.getLogger("monitor.kafka").addFilter(_DropDeprecationWarnings())
    logging.getLogger("monitor.kafka").addFilter(RepeatLimit())
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(config)
    ops: dict[str, Callable[[Any, dict[str, Any], Items], Any]] = {
        "list": _list,
        "describe": _describe,
        "offsets": _offsets,
    }
    try:
        while True:
            op, args = conn.recv()
            summary = ops[op](admin, args, lambda items: conn.send(("items", items)))
            admin.poll(0)  # serve librdkafka's log callbacks
            conn.send(("done", summary))
    except (EOFError, OSError):
        pass  # the collector (or the whole service) is gone
    # Skip destroying the client: it may still wait on a dead coordinator (see module doc).
    os._exit(0)


def _error(exc: BaseException) -> ErrorInfo:
    from confluent_kafka import KafkaError, KafkaException

    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if isinstance(err, KafkaError):
        return err.name(), err.str()
    return type(exc).__name__, str(exc)


def _kafka_error(err: Any) -> ErrorInfo:
    return err.name(), err.str()


def _list(admin: Any, args: dict[str, Any], emit: Items) -> dict[str, Any]:
    """ListGroups on every broker. ``errors`` lists brokers that did not answer: the listing
    is then incomplete, and absence from it proves nothing."""
    timeout = float(args["timeout"])
    started = time.monotonic()
    future = admin.list_consumer_groups(request_timeout=timeout)
    try:
        result = _result(admin, future, timeout)
    except Exception as exc:
        return {"groups": [], "errors": [_error(exc)], "seconds": time.monotonic() - started}
    return {
        "groups": sorted(g.group_id for g in result.valid),
        "errors": [_kafka_error(e) for e in result.errors],
        "seconds": time.monotonic() - started,
    }


def _result(admin: Any, future: Future[Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout + 5.0
    while not future.done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no answer within {timeout:g}s")
        wait([future], timeout=0.1)
        admin.poll(0)
    return future.result()


def _describe(admin: Any, args: dict[str, Any], emit: Items) -> dict[str, Any]:
    """DescribeGroups, ``chunk`` groups per call, at most ``limit`` groups in flight; stops
    sending after ``budget`` s (the rest get BUDGET_EXHAUSTED)."""
    timeout, budget = float(args["timeout"]), float(args["budget"])
    chunk, limit = int(args["chunk"]), int(args["limit"])
    queue: deque[str] = deque(args["groups"])
    pending: dict[Future[Any], str] = {}
    started = time.monotonic()
    out: list[tuple[str, Any]] = []
    while queue or pending:
        if queue and time.monotonic() - started > budget:
            out.extend((g, ("error", BUDGET_EXHAUSTED, "round time budget exhausted"))
                       for g in queue)
            queue.clear()
        while queue and (not pending or len(pending) + min(chunk, len(queue)) <= limit):
            batch = [queue.popleft() for _ in range(min(chunk, len(queue)))]
            try:
                futures = admin.describe_consumer_groups(batch, request_timeout=timeout)
            except Exception as exc:
                out.extend((g, ("error", *_error(exc))) for g in batch)
                continue
            pending.update({f: g for g, f in futures.items()})
        if pending:
            done, _ = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            admin.poll(0)
            for future in done:
                group = pending.pop(future)
                try:
                    out.append((group, ("ok", _description(future.result()))))
                except Exception as exc:
                    out.append((group, ("error", *_error(exc))))
        if out:
            emit(out)
            out = []
    return {"seconds": time.monotonic() - started}


def _description(d: Any) -> dict[str, Any]:
    state = getattr(d.state, "name", str(d.state))
    return {
        "state": _STATE_NAMES.get(state, state),
        "simple": bool(d.is_simple_consumer_group),
        "protocol": d.partition_assignor or "",
        "coordinator": d.coordinator.id if d.coordinator is not None else None,
        "members": [
            (
                m.member_id,
                m.client_id,
                m.host,
                m.group_instance_id,
                [
                    (tp.topic, tp.partition)
                    for tp in (m.assignment.topic_partitions if m.assignment else [])
                ],
            )
            for m in d.members
        ],
    }


def _offsets(admin: Any, args: dict[str, Any], emit: Items) -> dict[str, Any]:
    """OffsetFetch per group, ``limit`` requests in flight; stops sending after ``budget`` s.

    Each request is ``(group, partitions, fallback)``: ``partitions`` None asks for every
    committed partition; if that answer is empty and ``fallback`` names partitions, they are
    asked for explicitly (a broker or stand-in that does not implement the all-partitions
    form answers it with nothing). Results: ``("ok", form, [OffsetEntry...])`` with form
    ``all`` or ``explicit``, or ``("error", name, message)``.
    """
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    timeout, budget, limit = float(args["timeout"]), float(args["budget"]), int(args["limit"])
    queue: deque[tuple[str, list[tuple[str, int]] | None, list[tuple[str, int]] | None]] = deque(
        (g, p, f) for g, p, f in args["requests"]
    )
    pending: dict[Future[Any], tuple[str, bool, list[tuple[str, int]] | None]] = {}
    started = time.monotonic()
    out: list[tuple[str, Any]] = []
    while queue or pending:
        if queue and time.monotonic() - started > budget:
            out.extend((g, ("error", BUDGET_EXHAUSTED, "round time budget exhausted"))
                       for g, _, _ in queue)
            queue.clear()
        while queue and len(pending) < limit:
            group, partitions, fallback = queue.popleft()
            request = ConsumerGroupTopicPartitions(
                group,
                None if partitions is None else [TopicPartition(t, p) for t, p in partitions],
            )
            try:
                (future,) = admin.list_consumer_group_offsets(
                    [request], request_timeout=timeout
                ).values()
            except Exception as exc:
                out.append((group, ("error", *_error(exc))))
                continue
            pending[future] = (group, partitions is not None, fallback)
        if pending:
            done, _ = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            admin.poll(0)
            for future in done:
                group, explicit, fallback = pending.pop(future)
                try:
                    answer = future.result()
                except Exception as exc:
                    out.append((group, ("error", *_error(exc))))
                    continue
                entries: list[OffsetEntry] = [
                    (tp.topic, tp.partition, tp.offset,
                     tp.error.name() if tp.error is not None else None)
                    for tp in answer.topic_partitions
                ]
                if not explicit and not entries and fallback:
                    queue.appendleft((group, fallback, None))
                    continue
                out.append((group, ("ok", "explicit" if explicit else "all", entries)))
        if out:
            emit(out)
            out = []
    return {"seconds": time.monotonic() - started}


if __name__ == "__main__":
    main(sys.argv[1:])
