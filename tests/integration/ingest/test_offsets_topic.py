"""The ``__consumer_offsets`` reader against real Kafka 0.9.0.1 brokers.

What Kafka 0.9 writes, and so what these tests can make it write:

* an offset-commit record per committed partition (value v1: offset, metadata, commit and
  expire timestamps), for group members and for standalone commits alike;
* a group-metadata record (members, client ids, hosts, assignments) when a rebalance
  completes, and a group tombstone when the last member leaves (its offsets stay);
* offset tombstones when committed offsets expire: OffsetCommit v2 carries a retention time,
  so a commit with a 1 s retention on a broker checking every 0.5 s expires within seconds.

0.9 rejects produce requests to ``__consumer_offsets`` from ordinary clients (INVALID_TOPIC)
but accepts them from the client id ``__admin_client``: the tests use that, on a dedicated
broker, to put records that 0.9 itself never writes (garbage, KIP-848 records as Kafka 4
writes them) into the real topic.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from monitor.config import ClusterConfig, NameFilter, OffsetsTopicConfig
from monitor.dev.localkafka import HealthyConsumer, LocalKafka, ProducerLoad, StoppedConsumer
from monitor.dev.localkafka.workload import librdkafka_logger
from monitor.ingest.offsets_topic import (
    FETCH_RESPONSE_BUDGET,
    PARTITION_FETCH_MAX,
    READER_PROPERTIES,
    OffsetsTopicCollector,
    partition_fetch_bytes,
)
from monitor.model.observations import CommitBatch
from monitor.store.store import Store
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.offsets_records import (
    cg_current_value,
    cg_member_value,
    cg_metadata_value,
    commit_key,
    kip848_key,
    offset_value,
    uuid_str,
)
from tests.harness.polling import wait_for_kafka as wait_for

pytestmark = pytest.mark.kafka

OFFSETS_TOPIC = "__consumer_offsets"
CLUSTER = "test"


# --------------------------------------------------------------------------- helpers


def cluster_config(kafka: LocalKafka, **overrides: Any) -> ClusterConfig:
    return ClusterConfig(
        name=CLUSTER,
        bootstrap_servers=kafka.bootstrap_servers.split(","),
        broker_version_fallback="0.9.0.1",
        **overrides,
    )


def client(kafka: LocalKafka, **extra: object) -> dict[str, Any]:
    return {**kafka.client_config(**extra), "logger": librdkafka_logger}


class RecordingStore(Store):
    """The real store, also keeping every commit batch it was given (to check sequences)."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[CommitBatch] = []

    def put_commits(self, batch: CommitBatch) -> None:
        self.batches.append(batch)
        super().put_commits(batch)

    def commits_of(self, group: str) -> list[tuple[str, int, int, int | None, int]]:
        """(topic, partition, offset, commit time ms, order) of every commit of ``group``."""
        return [
            (t, p, o, ms, order)
            for b in list(self.batches)
            for g, t, p, o, ms, order in zip(
                b.groups,
                b.topics,
                b.partitions,
                b.offsets,
                b.commit_times,
                b.orders,
                strict=True,
            )
            if g == group
        ]


@pytest.fixture
def running() -> Iterator[Callable[..., OffsetsTopicCollector]]:
    """``running(config, store)``: a started collector, closed after the test."""
    started: list[OffsetsTopicCollector] = []

    def start(config: ClusterConfig, store: Store, **kwargs: Any) -> OffsetsTopicCollector:
        collector = OffsetsTopicCollector(config, store, poll_timeout=0.2, **kwargs)
        started.append(collector)
        collector.start()
        return collector

    yield start
    for collector in started:
        collector.close()
        assert collector._thread is not None and not collector._thread.is_alive()


def consume_offsets_topic(kafka: LocalKafka, timeout: float = 20.0) -> list[Message]:
    """Every record of ``__consumer_offsets`` up to the current end, as consumer messages."""
    consumer = Consumer(client(kafka, **{"group.id": make_unique_name("raw-reader")}))
    try:
        md = consumer.list_topics(OFFSETS_TOPIC, timeout=10)
        parts = sorted(md.topics[OFFSETS_TOPIC].partitions)
        tps = [TopicPartition(OFFSETS_TOPIC, p) for p in parts]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(OFFSETS_TOPIC, p, OFFSET_BEGINNING) for p in pending])
        out: list[Message] = []
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.2):
                p, o = m.partition(), m.offset()
                if m.error() is None and p is not None and o is not None:
                    out.append(m)
                    if o + 1 >= ends[p]:
                        pending.discard(p)
        assert not pending, f"partitions {pending} not read to the end"
        return out
    finally:
        consumer.close()


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def offset_commit_v2(
    kafka: LocalKafka, group: str, topic: str, offsets: dict[int, int], retention_ms: int
) -> None:
    """A standalone OffsetCommit v2 (generation -1) with its own retention time: librdkafka
    always sends -1 (the broker's default), so this is written on the wire by hand."""
    body = _s(group) + struct.pack(">i", -1) + _s("") + struct.pack(">q", retention_ms)
    body += struct.pack(">i", 1) + _s(topic) + struct.pack(">i", len(offsets))
    for p, o in offsets.items():
        body += struct.pack(">iq", p, o) + _s("")
    payload = struct.pack(">hhi", 8, 2, 1) + _s("offsets-topic-test") + body
    port = kafka.brokers[0].port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", sock.recv(4))
        data = b""
        while len(data) < size:
            data += sock.recv(size - len(data))
    # correlation id, 1 topic, topic name, n partitions, then (partition, error) pairs
    pos = 4 + 4 + 2 + len(topic.encode()) + 4
    errors = [struct.unpack_from(">ih", data, pos + 6 * i)[1] for i in range(len(offsets))]
    assert errors == [0] * len(offsets), errors


def produce_raw(kafka: LocalKafka, records: list[tuple[bytes | None, bytes | None]]) -> None:
    """Append records to ``__consumer_offsets`` partition 0 as ``__admin_client`` (0.9 lets
    only that client id write to internal topics)."""
    producer = Producer(client(kafka, **{"client.id": "__admin_client"}))
    failures: list[Any] = []
    for key, value in records:
        producer.produce(
            OFFSETS_TOPIC,
            key=key,
            value=value,
            partition=0,
            on_delivery=lambda err, _m: failures.append(err) if err else None,
        )
    assert producer.flush(15) == 0 and not failures, failures


@pytest.fixture(scope="module")
def kafka_expiring() -> Iterator[LocalKafka]:
    """A dedicated broker that expires offsets every 0.5 s (and may hold odd records)."""
    cluster = LocalKafka(
        1, offsets_topic_partitions=4, broker_props={"offsets.retention.check.interval.ms": 500}
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop(graceful=False)


# --------------------------------------------------------------------------- commits


def test_real_commits_reach_the_store_with_offsets_order_and_commit_times(
    kafka: LocalKafka,
    unique_name: Callable[[str], str],
    running: Callable[..., OffsetsTopicCollector],
) -> None:
    topic, group = unique_name("topic"), unique_name("group")
    kafka.create_topic(topic, partitions=2)
    store = RecordingStore()
    collector = running(cluster_config(kafka), store)
    wall_minus_mono = time.time() - time.monotonic()
    with ProducerLoad(kafka.client_config(), topic, 300):
        consumer = HealthyConsumer(kafka.client_config(), topic, group, commit_interval=0.5)
        with consumer:
            wait_for(lambda: len(consumer.commits) >= 4, 30, "4 commits")
    made = consumer.commits
    last: dict[tuple[str, int], int] = {}
    for c in made:
        last.update(c.offsets)

    def stored() -> bool:
        snap = store.group(CLUSTER, group)
        return snap is not None and {tp: c.offset for tp, c in snap.commits.items()} == last

    wait_for(stored, 15, "the consumer's last commits in the store")
    snap = store.group(CLUSTER, group)
    assert snap is not None
    assert all(c.source == "offsets_topic" for c in snap.commits.values())

    # Every commit the consumer made, in order, with Kafka's commit timestamp.
    seen = store.commits_of(group)
    for tp in last:
        mine = [(c.offsets[tp], c.at + wall_minus_mono) for c in made if tp in c.offsets]
        theirs = [(o, ms, order) for t, p, o, ms, order in seen if (t, p) == tp]
        assert [o for o, _ in mine] == [o for o, _, _ in theirs]
        orders = [order for _, _, order in theirs]
        assert orders == sorted(orders) and len(set(orders)) == len(orders)
        for (_, acked_at), (_, ms, _) in zip(mine, theirs, strict=True):
            assert ms is not None
            # The broker stamps the commit before the client sees the answer.
            assert -0.05 <= acked_at - ms / 1000 < 1.0, (acked_at, ms)
    assert snap.commits[(topic, 0)].commit_time == max(
        ms / 1000 for t, p, _, ms, _ in seen if (t, p) == (topic, 0) and ms is not None
    )
    stats = collector.stats
    assert stats.commits_stored >= len(seen)
    assert stats.decoder.records_by_type.get("offset_commit", 0) >= len(seen)
    assert not stats.decoder.skipped_by_reason
    # The reader itself never joins a group nor commits.
    assert not any(g.startswith("kafka-monitor-offsets-reader") for g in store.groups(CLUSTER))


def test_group_and_topic_filters_apply_to_commits(
    kafka: LocalKafka,
    unique_name: Callable[[str], str],
    running: Callable[..., OffsetsTopicCollector],
) -> None:
    topic, hidden_topic = unique_name("topic"), unique_name("hidden")
    kept, denied = unique_name("kept"), unique_name("denied")
    for t in (topic, hidden_topic):
        kafka.create_topic(t, partitions=1)
    c = Consumer(client(kafka, **{"group.id": kept}))
    d = Consumer(client(kafka, **{"group.id": denied}))
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 5), TopicPartition(hidden_topic, 0, 6)],
                 asynchronous=False)  # fmt: skip
        d.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
    finally:
        c.close()
        d.close()
    store = Store()
    config = cluster_config(
        kafka,
        groups=NameFilter.model_validate({"deny": ["^" + denied]}),
        topics=NameFilter.model_validate({"deny": ["^__", "^" + hidden_topic]}),
    )
    collector = running(config, store)
    wait_for(lambda: collector.ready, 30, "catch-up")
    snap = store.group(CLUSTER, kept)
    assert snap is not None and set(snap.commits) == {(topic, 0)}
    assert snap.commits[(topic, 0)].offset == 5
    assert store.group(CLUSTER, denied) is None
    assert collector.stats.commits_filtered >= 2


# --------------------------------------------------------------------------- membership


def test_group_metadata_gives_owners_like_the_admin_api(
    kafka: LocalKafka,
    unique_name: Callable[[str], str],
    running: Callable[..., OffsetsTopicCollector],
) -> None:
    topic, group = unique_name("topic"), unique_name("group")
    kafka.create_topic(topic, partitions=4)
    store = Store()
    running(cluster_config(kafka), store)
    config = kafka.client_config()
    with ProducerLoad(config, topic, 100):
        a = HealthyConsumer(config, topic, group)
        b = HealthyConsumer(config, topic, group)
        with a, b:

            def two_members_own_everything() -> bool:
                snap = store.group(CLUSTER, group)
                m = snap.membership if snap else None
                return (
                    m is not None
                    and len(m.members) == 2
                    and set(m.owners()) == {(topic, p) for p in range(4)}
                    and a.assigned | b.assigned == {(topic, p) for p in range(4)}
                    and bool(a.assigned)
                    and bool(b.assigned)
                )

            wait_for(two_members_own_everything, 40, "both members in the stored membership")
            admin = AdminClient(client(kafka))
            desc = admin.describe_consumer_groups([group])[group].result(timeout=15)
            snap = store.group(CLUSTER, group)
            assert snap is not None and snap.membership is not None
            membership = snap.membership
            assigned = sorted(sorted(c.assigned) for c in (a, b))

    assert membership.source == "offsets_topic"
    assert membership.state == "Stable"
    assert membership.protocol_type == "consumer"
    assert membership.protocol == "range"  # librdkafka's first assignor
    assert membership.generation is not None and membership.generation >= 1
    ours = {m.member_id: (m.client_id, m.host, set(m.assignment)) for m in membership.members}
    admins = {
        m.member_id: (
            m.client_id,
            m.host,
            {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions},
        )
        for m in desc.members
    }
    assert ours == admins
    assert {client_id for client_id, _, _ in ours.values()} == {"healthy-consumer"}
    assert all(host == "/127.0.0.1" for _, host, _ in ours.values())
    assert sorted(sorted(tps) for _, _, tps in ours.values()) == assigned


def test_group_whose_members_all_left_keeps_its_offsets(
    kafka: LocalKafka,
    unique_name: Callable[[str], str],
    running: Callable[..., OffsetsTopicCollector],
) -> None:
    topic, group = unique_name("topic"), unique_name("group")
    kafka.create_topic(topic, partitions=2)
    store = Store()
    collector = running(cluster_config(kafka), store)
    config = kafka.client_config()
    with ProducerLoad(config, topic, 200):
        stopped = StoppedConsumer(config, topic, group, stop_after_s=2.0, commit_interval=0.5)
        with stopped:
            wait_for(lambda: (s := store.group(CLUSTER, group)) and s.membership, 30, "members")
            assert stopped.closed.wait(30)
    last: dict[tuple[str, int], int] = {}
    for c in stopped.commits:
        last.update(c.offsets)

    def members_gone_offsets_kept() -> bool:
        snap = store.group(CLUSTER, group)
        return (
            snap is not None
            and snap.membership is None
            and {tp: c.offset for tp, c in snap.commits.items()} == last
        )

    # 0.9 writes a group tombstone when the last member leaves; the offsets stay.
    wait_for(members_gone_offsets_kept, 20, "membership dropped, offsets kept")
    assert collector.stats.events_applied.get("group_deleted", 0) >= 1


def test_group_without_offsets_is_gone_after_its_tombstone(
    kafka: LocalKafka,
    unique_name: Callable[[str], str],
    running: Callable[..., OffsetsTopicCollector],
) -> None:
    topic, group = unique_name("topic"), unique_name("group")
    kafka.create_topic(topic, partitions=1)
    store = Store()
    running(cluster_config(kafka), store)
    consumer = Consumer(client(kafka, **{"group.id": group, "session.timeout.ms": 6000}))
    consumer.subscribe([topic])
    try:
        wait_for(
            lambda: (
                (consumer.poll(0.1) or True)
                and (s := store.group(CLUSTER, group)) is not None
                and s.membership is not None
                and len(s.membership.members) == 1
            ),
            30,
            "the group's membership",
        )
    finally:
        consumer.close()  # leaves the group: 0.9 writes the group tombstone
    wait_for(lambda: store.group(CLUSTER, group) is None, 20, "the group to be deleted")


# --------------------------------------------------------------------------- tombstones


@pytest.mark.own_cluster
def test_expired_offsets_are_deleted_and_order_within_a_batch_holds(
    kafka_expiring: LocalKafka,
    unique_name: Callable[[str], str],
    running: Callable[..., OffsetsTopicCollector],
) -> None:
    kafka = kafka_expiring
    topic = unique_name("topic")
    expiring, revived, control = unique_name("exp"), unique_name("rev"), unique_name("ctl")
    kafka.create_topic(topic, partitions=2)
    live = Store()
    collector = running(cluster_config(kafka), live)
    wait_for(lambda: collector.ready, 30, "catch-up")

    offset_commit_v2(kafka, control, topic, {0: 3, 1: 4}, retention_ms=-1)  # broker default: 1 day
    offset_commit_v2(kafka, expiring, topic, {0: 5, 1: 7}, retention_ms=1000)
    offset_commit_v2(kafka, revived, topic, {0: 9}, retention_ms=1000)
    wait_for(lambda: live.group(CLUSTER, expiring) is not None, 10, "the expiring commits")

    # Offset expiry writes offset tombstones; a group left without offsets or members is gone.
    wait_for(lambda: live.group(CLUSTER, expiring) is None, 20, "expired offsets deleted")
    wait_for(lambda: live.group(CLUSTER, revived) is None, 20, "expired offset deleted")
    offset_commit_v2(kafka, revived, topic, {0: 11}, retention_ms=-1)  # after its tombstone
    wait_for(lambda: live.group(CLUSTER, revived) is not None, 10, "the new commit")
    assert collector.stats.events_applied.get("offsets_deleted", 0) >= 3

    # Read again from the earliest offset, by a new reader and as one single batch: commit,
    # tombstone and new commit then arrive together and only record order gives the right
    # answer (commits first would lose "revived"; tombstones first would keep "expiring").
    replay = Store()
    again = running(cluster_config(kafka), replay)
    wait_for(lambda: again.ready, 30, "catch-up")
    one_batch = Store()
    OffsetsTopicCollector(cluster_config(kafka), one_batch).handle_messages(
        consume_offsets_topic(kafka)
    )
    for store in (replay, one_batch):
        assert store.group(CLUSTER, expiring) is None
        snap = store.group(CLUSTER, revived)
        assert snap is not None and {tp: c.offset for tp, c in snap.commits.items()} == {
            (topic, 0): 11
        }
        ctl = store.group(CLUSTER, control)
        assert ctl is not None and {tp: c.offset for tp, c in ctl.commits.items()} == {
            (topic, 0): 3,
            (topic, 1): 4,
        }


# --------------------------------------------------------------------------- start, catch-up


def test_start_latest_skips_history(
    kafka: LocalKafka,
    unique_name: Callable[[str], str],
    running: Callable[..., OffsetsTopicCollector],
) -> None:
    topic, old, new = unique_name("topic"), unique_name("old"), unique_name("new")
    kafka.create_topic(topic, partitions=1)
    for group, offset in ((old, 10), (new, 1)):
        c = Consumer(client(kafka, **{"group.id": group}))
        c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        c.close()
    store = Store()
    config = cluster_config(kafka, offsets_topic=OffsetsTopicConfig(start="latest"))
    collector = running(config, store)
    wait_for(lambda: collector.ready, 20, "ready")
    assert collector.progress.records_read == 0
    c = Consumer(client(kafka, **{"group.id": new}))
    c.commit(offsets=[TopicPartition(topic, 0, 20)], asynchronous=False)
    c.close()
    wait_for(lambda: store.group(CLUSTER, new) is not None, 10, "the new commit")
    snap = store.group(CLUSTER, new)
    assert snap is not None and snap.commits[(topic, 0)].offset == 20
    assert store.group(CLUSTER, old) is None
    assert collector.progress.records_read >= 1


class GatedStore(Store):
    """The real store, whose writes wait for ``gate``: holds the reader mid-catch-up."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.waiting = threading.Event()

    def put_commits(self, batch: CommitBatch) -> None:
        self.waiting.set()
        self.gate.wait(30)
        super().put_commits(batch)


def test_catch_up_is_reported(
    kafka: LocalKafka,
    unique_name: Callable[[str], str],
) -> None:
    topic, group = unique_name("topic"), unique_name("group")
    kafka.create_topic(topic, partitions=1)
    c = Consumer(client(kafka, **{"group.id": group}))
    for i in range(20):
        c.commit(offsets=[TopicPartition(topic, 0, i)], asynchronous=False)
    c.close()
    store = GatedStore()
    collector = OffsetsTopicCollector(cluster_config(kafka), store, batch_size=5, poll_timeout=0.2)
    try:
        assert not collector.ready and not collector.progress.ready
        assert collector.run_once()  # the scheduler's round: starts the reader
        assert store.waiting.wait(20)
        time.sleep(0.3)
        progress = collector.progress
        assert not collector.ready and not progress.caught_up
        assert progress.partitions == kafka.offsets_topic_partitions
        assert sum(progress.start_high_watermarks.values()) >= 20
        assert progress.records_behind > 0
        store.gate.set()
        wait_for(lambda: collector.ready, 30, "catch-up")
        progress = collector.progress
        assert progress.ready and progress.catch_up_seconds is not None
        assert progress.caught_up_at is not None
        assert all(progress.positions[p] >= hw for p, hw in progress.start_high_watermarks.items())
        wait_for(lambda: collector.progress.records_behind == 0, 10, "nothing behind")
        snap = store.group(CLUSTER, group)
        assert snap is not None and snap.commits[(topic, 0)].offset == 19
        assert collector.run_once() and collector.health.errors == 0
    finally:
        store.gate.set()
        collector.close()


def test_unreachable_cluster_fails_health_without_crashing(
    unique_name: Callable[[str], str],
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    config = ClusterConfig(
        name=CLUSTER,
        bootstrap_servers=[f"127.0.0.1:{port}"],
        broker_version_fallback="0.9.0.1",
        request_timeout=1.0,
    )
    collector = OffsetsTopicCollector(config, Store(), poll_timeout=0.1)
    try:
        assert collector.run_once()  # starts the reader
        wait_for(lambda: collector._thread is not None and not collector._thread.is_alive(),
                 15, "the reader to give up")  # fmt: skip
        assert not collector.run_once()  # reports why, and restarts it
        assert "reader stopped" in (collector.health.last_error or "")
        assert collector._thread is not None and collector._thread.is_alive()
        assert not collector.ready
    finally:
        started = time.monotonic()
        collector.close()
        assert time.monotonic() - started < 5.0


# --------------------------------------------------------------------------- bad records


GARBAGE: list[tuple[bytes | None, bytes | None]] = [
    (None, b"\x00\x01"),  # no key
    (b"\x00", b"\x00\x01"),  # key shorter than its type
    (b"\x00\x63garbage", b"\x00\x00zz"),  # a record type no Kafka writes
    (b"\x00\x01\x00\x03abc\x00\x01t", b"\x00\x01" + b"\x00" * 30),  # truncated key
    (commit_key("garbage-group", "t", 0), b"\x00\x09" + b"\x00" * 26),  # unknown value version
    (commit_key("garbage-group", "t", 0), b"\x00\x01\x00\x00"),  # truncated value
    (b"\xff" * 40, b"\xff" * 40),
]
GARBAGE_REASONS = {
    "missing_key",
    "truncated",
    "unknown_key_version",
    "unknown_value_version",
}


def test_batch_handler_skips_garbage_mixed_with_real_records(
    kafka: LocalKafka,
    unique_name: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic, group = unique_name("topic"), unique_name("group")
    kafka.create_topic(topic, partitions=2)
    c = Consumer(client(kafka, **{"group.id": group}))
    c.commit(offsets=[TopicPartition(topic, 0, 1), TopicPartition(topic, 1, 2)], asynchronous=False)
    c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    c.close()
    real = consume_offsets_topic(kafka)
    garbage = [
        Message(topic=OFFSETS_TOPIC, partition=0, offset=10_000_000 + i, key=k, value=v)
        for i, (k, v) in enumerate(GARBAGE)
    ]
    mixed: list[Message] = []
    for i, m in enumerate(real):
        mixed.append(m)
        if i % max(1, len(real) // len(garbage)) == 0 and garbage:
            mixed.append(garbage.pop())
    mixed.extend(garbage)

    clean_store, mixed_store = Store(), Store()
    clean = OffsetsTopicCollector(cluster_config(kafka), clean_store)
    dirty = OffsetsTopicCollector(cluster_config(kafka), mixed_store)
    assert clean.handle_messages(real) == len(real)
    with caplog.at_level(logging.WARNING, logger="monitor.collector.offsets_topic"):
        assert dirty.handle_messages(mixed) == len(mixed)
        dirty.handle_messages(mixed[-3:] + mixed[:3])  # the same kinds again: no new log line

    snap = mixed_store.group(CLUSTER, group)
    assert snap is not None
    assert {tp: c.offset for tp, c in snap.commits.items()} == {(topic, 0): 3, (topic, 1): 2}
    for name in clean_store.groups(CLUSTER):
        a, b = clean_store.group(CLUSTER, name), mixed_store.group(CLUSTER, name)
        assert a is not None and b is not None
        assert {tp: c.offset for tp, c in a.commits.items()} == {
            tp: c.offset for tp, c in b.commits.items()
        }
    skipped = dirty.stats.decoder.skipped_by_reason
    assert set(skipped) == GARBAGE_REASONS
    assert sum(skipped.values()) >= len(GARBAGE)
    assert not clean.stats.decoder.skipped_by_reason
    lines = [r for r in caplog.records if "undecodable record skipped" in r.getMessage()]
    assert sorted(r.__dict__["reason"] for r in lines) == sorted(GARBAGE_REASONS)


@pytest.mark.own_cluster
def test_garbage_in_the_real_topic_is_counted_and_reading_goes_on(
    kafka_expiring: LocalKafka,
    unique_name: Callable[[str], str],
    running: Callable[..., OffsetsTopicCollector],
) -> None:
    kafka = kafka_expiring
    topic, group = unique_name("topic"), unique_name("group")
    kafka.create_topic(topic, partitions=1)
    store = Store()
    collector = running(cluster_config(kafka), store)
    wait_for(lambda: collector.ready, 30, "catch-up")
    before = sum(collector.stats.decoder.skipped_by_reason.values())
    produce_raw(kafka, [(k, v) for k, v in GARBAGE if k is not None])
    c = Consumer(client(kafka, **{"group.id": group}))
    c.commit(offsets=[TopicPartition(topic, 0, 42)], asynchronous=False)
    c.close()
    wait_for(lambda: store.group(CLUSTER, group) is not None, 15, "the commit after garbage")
    wait_for(
        lambda: (
            sum(collector.stats.decoder.skipped_by_reason.values()) - before >= len(GARBAGE) - 1
        ),
        10,
        "the garbage counted",
    )
    assert collector.progress.running and collector.run_once()


# --------------------------------------------------------------------------- KIP-848


@pytest.mark.own_cluster
def test_kip848_records_give_membership_without_inventing_topic_names(
    kafka_expiring: LocalKafka,
    unique_name: Callable[[str], str],
    running: Callable[..., OffsetsTopicCollector],
) -> None:
    """0.9 never writes these: they are produced into the real topic as Kafka 4 writes them."""
    kafka = kafka_expiring
    group, topic = unique_name("kip848"), unique_name("topic")
    topic_id = uuid_str(b"\x07" * 16)
    store = Store()
    collector = running(cluster_config(kafka), store)
    wait_for(lambda: collector.ready, 30, "catch-up")
    member_a, member_b = "member-a", "member-b"

    def member(client_id: str, host: str) -> bytes:
        return cg_member_value(None, None, client_id, host, [topic], None, 300000, "uniform")

    produce_raw(
        kafka,
        [
            (kip848_key(3, group), cg_metadata_value(5)),
            (kip848_key(5, group, member_a), member("client-a", "/10.0.0.1")),
            (kip848_key(5, group, member_b), member("client-b", "/10.0.0.2")),
            (kip848_key(8, group, member_a), cg_current_value(5, 4, 0, {topic_id: [0, 1]}, {})),
            (kip848_key(8, group, member_b), cg_current_value(4, 3, 0, {topic_id: [2]}, {})),
            (commit_key(group, topic, 0, 1), offset_value(3, 77, commit_ts=1_700_000_000_000)),
        ],
    )
    wait_for(lambda: (s := store.group(CLUSTER, group)) and s.membership, 15, "membership")
    snap = store.group(CLUSTER, group)
    assert snap is not None and snap.membership is not None
    m = snap.membership
    assert m.generation == 5 and m.protocol == "uniform" and m.protocol_type == "consumer"
    assert m.state == "Reconciling"  # member-b is still at epoch 4
    assert {(x.member_id, x.client_id, x.host) for x in m.members} == {
        (member_a, "client-a", "/10.0.0.1"),
        (member_b, "client-b", "/10.0.0.2"),
    }
    assert all(x.assignment == () for x in m.members)  # topic ids are not names
    assert collector.stats.kip848_unresolved_partitions == 3
    assert snap.commits[(topic, 0)].offset == 77

    produce_raw(
        kafka,
        [
            (kip848_key(8, group, member_b), cg_current_value(5, 4, 0, {topic_id: [2]}, {})),
        ],
    )
    wait_for(
        lambda: (
            (s := store.group(CLUSTER, group)) and s.membership and s.membership.state == "Stable"
        ),
        15,
        "Stable once every member reached the group epoch",
    )
    # Deleting a KIP-848 group: member records, then the group record, are tombstoned.
    produce_raw(
        kafka,
        [
            (kip848_key(8, group, member_a), None),
            (kip848_key(5, group, member_a), None),
            (kip848_key(8, group, member_b), None),
            (kip848_key(5, group, member_b), None),
            (kip848_key(3, group), None),
        ],
    )
    wait_for(
        lambda: (s := store.group(CLUSTER, group)) is not None and s.membership is None,
        15,
        "membership dropped (offsets stay)",
    )


# --------------------------------------------------------------------------- fetch sizing


def test_fetch_size_keeps_a_broker_answer_within_the_client_limit() -> None:
    """Brokers before 0.10.1 answer a fetch with up to the partition limit times the
    partitions; librdkafka drops an answer over 100 MB and asks again, forever."""
    assert partition_fetch_bytes(1) == PARTITION_FETCH_MAX
    for partitions in (16, 50, 100, 200, 1000):
        assert partitions * partition_fetch_bytes(partitions) <= FETCH_RESPONSE_BUDGET
    assert 50 * int(READER_PROPERTIES["fetch.message.max.bytes"]) <= FETCH_RESPONSE_BUDGET  # type: ignore[call-overload]


@pytest.mark.own_cluster
def test_a_backlog_over_the_client_answer_limit_is_read_to_the_end() -> None:
    """50 offsets partitions on one 0.9 broker, each holding 3 MB of commits (large metadata
    strings): at 4 MB per partition one fetch answer would be ~150 MB, over librdkafka's
    100 MB, and the reader would never catch up (seen at 5M commits in the scale benchmark)."""
    partitions, records, metadata = 50, 100, "m" * 30_000
    with LocalKafka(1, offsets_topic_partitions=partitions, heap="512m") as cluster:
        producer = Producer(client(cluster, **{"client.id": "__admin_client"}))
        failures: list[Any] = []
        for p in range(partitions):
            for i in range(1, records + 1):
                producer.produce(
                    OFFSETS_TOPIC, partition=p,
                    key=commit_key(f"big-{p:02d}", "t", 0),
                    value=offset_value(1, i, metadata, 1_700_000_000_000 + i),
                    on_delivery=lambda err, _m: failures.append(err) if err else None,
                )
                producer.poll(0)
        assert producer.flush(60) == 0 and not failures, failures[:3]
        store = Store()
        collector = OffsetsTopicCollector(cluster_config(cluster), store)
        try:
            assert collector.run_once()
            wait_for(lambda: collector.ready, 60, "catch-up of a 150 MB backlog")
            for p in range(partitions):
                snap = store.group(CLUSTER, f"big-{p:02d}")
                assert snap is not None and snap.commits[("t", 0)].offset == records
        finally:
            collector.close()
