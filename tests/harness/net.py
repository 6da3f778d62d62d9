"""Sockets and HTTP for the tests: a free port, a JSON request, and polling over HTTP while a
server starts."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.harness.polling import wait_for as _wait_for

__all__ = ["free_port", "http", "wait_for", "wait_listening"]


def wait_listening(proc: subprocess.Popen[Any], port: int, log: Path, name: str,
                   timeout: float = 30) -> None:
    """Return once ``proc`` accepts connections on ``port``; raise with its log's tail if it
    exits or does not listen within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not listening after {timeout:g} s") from None
            time.sleep(0.05)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (never a fixed one: other services own some)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(method: str, url: str) -> tuple[int, dict[str, Any]]:
    """Status and JSON body of one request; error statuses are answers, not exceptions."""
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def wait_for(fn: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll over HTTP; connection errors while the server starts count as "not yet"."""
    return _wait_for(fn, timeout, what, retry_on=(OSError,))
