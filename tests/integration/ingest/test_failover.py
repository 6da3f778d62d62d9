"""The failover translation on Kafka 0.9, whose records carry no timestamps: a counted
"needs record timestamps", never a wrong plan, and ``apply`` refuses it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml
from confluent_kafka import Consumer, Producer

from monitor.config import parse_config
from monitor.dev.localkafka.cluster import LocalKafka
from monitor.ingest.broker_offsets import BrokerOffsetsCollector
from monitor.ingest.failover.collector import FailoverCollector
from monitor.ingest.group_offsets import GroupOffsetsCollector
from monitor.ingest.metadata import MetadataCollector
from monitor.rules.failover import NO_TIMESTAMPS
from monitor.store.store import Store
from tests.harness.polling import wait_for_kafka

KAFKA_MONITOR = str(Path(sys.executable).parent / "kafka-monitor")


def test_records_without_timestamps_are_refused_never_translated(
        kafka: LocalKafka, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    topic, group = unique_name("orders"), unique_name("billing")
    kafka.create_topic(topic, partitions=2)
    kafka.create_topic(f"dr.{topic}", partitions=2)  # the destination: same cluster, renamed
    producer = Producer(kafka.client_config())
    for i in range(20):
        producer.produce(topic, key=str(i).encode(), value=b"v", partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer(kafka.client_config(**{"group.id": group, "enable.auto.commit": False,
                                               "auto.offset.reset": "earliest",
                                               "session.timeout.ms": 6000}))
    consumer.subscribe([topic])
    read = 0
    while read < 6:
        m = consumer.poll(1.0)
        read += m is not None and m.error() is None
    consumer.commit(asynchronous=False)
    consumer.close()

    cluster = {"bootstrap_servers": kafka.bootstrap_servers.split(","),
               "broker_version_fallback": "0.9.0.1"}
    data = {"clusters": [{"name": "primary", **cluster}, {"name": "dr", **cluster}],
            "mirrors": [{"name": "dr", "source": "primary", "destination": "dr",
                         "topics": [topic], "canary": False,
                         "failover": {"destination_prefix": "dr."}}]}
    config = parse_config(data)
    store = Store()
    source = config.cluster("primary")
    metadata = MetadataCollector(source, 60, store)  # the store learns the cluster from it
    offsets = BrokerOffsetsCollector(source, 60, store)
    # Named: this 0.9 broker does not list a group whose members have all left.
    groups = GroupOffsetsCollector(source, 60, 4, store, extra_groups=[group])
    failover = FailoverCollector(config.mirrors[0], source, config.cluster("dr"), store)
    try:
        def known() -> bool:
            assert metadata.run_once() and offsets.run_once() and groups.run_once(), \
                groups.health.last_error
            assert failover.run_once(), failover.health.last_error
            return failover.plan(group) is not None

        wait_for_kafka(known, 60, "a plan for the group")
        plan = failover.plan(group)
        assert plan is not None and plan.state == "unverifiable" and plan.reason == NO_TIMESTAMPS
        assert plan.commits() == {} and not plan.ready
        assert failover.results["no_timestamp"] >= 1
    finally:
        for c in (metadata, offsets, groups, failover):
            c.close()

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    base = [KAFKA_MONITOR, "failover"]
    made = subprocess.run([*base, "plan", "--config", str(path), "--mirror", "dr", "--group",
                           group, "--json"], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["reason"] == NO_TIMESTAMPS
    saved = tmp_path / "plan.json"
    saved.write_text(made.stdout)
    applied = subprocess.run([*base, "apply", "--config", str(path), "--mirror", "dr",
                              "--group", group, "--plan", str(saved), "--yes"],
                             capture_output=True, text=True, timeout=120)
    assert applied.returncode == 1
    assert f"is unverifiable: {NO_TIMESTAMPS}" in applied.stderr
