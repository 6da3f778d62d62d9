"""``kafka-monitor run`` as two processes: this small supervisor, and the service as its child.

Why: librdkafka is C, and on this project's brokers it has crashed the whole process now and
then (a SIGSEGV inside an AdminClient ``ListOffsets`` call, once in a CI run, while Kafka 0.9
auto-created the canary topics; the Admin worker's module doc has the SIGABRT it can raise).
In one process such a crash takes every collector, the verdicts and the HTTP server with it
until something outside restarts it, and with no state snapshot configured the restarted
service starts blind. Here the supervisor sees the child die of a signal, logs which one,
and starts it again on the same port at once (backing off from 1 s to 30 s if it keeps
dying); the child exports how many times that happened
(``kafka_monitor_crash_restarts_total{signal}``) so a crash is never silent.

The supervisor's process also holds the HTTP port: the front (``monitor/serve/front.py``)
answers ``/status`` and ``/lag`` from the replies the child writes each round and passes every
other request to the child over a Unix socket (folder in ``KAFKA_MONITOR_FRONT``), so the port
stays open while a crashed child restarts (passed requests are a JSON 503 meanwhile), and no
reply is served from a child that is gone.

What the supervisor does not do: anything with Kafka or the configuration beyond loading it
once (so that a bad file is refused before any child starts). A child that exits
on its own (a normal stop, an error exit code) ends the supervisor with the same code; after
``MAX_CRASHES`` crashes within ``CRASH_WINDOW`` it gives up with ``EXIT_CRASH_LOOP``, leaving
a crash loop to whatever runs the supervisor (Kubernetes shows it as one). SIGTERM and SIGINT
are passed to the child, which shuts down as it always does. The child dies with the
supervisor (``PR_SET_PDEATHSIG``), so killing the supervisor never leaves a service behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Protocol

#: Set in the child's environment: run the service in this process (the supervised child).
SUPERVISED_ENV = "KAFKA_MONITOR_SUPERVISED"
#: Set in the child's environment: earlier crashes, ``SIGSEGV:2,SIGABRT:1``.
CRASHES_ENV = "KAFKA_MONITOR_CRASHES"
#: Set in the child's environment: the HTTP front's folder (the child's socket, its replies).
FRONT_ENV = "KAFKA_MONITOR_FRONT"

MAX_CRASHES = 5
CRASH_WINDOW = 600.0
FIRST_DELAY, MAX_DELAY = 1.0, 30.0
#: A child that ran this long before it crashed restarts after FIRST_DELAY again.
HEALTHY_RUN = 60.0
EXIT_CRASH_LOOP = 70  # EX_SOFTWARE
SERVICE_NICE = 5
"""Behind the front, the service runs this much nicer than the supervisor's process: answers
to pollers come before collection and evaluation when both want a CPU (CFS weights 3:1),
which is idle whenever nobody asks."""

_log = logging.getLogger("monitor.supervisor")
_PR_SET_PDEATHSIG = 1


def is_supervised_child() -> bool:
    return os.environ.get(SUPERVISED_ENV) == "1"


def crash_counts() -> dict[str, int]:
    """Earlier crashes of this service by signal name, as the supervisor passed them."""
    counts: dict[str, int] = {}
    for item in os.environ.get(CRASHES_ENV, "").split(","):
        name, _, n = item.partition(":")
        if name and n.isdigit():
            counts[name] = int(n)
    return counts


def front_dir() -> Path | None:
    """The HTTP front's folder when this process is a supervised child behind one."""
    value = os.environ.get(FRONT_ENV) if is_supervised_child() else None
    return Path(value) if value else None


class FrontHooks(Protocol):
    """What the supervisor needs of the HTTP front (``monitor.serve.front.Front``)."""

    @property
    def dir(self) -> Path: ...
    def child_exited(self) -> None: ...
    def close(self) -> None: ...


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the supervisor dies, however it dies."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _behind_the_front() -> None:
    """In the child before exec, when the front serves: as :func:`_die_with_parent`, and
    the service yields the CPU to the front (``SERVICE_NICE``)."""
    _die_with_parent()
    with contextlib.suppress(OSError):
        os.nice(SERVICE_NICE)


class Supervisor:
    """Runs ``command`` as a child until it exits on its own or a stop signal arrives."""

    def __init__(self, command: Sequence[str], front: FrontHooks | None = None) -> None:
        self.command = list(command)
        self.front = front
        self.crashes: dict[str, int] = {}
        self._recent: deque[float] = deque()
        self._stop_signal: int | None = None
        self._child: subprocess.Popen[bytes] | None = None

    def _on_signal(self, number: int, _frame: FrameType | None) -> None:
        self._stop_signal = number
        child = self._child
        if child is not None and child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(number)

    def run(self) -> int:
        try:
            return self._run()
        finally:
            if self.front is not None:
                self.front.close()

    def _run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        delay = FIRST_DELAY
        while True:
            env = {**os.environ, SUPERVISED_ENV: "1",
                   CRASHES_ENV: ",".join(f"{k}:{v}" for k, v in self.crashes.items())}
            if self.front is not None:
                env[FRONT_ENV] = str(self.front.dir)
            started = time.monotonic()
            self._child = subprocess.Popen(
                self.command, env=env,
                preexec_fn=_die_with_parent if self.front is None else _behind_the_front)
            if self._stop_signal is not None:  # a stop arrived while the child was starting
                self._on_signal(self._stop_signal, None)
            code = self._child.wait()
            if self.front is not None:
                self.front.child_exited()
            if code >= 0:
                return code
            if self._stop_signal is not None:
                return 128 - code
            name = _signal_name(-code)
            self.crashes[name] = self.crashes.get(name, 0) + 1
            now = time.monotonic()
            self._recent.append(now)
            while self._recent and now - self._recent[0] > CRASH_WINDOW:
                self._recent.popleft()
            if len(self._recent) >= MAX_CRASHES:
                _log.critical("the service keeps crashing; giving up", extra={
                    "signal": name, "crashes": len(self._recent),
                    "window_seconds": CRASH_WINDOW})
                return EXIT_CRASH_LOOP
            if now - started >= HEALTHY_RUN:
                delay = FIRST_DELAY
            _log.error("the service process died; restarting it", extra={
                "signal": name, "pid": self._child.pid, "ran_seconds": round(now - started, 1),
                "restart_in_seconds": delay, "crashes": dict(self.crashes)})
            if self._sleep(delay):
                return 0
            delay = min(delay * 2, MAX_DELAY)

    def _sleep(self, seconds: float) -> bool:
        """Wait before a restart; True when a stop signal came meanwhile."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._stop_signal is not None:
                return True
            time.sleep(0.05)
        return self._stop_signal is not None


def child_command(config: os.PathLike[str] | str, log_format: str | None) -> list[str]:
    """The child: this same ``kafka-monitor run`` in this same interpreter."""
    command = [sys.executable, "-m", "monitor", "run", "--config", os.fspath(config)]
    if log_format is not None:
        command += ["--log-format", log_format]
    return command
