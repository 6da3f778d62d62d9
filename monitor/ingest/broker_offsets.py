"""Broker offsets: every allowed partition's log-start and log-end offsets (watermarks).

Lag is log end minus committed offset, so this runs often (``broker_offsets_interval``) and must
stay cheap at 100k partitions:

* The partition list and leaders come from the metadata collector's latest answer in the store
  (refreshed on its own, slower interval). Until there is one, the collector asks once itself,
  so the service's first round already has offsets.
* Offsets are asked with ListOffsets, batched per leader: librdkafka groups one
  ``list_offsets`` call into one request per leader broker, and we send one call per spec
  (earliest, latest) per chunk of at most ``MAX_PARTITIONS_PER_CALL`` partitions of one leader.
  Chunks exist because librdkafka's cost grows with the square of the partitions in one call
  (measured on librdkafka 2.16.1: 10k partitions 0.3 s, 20k 1.2 s, 40k 4.6 s of client CPU;
  100k in chunks of 1000: 0.7 s per spec).
* A partition whose answer failed is reported in ``BrokerOffsets.failed``: the store keeps its
  previous values, marked stale. librdkafka reports a leader that did not answer within
  ``request_timeout`` as a *successful* answer with offset -1001 (OFFSET_INVALID); such
  answers are failures here, never offsets.
"""

from __future__ import annotations

import concurrent.futures
import logging
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import _AdminClientImpl

from monitor.config import ClusterConfig
from monitor.ingest.base import Collector
from monitor.ingest.kafka_client import admin_client
from monitor.model.observations import BrokerOffsets, ClusterMetadata
from monitor.store.store import Store

_log = logging.getLogger("monitor.collector")

#: Partitions per ``list_offsets`` call (all led by the same broker, so one request each).
MAX_PARTITIONS_PER_CALL = 1000

#: Extra seconds to wait for librdkafka beyond the request timeout it enforces itself.
_WAIT_GRACE = 5.0

# An answer for one chunk: offsets by partition (a result or a per-partition error), or the
# error that failed the whole call.
_Answer = dict[TopicPartition, Any] | str


@dataclass(slots=True)
class _Chunk:
    """Partitions from ``start`` on in the plan's lists, all with the same leader, with their
    two requests prebuilt (the offset field of a request partition carries the spec)."""

    start: int
    earliest: list[TopicPartition]
    latest: list[TopicPartition]


@dataclass(slots=True)
class _Plan:
    """What to ask each round, built once per metadata answer: parallel lists of every allowed
    partition, grouped by leader, and the chunks over them."""

    source: object  # the metadata answer this plan was built from (compared by identity)
    topics: list[str] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)
    chunks: list[_Chunk] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)  # partitions per topic

    def grew(self, previous: _Plan) -> bool:
        """Whether a topic of ``previous`` has more partitions now."""
        return any(n > previous.sizes.get(topic, n) for topic, n in self.sizes.items())


class BrokerOffsetsCollector(Collector):
    """Log-start and log-end offsets of every allowed partition of one cluster, each round."""

    kind = "broker_offsets"

    def __init__(self, cluster: ClusterConfig, interval: float, store: Store) -> None:
        super().__init__(cluster.name, interval)
        self._config = cluster
        self._store = store
        self._admin: AdminClient | None = None
        self._plan: _Plan | None = None
        self._refresh_client_metadata = False
        self._failing = 0  # partitions that failed last round, to log changes only

    def collect(self) -> None:
        if self._admin is None:
            self._admin = admin_client(self._config)
        try:
            self._round(self._admin)
        finally:
            self._admin.poll(0)  # serves error_cb: why a failed call failed (connection_errors)

    def _round(self, admin: AdminClient) -> None:
        plan = self._current_plan(admin)
        observed_at = time.time()
        timeout = self._config.request_timeout
        # Every call in flight at once: a round costs about one round trip to the slowest leader.
        pending = [
            (
                chunk,
                _list_offsets(admin, chunk.earliest, timeout),
                _list_offsets(admin, chunk.latest, timeout),
            )
            for chunk in plan.chunks
        ]
        topics: list[str] = []
        partitions: list[int] = []
        log_start: list[int] = []
        log_end: list[int] = []
        failed: dict[tuple[str, int], str] = {}
        for chunk, earliest_call, latest_call in pending:
            earliest = _wait(earliest_call, timeout + _WAIT_GRACE)
            latest = _wait(latest_call, timeout + _WAIT_GRACE)
            for i, tp in enumerate(chunk.earliest, start=chunk.start):
                start = _offset(earliest, tp)
                end = _offset(latest, tp)
                if isinstance(start, int) and isinstance(end, int):
                    topics.append(plan.topics[i])
                    partitions.append(plan.partitions[i])
                    log_start.append(start)
                    log_end.append(end)
                else:
                    error = start if isinstance(start, str) else end
                    failed[(plan.topics[i], plan.partitions[i])] = str(error)
        self._store.put_broker_offsets(
            BrokerOffsets(
                cluster=self.cluster,
                observed_at=observed_at,
                topics=topics,
                partitions=partitions,
                log_start=log_start,
                log_end=log_end,
                failed=failed,
            )
        )
        self._log_failures(failed, len(plan.topics))
        if failed and not topics:
            raise RuntimeError(f"every partition failed: {_summary(failed.values())}")

    def close(self) -> None:
        self._admin = None

    # ------------------------------------------------------------------ the plan

    def _current_plan(self, admin: AdminClient) -> _Plan:
        """The plan for the store's latest metadata; before the metadata collector's first
        answer, for one metadata request of our own (kept until the store has one)."""
        metadata = self._store.metadata(self.cluster)
        if metadata is not None:
            if self._plan is None or self._plan.source is not metadata:
                plan = self._build_plan(metadata, _layout(metadata))
                if self._plan is not None and plan.grew(self._plan):
                    self._refresh_client_metadata = True
                self._plan = plan
            if self._refresh_client_metadata:
                self._refresh_metadata_cache(admin)
            return self._plan
        if self._plan is None:
            answer = admin.list_topics(timeout=self._config.request_timeout)
            layout = (
                (name, p.id, p.leader)
                for name, t in answer.topics.items()
                for p in t.partitions.values()
            )
            self._plan = self._build_plan(answer, layout)
        return self._plan

    def _refresh_metadata_cache(self, admin: AdminClient) -> None:
        """Make librdkafka re-read metadata: it answers ``_UNKNOWN_PARTITION``, without asking
        any broker, for partitions added since its own cache was filled (refreshed only every
        ``topic.metadata.refresh.interval.ms``, 5 min by default; seen on Kafka 0.9). Retried
        every round until it succeeds; until then the new partitions just fail."""
        try:
            admin.list_topics(timeout=self._config.request_timeout)
        except KafkaException:
            return
        self._refresh_client_metadata = False

    def _build_plan(self, source: object, layout: Iterable[tuple[str, int, int]]) -> _Plan:
        allowed: dict[str, bool] = {}
        by_leader: dict[int, tuple[list[str], list[int]]] = {}
        plan = _Plan(source)
        sizes = plan.sizes
        for topic, partition, leader in layout:
            ok = allowed.get(topic)
            if ok is None:
                ok = allowed[topic] = self._config.topics.matches(topic)
            if ok:
                names, ids = by_leader.setdefault(leader, ([], []))
                names.append(topic)
                ids.append(partition)
                sizes[topic] = sizes.get(topic, 0) + 1
        for names, ids in by_leader.values():
            for first in range(0, len(names), MAX_PARTITIONS_PER_CALL):
                last = min(first + MAX_PARTITIONS_PER_CALL, len(names))
                start = len(plan.topics)
                plan.topics.extend(names[first:last])
                plan.partitions.extend(ids[first:last])
                plan.chunks.append(
                    _Chunk(
                        start=start,
                        earliest=[
                            TopicPartition(t, p, OFFSET_BEGINNING)
                            for t, p in zip(names[first:last], ids[first:last], strict=True)
                        ],
                        latest=[
                            TopicPartition(t, p, OFFSET_END)
                            for t, p in zip(names[first:last], ids[first:last], strict=True)
                        ],
                    )
                )
        return plan

    def _log_failures(self, failed: dict[tuple[str, int], str], total: int) -> None:
        """Log when partitions start or stop failing, not every round they fail."""
        if failed and not self._failing:
            _log.warning(
                "broker offsets incomplete",
                extra={
                    "collector": self.name,
                    "failed": len(failed),
                    "partitions": total,
                    "errors": _summary(failed.values()),
                },
            )
        elif self._failing and not failed:
            _log.info("broker offsets complete again", extra={"collector": self.name})
        self._failing = len(failed)


def _layout(metadata: ClusterMetadata) -> Iterable[tuple[str, int, int]]:
    for topic, parts in metadata.topics.items():
        for p in parts:
            yield topic, p.partition, p.leader


def _list_offsets(
    admin: AdminClient, request: list[TopicPartition], timeout: float
) -> concurrent.futures.Future[dict[TopicPartition, Any]]:
    """One ListOffsets call with one future for all its partitions.

    ``AdminClient.list_offsets`` wraps this same call but makes a future per partition, which
    more than doubled the Python time per round (100k partitions in chunks of 1000, per spec:
    1.7-2.1 s against 0.7 s), so we call the C method it wraps, with the request it would
    build: each partition's ``offset`` is the spec (-2 earliest, -1 latest).
    """
    future: concurrent.futures.Future[dict[TopicPartition, Any]] = concurrent.futures.Future()
    future.set_running_or_notify_cancel()
    _AdminClientImpl.list_offsets(admin, request, future, request_timeout=timeout)
    return future


def _wait(future: concurrent.futures.Future[dict[TopicPartition, Any]], timeout: float) -> _Answer:
    try:
        return future.result(timeout=timeout)
    except KafkaException as exc:
        return _error_name(exc.args[0] if exc.args else exc)
    except concurrent.futures.TimeoutError:
        return "_TIMED_OUT"


def _offset(answer: _Answer, tp: TopicPartition) -> int | str:
    """The partition's offset, or why there is none."""
    if isinstance(answer, str):
        return answer
    value = answer.get(tp)
    if value is None:
        return "no answer for this partition"
    if isinstance(value, KafkaError):
        return _error_name(value)
    offset = int(value.offset)
    if offset < 0:
        return sys.intern(f"no offset returned ({offset})")
    return offset


def _error_name(error: object) -> str:
    # Interned: a broker outage gives thousands of partitions the same error string.
    return sys.intern(error.name() if isinstance(error, KafkaError) else str(error))


def _summary(errors: Iterable[str]) -> str:
    counts = Counter(errors)
    return ", ".join(f"{error} ({n})" for error, n in counts.most_common(5))
