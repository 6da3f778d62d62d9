"""Realistic producer and consumer-group behaviour against a real Kafka, for tests and the demo.

Each workload is a thread with its own confluent-kafka client, ``start()`` and ``stop()``
(``stop()`` closes the client and joins the thread within a few seconds) and context-manager
support. ``config`` is the librdkafka client config of the cluster, e.g.
``LocalKafka.client_config()``.

Consumer-group scenarios, named after the consumer status they must produce in a lag evaluator
(Burrow's model: a window of *committed* offsets per partition, compared with the log end):

================  ===========================================================================
``healthy``       consumes everything as it arrives; commits its position every
                  ``commit_interval`` s, so its lag stays near zero.
``lagging``       consumes at most ``max_rate`` records/s (below the produce rate) and commits
                  its position every ``commit_interval`` s: committed offsets advance, lag grows.
``stalled``       consumes normally until ``stall_after_records`` records (or ``stall_after_s``
                  s after its first assignment), then pauses its partitions but stays in the
                  group and keeps committing *the same* offsets every ``commit_interval`` s.
``stopped``       consumes and commits like ``healthy`` for ``stop_after_s`` s, commits a last
                  time and closes for good: the committed offsets stay, the group has no
                  members (Kafka 0.9 reports the group as Dead and drops it from ListGroups).
``batch``         wakes every ``period`` s, reads what is there, commits only offsets that
                  moved and sleeps again: idle topics see no commits from it for long stretches.
``silent``        consumes and commits like ``healthy`` for ``silent_after_s`` s, then stays in
                  the group (heartbeats continue) but consumes nothing and commits nothing:
                  alive, not committing.
``deadpart``      consumes and commits like ``healthy``; after ``dead_after_s`` s it stops
                  reading and committing one partition (paused) and keeps going on the others.
================  ===========================================================================

Commit cadence (all scenarios): offsets are committed synchronously, explicitly (auto-commit
is off) every ``commit_interval`` seconds (default 1.0), only for partitions the consumer has a
position for (consumed at least once, or frozen for ``stalled``); a committed offset is "next
record to read" (last processed + 1). A commit also happens on partition revocation (so also
when a consumer is closed by ``stop()``) and, for ``stopped``, just before closing. Every
successful commit is recorded in ``commits``; failed ones (coordinator moving after a broker
failure, ...) are counted in ``commit_errors`` and retried at the next tick, so the workloads
keep running through broker kills and restarts.

``librdkafka`` log lines go to the ``monitor.dev.localkafka.librdkafka`` Python logger instead of
stderr; its deprecation warnings for ``api.version.request`` / ``broker.version.fallback``
(which 0.9 brokers need) are dropped there.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Self

from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from monitor.ingest.kafka_client import DropFallbackDeprecation

__all__ = [
    "SCENARIOS",
    "BatchConsumer",
    "CommitRecord",
    "DeadPartitionConsumer",
    "GroupConsumer",
    "HealthyConsumer",
    "LaggingConsumer",
    "ProducerLoad",
    "SilentConsumer",
    "StalledConsumer",
    "StoppedConsumer",
    "WorkloadError",
    "committed_offsets",
    "end_offsets",
    "librdkafka_logger",
    "produce_batch",
    "reset_offsets",
]

librdkafka_logger = logging.getLogger("monitor.localkafka.librdkafka")


librdkafka_logger.addFilter(DropFallbackDeprecation())
_log = logging.getLogger(__name__)

TP = tuple[str, int]


class WorkloadError(RuntimeError):
    """A workload thread failed (the original exception is chained)."""


@dataclass(frozen=True)
class CommitRecord:
    """One successful commit: when (``time.monotonic()``) and which offsets."""

    at: float
    offsets: dict[TP, int]


def _client_config(config: Mapping[str, object], **extra: object) -> dict[str, Any]:
    merged: dict[str, Any] = {"logger": librdkafka_logger, **config}
    merged.update(extra)
    return merged


class _Worker(threading.Thread):
    """Thread with a stop event and error capture; ``stop()`` re-raises a failure."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by check()/stop()
            _log.exception("%s failed", self.name)
            self.error = exc

    def _run(self) -> None:
        raise NotImplementedError

    def check(self) -> None:
        """Raise ``WorkloadError`` if the thread died with an exception."""
        if self.error is not None:
            raise WorkloadError(f"{self.name} failed: {self.error!r}") from self.error

    def stop(self, timeout: float = 15.0) -> None:
        """Ask the thread to finish, wait for it (its client is closed on the way out)."""
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout)
        if self.is_alive():
            raise WorkloadError(f"{self.name} did not stop within {timeout}s")
        self.check()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# --------------------------------------------------------------------------- producer


class ProducerLoad(_Worker):
    """Produces ``rate`` records/s to ``topic``, round-robin over all its partitions.

    Records are produced in small bursts every ``tick`` s so the rate holds on average over
    any window longer than a tick. Keys are ``<seq>``; values are ``value_size`` bytes. The
    partition count is read from metadata at start (which auto-creates a missing topic with the
    broker's ``num.partitions``). ``delivered`` counts acknowledged records per partition.
    With ``track_acks``, :meth:`acked_at` tells when the record at an offset was acknowledged
    (when the log end passed it, within a round trip): the truth lag in seconds is measured
    against (0.9 records carry no timestamp).
    """

    def __init__(
        self,
        config: Mapping[str, object],
        topic: str,
        rate: float,
        *,
        value_size: int = 100,
        tick: float = 0.02,
        producer_config: Mapping[str, object] | None = None,
        track_acks: bool = False,
    ) -> None:
        super().__init__(name=f"producer-{topic}")
        if rate <= 0:
            raise ValueError("rate must be > 0")
        self.topic = topic
        self.rate = rate
        self.value_size = value_size
        self.tick = tick
        self._producer = Producer(
            _client_config(config, **{"linger.ms": 5, **(producer_config or {})})
        )
        self.partitions: list[int] = []
        self.produced = 0
        self.failed = 0
        self._delivered: dict[int, int] = {}
        self._track_acks = track_acks
        self._acks: dict[int, list[tuple[int, float]]] = {}  # partition -> (offset, unix time)
        self._lock = threading.Lock()
        self.ready = threading.Event()

    @property
    def delivered(self) -> dict[int, int]:
        """Acknowledged records per partition."""
        with self._lock:
            return dict(self._delivered)

    @property
    def delivered_total(self) -> int:
        with self._lock:
            return sum(self._delivered.values())

    def acked_at(self, partition: int, offset: int) -> float | None:
        """Unix time the record at ``offset`` was acknowledged (``track_acks`` only); None if
        no such record was acknowledged (yet)."""
        with self._lock:
            acks = self._acks.get(partition, [])
            i = bisect.bisect_left(acks, (offset, -1.0))
            return acks[i][1] if i < len(acks) and acks[i][0] == offset else None

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            if err is None:
                p = msg.partition() or 0
                self._delivered[p] = self._delivered.get(p, 0) + 1
                offset = msg.offset()
                if self._track_acks and offset is not None and offset >= 0:
                    bisect.insort(self._acks.setdefault(p, []), (offset, time.time()))
            else:
                self.failed += 1
                _log.warning("delivery to %s failed: %s", self.topic, err)

    def _discover_partitions(self, timeout: float = 30.0) -> list[int]:
        deadline = time.monotonic() + timeout
        while not self._stop_event.is_set():
            try:
                md = self._producer.list_topics(self.topic, timeout=5)
            except KafkaException as exc:
                # librdkafka 2.x sometimes fails to parse small Metadata v0 responses (e.g. a
                # topic still being created): "Not enough room in tmpabuf". Retry.
                _log.debug("metadata for %s failed: %s", self.topic, exc)
                md = None
            tm = md.topics.get(self.topic) if md is not None else None
            if (
                tm is not None
                and tm.error is None
                and tm.partitions
                and all(p.leader >= 0 for p in tm.partitions.values())
            ):
                return sorted(tm.partitions)
            if time.monotonic() > deadline:
                raise WorkloadError(f"topic {self.topic!r} has no usable partitions")
            time.sleep(0.2)
        return []

    def _run(self) -> None:
        try:
            self.partitions = self._discover_partitions()
            self.ready.set()
            payload = b"x" * self.value_size
            start = time.monotonic()
            seq = 0
            while not self._stop_event.is_set():
                due = int(self.rate * (time.monotonic() - start)) - seq
                for _ in range(due):
                    part = self.partitions[seq % len(self.partitions)]
                    while True:
                        try:
                            self._producer.produce(
                                self.topic,
                                value=payload,
                                key=str(seq).encode(),
                                partition=part,
                                on_delivery=self._on_delivery,
                            )
                            break
                        except BufferError:
                            self._producer.poll(0.05)
                    seq += 1
                    self.produced = seq
                self._producer.poll(0)
                self._stop_event.wait(self.tick)
        finally:
            self._producer.flush(10)


# --------------------------------------------------------------------------- consumers


class GroupConsumer(_Worker):
    """Base of the consumer-group scenarios: a subscribed consumer with explicit commits.

    Subclasses decide how many records to process per loop (``_budget``) and when to
    change behaviour (``_after_loop``). State visible to tests: ``consumed`` (records
    processed), ``positions`` (next offset per partition), ``commits`` (every successful
    commit), ``assigned`` (current assignment), ``joined`` (set at the first non-empty
    assignment).
    """

    kind: ClassVar[str] = "group"

    def __init__(
        self,
        config: Mapping[str, object],
        topic: str,
        group_id: str,
        *,
        commit_interval: float = 1.0,
        session_timeout_ms: int = 6000,
        consumer_config: Mapping[str, object] | None = None,
        commit_unchanged: bool = True,
    ) -> None:
        super().__init__(name=f"{self.kind}-{group_id}")
        self.topic = topic
        self.group_id = group_id
        self.commit_interval = commit_interval
        # False: commit only offsets that moved since the last commit, as many frameworks
        # do, so an idle consumer writes no commits at all.
        self.commit_unchanged = commit_unchanged
        self._last_committed: dict[TP, int] = {}
        self._consumer = Consumer(
            _client_config(
                config,
                **{
                    "group.id": group_id,
                    "client.id": f"{self.kind}-consumer",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    # 0.9 brokers cap sessions at 30 s (librdkafka's 45 s default never joins).
                    "session.timeout.ms": session_timeout_ms,
                    "heartbeat.interval.ms": max(100, session_timeout_ms // 6),
                    **(consumer_config or {}),
                },
            )
        )
        self._lock = threading.Lock()
        self._positions: dict[TP, int] = {}
        self._commits: list[CommitRecord] = []
        self.assigned: set[TP] = set()
        self.consumed = 0
        self.joined = threading.Event()
        self.closed = threading.Event()
        self._first_assignment_at: float | None = None
        self._last_commit = 0.0
        #: Failed commit requests or partitions (transient errors are retried next tick).
        self.commit_errors = 0

    # ---- observation

    @property
    def positions(self) -> dict[TP, int]:
        """Next offset to process per partition (only partitions processed at least once)."""
        with self._lock:
            return dict(self._positions)

    @property
    def commits(self) -> list[CommitRecord]:
        """Every successful commit, oldest first."""
        with self._lock:
            return list(self._commits)

    # ---- hooks for subclasses

    def _budget(self) -> int:
        """How many records may be processed now (0: just keep the group membership alive)."""
        return 500

    def _after_loop(self) -> bool:
        """Called after every loop iteration; return False to close the consumer for good."""
        return True

    def _offsets_to_commit(self) -> dict[TP, int]:
        with self._lock:
            return {tp: off for tp, off in self._positions.items() if tp in self.assigned}

    # ---- machinery

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned = {(p.topic, p.partition) for p in partitions}
        if partitions and self._first_assignment_at is None:
            self._first_assignment_at = time.monotonic()
            self.joined.set()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with contextlib.suppress(KafkaException):
            self._commit()
        revoked = {(p.topic, p.partition) for p in partitions}
        self.assigned -= revoked
        with self._lock:
            for tp in revoked:
                self._positions.pop(tp, None)

    def _commit(self) -> None:
        offsets = self._offsets_to_commit()
        self._last_commit = time.monotonic()
        if not self.commit_unchanged:
            offsets = {tp: o for tp, o in offsets.items() if self._last_committed.get(tp) != o}
        if not offsets:
            return
        try:
            result = self._consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                asynchronous=False,
            )
        except KafkaException as exc:
            # Transient (coordinator moved, rebalance, broker down): retried at the next tick.
            self.commit_errors += 1
            _log.warning("%s: commit failed: %s", self.name, exc)
            return
        ok = {(tp.topic, tp.partition): tp.offset for tp in result or [] if tp.error is None}
        self.commit_errors += len(result or []) - len(ok)
        self._last_committed.update(ok)
        if ok:
            with self._lock:
                self._commits.append(CommitRecord(time.monotonic(), ok))
            self._on_committed(ok)

    def _on_committed(self, offsets: dict[TP, int]) -> None:
        """Called after every (at least partly) successful commit."""

    def _process(self, msg: Message) -> bool:
        """Handle one message; return True if it counted as processed."""
        err = msg.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                _log.warning("%s: consume error %s", self.name, err)
            return False
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        assert topic is not None and partition is not None and offset is not None
        with self._lock:
            self._positions[(topic, partition)] = offset + 1
            self.consumed += 1
        return True

    def _run(self) -> None:
        consumer = self._consumer
        try:
            consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
            while not self._stop_event.is_set():
                budget = self._budget()
                if budget > 0:
                    for msg in consumer.consume(num_messages=min(budget, 500), timeout=0.1):
                        self._process(msg)
                else:
                    self._idle()
                if time.monotonic() - self._last_commit >= self.commit_interval:
                    self._commit()
                if not self._after_loop():
                    self._commit()
                    return
        finally:
            with contextlib.suppress(Exception):
                consumer.close()
            self.closed.set()

    def _idle(self) -> None:
        """Called instead of consuming when the budget is 0."""
        self._stop_event.wait(0.05)


class HealthyConsumer(GroupConsumer):
    """Keeps up with the producer and commits every ``commit_interval`` s (lag ≈ 0)."""

    kind = "healthy"


class LaggingConsumer(GroupConsumer):
    """Processes at most ``max_rate`` records/s (token bucket) and commits every
    ``commit_interval`` s: committed offsets keep advancing, but slower than the log end, so
    lag grows by (produce rate - ``max_rate``) records/s."""

    kind = "lagging"

    def __init__(
        self,
        config: Mapping[str, object],
        topic: str,
        group_id: str,
        *,
        max_rate: float,
        **kwargs: Any,
    ) -> None:
        super().__init__(config, topic, group_id, **kwargs)
        if max_rate <= 0:
            raise ValueError("max_rate must be > 0")
        self.max_rate = max_rate
        self._started_at: float | None = None

    def _budget(self) -> int:
        if self._first_assignment_at is None:
            return 1  # nothing to consume before the first assignment anyway
        if self._started_at is None:
            self._started_at = time.monotonic()
        allowed = int(self.max_rate * (time.monotonic() - self._started_at)) + 1
        return max(0, allowed - self.consumed)

    def _idle(self) -> None:
        # Wait for the next token without polling: a poll() could hand over a record that would
        # then have to be processed beyond the budget. Heartbeats run in librdkafka's own
        # thread; rebalance callbacks are served by the next consume().
        self._stop_event.wait(min(0.1, 1.0 / self.max_rate))


class StalledConsumer(GroupConsumer):
    """Consumes normally, then freezes: stays in the group (heartbeats continue), pauses all
    its partitions and commits exactly the same offsets every ``commit_interval`` s.

    It freezes once it has processed ``stall_after_records`` records, or ``stall_after_s`` s
    after its first assignment, whichever comes first. Frozen offsets are its positions; for a
    partition it never read, the group's committed offset or else the partition's low
    watermark. ``frozen`` is set (and ``frozen_offsets`` filled) once the first frozen commit
    succeeded; ``frozen_at`` is its ``time.monotonic()``.

    With ``commit_on_freeze`` (default) the frozen offsets are committed at once, while the
    consumer is still caught up; without, at the next ``commit_interval`` tick, so every frozen
    commit already carries lag (Burrow's STALL needs a window of commits that all have lag).
    """

    kind = "stalled"

    def __init__(
        self,
        config: Mapping[str, object],
        topic: str,
        group_id: str,
        *,
        stall_after_records: int = 100,
        stall_after_s: float = 5.0,
        commit_on_freeze: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(config, topic, group_id, **kwargs)
        self.stall_after_records = stall_after_records
        self.stall_after_s = stall_after_s
        self.commit_on_freeze = commit_on_freeze
        self.frozen = threading.Event()
        self.frozen_at: float | None = None
        self._frozen_offsets: dict[TP, int] = {}
        self.ignored = 0

    @property
    def frozen_offsets(self) -> dict[TP, int]:
        with self._lock:
            return dict(self._frozen_offsets)

    def _should_freeze(self) -> bool:
        if self._first_assignment_at is None or not self.assigned:
            return False
        return (
            self.consumed >= self.stall_after_records
            or time.monotonic() - self._first_assignment_at >= self.stall_after_s
        )

    def _budget(self) -> int:
        if self._frozen_offsets:
            return 0
        if self._should_freeze():
            self._freeze(sorted(self.assigned))
            return 0
        return max(1, min(500, self.stall_after_records - self.consumed))

    def _fallback_offsets(self, tps: list[TP]) -> dict[TP, int]:
        """Offsets for partitions never read: committed offset, else low watermark."""
        committed = self._consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=10)
        out: dict[TP, int] = {}
        for tp in committed:
            key = (tp.topic, tp.partition)
            if tp.offset >= 0:
                out[key] = tp.offset
            else:
                low, _ = self._consumer.get_watermark_offsets(
                    TopicPartition(tp.topic, tp.partition), timeout=10
                )
                out[key] = low
        return out

    def _freeze(self, tps: list[TP]) -> None:
        positions = self.positions
        missing = [tp for tp in tps if tp not in positions]
        frozen = {tp: positions[tp] for tp in tps if tp in positions}
        if missing:
            try:
                frozen.update(self._fallback_offsets(missing))
            except KafkaException as exc:
                _log.warning("%s: cannot freeze yet: %s", self.name, exc)
                return  # retried at the next loop
        self._consumer.pause([TopicPartition(t, p) for t, p in tps])
        with self._lock:
            self._frozen_offsets.update(frozen)
        if self.commit_on_freeze:
            self._commit()

    def _on_committed(self, offsets: dict[TP, int]) -> None:
        if self._frozen_offsets and not self.frozen.is_set():
            self.frozen_at = time.monotonic()
            self.frozen.set()

    def _offsets_to_commit(self) -> dict[TP, int]:
        if not self._frozen_offsets:
            return super()._offsets_to_commit()
        with self._lock:
            return {tp: o for tp, o in self._frozen_offsets.items() if tp in self.assigned}

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        super()._on_assign(consumer, partitions)
        if self._frozen_offsets:
            # Rebalanced while frozen: take the new partitions and freeze them at once.
            consumer.assign(partitions)
            new = [(p.topic, p.partition) for p in partitions]
            new = [tp for tp in new if tp not in self._frozen_offsets]
            if new:
                try:
                    fallback = self._fallback_offsets(new)
                except KafkaException as exc:  # those partitions are then never committed
                    _log.warning("%s: no offsets to freeze %s at: %s", self.name, new, exc)
                    fallback = {}
                with self._lock:
                    self._frozen_offsets.update(fallback)
            consumer.pause(partitions)

    def _idle(self) -> None:
        # Paused: poll() only serves callbacks (rebalances). A record fetched before the
        # pause took effect is not processed: a stalled consumer makes no progress.
        msg = self._consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            self.ignored += 1


class StoppedConsumer(GroupConsumer):
    """Consumes and commits like ``healthy`` for ``stop_after_s`` s after its first
    assignment, then commits a last time and closes for good (``closed`` is set)."""

    kind = "stopped"

    def __init__(
        self,
        config: Mapping[str, object],
        topic: str,
        group_id: str,
        *,
        stop_after_s: float = 3.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(config, topic, group_id, **kwargs)
        self.stop_after_s = stop_after_s

    def _after_loop(self) -> bool:
        started = self._first_assignment_at
        return started is None or time.monotonic() - started < self.stop_after_s


class SilentConsumer(GroupConsumer):
    """Consumes and commits like ``healthy`` for ``silent_after_s`` s after its first
    assignment, then stays in the group (heartbeats continue, its partitions paused) but
    consumes nothing and commits nothing: a consumer alive but stuck before its commit (a hung
    handler, a blocked downstream). ``silenced`` is set once it went silent; its last commit is
    ``commits[-1]``."""

    kind = "silent"

    def __init__(
        self,
        config: Mapping[str, object],
        topic: str,
        group_id: str,
        *,
        silent_after_s: float,
        **kwargs: Any,
    ) -> None:
        super().__init__(config, topic, group_id, **kwargs)
        self.silent_after_s = silent_after_s
        self.silenced = threading.Event()
        self.ignored = 0

    def _budget(self) -> int:
        if self.silenced.is_set():
            return 0
        started = self._first_assignment_at
        if started is not None and self.assigned and (
            time.monotonic() - started >= self.silent_after_s
        ):
            self._consumer.pause([TopicPartition(t, p) for t, p in sorted(self.assigned)])
            self.silenced.set()
            return 0
        return 500

    def _commit(self) -> None:
        if not self.silenced.is_set():
            super()._commit()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        super()._on_assign(consumer, partitions)
        if self.silenced.is_set():  # rebalanced while silent: stay silent on the new ones
            consumer.assign(partitions)
            consumer.pause(partitions)

    def _idle(self) -> None:
        # Paused: poll() only serves callbacks and keeps the member alive (librdkafka leaves
        # the group when poll() is not called for max.poll.interval.ms).
        msg = self._consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            self.ignored += 1


class DeadPartitionConsumer(GroupConsumer):
    """Consumes and commits like ``healthy``; ``dead_after_s`` s after its first assignment it
    pauses ``dead_partition`` and from then on neither reads nor commits it, while it keeps
    consuming and committing every other partition: one partition stuck (a poison record, a
    hung partition worker) in a group that otherwise moves. ``dead`` is set when that
    happened; :meth:`last_commit_of` tells when the dead partition was last committed."""

    kind = "deadpart"

    def __init__(
        self,
        config: Mapping[str, object],
        topic: str,
        group_id: str,
        *,
        dead_partition: int,
        dead_after_s: float,
        **kwargs: Any,
    ) -> None:
        super().__init__(config, topic, group_id, **kwargs)
        self.dead_partition = dead_partition
        self.dead_after_s = dead_after_s
        self.dead = threading.Event()

    def last_commit_of(self, partition: int) -> CommitRecord | None:
        """The last successful commit that included ``partition``."""
        for commit in reversed(self.commits):
            if (self.topic, partition) in commit.offsets:
                return commit
        return None

    def _after_loop(self) -> bool:
        started = self._first_assignment_at
        tp = (self.topic, self.dead_partition)
        if (
            not self.dead.is_set()
            and started is not None
            and tp in self.assigned
            and time.monotonic() - started >= self.dead_after_s
        ):
            self._consumer.pause([TopicPartition(*tp)])
            self.dead.set()
        return True

    def _process(self, msg: Message) -> bool:
        if self.dead.is_set() and msg.partition() == self.dead_partition:
            return False  # fetched before the pause took effect: not processed
        return super()._process(msg)

    def _offsets_to_commit(self) -> dict[TP, int]:
        offsets = super()._offsets_to_commit()
        if self.dead.is_set():
            offsets.pop((self.topic, self.dead_partition), None)
        return offsets


class BatchConsumer(GroupConsumer):
    """Wakes every ``period`` s, reads what is there for ``awake_s`` s, commits only offsets
    that moved, and sleeps again (still a group member): a batch job on a slow or idle topic.
    Between wakes it writes no commits at all, so an idle one is caught up with an old last
    commit. ``wakes`` holds the unix time of every wake."""

    kind = "batch"

    def __init__(
        self,
        config: Mapping[str, object],
        topic: str,
        group_id: str,
        *,
        period: float,
        awake_s: float = 1.5,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("commit_interval", 0.5)
        super().__init__(config, topic, group_id, commit_unchanged=False, **kwargs)
        self.period = period
        self.awake_s = awake_s
        self.wakes: list[float] = []
        self._woke: float | None = None  # monotonic time of the current wake, None: asleep
        self._next_wake = time.monotonic()

    def _budget(self) -> int:
        now = time.monotonic()
        if self._woke is None and now >= self._next_wake:
            self._woke = now
            self._next_wake = now + self.period
            self.wakes.append(time.time())
        return 500 if self._woke is not None else 0

    def _after_loop(self) -> bool:
        if self._woke is not None and time.monotonic() - self._woke >= self.awake_s:
            self._commit()
            self._woke = None
        return True


#: Scenario name → class, for parametrised tests and the demo.
SCENARIOS: dict[str, type[GroupConsumer]] = {
    "healthy": HealthyConsumer,
    "lagging": LaggingConsumer,
    "stalled": StalledConsumer,
    "stopped": StoppedConsumer,
    "silent": SilentConsumer,
    "deadpart": DeadPartitionConsumer,
    "batch": BatchConsumer,
}


# --------------------------------------------------------------------------- measurements


def committed_offsets(
    config: Mapping[str, object], group_id: str, topic: str, partitions: list[int]
) -> dict[int, int]:
    """The group's committed offset per partition (-1001 = none), read with
    ``AdminClient.list_consumer_group_offsets`` (OffsetFetch on Kafka 0.9)."""
    admin = AdminClient(_client_config(config))
    request = ConsumerGroupTopicPartitions(group_id, [TopicPartition(topic, p) for p in partitions])
    result = admin.list_consumer_group_offsets([request])[group_id].result(timeout=15)
    out = {}
    for tp in result.topic_partitions:
        if tp.error is not None:
            raise KafkaException(tp.error)
        out[tp.partition] = tp.offset if tp.offset != OFFSET_INVALID else -1001
    return out


def end_offsets(config: Mapping[str, object], topic: str) -> dict[int, int]:
    """High watermark (log end offset) per partition of ``topic``."""
    return {p: w[1] for p, w in watermark_offsets(config, topic).items()}


def watermark_offsets(config: Mapping[str, object], topic: str) -> dict[int, tuple[int, int]]:
    """(log start, log end) per partition of ``topic``."""
    consumer = Consumer(_client_config(config, **{"group.id": "localkafka-watermarks"}))
    try:
        md = consumer.list_topics(topic, timeout=10)
        tm = md.topics[topic]
        if tm.error is not None:
            raise KafkaException(tm.error)
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in sorted(tm.partitions)
        }
    finally:
        consumer.close()


# --------------------------------------------------------------------------- one-off actions


def produce_batch(
    config: Mapping[str, object], topic: str, count: int, partitions: int | None = None
) -> None:
    """Produce ``count`` records of 100 bytes at once (a burst), round-robin over
    ``partitions`` when given (else librdkafka's partitioner), and wait for every one."""
    producer = Producer(_client_config(config, **{"linger.ms": 20}))
    for i in range(count):
        while True:
            try:
                if partitions is None:
                    producer.produce(topic, value=b"x" * 100, key=str(i).encode())
                else:
                    producer.produce(topic, value=b"x" * 100, key=str(i).encode(),
                                     partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    left = producer.flush(30)
    if left:
        raise WorkloadError(f"{left} records to {topic!r} not delivered within 30 s")


def reset_offsets(
    config: Mapping[str, object], group: str, topic: str, partitions: int,
    offset: int = 0, timeout: float = 30.0,
) -> float:
    """Set the group's committed offset of every partition of ``topic`` to ``offset`` (as an
    operator resets a group its consumers have left), retrying while the coordinator still
    counts a leaving member. Returns the ``time.monotonic()`` of the attempt that took."""
    admin = AdminClient(_client_config(config))
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p, offset) for p in range(partitions)])
    deadline = time.monotonic() + timeout
    while True:
        at = time.monotonic()
        try:
            admin.alter_consumer_group_offsets([request])[group].result(timeout=15)
            return at
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
