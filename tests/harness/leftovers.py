"""Nothing a test run starts outlives it: every process the run starts (brokers, monitors,
browsers, workers, and their children, orphaned or not) carries one environment variable; when
the run ends, any such process still alive is reported, the run fails, and the process is
killed. A browser's renderer reparented to init is found this way too, where a walk of the
process tree would miss it."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

RUN_VARIABLE = "KAFKA_MONITOR_TEST_RUN"
_GRACE = 5.0  # a process may still be exiting when the last test ends


def pytest_configure(config: pytest.Config) -> None:
    # The process that starts the run sets it (anew, should pytest itself run under a test);
    # xdist's workers and every process a test starts inherit it.
    if not hasattr(config, "workerinput"):
        os.environ[RUN_VARIABLE] = uuid.uuid4().hex


def _ours(run: str) -> dict[int, str]:
    """Live processes of this run but this one and its ancestors: PID -> command line."""
    needle = f"{RUN_VARIABLE}={run}".encode()
    skip = {os.getpid()}
    pid = os.getppid()
    while pid > 1:  # e.g. xdist's controller, which may check while a worker still exits
        skip.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state in ("Z", "X"):
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace").strip()
        except OSError:
            continue  # exited meanwhile, or not ours to read
        found[int(entry.name)] = cmdline[:200]
    return found


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session) -> Iterator[None]:
    """In the process that started the run, once every other ``pytest_sessionfinish`` has run
    (xdist's workers are gone, the shared clusters stopped): fail the run on leftovers, and
    kill them."""
    yield
    if hasattr(session.config, "workerinput"):
        return
    run = os.environ.get(RUN_VARIABLE)
    if not run:
        return
    deadline = time.monotonic() + _GRACE
    left = _ours(run)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _ours(run)
    if not left:
        return
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"  {pid}: {cmd}" for pid, cmd in sorted(left.items())]
    message = "processes the tests started were still running at the end (now killed):\n"
    if reporter is not None:
        reporter.write_sep("=", "leftover processes", red=True)
        reporter.write_line(message + "\n".join(lines))
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
