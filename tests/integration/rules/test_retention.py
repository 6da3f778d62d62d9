"""Retention risk on a real Kafka 0.9 broker, with the service on its defaults (Admin API
offsets, default intervals, ``retention.warn`` 1 h).

The broker is a dedicated one. It checks retention every second, where Kafka's default is
every 5 minutes. The topic has 16 KB segments and keeps about 400 KB, about a minute of the
producer's 50 records/s. Once retention runs, the log start moves about as fast as producers
write.

Two groups read the topic:

* a healthy group keeps up. It stays OK throughout: it reads as fast as retention deletes, and
  that must not read as a risk;
* a stopped group stops reading while retention is running. Its lead (committed − log start)
  shrinks. The service gives a time to loss before the loss happens, then reports the
  partition LOST with the exact count: the log start (read by the test itself, once the
  producer stopped) minus the group's committed offset.
"""

from __future__ import annotations

import contextlib
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import (
    HealthyConsumer,
    ProducerLoad,
    StoppedConsumer,
    committed_offsets,
    librdkafka_logger,
    watermark_offsets,
)
from monitor.model.verdicts import GroupStatus
from tests.harness.kafka_fixtures import defaults_config, make_unique_name
from tests.harness.polling import wait_for
from tests.harness.service_thread import ServiceThread

pytestmark = [pytest.mark.kafka, pytest.mark.own_cluster, pytest.mark.slow(160),
              pytest.mark.timeout(600)]

CLUSTER = "local"
RATE = 50.0  # records/s, about 130 bytes each on disk
TOPIC_CONFIG = {"segment.bytes": 16_384, "retention.bytes": 400_000}
STOP_AFTER = 75.0  # s: the stopped group stops once retention has been deleting a while


@pytest.fixture(scope="module")
def retention_kafka() -> Iterator[LocalKafka]:
    """A broker of its own: retention checked every second."""
    cluster = LocalKafka(1, broker_props={"log.retention.check.interval.ms": 1000})
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop(graceful=False)


@dataclass
class Seen:
    at: float
    status: str
    risk: str
    lead: int
    lost: int
    time_to_loss: float | None


def partition0(monitor: ServiceThread, group: str) -> tuple[GroupStatus, Seen] | None:
    result = monitor.service.evaluator.result(CLUSTER)
    g = result.group(group) if result is not None else None
    if g is None or not g.partitions or g.partitions[0].retention is None:
        return None
    r = g.partitions[0].retention
    return g, Seen(g.evaluated_at, g.status, r.risk, r.lead, r.lost_records,
                   r.time_to_loss_seconds)


def scrape(monitor: ServiceThread, group: str) -> dict[str, float]:
    """The group's retention families in /metrics: name -> value (partition 0's for the
    per-partition ones)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{monitor.service.http_port}/metrics") as r:
        lines = r.read().decode().splitlines()
    out = {}
    for line in lines:
        name, _, rest = line.partition("{")
        if f'group="{group}"' in rest and (name.startswith("kafka_consumergroup_group_")
                                           or name == "kafka_monitor_group_retention_risk"):
            out[name] = float(line.rpartition(" ")[2])
    return out


def test_a_stopped_group_is_warned_then_lost_exactly_and_a_healthy_one_stays_ok(
    retention_kafka: LocalKafka,
) -> None:
    kafka = retention_kafka
    prefix = make_unique_name("retention")
    topic, healthy, stopped = prefix, f"{prefix}-healthy", f"{prefix}-stopped"
    kafka.create_topic(topic, partitions=1, config=TOPIC_CONFIG)
    cfg = {**kafka.client_config(), "logger": librdkafka_logger}
    monitor = ServiceThread(defaults_config(kafka, prefix, "admin")).start()
    history: dict[str, list[Seen]] = {healthy: [], stopped: []}
    with contextlib.ExitStack() as stack:
        stack.callback(monitor.stop)
        producer = ProducerLoad(cfg, topic, rate=RATE)
        producer.start()
        stack.callback(producer.stop)
        for consumer in (HealthyConsumer(cfg, topic, healthy),
                         StoppedConsumer(cfg, topic, stopped, stop_after_s=STOP_AFTER)):
            consumer.start()
            stack.callback(consumer.stop)

        metrics_at_risk: dict[str, float] = {}

        def watch() -> bool:
            for group, seen in history.items():
                found = partition0(monitor, group)
                if found is not None and (not seen or seen[-1].at != found[1].at):
                    seen.append(found[1])
            if not metrics_at_risk and history[stopped] and history[stopped][-1].risk == "WARN":
                metrics_at_risk.update(scrape(monitor, stopped))
            last = history[stopped][-1:] or None
            return last is not None and last[0].risk == "LOST"

        wait_for(watch, STOP_AFTER + 240, "the stopped group's partition LOST", interval=1.0)
        lost_at = next(s.at for s in history[stopped] if s.risk == "LOST")
        warned = [s for s in history[stopped] if s.risk == "WARN"]
        assert warned, history[stopped]
        # The estimate came before the loss, and said roughly when (the log start moves in
        # steps of a segment, about 2.5 s here, and is read every 10 s).
        first = warned[0]
        assert first.time_to_loss is not None and first.at < lost_at
        assert first.at + first.time_to_loss == pytest.approx(lost_at, abs=30), warned
        leads = [s.lead for s in warned]
        assert leads == sorted(leads, reverse=True), warned  # the lead shrank
        # /metrics said so too while it was at risk (read as soon as the API said WARN, about
        # 50 s before the loss).
        assert metrics_at_risk["kafka_monitor_group_retention_risk"] == 1, metrics_at_risk
        assert metrics_at_risk["kafka_consumergroup_group_time_to_loss_seconds"] > 0
        assert metrics_at_risk["kafka_consumergroup_group_min_time_to_loss_seconds"] > 0
        # The exact count, once the log start stands still: stop producing, and wait for
        # the service to read the same log start as the test.
        producer.stop()
        time.sleep(3)  # retention's next checks
        log_start, _ = watermark_offsets(cfg, topic)[0]
        committed = committed_offsets(cfg, stopped, topic, [0])[0]
        assert log_start > committed >= 0

        def settled() -> bool:
            found = partition0(monitor, stopped)
            return found is not None and found[1].lead == committed - log_start

        wait_for(settled, 60, "the service to read the settled log start", interval=1.0)
        g, final = partition0(monitor, stopped)  # type: ignore[misc]
        assert (final.risk, final.lost) == ("LOST", log_start - committed)
        assert g.retention is not None and g.retention.risk == "LOST"
        assert g.retention.lost_records == log_start - committed
        exported = scrape(monitor, stopped)
        assert exported["kafka_monitor_group_retention_risk"] == 2
        assert exported["kafka_consumergroup_group_lost_records"] == log_start - committed
        assert exported["kafka_consumergroup_group_sum_lost_records"] == log_start - committed
        assert exported["kafka_consumergroup_group_lead"] == committed - log_start
        assert "kafka_consumergroup_group_time_to_loss_seconds" not in exported
        # The healthy group: never at risk, though retention deleted as fast as it read.
        assert history[healthy], "the healthy group was never evaluated"
        assert {s.risk for s in history[healthy]} == {"OK"}, history[healthy]
        assert {s.status for s in history[healthy]} == {"OK"}, history[healthy]
