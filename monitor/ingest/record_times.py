"""Timestamps of the first record each lagging group has not read: the exact lag in seconds.

Brokers from 0.10 on store a timestamp in every record, so the age of the record at a group's
committed offset is its lag in time, with no history needed (and none lost at a restart).
Each round this collector takes the lagging positions of the latest evaluation and fetches
the record at each one it does not know yet:

* **Bounded**: at most ``lag_time.max_fetches`` records a round, fetched with small fetch
  sizes through a plain consumer that is assigned, never joined, never committed. Oldest
  figures first: partitions never fetched, then those fetched longest ago (most behind first
  among equals), so with more lagging partitions than the bound every one gets its turn.
* **Cached per committed offset**: a stopped group costs one fetch, not one per round. Only
  positions still lagging are kept, so the cache is as large as the lag, no larger.
* **Fallbacks counted by reason** (``kafka_monitor_lag_time_fetches_total{result}``): a record
  without a timestamp (brokers before 0.10: the topic is skipped for ``NO_TIMESTAMP_BACKOFF``
  then), deleted by retention, compacted away (the fetch starts past it), access denied, at
  the log end (the group caught up meanwhile), not answered in time. The evaluator then keeps
  the log-end interpolation, and says so (``lag_seconds_source``).

The store gets the whole set of known timestamps each round; the evaluator looks up each
lagging partition's committed offset in it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, Message

from monitor.config import ClusterConfig, LagTimeConfig
from monitor.ingest.base import Collector
from monitor.ingest.kafka_client import client_config
from monitor.ingest.record_fetch import LASTING, ONE_RECORD, Position, fetch_records
from monitor.model.metric_catalogue import Reading
from monitor.model.observations import RecordTimes
from monitor.store.store import Store

_log = logging.getLogger("monitor.collector.record_times")

NO_TIMESTAMP_BACKOFF = 600.0
"""A topic whose records carry no timestamp is not fetched from again for this long."""
RESULTS = ("timestamp", "no_timestamp", "deleted", "compacted", "denied", "log_end",
           "timeout", "error")
"""How a fetch ended (the counter's ``result`` label)."""


class RecordTimesCollector(Collector):
    """``lagging(cluster)``: the latest evaluation's lagging positions, most behind first."""

    kind = "record_times"

    def __init__(
        self, cluster: ClusterConfig, interval: float, config: LagTimeConfig, store: Store,
        lagging: Callable[[str], Sequence[Position]],
    ) -> None:
        super().__init__(cluster.name, interval)
        self._cluster = cluster
        self._config = config
        self._store = store
        self._lagging = lagging
        self._consumer: Consumer | None = None
        self._known: dict[Position, int | str] = {}  # timestamp (ms) or a cached fallback
        self._no_timestamps: dict[str, float] = {}  # topic -> when to try it again
        self._fetched_at: dict[tuple[str, int], float] = {}  # partition -> its last fetch
        self.results = dict.fromkeys(RESULTS, 0)

    def counters(self) -> list[Reading]:
        return [Reading("kafka_monitor_lag_time_fetches", (self.cluster, result), n)
                for result, n in self.results.items()]

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def collect(self) -> None:
        now = time.time()
        wanted = list(dict.fromkeys(self._lagging(self.cluster)))
        self._no_timestamps = {t: until for t, until in self._no_timestamps.items()
                               if until > now}
        known = {p: self._known[p] for p in wanted if p in self._known}
        todo = [p for p in wanted if p not in known and p[0] not in self._no_timestamps]
        # Oldest figure first; ``wanted`` is most behind first, and the sort is stable.
        todo.sort(key=lambda p: self._fetched_at.get((p[0], p[1]), 0.0))
        todo = todo[: self._config.max_fetches]
        lagging = {(p[0], p[1]) for p in wanted}
        self._fetched_at = {tp: at for tp, at in self._fetched_at.items() if tp in lagging}
        self._fetched_at.update({(p[0], p[1]): now for p in todo})
        try:
            if todo:
                for position, result in self._fetch(todo).items():
                    self.results["timestamp" if isinstance(result, int) else result] += 1
                    if isinstance(result, int) or result in LASTING:
                        known[position] = result
                    if result == "no_timestamp":
                        self._no_timestamps[position[0]] = now + NO_TIMESTAMP_BACKOFF
        finally:
            self._known = known
            self._store.put_record_times(RecordTimes(
                self.cluster, now, {p: ts for p, ts in known.items() if isinstance(ts, int)}))

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(client_config(self._cluster, **{
                "group.id": f"kafka-monitor-lag-time-{self.cluster}",  # never joined
                "client.id": f"kafka-monitor-lag-time-{self.cluster}",
                **ONE_RECORD,
            }))
        return self._consumer

    def _fetch(self, todo: list[Position]) -> dict[Position, int | str]:
        found = fetch_records(self._client(), todo, self._config.fetch_timeout)
        return {p: _timestamp(m) if isinstance(m, Message) else m for p, m in found.items()}


def _timestamp(m: Message) -> int | str:
    """The record's timestamp, or ``no_timestamp`` (brokers before 0.10)."""
    kind, ts = m.timestamp()
    if kind == TIMESTAMP_NOT_AVAILABLE or ts <= 0:
        return "no_timestamp"
    return int(ts)
