"""librdkafka's mock Kafka cluster, served as its own process.

Why a separate process: the mock cluster lives inside a librdkafka handle and speaks the
current Kafka wire protocol over real TCP sockets. Running it outside the test process means
the clients under test (confluent-kafka in pytest, or a collector subprocess) talk to it
exactly as they would to a real cluster, and a crash or hang of the experimental mock API
cannot take the test process down with it.

Why ctypes: confluent-kafka does not wrap the mock API, but its wheel bundles the shared
library (``confluent_kafka.libs/librdkafka-*.so.1``) that exports it. The mock API is
experimental with no ABI guarantee, so the project pins confluent-kafka (2.16.1) for tests
and every function used here gets explicit ``argtypes``/``restype``.

Protocol (one JSON object per line):

* on start-up, stdout gets ``{"ok": true, "event": "ready", "bootstrap_servers": ...,
  "brokers": [1, ..., n], "controller_id": ..., "librdkafka_version": ..., "pid": ...}``;
  if start-up fails it gets ``{"ok": false, "event": "ready", "error": ..., "message": ...}``
  and the process exits with status 1;
* each stdin line is a command ``{"cmd": NAME, ...args, "seq": optional}`` answered by
  ``{"ok": true, "seq": ...}`` or ``{"ok": false, "seq": ..., "error": NAME, "code": INT|None,
  "message": TEXT}`` (``seq`` is echoed when given, to pair replies with commands).
  ``error`` is librdkafka's ``rd_kafka_err2name`` for a non-zero ``rd_kafka_resp_err_t``
  (``code`` is the number), or ``BAD_REQUEST`` (``code`` None) for a malformed command.

Commands: ``ping``; ``create_topic(topic, partitions, rf)``; ``broker_down(id)``;
``broker_up(id)``; ``set_rtt(id, ms)``; ``partition_set_leader(topic, partition, id)``;
``coordinator_set(type, key, id)`` (type ``"group"`` or ``"transaction"``); ``stop``
(destroys the cluster, replies, then exits). The process also destroys the cluster and exits
when stdin reaches EOF (so a crashed test run never leaves it behind) or on SIGTERM.

Run: ``python -m tests.harness.mock_server --brokers 3 [--controller-id 1]
[--group-initial-rebalance-delay-ms MS] [--debug mock,protocol] [--lib PATH]``.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import importlib.util
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

#: Upper bound for the error string buffers librdkafka fills in.
_ERRSTR_SIZE = 512
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


class CommandError(Exception):
    """A command that could not be executed; becomes an ``ok: false`` reply."""

    def __init__(self, error: str, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.code = code
        self.message = message


def find_librdkafka() -> str:
    """Return the path of the librdkafka bundled in the installed confluent-kafka wheel.

    The wheel's copy is used (not a system librdkafka) because the mock API has no ABI
    guarantee: the harness is pinned to the exact build confluent-kafka ships. The package is
    located without importing it, so this process loads one librdkafka only.
    """
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("confluent_kafka is not installed in this interpreter")
    pkg_dir = Path(next(iter(spec.submodule_search_locations)))
    candidates = sorted(glob.glob(str(pkg_dir.parent / "confluent_kafka.libs" / "librdkafka*.so*")))
    if not candidates:
        raise FileNotFoundError(
            f"no librdkafka*.so* in {pkg_dir.parent / 'confluent_kafka.libs'}"
            " (confluent-kafka installed from source rather than a wheel?)"
        )
    return candidates[0]


class LibRdKafka:
    """Typed ctypes bindings for the handful of librdkafka functions the server needs."""

    def __init__(self, path: str) -> None:
        self.path = path
        lib = ctypes.CDLL(path)
        vp, i32, cp, ci = ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_int
        err = ctypes.c_int  # rd_kafka_resp_err_t is a C enum (int)

        def bind(name: str, restype: Any, *argtypes: Any) -> Callable[..., Any]:
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = list(argtypes)
            return fn

        self.version_str = bind("rd_kafka_version_str", cp)
        self.err2name = bind("rd_kafka_err2name", cp, err)
        self.err2str = bind("rd_kafka_err2str", cp, err)
        self.conf_new = bind("rd_kafka_conf_new", vp)
        self.conf_destroy = bind("rd_kafka_conf_destroy", None, vp)
        # rd_kafka_conf_res_t rd_kafka_conf_set(conf, name, value, errstr, errstr_size)
        self.conf_set = bind("rd_kafka_conf_set", ci, vp, cp, cp, cp, ctypes.c_size_t)
        # rd_kafka_t *rd_kafka_new(rd_kafka_type_t type, conf, errstr, errstr_size)
        self.new = bind("rd_kafka_new", vp, ci, vp, cp, ctypes.c_size_t)
        self.destroy = bind("rd_kafka_destroy", None, vp)
        self.mock_cluster_new = bind("rd_kafka_mock_cluster_new", vp, vp, ci)
        self.mock_cluster_destroy = bind("rd_kafka_mock_cluster_destroy", None, vp)
        self.mock_cluster_bootstraps = bind("rd_kafka_mock_cluster_bootstraps", cp, vp)
        # void in 2.16.1 (checked in the disassembly: it only stores the id under a lock).
        self.mock_set_controller_id = bind("rd_kafka_mock_set_controller_id", None, vp, i32)
        self.mock_topic_create = bind("rd_kafka_mock_topic_create", err, vp, cp, ci, ci)
        self.mock_broker_set_down = bind("rd_kafka_mock_broker_set_down", err, vp, i32)
        self.mock_broker_set_up = bind("rd_kafka_mock_broker_set_up", err, vp, i32)
        self.mock_broker_set_rtt = bind("rd_kafka_mock_broker_set_rtt", err, vp, i32, ci)
        self.mock_partition_set_leader = bind(
            "rd_kafka_mock_partition_set_leader", err, vp, cp, i32, i32
        )
        self.mock_coordinator_set = bind("rd_kafka_mock_coordinator_set", err, vp, cp, cp, i32)
        self.mock_group_initial_rebalance_delay_ms = bind(
            "rd_kafka_mock_group_initial_rebalance_delay_ms", None, vp, i32
        )

    def version(self) -> str:
        """librdkafka version string, reported so a wrong (unpinned) build is visible."""
        return self.version_str().decode()

    def check(self, code: int, what: str) -> None:
        """Raise CommandError for a non-zero rd_kafka_resp_err_t."""
        if code != 0:
            name = self.err2name(code).decode()
            text = self.err2str(code).decode()
            raise CommandError(name, f"{what}: {name} ({code}): {text}", code)


class MockClusterServer:
    """Owns one producer handle and the mock cluster created on it."""

    def __init__(
        self,
        lib: LibRdKafka,
        brokers: int,
        controller_id: int,
        debug: str = "",
        group_initial_rebalance_delay_ms: int | None = None,
    ) -> None:
        self.lib = lib
        self.broker_count = brokers
        self.controller_id = controller_id
        self._rk: int | None = None
        self._mc: int | None = None
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        conf = lib.conf_new()
        if debug:
            self._conf_set(conf, "debug", debug, errstr)
        else:
            # Hide the notice that this handle has no bootstrap.servers: it is not a client.
            self._conf_set(conf, "log_level", "4", errstr)
        # The handle only hosts the mock cluster; it never connects anywhere itself.
        rk = lib.new(0, conf, errstr, ctypes.sizeof(errstr))  # 0 = RD_KAFKA_PRODUCER
        if not rk:
            lib.conf_destroy(conf)  # rd_kafka_new() only takes ownership on success
            raise CommandError("_FAIL", f"rd_kafka_new failed: {errstr.value.decode()}")
        self._rk = rk
        mc = lib.mock_cluster_new(rk, brokers)
        if not mc:
            self.close()
            raise CommandError("_FAIL", f"rd_kafka_mock_cluster_new(rk, {brokers}) failed")
        self._mc = mc
        # Without a controller, DescribeCluster/Metadata report none, which admin code trips on.
        lib.mock_set_controller_id(mc, controller_id)
        if group_initial_rebalance_delay_ms is not None:
            # The mock, like Kafka, waits 3 s before the first rebalance of a new group;
            # tests that join groups set this lower.
            lib.mock_group_initial_rebalance_delay_ms(mc, group_initial_rebalance_delay_ms)
        self.bootstrap_servers = lib.mock_cluster_bootstraps(mc).decode()

    def _conf_set(self, conf: int, name: str, value: str, errstr: Any) -> None:
        res = self.lib.conf_set(conf, name.encode(), value.encode(), errstr, ctypes.sizeof(errstr))
        if res != 0:  # RD_KAFKA_CONF_OK
            self.lib.conf_destroy(conf)
            raise CommandError("_INVALID_ARG", f"{name}={value}: {errstr.value.decode()}")

    @property
    def running(self) -> bool:
        """True until close()."""
        return self._mc is not None

    def close(self) -> None:
        """Destroy the mock cluster (closes its listeners), then the hosting handle."""
        if self._mc is not None:
            self.lib.mock_cluster_destroy(self._mc)
            self._mc = None
        if self._rk is not None:
            self.lib.destroy(self._rk)
            self._rk = None

    def _cluster(self) -> int:
        if self._mc is None:
            raise CommandError("_STATE", "mock cluster already stopped")
        return self._mc

    # -- commands --------------------------------------------------------------------------

    def cmd_ping(self, args: dict[str, Any]) -> dict[str, Any]:
        """Liveness check; also returns the static facts a client may want again."""
        return {"bootstrap_servers": self.bootstrap_servers, "brokers": self.broker_ids()}

    def cmd_create_topic(self, args: dict[str, Any]) -> dict[str, Any]:
        topic = _str_arg(args, "topic")
        partitions = _int_arg(args, "partitions", minimum=1)
        rf = _int_arg(args, "rf", minimum=1)
        self.lib.check(
            self.lib.mock_topic_create(self._cluster(), topic.encode(), partitions, rf),
            f"create_topic({topic!r}, {partitions}, {rf})",
        )
        return {}

    def cmd_broker_down(self, args: dict[str, Any]) -> dict[str, Any]:
        broker = _int_arg(args, "id")
        self.lib.check(
            self.lib.mock_broker_set_down(self._cluster(), broker), f"broker_down({broker})"
        )
        return {}

    def cmd_broker_up(self, args: dict[str, Any]) -> dict[str, Any]:
        broker = _int_arg(args, "id")
        self.lib.check(self.lib.mock_broker_set_up(self._cluster(), broker), f"broker_up({broker})")
        return {}

    def cmd_set_rtt(self, args: dict[str, Any]) -> dict[str, Any]:
        broker = _int_arg(args, "id")
        ms = _int_arg(args, "ms", minimum=0)
        self.lib.check(
            self.lib.mock_broker_set_rtt(self._cluster(), broker, ms), f"set_rtt({broker}, {ms})"
        )
        return {}

    def cmd_partition_set_leader(self, args: dict[str, Any]) -> dict[str, Any]:
        topic = _str_arg(args, "topic")
        partition = _int_arg(args, "partition", minimum=0)
        broker = _int_arg(args, "id")
        self.lib.check(
            self.lib.mock_partition_set_leader(self._cluster(), topic.encode(), partition, broker),
            f"partition_set_leader({topic!r}, {partition}, {broker})",
        )
        return {}

    def cmd_coordinator_set(self, args: dict[str, Any]) -> dict[str, Any]:
        key_type = _str_arg(args, "type")
        if key_type not in ("group", "transaction"):
            raise CommandError(
                "BAD_REQUEST", f"type must be 'group' or 'transaction', got {key_type!r}"
            )
        key = _str_arg(args, "key")
        broker = _int_arg(args, "id")
        self.lib.check(
            self.lib.mock_coordinator_set(self._cluster(), key_type.encode(), key.encode(), broker),
            f"coordinator_set({key_type!r}, {key!r}, {broker})",
        )
        return {}

    def cmd_stop(self, args: dict[str, Any]) -> dict[str, Any]:
        self.close()
        return {}

    def broker_ids(self) -> list[int]:
        """Broker ids of the mock cluster: 1..n, as rd_kafka_mock_cluster_new assigns them."""
        return list(range(1, self.broker_count + 1))

    def handle(self, line: str) -> dict[str, Any]:
        """Execute one command line and build its reply (never raises for bad input)."""
        req_id: Any = None
        try:
            try:
                req = json.loads(line)
            except ValueError as exc:
                raise CommandError("BAD_REQUEST", f"not JSON: {exc}") from None
            if not isinstance(req, dict):
                raise CommandError("BAD_REQUEST", "command must be a JSON object")
            req_id = req.get("seq")
            name = req.get("cmd")
            handler = getattr(self, f"cmd_{name}", None) if isinstance(name, str) else None
            if handler is None:
                raise CommandError(
                    "BAD_REQUEST", f"unknown command {name!r}; known: {', '.join(COMMANDS)}"
                )
            reply: dict[str, Any] = {"ok": True, **handler(req)}
        except CommandError as exc:
            reply = {"ok": False, "error": exc.error, "code": exc.code, "message": exc.message}
        if req_id is not None:
            reply["seq"] = req_id
        return reply


COMMANDS = (
    "ping",
    "create_topic",
    "broker_down",
    "broker_up",
    "set_rtt",
    "partition_set_leader",
    "coordinator_set",
    "stop",
)


def _str_arg(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value:
        raise CommandError("BAD_REQUEST", f"{name!r} must be a non-empty string, got {value!r}")
    return value


def _int_arg(args: dict[str, Any], name: str, minimum: int = _INT32_MIN) -> int:
    value = args.get(name)
    # bool is an int subclass; true/false are never a valid id or count.
    if not isinstance(value, int) or isinstance(value, bool):
        raise CommandError("BAD_REQUEST", f"{name!r} must be an integer, got {value!r}")
    if not minimum <= value <= _INT32_MAX:
        raise CommandError("BAD_REQUEST", f"{name!r} out of range [{minimum}, {_INT32_MAX}]")
    return value


def _write(out: TextIO, obj: dict[str, Any]) -> None:
    out.write(json.dumps(obj) + "\n")
    out.flush()


def _protocol_stdout() -> TextIO:
    """Keep fd 1 for the JSON protocol only.

    librdkafka (or anything else in-process) writing to C-level stdout would corrupt the
    reply stream, so the protocol gets a private duplicate of fd 1 and fd 1 itself is
    pointed at stderr.
    """
    sys.stdout.flush()
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto


def _on_sigterm(signum: int, frame: Any) -> None:
    # Raised in the main thread (blocked on stdin); the finally-block destroys the cluster.
    raise SystemExit(128 + signum)


def serve(server: MockClusterServer, inp: TextIO, out: TextIO) -> None:
    """Answer commands until ``stop`` or EOF on ``inp``."""
    for line in inp:
        if not line.strip():
            continue
        _write(out, server.handle(line))
        if not server.running:
            return


def main(argv: list[str] | None = None) -> int:
    """Entry point: start the cluster, announce it, serve commands, always clean up."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--brokers", type=int, default=3, help="number of mock brokers (ids 1..n)")
    parser.add_argument(
        "--controller-id", type=int, default=1, help="broker id reported as controller"
    )
    parser.add_argument(
        "--group-initial-rebalance-delay-ms",
        type=int,
        default=None,
        help="delay before a new group's first rebalance (mock default: 3000)",
    )
    parser.add_argument("--lib", default=None, help="librdkafka path (default: the wheel's)")
    parser.add_argument("--debug", default="", help="librdkafka debug contexts, e.g. 'mock'")
    args = parser.parse_args(argv)

    out = _protocol_stdout()
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        if args.brokers < 1:
            raise CommandError("BAD_REQUEST", f"--brokers must be >= 1, got {args.brokers}")
        lib = LibRdKafka(args.lib or find_librdkafka())
        server = MockClusterServer(
            lib,
            args.brokers,
            args.controller_id,
            args.debug,
            args.group_initial_rebalance_delay_ms,
        )
    except (CommandError, OSError, AttributeError) as exc:
        error = exc.error if isinstance(exc, CommandError) else type(exc).__name__
        _write(out, {"ok": False, "event": "ready", "error": error, "message": str(exc)})
        return 1
    try:
        _write(
            out,
            {
                "ok": True,
                "event": "ready",
                "bootstrap_servers": server.bootstrap_servers,
                "brokers": server.broker_ids(),
                "controller_id": args.controller_id,
                "librdkafka_version": lib.version(),
                "librdkafka_path": lib.path,
                "pid": os.getpid(),
            },
        )
        serve(server, sys.stdin, out)
    except (BrokenPipeError, KeyboardInterrupt):
        pass  # the client went away: nothing to report to, just clean up
    finally:
        _exit_anyway_after(CLEANUP_GRACE)
        server.close()
    return 0


CLEANUP_GRACE = 10.0
"""Seconds the cluster's destruction may take before the process exits without it."""


def _exit_anyway_after(grace: float) -> None:
    """rd_kafka_destroy() joins librdkafka's threads, and on a loaded machine that once took
    over 20 s after SIGTERM: past ``grace`` the process exits anyway, with the code it was
    leaving with (its listeners close with it), so no caller waits on a server that is gone."""
    exc = sys.exc_info()[1]
    code = exc.code if isinstance(exc, SystemExit) else (0 if exc is None else 1)

    def leave() -> None:
        print(f"mock cluster cleanup took over {grace:g} s: exiting without it",
              file=sys.stderr, flush=True)
        os._exit(code if isinstance(code, int) else 1)

    timer = threading.Timer(grace, leave)
    timer.daemon = True
    timer.start()


if __name__ == "__main__":
    sys.exit(main())
