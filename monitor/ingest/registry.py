"""The one place collectors are built from the configuration: a new kind of collector is a
class, its observation type, and one line here."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from monitor.config import MonitorConfig
from monitor.ingest.base import Collector
from monitor.ingest.broker_offsets import BrokerOffsetsCollector
from monitor.ingest.group_offsets import GroupOffsetsCollector
from monitor.ingest.jmx import JmxCollector
from monitor.ingest.metadata import MetadataCollector
from monitor.ingest.offsets_topic import OffsetsTopicCollector
from monitor.ingest.pipeline_statuses import PipelineStatusesCollector
from monitor.ingest.probes import build_probes
from monitor.ingest.record_times import Position, RecordTimesCollector
from monitor.store.store import Store


def build_collectors(
    config: MonitorConfig, store: Store,
    lagging: Callable[[str], Sequence[Position]] | None = None,
) -> list[Collector]:
    """Every collector the configuration asks for, one per kind and cluster. ``lagging``:
    the latest evaluation's lagging positions (for the record-timestamp reader)."""
    intervals = config.collectors
    collectors: list[Collector] = []
    for cluster in config.clusters:
        collectors.append(MetadataCollector(cluster, intervals.metadata_interval, store))
        collectors.append(
            BrokerOffsetsCollector(cluster, intervals.broker_offsets_interval, store)
        )
        if cluster.offsets_source in ("admin", "both"):
            collectors.append(
                GroupOffsetsCollector(
                    cluster,
                    intervals.group_offsets_interval,
                    intervals.group_concurrency,
                    store,
                    extra_groups=cluster.extra_groups,
                )
            )
        if cluster.offsets_source in ("offsets_topic", "both"):
            collectors.append(OffsetsTopicCollector(cluster, store))
        if cluster.offsets_source == "pipeline":
            collectors.append(
                PipelineStatusesCollector(cluster, intervals.group_offsets_interval, store)
            )
        if config.lag_time.enabled and lagging is not None \
                and cluster.offsets_source != "pipeline":
            collectors.append(RecordTimesCollector(
                cluster, config.evaluator.interval, config.lag_time, store, lagging))
        if cluster.jmx:
            collectors.append(
                JmxCollector(
                    cluster, intervals.jmx_interval, intervals.jmx_timeout, store,
                    intervals.jmx_mbeans,
                )
            )
    collectors.extend(build_probes(config, store))  # canaries and mirrors, when configured
    return collectors
