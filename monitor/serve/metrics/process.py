"""The service process's own story: how often it was restarted after a native crash."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector as MetricsCollector

from monitor.model import metric_catalogue as catalogue

#: Exported at 0 until they happen, so that the first crash is an increase in Prometheus.
USUAL_SIGNALS = ("SIGABRT", "SIGBUS", "SIGKILL", "SIGSEGV")


class CrashRestartMetrics(MetricsCollector):
    """``kafka_monitor_crash_restarts_total{signal}``: crashes the supervisor restarted this
    service after (counted by the supervisor, which outlives them)."""

    def __init__(self, crashes: Mapping[str, int]) -> None:
        self._crashes = {**dict.fromkeys(USUAL_SIGNALS, 0), **crashes}

    def collect(self) -> Iterator[Metric]:
        family = catalogue.counter("kafka_monitor_crash_restarts")
        for name, count in sorted(self._crashes.items()):
            family.add_metric([name], count)
        yield family
