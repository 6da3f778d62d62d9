"""What every collector shares: a blocking ``collect()`` run on a schedule, and its health.

Health is recorded here, once, so every collector reports the same facts (last success, last
error, duration, error count) to ``/healthz``, ``/ready`` and Prometheus, and a collector that
fails logs when it starts failing and when it recovers rather than on every round.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from monitor.ingest.connection_errors import connection_errors
from monitor.model.metric_catalogue import Reading

_log = logging.getLogger("monitor.collector")
#: A connection error reported this long before a round started still explains its failure
#: (the client's callbacks are served between rounds too).
_REASON_SLACK = 5.0


@dataclass
class CollectorHealth:
    runs: int = 0
    errors: int = 0
    consecutive_errors: int = 0
    last_success: float | None = None  # unix time
    last_error: str | None = None
    last_error_at: float | None = None
    last_duration: float | None = None  # seconds

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "errors": self.errors,
            "consecutive_errors": self.consecutive_errors,
            "last_success": self.last_success,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "last_duration_seconds": self.last_duration,
        }


class Collector(ABC):
    """One kind of observation from one cluster. Subclasses implement :meth:`collect`, which
    blocks (Kafka clients do) and raises on failure; the service runs it in a worker thread
    every ``interval`` seconds, never two rounds at once."""

    kind: str = "collector"
    #: Whether this collector talks to Kafka through librdkafka clients, so that a failed
    #: round is explained by the cluster's latest connection error (connection_errors).
    kafka_client: bool = True

    def __init__(self, cluster: str, interval: float) -> None:
        self.cluster = cluster
        self.interval = interval
        self.health = CollectorHealth()

    @property
    def name(self) -> str:
        return f"{self.kind}/{self.cluster}"

    @property
    def ready(self) -> bool:
        """Whether this collector's data can be served; by default, after one good round."""
        return self.health.last_success is not None

    @abstractmethod
    def collect(self) -> None: ...

    def close(self) -> None:
        """Release clients; called once at shutdown."""
        return None

    def counters(self) -> list[Reading]:
        """This collector's own counters for ``/metrics``, beyond the health every collector
        has (families from :data:`monitor.model.metric_catalogue.COLLECTOR_COUNTERS`)."""
        return []

    def saved_state(self) -> object | None:
        """What this collector needs to continue after a restart, beyond the store (saved
        with it by :mod:`monitor.store.snapshot`; picklable, small). Taken before the store's own
        copy, so it never claims more than the store holds. None: nothing."""
        return None

    def resume(self, state: object) -> None:
        """Continue from :meth:`saved_state`'s value of a previous process; called before
        the first round. Ignore what is not understood."""
        return None

    def run_once(self) -> bool:
        """One round with health bookkeeping; never raises, so a failing cluster can't take
        the scheduler down with it."""
        started = time.monotonic()
        started_at = time.time()
        health = self.health
        health.runs += 1
        try:
            self.collect()
        except Exception as exc:  # a collector failure is data, not a crash
            health.errors += 1
            health.consecutive_errors += 1
            health.last_error = f"{type(exc).__name__}: {exc}"
            reason = (connection_errors.since(self.cluster, started_at - _REASON_SLACK)
                      if self.kafka_client else None)
            if reason is not None and reason not in health.last_error:
                health.last_error += f"; connection: {reason}"
            health.last_error_at = time.time()
            if health.consecutive_errors == 1:
                _log.warning(
                    "collector failing",
                    extra={"collector": self.name, "error": health.last_error},
                )
            return False
        finally:
            health.last_duration = time.monotonic() - started
        if health.consecutive_errors:
            _log.info(
                "collector recovered",
                extra={"collector": self.name, "failed_rounds": health.consecutive_errors},
            )
        health.consecutive_errors = 0
        health.last_success = time.time()
        return True
