"""Group offsets and membership read from the ``__consumer_offsets`` topic.

The group coordinators write every offset commit, every group-metadata snapshot and every
deletion (tombstone) to this topic, so reading it gives what the Admin API cannot: each commit
with Kafka's own commit timestamp, in the order the coordinator wrote it, for every group at
once, including groups that have no members any more.

Design, and why:

* **A dedicated reader thread**, owned by the collector, consumes continuously; ``collect()``
  (run by the scheduler like every other collector) only supervises it: starts it, restarts it
  if it died and raises the reason, and raises while consume errors are not followed by
  progress, so ``run_once`` records health the usual way. A stream is not a poll target: a
  round-based ``collect()`` would stop fetching between rounds (latency = the interval) and
  hand the consumer to a new thread each round, whereas librdkafka handles must not be closed
  while another thread consumes; here one thread creates, uses and closes the consumer, and
  ``close()`` stops it within one ``poll_timeout``.
* **A plain consumer**: ``assign()`` of every partition, no subscription, auto-commit and
  offset store off. librdkafka insists on a ``group.id``; it is never joined or committed to.
* **Batches**: ``consume(num_messages=batch_size)``, one ``decode_batch`` call per batch,
  commits handed to the store as column slices (``CommitBatch``), never an object per record.
* **Record order** where it changes the outcome: the commits that precede a deletion in the
  batch (an offset tombstone for the same partition, a group tombstone) are stored before it,
  using the decoder's ``commit_index``. Membership snapshots do not interact with commits in
  the store and are applied as they come.
* **Caught up** means every partition's position has reached the high watermark taken when it
  was assigned; ``ready`` is true from the first catch-up on (the store's offsets are complete
  from then on). ``progress.records_behind`` uses the high watermarks librdkafka learns from
  every fetch (no extra request).
* **Bad input never stops the reader**: undecodable records are skipped by the decoder,
  counted per reason and logged once per reason; consume errors are counted per code and
  logged once per code; librdkafka reconnects by itself.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from monitor.config import ClusterConfig, NameFilter
from monitor.ingest.base import Collector
from monitor.ingest.consumer_offsets import (
    ConsumerGroupCurrentAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMetadata,
    ConsumerGroupRecordTombstone,
    ConsumerOffsetsDecoder,
    DecodedBatch,
    DecoderStats,
    Event,
    GroupMetadata,
    GroupTombstone,
    OffsetTombstone,
)
from monitor.ingest.kafka_client import client_config
from monitor.model.metric_catalogue import Reading
from monitor.model.observations import (
    CommitBatch,
    GroupDeleted,
    GroupMember,
    GroupMembership,
    OffsetsDeleted,
    OffsetSource,
)
from monitor.store.store import Store

__all__ = [
    "READER_PROPERTIES",
    "OffsetsTopicCollector",
    "OffsetsTopicReaderError",
    "OffsetsTopicStats",
    "ReaderProgress",
]

_log = logging.getLogger("monitor.collector.offsets_topic")

_GROUP = itemgetter(0)
_TOPIC = itemgetter(1)
_PARTITION = itemgetter(2)
_SOURCE: OffsetSource = "offsets_topic"
_KIP848_GROUP_RECORD = "consumer_group_metadata"
_MAX_FILTER_CACHE = 100_000

PARTITION_FETCH_MAX = 4 * 1024 * 1024
FETCH_RESPONSE_BUDGET = 64 * 1024 * 1024
"""What one broker's answer to a fetch of all the partitions it leads may hold. Brokers before
0.10.1 have no response-wide limit (``fetch.max.bytes``): the answer is up to the partition
limit times the partitions, and librdkafka drops an answer over ``receive.message.max.bytes``
(100 MB) and fetches the same again, forever: a reader with a large backlog on such a broker
(50 offsets partitions x 4 MB = 200 MB) would never catch up."""


def partition_fetch_bytes(partitions_per_broker: int) -> int:
    """The per-partition fetch size that keeps one broker's answer within the budget: large
    fetches read the catch-up faster (bench/bench_offsets_topic.py), up to 4 MB."""
    return max(64 * 1024, min(PARTITION_FETCH_MAX,
                              FETCH_RESPONSE_BUDGET // max(1, partitions_per_broker)))


READER_PROPERTIES: dict[str, object] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,  # end-of-partition events tell when a partition is read
    "auto.offset.reset": "earliest",
    # Catch-up reads the whole topic: larger fetches and a shorter fetch wait read 1M records
    # ~30 % faster here (bench/bench_offsets_topic.py). Sized for Kafka's default 50 offsets
    # partitions all on one broker; the collector sizes it for the topic it finds.
    "fetch.message.max.bytes": partition_fetch_bytes(50),
    "fetch.wait.max.ms": 100,
    # Bounded prefetch (librdkafka's default queues up to 64 MB); a batch is ~1 MB.
    "queued.max.messages.kbytes": 16384,
}
"""librdkafka properties of the reader's consumer (the benchmark's raw reader uses them too)."""


@dataclass(frozen=True, slots=True)
class ReaderProgress:
    """Where the reader is in the topic: for ``/ready``, health and a "behind" gauge."""

    running: bool
    partitions: int
    start_high_watermarks: dict[int, int]
    """High watermark of each partition when it was assigned: the catch-up target."""
    positions: dict[int, int]
    """Next offset to read per partition."""
    records_behind: int
    """Sum over partitions of (latest known high watermark - position), floored at 0."""
    caught_up: bool
    ready: bool
    """Caught up at least once since the collector was created."""
    caught_up_at: float | None
    """Unix time of the first catch-up."""
    catch_up_seconds: float | None
    """From the first assignment to the first catch-up."""
    records_read: int
    last_record_at: float | None
    """Unix time the last record (or end-of-partition) was received."""


@dataclass(frozen=True, slots=True)
class OffsetsTopicStats:
    """Cumulative counters for the Prometheus exporter: the decoder's and the collector's."""

    decoder: DecoderStats
    commits_stored: int
    """Commits handed to the store."""
    commits_filtered: int
    """Commits dropped by the cluster's group or topic filter."""
    events_applied: dict[str, int]
    """Observations handed to the store, by kind (group_membership, group_deleted, ...)."""
    events_filtered: int
    consume_errors: dict[str, int]
    """Consume errors by librdkafka error name (end-of-partition events are not errors)."""
    kip848_unresolved_partitions: int
    """KIP-848 assigned partitions whose topic id has no known name (not stored as owners)."""
    handler_errors: int
    """Batches whose handling raised (a bug): logged, counted, the reader goes on."""
    reader_restarts: int


@dataclass(slots=True)
class _NewProtocolGroup:
    """A KIP-848 consumer group as its records describe it (records 3, 5 and 8)."""

    epoch: int | None = None
    members: dict[str, ConsumerGroupMemberMetadata] = field(default_factory=dict)
    owned: dict[str, ConsumerGroupCurrentAssignment] = field(default_factory=dict)


class OffsetsTopicReaderError(RuntimeError):
    """The reader thread stopped or cannot make progress; the message says why."""


class OffsetsTopicCollector(Collector):
    """Reads every partition of the offsets topic into the store (see the module docstring).

    ``interval`` is how often the scheduler supervises the reader (and so how often a dead
    reader is restarted), not a polling period: the reader consumes continuously.
    """

    kind = "offsets_topic"

    def __init__(
        self,
        cluster: ClusterConfig,
        store: Store,
        *,
        interval: float = 5.0,
        batch_size: int = 10_000,
        poll_timeout: float = 0.5,
        metadata_refresh: float = 60.0,
        decoder: ConsumerOffsetsDecoder | None = None,
    ) -> None:
        super().__init__(cluster.name, interval)
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self._config = cluster
        self._store = store
        self.topic = cluster.offsets_topic.topic
        self.start_from = cluster.offsets_topic.start
        self.batch_size = batch_size
        self.poll_timeout = poll_timeout
        self.metadata_refresh = metadata_refresh
        self._decoder = decoder if decoder is not None else ConsumerOffsetsDecoder()
        self._group_ok = _CachedFilter(cluster.groups)
        self._topic_ok = _CachedFilter(cluster.topics)

        # Reader state: written by the reader thread only (or by a caller of handle_messages
        # when no reader runs); other threads read the published snapshots below.
        self._positions: dict[int, int] = {}
        self._start_hw: dict[int, int] = {}
        self._high: dict[int, int] = {}
        self._assigned_at: float | None = None
        self._caught_up_at: float | None = None
        self._fresh_at: float | None = None
        self._catch_up_seconds: float | None = None
        self._records_read = 0
        self._last_record_at: float | None = None
        self._new_groups: dict[str, _NewProtocolGroup] = {}
        self._resume: dict[int, int] = {}  # positions a previous process saved (resume())
        self._commits_stored = 0
        self._commits_filtered = 0
        self._events_applied: dict[str, int] = {}
        self._events_filtered = 0
        self._consume_errors: dict[str, int] = {}
        self._unresolved = 0
        self._handler_errors = 0
        self._restarts = 0
        self._logged: set[str] = set()

        # Supervision.
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._closed = False
        self._reader_error: BaseException | None = None
        self._last_error: tuple[float, str] | None = None
        self._last_progress = 0.0
        self._fatal: KafkaError | None = None
        self._progress = self._snapshot_progress()
        self._stats = self._snapshot_stats()

    # ------------------------------------------------------------------ public surface

    @property
    def ready(self) -> bool:
        """True from the first catch-up to the end of the topic on."""
        return self._caught_up_at is not None

    @property
    def fresh_at(self) -> float | None:
        """Unix time up to which every commit is known to have been read: the reader's last
        error-free pass after its first catch-up (None before). The evaluator stops STOP's
        clocks there, so an outage of the reader is never taken for silent consumers."""
        return self._fresh_at

    @property
    def progress(self) -> ReaderProgress:
        """The latest progress snapshot (published by the reader after every batch)."""
        return self._progress

    @property
    def stats(self) -> OffsetsTopicStats:
        """The latest counters (published by the reader after every batch)."""
        return self._stats

    def counters(self) -> list[Reading]:
        """The decoder's and the reader's counts (``kafka_monitor_offsets_topic_*``)."""
        s, c, p = self._stats, (self.cluster,), "kafka_monitor_offsets_topic"
        return [
            Reading(f"{p}_records", c, s.decoder.records),
            *(Reading(f"{p}_records_skipped", (*c, reason), n)
              for reason, n in sorted(s.decoder.skipped_by_reason.items())),
            Reading(f"{p}_commits_stored", c, s.commits_stored),
            Reading(f"{p}_commits_filtered", c, s.commits_filtered),
            *(Reading(f"{p}_events", (*c, kind), n)
              for kind, n in sorted(s.events_applied.items())),
            *(Reading(f"{p}_consume_errors", (*c, error), n)
              for error, n in sorted(s.consume_errors.items())),
            Reading(f"{p}_handler_errors", c, s.handler_errors),
            Reading(f"{p}_reader_restarts", c, s.reader_restarts),
        ]

    def saved_state(self) -> dict[str, Any] | None:
        """Where a restarted process resumes reading (:meth:`resume`): the published positions,
        which the reader publishes only after the store has the batch. None while the reader
        holds KIP-848 group records: their state is the reader's own, not the store's, so
        such a cluster reads the topic again from ``offsets_topic.start``."""
        positions = self._progress.positions
        if self._new_groups or not positions:
            return None
        return {"topic": self.topic, "positions": dict(positions)}

    def resume(self, state: object) -> None:
        """Read on from a previous process's positions (:meth:`saved_state`) instead of from
        ``offsets_topic.start``: the restored store holds everything before them, and reading
        it again would apply it twice (memberships seen anew, so consumers that left long ago
        would seem to have left now). A position outside its partition's current range
        (topic recreated, records deleted) is not used."""
        if not isinstance(state, dict) or state.get("topic") != self.topic:
            return
        positions = state.get("positions")
        if isinstance(positions, dict):
            self._resume = {int(p): int(o) for p, o in positions.items()}

    def collect(self) -> None:
        """Supervise the reader: start or restart it, and raise while it is failing."""
        thread = self._thread
        if self._closed:
            return
        if thread is None or not thread.is_alive():
            error, self._reader_error = self._reader_error, None
            if thread is not None:
                self._restarts += 1
            self.start()
            if error is not None:
                raise OffsetsTopicReaderError(
                    f"reader stopped ({type(error).__name__}: {error}); restarted"
                ) from error
            return
        last_error = self._last_error
        if last_error is not None and self._failing():
            raise OffsetsTopicReaderError(f"no progress since consume error: {last_error[1]}")

    def start(self) -> None:
        """Start the reader thread (``collect()`` does it on its first round)."""
        if self._closed or (self._thread is not None and self._thread.is_alive()):
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"reader-{self.name}", daemon=True)
        self._thread.start()

    def close(self, timeout: float | None = None) -> None:
        """Stop the reader for good (a supervision round still in flight cannot restart it);
        the reader closes its consumer on the way out."""
        self._closed = True
        self._stop.set()
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(self.poll_timeout + 2.0 if timeout is None else timeout)
            if thread.is_alive():
                _log.warning("reader did not stop in time", extra={"collector": self.name})

    def handle_messages(self, messages: Sequence[Message]) -> int:
        """Decode one consumed batch and hand it to the store in record order.

        Error events (end of partition, broker errors) are accounted, undecodable records
        skipped and counted; nothing here raises for bad records. Returns how many records
        (not error events) the batch held. The reader thread calls this for every batch;
        call it directly only while no reader runs (tests, tools).
        """
        n = self._handle(messages)
        self._publish(None)
        return n

    def _handle(self, messages: Sequence[Message]) -> int:
        at = time.time()
        records = [m for m in messages if m.error() is None]
        if len(records) != len(messages):
            self._error_events([m for m in messages if m.error() is not None], at)
        if not records:
            return 0
        keys = [m.key() for m in records]
        values = [m.value() for m in records]
        parts = cast(list[int], [m.partition() for m in records])
        offsets = cast(list[int], [m.offset() for m in records])
        batch = self._decoder.decode_batch(keys, values, parts, offsets)
        if batch.skip_samples:
            self._log_skips(batch)
        self._apply(batch, at)
        positions = self._positions
        for p, o in dict(zip(parts, offsets, strict=True)).items():  # last offset per partition
            if o >= positions.get(p, -1):
                positions[p] = o + 1
        self._records_read += len(records)
        self._last_record_at = at
        self._last_progress = time.monotonic()
        return len(records)

    # ------------------------------------------------------------------ applying a batch

    def _apply(self, batch: DecodedBatch, at: float) -> None:
        start = 0
        touched: set[str] = set()
        for event in batch.events:
            if event.commit_index > start and _is_deletion(event):
                # The commits written before a deletion must reach the store before it.
                self._put_commits(batch, start, event.commit_index, at)
                start = event.commit_index
            self._apply_event(event, at, touched)
        self._put_commits(batch, start, batch.commit_count, at)
        for group in touched:
            state = self._new_groups.get(group)
            if state is not None:
                self._put_group(self._new_protocol_membership(group, state, at))

    def _put_commits(self, batch: DecodedBatch, start: int, stop: int, at: float) -> None:
        if stop <= start:
            return
        whole = start == 0 and stop == batch.commit_count
        keys = batch.commit_keys if whole else batch.commit_keys[start:stop]
        groups = list(map(_GROUP, keys))
        topics = list(map(_TOPIC, keys))
        partitions = list(map(_PARTITION, keys))
        offsets = batch.commit_offsets if whole else batch.commit_offsets[start:stop]
        times = batch.commit_timestamps if whole else batch.commit_timestamps[start:stop]
        orders = batch.commit_orders if whole else batch.commit_orders[start:stop]
        # Filters are decided once per distinct name, so an all-allowed batch costs two sets.
        bad_groups = self._group_ok.rejected(groups)
        bad_topics = self._topic_ok.rejected(topics)
        if bad_groups or bad_topics:
            keep = [
                g not in bad_groups and t not in bad_topics
                for g, t in zip(groups, topics, strict=True)
            ]
            n = len(groups)
            groups, topics, partitions, offsets, times, orders = (
                list(itertools.compress(column, keep))
                for column in (groups, topics, partitions, offsets, times, orders)
            )
            self._commits_filtered += n - len(groups)
            if not groups:
                return
        self._store.put_commits(
            CommitBatch(
                cluster=self.cluster,
                source=_SOURCE,
                observed_at=at,
                groups=groups,
                topics=topics,
                partitions=partitions,
                offsets=offsets,
                commit_times=cast(list[int | None], times),
                orders=orders,
            )
        )
        self._commits_stored += len(groups)

    def _apply_event(self, event: Event, at: float, touched: set[str]) -> None:
        group = event.key.group if isinstance(event, OffsetTombstone) else event.group
        if not self._group_ok(group):
            self._events_filtered += 1
            return
        if isinstance(event, OffsetTombstone):
            key = event.key
            if not self._topic_ok(key.topic):
                self._events_filtered += 1
                return
            self._store.put_offsets_deleted(
                OffsetsDeleted(self.cluster, key.group, key.topic, key.partition, at)
            )
            self._count("offsets_deleted")
        elif isinstance(event, GroupMetadata):
            self._put_group(self._classic_membership(event, at))
        elif isinstance(event, GroupTombstone):
            self._store.put_group_deleted(GroupDeleted(self.cluster, group, at))
            self._count("group_deleted")
        else:
            self._new_protocol_event(event, at, touched)

    def _put_group(self, membership: GroupMembership) -> None:
        self._store.put_group(membership)
        self._count("group_membership")

    def _count(self, kind: str) -> None:
        self._events_applied[kind] = self._events_applied.get(kind, 0) + 1

    def _classic_membership(self, event: GroupMetadata, at: float) -> GroupMembership:
        """A classic group's snapshot. Coordinators write one when a rebalance completes
        (members with assignments: Stable) and, since Kafka 0.10.1, when the last member
        leaves (no members: Empty); 0.9 writes a tombstone instead of the latter."""
        value = event.value
        topic_ok = self._topic_ok
        members = tuple(
            GroupMember(
                member_id=m.member_id,
                client_id=m.client_id,
                host=m.client_host,
                assignment=()
                if m.assignment is None
                else tuple(
                    (topic, p)
                    for topic, parts in m.assignment.partitions.items()
                    if topic_ok(topic)
                    for p in parts
                ),
                instance_id=m.group_instance_id,
            )
            for m in value.members
        )
        return GroupMembership(
            cluster=self.cluster,
            group=event.group,
            source=_SOURCE,
            observed_at=at,
            state="Stable" if members else "Empty",
            protocol_type=value.protocol_type,
            protocol=value.protocol or "",
            generation=value.generation,
            members=members,
        )

    def _new_protocol_event(self, event: Event, at: float, touched: set[str]) -> None:
        """KIP-848 records: kept per group, published once per batch for each touched group."""
        group = cast(Any, event).group
        if isinstance(event, ConsumerGroupRecordTombstone):
            state = self._new_groups.get(group)
            if event.record_type == _KIP848_GROUP_RECORD:
                self._new_groups.pop(group, None)
                touched.discard(group)
                self._store.put_group_deleted(GroupDeleted(self.cluster, group, at))
                self._count("group_deleted")
                return
            if state is None or event.member_id is None:
                return
            if event.record_type == "consumer_group_member_metadata":
                state.members.pop(event.member_id, None)
            elif event.record_type == "consumer_group_current_member_assignment":
                state.owned.pop(event.member_id, None)
            else:
                return
            touched.add(group)
            return
        state = self._new_groups.setdefault(group, _NewProtocolGroup())
        if isinstance(event, ConsumerGroupMetadata):
            state.epoch = event.epoch
        elif isinstance(event, ConsumerGroupMemberMetadata):
            state.members[event.member_id] = event
        elif isinstance(event, ConsumerGroupCurrentAssignment):
            state.owned[event.member_id] = event
            # Topic ids: brokers without them (this one) give no way to name these topics.
            self._unresolved += sum(len(parts) for parts in event.partitions.values())
        else:  # target assignments: what members will own, not what they own
            return
        touched.add(group)

    def _new_protocol_membership(
        self, group: str, state: _NewProtocolGroup, at: float
    ) -> GroupMembership:
        members = []
        assignors = set()
        for member_id in sorted(state.members.keys() | state.owned.keys()):
            meta = state.members.get(member_id)
            if meta is not None and meta.server_assignor:
                assignors.add(meta.server_assignor)
            members.append(
                GroupMember(
                    member_id=member_id,
                    client_id=meta.client_id if meta is not None else "",
                    host=meta.client_host if meta is not None else "",
                    assignment=(),  # topic ids only; see _new_protocol_event
                    instance_id=meta.instance_id if meta is not None else None,
                )
            )
        if not members:
            status = "Empty"
        elif (
            state.epoch is not None
            and all(
                a.member_epoch == state.epoch and not a.pending_revocation
                for a in state.owned.values()
            )
            and state.owned.keys() >= state.members.keys()
        ):
            status = "Stable"
        else:
            status = "Reconciling"
        return GroupMembership(
            cluster=self.cluster,
            group=group,
            source=_SOURCE,
            observed_at=at,
            state=status,
            protocol_type="consumer",
            protocol=",".join(sorted(assignors)),
            generation=state.epoch,
            members=tuple(members),
        )

    # ------------------------------------------------------------------ accounting

    def _log_skips(self, batch: DecodedBatch) -> None:
        for reason, sample in batch.skip_samples.items():
            if reason in self._logged:
                continue
            self._logged.add(reason)
            _log.warning(
                "undecodable record skipped (logged once per reason, counted in stats)",
                extra={
                    "collector": self.name,
                    "reason": str(reason),
                    "field": sample.field,
                    "detail": sample.detail,
                    "record_type": sample.record_type,
                    "partition": sample.source_partition,
                    "offset": sample.order,
                },
            )

    def _error_events(self, events: Iterable[Message], at: float) -> None:
        for m in events:
            err = cast(KafkaError, m.error())
            if err.code() == KafkaError._PARTITION_EOF:
                p, o = m.partition(), m.offset()
                if p is not None and o is not None and o > self._positions.get(p, -1):
                    self._positions[p] = o
                self._last_record_at = at
                self._last_progress = time.monotonic()
                continue
            self._note_error(err)

    def _on_client_error(self, err: KafkaError) -> None:
        """librdkafka's client-level errors (broker or all brokers down, auth ...); it calls
        this from ``consume()``, i.e. in the reader thread."""
        self._note_error(err)
        if err.fatal():
            self._fatal = err

    def _note_error(self, err: KafkaError) -> None:
        name = err.name()
        self._consume_errors[name] = self._consume_errors.get(name, 0) + 1
        self._last_error = (time.monotonic(), f"{name}: {err.str()}")
        if f"consume:{name}" not in self._logged:
            self._logged.add(f"consume:{name}")
            _log.warning(
                "consume error (logged once per code, counted in stats)",
                extra={"collector": self.name, "error": name, "detail": err.str()},
            )

    def _failing(self) -> bool:
        """A consume error with no progress since (records, end of partition or a probe)."""
        last_error = self._last_error
        return last_error is not None and last_error[0] > self._last_progress

    def _probe(self, consumer: Consumer) -> None:
        """After an error on a quiet topic no record may ever come to show recovery: ask the
        broker for one partition's watermarks; an answer counts as progress."""
        try:
            if self._start_hw:
                p = next(iter(self._start_hw))
                consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=1.0)
            else:
                consumer.list_topics(self.topic, timeout=1.0)
        except KafkaException:
            return
        self._last_progress = time.monotonic()

    def _snapshot_stats(self) -> OffsetsTopicStats:
        return OffsetsTopicStats(
            decoder=self._decoder.stats,
            commits_stored=self._commits_stored,
            commits_filtered=self._commits_filtered,
            events_applied=dict(self._events_applied),
            events_filtered=self._events_filtered,
            consume_errors=dict(self._consume_errors),
            kip848_unresolved_partitions=self._unresolved,
            handler_errors=self._handler_errors,
            reader_restarts=self._restarts,
        )

    def _snapshot_progress(self) -> ReaderProgress:
        positions = self._positions
        start_hw = self._start_hw
        caught_up = self._assigned_at is not None and all(
            positions.get(p, 0) >= hw for p, hw in start_hw.items()
        )
        if caught_up and self._caught_up_at is None and self._assigned_at is not None:
            self._catch_up_seconds = time.monotonic() - self._assigned_at
            self._caught_up_at = time.time()
            _log.info(
                "caught up with the offsets topic",
                extra={
                    "collector": self.name,
                    "seconds": round(self._catch_up_seconds, 3),
                    "records": self._records_read,
                },
            )
        behind = sum(max(0, hw - positions.get(p, 0)) for p, hw in self._high.items())
        thread = self._thread
        return ReaderProgress(
            running=thread is not None and thread.is_alive(),
            partitions=len(start_hw),
            start_high_watermarks=dict(start_hw),
            positions=dict(positions),
            records_behind=behind,
            caught_up=caught_up,
            ready=self._caught_up_at is not None,
            caught_up_at=self._caught_up_at,
            catch_up_seconds=self._catch_up_seconds,
            records_read=self._records_read,
            last_record_at=self._last_record_at,
        )

    def _publish(self, consumer: Consumer | None) -> None:
        if consumer is not None:
            for p in self._start_hw:
                _low, high = consumer.get_watermark_offsets(
                    TopicPartition(self.topic, p), cached=True
                )
                if high is not None and high >= 0:
                    self._high[p] = max(high, self._high.get(p, 0))
        self._progress = self._snapshot_progress()
        self._stats = self._snapshot_stats()
        if consumer is not None and self._caught_up_at is not None and not self._failing():
            self._fresh_at = time.time()

    # ------------------------------------------------------------------ the reader thread

    def _new_consumer(self, fetch_bytes: int | None = None) -> Consumer:
        fetch = {} if fetch_bytes is None else {"fetch.message.max.bytes": fetch_bytes}
        return Consumer(
            client_config(
                self._config,
                **{
                    # Required by librdkafka for any consumer; never joined, never committed.
                    "group.id": f"kafka-monitor-offsets-reader-{self.cluster}",
                    "client.id": f"kafka-monitor-{self.cluster}-offsets-reader",
                    **READER_PROPERTIES,
                    **fetch,
                    "error_cb": self._on_client_error,
                },
            )
        )

    def _sized_consumer(self) -> Consumer:
        """A reader whose fetch size fits the topic's partitions per broker (see
        ``FETCH_RESPONSE_BUDGET``); the default size until the topic exists."""
        consumer = self._new_consumer()
        try:
            topic = consumer.list_topics(
                self.topic, timeout=self._config.request_timeout).topics.get(self.topic)
        except KafkaException:
            return consumer  # the first assignment reports the error
        if topic is None or topic.error is not None or not topic.partitions:
            return consumer
        led = Counter(p.leader for p in topic.partitions.values())
        wanted = partition_fetch_bytes(max(led.values()))
        if wanted == READER_PROPERTIES["fetch.message.max.bytes"]:
            return consumer
        consumer.close()
        return self._new_consumer(wanted)

    def _run(self) -> None:
        consumer: Consumer | None = None
        self._fatal = None
        try:
            consumer = self._sized_consumer()
            self._assign(consumer)
            next_refresh = time.monotonic() + self._refresh_after()
            last_probe = 0.0
            while not self._stop.is_set():
                # What is queued now, without waiting for a full batch (consume() would wait
                # up to its timeout for batch_size records: the end of a catch-up would stall);
                # block only when nothing is queued.
                messages = consumer.consume(self.batch_size, 0) or consumer.consume(
                    self.batch_size, self.poll_timeout
                )
                if messages:
                    try:
                        self._handle(messages)
                    except Exception:  # a bug in handling must not end the stream
                        self._handler_errors += 1
                        if "handler" not in self._logged:
                            self._logged.add("handler")
                            _log.exception("batch handling failed", extra={"collector": self.name})
                if self._fatal is not None:
                    raise KafkaException(self._fatal)  # this consumer is unusable: restart
                now = time.monotonic()
                if self._failing() and now - last_probe >= 1.0:
                    last_probe = now
                    self._probe(consumer)
                if now >= next_refresh:
                    self._assign(consumer)
                    next_refresh = time.monotonic() + self._refresh_after()
                self._publish(consumer)
        except BaseException as exc:
            self._reader_error = exc
            _log.warning(
                "offsets topic reader stopped",
                extra={"collector": self.name, "error": f"{type(exc).__name__}: {exc}"},
            )
        finally:
            self._publish(None)
            if consumer is not None:
                try:
                    consumer.close()
                except Exception:
                    _log.exception("closing the reader's consumer failed")

    def _refresh_after(self) -> float:
        """Seconds to the next metadata check: soon while the topic does not exist yet."""
        return self.metadata_refresh if self._start_hw else min(5.0, self.metadata_refresh)

    def _assign(self, consumer: Consumer) -> None:
        """Assign every partition of the topic (again, after a restart or when partitions
        were added): known positions resume, new partitions start per ``offsets_topic.start``.
        The high watermark at assignment is the partition's catch-up target."""
        timeout = self._config.request_timeout
        metadata = consumer.list_topics(self.topic, timeout=timeout)
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None:
            # Kafka creates the topic when the first group needs it: nothing to read yet.
            partitions: list[int] = []
        else:
            partitions = sorted(topic.partitions)
        new = [p for p in partitions if p not in self._start_hw]
        if not new and self._assigned_at is not None and consumer.assignment():
            return
        resumed: set[int] = set()
        for p in new:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(self.topic, p), timeout=timeout
            )
            self._start_hw[p] = high
            self._high[p] = high
            saved = self._resume.pop(p, None)
            if saved is not None and low <= saved <= high:
                self._positions[p] = saved
                resumed.add(p)
                continue
            if saved is not None and "resume" not in self._logged:
                self._logged.add("resume")
                _log.warning(
                    "saved position outside the partition, read from offsets_topic.start "
                    "(logged once)",
                    extra={"collector": self.name, "partition": p, "saved": saved,
                           "low": low, "high": high},
                )
            self._positions.setdefault(p, high if self.start_from == "latest" else low)
        assignment = [
            TopicPartition(
                self.topic,
                p,
                self._positions[p]
                if p not in new or p in resumed or self.start_from == "latest"
                else OFFSET_BEGINNING,
            )
            for p in partitions
        ]
        consumer.assign(assignment)
        if self._assigned_at is None:
            self._assigned_at = time.monotonic()
        self._publish(None)


def _is_deletion(event: Event) -> bool:
    kind = type(event)
    return (
        kind is OffsetTombstone
        or kind is GroupTombstone
        or (
            kind is ConsumerGroupRecordTombstone
            and cast(ConsumerGroupRecordTombstone, event).record_type == _KIP848_GROUP_RECORD
        )
    )


class _CachedFilter:
    """A group/topic NameFilter decided once per name (regexes are too slow per record)."""

    def __init__(self, names: NameFilter) -> None:
        self._filter = names
        self._cache: dict[str, bool] = {}
        self._allow_all = not names.allow and not names.deny

    def __call__(self, name: str) -> bool:
        if self._allow_all:
            return True
        ok = self._cache.get(name)
        if ok is None:
            if len(self._cache) >= _MAX_FILTER_CACHE:
                self._cache.clear()
            ok = self._cache[name] = self._filter.matches(name)
        return ok

    def rejected(self, names: list[str]) -> set[str]:
        """The distinct names in ``names`` the filter denies."""
        if self._allow_all:
            return set()
        return {n for n in set(names) if not self(n)}
