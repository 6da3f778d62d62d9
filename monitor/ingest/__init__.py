"""In: Kafka (Admin API, ``__consumer_offsets``, JMX, canary and mirror probes). Out:
observations put into the store. Each collector is a scheduled job reading one kind of data from
one cluster; ``registry`` builds them all from the configuration."""

from monitor.ingest.base import Collector, CollectorHealth

__all__ = ["Collector", "CollectorHealth"]
