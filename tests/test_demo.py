"""``kafka-monitor demo`` (what ``make demo`` runs) starts a real local Kafka with its workload,
serves health and readiness, and stops everything it started on Ctrl-C."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest


def descendants(pid: int) -> set[int]:
    """Every live descendant process of ``pid`` (from /proc, Linux)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.kafka
def test_demo_runs_end_to_end_and_stops_everything_on_ctrl_c() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "demo", "--port", "0", "--status-every", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
    )
    assert proc.stdout is not None
    output: list[str] = []
    base = None
    groups_seen: set[str] = set()
    verdicts: dict[str, str] = {}
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and not (
            base and len(groups_seen) == 4 and verdicts.get("demo-healthy") == "OK"
        ):
            line = proc.stdout.readline()
            if not line:
                break
            output.append(line)
            if m := re.search(r"health\s+(http://127\.0\.0\.1:\d+)/healthz", line):
                base = m.group(1)
            if m := re.match(r"\s+(demo-\w+)\s+(healthy|lagging|stalled|stopped)\s", line):
                groups_seen.add(m.group(1))
            if m := re.match(r"\s+(demo-\w+)\s+(OK|WARN|REWIND|STALL|STOP)\s+lag", line):
                verdicts[m.group(1)] = m.group(2)
        assert base, "".join(output)
        assert groups_seen == {"demo-healthy", "demo-lagging", "demo-stalled", "demo-stopped"}
        assert verdicts.get("demo-healthy") == "OK", "".join(output[-40:])

        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
            health = json.loads(response.read())
        assert health["clusters"]["local"]["brokers"] == 1
        assert health["clusters"]["local"]["topics"] >= 1

        ready_deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/ready", timeout=5) as response:
                    assert response.status == 200
                    break
            except urllib.error.HTTPError:
                assert time.monotonic() < ready_deadline, "demo never became ready"
                time.sleep(0.2)

        children = descendants(proc.pid)
        assert len(children) >= 2, "ZooKeeper and the broker run as child processes"
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        output.append(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = "".join(output)
    assert proc.returncode == 0, text
    assert "demo stopped" in text
    assert not [pid for pid in children if alive(pid)], "processes left running after Ctrl-C"
