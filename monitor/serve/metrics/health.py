"""Broker and cluster health as Prometheus metrics (a ``prometheus_client`` custom collector).

Exports what the store already holds, assessed at scrape time; a Prometheus scrape never
talks to Kafka or starts a JVM. Names:

Broker level, from JMX, labelled ``cluster`` and ``broker`` (only for brokers that answered the
last scrape; a metric the broker does not have, e.g. under-min-ISR on Kafka < 0.10, is absent):

* ``kafka_broker_under_replicated_partitions``, ``kafka_broker_under_min_isr_partitions``,
  ``kafka_broker_partition_count``, ``kafka_broker_leader_count``,
  ``kafka_broker_active_controller_count``, ``kafka_broker_offline_partitions``
* ``kafka_broker_request_handler_avg_idle_ratio``, ``kafka_broker_network_processor_avg_idle_ratio``
  (fractions 0..1)
* ``kafka_broker_{bytes_in,bytes_out,messages_in,isr_shrinks,isr_expands}_per_second``
  (one-minute rates) and the same as counters ``kafka_broker_..._total``
* ``kafka_broker_jmx_value{cluster,broker,mbean,attribute}``: configured MBeans outside that list
* ``kafka_monitor_broker_jmx_up`` (1 when the last scrape answered),
  ``kafka_monitor_broker_jmx_scrape_duration_seconds``,
  ``kafka_monitor_broker_jmx_last_success_timestamp_seconds``

Broker level, from metadata: ``kafka_monitor_broker_in_metadata`` (0 for a known broker
missing), ``kafka_monitor_broker_replicas``, ``kafka_monitor_broker_leaders``,
``kafka_monitor_broker_suspect`` (1 on the broker common to every under-replicated partition).

Cluster level, labelled ``cluster``: ``kafka_monitor_cluster_status`` (0 OK, 1 WARN, 2 ERR),
``kafka_monitor_cluster_under_replicated_partitions``, ``kafka_monitor_cluster_offline_partitions``,
``kafka_monitor_cluster_non_preferred_leaders``, ``kafka_monitor_cluster_replica_skew``,
``kafka_monitor_cluster_leader_skew`` (max/mean - 1 over live brokers) and
``kafka_monitor_cluster_active_controllers`` (summed over brokers that answered JMX).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from monitor.config import MonitorConfig
from monitor.evaluate.cluster_health import STATUS_LEVEL, ClusterHealth, HealthThresholds, assess
from monitor.model import metric_catalogue as catalogue
from monitor.model.jmx_metrics import CATALOGUE
from monitor.store.store import Store

_CATALOGUED = {(m.mbean, m.attribute) for m in CATALOGUE}


def thresholds_for(config: MonitorConfig) -> HealthThresholds:
    """Health thresholds from the configuration: metadata older than three refresh intervals
    no longer counts as current."""
    return HealthThresholds(
        idle_warn=config.health.request_handler_idle_warn,
        idle_err=config.health.request_handler_idle_err,
        max_metadata_age=3 * config.collectors.metadata_interval,
    )


def cluster_health(store: Store, cluster: str, thresholds: HealthThresholds) -> ClusterHealth:
    """Assess one cluster from what the store holds now."""
    metadata, placement, jmx = store.broker_health_input(cluster)
    return assess(cluster, metadata, placement, jmx, thresholds, now=time.time())


class HealthMetrics(Collector):
    """Yields the health of every configured cluster on each Prometheus scrape."""

    def __init__(self, store: Store, config: MonitorConfig) -> None:
        self._store = store
        self._clusters = [c.name for c in config.clusters]
        self._thresholds = thresholds_for(config)

    def collect(self) -> Iterator[Metric]:
        return iter(health_metric_families(
            cluster_health(self._store, c, self._thresholds) for c in self._clusters
        ))


def health_metric_families(healths: Iterable[ClusterHealth]) -> list[Metric]:
    """Metric families for the given assessments (one sample per cluster/broker)."""
    jmx = {m.name: catalogue.family(f"kafka_broker_{m.name}") for m in CATALOGUE}
    other = catalogue.gauge("kafka_broker_jmx_value")
    up = catalogue.gauge("kafka_monitor_broker_jmx_up")
    duration = catalogue.gauge("kafka_monitor_broker_jmx_scrape_duration_seconds")
    last_ok = catalogue.gauge("kafka_monitor_broker_jmx_last_success_timestamp_seconds")
    in_md = catalogue.gauge("kafka_monitor_broker_in_metadata")
    replicas = catalogue.gauge("kafka_monitor_broker_replicas")
    leaders = catalogue.gauge("kafka_monitor_broker_leaders")
    suspect = catalogue.gauge("kafka_monitor_broker_suspect")
    status = catalogue.gauge("kafka_monitor_cluster_status")
    urp = catalogue.gauge("kafka_monitor_cluster_under_replicated_partitions")
    offline = catalogue.gauge("kafka_monitor_cluster_offline_partitions")
    moved = catalogue.gauge("kafka_monitor_cluster_non_preferred_leaders")
    rskew = catalogue.gauge("kafka_monitor_cluster_replica_skew")
    lskew = catalogue.gauge("kafka_monitor_cluster_leader_skew")
    controllers = catalogue.gauge("kafka_monitor_cluster_active_controllers")
    for health in healths:
        name = health.cluster
        status.add_metric([name], STATUS_LEVEL[health.status])
        if health.active_controllers is not None:
            controllers.add_metric([name], health.active_controllers)
        if health.jmx is not None:
            for broker in health.jmx.brokers.values():
                labels = [name, str(broker.broker_id)]
                up.add_metric(labels, 1 if broker.ok else 0)
                duration.add_metric(labels, broker.duration)
                if broker.last_success is not None:
                    last_ok.add_metric(labels, broker.last_success)
                for m in CATALOGUE:
                    value = broker.get(m)
                    if value is not None:
                        jmx[m.name].add_metric(labels, value)
                for (mbean, attribute), value in broker.values.items():
                    if (mbean, attribute) not in _CATALOGUED and mbean != "java.lang:type=Runtime":
                        other.add_metric([*labels, mbean, attribute], value)
        d = health.diagnosis
        if d is not None:
            urp.add_metric([name], len(d.under_replicated))
            offline.add_metric([name], len(d.offline))
            moved.add_metric([name], len(d.non_preferred_leaders))
            rskew.add_metric([name], d.replica_skew)
            lskew.add_metric([name], d.leader_skew)
            live = set(d.live_brokers)
            for broker_id in d.replicas_per_broker:
                labels = [name, str(broker_id)]
                in_md.add_metric(labels, 1 if broker_id in live else 0)
                replicas.add_metric(labels, d.replicas_per_broker[broker_id])
                leaders.add_metric(labels, d.leaders_per_broker[broker_id])
                suspect.add_metric(labels, 1 if broker_id == d.suspect_broker else 0)
    return [*jmx.values(), other, up, duration, last_ok, in_md, replicas, leaders, suspect,
            status, urp, offline, moved, rskew, lskew, controllers]
