"""The broker offsets collector against real Kafka 0.9.0.1 brokers and librdkafka's mock cluster.

Real Kafka proves the values (log start and log end equal the broker's watermarks), the topic
filter, batching per leader (the brokers' own request counters over JMX) and topics appearing,
growing and disappearing with the metadata collector. The mock cluster (a protocol test double,
used because real brokers cannot be taken down and back within a fast test) proves that a down
leader only makes its own partitions stale, with their previous values, until it is back.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from jmxquery import JMXConnection, JMXQuery

from monitor.config import ClusterConfig, NameFilter
from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import librdkafka_logger
from monitor.ingest import broker_offsets
from monitor.ingest.broker_offsets import BrokerOffsetsCollector
from monitor.ingest.metadata import MetadataCollector
from monitor.model.observations import BrokerOffsets
from monitor.store.store import PartitionOffsets, Store
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.mockcluster import FAST_FAULT_CONFIG, MockCluster
from tests.harness.polling import wait_for

T = TypeVar("T")

OFFSETS_REQUESTS = "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Offsets"


# --------------------------------------------------------------------------- helpers


class RecordingStore(Store):
    """The real store, also keeping every BrokerOffsets it was given (to check what a round
    published, not only what the store made of it)."""

    def __init__(self) -> None:
        super().__init__()
        self.published: list[BrokerOffsets] = []

    def put_broker_offsets(self, offsets: BrokerOffsets) -> None:
        self.published.append(offsets)
        super().put_broker_offsets(offsets)


def only(*topics: str) -> NameFilter:
    return NameFilter(allow=[re.compile(f"^{re.escape(t)}$") for t in topics])


def kafka09(cluster: LocalKafka, topics: NameFilter | None = None) -> ClusterConfig:
    settings: dict[str, Any] = {
        "name": "real09",
        "bootstrap_servers": cluster.bootstrap_servers,
        "broker_version_fallback": "0.9.0.1",
        "request_timeout": 5.0,
    }
    if topics is not None:
        settings["topics"] = topics
    return ClusterConfig.model_validate(settings)


def produce(
    config: Mapping[str, object], topic: str, counts: Mapping[int, int], **extra: object
) -> None:
    """``counts[p]`` records to each partition ``p``, every delivery checked."""
    errors: list[Any] = []
    producer = Producer({**config, "logger": librdkafka_logger, **extra})
    for partition, n in counts.items():
        for i in range(n):
            producer.produce(
                topic,
                value=b"v%d" % i,
                partition=partition,
                on_delivery=lambda err, _msg: errors.append(err) if err else None,
            )
    assert producer.flush(15) == 0 and errors == []


def watermarks(
    config: Mapping[str, object], topic: str, partitions: int
) -> dict[int, tuple[int, int]]:
    """(low, high) per partition, the consumer API's independent answer."""
    consumer = Consumer({**config, "group.id": "watermarks", "logger": librdkafka_logger})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in range(partitions)
        }
    finally:
        consumer.close()


def values(store: Store, cluster: str, topic: str) -> dict[int, tuple[int, int]]:
    return {
        p: (o.log_start, o.log_end)
        for (t, p), o in store.broker_offsets(cluster).items()
        if t == topic
    }


def of_topic(store: Store, cluster: str, topic: str) -> dict[int, PartitionOffsets]:
    return {p: o for (t, p), o in store.broker_offsets(cluster).items() if t == topic}


def offsets_requests(cluster: LocalKafka) -> dict[int, int]:
    """Each broker's count of Offsets (ListOffsets) requests served, from its JMX meter."""
    counts = {}
    for broker in cluster.brokers:
        conn = JMXConnection(cluster.jmx_service_url(broker.id))
        metrics = conn.query([JMXQuery(OFFSETS_REQUESTS, attribute="Count")], timeout=20)
        found = [m.value for m in metrics if getattr(m, "attribute", None) == "Count"]
        counts[broker.id] = int(found[0]) if found else 0  # no meter until the first request
    return counts


def add_partitions(cluster: LocalKafka, topic: str, total: int) -> None:
    """Grow ``topic`` to ``total`` partitions and wait until the broker's metadata lists them
    with leaders."""
    cluster.add_partitions(topic, total)
    wait_for(
        lambda: cluster.partitions(topic),
        ok=lambda parts: len(parts) == total and all(p.leader >= 0 for p in parts),
        timeout=30,
        what=f"{topic} to have {total} partitions with leaders",
    )


# --------------------------------------------------------------------------- real Kafka 0.9


@pytest.mark.kafka
def test_offsets_equal_the_brokers_watermarks(
    kafka: LocalKafka, unique_name: Callable[[str], str]
) -> None:
    topic = unique_name("wm")
    kafka.create_topic(topic, partitions=4)
    counts = {0: 5, 1: 0, 2: 17, 3: 3}
    produce(kafka.client_config(), topic, counts)
    store = RecordingStore()
    config = kafka09(kafka, only(topic))
    collector = BrokerOffsetsCollector(config, 10.0, store)

    # No metadata collector has run: the first round fetches the partition list itself.
    assert store.metadata(config.name) is None
    assert collector.run_once(), collector.health.last_error
    assert values(store, config.name, topic) == {p: (0, n) for p, n in counts.items()}
    assert values(store, config.name, topic) == watermarks(kafka.client_config(), topic, 4)
    assert not any(o.stale for o in of_topic(store, config.name, topic).values())
    (round1,) = store.published
    assert round1.failed == {} and sorted(round1.partitions) == [0, 1, 2, 3]
    assert store.metadata(config.name) is None  # the metadata collector's to write, not ours

    more = {0: 1, 1: 9, 3: 2}
    produce(kafka.client_config(), topic, more)
    assert collector.run_once(), collector.health.last_error
    expected = {p: (0, n + more.get(p, 0)) for p, n in counts.items()}
    assert values(store, config.name, topic) == expected
    assert values(store, config.name, topic) == watermarks(kafka.client_config(), topic, 4)


@pytest.mark.kafka
def test_topic_filter_is_respected(kafka: LocalKafka, unique_name: Callable[[str], str]) -> None:
    base = unique_name("filter")
    keep, skip, other = f"{base}-keep", f"{base}-denied", unique_name("other")
    for topic in (keep, skip, other):
        kafka.create_topic(topic, partitions=2)
        produce(kafka.client_config(), topic, {0: 1, 1: 2})
    filtered = NameFilter(allow=[re.compile(f"^{re.escape(base)}-")], deny=[re.compile("-denied$")])
    store = Store()
    collector = BrokerOffsetsCollector(kafka09(kafka, filtered), 10.0, store)
    assert collector.run_once(), collector.health.last_error
    topics = {t for t, _ in store.broker_offsets("real09")}
    assert keep in topics and skip not in topics and other not in topics
    assert all(filtered.matches(t) for t in topics)

    # The default filter: every topic but the internal ones.
    store = Store()
    collector = BrokerOffsetsCollector(kafka09(kafka), 10.0, store)
    assert collector.run_once(), collector.health.last_error
    topics = {t for t, _ in store.broker_offsets("real09")}
    assert {keep, skip, other} <= topics
    assert "__consumer_offsets" not in topics


def test_one_request_per_leader_per_spec(
    own_kafka3: LocalKafka,
    unique_name: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """30 partitions over 3 leaders: each round costs each leader 2 Offsets requests (earliest,
    latest), not 2 per partition. With chunks of 4 partitions, 2 x ceil(10 / 4) = 6."""
    topic = unique_name("batch")
    own_kafka3.create_topic(topic, partitions=30)
    leaders: dict[int, int] = {}
    for p in own_kafka3.partitions(topic):
        leaders[p.leader] = leaders.get(p.leader, 0) + 1
    assert leaders == {0: 10, 1: 10, 2: 10}
    counts = {p: p % 7 for p in range(30)}
    produce(own_kafka3.client_config(), topic, counts)
    expected = {p: (0, n) for p, n in counts.items()}
    config = kafka09(own_kafka3, only(topic))

    def rounds(n: int) -> dict[int, int]:
        store = Store()
        collector = BrokerOffsetsCollector(config, 10.0, store)
        before = offsets_requests(own_kafka3)
        for _ in range(n):
            assert collector.run_once(), collector.health.last_error
        assert values(store, config.name, topic) == expected
        # The meter counts a request once its response is sent: poll briefly for the last one.
        deadline = time.monotonic() + 10
        while True:
            after = offsets_requests(own_kafka3)
            delta = {b: after[b] - before[b] for b in after}
            if min(delta.values()) >= 2 * n or time.monotonic() > deadline:
                return delta

    assert rounds(3) == {0: 6, 1: 6, 2: 6}  # per partition it would be 60 per broker
    monkeypatch.setattr(broker_offsets, "MAX_PARTITIONS_PER_CALL", 4)
    assert rounds(2) == {0: 12, 1: 12, 2: 12}


@pytest.mark.kafka
def test_topics_follow_the_metadata_collector(
    kafka: LocalKafka, unique_name: Callable[[str], str]
) -> None:
    """End to end with the metadata collector: a deleted topic leaves the store, new
    partitions (and a new topic) appear, on the rounds after the metadata refresh."""
    base = unique_name("follow")
    doomed, growing, newcomer = f"{base}-doomed", f"{base}-growing", f"{base}-newcomer"
    kafka.create_topic(doomed, partitions=2)
    kafka.create_topic(growing, partitions=1)
    produce(kafka.client_config(), doomed, {0: 3, 1: 4})
    produce(kafka.client_config(), growing, {0: 5})
    config = kafka09(kafka, NameFilter(allow=[re.compile(f"^{re.escape(base)}-")]))
    store = Store()
    metadata = MetadataCollector(config, 60.0, store)
    offsets = BrokerOffsetsCollector(config, 10.0, store)

    def both_rounds() -> dict[tuple[str, int], tuple[int, int, bool]]:
        assert metadata.run_once(), metadata.health.last_error
        offsets.run_once()
        stored = store.broker_offsets("real09")
        return {tp: (o.log_start, o.log_end, o.stale) for tp, o in stored.items()}

    first = both_rounds()
    assert first == {
        (doomed, 0): (0, 3, False),
        (doomed, 1): (0, 4, False),
        (growing, 0): (0, 5, False),
    }

    kafka.delete_topic(doomed)
    add_partitions(kafka, growing, 3)
    kafka.create_topic(newcomer, partitions=1)
    produce(kafka.client_config(), growing, {1: 2, 2: 6})
    produce(kafka.client_config(), newcomer, {0: 1})
    # The broker lists the new layout already (delete_topic, add_partitions and create_topic
    # wait for it), so the very next rounds must show it: no stale round for new partitions.
    assert both_rounds() == {
        (growing, 0): (0, 5, False),
        (growing, 1): (0, 2, False),
        (growing, 2): (0, 6, False),
        (newcomer, 0): (0, 1, False),
    }
    assert offsets.health.consecutive_errors == 0


# --------------------------------------------------------------------------- mock cluster


def make_topic(mc: MockCluster, topic: str, leaders: list[int]) -> None:
    """One partition per entry of ``leaders``, led by that broker."""
    mc.create_topic(topic, partitions=len(leaders), replication_factor=1)
    for partition, broker in enumerate(leaders):
        mc.partition_set_leader(topic, partition, broker)


def mock_config(mc: MockCluster, topic: str, properties: Mapping[str, Any]) -> ClusterConfig:
    return ClusterConfig.model_validate(
        {
            "name": "mock",
            "bootstrap_servers": mc.bootstrap_servers,
            "request_timeout": 2.0,
            "topics": only(topic),
            "client_properties": dict(properties),
        }
    )


#: Both client tunings: the mock harness's fast recovery settings, and librdkafka's defaults
#: (what the service runs with), under which a down leader's partitions come back as offset
#: -1001 *without* an error after request_timeout.
CLIENT_TUNINGS = pytest.mark.parametrize(
    "properties", [FAST_FAULT_CONFIG, {}], ids=["fast-fault-config", "librdkafka-defaults"]
)


@pytest.mark.mock
@CLIENT_TUNINGS
def test_down_leader_makes_only_its_partitions_stale(
    mock_cluster: MockCluster, properties: Mapping[str, Any]
) -> None:
    mc, topic = mock_cluster, "spread"
    make_topic(mc, topic, [1, 2, 3, 1, 2, 3])
    on_2 = {1, 4}  # partitions led by broker 2
    total = dict.fromkeys(range(6), 0)

    def add(counts: dict[int, int]) -> None:
        produce(mc.client_config(), topic, counts)
        for p, n in counts.items():
            total[p] += n

    store = RecordingStore()
    config = mock_config(mc, topic, properties)
    collector = BrokerOffsetsCollector(config, 10.0, store)
    add({p: p + 1 for p in range(6)})
    assert collector.run_once(), collector.health.last_error
    before = dict(total)
    assert values(store, "mock", topic) == {p: (0, n) for p, n in before.items()}

    add({p: 10 for p in range(6)})  # broker 2's partitions move on too, unseen
    mc.broker_down(2)
    published = len(store.published)
    wait_for(
        lambda: (collector.run_once(), store.published[-1].failed)[1],
        ok=lambda failed: set(failed) == {(topic, p) for p in on_2},
        timeout=15,
        what="broker 2's partitions reported failed",
    )
    assert collector.health.consecutive_errors == 0  # a partial failure is not a failed round
    for _ in range(2):  # and it stays so over rounds while broker 2 is down
        assert collector.run_once(), collector.health.last_error
        last = store.published[-1]
        assert set(last.failed) == {(topic, p) for p in on_2}
        assert sorted(last.partitions) == [0, 2, 3, 5] and min(last.log_end) > 0
        now = of_topic(store, "mock", topic)
        for p, o in now.items():
            if p in on_2:  # previous values, marked stale: never zero, never missing
                assert (o.log_start, o.log_end, o.stale) == (0, before[p], True)
                assert o.error
            else:  # collected fresh meanwhile
                assert (o.log_start, o.log_end, o.stale) == (0, total[p], False)
    assert len(store.published) > published

    mc.broker_up(2)
    add({p: 1 for p in range(6)})
    wait_for(
        lambda: (collector.run_once(), values(store, "mock", topic))[1],
        ok=lambda got: got == {p: (0, n) for p, n in total.items()},
        timeout=15,
        what="broker 2's partitions collected again after broker_up",
    )
    assert not any(o.stale or o.error for o in of_topic(store, "mock", topic).values())
    assert store.published[-1].failed == {}
    assert collector.health.errors == 0


@pytest.mark.mock
def test_every_partition_failing_fails_the_round_but_keeps_values(
    mock_cluster: MockCluster,
) -> None:
    mc, topic = mock_cluster, "one-leader"
    make_topic(mc, topic, [2, 2])
    produce(mc.client_config(), topic, {0: 4, 1: 6})
    store = RecordingStore()
    collector = BrokerOffsetsCollector(mock_config(mc, topic, FAST_FAULT_CONFIG), 10.0, store)
    assert collector.run_once(), collector.health.last_error

    mc.broker_down(2)
    assert not collector.run_once()
    assert collector.health.consecutive_errors == 1
    assert "every partition failed" in (collector.health.last_error or "")
    last = store.published[-1]  # published before raising
    assert last.partitions == [] and set(last.failed) == {(topic, 0), (topic, 1)}
    assert {p: (o.log_end, o.stale) for p, o in of_topic(store, "mock", topic).items()} == {
        0: (4, True),
        1: (6, True),
    }

    mc.broker_up(2)
    wait_for(collector.run_once, ok=bool, timeout=15, what="a good round after broker_up")
    assert collector.health.consecutive_errors == 0
    assert values(store, "mock", topic) == {0: (0, 4), 1: (0, 6)}
    assert not any(o.stale for o in of_topic(store, "mock", topic).values())


@pytest.mark.mock
def test_chunks_and_leader_moves_keep_values_right(
    mock_cluster: MockCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partitions split over several calls per leader land on the right partitions, and a
    moved leader costs at most a stale round, never a wrong value."""
    monkeypatch.setattr(broker_offsets, "MAX_PARTITIONS_PER_CALL", 2)
    mc, topic = mock_cluster, "chunked"
    make_topic(mc, topic, [1, 1, 1, 2, 2, 3, 3, 3, 3])
    counts = {p: 3 * p + 1 for p in range(9)}
    produce(mc.client_config(), topic, counts)
    store = Store()
    collector = BrokerOffsetsCollector(mock_config(mc, topic, FAST_FAULT_CONFIG), 10.0, store)
    assert collector.run_once(), collector.health.last_error
    expected = {p: (0, n) for p, n in counts.items()}
    assert values(store, "mock", topic) == expected

    mc.partition_set_leader(topic, 0, 3)
    mc.partition_set_leader(topic, 5, 1)
    wait_for(
        lambda: (collector.run_once(), of_topic(store, "mock", topic))[1],
        ok=lambda got: all(not o.stale for o in got.values()),
        timeout=10,
        what="fresh values from the new leaders",
    )
    assert values(store, "mock", topic) == expected


# --------------------------------------------------------------------------- log start, real Kafka


@pytest.fixture(scope="module")
def retention_kafka() -> Iterator[LocalKafka]:
    """A 1-broker 0.9 cluster that applies retention every 0.5 s (the shared ones check every
    5 min), so that log start offsets move within a test. Kafka 0.9 runs its first retention
    check 30 s after start-up (hard-coded), hence ``_start_retention_kafka_early``."""
    cluster = LocalKafka(1, broker_props={"log.retention.check.interval.ms": 500})
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop(graceful=False)


@pytest.fixture(autouse=True)
def _start_retention_kafka_early(request: pytest.FixtureRequest) -> None:
    """Start ``retention_kafka`` with the first real-Kafka test of this module, so that its
    30 s wait for the first retention check overlaps with the other tests (the retention test
    comes last) instead of adding to the run."""
    if request.node.get_closest_marker("kafka") is not None:
        request.getfixturevalue("retention_kafka")


@pytest.mark.own_cluster
@pytest.mark.kafka
def test_log_start_follows_retention(retention_kafka: LocalKafka) -> None:
    topic = make_unique_name("retention")
    # ~1 KiB segments and ~2 KiB kept: retention deletes the oldest segments of each partition.
    retention_kafka.create_topic(
        topic, partitions=2, config={"segment.bytes": 1024, "retention.bytes": 2048}
    )
    # One record per batch: a batch must fit in a segment.
    produce(retention_kafka.client_config(), topic, {0: 300, 1: 10}, **{"batch.num.messages": 1})
    marks = wait_for(
        lambda: watermarks(retention_kafka.client_config(), topic, 2),
        ok=lambda wm: wm[0][0] > 0,
        timeout=45,  # first retention check: 30 s after the broker started
        what="retention to delete the oldest segments of partition 0",
    )
    assert marks[1] == (0, 10) and 0 < marks[0][0] < marks[0][1] == 300
    store = Store()
    collector = BrokerOffsetsCollector(kafka09(retention_kafka, only(topic)), 10.0, store)
    assert collector.run_once(), collector.health.last_error
    got = values(store, "real09", topic)
    # Retention may have moved on between the two reads; never backwards, never past the end.
    assert got[1] == (0, 10) and got[0][1] == 300
    assert marks[0][0] <= got[0][0] == watermarks(retention_kafka.client_config(), topic, 2)[0][0]
