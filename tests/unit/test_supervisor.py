"""The supervisor of ``kafka-monitor run`` on real child processes: exit codes pass through,
crashes are restarted with the count handed to the next child, and a crash loop ends it."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor import supervisor
from monitor.supervisor import CRASHES_ENV, EXIT_CRASH_LOOP, SUPERVISED_ENV, Supervisor


@pytest.fixture(autouse=True)
def _keep_signal_handlers() -> Iterator[None]:
    """Supervisor.run installs SIGTERM/SIGINT handlers; give pytest its own back."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_an_exit_code_passes_through_without_a_restart(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    code = (f"import os; open({str(runs)!r}, 'a').write(os.environ[{SUPERVISED_ENV!r}] + '\\n');"
            " raise SystemExit(3)")
    assert Supervisor(python(code)).run() == 3
    assert runs.read_text().splitlines() == ["1"]  # one child, told it is supervised


def test_crashes_restart_the_child_then_a_crash_loop_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor, "FIRST_DELAY", 0.01)
    seen = tmp_path / "seen"
    code = (f"import os, signal; open({str(seen)!r}, 'a').write(os.environ[{CRASHES_ENV!r}]"
            " + '\\n'); os.kill(os.getpid(), signal.SIGSEGV)")
    sup = Supervisor(python(code))
    assert sup.run() == EXIT_CRASH_LOOP
    assert sup.crashes == {"SIGSEGV": supervisor.MAX_CRASHES}
    # Each child was told the crashes before it, so its /metrics can count them.
    assert seen.read_text().splitlines() == [
        "", *(f"SIGSEGV:{n}" for n in range(1, supervisor.MAX_CRASHES))
    ]


def test_a_crash_then_a_clean_exit_ends_with_the_clean_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor, "FIRST_DELAY", 0.01)
    code = (f"import os, signal; c = os.environ[{CRASHES_ENV!r}];"
            " os.kill(os.getpid(), signal.SIGABRT) if not c else None")
    sup = Supervisor(python(code))
    assert sup.run() == 0
    assert sup.crashes == {"SIGABRT": 1}
