"""Which canary and mirror probes the configuration asks for.

Kept apart from ``service.py`` so the service only asks for "the probes" and registers what
comes back; each probe kind lives in its own module (``canary/``, ``mirror.py``).
"""

from __future__ import annotations

from monitor.config import MonitorConfig
from monitor.ingest.base import Collector
from monitor.ingest.canary.metrics import CanaryMetrics
from monitor.ingest.canary.probe import CanaryProbe
from monitor.ingest.failover.collector import FailoverCollector
from monitor.ingest.mirror import MirrorCollector
from monitor.store.store import Store


def build_probes(config: MonitorConfig, store: Store) -> list[Collector]:
    """A canary per cluster (``canary.enabled``) and, per mirror, its checks, (with
    ``mirrors[].canary``) a canary from its source to its destination and (with
    ``mirrors[].failover.enabled``) its groups' failover plans."""
    probes: list[Collector] = []
    if config.canary.enabled:
        metrics = CanaryMetrics("kafka_canary", "cluster")
        for cluster in config.clusters:
            probes.append(CanaryProbe(cluster.name, cluster, cluster, config.canary, metrics))
    mirror_metrics = CanaryMetrics("kafka_mirror_canary", "mirror")
    for mirror in config.mirrors:
        canary = None
        if mirror.canary:
            canary = CanaryProbe(
                mirror.name, config.cluster(mirror.source), config.cluster(mirror.destination),
                config.canary, mirror_metrics, kind="mirror-canary",
                topic=mirror.canary_topic, destination_topic=mirror.destination_canary_topic,
            )
            probes.append(canary)
        probes.append(MirrorCollector(
            mirror, config.collectors.broker_offsets_interval, store, canary
        ))
        if mirror.failover.enabled:
            probes.append(FailoverCollector(
                mirror, config.cluster(mirror.source), config.cluster(mirror.destination), store
            ))
    return probes
