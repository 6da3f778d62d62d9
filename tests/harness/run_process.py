"""``kafka-monitor run`` as a child process, as an operator starts it, with a config file."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.harness import processes

__all__ = ["Running", "write_config"]


def write_config(tmp_path: Path, bootstrap: str, port: int, **extra: Any) -> Path:
    """``tmp_path/monitor.yaml``: one cluster ``local`` at ``bootstrap``, metadata read every
    second, HTTP on ``port``; ``extra`` sections added."""
    config = {
        "clusters": [
            {
                "name": "local",
                "bootstrap_servers": bootstrap,
                "broker_version_fallback": "0.9.0.1",
                "request_timeout": "3s",
            }
        ],
        "collectors": {"metadata_interval": "1s"},
        "http": {"host": "127.0.0.1", "port": port},
        **extra,
    }
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Running:
    """``kafka-monitor run`` as a child process, as an operator starts it."""

    def __init__(self, config: Path) -> None:
        self.proc = processes.start(
            [sys.executable, "-m", "monitor", "run", "--config", str(config)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    def stop(self, sig: signal.Signals) -> tuple[float, list[dict[str, Any]]]:
        """Signal the process and return how long it took to exit and its JSON log lines
        (a crash's faulthandler trace, plain text, is left out)."""
        started = time.monotonic()
        self.proc.send_signal(sig)
        _, stderr = self.proc.communicate(timeout=30)
        elapsed = time.monotonic() - started
        return elapsed, [json.loads(line) for line in stderr.splitlines()
                         if line.startswith("{")]

    def service_pid(self) -> int:
        """The service process: the supervisor's only child."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        (pid,) = map(int, children.split())
        return pid

    def kill(self) -> None:
        """SIGKILL whatever of it is left (its process group). Idempotent."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        processes.stop(self.proc, timeout=0)
