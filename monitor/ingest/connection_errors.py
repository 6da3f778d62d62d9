"""Why a cluster cannot be reached, as librdkafka tells it.

A failed call says only "Broker transport failure" or "timed out"; the reason (a TLS
handshake that failed because the CA is wrong or the client certificate was refused, a
SASL failure, a refused connection, a name that does not resolve) reaches the application
only through the client's ``error_cb``. Every client built by :mod:`.kafka_client` reports
there; a collector's failed round quotes the latest reason in ``/healthz`` and in its
"collector failing" log line (:meth:`monitor.ingest.base.Collector.run_once`).

No confluent_kafka import here: the callback only calls ``name()`` and ``str()`` on the
error it is given.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

#: Says nothing the connection errors before it did not ("1/1 brokers are down").
_UNINFORMATIVE = frozenset({"_ALL_BROKERS_DOWN"})


class ConnectionErrors:
    """The latest connection-level error per cluster, with when it was reported."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, str]] = {}

    def callback(self, cluster: str) -> Callable[[Any], None]:
        """An ``error_cb`` for a client of ``cluster``."""

        def on_error(error: Any) -> None:
            if error.name() in _UNINFORMATIVE:
                return
            with self._lock:
                self._last[cluster] = (time.time(), f"{error.name()}: {error.str()}")

        return on_error

    def since(self, cluster: str, moment: float) -> str | None:
        """The latest reason reported for ``cluster`` at or after ``moment`` (unix time)."""
        with self._lock:
            last = self._last.get(cluster)
        return last[1] if last is not None and last[0] >= moment else None


#: The process's registry: every client of the service reports here.
connection_errors = ConnectionErrors()
