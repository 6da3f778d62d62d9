"""Compatibility with a broker of today's request versions: Tansu (``tests/harness/tansu.py``).

The 0.9 brokers pin librdkafka to the oldest requests; Tansu answers the current ones
(ApiVersions, Metadata, ListOffsets, ListGroups, DescribeGroups, OffsetFetch in the
all-partitions form, CreateTopics). The service runs on its defaults (Admin-API offsets source)
with the canary on.

Tansu's known defects, worked around here and nowhere in the product:

- ListOffsets "latest" answers the last *batch's* base offset + 1, so a log end is right only
  when every record was produced in a request of its own: the test produces one record per
  request (``linger.ms=0``, a flush after each).
- Lookups by timestamp return offset 0: nothing here uses them.
- DescribeGroups lists no members (and ListGroups says state UNKNOWN): the test asserts
  nothing about owners or members.
- No ``__consumer_offsets`` topic and no JMX: the offsets-topic source and JMX are not tried.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from monitor.config import parse_config
from monitor.ingest.metadata import MetadataCollector
from monitor.store.store import Store
from tests.harness.net import http
from tests.harness.polling import wait_for
from tests.harness.service_thread import ServiceThread
from tests.harness.tansu import Tansu

pytestmark = pytest.mark.tansu

TOPIC, GROUP = "orders", "billing"
RECORDS = 10  # per partition
COMMITTED = {0: 4, 1: 6}


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tansu]:
    with Tansu(tmp_path_factory.mktemp("tansu") / "tansu.log") as broker:
        yield broker


@pytest.fixture(scope="module")
def committed_group(tansu: Tansu) -> dict[int, int]:
    """A 2-partition topic with RECORDS records each and a group that consumed them all and
    then committed COMMITTED (so its lag is known exactly); returns the log ends."""
    conf = {"bootstrap.servers": tansu.bootstrap_servers}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])[TOPIC] \
        .result(30)
    producer = Producer({**conf, "linger.ms": 0})
    for i in range(RECORDS):
        for partition in (0, 1):
            producer.produce(TOPIC, value=f"record-{i}".encode(), partition=partition)
            producer.flush(10)  # one record per request: Tansu's log ends are right then
    consumer = Consumer({**conf, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 2 * RECORDS and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen += 1
    assert seen == 2 * RECORDS, f"consumed {seen} of {2 * RECORDS} records from Tansu"
    consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()],
                    asynchronous=False)
    consumer.close()
    return {0: RECORDS, 1: RECORDS}


def config(tansu: Tansu, **extra: Any) -> Any:
    return parse_config({
        "clusters": [{"name": "tansu", "bootstrap_servers": [tansu.bootstrap_servers]}],
        "http": {"host": "127.0.0.1", "port": 0},
        **extra,
    })


def test_metadata(tansu: Tansu, committed_group: dict[int, int]) -> None:
    store = Store()
    collector = MetadataCollector(config(tansu).clusters[0], 60.0, store)
    assert collector.run_once(), collector.health.last_error
    metadata = store.metadata("tansu")
    assert metadata is not None
    assert list(metadata.brokers.values()) == [tansu.bootstrap_servers]
    assert [p.partition for p in metadata.topics[TOPIC]] == [0, 1]
    assert all(p.leader in metadata.brokers for p in metadata.topics[TOPIC])


def test_admin_api_offsets_source_end_to_end(
    tansu: Tansu, committed_group: dict[int, int]
) -> None:
    """Groups listed, offsets fetched (all partitions), log ends read, lag computed: exactly
    the records produced after each committed offset."""
    with ServiceThread(config(tansu)) as s:
        base = f"http://127.0.0.1:{s.service.http_port}"
        wait_for(lambda: http("GET", f"{base}/ready")[0] == 200, 60, "ready on Tansu",
                 retry_on=(OSError,))
        code, listing = http("GET", f"{base}/v3/kafka/tansu/consumer")
        assert code == 200 and GROUP in listing["consumers"]

        def lag() -> dict[str, Any] | None:
            code, body = http("GET", f"{base}/v3/kafka/tansu/consumer/{GROUP}/lag")
            return body["status"] if code == 200 and body["status"]["partitions"] else None

        status = wait_for(lag, 60, "the group's lag on Tansu")
        partitions = {p["partition"]: p for p in status["partitions"]}
        assert sorted(partitions) == [0, 1]
        for partition, offset in COMMITTED.items():
            p = partitions[partition]
            assert p["topic"] == TOPIC
            assert p["end"]["offset"] == offset
            assert p["current_lag"] == committed_group[partition] - offset
        assert status["totallag"] == sum(committed_group[p] - o for p, o in COMMITTED.items())


def test_canary_probe(tansu: Tansu, tmp_path: Path) -> None:
    """The canary creates its topic, produces, consumes and commits on Tansu."""
    with ServiceThread(config(tansu, canary={"enabled": True, "interval": "200ms"})) as s:
        base = f"http://127.0.0.1:{s.service.http_port}"

        def canary() -> dict[str, Any] | None:
            code, body = http("GET", f"{base}/v3/kafka/tansu/canary")
            snap = body.get("canary") if code == 200 else None
            ok = snap and snap["counts"]["received"] >= 10 and snap["commit_availability"]
            return snap if ok else None

        snap = wait_for(canary, 90, "canary records consumed on Tansu", retry_on=(OSError,))
        assert snap["produce_availability"] == 1.0
        assert snap["consume_availability"] == 1.0
        assert snap["counts"]["lost"] == snap["counts"]["duplicated"] == 0
        assert snap["brokers_uncovered"] == []
        # Measured, in seconds, and under what the canary itself would count lost. How fast
        # it is depends on what else the 2 cores run (tests run side by side); the canary's
        # speed is bench/bench_canary.py's to measure.
        latency = snap["end_to_end_latency_seconds"]
        sla = s.service.config.canary.loss_sla
        assert 0 < latency["p50"] <= latency["p99"] < sla, (latency, sla)
