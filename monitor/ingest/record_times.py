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

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    Message,
    TopicPartition,
)

from monitor.config import ClusterConfig, LagTimeConfig
from monitor.ingest.base import Collector
from monitor.ingest.kafka_client import client_config
from monitor.model.metric_catalogue import Reading
from monitor.model.observations import RecordTimes
from monitor.store.store import Store

_log = logging.getLogger("monitor.collector.record_times")

Position = tuple[str, int, int]  # topic, partition, committed offset
NO_TIMESTAMP_BACKOFF = 600.0
"""A topic whose records carry no timestamp is not fetched from again for this long."""
RESULTS = ("timestamp", "no_timestamp", "deleted", "compacted", "denied", "log_end",
           "timeout", "error")
"""How a fetch ended (the counter's ``result`` label)."""
_KEPT = {"no_timestamp", "deleted", "compacted", "denied"}
"""Fallbacks cached for the position like a timestamp: fetching again would say the same."""
_POLL = 0.2


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
                    if isinstance(result, int) or result in _KEPT:
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
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",  # a deleted offset is reported, not skipped
                # One record is wanted per partition: small fetches, no read-ahead.
                "fetch.max.bytes": 1_048_576,
                "max.partition.fetch.bytes": 65_536,
                "queued.min.messages": 1,
                "queued.max.messages.kbytes": 1024,
            }))
        return self._consumer

    def _fetch(self, todo: list[Position]) -> dict[Position, int | str]:
        """One record per position: in waves of one offset per partition (two groups at
        different offsets of a partition take two waves), within ``fetch_timeout``."""
        consumer = self._client()
        deadline = time.monotonic() + self._config.fetch_timeout
        out: dict[Position, int | str] = {}
        left = list(todo)
        while left and time.monotonic() < deadline:
            wave: dict[tuple[str, int], int] = {}
            rest: list[Position] = []
            for topic, partition, offset in left:
                if (topic, partition) in wave:
                    rest.append((topic, partition, offset))
                else:
                    wave[(topic, partition)] = offset
            left = rest
            consumer.assign([TopicPartition(t, p, o) for (t, p), o in wave.items()])
            try:
                while wave and time.monotonic() < deadline:
                    for m in consumer.consume(len(wave), _POLL):
                        tp = (m.topic() or "", m.partition() or 0)
                        at = wave.get(tp)
                        if at is None:
                            continue
                        result = _result(m, at)
                        if result is not None:
                            out[(tp[0], tp[1], at)] = result
                            del wave[tp]
            finally:
                consumer.unassign()
            for (t, p), o in wave.items():
                out[(t, p, o)] = "timeout"
        for position in left:
            out[position] = "timeout"
        return out


def _result(m: Message, offset: int) -> int | str | None:
    """The timestamp of the record at ``offset`` or why there is none; None: not this
    partition's answer (an error for another reason, ignored)."""
    err = m.error()
    if err is not None:
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            return "log_end"
        if code in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
            return "deleted"
        if code in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                    KafkaError.GROUP_AUTHORIZATION_FAILED):
            return "denied"
        _log.warning("record fetch failed", extra={"topic": m.topic(), "error": str(err)})
        return "error"
    at = m.offset()
    if at is None or at < offset:
        return None  # an older record of an earlier fetch: the one wanted comes next
    if at > offset:
        return "compacted"
    kind, ts = m.timestamp()
    if kind == TIMESTAMP_NOT_AVAILABLE or ts <= 0:
        return "no_timestamp"
    return int(ts)
