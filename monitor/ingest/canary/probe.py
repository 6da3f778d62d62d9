"""A canary probe: a producer sending one small record to every canary partition each
``interval``, and a consumer in the monitor's own group reading them back.

The same probe measures one cluster (produce and consume on it) or a mirror (produce to the
source cluster's topic, consume the mirrored topic at the destination: end-to-end latency is
then replication latency). Both ends are in this process, so latency needs no clock agreement.

Threads: the producer thread owns its producer, the consumer thread its consumer (a librdkafka
handle is created, used and closed by one thread). The scheduled :meth:`collect` starts them,
refreshes partition leaders, declares losses and renders the snapshot the API and metrics
serve; nothing on a request path talks to Kafka.

Restarts and sharing: records carry the instance id, the probe's stream name and the run epoch;
the consumer starts each partition at the log end read before the first record of the run is
sent, and ignores records of other instances, streams and runs. Several instances therefore
share a topic (each in its own group, ``kafka-monitor-canary-<instance id>`` by default), and a
restarted monitor reports no false duplicates or losses.

Topic placement: where the cluster supports CreateTopics (Kafka >= 0.10.1), a missing topic is
created with an explicit replica assignment so that every broker leads
``partitions_per_broker`` partitions. Older clusters (``broker_version_fallback`` set) have no
such API: the topic must be created by the operator (``kafka-topics --replica-assignment``), or
is auto-created by the broker with its default partition count; either way the snapshot lists
which brokers lead a canary partition (``brokers_covered``) and which do not.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from monitor.config import CanaryConfig, ClusterConfig
from monitor.ingest.base import Collector
from monitor.ingest.canary.metrics import CanaryMetrics
from monitor.ingest.canary.record import CanaryRecord, decode, encode
from monitor.ingest.canary.tracker import Outcome, SequenceTracker, quantiles
from monitor.ingest.kafka_client import client_config

_log = logging.getLogger("monitor.canary")

_METADATA_TIMEOUT = 5.0
_POLL_TIMEOUT = 0.2
_MAX_BATCH = 1000


class CanaryProbe(Collector):
    """One probe; ``scope_value`` is its label value (the cluster, or the mirror's name)."""

    kind = "canary"

    def __init__(
        self,
        scope_value: str,
        produce_cluster: ClusterConfig,
        consume_cluster: ClusterConfig,
        settings: CanaryConfig,
        metrics: CanaryMetrics,
        *,
        topic: str | None = None,
        destination_topic: str | None = None,
        kind: str = "canary",
        stream: str | None = None,
    ) -> None:
        self.kind = kind
        super().__init__(scope_value, settings.interval)
        self.scope_value = scope_value
        self.produce_cluster = produce_cluster
        self.consume_cluster = consume_cluster
        self.settings = settings
        self.metrics = metrics
        self.topic = topic or settings.topic
        self.destination_topic = destination_topic or self.topic
        self.stream = (stream or f"{kind}/{scope_value}")[:255]
        self.instance_id = settings.instance_id
        self.group = settings.group or f"kafka-monitor-canary-{settings.instance_id}"
        self.epoch_ms = int(time.time() * 1000)
        self.tracker = SequenceTracker(
            settings.loss_sla, settings.window,
            max_samples=int(8 * settings.window / settings.interval) + 64,
        )
        self.partitions: list[int] = []
        self.brokers: list[int] = []
        self.ignored = dict.fromkeys(("other_instances", "earlier_runs", "undecodable"), 0)
        self._commits: deque[tuple[float, float | None]] = deque(
            maxlen=int(settings.window / settings.commit_interval) + 16
        )
        self._start_offsets: dict[int, int] = {}
        self._next_seq: dict[int, int] = {}
        self._producer_thread: threading.Thread | None = None
        self._consumer_thread: threading.Thread | None = None
        self._consumer_ready = threading.Event()
        self._stop = threading.Event()
        self._admin: AdminClient | None = None
        self._zeroed: set[tuple[int, int]] = set()  # (partition, leader) counters at 0
        #: Called from the consumer thread as ``(partition, sequence, end-to-end seconds)``
        #: for every record of this run whose latency the tracker records (not duplicates).
        #: None in the service; the benchmark sets it to compare the canary's figure with an
        #: independent consumer's for the same records.
        self.on_record: Callable[[int, int, float], None] | None = None
        self._snapshot: dict[str, Any] = self._render(time.time())
        metrics.probes.append(self)
        metrics.zero_scope(scope_value)

    # ------------------------------------------------------------------ schedule

    def collect(self) -> None:
        now = time.time()
        if self._admin is None:
            self._admin = AdminClient(client_config(
                self.produce_cluster, **{"client.id": f"kafka-monitor-canary-{self.name}"}
            ))
        self._refresh_partitions()
        if self._producer_thread is None or not self._producer_thread.is_alive():
            self._start_threads()
        for partition, broker, count in self.tracker.expire(now):
            self.metrics.lost.labels(self.scope_value, str(partition), str(broker)).inc(count)
        self._snapshot = self._render(now)
        dead = [t.name for t in (self._producer_thread, self._consumer_thread)
                if t is not None and not t.is_alive()]
        if dead and not self._stop.is_set():
            raise RuntimeError(f"canary thread(s) stopped: {', '.join(dead)}")

    def snapshot(self) -> dict[str, Any]:
        """What the API and the gauges serve: rendered by the last round."""
        return self._snapshot

    def close(self) -> None:
        self._stop.set()
        for thread in (self._producer_thread, self._consumer_thread):
            if thread is not None:
                thread.join(10)

    # ------------------------------------------------------------------ topic

    def _refresh_partitions(self) -> None:
        """Partitions of the canary topic and their leaders; creates the topic when missing.
        A partition without a leader keeps its last known leader for attribution."""
        assert self._admin is not None
        md = self._topic_metadata()
        if md is None:
            self._create_topic()
            md = self._topic_metadata(auto_create=True)
            if md is None:
                raise RuntimeError(
                    f"canary topic {self.topic!r} does not exist and could not be created"
                )
        topic_md, brokers = md
        leaders = dict(self.tracker.leaders)
        for pid, part in topic_md.partitions.items():
            if part.leader >= 0:
                leaders[pid] = part.leader
        self.tracker.leaders = leaders
        self.partitions = sorted(topic_md.partitions)
        self.brokers = sorted(brokers)
        for pid in self.partitions:
            key = (pid, leaders.get(pid, -1))
            if key[1] >= 0 and key not in self._zeroed:
                self._zeroed.add(key)
                self.metrics.zero(self.scope_value, *key)

    def _topic_metadata(self, auto_create: bool = False) -> tuple[Any, list[int]] | None:
        """The topic's metadata and the live brokers, or None if the topic does not exist.
        Asked by name once the topic is known (cheap on big clusters); by name, brokers
        with ``auto.create.topics.enable`` create a missing topic (``auto_create``)."""
        assert self._admin is not None
        last: Exception | None = None
        by_name = auto_create or bool(self.partitions)
        for _ in range(3):  # 0.9: the first Metadata v0 answer may fail to parse (_BAD_MSG)
            try:
                md = self._admin.list_topics(self.topic if by_name else None,
                                             timeout=_METADATA_TIMEOUT)
            except KafkaException as exc:
                last = exc
                continue
            topic_md = md.topics.get(self.topic)
            if topic_md is None or topic_md.error is not None or not topic_md.partitions:
                if auto_create:
                    time.sleep(0.5)  # the broker creates it asynchronously
                    continue
                return None
            return topic_md, list(md.brokers)
        if last is not None and not auto_create:
            raise last
        return None

    def _create_topic(self) -> None:
        """Create the topic with every broker leading ``partitions_per_broker`` partitions
        (needs CreateTopics, Kafka >= 0.10.1)."""
        assert self._admin is not None
        if self.produce_cluster.broker_version_fallback:
            _log.warning(
                "canary topic missing and the cluster predates CreateTopics: relying on broker "
                "auto-creation (placement cannot be controlled; see brokers_uncovered)",
                extra={"probe": self.name, "topic": self.topic},
            )
            return
        md = self._admin.list_topics(timeout=_METADATA_TIMEOUT)
        brokers = sorted(md.brokers)
        rf = min(self.settings.replication_factor or min(3, len(brokers)), len(brokers))
        assignment = [
            [brokers[(i + k) % len(brokers)] for k in range(rf)]
            for i in range(len(brokers) * self.settings.partitions_per_broker)
        ]
        futures = self._admin.create_topics(
            [NewTopic(self.topic, len(assignment), replica_assignment=assignment)],
            request_timeout=_METADATA_TIMEOUT,
        )
        try:
            futures[self.topic].result(_METADATA_TIMEOUT + 5)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                _log.warning("canary topic creation failed",
                             extra={"probe": self.name, "error": str(exc)})

    # ------------------------------------------------------------------ threads

    def _start_threads(self) -> None:
        self._stop.clear()
        self._consumer_ready.clear()
        self._consumer_thread = threading.Thread(
            target=self._consume_loop, name=f"{self.name}-consumer", daemon=True
        )
        self._consumer_thread.start()
        # Records of this run must not precede the consumer's start offsets.
        self._consumer_ready.wait(_METADATA_TIMEOUT * 3)
        self._producer_thread = threading.Thread(
            target=self._produce_loop, name=f"{self.name}-producer", daemon=True
        )
        self._producer_thread.start()

    def _produce_loop(self) -> None:
        conf = client_config(self.produce_cluster, **{
            "client.id": f"kafka-monitor-canary-{self.name}",
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": int(self.settings.produce_timeout * 1000),
        })
        producer = Producer(conf)
        interval = self.settings.interval
        size = self.settings.record_size
        next_tick = time.monotonic()
        try:
            while not self._stop.is_set():
                self._send_round(producer, size)
                next_tick += interval
                while not self._stop.is_set():
                    remaining = next_tick - time.monotonic()
                    if remaining <= 0:
                        break
                    producer.poll(min(remaining, _POLL_TIMEOUT))
                if time.monotonic() - next_tick > interval:  # fell behind: skip, don't burst
                    next_tick = time.monotonic()
        finally:
            producer.flush(min(self.settings.produce_timeout, 5.0))

    def _send_round(self, producer: Producer, size: int) -> None:
        leaders = self.tracker.leaders
        m = self.metrics
        for partition in self.partitions:
            seq = self._next_seq.get(partition, 0)
            self._next_seq[partition] = seq + 1
            broker = leaders.get(partition, -1)
            labels = (self.scope_value, str(partition), str(broker))
            send_ns = time.time_ns()
            value = encode(CanaryRecord(
                self.instance_id, self.epoch_ms, self.stream, partition, seq, send_ns
            ), size)
            m.attempts.labels(*labels).inc()
            try:
                producer.produce(
                    self.topic, value, key=f"{self.stream}/{partition}".encode(),
                    partition=partition,
                    on_delivery=functools.partial(
                        self._delivered, partition, seq, broker, send_ns / 1e9
                    ),
                )
            except (BufferError, KafkaException):
                m.errors.labels(*labels).inc()
                self.tracker.failed(partition, seq, broker, time.time())
        producer.poll(0)

    def _delivered(self, partition: int, seq: int, broker: int, send_t: float,
                   err: KafkaError | None, _msg: Message) -> None:
        now = time.time()
        labels = (self.scope_value, str(partition), str(broker))
        if err is not None:
            self.metrics.errors.labels(*labels).inc()
            self.tracker.failed(partition, seq, broker, now)
            return
        self.metrics.acks.labels(*labels).inc()
        self.metrics.produce_latency.labels(self.scope_value, str(broker)).observe(now - send_t)
        self.tracker.acked(partition, seq, broker, send_t, now)

    def _consume_loop(self) -> None:
        conf = client_config(self.consume_cluster, **{
            "client.id": f"kafka-monitor-canary-{self.name}",
            "group.id": self.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 5000,
            "fetch.wait.max.ms": 100,
        })
        consumer = Consumer(conf)
        try:
            self._start_offsets = self._log_ends(consumer)
            self._consumer_ready.set()
            consumer.subscribe([self.destination_topic], on_assign=self._on_assign)
            next_commit = time.monotonic() + self.settings.commit_interval
            while not self._stop.is_set():
                messages = consumer.consume(_MAX_BATCH, _POLL_TIMEOUT)
                if messages:
                    self._handle(messages, time.time())
                if time.monotonic() >= next_commit:
                    next_commit = time.monotonic() + self.settings.commit_interval
                    self._commit(consumer)
        finally:
            self._consumer_ready.set()
            consumer.close()

    def _log_ends(self, consumer: Consumer) -> dict[int, int]:
        """Log-end offsets of the destination topic's partitions now (empty if the topic does
        not exist yet: a mirror creates it with the first mirrored record)."""
        try:
            md = consumer.list_topics(self.destination_topic, timeout=_METADATA_TIMEOUT)
        except KafkaException:
            return {}
        topic_md = md.topics.get(self.destination_topic)
        if topic_md is None or topic_md.error is not None:
            return {}
        ends = {}
        for pid in topic_md.partitions:
            try:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(self.destination_topic, pid), timeout=_METADATA_TIMEOUT
                )
            except KafkaException:
                continue
            ends[pid] = high
        return ends

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            start = self._start_offsets.pop(tp.partition, None)
            if start is not None:
                tp.offset = start
        consumer.assign(partitions)

    def _handle(self, messages: list[Message], now: float) -> None:
        m = self.metrics
        scope = self.scope_value
        on_record = self.on_record
        for msg in messages:
            if msg.error() is not None:
                continue
            rec = decode(msg.value())
            if rec is None:
                self.ignored["undecodable"] += 1
            elif rec.instance != self.instance_id or rec.stream != self.stream:
                self.ignored["other_instances"] += 1
            elif rec.epoch_ms != self.epoch_ms:
                self.ignored["earlier_runs"] += 1
            else:
                outcome, broker = self.tracker.received(
                    rec.partition, rec.seq, rec.send_ns / 1e9, now
                )
                labels = (scope, str(rec.partition), str(broker))
                if outcome is Outcome.DUPLICATE:
                    m.duplicated.labels(*labels).inc()
                    continue
                if outcome is Outcome.LATE:
                    m.late.labels(*labels).inc()
                else:
                    m.consumed.labels(*labels).inc()
                    if outcome is Outcome.OUT_OF_ORDER:
                        m.out_of_order.labels(*labels).inc()
                latency = now - rec.send_ns / 1e9
                m.e2e_latency.labels(scope, str(broker)).observe(latency)
                if on_record is not None:
                    on_record(rec.partition, rec.seq, latency)

    def _commit(self, consumer: Consumer) -> None:
        m = self.metrics
        started = time.monotonic()
        try:
            consumer.commit(asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError._NO_OFFSET:
                return  # nothing consumed since the last commit: nothing to measure
            m.commit_attempts.labels(self.scope_value).inc()
            m.commit_errors.labels(self.scope_value).inc()
            self._commits.append((time.time(), None))
            return
        latency = time.monotonic() - started
        m.commit_attempts.labels(self.scope_value).inc()
        m.commit_latency.labels(self.scope_value).observe(latency)
        self._commits.append((time.time(), latency))

    # ------------------------------------------------------------------ snapshot

    def _render(self, now: float) -> dict[str, Any]:
        partitions, brokers, overall = self.tracker.window_stats()
        leaders = self.tracker.leaders
        covered = sorted({b for p, b in leaders.items() if p in set(self.partitions)})
        commits = [c for c in self._commits if c[0] >= now - self.settings.window]
        ok = [lat for _, lat in commits if lat is not None]
        return {
            "topic": self.topic,
            "destination_topic": self.destination_topic,
            "instance_id": self.instance_id,
            "stream": self.stream,
            "run_epoch_ms": self.epoch_ms,
            "group": self.group,
            "running": self._producer_thread is not None and self._producer_thread.is_alive(),
            "interval_seconds": self.settings.interval,
            "window_seconds": self.settings.window,
            "loss_sla_seconds": self.settings.loss_sla,
            "partition_count": len(self.partitions),
            "brokers_covered": covered,
            "brokers_uncovered": [b for b in self.brokers if b not in covered],
            **overall,
            "commit_availability": round(len(ok) / len(commits), 6) if commits else None,
            "commit_latency_seconds": quantiles(ok),
            "ignored": dict(self.ignored),
            "partitions": partitions,
            "brokers": brokers,
            "updated_at": round(now, 3),
        }
