"""The evaluator's verdicts on real consumer groups, against the real Kafka 0.9 broker.

One fleet of real groups (healthy, lagging, stalled, stopped, rewound, an idle batch job) runs
for the whole module, watched by two real services at once: one reads ``__consumer_offsets``,
the other polls the Admin API. Every scenario is asserted through both, from the evaluation
job's cached results (collectors, store, windows and rules all real; 1 s intervals).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from monitor.config import MonitorConfig, parse_config
from monitor.evaluation import GroupStatus
from monitor.evaluator import GroupIndex, RuleOptions, Status, evaluate
from monitor.localkafka import LocalKafka
from monitor.localkafka.workload import (
    BatchConsumer,
    GroupConsumer,
    HealthyConsumer,
    LaggingConsumer,
    ProducerLoad,
    StalledConsumer,
    StoppedConsumer,
    librdkafka_logger,
)
from tests.harness.kafka_fixtures import make_unique_name
from tests.harness.polling import wait_for
from tests.harness.service_thread import ServiceThread

pytestmark = pytest.mark.kafka

CLUSTER = "local"
TICK = 1.0  # collection and evaluation interval of both monitors
SOURCES = ("offsets_topic", "admin")
PRODUCED = ("healthy", "lagging", "stalled", "stopped", "rewind")
IDLE_PERIOD = 20.0  # the batch consumer wakes this often


def monitor_config(kafka: LocalKafka, prefix: str, source: str) -> MonitorConfig:
    return parse_config(
        {
            "clusters": [
                {
                    "name": CLUSTER,
                    "bootstrap_servers": kafka.bootstrap_servers.split(","),
                    "broker_version_fallback": "0.9.0.1",
                    "offsets_source": source,
                    "groups": {"allow": [f"^{prefix}"]},
                    "topics": {"allow": [f"^{prefix}"]},
                }
            ],
            "collectors": {
                "metadata_interval": "2s",
                "broker_offsets_interval": f"{TICK}s",
                "group_offsets_interval": f"{TICK}s",
            },
            "evaluator": {"interval": f"{TICK}s", "window": 10},
            "http": {"host": "127.0.0.1", "port": 0},
        }
    )


def produce(kafka: LocalKafka, topic: str, count: int) -> None:
    producer = Producer({**kafka.client_config(), "logger": librdkafka_logger})
    for i in range(count):
        producer.produce(topic, value=b"x" * 50, key=str(i).encode(), partition=i % 2)
    assert producer.flush(15) == 0


@dataclass
class Fleet:
    kafka: LocalKafka
    names: dict[str, str]
    producers: dict[str, ProducerLoad]
    consumers: dict[str, GroupConsumer]
    monitors: dict[str, ServiceThread]
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def group(self, source: str, scenario: str) -> GroupStatus | None:
        result = self.monitors[source].service.evaluator.result(CLUSTER)
        return result.group(self.names[scenario]) if result is not None else None

    def status(self, source: str, scenario: str) -> str | None:
        g = self.group(source, scenario)
        return g.status if g is not None else None

    def start_consumer(self, scenario: str, consumer: GroupConsumer) -> GroupConsumer:
        self.consumers[scenario] = consumer
        consumer.start()
        self.stack.callback(consumer.stop)
        return consumer

    def burrow_statuses(self, source: str, scenario: str) -> set[str]:
        """What Burrow's own rules say, on the same windows the monitor holds right now."""
        data = self.monitors[source].service.store.evaluation_input(CLUSTER)
        if data is None or self.names[scenario] not in data.group_names:
            return set()
        parts, _ = evaluate(
            data.windows, GroupIndex(data.group_ids, len(data.group_names)),
            time.time() * 1000.0, RuleOptions.burrow(),
        )
        gid = data.group_names.index(self.names[scenario])
        return {Status(int(s)).name for s in parts.status[data.group_ids == gid]}


@pytest.fixture(scope="module")
def fleet(kafka: LocalKafka) -> Iterator[Fleet]:
    prefix = make_unique_name("evalscen")
    names = {s: f"{prefix}-{s}" for s in (*PRODUCED, "idle")}
    for topic in names.values():
        kafka.create_topic(topic, partitions=2)
    produce(kafka, names["idle"], 10)
    cfg = {**kafka.client_config(), "logger": librdkafka_logger}
    fleet = Fleet(kafka, names, {}, {}, {})
    with fleet.stack:
        for source in SOURCES:
            monitor = ServiceThread(monitor_config(kafka, prefix, source)).start()
            fleet.stack.callback(monitor.stop)
            fleet.monitors[source] = monitor
        for scenario in PRODUCED:
            producer = ProducerLoad(
                cfg, names[scenario], rate=20, track_acks=scenario == "stopped"
            )
            producer.start()
            fleet.stack.callback(producer.stop)
            fleet.producers[scenario] = producer
        n = names
        fleet.start_consumer("healthy", HealthyConsumer(cfg, n["healthy"], n["healthy"]))
        fleet.start_consumer(
            "lagging",
            LaggingConsumer(cfg, n["lagging"], n["lagging"], max_rate=4, commit_interval=2.0),
        )
        fleet.start_consumer(
            "stalled", StalledConsumer(cfg, n["stalled"], n["stalled"], stall_after_s=4)
        )
        fleet.start_consumer(
            "stopped", StoppedConsumer(cfg, n["stopped"], n["stopped"], stop_after_s=12)
        )
        fleet.start_consumer("rewind", HealthyConsumer(cfg, n["rewind"], n["rewind"]))
        fleet.start_consumer(
            "idle", BatchConsumer(cfg, n["idle"], n["idle"], period=IDLE_PERIOD)
        )
        yield fleet


def wait_status(fleet: Fleet, source: str, scenario: str, want: str, timeout: float) -> GroupStatus:
    return wait_for(
        lambda: fleet.group(source, scenario),
        timeout,
        f"{scenario} group {want} via {source}",
        ok=lambda g: g is not None and g.status == want and g.partition_count == 2,
        interval=0.25,
    )


@pytest.mark.parametrize("source", SOURCES)
def test_healthy_consumer_is_ok_with_lag_near_zero(fleet: Fleet, source: str) -> None:
    g = wait_status(fleet, source, "healthy", "OK", 60)
    assert g.partition_count == 2
    assert all(p.complete > 0 for p in g.partitions)
    # It stays OK: sample a few rounds.
    for _ in range(6):
        g = fleet.group(source, "healthy")
        assert g is not None and g.status == "OK", g
        assert g.totallag < 100  # 20 records/s, committed every second
        assert g.lag_seconds < 3 * TICK + 2
        time.sleep(0.5)


@pytest.mark.parametrize("source", SOURCES)
def test_slow_consumer_falling_behind_is_warn(fleet: Fleet, source: str) -> None:
    g = wait_status(fleet, source, "lagging", "WARN", 60)
    assert {p.status for p in g.partitions} == {"WARN"}
    assert g.totallag > 20
    lagging = fleet.consumers["lagging"]
    assert lagging.consumed < fleet.producers["lagging"].delivered_total
    assert g.lag_seconds > 0


@pytest.mark.parametrize("source", SOURCES)
def test_consumer_committing_the_same_offset_is_stall(fleet: Fleet, source: str) -> None:
    stalled = fleet.consumers["stalled"]
    assert isinstance(stalled, StalledConsumer)
    assert stalled.frozen.wait(30), "the stalled consumer never froze"
    g = wait_status(fleet, source, "stalled", "STALL", 60)
    assert g.members == 1  # still in the group: stuck, not gone
    frozen = {tp[1]: off for tp, off in stalled.frozen_offsets.items()}
    for p in g.partitions:
        assert p.end is not None and p.end.offset == frozen[p.partition]
        assert p.current_lag > 0


@pytest.mark.parametrize("source", SOURCES)
def test_killed_consumer_is_stop_within_one_window_with_true_lag_seconds(
    fleet: Fleet, source: str
) -> None:
    stopped = fleet.consumers["stopped"]
    assert stopped.closed.wait(60), "the stopped consumer never closed"
    closed_at = stopped.commits[-1].at  # monotonic time of its last commit
    g = wait_status(fleet, source, "stopped", "STOP", 60)
    elapsed = time.monotonic() - closed_at
    # Burrow's rule: STOP once the silence exceeds the window's span. Allow the span plus the
    # pipeline's delays (collection, evaluation) and the 0.25 s polling.
    spans = [
        (p.end.timestamp_ms - p.start.timestamp_ms) / 1000.0
        for p in g.partitions
        if p.start is not None and p.end is not None
    ]
    assert spans and max(spans) > 0
    assert elapsed <= max(spans) + 4 * TICK + 1.0, (elapsed, spans)
    assert g.members == 0
    assert g.totallag > 0

    # Lag in seconds against the truth: the oldest unconsumed record is the one at the
    # committed offset, and the producer knows when the broker acknowledged it.
    producer = fleet.producers["stopped"]
    for p in g.partitions:
        assert p.status == "STOP"
        assert p.end is not None
        acked = producer.acked_at(p.partition, p.end.offset)
        assert acked is not None, p
        true_age = g.evaluated_at - acked
        assert not p.lag_seconds_lower_bound
        assert abs(p.lag_seconds - true_age) <= TICK + 1.0, (p.lag_seconds, true_age)
    assert g.lag_seconds == max(p.lag_seconds for p in g.partitions)


def test_offset_reset_backwards_is_rewind(fleet: Fleet) -> None:
    for source in SOURCES:
        wait_status(fleet, source, "rewind", "OK", 60)
    name = fleet.names["rewind"]
    fleet.consumers["rewind"].stop()  # commits its position and leaves the group
    admin = AdminClient({**fleet.kafka.client_config(), "logger": librdkafka_logger})
    request = ConsumerGroupTopicPartitions(name, [TopicPartition(name, p, 0) for p in (0, 1)])
    futures = admin.alter_consumer_group_offsets([request])
    futures[name].result(timeout=15)
    # A consumer starts again from the reset offsets, far below the old position.
    fleet.start_consumer(
        "rewind", LaggingConsumer(fleet.kafka.client_config(), name, name, max_rate=2)
    )
    seen: dict[str, GroupStatus] = {}

    def both_rewound() -> bool:
        for source in SOURCES:
            g = fleet.group(source, "rewind")
            if g is not None and g.status == "REWIND":
                seen.setdefault(source, g)
        return len(seen) == len(SOURCES)

    wait_for(both_rewound, 60, "REWIND via both sources", interval=0.25)
    for g in seen.values():
        assert any(p.status == "REWIND" for p in g.partitions)


def test_idle_caught_up_batch_consumer_is_never_stop(fleet: Fleet) -> None:
    """A batch job on an idle topic: caught up, no commits for a long time, then data arrives
    and waits almost a full period for the next wake. Burrow's rules call it STOP on the same
    windows (shown here, so the scenario really is the trap); ours stay OK throughout."""
    batch = fleet.consumers["idle"]
    assert isinstance(batch, BatchConsumer)
    for source in SOURCES:
        g = wait_status(fleet, source, "idle", "OK", 60)
    wait_for(lambda: len(batch.wakes) >= 2, 2 * IDLE_PERIOD + 10, "the batch job's 2nd wake")
    for source in SOURCES:
        g = fleet.group(source, "idle")
        assert g is not None and g.totallag == 0, g
    # Data arrives just after a wake, so it waits ~IDLE_PERIOD for the next one.
    wake = wait_for(
        lambda: time.time() - batch.wakes[-1],
        IDLE_PERIOD + 5,
        "a moment just after a wake",
        ok=lambda since: batch.awake_s + 0.5 <= since <= batch.awake_s + 3,
        interval=0.1,
    )
    del wake
    wakes_before = len(batch.wakes)
    produce(fleet.kafka, fleet.names["idle"], 10)
    ours: dict[str, set[str]] = {s: set() for s in SOURCES}
    burrow: dict[str, set[str]] = {s: set() for s in SOURCES}
    lagged = False
    deadline = time.monotonic() + IDLE_PERIOD + 15
    while time.monotonic() < deadline:
        for source in SOURCES:
            g = fleet.group(source, "idle")
            assert g is not None
            ours[source].add(g.status)
            lagged |= g.totallag > 0
            burrow[source] |= fleet.burrow_statuses(source, "idle")
        caught_up = all(
            (g := fleet.group(s, "idle")) is not None and g.totallag == 0 for s in SOURCES
        )
        if len(batch.wakes) > wakes_before and caught_up:
            break
        time.sleep(0.5)
    assert len(batch.wakes) > wakes_before, "the batch job did not wake again"
    assert lagged, "the monitors never saw the new data waiting"
    assert "STOP" in burrow["offsets_topic"], burrow  # the trap Burrow falls into
    for source in SOURCES:
        assert ours[source] == {"OK"}, (source, ours[source])


def test_unknown_group_is_notfound(fleet: Fleet) -> None:
    for source in SOURCES:
        result = wait_for(
            lambda s=source: fleet.monitors[s].service.evaluator.result(CLUSTER),
            30, "a first evaluation",
        )
        assert result.group("no-such-group-" + fleet.names["healthy"]) is None
        assert fleet.names["healthy"] in result.group_names()


def test_statuses_are_arrays_of_known_codes(fleet: Fleet) -> None:
    """The cached arrays the exporter will read agree with the per-group views."""
    result = wait_for(
        lambda: fleet.monitors["offsets_topic"].service.evaluator.result(CLUSTER),
        30, "a first evaluation",
        ok=lambda r: r is not None and r.partitions is not None,
    )
    assert result.partitions is not None and result.data is not None
    assert np.all((result.partitions.status >= Status.OK) & (result.partitions.status <= 5))
    for name in result.group_names():
        g = result.group(name)
        assert g is not None
        assert result.group(name) is g  # built once per evaluation, then reused
