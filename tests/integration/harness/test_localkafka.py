"""The real-Kafka harness itself, proven against real Kafka 0.9.0.1 brokers.

Every test asserts something that fails if the harness breaks: the clusters start and speak the
protocol, offsets round-trip, ``__consumer_offsets`` and JMX are readable, broker faults produce
real under-replication, and each workload scenario behaves as its name says.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from jmxquery import JMXConnection, JMXQuery

from monitor.dev.localkafka import (
    HealthyConsumer,
    LaggingConsumer,
    LocalKafka,
    LocalKafkaError,
    ProducerLoad,
    StalledConsumer,
    StoppedConsumer,
    committed_offsets,
    dist,
    end_offsets,
)
from monitor.dev.localkafka.workload import librdkafka_logger
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.polling import port_refuses
from tests.harness.polling import wait_for_kafka as wait_for

# Kafka clients and sockets raise while a broker is still coming up: that counts as "not yet".

T = TypeVar("T")

URP = "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions"
ACTIVE_CONTROLLER = "kafka.controller:type=KafkaController,name=ActiveControllerCount"


# --------------------------------------------------------------------------- helpers


def client(cluster: LocalKafka, **extra: object) -> dict[str, Any]:
    return {**cluster.client_config(**extra), "logger": librdkafka_logger}


def jmx_value(cluster: LocalKafka, broker_id: int, mbean: str) -> float:
    """One gauge's ``Value`` via jmxquery (one short-lived JVM per call)."""
    conn = JMXConnection(cluster.jmx_service_url(broker_id))
    metrics = conn.query([JMXQuery(mbean, attribute="Value")], timeout=20)
    values = [m.value for m in metrics if getattr(m, "attribute", None) == "Value"]
    assert len(values) == 1, f"{mbean} on broker {broker_id}: {[m.to_string() for m in metrics]}"
    return float(values[0])


def urp_is_zero(cluster: LocalKafka, broker_id: int) -> bool:
    return jmx_value(cluster, broker_id, URP) == 0


def produce(cluster: LocalKafka, topic: str, count: int, partitions: int) -> None:
    producer = Producer(client(cluster))
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(15) == 0


def group_description(cluster: LocalKafka, group: str) -> Any:
    admin = AdminClient(client(cluster))
    return admin.describe_consumer_groups([group])[group].result(timeout=15)


@dataclass(frozen=True)
class OffsetCommit:
    key_version: int
    group: str
    topic: str
    partition: int
    offset: int
    commit_timestamp: int


def _str(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    return buf[pos : pos + n].decode(), pos + n


def parse_offset_commit(key: bytes | None, value: bytes | None) -> OffsetCommit | None:
    """Decode an offset-commit record of ``__consumer_offsets`` (key version 0 or 1); None for
    group-metadata records (key version 2) and tombstones."""
    if not key or not value:
        return None
    (key_version,) = struct.unpack_from(">h", key, 0)
    if key_version not in (0, 1):
        return None
    group, pos = _str(key, 2)
    topic, pos = _str(key, pos)
    (partition,) = struct.unpack_from(">i", key, pos)
    (value_version,) = struct.unpack_from(">h", value, 0)
    assert value_version in (0, 1), value_version
    (offset,) = struct.unpack_from(">q", value, 2)
    _metadata, pos = _str(value, 10)
    (commit_ts,) = struct.unpack_from(">q", value, pos)
    return OffsetCommit(key_version, group, topic, partition, offset, commit_ts)


def read_offset_commits(cluster: LocalKafka, group: str) -> list[OffsetCommit]:
    """Every offset commit of ``group`` in ``__consumer_offsets``, read from the beginning up to
    the current end with a plain (assign, never-committing) consumer."""
    consumer = Consumer(
        client(
            cluster, **{"group.id": make_unique_name("offsets-reader"), "enable.auto.commit": False}
        )
    )
    try:
        md = consumer.list_topics("__consumer_offsets", timeout=10)
        parts = sorted(md.topics["__consumer_offsets"].partitions)
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition("__consumer_offsets", p), timeout=10)[
                1
            ]
            for p in parts
        }
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign(
            [TopicPartition("__consumer_offsets", p, OFFSET_BEGINNING) for p in pending]
        )
        commits = []
        deadline = time.monotonic() + 20
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                partition, offset = msg.partition(), msg.offset()
                if msg.error() or partition is None or offset is None:
                    continue
                if offset + 1 >= ends[partition]:
                    pending.discard(partition)
                rec = parse_offset_commit(msg.key(), msg.value())
                if rec is not None and rec.group == group:
                    commits.append(rec)
        assert not pending, f"__consumer_offsets partitions {pending} not read to the end"
        return commits
    finally:
        consumer.close()


# --------------------------------------------------------------------------- distribution


@pytest.mark.kafka
def test_dist_classpath_has_broker_and_no_docs_or_signatures() -> None:
    home = dist.ensure_kafka_dist()
    assert dist.ensure_kafka_dist() == home  # idempotent
    names = [p.name for p in dist.classpath_jars(home)]
    assert "kafka_2.11-0.9.0.1.jar" in names and "zookeeper-3.4.6.jar" in names
    bad = [n for n in names if any(m in n for m in ("javadoc", "scaladoc", "sources", "test"))]
    assert not bad and all(n.endswith(".jar") for n in names)


# --------------------------------------------------------------------------- 1 broker


@pytest.mark.kafka
def test_cluster_layout(kafka: LocalKafka) -> None:
    (broker,) = kafka.brokers
    assert broker.running and broker.pid is not None
    assert kafka.bootstrap_servers == f"127.0.0.1:{broker.port}"
    md = AdminClient(client(kafka)).list_topics(timeout=10)
    assert sorted(md.brokers) == [0]
    offsets_topic = md.topics["__consumer_offsets"]
    assert len(offsets_topic.partitions) == 4
    assert all(p.leader == 0 for p in offsets_topic.partitions.values())


def test_a_shared_cluster_cannot_be_stopped_from_a_test(kafka3: LocalKafka) -> None:
    """The shared clusters are views of clusters the run owns: stopping, killing or restarting
    a broker is refused (other tests use them at the same moment), and forgetting the view
    leaves the cluster running."""
    for act in (lambda: kafka3.kill_broker(1), lambda: kafka3.stop_broker(1),
                lambda: kafka3.start_broker(1), kafka3.start):
        with pytest.raises(LocalKafkaError):
            act()
    assert all(b.running for b in kafka3.brokers)
    view = LocalKafka.attach(kafka3.describe())
    assert [b.pid for b in view.brokers] == [b.pid for b in kafka3.brokers]
    view.stop()
    assert all(b.running for b in kafka3.brokers)
    assert not port_refuses(kafka3.bootstrap_servers.split(",")[0])


@pytest.mark.kafka
def test_produce_consume_commit_round_trip(
    kafka: LocalKafka, unique_name: Callable[[str], str]
) -> None:
    topic, group = unique_name("topic"), unique_name("group")
    kafka.create_topic(topic, partitions=3)
    produce(kafka, topic, 30, partitions=3)

    consumer = Consumer(
        client(
            kafka,
            **{
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
            },
        )
    )
    seen: set[tuple[int, int]] = set()
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(seen) < 30:
            assert time.monotonic() < deadline, f"consumed only {sorted(seen)}"
            for msg in consumer.consume(100, timeout=0.5):
                partition, offset = msg.partition(), msg.offset()
                assert msg.error() is None and partition is not None and offset is not None
                seen.add((partition, offset))
        result = consumer.commit(asynchronous=False)
        assert result is not None and all(tp.error is None for tp in result)
    finally:
        consumer.close()

    consumed = {p: 1 + max(o for q, o in seen if q == p) for p, _ in seen}
    assert consumed == {0: 10, 1: 10, 2: 10}
    admin = AdminClient(client(kafka))
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(3)])
    got = admin.list_consumer_group_offsets([request])[group].result(timeout=15)
    assert {tp.partition: tp.offset for tp in got.topic_partitions} == consumed
    assert end_offsets(kafka.client_config(), topic) == consumed


@pytest.mark.kafka
def test_create_and_delete_topic(kafka: LocalKafka, unique_name: Callable[[str], str]) -> None:
    topic = unique_name("topic")
    kafka.create_topic(topic, partitions=5)
    admin = AdminClient(client(kafka))
    assert len(admin.list_topics(timeout=10).topics[topic].partitions) == 5
    kafka.delete_topic(topic)
    assert topic not in admin.list_topics(timeout=10).topics  # all-topics: no auto-create


@pytest.mark.kafka
def test_consumer_offsets_topic_holds_offset_commit_records(
    kafka: LocalKafka, unique_name: Callable[[str], str]
) -> None:
    topic, group = unique_name("topic"), unique_name("group")
    kafka.create_topic(topic, partitions=2)
    consumer = Consumer(client(kafka, **{"group.id": group, "enable.auto.commit": False}))
    try:
        # A commit needs no membership: commit explicit offsets as a standalone consumer.
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 3)], asynchronous=False
        )
    finally:
        consumer.close()

    commits = read_offset_commits(kafka, group)
    by_partition = {(c.topic, c.partition): c for c in commits}
    assert by_partition.keys() == {(topic, 0), (topic, 1)}
    assert by_partition[(topic, 0)].offset == 7 and by_partition[(topic, 1)].offset == 3
    assert {c.key_version for c in commits} <= {0, 1}
    now_ms = time.time() * 1000
    assert all(abs(c.commit_timestamp - now_ms) < 120_000 for c in commits)


# --------------------------------------------------------------------------- 3 brokers


@pytest.mark.kafka3
def test_jmx_reachable_on_every_broker(kafka3: LocalKafka) -> None:
    assert [b.id for b in kafka3.brokers] == [0, 1, 2]
    assert len({b.jmx_port for b in kafka3.brokers} | {b.port for b in kafka3.brokers}) == 6
    controllers = [jmx_value(kafka3, b.id, ACTIVE_CONTROLLER) for b in kafka3.brokers]
    assert sum(controllers) == 1, controllers
    for b in kafka3.brokers:
        wait_for(partial(urp_is_zero, kafka3, b.id), 30, f"URP=0 on broker {b.id}")


def test_killed_broker_causes_under_replication_then_recovers(
    own_kafka3: LocalKafka, unique_name: Callable[[str], str]
) -> None:
    """Kafka 0.9 specifics this pins down (the collectors must cope with them):

    * while a replica's broker is down, Metadata v0 lists only *live* replicas and flags the
      partition REPLICA_NOT_AVAILABLE, so "ISR < replicas" is not visible then: ISR < the
      assigned replication factor is;
    * after the broker returns, metadata lists it as a replica at once but the ISR change
      reaches the metadata caches only after the leader's 5 s ISR-propagation blackout
      (hard-coded in 0.9): a real "ISR smaller than replicas" window.
    """
    topic = unique_name("topic")
    own_kafka3.create_topic(topic, partitions=3, replication_factor=3)
    produce(own_kafka3, topic, 30, partitions=3)
    admin = AdminClient(client(own_kafka3))

    def partitions() -> list[Any]:
        parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
        return [parts[p] for p in sorted(parts)]

    assert all(sorted(p.isrs) == sorted(p.replicas) == [0, 1, 2] for p in partitions())

    victim = partitions()[0].leader
    survivors = [b.id for b in own_kafka3.brokers if b.id != victim]
    started = time.monotonic()
    own_kafka3.kill_broker(victim)
    try:
        assert not own_kafka3.broker(victim).running

        def under_replicated() -> bool:
            return all(
                p.leader in survivors
                and len(p.isrs) < 3
                and victim not in p.isrs
                and p.error is not None
                and p.error.code() == KafkaError.REPLICA_NOT_AVAILABLE
                for p in partitions()
            )

        wait_for(under_replicated, 30, "leaders to move and ISR to shrink in client metadata")
        shrink_s = time.monotonic() - started
        # Each of the 3 partitions of the topic lost a replica: its (new) leader, a survivor,
        # counts it (brokers apply the controller's requests independently: poll).
        urp = wait_for(
            lambda: (n := sum(jmx_value(own_kafka3, b, URP) for b in survivors)) >= 3 and n,
            30,
            "UnderReplicatedPartitions >= 3 summed over the surviving brokers",
        )
        print(f"ISR shrank {shrink_s:.1f}s after SIGKILL; URP on survivors = {urp}")
    finally:
        own_kafka3.start_broker(victim)

    assert own_kafka3.broker(victim).running
    saw_isr_below_replicas = False

    def isr_full() -> bool:
        nonlocal saw_isr_below_replicas
        parts = partitions()
        if any(len(p.isrs) < len(p.replicas) == 3 for p in parts):
            saw_isr_below_replicas = True
        return all(sorted(p.isrs) == sorted(p.replicas) == [0, 1, 2] for p in parts)

    wait_for(isr_full, 60, "ISR to be full again", interval=0.1)
    assert saw_isr_below_replicas, "restarted replica never seen outside the ISR"
    for b in own_kafka3.brokers:
        wait_for(partial(urp_is_zero, own_kafka3, b.id), 60, f"URP=0 on broker {b.id}")
    own_kafka3.wait_fully_replicated()  # __consumer_offsets too


def test_graceful_broker_stop_moves_leaders_then_restart(
    own_kafka3: LocalKafka, unique_name: Callable[[str], str]
) -> None:
    topic = unique_name("topic")
    own_kafka3.create_topic(topic, partitions=3, replication_factor=3)
    admin = AdminClient(client(own_kafka3))
    victim = admin.list_topics(topic, timeout=10).topics[topic].partitions[1].leader
    old_pid = own_kafka3.broker(victim).pid
    own_kafka3.stop_broker(victim)
    try:
        assert not own_kafka3.broker(victim).running
        parts = admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
        assert all(p.leader >= 0 and p.leader != victim for p in parts)
        # SIGTERM, not SIGKILL: the broker handed its leaderships over before exiting.
        assert "Controlled shutdown succeeded" in own_kafka3.log_path(victim).read_text()
    finally:
        own_kafka3.start_broker(victim)
    restarted = own_kafka3.broker(victim)
    assert restarted.running and restarted.pid != old_pid
    md = admin.list_topics(timeout=10)
    assert sorted(md.brokers) == [0, 1, 2]
    assert md.brokers[victim].port == restarted.port  # same id, same port
    own_kafka3.wait_fully_replicated()


# --------------------------------------------------------------------------- workloads

RATE = 200.0  # produced records/s
LAGGING_RATE = 50.0  # consumed records/s
PARTITIONS = 4


@dataclass
class Workload:
    cluster: LocalKafka
    topic: str
    producer: ProducerLoad
    healthy: HealthyConsumer
    lagging: LaggingConsumer
    stalled: StalledConsumer
    stopped: StoppedConsumer

    def committed(self, group: str) -> dict[int, int]:
        return committed_offsets(
            self.cluster.client_config(), group, self.topic, list(range(PARTITIONS))
        )

    def end(self) -> dict[int, int]:
        return end_offsets(self.cluster.client_config(), self.topic)


@pytest.fixture(scope="module")
def workload(kafka: LocalKafka) -> Iterator[Workload]:
    """One topic, one producer at RATE records/s and the four scenarios, all running at once
    (each test checks one of them, so their observation windows overlap)."""
    topic = make_unique_name("workload")
    kafka.create_topic(topic, partitions=PARTITIONS)
    config = kafka.client_config()
    w = Workload(
        kafka,
        topic,
        ProducerLoad(config, topic, RATE),
        HealthyConsumer(config, topic, make_unique_name("healthy")),
        LaggingConsumer(config, topic, make_unique_name("lagging"), max_rate=LAGGING_RATE),
        StalledConsumer(config, topic, make_unique_name("stalled"), stall_after_records=100),
        StoppedConsumer(config, topic, make_unique_name("stopped"), stop_after_s=3.0),
    )
    workers = [w.producer, w.healthy, w.lagging, w.stalled, w.stopped]
    for worker in workers:
        worker.start()
    try:
        assert w.producer.ready.wait(20), "producer found no partitions"
        yield w
    finally:
        errors = []
        for worker in workers:
            try:
                worker.stop()
            except Exception as exc:  # report all, stop all
                errors.append(exc)
        assert not errors, errors
    assert w.producer.failed == 0


def _lag(end: dict[int, int], committed: dict[int, int]) -> int:
    return sum(end[p] - max(committed[p], 0) for p in end)


@pytest.mark.kafka
def test_healthy_consumer_keeps_up(workload: Workload) -> None:
    w = workload
    assert w.healthy.joined.wait(20)
    assert len(w.healthy.assigned) == PARTITIONS
    wait_for(lambda: len(w.healthy.commits) >= 3, 15, "3 commits")

    def end_if_all_partitions_have_data() -> dict[int, int] | None:
        end = w.end()
        return end if all(end.values()) else None

    end = wait_for(end_if_all_partitions_have_data, 20, "data in every partition")
    # Everything produced up to now gets committed within a few commit intervals.
    wait_for(
        lambda: all(c >= end[p] for p, c in w.committed(w.healthy.group_id).items()),
        15,
        f"healthy group to commit past {end}",
    )
    # ... and it still is caught up (lag within ~2 commit intervals of production).
    lag = _lag(w.end(), w.committed(w.healthy.group_id))
    assert lag <= 2 * RATE * w.healthy.commit_interval + 50, lag
    gaps = [b.at - a.at for a, b in zip(w.healthy.commits, w.healthy.commits[1:], strict=False)]
    assert gaps and 0.5 <= sorted(gaps)[len(gaps) // 2] <= 2.0, gaps  # ~1 commit/s


@pytest.mark.kafka
def test_lagging_consumer_lag_grows_while_it_commits(workload: Workload) -> None:
    w = workload
    assert w.lagging.joined.wait(20)
    wait_for(lambda: len(w.lagging.commits) >= 2, 15, "lagging consumer to commit")
    committed1, end1 = w.committed(w.lagging.group_id), w.end()
    lag1, t1 = _lag(end1, committed1), time.monotonic()
    n_commits = len(w.lagging.commits)
    wait_for(
        lambda: time.monotonic() - t1 >= 3 and len(w.lagging.commits) >= n_commits + 2,
        15,
        "3 s and 2 more commits",
    )
    committed2, end2 = w.committed(w.lagging.group_id), w.end()
    lag2, t2 = _lag(end2, committed2), time.monotonic()
    expected_growth = (RATE - LAGGING_RATE) * (t2 - t1)
    assert lag2 - lag1 >= 0.5 * expected_growth, (lag1, lag2, expected_growth)
    assert sum(committed2.values()) > sum(committed1.values())  # still making progress
    rate = (sum(committed2.values()) - sum(committed1.values())) / (t2 - t1)
    assert rate <= 1.5 * LAGGING_RATE, rate


@pytest.mark.kafka
def test_stalled_consumer_commits_the_same_offsets(workload: Workload) -> None:
    w = workload
    s = w.stalled
    assert s.frozen.wait(20), "stalled consumer never froze"
    frozen = {p: o for (_, p), o in s.frozen_offsets.items()}
    assert sorted(frozen) == list(range(PARTITIONS)) and sum(frozen.values()) >= 100
    n_commits = len(s.commits)
    committed1, end1 = w.committed(s.group_id), w.end()
    wait_for(lambda: len(s.commits) >= n_commits + 3, 15, "3 more commits while stalled")
    committed2, end2 = w.committed(s.group_id), w.end()

    assert committed1 == committed2 == frozen
    assert _lag(end2, committed2) > _lag(end1, committed1) > 0
    frozen_commits = s.commits[n_commits - 1 :]
    assert all({p: o for (_, p), o in c.offsets.items()} == frozen for c in frozen_commits), (
        frozen_commits
    )
    # The broker really received them: several identical commits in __consumer_offsets.
    on_p0 = [c for c in read_offset_commits(w.cluster, s.group_id) if c.partition == 0]
    same = [c for c in on_p0 if c.offset == frozen[0]]
    assert len(same) >= 3 and len({c.commit_timestamp for c in same}) >= 3, same
    assert max(c.offset for c in on_p0) == frozen[0]
    # It is still a live member of the group.
    desc = group_description(w.cluster, s.group_id)
    assert desc.state == ConsumerGroupState.STABLE and len(desc.members) == 1


@pytest.mark.kafka
def test_stopped_consumer_leaves_offsets_but_no_members(workload: Workload) -> None:
    w = workload
    s = w.stopped
    assert s.closed.wait(20), "stopped consumer did not close"
    s.join(5)
    assert not s.is_alive()
    final = {p: o for (_, p), o in s.commits[-1].offsets.items()}  # its last commit
    committed = w.committed(s.group_id)
    assert committed == final and all(o > 0 for o in committed.values()), (committed, final)
    desc = group_description(w.cluster, s.group_id)
    assert desc.members == []
    assert desc.state in (ConsumerGroupState.DEAD, ConsumerGroupState.EMPTY)
    time.sleep(1.5)  # offsets stay put while the log keeps growing
    assert w.committed(s.group_id) == committed
    assert _lag(w.end(), committed) > 0
