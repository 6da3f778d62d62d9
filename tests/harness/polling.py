"""Polling helpers shared by the tests: wait on real processes and sockets with a deadline
instead of fixed sleeps."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(
    fn: Callable[[], T],
    timeout: float,
    what: str,
    *,
    ok: Callable[[T], Any] = bool,
    interval: float = 0.1,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``fn`` until ``ok(result)`` is true and return that result; exceptions listed in
    ``retry_on`` count as "not yet". Fails with the last result after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            result = fn()
        except retry_on as exc:
            last = exc
        else:
            if ok(result):
                return result
            last = result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def port_refuses(hostport: str) -> bool:
    """True when nothing accepts TCP connections on ``host:port`` any more."""
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return False
    except OSError:
        return True


def process_gone(pid: int) -> bool:
    """True when ``pid`` has exited (gone, or a zombie nobody reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def wait_for_kafka(fn: Callable[[], T], timeout: float, what: str, **kwargs: Any) -> T:
    """``wait_for`` polling every 0.2 s, with Kafka's and the sockets' errors (brokers coming
    up, a leader moving) counted as "not yet"."""
    from confluent_kafka import KafkaException

    kwargs.setdefault("interval", 0.2)
    kwargs.setdefault("retry_on", (KafkaException, OSError, RuntimeError))
    return wait_for(fn, timeout, what, **kwargs)
