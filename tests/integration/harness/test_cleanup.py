"""The harness leaves nothing running: a process orphaned by its parent is still found as the
run's own (the end-of-run check that fails the run and kills it), and a closed browser takes
its zygotes and renderers with it (they were left running, orphaned, after each page test)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness import leftovers, processes
from tests.harness.browser import Browser
from tests.harness.polling import process_gone, wait_for


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def test_an_orphaned_process_of_the_run_is_found() -> None:
    run = os.environ[leftovers.RUN_VARIABLE]
    # A child that starts a grandchild and exits at once: the grandchild is reparented away
    # from this process, as a browser's renderer is when the browser alone is killed.
    parent = subprocess.run(
        [sys.executable, "-c",
         "import subprocess; print(subprocess.Popen(['sleep', '60'], start_new_session=True, "
         "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"],
        capture_output=True, text=True, check=True, timeout=30)
    orphan = int(parent.stdout)
    try:
        assert orphan in leftovers._ours(run)
    finally:
        os.kill(orphan, signal.SIGKILL)
    wait_for(lambda: orphan not in leftovers._ours(run), 10, "the orphan gone")


def test_stopping_a_process_stops_its_whole_group() -> None:
    proc = processes.start([sys.executable, "-c",
                            "import subprocess, time; subprocess.Popen(['sleep', '60']); "
                            "time.sleep(60)"])
    wait_for(lambda: len(group_members(proc.pid)) == 2, 10, "the child started")
    assert processes.stop(proc, timeout=5) == -signal.SIGTERM
    wait_for(lambda: not group_members(proc.pid), 10, "the whole group gone")


@pytest.mark.browser
def test_a_closed_browser_leaves_no_process(tmp_path: Path) -> None:
    browser = Browser(tmp_path / "profile")
    pgid = browser.proc.pid
    try:
        browser.open("about:blank")
        assert len(group_members(pgid)) >= 3  # the browser, its zygotes, a renderer...
    finally:
        browser.close()
    wait_for(lambda: not group_members(pgid), 10, "every Chromium process gone")
    assert process_gone(pgid)
    time.sleep(0.5)
    assert not group_members(pgid)
