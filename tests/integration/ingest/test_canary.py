"""Canary probes against real Kafka 0.9 brokers: healthy figures through the real service and
its HTTP API, availability per partition and broker when a broker dies and comes back,
instances sharing a topic, a restart, topic placement that cannot be controlled, and event
counters exported at 0 before their first event."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from confluent_kafka import Producer
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.config import MonitorConfig, parse_config
from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import librdkafka_logger
from monitor.ingest.canary.metrics import CanaryMetrics
from monitor.ingest.canary.probe import CanaryProbe
from monitor.ingest.canary.record import CanaryRecord, encode
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.polling import wait_for
from tests.harness.service_thread import ServiceThread

CLUSTER = "local"


def config(kafka: LocalKafka, prefix: str, **canary: Any) -> MonitorConfig:
    return parse_config({
        "clusters": [{
            "name": CLUSTER,
            "bootstrap_servers": kafka.bootstrap_servers.split(","),
            "broker_version_fallback": "0.9.0.1",
            "groups": {"allow": [f"^{prefix}"]},
            "topics": {"allow": [f"^{prefix}"]},
        }],
        "collectors": {"metadata_interval": "2s", "broker_offsets_interval": "1s",
                       "group_offsets_interval": "1s"},
        "evaluator": {"interval": "1s"},
        "canary": {"enabled": True, "topic": f"{prefix}-canary", "interval": "500ms",
                   "loss_sla": "5s", "window": "8s", "produce_timeout": "2s",
                   "commit_interval": "1s", "instance_id": f"{prefix}-inst", **canary},
        "http": {"host": "127.0.0.1", "port": 0},
    })


def canary_of(monitor: ServiceThread) -> CanaryProbe:
    return next(c for c in monitor.service.collectors if isinstance(c, CanaryProbe))


def part(snap: dict[str, Any], partition: int) -> dict[str, Any]:
    return next(p for p in snap["partitions"] if p["partition"] == partition)


@pytest.mark.kafka
def test_healthy_cluster_has_full_availability_and_low_latency(kafka: LocalKafka) -> None:
    prefix = make_unique_name("canary-healthy")
    kafka.create_topic(f"{prefix}-canary", replica_assignment=[[0], [0]])
    with ServiceThread(config(kafka, prefix)) as monitor:
        probe = canary_of(monitor)
        snap = wait_for(
            probe.snapshot, 60, "canary records consumed on both partitions",
            ok=lambda s: all(p["counts"]["received"] >= 5 for p in s["partitions"])
            and len(s["partitions"]) == 2 and s["commit_availability"] is not None,
        )
        assert snap["brokers_covered"] == [0] and snap["brokers_uncovered"] == []
        assert snap["produce_availability"] == 1.0
        assert snap["consume_availability"] == 1.0
        counts = snap["counts"]
        assert counts["lost"] == counts["duplicated"] == counts["out_of_order"] == 0
        e2e = snap["end_to_end_latency_seconds"]
        assert 0 < e2e["p50"] <= e2e["p99"] <= e2e["p99_9"] < 1.0
        assert 0 < snap["produce_latency_seconds"]["p99"] < 1.0
        assert snap["commit_availability"] == 1.0
        assert snap["brokers"][0]["broker"] == 0 and snap["brokers"][0]["partitions"] == [0, 1]

        base = f"http://127.0.0.1:{monitor.service.http_port}"
        body = requests.get(f"{base}/v3/kafka/{CLUSTER}/canary", timeout=5).json()
        assert body["error"] is False and body["canary"]["topic"] == f"{prefix}-canary"
        assert requests.get(f"{base}/v3/kafka/nope/canary", timeout=5).status_code == 404
        metrics = requests.get(f"{base}/metrics", timeout=5).text
        assert f'kafka_canary_end_to_end_latency_seconds_count{{broker="0",cluster="{CLUSTER}"}}' \
            in metrics
        assert f'kafka_canary_produce_availability{{cluster="{CLUSTER}",partition="1"}} 1.0' \
            in metrics
        assert f'kafka_canary_broker_covered{{broker="0",cluster="{CLUSTER}"}} 1.0' in metrics


def test_killed_broker_drops_availability_of_exactly_the_partitions_it_led(
    own_kafka3: LocalKafka,
) -> None:
    prefix = make_unique_name("canary-kill")
    own_kafka3.create_topic(f"{prefix}-canary", replica_assignment=[[0], [1], [2]])
    victim = 1
    with ServiceThread(config(own_kafka3, prefix)) as monitor:
        probe = canary_of(monitor)
        snap = wait_for(
            probe.snapshot, 60, "every partition healthy",
            ok=lambda s: len(s["partitions"]) == 3 and all(
                p["produce_availability"] == 1.0 and p["counts"]["received"] >= 3
                for p in s["partitions"]
            ),
        )
        assert snap["brokers_covered"] == [0, 1, 2]
        led = [p["partition"] for p in snap["partitions"] if p["leader"] == victim]
        others = [p["partition"] for p in snap["partitions"] if p["leader"] != victim]
        assert len(led) == 1 and len(others) == 2

        own_kafka3.kill_broker(victim)
        try:
            wait_for(
                probe.snapshot, 60, f"produce availability of partition {led} to drop",
                ok=lambda s: (part(s, led[0])["produce_availability"] is not None
                              and part(s, led[0])["produce_availability"] < 0.5),
            )
            # While the broker is down, only its partition stays unavailable. (Right after the
            # kill, librdkafka's metadata refresh against 0.9 can fail sends to every
            # partition for a moment; a real client sees the same, so the canary reports it.)
            snap = wait_for(
                probe.snapshot, 60, "the surviving leaders' partitions fully available",
                ok=lambda s: part(s, led[0])["produce_availability"] < 0.5 and all(
                    part(s, p)["produce_availability"] == 1.0
                    and part(s, p)["counts"]["failed"] == 0
                    for p in others
                ),
            )
            by_broker = {b["broker"]: b for b in snap["brokers"]}
            assert by_broker[victim]["produce_availability"] < 0.5
            assert all(by_broker[b]["produce_availability"] == 1.0 for b in by_broker
                       if b != victim)
        finally:
            own_kafka3.start_broker(victim)
        wait_for(
            probe.snapshot, 90, "every partition's availability to recover",
            ok=lambda s: all(
                p["produce_availability"] == 1.0 and p["counts"]["failed"] == 0
                and p["counts"]["received"] > 0 for p in s["partitions"]
            ),
        )


@pytest.fixture
def probes() -> Iterator[list[CanaryProbe]]:
    made: list[CanaryProbe] = []
    yield made
    for probe in made:
        probe.close()


def make_probe(kafka: LocalKafka, prefix: str, instance: str) -> CanaryProbe:
    cfg = config(kafka, prefix, instance_id=instance, group=f"{prefix}-{instance}")
    cluster = cfg.clusters[0]
    return CanaryProbe(CLUSTER, cluster, cluster, cfg.canary,
                       CanaryMetrics("kafka_canary", "cluster"))


def run_rounds(probes: list[CanaryProbe], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for probe in probes:
            probe.run_once()
        time.sleep(0.5)


@pytest.mark.kafka
def test_instances_share_a_topic_and_a_restart_reports_no_false_duplicates_or_losses(
    kafka: LocalKafka, probes: list[CanaryProbe]
) -> None:
    prefix = make_unique_name("canary-share")
    topic = f"{prefix}-canary"
    kafka.create_topic(topic, replica_assignment=[[0], [0]])
    a, b = make_probe(kafka, prefix, "a"), make_probe(kafka, prefix, "b")
    probes += [a, b]
    run_rounds([a, b], 4)
    a.close()  # "a" restarts: same instance id and group, a new run
    a2 = make_probe(kafka, prefix, "a")
    probes.append(a2)
    run_rounds([a2, b], 2)
    # A record of "a"'s previous run arriving now (e.g. a delayed retry): not a duplicate.
    producer = Producer({**kafka.client_config(), "logger": librdkafka_logger})
    producer.produce(topic, encode(CanaryRecord("a", a.epoch_ms, a.stream, 0, 0, time.time_ns()),
                                   100), partition=0)
    assert producer.flush(10) == 0
    run_rounds([a2, b], 8)  # past the loss SLA (5 s)

    for probe in (a2, b):
        snap = wait_for(probe.snapshot, 10, "records consumed",
                        ok=lambda s: s["counts"]["received"] > 0)
        c = snap["counts"]
        assert c["lost"] == c["duplicated"] == c["out_of_order"] == 0, (probe.instance_id, c)
        assert snap["ignored"]["other_instances"] > 0  # it saw the other instance's records
    assert a2.snapshot()["ignored"]["earlier_runs"] >= 1


@pytest.mark.kafka3
def test_uncontrolled_placement_reports_uncovered_brokers(
    kafka3: LocalKafka, probes: list[CanaryProbe]
) -> None:
    """Kafka 0.9 has no CreateTopics: a missing canary topic is auto-created by the broker
    with one partition, so two of the three brokers lead nothing and are reported."""
    prefix = make_unique_name("canary-auto")
    probe = make_probe(kafka3, prefix, "solo")
    probes.append(probe)
    wait_for(lambda: probe.run_once() and probe.snapshot()["partition_count"] > 0, 60,
             "the canary topic to be auto-created")
    snap = probe.snapshot()
    assert snap["partition_count"] == 1
    assert len(snap["brokers_covered"]) == 1
    assert sorted(snap["brokers_covered"] + snap["brokers_uncovered"]) == [0, 1, 2]


EVENT_COUNTERS = ("produce_errors", "records_lost", "records_duplicated",
                  "records_out_of_order", "records_late")


def counter_samples(metrics: CanaryMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` as a scrape of ``metrics`` reads them."""
    registry = CollectorRegistry()
    registry.register(metrics)
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples
            if s.name.endswith("_total")}


@pytest.mark.kafka
def test_event_counters_are_exported_at_zero_before_any_event(
    kafka: LocalKafka, probes: list[CanaryProbe]
) -> None:
    """Loss, duplicate, out-of-order, late and produce-error counters exist at 0 for every
    partition and leader once the probe's first round has read the topic's metadata, for a
    cluster's canary and a mirror's alike (a healthy run has no such event, so without this
    the series would not exist): an ``increase()`` alert then sees the first event."""
    prefix = make_unique_name("canary-zero")
    kafka.create_topic(f"{prefix}-canary", replica_assignment=[[0], [0]])
    cfg = config(kafka, prefix)
    cluster = cfg.clusters[0]
    canary = CanaryProbe(CLUSTER, cluster, cluster, cfg.canary,
                         CanaryMetrics("kafka_canary", "cluster"))
    mirror = CanaryProbe("m", cluster, cluster, cfg.canary,
                         CanaryMetrics("kafka_mirror_canary", "mirror"), kind="mirror-canary")
    for probe, scope in ((canary, "cluster"), (mirror, "mirror")):
        probes.append(probe)
        before = counter_samples(probe.metrics)
        assert f"{probe.metrics.prefix}_commit_errors_total" in {n for n, _ in before}
        assert not any("records_lost" in name for name, _ in before)  # no metadata yet
        assert probe.run_once(), probe.health.last_error
        samples = counter_samples(probe.metrics)
        for name in EVENT_COUNTERS:
            for partition in ("0", "1"):
                labels = tuple(sorted({scope: probe.scope_value, "partition": partition,
                                       "broker": "0"}.items()))
                assert samples.get((f"{probe.metrics.prefix}_{name}_total", labels)) == 0.0, (
                    name, partition, sorted(samples))
