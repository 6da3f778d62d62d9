"""Group lifecycle on the real Kafka 0.9 broker, on the default configuration: a group whose
second consumer keeps joining and leaving is watched by two services at once, one reading
offsets with the Admin API (the default) and one reading ``__consumer_offsets``. Each join and
each leave is one rebalance. Each change is held longer than a read interval, so the Admin API
can see every one.

Both count the rebalances. The offsets topic counts exactly, from generations; the Admin API
counts one per changed member set. Both say a member joined or left, and both report the storm
once more than 5 rebalances fall within 10 minutes: in the API object, in ``/metrics``, and in
the state history. The storm leaves the status word alone: the group stays OK.
"""

from __future__ import annotations

import contextlib
import time
import urllib.request
from functools import partial

import pytest

from monitor.dev.localkafka import LocalKafka
from monitor.dev.localkafka.workload import HealthyConsumer, ProducerLoad, librdkafka_logger
from monitor.model.verdicts import GroupStatus
from tests.harness.kafka_fixtures import defaults_config, make_unique_name
from tests.harness.polling import wait_for
from tests.harness.service_thread import ServiceThread

pytestmark = [pytest.mark.kafka, pytest.mark.slow(95), pytest.mark.timeout(600)]

CLUSTER = "local"
SOURCES = ("admin", "offsets_topic")
CYCLES = 3  # joins and leaves of the second consumer: 6 rebalances, a storm (more than 5)
HOLD = 15.0  # seconds each membership is held: longer than a read interval (10 s)


def status(monitor: ServiceThread, group: str) -> GroupStatus | None:
    result = monitor.service.evaluator.result(CLUSTER)
    return result.group(group) if result is not None else None


def metric(monitor: ServiceThread, line_start: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{monitor.service.http_port}/metrics") as r:
        text = r.read().decode()
    found = [ln for ln in text.splitlines() if ln.startswith(line_start)]
    assert len(found) == 1, (line_start, found)
    return float(found[0].rpartition(" ")[2])


def test_joins_and_leaves_are_counted_with_their_causes_and_a_storm_is_reported(
    kafka: LocalKafka,
) -> None:
    prefix = make_unique_name("lifecycle")
    topic = group = prefix
    kafka.create_topic(topic, partitions=2)
    cfg = {**kafka.client_config(), "logger": librdkafka_logger}
    monitors = {s: ServiceThread(defaults_config(kafka, prefix, s)).start() for s in SOURCES}
    with contextlib.ExitStack() as stack:
        for m in monitors.values():
            stack.callback(m.stop)
        producer = ProducerLoad(cfg, topic, rate=20.0)
        producer.start()
        stack.callback(producer.stop)
        first = HealthyConsumer(cfg, topic, group)
        first.start()
        stack.callback(first.stop)
        assert first.joined.wait(60), "the first consumer never got its partitions"

        # Both monitors know the group with its one member before the churn starts.
        def one_member(m: ServiceThread) -> bool:
            g = status(m, group)
            return g is not None and g.members == 1 and g.lifecycle is not None

        for source, m in monitors.items():
            wait_for(partial(one_member, m), 60, f"{source}: the group with one member")
            before = status(m, group)
            assert before is not None and before.lifecycle is not None
        base = {s: status(m, group).lifecycle.rebalances  # type: ignore[union-attr]
                for s, m in monitors.items()}
        for _ in range(CYCLES):
            second = HealthyConsumer(cfg, topic, group)
            second.start()
            assert second.joined.wait(60), "the second consumer never got a partition"
            time.sleep(HOLD)
            second.stop()
            time.sleep(HOLD)
        want = 2 * CYCLES

        def rebalances_since_base(source: str) -> int:
            g = status(monitors[source], group)
            return -1 if g is None or g.lifecycle is None else g.lifecycle.rebalances - base[source]

        for source, m in monitors.items():
            wait_for(partial(rebalances_since_base, source), 60,
                     f"{source}: {want} rebalances counted", ok=lambda n: n >= want)
            g = status(m, group)
            assert g is not None and g.lifecycle is not None
            lc = g.lifecycle
            counted = lc.rebalances - base[source]
            if source == "offsets_topic":
                assert lc.counted_from == "generations"
                assert counted == want, lc.history  # exact: one generation per join or leave
            else:
                assert lc.counted_from == "member changes"
                assert want <= counted <= want + 1, lc.history
            causes = [c.cause for c in lc.history if c.rebalances]
            assert causes[-want:].count("member joined") == CYCLES, lc.history
            assert causes[-want:].count("member left or timed out") == CYCLES, lc.history
            assert (lc.members_joined, lc.members_left) >= (CYCLES, CYCLES)
            assert lc.storm and lc.recent_rebalances > 5
            assert g.status == "OK" and g.members == 1  # a storm is not a status word
            labels = f'{{cluster="{CLUSTER}",group="{group}"}}'
            assert metric(m, f"kafka_monitor_group_rebalance_storm{labels}") == 1
            assert metric(m, f"kafka_consumergroup_rebalances_total{labels}") == lc.rebalances
            assert metric(
                m, f'kafka_consumergroup_state{{cluster="{CLUSTER}",group="{group}",'
                   'state="Stable"}') == 1
