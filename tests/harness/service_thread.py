"""Run the real :class:`monitor.service.Service` (scheduler, collectors, evaluator, HTTP) in a
background thread with its own event loop, for tests that read its results in-process."""

from __future__ import annotations

import asyncio
import threading
import time
from types import TracebackType

from monitor.config import MonitorConfig
from monitor.service import Service, serve


class ServiceThread:
    def __init__(self, config: MonitorConfig) -> None:
        self.service = Service(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="service", daemon=True)

    def _main(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._started.set()
            await serve(self.service, self._stop)

        try:
            asyncio.run(main())
        except BaseException as exc:  # reported by stop()
            self._error = exc
            self._started.set()

    def start(self) -> ServiceThread:
        """Start, and return once the HTTP server listens (``service.http_port`` is set)."""
        self._thread.start()
        if not self._started.wait(30):
            raise RuntimeError("service thread did not start")
        deadline = time.monotonic() + 30
        while self.service.http_port is None:
            if self._error is not None or not self._thread.is_alive():
                raise RuntimeError("service failed to start") from self._error
            if time.monotonic() > deadline:
                raise RuntimeError("service HTTP server not listening after 30 s")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(15)
        if self._thread.is_alive():
            raise RuntimeError("service thread did not stop within 15 s")
        if self._error is not None:
            raise RuntimeError("service thread failed") from self._error

    def __enter__(self) -> ServiceThread:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
