"""Broker JMX readings: the catalogue of MBeans health is judged on, and the typed observation a
JMX scrape produces.

Kept apart from the collector (which starts JVMs) so that the store, the pure health rules and
the Prometheus view can name metrics without importing process-handling code.

MBean names are those Kafka brokers expose (checked against a live 0.9.0.1 broker). Meters
(``...PerSec``, ``RequestHandlerAvgIdlePercent``) are read through ``OneMinuteRate``, and
the traffic meters' ``Count`` as well (a counter Prometheus can take a ``rate()`` of).
``RequestHandlerAvgIdlePercent`` is a meter of idle nanoseconds per second per thread, so its
rate is a fraction 0..1 despite the name. ``UnderMinIsrPartitionCount`` does not exist before
Kafka 0.10.x: where a broker lacks an MBean it is reported *absent*, never as 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

MetricKind = Literal["gauge", "counter"]


@dataclass(frozen=True, slots=True)
class JmxMetric:
    """One attribute of one MBean with the name it is known by in health and Prometheus."""

    name: str
    mbean: str
    attribute: str
    help: str
    kind: MetricKind = "gauge"

    @property
    def query(self) -> str:
        """The jmxquery query string (``objectName/attribute``)."""
        return f"{self.mbean}/{self.attribute}"


_RM = "kafka.server:type=ReplicaManager,name="
_KC = "kafka.controller:type=KafkaController,name="
_BTM = "kafka.server:type=BrokerTopicMetrics,name="

CATALOGUE: tuple[JmxMetric, ...] = (
    JmxMetric("under_replicated_partitions", f"{_RM}UnderReplicatedPartitions", "Value",
              "Partitions led by this broker whose ISR is smaller than their replica set."),
    JmxMetric("under_min_isr_partitions", f"{_RM}UnderMinIsrPartitionCount", "Value",
              "Partitions led by this broker with fewer in-sync replicas than min.insync."
              "replicas (Kafka >= 0.10 only)."),
    JmxMetric("partition_count", f"{_RM}PartitionCount", "Value",
              "Partition replicas hosted by this broker."),
    JmxMetric("leader_count", f"{_RM}LeaderCount", "Value",
              "Partitions this broker leads."),
    JmxMetric("active_controller_count", f"{_KC}ActiveControllerCount", "Value",
              "1 on the broker that is the active controller, 0 elsewhere."),
    JmxMetric("offline_partitions", f"{_KC}OfflinePartitionsCount", "Value",
              "Partitions without a leader, as this broker's controller sees them."),
    JmxMetric("request_handler_avg_idle_ratio",
              "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent",
              "OneMinuteRate", "Fraction of time request handler threads are idle (1-min rate)."),
    JmxMetric("network_processor_avg_idle_ratio",
              "kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent", "Value",
              "Fraction of time network processor threads are idle."),
    JmxMetric("bytes_in_per_second", f"{_BTM}BytesInPerSec", "OneMinuteRate",
              "Bytes received from clients per second (1-min rate)."),
    JmxMetric("bytes_in", f"{_BTM}BytesInPerSec", "Count",
              "Bytes received from clients.", "counter"),
    JmxMetric("bytes_out_per_second", f"{_BTM}BytesOutPerSec", "OneMinuteRate",
              "Bytes sent to clients per second (1-min rate)."),
    JmxMetric("bytes_out", f"{_BTM}BytesOutPerSec", "Count",
              "Bytes sent to clients.", "counter"),
    JmxMetric("messages_in_per_second", f"{_BTM}MessagesInPerSec", "OneMinuteRate",
              "Messages received per second (1-min rate)."),
    JmxMetric("messages_in", f"{_BTM}MessagesInPerSec", "Count",
              "Messages received.", "counter"),
    JmxMetric("isr_shrinks_per_second", f"{_RM}IsrShrinksPerSec", "OneMinuteRate",
              "ISR shrinks per second (1-min rate)."),
    JmxMetric("isr_shrinks", f"{_RM}IsrShrinksPerSec", "Count", "ISR shrinks.", "counter"),
    JmxMetric("isr_expands_per_second", f"{_RM}IsrExpandsPerSec", "OneMinuteRate",
              "ISR expansions per second (1-min rate)."),
    JmxMetric("isr_expands", f"{_RM}IsrExpandsPerSec", "Count", "ISR expansions.", "counter"),
)
BY_NAME: dict[str, JmxMetric] = {m.name: m for m in CATALOGUE}
DEFAULT_MBEANS: tuple[str, ...] = tuple(dict.fromkeys(m.query for m in CATALOGUE))

# Always asked for in the same call: proves the JVM answered (an empty answer cannot be told
# apart from "nothing matched" otherwise) and tells how long the broker has been up.
UPTIME = JmxMetric("jvm_uptime_seconds", "java.lang:type=Runtime", "Uptime", "JVM uptime.")

MBeanAttribute = tuple[str, str]  # (object name, attribute)


@dataclass(frozen=True, slots=True)
class BrokerJmx:
    """One broker's answer to one scrape: numeric attribute values, or the error that stopped
    the scrape (``values`` is then empty: a stale reading must not pass for a current one)."""

    broker_id: int
    observed_at: float  # unix seconds
    duration: float  # seconds the scrape took
    values: dict[MBeanAttribute, float] = field(default_factory=dict)
    error: str | None = None
    last_success: float | None = None  # unix seconds of the last good scrape of this broker

    @property
    def ok(self) -> bool:
        return self.error is None

    def get(self, metric: JmxMetric) -> float | None:
        """The metric's value, or None when the broker does not have it (or failed)."""
        return self.values.get((metric.mbean, metric.attribute))

    @property
    def uptime_seconds(self) -> float | None:
        uptime_ms = self.get(UPTIME)
        return None if uptime_ms is None else uptime_ms / 1000.0


@dataclass(frozen=True, slots=True)
class JmxScrape:
    """One scrape of every configured broker of a cluster."""

    cluster: str
    observed_at: float
    brokers: dict[int, BrokerJmx]
    queries: tuple[str, ...] = ()  # what was asked for, to tell "absent" from "not asked"
