"""Processes a test starts (``kafka-monitor run``, a browser, Prometheus, ...): each in a process
group of its own, so that stopping it stops its children too (a browser's renderers, the
service under ``run``'s supervisor), and with a parent-death signal, so that a test process
killed outright takes them along. Stopped by PID, never by name."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from typing import Any

__all__ = ["start", "stop"]


def _pdeathsig() -> list[str]:
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


def start(cmd: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(cmd, **popen)`` in a new process group, dying with this process."""
    return subprocess.Popen([*_pdeathsig(), *cmd], start_new_session=True, **popen)


def _signal_group(proc: subprocess.Popen[Any], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def stop(proc: subprocess.Popen[Any], timeout: float = 20,
         sig: signal.Signals = signal.SIGTERM) -> int | None:
    """Send ``sig`` to the process, wait up to ``timeout`` s, then SIGKILL its whole group (so
    nothing it started is left). Returns the exit code the process gave on its own, or None
    when it had to be killed. Idempotent."""
    code: int | None = proc.poll()
    if code is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
    _signal_group(proc, signal.SIGKILL)  # whatever it left behind in its group
    if proc.poll() is None:
        proc.wait(10)
    return code
