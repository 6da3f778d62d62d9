"""The pure health rules on hand-built metadata and JMX readings (the real-broker scenarios
are in ``test_broker_health_kafka.py``)."""

from __future__ import annotations

import pytest

from monitor.evaluate.cluster_health import (
    HealthThresholds,
    PartitionIssue,
    assess,
    diagnose,
    suspect_broker,
)
from monitor.model.jmx_metrics import BY_NAME, UPTIME, BrokerJmx, JmxScrape
from monitor.model.observations import ClusterMetadata, PartitionMetadata
from monitor.store.placement import update_placement

RNA = "REPLICA_NOT_AVAILABLE"


def meta(parts: dict[str, list[PartitionMetadata]], brokers: tuple[int, ...] = (0, 1, 2),
         at: float = 1000.0) -> ClusterMetadata:
    return ClusterMetadata("c", at, {b: f"h:{9000 + b}" for b in brokers}, -1,
                           {t: tuple(p) for t, p in parts.items()})


def part(i: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...],
         error: str | None = None) -> PartitionMetadata:
    return PartitionMetadata(i, leader, replicas, isr, error)


HEALTHY = meta({"t": [part(0, 0, (0, 1, 2), (0, 1, 2)), part(1, 1, (1, 2, 0), (1, 2, 0)),
                      part(2, 2, (2, 0, 1), (2, 0, 1))]})
# Broker 0 down, as Kafka 0.9 reports it: only live replicas listed, leaders moved.
BROKER0_DOWN = meta({"t": [part(0, 1, (1, 2), (1, 2), RNA), part(1, 1, (1, 2), (1, 2), RNA),
                           part(2, 2, (2, 1), (2, 1), RNA)]}, brokers=(1, 2))


def jmx(**brokers: dict[str, float] | str) -> JmxScrape:
    out = {}
    for key, values in brokers.items():
        b = int(key[1:])
        if isinstance(values, str):
            out[b] = BrokerJmx(b, 1000.0, 0.2, error=values)
        else:
            v = {(BY_NAME[n].mbean, BY_NAME[n].attribute): x for n, x in values.items()}
            v[(UPTIME.mbean, UPTIME.attribute)] = 600_000.0
            out[b] = BrokerJmx(b, 1000.0, 0.2, v, last_success=1000.0)
    return JmxScrape("c", 1000.0, out)


def ok_broker(controller: float = 0, idle: float = 0.9, urp: float = 0) -> dict[str, float]:
    return {"active_controller_count": controller, "request_handler_avg_idle_ratio": idle,
            "under_replicated_partitions": urp, "offline_partitions": 0}


def test_healthy_cluster_is_ok_with_balanced_load() -> None:
    d = diagnose(HEALTHY)
    assert d.under_replicated == d.offline == d.non_preferred_leaders == ()
    assert d.replicas_per_broker == {0: 3, 1: 3, 2: 3}
    assert d.leaders_per_broker == {0: 1, 1: 1, 2: 1}
    assert d.replica_skew == d.leader_skew == 0.0
    h = assess("c", HEALTHY, jmx=jmx(b0=ok_broker(1), b1=ok_broker(), b2=ok_broker()))
    assert (h.status, h.reasons, h.active_controllers) == ("OK", (), 1)


def test_down_broker_found_through_placement_memory() -> None:
    placement = update_placement(None, HEALTHY)
    placement = update_placement(placement, BROKER0_DOWN)
    assert placement.replicas[("t", 0)] == (0, 1, 2)  # remembered, not the live-only list
    d = diagnose(BROKER0_DOWN, placement)
    assert [i.missing for i in d.under_replicated] == [(0,), (0,), (0,)]
    assert d.suspect_broker == 0 and d.missing_brokers == (0,)
    assert d.live_brokers == (1, 2) and d.replicas_per_broker[0] == 3
    assert [i.partition for i in d.non_preferred_leaders] == [0]  # its leader, 0, is down
    h = assess("c", BROKER0_DOWN, placement)
    assert h.status == "ERR"
    assert {r.code for r in h.reasons} == {"broker_missing", "under_replicated_partitions"}


def test_without_memory_a_live_only_replica_list_hides_the_down_broker() -> None:
    d = diagnose(BROKER0_DOWN)
    assert d.under_replicated == () and d.suspect_broker is None
    # ... unless the broker is expected (it has a configured JMX endpoint).
    assert diagnose(BROKER0_DOWN, expected_brokers=[0, 1, 2]).missing_brokers == (0,)


def test_lagging_follower_is_the_suspect() -> None:
    m = meta({"t": [part(0, 0, (0, 1, 2), (0, 1)), part(1, 1, (1, 2, 0), (1, 0)),
                    part(2, 0, (2, 0, 1), (0, 1))]})
    d = diagnose(m)
    assert d.suspect_broker == 2 and len(d.under_replicated) == 3 and d.missing_brokers == ()
    h = assess("c", m)
    assert h.status == "WARN"
    assert h.reasons[0].code == "under_replicated_partitions" and h.reasons[0].broker == 2


@pytest.mark.parametrize(
    ("missing", "expected"),
    [([(2,), (2, 1)], 2), ([(2,), (1,)], None), ([(1, 2), (1, 2)], None), ([], None)],
)
def test_suspect_is_the_single_common_broker(missing: list[tuple[int, ...]],
                                            expected: int | None) -> None:
    issues = [PartitionIssue("t", i, 0, (0, 1, 2), (0,), m) for i, m in enumerate(missing)]
    assert suspect_broker(issues) == expected


def test_offline_partition_is_err() -> None:
    m = meta({"t": [part(0, -1, (0,), ())]})
    h = assess("c", m)
    assert len(h.diagnosis.offline) == 1 if h.diagnosis else False
    assert h.status == "ERR" and "offline_partitions" in {r.code for r in h.reasons}


def test_skew_counts_leaders_per_live_broker() -> None:
    m = meta({"t": [part(i, 0, (0, 1), (0, 1)) for i in range(4)]})
    d = diagnose(m)
    assert d.leaders_per_broker == {0: 4, 1: 0, 2: 0}
    assert d.leader_skew == pytest.approx(4 / (4 / 3) - 1)


@pytest.mark.parametrize(("idle", "status"), [(0.5, "OK"), (0.15, "WARN"), (0.05, "ERR")])
def test_request_handler_idle_thresholds(idle: float, status: str) -> None:
    h = assess("c", HEALTHY, jmx=jmx(b0=ok_broker(1, idle), b1=ok_broker(), b2=ok_broker()))
    assert h.status == status


def test_idle_ignored_while_the_one_minute_rate_warms_up() -> None:
    scrape = jmx(b0=ok_broker(1, idle=0.0), b1=ok_broker(), b2=ok_broker())
    young = {**scrape.brokers[0].values, (UPTIME.mbean, UPTIME.attribute): 3000.0}
    scrape.brokers[0] = BrokerJmx(0, 1000.0, 0.1, young)
    assert assess("c", HEALTHY, jmx=scrape).status == "OK"


def test_controller_sum_must_be_one() -> None:
    two = assess("c", HEALTHY, jmx=jmx(b0=ok_broker(1), b1=ok_broker(1), b2=ok_broker()))
    none = assess("c", HEALTHY, jmx=jmx(b0=ok_broker(), b1=ok_broker(), b2=ok_broker()))
    assert (two.status, two.active_controllers) == ("ERR", 2)
    assert (none.status, none.active_controllers) == ("ERR", 0)


def test_unreachable_jmx_is_warn_and_softens_a_missing_controller() -> None:
    h = assess("c", HEALTHY, jmx=jmx(b0="connection-error: refused", b1=ok_broker(),
                                      b2=ok_broker()))
    assert h.status == "WARN"
    assert [(r.code, r.broker) for r in h.reasons if r.code == "jmx_unreachable"] == [
        ("jmx_unreachable", 0)]
    assert h.as_dict()["jmx"]["0"]["ok"] is False  # type: ignore[index]


def test_jmx_under_replication_and_stale_metadata_are_warn() -> None:
    h = assess("c", HEALTHY, jmx=jmx(b0=ok_broker(1, urp=2), b1=ok_broker(), b2=ok_broker()))
    assert h.status == "WARN" and h.reasons[0].broker == 0
    stale = assess("c", HEALTHY, thresholds=HealthThresholds(max_metadata_age=60), now=2000)
    assert [r.code for r in stale.reasons] == ["metadata_stale"]
    assert assess("c", None).status == "WARN"


def test_absent_metric_is_reported_absent_not_zero() -> None:
    scrape = jmx(b0=ok_broker(1), b1=ok_broker(), b2=ok_broker())
    scrape = JmxScrape("c", 1000.0, scrape.brokers, (BY_NAME["under_min_isr_partitions"].query,))
    out = assess("c", HEALTHY, jmx=scrape).as_dict()
    broker = out["jmx"]["0"]  # type: ignore[index]
    assert broker["metrics"]["under_min_isr_partitions"] is None
    assert broker["absent"] == ["under_min_isr_partitions"]


def test_placement_memory_survives_the_dead_leaders_election() -> None:
    """Partitions the dead broker led are first answered LEADER_NOT_AVAILABLE with the live
    replicas only, then REPLICA_NOT_AVAILABLE once re-elected: both keep the remembered
    replica list, so all three stay under-replicated (the first answer used to overwrite the
    memory and the partition then looked fully replicated)."""
    electing = meta({"t": [part(0, -1, (1, 2), (1, 2), "LEADER_NOT_AVAILABLE"),
                           part(1, 1, (1, 2), (1, 2), RNA), part(2, 2, (2, 1), (2, 1), RNA)]},
                    brokers=(1, 2))
    placement = update_placement(None, HEALTHY)
    placement = update_placement(placement, electing)
    placement = update_placement(placement, BROKER0_DOWN)
    assert placement.replicas[("t", 0)] == (0, 1, 2)
    d = diagnose(BROKER0_DOWN, placement)
    assert len(d.under_replicated) == 3 and d.suspect_broker == 0


def test_placement_forgets_deleted_topics_and_trusts_reassignment() -> None:
    p = update_placement(None, HEALTHY)
    p = update_placement(p, meta({"u": [part(0, 1, (1, 2), (1, 2))]}, brokers=(1, 2)))
    assert set(p.replicas) == {("u", 0)} and p.brokers == {1, 2}
