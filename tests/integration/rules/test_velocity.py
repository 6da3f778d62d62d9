"""Lag velocity and time to catch up on a real Kafka 0.9 broker, with the service on its
defaults (both offsets sources).

A backlog of 6,000 records is written first; then a producer writes 20 records/s while a
consumer reads at most 60 records/s, committing every 5 s (librdkafka's auto-commit cadence),
so the lag shrinks by 40 records/s and is gone about 150 s later. The service's velocity must
be within 10 % of -40 records/s, and its time to catch up, taken once the commit window spans
half a minute, within 10 % of when the consumer really caught up (the test reads the log end
itself). The Admin API gives no commit times, only when a commit was read: its estimate can be
late by up to a commit interval's reading (5 s x 60 / 40 = 7.5 s here), which 10 % of the
remaining 100 s or so covers.

0.9 records carry no timestamps: the lag in seconds of the backlog, written before the service
started, is a lower bound, and says so; once the consumer reads records written while the
service watched, it is interpolated, and says so.
"""

from __future__ import annotations

import contextlib
import time
import urllib.request

import pytest

from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import (
    LaggingConsumer,
    ProducerLoad,
    librdkafka_logger,
    watermark_offsets,
)
from tests.harness.kafka_fixtures import defaults_config, make_unique_name
from tests.harness.polling import wait_for
from tests.harness.service_thread import ServiceThread

pytestmark = [pytest.mark.kafka, pytest.mark.slow(170), pytest.mark.timeout(600)]

CLUSTER = "local"
BACKLOG = 6000
PRODUCE = 20.0  # records/s
CONSUME = 60.0  # records/s
COMMIT_EVERY = 5.0  # s


@pytest.mark.parametrize("source", ["offsets_topic", "admin"])
def test_a_consumer_draining_a_backlog_gets_its_velocity_and_time_to_catch_up(
    kafka: LocalKafka, source: str,
) -> None:
    prefix = make_unique_name(f"velocity-{source}")
    topic, group = prefix, f"{prefix}-draining"
    kafka.create_topic(topic, partitions=1)
    cfg = {**kafka.client_config(), "logger": librdkafka_logger}
    with contextlib.ExitStack() as stack:
        backlog = ProducerLoad(cfg, topic, rate=1000.0)
        backlog.start()
        wait_for(lambda: backlog.delivered_total >= BACKLOG, 30, "the backlog")
        backlog.stop()
        monitor = ServiceThread(defaults_config(kafka, prefix, source)).start()
        stack.callback(monitor.stop)
        producer = ProducerLoad(cfg, topic, rate=PRODUCE)
        producer.start()
        stack.callback(producer.stop)
        consumer = LaggingConsumer(cfg, topic, group, max_rate=CONSUME,
                                   commit_interval=COMMIT_EVERY)
        consumer.start()
        stack.callback(consumer.stop)

        def estimate() -> tuple[float, float, float, str | None] | None:
            """(evaluated at, lag velocity, time to catch up, lag-seconds method) once the
            commit window spans 30 s."""
            result = monitor.service.evaluator.result(CLUSTER)
            g = result.group(group) if result is not None else None
            if g is None or not g.partitions:
                return None
            p = g.partitions[0]
            v = p.velocity
            if v is None or p.start is None or p.end is None \
                    or p.end.timestamp_ms - p.start.timestamp_ms < 30_000 \
                    or v.lag_velocity is None or v.time_to_catch_up_seconds is None:
                return None
            assert g.velocity is not None
            assert g.velocity.time_to_catch_up_seconds == v.time_to_catch_up_seconds
            return g.evaluated_at, v.lag_velocity, v.time_to_catch_up_seconds, \
                p.lag_seconds_source

        at, velocity, ttc, method = wait_for(estimate, 90, "a time to catch up", interval=0.5)
        assert velocity == pytest.approx(PRODUCE - CONSUME, rel=0.1)
        assert method == "lower_bound"
        metrics = scrape(monitor.service.http_port, group)
        assert metrics["kafka_consumergroup_group_lag_velocity"] < 0
        assert metrics["kafka_consumergroup_group_time_to_catch_up_seconds"] > 0
        assert metrics['kafka_monitor_group_lag_seconds_source{source="lower_bound"}'] == 1
        assert metrics["kafka_consumergroup_group_hot_partitions"] == 0
        # The record at the committed offset was fetched: 0.9 gives it no timestamp, so the
        # interpolation stays (and the topic is not fetched from again for a while).
        with urllib.request.urlopen(
                f"http://127.0.0.1:{monitor.service.http_port}/metrics") as r:
            text = r.read().decode()
        assert 'kafka_monitor_lag_time_fetches_total{cluster="local",result="no_timestamp"} 1' \
            in text.replace(".0\n", "\n")

        def caught_up() -> bool:
            position = consumer.positions.get((topic, 0), 0)
            return position >= watermark_offsets(cfg, topic)[0][1] - PRODUCE * 0.5

        wait_for(caught_up, ttc * 1.5 + 30, "the consumer to catch up", interval=0.25)
        took = time.time() - at
        print(f"{source}: velocity {velocity}/s, catch up in {ttc} s, took {took:.1f} s")
        assert ttc == pytest.approx(took, rel=0.1), (ttc, took)

        def method_now() -> str | None:
            result = monitor.service.evaluator.result(CLUSTER)
            g = result.group(group) if result is not None else None
            return g.lag_seconds_source if g is not None else None

        wait_for(method_now, 30, "the interpolated method",
                 ok=lambda m: m == "interpolated")
        metrics = scrape(monitor.service.http_port, group)
        assert metrics['kafka_monitor_group_lag_seconds_source{source="interpolated"}'] == 1


def scrape(port: int | None, group: str) -> dict[str, float]:
    """The group's series in /metrics: name (with its labels past cluster and group) ->
    value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
        lines = r.read().decode().splitlines()
    out = {}
    for line in lines:
        name, _, rest = line.partition("{")
        if f'group="{group}"' in rest:
            labels = rest.rpartition("}")[0].split(f'group="{group}"')[1].strip(",")
            out[name + (f"{{{labels}}}" if labels else "")] = float(line.rpartition(" ")[2])
    return out
