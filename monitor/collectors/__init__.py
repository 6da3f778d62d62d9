"""Collectors: scheduled jobs that read one kind of data from one cluster into the store."""

from monitor.collectors.base import Collector, CollectorHealth

__all__ = ["Collector", "CollectorHealth"]
