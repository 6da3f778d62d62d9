"""GroupOffsetsCollector: committed offsets and membership through the Admin API.

Real Kafka 0.9.0.1 (``kafka``) for what a broker must show: real consumers' commits, members
and owners, stopped groups that Kafka no longer lists, the group filter, many groups per round.
librdkafka's mock cluster (``mock_cluster``, a protocol stand-in) for faults: a group
coordinator down or moving, and the worker process dying mid-round. The mock cannot list or
describe groups, so its tests name their groups with ``extra_groups``. Waits are deadline
polls, never fixed sleeps.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from monitor.config import ClusterConfig, NameFilter
from monitor.dev.localkafka import (
    HealthyConsumer,
    LocalKafka,
    ProducerLoad,
    StalledConsumer,
    StoppedConsumer,
    committed_offsets,
    end_offsets,
)
from monitor.dev.localkafka.workload import librdkafka_logger
from monitor.ingest.group_offsets import GroupOffsetsCollector
from monitor.ingest.metadata import MetadataCollector
from monitor.model.observations import CommitBatch
from monitor.store.store import Store
from tests.harness.mockcluster import MockCluster
from tests.harness.polling import port_refuses, process_gone, wait_for
from tests.harness.tools import ROOT

T = TypeVar("T")
TP = tuple[str, int]


# ------------------------------------------------------------------------------ helpers


def offsets_in_store(store: Store, cluster: str, group: str) -> dict[TP, int] | None:
    snapshot = store.group(cluster, group)
    return None if snapshot is None else {tp: c.offset for tp, c in snapshot.commits.items()}


def listed_groups(admin: AdminClient) -> set[str]:
    """What ListGroups answers, from every broker (the caller keeps ``admin`` alive: a client
    destroyed mid-request answers _DESTROY)."""
    result = admin.list_consumer_groups(request_timeout=10).result()
    assert not result.errors, result.errors
    return {g.group_id for g in result.valid}


@pytest.fixture
def collectors() -> Iterator[list[GroupOffsetsCollector]]:
    """Collectors made by a test, closed (their worker processes killed) afterwards."""
    made: list[GroupOffsetsCollector] = []
    yield made
    for collector in made:
        collector.close()


# ------------------------------------------------------------------------- Kafka 0.9


def kafka_cluster(kafka: LocalKafka, prefix: str, **kwargs: Any) -> ClusterConfig:
    """This cluster as the service would be configured for it, seeing only ``prefix`` groups
    (the cluster is shared with other tests)."""
    groups = kwargs.pop("groups", NameFilter(allow=[re.compile("^" + re.escape(prefix))]))
    return ClusterConfig(
        name="kafka09",
        bootstrap_servers=kafka.bootstrap_servers.split(","),
        broker_version_fallback="0.9.0.1",
        request_timeout=5,
        groups=groups,
        **kwargs,
    )


def make_collector(
    made: list[GroupOffsetsCollector],
    cluster: ClusterConfig,
    store: Store,
    *,
    concurrency: int = 8,
    interval: float = 5.0,
    **kwargs: Any,
) -> GroupOffsetsCollector:
    assert MetadataCollector(cluster, 60, store).run_once(), "metadata round failed"
    collector = GroupOffsetsCollector(cluster, interval, concurrency, store, **kwargs)
    made.append(collector)
    return collector


def client(kafka: LocalKafka, **extra: object) -> dict[str, Any]:
    return {**kafka.client_config(**extra), "logger": librdkafka_logger}


def join_and_commit(conf: dict[str, Any], group: str, topic: str, offsets: dict[int, int]) -> Any:
    """A subscribed consumer that has joined ``group`` and committed ``offsets``; the caller
    closes it."""
    consumer = Consumer(
        {**conf, "group.id": group, "enable.auto.commit": False, "session.timeout.ms": 6000}
    )
    consumer.subscribe([topic])
    wait_for(lambda: consumer.poll(0.05) is None and consumer.assignment(), 30, f"{group} joins")
    consumer.commit(
        offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
    )
    return consumer


@pytest.mark.kafka
def test_real_consumers_commits_members_and_owners(
    kafka: LocalKafka, unique_name: Callable[[str], str], collectors: list[GroupOffsetsCollector]
) -> None:
    """Commits of running consumers reach the store exactly; describe gives every member's
    client id, host and partitions."""
    prefix = unique_name("g")
    topic = unique_name("topic")
    kafka.create_topic(topic, partitions=3)
    conf = client(kafka)
    healthy_group, stalled_group = f"{prefix}-healthy", f"{prefix}-stalled"
    with ProducerLoad(conf, topic, rate=500) as producer:
        wait_for(lambda: producer.delivered_total >= 300, 30, "records produced")
    members = [
        HealthyConsumer(conf, topic, healthy_group, consumer_config={"client.id": name})
        for name in ("member-a", "member-b")
    ]
    stalled = StalledConsumer(conf, topic, stalled_group, stall_after_records=50)
    for consumer in (*members, stalled):
        consumer.start()
    try:
        ends = end_offsets(conf, topic)
        wait_for(
            lambda: all(m.assigned for m in members)
            and members[0].assigned.isdisjoint(members[1].assigned)
            and committed_offsets(conf, healthy_group, topic, [0, 1, 2]) == ends,
            45,
            "both members own partitions and committed the log end",
        )
        stalled.frozen.wait(30)
        assert stalled.frozen.is_set()

        store = Store()
        collector = make_collector(collectors, kafka_cluster(kafka, prefix), store)
        # 0.9 answers an all-partitions OffsetFetch from a non-coordinator with nothing.
        assert collector.explicit_partitions
        assert collector.run_once(), collector.health.last_error
        stats = collector.last_round
        assert stats is not None and stats.listed == 2 and stats.fetched == 2

        assert offsets_in_store(store, "kafka09", healthy_group) == {
            (topic, p): o for p, o in ends.items()
        }
        assert offsets_in_store(store, "kafka09", stalled_group) == stalled.frozen_offsets
        snapshot = store.group("kafka09", healthy_group)
        assert snapshot is not None and not snapshot.stale
        assert {c.source for c in snapshot.commits.values()} == {"admin"}

        membership = snapshot.membership
        assert membership is not None
        assert (membership.state, membership.protocol_type, membership.protocol) == (
            "Stable", "consumer", "range"
        )
        assert membership.generation is None
        assert sorted(m.client_id for m in membership.members) == ["member-a", "member-b"]
        assert all(m.host.endswith("127.0.0.1") and m.member_id for m in membership.members)
        owners = membership.owners()
        assert set(owners) == {(topic, p) for p in range(3)}
        for consumer, name in zip(members, ("member-a", "member-b"), strict=True):
            assert {tp for tp, m in owners.items() if m.client_id == name} == consumer.assigned
    finally:
        for consumer in (*members, stalled):
            consumer.stop()


@pytest.mark.kafka
def test_stopped_group_keeps_being_reported_and_a_gone_group_is_dropped(
    kafka: LocalKafka, unique_name: Callable[[str], str], collectors: list[GroupOffsetsCollector]
) -> None:
    """A group whose last member left (Dead, not listed on 0.9) is still read from the offsets
    it left; a known group with no offsets in Kafka and not listed is removed."""
    prefix = unique_name("g")
    topic = unique_name("topic")
    kafka.create_topic(topic, partitions=2)
    conf = client(kafka)
    with ProducerLoad(conf, topic, rate=500) as producer:
        wait_for(lambda: producer.delivered_total >= 100, 30, "records produced")
    group, gone = f"{prefix}-stopped", f"{prefix}-expired"
    store = Store()
    # What the store would hold for a group whose offsets have since expired in Kafka.
    store.put_commits(
        CommitBatch("kafka09", "admin", time.time() - 60, [gone], [topic], [0], [7], [None], [1])
    )
    collector = make_collector(collectors, kafka_cluster(kafka, prefix), store)

    with StoppedConsumer(conf, topic, group, stop_after_s=2) as stopped:
        stopped.joined.wait(30)
        assert collector.run_once(), collector.health.last_error
        snapshot = store.group("kafka09", group)
        assert snapshot is not None and snapshot.membership is not None
        assert snapshot.membership.state == "Stable"
        assert stopped.closed.wait(30)
    last_commit = stopped.commits[-1].offsets
    admin = AdminClient(conf)
    wait_for(
        lambda: group not in listed_groups(admin),
        30,
        "Kafka stops listing the stopped group",
    )

    read_at: list[float] = []
    orders: list[set[int]] = []
    for _ in range(2):  # and keeps reporting it, round after round
        assert collector.run_once(), collector.health.last_error
        stats = collector.last_round
        assert stats is not None and stats.listing_complete and stats.listed == 0
        snapshot = store.group("kafka09", group)
        assert snapshot is not None and not snapshot.stale
        assert {tp: c.offset for tp, c in snapshot.commits.items()} == last_commit
        orders.append({c.order for c in snapshot.commits.values()})
        read_at.append(store.group_states("kafka09")[group].offsets_at)
        assert snapshot.membership is None  # Dead: like a group-metadata tombstone
    assert read_at[1] > read_at[0]  # read afresh every round...
    assert orders[1] == orders[0]  # ...but an offset read again unchanged is not a new commit
    assert store.group("kafka09", gone) is None
    assert stats is not None and stats.deleted_groups == 0  # gone in the first round already
    assert group in store.groups("kafka09")


@pytest.mark.kafka
def test_denied_group_is_absent(
    kafka: LocalKafka, unique_name: Callable[[str], str], collectors: list[GroupOffsetsCollector]
) -> None:
    prefix = unique_name("g")
    topic = unique_name("topic")
    kafka.create_topic(topic, partitions=1)
    conf = client(kafka)
    allowed, denied = f"{prefix}-kept", f"{prefix}-denied"
    consumers = [join_and_commit(conf, g, topic, {0: 0}) for g in (allowed, denied)]
    try:
        admin = AdminClient(conf)
        assert {allowed, denied} <= listed_groups(admin)  # the filter must do the work
        cluster = kafka_cluster(
            kafka,
            prefix,
            groups=NameFilter(
                allow=[re.compile("^" + re.escape(prefix))], deny=[re.compile("-denied$")]
            ),
        )
        store = Store()
        collector = make_collector(collectors, cluster, store)
        assert collector.run_once(), collector.health.last_error
        assert store.groups("kafka09") == [allowed]
        assert offsets_in_store(store, "kafka09", allowed) == {(topic, 0): 0}
    finally:
        for consumer in consumers:
            consumer.close()


@pytest.mark.kafka
def test_many_groups_in_one_round(
    kafka: LocalKafka, unique_name: Callable[[str], str], collectors: list[GroupOffsetsCollector]
) -> None:
    prefix = unique_name("g")
    topic = unique_name("topic")
    kafka.create_topic(topic, partitions=2)
    conf = client(kafka)
    expected = {f"{prefix}-{i:02d}": {0: 10 * i, 1: 10 * i + 1} for i in range(30)}
    consumers = [join_and_commit(conf, g, topic, offsets) for g, offsets in expected.items()]
    try:
        store = Store()
        collector = make_collector(collectors, kafka_cluster(kafka, prefix), store, concurrency=4)
        assert collector.run_once(), collector.health.last_error
        stats = collector.last_round
        assert stats is not None
        assert (stats.listed, stats.groups, stats.fetched, stats.commits) == (30, 30, 30, 60)
        assert stats.failures == {}
        for group, offsets in expected.items():
            assert offsets_in_store(store, "kafka09", group) == {
                (topic, p): o for p, o in offsets.items()
            }
            snapshot = store.group("kafka09", group)
            assert snapshot is not None and snapshot.membership is not None
            assert len(snapshot.membership.members) == 1
    finally:
        for consumer in consumers:
            consumer.close()


# ------------------------------------------------------------------------- mock cluster


def mock_setup(
    mc: MockCluster, coordinators: dict[str, int], commits: dict[str, dict[int, int]]
) -> None:
    """Topic ``orders`` (2 partitions, led by brokers 2 and 3), each group's coordinator, and
    its commits."""
    mc.create_topic("orders", partitions=2, replication_factor=1)
    mc.partition_set_leader("orders", 0, 2)
    mc.partition_set_leader("orders", 1, 3)
    for group, broker in coordinators.items():
        mc.coordinator_set(group, broker)
    for group, offsets in commits.items():
        mock_commit(mc, group, offsets)


def mock_commit(mc: MockCluster, group: str, offsets: dict[int, int]) -> None:
    consumer = Consumer(mc.client_config({"group.id": group, "enable.auto.commit": False}))
    consumer.commit(
        offsets=[TopicPartition("orders", p, o) for p, o in offsets.items()], asynchronous=False
    )
    consumer.close()


def mock_collector(
    made: list[GroupOffsetsCollector], mc: MockCluster, store: Store, groups: list[str]
) -> GroupOffsetsCollector:
    # librdkafka's production defaults (no fast-fault settings): what the service runs with.
    cluster = ClusterConfig(
        name="mock", bootstrap_servers=mc.bootstrap_servers.split(","), request_timeout=2
    )
    return make_collector(made, cluster, store, interval=4.0, extra_groups=groups)


def orders(offsets: dict[int, int]) -> dict[TP, int]:
    return {("orders", p): o for p, o in offsets.items()}


@pytest.mark.mock
def test_coordinator_down_then_moved_only_that_group_goes_stale(
    mock_cluster: MockCluster, collectors: list[GroupOffsetsCollector]
) -> None:
    mc = mock_cluster
    groups = {"group-a": 1, "group-b": 2, "group-c": 3}
    # group-a never committed partition 1: -1001 there is not a commit.
    mock_setup(mc, groups, {"group-a": {0: 10}, "group-b": {0: 20, 1: 21}, "group-c": {0: 30}})
    store = Store()
    collector = mock_collector(collectors, mc, store, list(groups))
    assert collector.run_once(), collector.health.last_error
    assert offsets_in_store(store, "mock", "group-a") == orders({0: 10})
    assert offsets_in_store(store, "mock", "group-b") == orders({0: 20, 1: 21})

    mc.broker_down(1)  # group-a's coordinator
    mock_commit(mc, "group-b", {0: 25, 1: 26})
    assert collector.run_once(), collector.health.last_error  # one group failing is not fatal
    stats = collector.last_round
    assert stats is not None and set(stats.failures) == {"group-a"}
    a = store.group("mock", "group-a")
    assert a is not None and a.stale and a.stale_error
    assert {tp: c.offset for tp, c in a.commits.items()} == orders({0: 10})  # kept, not zeroed
    b = store.group("mock", "group-b")
    assert b is not None and not b.stale
    assert {tp: c.offset for tp, c in b.commits.items()} == orders({0: 25, 1: 26})

    mc.coordinator_set("group-a", 2)  # the coordinator moves to a live broker
    mock_commit(mc, "group-a", {0: 15, 1: 16})
    collector.run_once()
    a = store.group("mock", "group-a")
    assert a is not None and not a.stale
    assert {tp: c.offset for tp, c in a.commits.items()} == orders({0: 15, 1: 16})

    mc.broker_up(1)
    mc.coordinator_set("group-a", 1)  # and back to the broker that came back
    mock_commit(mc, "group-a", {0: 17})
    assert collector.run_once(), collector.health.last_error
    assert offsets_in_store(store, "mock", "group-a") == orders({0: 17, 1: 16})
    assert not any(s.stale for g in groups if (s := store.group("mock", g)) is not None)


@pytest.mark.mock
def test_coordinator_moving_mid_round_is_survived_and_recovered(
    mock_cluster: MockCluster, collectors: list[GroupOffsetsCollector]
) -> None:
    """The sequence that aborted a reused AdminClient (librdkafka #4605): requests waiting on a
    dead coordinator while it moves, then more requests. Twice, a different group each time;
    a group left on the dead broker stays stale until the broker is back."""
    mc = mock_cluster
    coordinators = {"group-a": 1, "group-b": 2, "group-c": 1}
    mock_setup(
        mc, coordinators, {"group-a": {0: 1, 1: 2}, "group-b": {0: 3}, "group-c": {0: 5, 1: 6}}
    )
    store = Store()
    collector = mock_collector(collectors, mc, store, list(coordinators))
    assert collector.run_once(), collector.health.last_error
    for moving, new_home in (("group-a", 2), ("group-c", 3)):
        on_dead_broker = {g for g, b in coordinators.items() if b == 1} - {moving}
        mc.broker_down(1)
        wait_for(lambda: any(map(port_refuses, mc.bootstrap_servers.split(","))), 5, "down")
        in_round = threading.Thread(target=collector.run_once)
        in_round.start()
        wait_for(lambda: collector.phase in ("describe", "offsets"), 10, "groups being read",
                 interval=0.005)
        mc.coordinator_set(moving, new_home)
        coordinators[moving] = new_home
        in_round.join(30)
        assert not in_round.is_alive()
        stats = collector.last_round
        assert stats is not None and set(stats.failures) <= on_dead_broker | {moving}
        # A worker that had a request fail is never reused (its client may cache the dead
        # coordinator, and reusing it is what aborted).
        assert stats.worker_retired == bool(stats.failures), stats
        mock_commit(mc, moving, {0: 100 + new_home})

        assert collector.run_once(), collector.health.last_error
        stats = collector.last_round
        assert stats is not None and set(stats.failures) == on_dead_broker
        moved = store.group("mock", moving)
        assert moved is not None and not moved.stale
        assert moved.commits[("orders", 0)].offset == 100 + new_home
        for group in on_dead_broker:  # stale, offsets kept
            left = store.group("mock", group)
            assert left is not None and left.stale and len(left.commits) == 2

        mc.broker_up(1)
        wait_for(
            lambda: collector.run_once() and not collector.last_round.failures,  # type: ignore[union-attr]
            20,
            "every group read again once the broker is back",
        )


@pytest.mark.mock
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGABRT])
def test_worker_dying_mid_round_costs_one_round(
    mock_cluster: MockCluster, collectors: list[GroupOffsetsCollector], sig: signal.Signals
) -> None:
    """The service survives whatever happens to the worker (SIGABRT is what librdkafka's
    assertion raises): that round's groups go stale, the next round uses a new worker."""
    mc = mock_cluster
    groups = {"group-a": 1, "group-b": 2}
    mock_setup(mc, groups, {"group-a": {0: 1}, "group-b": {0: 2, 1: 3}})
    store = Store()
    collector = mock_collector(collectors, mc, store, list(groups))
    assert collector.run_once(), collector.health.last_error
    first_pid = collector.worker_pid
    assert first_pid is not None

    for broker in mc.broker_ids:  # every answer takes a second: the round is surely running
        mc.set_rtt(broker, 1000)
    results: list[bool] = []
    in_round = threading.Thread(target=lambda: results.append(collector.run_once()))
    in_round.start()
    wait_for(lambda: collector.rounds == 2, 5, "the second round starts")
    os.kill(first_pid, sig)
    in_round.join(30)
    assert results == [False]
    assert f"killed by {sig.name}" in (collector.health.last_error or "")
    for group, offsets in (("group-a", {0: 1}), ("group-b", {0: 2, 1: 3})):
        snapshot = store.group("mock", group)
        assert snapshot is not None and snapshot.stale, group
        assert {tp: c.offset for tp, c in snapshot.commits.items()} == orders(offsets)

    for broker in mc.broker_ids:
        mc.set_rtt(broker, 0)
    mock_commit(mc, "group-a", {0: 5})
    assert collector.run_once(), collector.health.last_error
    assert collector.worker_pid not in (None, first_pid)
    assert offsets_in_store(store, "mock", "group-a") == orders({0: 5})
    assert not any(s.stale for g in groups if (s := store.group("mock", g)) is not None)

    pid = collector.worker_pid
    assert pid is not None
    collector.close()
    wait_for(lambda: process_gone(pid), 5, "close() ends the worker")


@pytest.mark.mock
def test_worker_ends_when_the_service_process_dies(mock_cluster: MockCluster) -> None:
    """A SIGKILLed service must not leave its worker behind (it sees the pipe close)."""
    code = (
        "import sys\n"
        "from monitor.ingest.group_offsets import GroupOffsetsCollector\n"
        "from monitor.config import ClusterConfig\n"
        "from monitor.store.store import Store\n"
        "def main():\n"
        "    cluster = ClusterConfig(name='m', bootstrap_servers=sys.argv[1], request_timeout=2)\n"
        "    collector = GroupOffsetsCollector(cluster, 5, 2, Store(), extra_groups=['g'])\n"
        "    collector.run_once()\n"
        "    print(collector.worker_pid, flush=True)\n"
        "    sys.stdin.read()\n"
        "if __name__ == '__main__':\n"
        "    main()\n"
    )
    service = subprocess.Popen(
        [sys.executable, "-c", code, mock_cluster.bootstrap_servers],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert service.stdout is not None
        worker_pid = int(service.stdout.readline())
        assert not process_gone(worker_pid)
        service.kill()
        service.wait(10)
        wait_for(lambda: process_gone(worker_pid), 10, "the worker exits")
    finally:
        if service.poll() is None:
            service.kill()
            service.wait(10)
