"""noida-db, a single-node Kafka-protocol broker of today's request versions that keeps record
timestamps and answers lookups by time (``../shared``'s test-infrastructure notes, section 6):
the one broker here for the failover translation and the exact lag in seconds on a current
protocol. One binary in the PyPI wheel ``noida-db`` (a dev dependency); each instance is a
cluster of its own, on a free port with its own data folder, started in milliseconds.

Its known gaps (no KIP-848 groups, no records in ``__consumer_offsets``, no JMX, one node) are
never worked around in the product: the tests use the Admin-API offsets source.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import TracebackType

import pytest

from tests.harness import processes
from tests.harness.net import free_port, wait_listening


def noida_binary() -> Path:
    try:
        import noida_db  # type: ignore[import-not-found]
    except ImportError:
        pytest.fail("noida-db not installed: the dev extra carries it (make setup)",
                    pytrace=False)
    path = Path(noida_db.__file__).parent / "noida-db"
    if not path.is_file():
        pytest.fail(f"no noida-db binary at {path}", pytrace=False)
    return path


class Noida:
    """One noida-db Kafka broker on 127.0.0.1."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Noida:
        self.folder.mkdir(parents=True, exist_ok=True)
        log = self.folder / "noida.log"
        with log.open("ab") as out:
            self._proc = processes.start(
                [str(noida_binary()), "start", "--only", "kafka", "--kafka-port", str(self.port),
                 "--data-dir", str(self.folder / "data")],
                stdout=out, stderr=subprocess.STDOUT,
            )
        wait_listening(self._proc, self.port, log, "noida-db")
        return self

    def stop(self) -> None:
        """SIGTERM (it saves its snapshot and exits in about 2 s), then SIGKILL."""
        if self._proc is not None:
            processes.stop(self._proc, timeout=10)
            self._proc = None

    def __enter__(self) -> Noida:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
