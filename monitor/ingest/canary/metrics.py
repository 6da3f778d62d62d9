"""Prometheus metrics of canary probes: ``prometheus_client`` counters and histograms, updated
as records are sent, acknowledged and consumed, plus windowed gauges from the probes' latest
snapshots (computed on their schedule, not at scrape time).

One :class:`CanaryMetrics` serves every probe of a kind: ``kafka_canary_*`` labelled
``cluster`` for the per-cluster canaries, ``kafka_mirror_canary_*`` labelled ``mirror`` for
canaries across mirrors (there the end-to-end latency is the replication latency, and
``partition``/``broker`` are the source partition and its leader). Names (``<p>`` = prefix):

* ``<p>_produce_attempts_total``, ``<p>_produce_acks_total``, ``<p>_produce_errors_total``,
  ``<p>_records_consumed_total``, ``<p>_records_lost_total``, ``<p>_records_duplicated_total``,
  ``<p>_records_out_of_order_total``, ``<p>_records_late_total``
  (labels scope, ``partition``, ``broker`` = the partition's leader when the record was sent);
  produce availability = acks / attempts, per partition or summed by broker. Every one is
  exported at 0 for each (partition, leader) as soon as the probe's metadata names them
  (:meth:`CanaryMetrics.zero`), so ``increase()`` and ``rate()`` see the first loss or
  duplicate too instead of a series that appears already at 1.
* ``<p>_produce_latency_seconds``, ``<p>_end_to_end_latency_seconds`` histograms (scope,
  ``broker``): per broker, not per partition, to bound the series count (the API has
  per-partition quantiles).
* ``<p>_commit_latency_seconds`` histogram, ``<p>_commit_attempts_total``,
  ``<p>_commit_errors_total`` (scope, at 0 from the start): the probe's consumer group
  committing its offsets.
* ``<p>_produce_availability``, ``<p>_consume_availability`` gauges (scope, ``partition``)
  over the probe's window, and ``<p>_broker_covered`` (scope, ``broker``): 1 when the broker
  leads at least one canary partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import Counter, Histogram
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from monitor.model import metric_catalogue as catalogue

if TYPE_CHECKING:
    from monitor.ingest.canary.probe import CanaryProbe

LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)


class CanaryMetrics(Collector):
    """The metric objects (unregistered; this collector yields them) and the probes whose
    windowed figures become gauges."""

    def __init__(self, prefix: str, scope: str) -> None:
        self.prefix = prefix
        self.scope = scope
        self.probes: list[CanaryProbe] = []
        if (prefix, scope) not in catalogue.CANARY_SCOPES:
            raise ValueError(f"no canary metrics {prefix}_* labelled {scope} in the catalogue")

        def counter(name: str) -> Counter:
            f = catalogue.entry(f"{prefix}_{name}")
            return Counter(f.name, f.help, f.labels, registry=None)

        def histogram(name: str) -> Histogram:
            f = catalogue.entry(f"{prefix}_{name}")
            return Histogram(f.name, f.help, f.labels, registry=None, buckets=LATENCY_BUCKETS)

        self.attempts = counter("produce_attempts")
        self.acks = counter("produce_acks")
        self.errors = counter("produce_errors")
        self.consumed = counter("records_consumed")
        self.lost = counter("records_lost")
        self.duplicated = counter("records_duplicated")
        self.out_of_order = counter("records_out_of_order")
        self.late = counter("records_late")
        self.produce_latency = histogram("produce_latency_seconds")
        self.e2e_latency = histogram("end_to_end_latency_seconds")
        self.commit_latency = histogram("commit_latency_seconds")
        self.commit_attempts = counter("commit_attempts")
        self.commit_errors = counter("commit_errors")
        self._per_partition = [
            self.attempts, self.acks, self.errors, self.consumed, self.lost, self.duplicated,
            self.out_of_order, self.late,
        ]
        self._objects = [
            self.attempts, self.acks, self.errors, self.consumed, self.lost, self.duplicated,
            self.out_of_order, self.late, self.produce_latency, self.e2e_latency,
            self.commit_latency, self.commit_attempts, self.commit_errors,
        ]

    def zero(self, scope_value: str, partition: int, broker: int) -> None:
        """Create the per-partition counters of one (partition, leader) at 0 (children that
        exist keep their value): a counter whose series only appears with its first event
        hides that event from ``increase()``."""
        labels = (scope_value, str(partition), str(broker))
        for counter in self._per_partition:
            counter.labels(*labels)

    def zero_scope(self, scope_value: str) -> None:
        """Create the probe-wide commit counters at 0."""
        self.commit_attempts.labels(scope_value)
        self.commit_errors.labels(scope_value)

    def collect(self) -> Iterator[Metric]:
        for obj in self._objects:
            yield from obj.collect()
        produce = catalogue.gauge(f"{self.prefix}_produce_availability")
        consume = catalogue.gauge(f"{self.prefix}_consume_availability")
        covered = catalogue.gauge(f"{self.prefix}_broker_covered")
        for probe in self.probes:
            snap = probe.snapshot()
            for part in snap["partitions"]:
                key = [probe.scope_value, str(part["partition"])]
                if part["produce_availability"] is not None:
                    produce.add_metric(key, part["produce_availability"])
                if part["consume_availability"] is not None:
                    consume.add_metric(key, part["consume_availability"])
            for b in snap["brokers_covered"]:
                covered.add_metric([probe.scope_value, str(b)], 1.0)
            for b in snap["brokers_uncovered"]:
                covered.add_metric([probe.scope_value, str(b)], 0.0)
        yield produce
        yield consume
        yield covered
