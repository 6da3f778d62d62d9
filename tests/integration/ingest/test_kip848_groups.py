"""A KIP-848 consumer group (``group.protocol=consumer``) on librdkafka's mock cluster
(``../shared``'s test-infrastructure notes, section 7): the mock lists no such group and
cannot describe it (no ConsumerGroupDescribe), so the group is named in ``extra_groups``. Its
offsets are read all the same, and the missing description is reported in the round's
figures, not crashed on. Says nothing of a real broker's KIP-848 answers."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from monitor.config import ClusterConfig
from monitor.ingest.group_offsets import GroupOffsetsCollector
from monitor.ingest.metadata import MetadataCollector
from monitor.store.store import Store
from tests.harness.mockcluster import MockCluster

GROUP, TOPIC = "kip848-group", "orders"


@pytest.fixture
def consumer(mock_cluster: MockCluster) -> Iterator[Consumer]:
    mock_cluster.create_topic(TOPIC, partitions=2)
    producer = Producer(mock_cluster.client_config())
    for i in range(40):
        producer.produce(TOPIC, value=b"v", partition=i % 2)
    assert producer.flush(30) == 0
    c = Consumer(mock_cluster.client_config({
        "group.id": GROUP, "group.protocol": "consumer", "auto.offset.reset": "earliest",
        "enable.auto.commit": False}))
    c.subscribe([TOPIC])
    read, deadline = 0, time.monotonic() + 60
    while read < 40 and time.monotonic() < deadline:
        m = c.poll(0.5)
        read += m is not None and m.error() is None
    assert read == 40, f"the KIP-848 consumer read {read} of 40 records"
    c.commit(asynchronous=False)
    yield c
    c.close()


def test_a_consumer_protocol_groups_offsets_are_read_and_its_describe_reported(
        mock_cluster: MockCluster, consumer: Consumer) -> None:
    cluster = ClusterConfig(name="mock", bootstrap_servers=mock_cluster.bootstrap_servers
                            .split(","), request_timeout=2)
    store = Store()
    metadata = MetadataCollector(cluster, 60, store)
    collector = GroupOffsetsCollector(cluster, 60, 2, store, extra_groups=[GROUP])
    try:
        assert metadata.run_once(), metadata.health.last_error
        assert collector.run_once(), collector.health.last_error
        snapshot = store.group("mock", GROUP)
        assert snapshot is not None
        assert {tp: c.offset for tp, c in snapshot.commits.items()} == \
            {(TOPIC, 0): 20, (TOPIC, 1): 20}
        stats = collector.last_round
        assert stats is not None and stats.failures == {}
        assert "UNSUPPORTED_FEATURE" in stats.undescribed[GROUP], stats.undescribed
        assert collector.describe_failures == 1
        assert snapshot.membership is None  # state and members unknown, never invented
    finally:
        collector.close()
        metadata.close()
