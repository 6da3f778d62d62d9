"""``kafka-monitor demo`` (what ``make demo`` runs) is an acceptance test: it starts a real local
Kafka with its workload, serves health, readiness and every group's verdict, the verdicts are
the right ones in time, and Ctrl-C stops everything it started.

The demo runs the default configuration (``offsets_source: both``; only the metadata interval
is shorter), so what it serves is what a user gets. Verdicts are read from the API it serves,
once a second, and timed against what the demo prints: when its workload started, when the
stalled consumer froze and when the stopped one closed."""

from __future__ import annotations

import datetime as dt
import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.harness import processes

GROUPS = ("demo-healthy", "demo-lagging", "demo-stalled", "demo-stopped")
LAGGING_WARN_WITHIN = 60.0  # s after the workload started
STALL_STOP_WITHIN = 30.0  # s after the workload froze / stopped the consumer
HOLD = 10.0  # keep watching past the last deadline: a verdict must hold
POLL = 1.0


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


def wall_time(clock: str, seen_at: float) -> float:
    """Unix time of a printed ``HH:MM:SS.f`` that was printed at or just before ``seen_at``."""
    parsed = dt.datetime.combine(
        dt.datetime.fromtimestamp(seen_at).date(), dt.time.fromisoformat(clock)
    ).timestamp()
    return parsed - 86400 if parsed > seen_at + 60 else parsed


class Output:
    """The demo's stdout, read by a thread: lines with the unix time each arrived."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[tuple[float, str]] = []
        self._proc = proc
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self.lines.append((time.time(), line))

    def text(self, last: int | None = None) -> str:
        lines = [line for _, line in self.lines]
        return "".join(lines[-last:] if last else lines)

    def find(self, pattern: str) -> tuple[float, re.Match[str]] | None:
        for at, line in list(self.lines):
            if m := re.search(pattern, line):
                return at, m
        return None

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def get_status(base: str, group: str) -> str:
    try:
        with urllib.request.urlopen(
            f"{base}/v3/kafka/local/consumer/{group}/status", timeout=5
        ) as response:
            return str(json.loads(response.read())["status"]["status"])
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return "NOTFOUND"
        raise


def judged(timeline: list[tuple[float, str]]) -> list[tuple[float, str]]:
    """From the group's first verdict on (NOTFOUND before: the monitor has not read it yet)."""
    for i, (_, status) in enumerate(timeline):
        if status != "NOTFOUND":
            return timeline[i:]
    return []


def first(timeline: list[tuple[float, str]], status: str, after: float = 0.0) -> float | None:
    return next((t for t, s in timeline if s == status and t >= after), None)


def check_group(
    timeline: list[tuple[float, str]],
    want: str,
    event: float,
    deadline: float,
    allowed_before: set[str],
    start: float,
) -> list[str]:
    """``allowed_before`` until ``event``, then OK or ``want``, ``want`` by ``deadline`` (unix
    time) and, once ``want``, nothing else."""
    tl = judged(timeline)
    if not tl:
        return ["never judged"]
    problems = [
        f"{s} at t+{t - start:.0f}s (before the event at t+{event - start:.0f}s)"
        for t, s in tl if t < event and s not in allowed_before
    ]
    hit = first(tl, want, event)
    if hit is None:
        problems.append(f"never {want} (last {tl[-1][1]})")
    else:
        if hit > deadline:
            problems.append(
                f"{want} at t+{hit - start:.0f}s, {hit - event:.0f}s after the event at "
                f"t+{event - start:.0f}s; deadline t+{deadline - start:.0f}s"
            )
        problems += [f"{s} at t+{t - start:.0f}s after {want}" for t, s in tl
                     if t > hit and s != want]
    problems += [f"{s} at t+{t - start:.0f}s on the way to {want}" for t, s in tl
                 if t >= event and (hit is None or t < hit) and s not in {"OK", want}]
    return problems[:5]


@pytest.mark.kafka
@pytest.mark.slow(80)
def test_demo_verdicts_in_time_and_ctrl_c_stops_everything() -> None:
    proc = processes.start(
        [sys.executable, "-m", "monitor", "demo", "--port", "0", "--status-every", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
    )
    out = Output(proc)
    timelines: dict[str, list[tuple[float, str]]] = {g: [] for g in GROUPS}
    children: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while not (out.find(r"health\s+http://") and out.find(r"workload started")):
            assert proc.poll() is None and time.monotonic() < deadline, out.text()
            time.sleep(0.2)
        found = out.find(r"health\s+(http://127\.0\.0\.1:\d+)/healthz")
        started = out.find(r"^(\d\d:\d\d:\d\d\.\d) workload started")
        assert found and started
        base = found[1].group(1)
        start = wall_time(started[1].group(1), started[0])

        # Poll the served verdicts until every deadline has passed and HOLD more.
        events: dict[str, float] = {}
        cap = start + 180
        while True:
            now = time.time()
            for group in GROUPS:
                timelines[group].append((now, get_status(base, group)))
            for group, word in (("demo-stalled", "froze"), ("demo-stopped", "closed")):
                if group not in events and (
                    hit := out.find(rf"^(\d\d:\d\d:\d\d\.\d) workload: {group} {word}")
                ):
                    events[group] = wall_time(hit[1].group(1), hit[0])
            ends = [start + LAGGING_WARN_WITHIN, *(e + STALL_STOP_WITHIN for e in events.values())]
            if len(events) == 2 and now > max(ends) + HOLD:
                break
            assert now < cap, f"events {events}; {out.text(40)}"
            assert proc.poll() is None, out.text()
            time.sleep(max(0.0, now + POLL - time.time()))

        # What it prints: the workload's state and the monitor's verdict per group.
        text = out.text()
        assert set(re.findall(r"^\s+(demo-\w+)\s+(?:healthy|lagging|stalled|stopped)\s", text,
                              re.M)) == set(GROUPS)
        assert re.search(r"^\s+demo-healthy\s+OK\s+lag", text, re.M), out.text(40)

        def summary(group: str) -> str:
            tl = judged(timelines[group])
            runs: list[str] = []
            for t, s in tl:
                if not runs or not runs[-1].startswith(s + "@"):
                    runs.append(f"{s}@t+{t - start:.0f}s")
            return " ".join(runs)

        problems = {
            "demo-healthy": [
                f"{s} at t+{t - start:.0f}s" for t, s in judged(timelines["demo-healthy"])
                if s != "OK"
            ][:5] or ([] if judged(timelines["demo-healthy"]) else ["never judged"]),
            # Falls behind from the start: OK until its first WARN, then WARN.
            "demo-lagging": check_group(
                timelines["demo-lagging"], "WARN", start, start + LAGGING_WARN_WITHIN,
                {"OK"}, start,
            ),
            # Healthy (OK) until the workload freezes / stops it.
            "demo-stalled": check_group(
                timelines["demo-stalled"], "STALL", events["demo-stalled"],
                events["demo-stalled"] + STALL_STOP_WITHIN, {"OK"}, start,
            ),
            "demo-stopped": check_group(
                timelines["demo-stopped"], "STOP", events["demo-stopped"],
                events["demo-stopped"] + STALL_STOP_WITHIN, {"OK"}, start,
            ),
        }
        report = "\n".join(f"  {g}: {summary(g)}" for g in GROUPS)
        print(f"\ndemo verdicts (t = workload start; froze/closed at "
              f"{', '.join(f'{g} t+{e - start:.0f}s' for g, e in events.items())}):\n{report}")
        assert not any(problems.values()), (problems, report)

        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
            health = json.loads(response.read())
        assert health["clusters"]["local"]["brokers"] == 1
        assert health["clusters"]["local"]["topics"] >= 1
        with urllib.request.urlopen(f"{base}/ready", timeout=5) as response:
            assert response.status == 200
        # The status page's address is the first one printed, and it lists the groups.
        addresses = re.findall(r"^\s+(\w+)\s+(http://\S+)", text, re.M)
        assert addresses[0] == ("page", f"{base}/"), addresses
        with urllib.request.urlopen(f"{base}/", timeout=5) as response:
            assert response.headers.get_content_type() == "text/html"
            page = response.read().decode()
        assert all(f'data-name="{g}"' in page for g in GROUPS)

        children = descendants(proc.pid)
        assert len(children) >= 2, "ZooKeeper and the broker run as child processes"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        out.join(10)
    finally:
        processes.stop(proc, timeout=0, sig=signal.SIGKILL)  # whatever a failure left
    text = out.text()
    assert proc.returncode == 0, text[-4000:]
    assert "demo stopped" in text
    assert not [pid for pid in children if alive(pid)], "processes left running after Ctrl-C"
