"""The canaries' and mirrors' Prometheus collectors, found among the running collectors.

The canaries count their own events as they happen (``monitor/ingest/canary/metrics.py``);
the mirror gauges are read at scrape time from the mirror collectors' latest round and the
evaluator, and the failover gauges from the failover collectors' latest plans, here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

from prometheus_client.core import Metric
from prometheus_client.registry import Collector as PromCollector

from monitor.evaluate.job import Evaluator
from monitor.ingest.base import Collector
from monitor.ingest.canary.probe import CanaryProbe
from monitor.ingest.failover.collector import FailoverCollector
from monitor.ingest.mirror import MirrorCollector
from monitor.model import metric_catalogue as catalogue
from monitor.model.failover import STATES
from monitor.serve.probe_views import STATUS_CODE, group_status


def probe_metrics(collectors: Sequence[Collector], evaluator: Evaluator) -> list[PromCollector]:
    """The Prometheus collectors to register for the probes among ``collectors``."""
    out: list[PromCollector] = []
    for c in collectors:
        if isinstance(c, CanaryProbe) and all(c.metrics is not m for m in out):
            out.append(c.metrics)
    mirrors = [c for c in collectors if isinstance(c, MirrorCollector)]
    if mirrors:
        out.append(MirrorMetrics(mirrors, evaluator))
    failovers = [c for c in collectors if isinstance(c, FailoverCollector)]
    if failovers:
        out.append(FailoverMetrics(failovers))
    return out


class FailoverMetrics(PromCollector):
    """``kafka_mirror_failover_*{mirror,group}`` from the failover collectors' latest plans
    (:mod:`monitor.model.failover`): ready 0/1, the state as a one-hot ``state`` label, the
    records and seconds a failover would read again, and the plan's age."""

    def __init__(self, collectors: list[FailoverCollector]) -> None:
        self.collectors = collectors

    def collect(self) -> Iterator[Metric]:
        now = time.time()
        ready = catalogue.gauge("kafka_mirror_failover_ready")
        state = catalogue.gauge("kafka_mirror_failover_state")
        records = catalogue.gauge("kafka_mirror_failover_reread_records")
        seconds = catalogue.gauge("kafka_mirror_failover_reread_seconds")
        age = catalogue.gauge("kafka_mirror_failover_age_seconds")
        for c in self.collectors:
            for group, plan in c.plans().items():
                labels = [c.mirror.name, group]
                ready.add_metric(labels, float(plan.ready))
                for s in STATES:
                    state.add_metric([*labels, s], float(plan.state == s))
                if plan.reread_records is not None:
                    records.add_metric(labels, plan.reread_records)
                if plan.reread_seconds is not None:
                    seconds.add_metric(labels, plan.reread_seconds)
                age.add_metric(labels, plan.age(now))
        yield from (ready, state, records, seconds, age)


class MirrorMetrics(PromCollector):
    """``kafka_mirror_*`` gauges from the mirror collectors' latest round and the evaluator:

    * ``kafka_mirror_lag{mirror,topic,partition}``: source - destination log-end offset;
      ``kafka_mirror_topic_lag{mirror,topic}``: the same summed over partitions;
    * ``kafka_mirror_group_status{mirror}`` (0 NOTFOUND, 1 OK, 2 WARN, 3 REWIND, 4 STALL,
      5 STOP/ERR), ``kafka_mirror_group_lag{mirror}`` (records),
      ``kafka_mirror_group_lag_seconds{mirror}``;
    * ``kafka_mirror_window_source_records``, ``_destination_records``, ``_difference``
      ``{mirror,topic}`` for the last closed window, and ``kafka_mirror_window_difference_sum``
      since the monitor started (positive: lost on the way, negative: duplicated).
    """

    def __init__(self, collectors: list[MirrorCollector], evaluator: Evaluator) -> None:
        self.collectors = collectors
        self.evaluator = evaluator

    def collect(self) -> Iterator[Metric]:
        lag = catalogue.gauge("kafka_mirror_lag")
        topic_lag = catalogue.gauge("kafka_mirror_topic_lag")
        status = catalogue.gauge("kafka_mirror_group_status")
        glag = catalogue.gauge("kafka_mirror_group_lag")
        glag_s = catalogue.gauge("kafka_mirror_group_lag_seconds")
        w_src = catalogue.gauge("kafka_mirror_window_source_records")
        w_dst = catalogue.gauge("kafka_mirror_window_destination_records")
        w_diff = catalogue.gauge("kafka_mirror_window_difference")
        w_sum = catalogue.gauge("kafka_mirror_window_difference_sum")
        for c in self.collectors:
            name = c.mirror.name
            snap = c.snapshot()
            for row in snap["lag"]:
                lag.add_metric([name, row["topic"], str(row["partition"])], row["lag"])
            for row in snap["topics"]:
                if row["lag"] is not None:
                    topic_lag.add_metric([name, row["topic"]], row["lag"])
            g = group_status(self.evaluator, c.mirror)
            if g is not None:
                status.add_metric([name], STATUS_CODE.get(g["status"], 0))
                if g["totallag"] is not None:
                    glag.add_metric([name], g["totallag"])
                    glag_s.add_metric([name], g["lag_seconds"])
            for topic, w in c.last_windows().items():
                w_src.add_metric([name, topic], w.source_records)
                w_dst.add_metric([name, topic], w.destination_records)
                w_diff.add_metric([name, topic], w.difference)
            for topic, net in c.net_difference().items():
                w_sum.add_metric([name, topic], net)
        yield from (lag, topic_lag, status, glag, glag_s, w_src, w_dst, w_diff, w_sum)
