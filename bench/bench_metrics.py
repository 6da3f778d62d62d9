"""Benchmark of a full Prometheus scrape of the exporter, against prometheus_client's ordinary
per-sample path in the same run.

    .venv/bin/python bench/bench_metrics.py                    # 10,000 topics x 10 partitions
    .venv/bin/python bench/bench_metrics.py --topics 1000      # smaller
    .venv/bin/python bench/bench_metrics.py --no-reference     # skip the slow reference

A real :class:`~monitor.store.Store` is fed with synthetic observations (no Kafka): ``--topics``
x ``--partitions`` partitions, ``--groups-per-topic`` groups on each (healthy, lagging and
stopped mixed, one member each), ``--rounds`` rounds of log ends and commits; one real
evaluation round gives the :class:`~monitor.evaluate.job.ClusterEvaluation`. Then the service's
own path is timed, a full ``/metrics`` body as the handler builds it for Prometheus (which
asks for gzip): ``generate_latest`` over a registry holding :class:`LagExporter`, then the
exporter's compressed pieces, as one gzip stream. Printed as one JSON object:

* ``prerender_s``: rendering and compressing the text after a round (in the service, in the
  evaluator's thread, off the event loop); ``scrape_first_s``: the first scrape after that;
  ``scrape_warm_s``: later scrapes in the same round, best of ``--repeat``;
  ``scrape_cold_s``: a scrape that comes before the pre-render and renders itself, the worst
  case; ``target_s`` 1.0 applies to it.
* ``per_topic``: the same with ``exporter.partition_series: false``.
* ``reference_standard_s``: only the four group-partition families built the ordinary way
  (``GaugeMetricFamily.add_metric`` per sample) and rendered by ``generate_latest``;
  ``ratio_reference_vs_cold``: how many times slower that is than our whole cold scrape
  (``ratio_reference_vs_prerender``: than the pre-render).
* ``bytes``: the text, ``gzip_bytes``: the body sent, ``held_bytes``: the compressed pieces the
  exporter keeps from one round to the next.
* ``evaluation_s``: the evaluation round itself, for scale.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.core import GaugeMetricFamily, Metric  # noqa: E402
from prometheus_client.registry import Collector  # noqa: E402

from monitor.config import EvaluatorConfig, ExporterConfig  # noqa: E402
from monitor.evaluate.job import ClusterEvaluation, Evaluator  # noqa: E402
from monitor.model.observations import (  # noqa: E402
    BrokerOffsets,
    CommitBatch,
    GroupMember,
    GroupMembership,
)
from monitor.serve.metrics.deflated import deflate, gzip_stream  # noqa: E402
from monitor.serve.metrics.lag import LagExporter  # noqa: E402
from monitor.store.store import Store  # noqa: E402

CLUSTER = "bench"
T0 = 1_800_000_000.0
STEP = 30.0  # seconds between rounds (stopped groups outlive the idle grace)


def build_store(topics: int, per_topic: int, groups_per_topic: int, rounds: int,
                seed: int) -> tuple[Store, float]:
    """A store after ``rounds`` rounds of observations; returns it and the last round's time."""
    rng = np.random.default_rng(seed)
    store = Store(EvaluatorConfig(window=5, min_distance=1))
    topic_names = [f"topic-{i:05d}" for i in range(topics)]
    tp_topics = [t for t in topic_names for _ in range(per_topic)]
    tp_parts = list(range(per_topic)) * topics
    n_tp = len(tp_topics)
    rate = rng.integers(1, 1000, size=n_tp)  # records per second per partition
    log_start = rng.integers(0, 10**6, size=n_tp)
    # Group-partitions: every partition consumed by groups_per_topic groups.
    g_names = [f"group-{i:06d}" for i in range(topics * groups_per_topic)]
    row_group = [g_names[t * groups_per_topic + k]
                 for t in range(topics) for k in range(groups_per_topic) for _ in range(per_topic)]
    row_tp = np.array([t * per_topic + p for t in range(topics) for _k in range(groups_per_topic)
                       for p in range(per_topic)])
    row_topic = [tp_topics[i] for i in row_tp.tolist()]
    row_part = [tp_parts[i] for i in row_tp.tolist()]
    n_rows = row_tp.size
    group_kind = rng.choice(3, size=len(g_names), p=[0.85, 0.1, 0.05])  # ok, lagging, stopped
    kind = np.repeat(group_kind, per_topic)
    t = T0
    for r in range(rounds):
        t = T0 + r * STEP
        leo = log_start + (rate * (t - T0 + 100)).astype(np.int64)
        store.put_broker_offsets(BrokerOffsets(
            CLUSTER, t, tp_topics, tp_parts, log_start.tolist(), leo.tolist()))
        behind = np.select([kind == 1, kind == 2], [(r + 1) * 5, 2], 0) * rate[row_tp]
        committed = leo[row_tp] - behind  # lagging: more every round; stopped: some
        live = (kind != 2) | (r < 5)  # stopped: a full window, then silence
        sel = np.flatnonzero(live)
        store.put_commits(CommitBatch(
            cluster=CLUSTER, source="offsets_topic", observed_at=t,
            groups=[row_group[i] for i in sel.tolist()],
            topics=[row_topic[i] for i in sel.tolist()],
            partitions=[row_part[i] for i in sel.tolist()],
            offsets=committed[sel].tolist(),
            commit_times=[int(t * 1000)] * sel.size,
            orders=(np.arange(sel.size) + r * n_rows).tolist(),
        ))
    for g, k in zip(g_names, group_kind.tolist(), strict=True):
        members = () if k == 2 else (GroupMember("m-1", "client-1", "/10.0.0.1"),)
        store.put_group(GroupMembership(CLUSTER, g, "offsets_topic", t,
                                        "Empty" if k == 2 else "Stable", "consumer", "range",
                                        None, members))
    return store, t


def best(fn: Any, repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - started)
    return min(times), out


class StandardPath(Collector):
    """The ordinary way: one add_metric per sample (the reference)."""

    def __init__(self, ev: ClusterEvaluation) -> None:
        self.ev = ev

    def collect(self) -> Iterator[Metric]:
        d, parts, lag = self.ev.data, self.ev.partitions, self.ev.lag
        assert d is not None and parts is not None and lag is not None
        w = d.windows
        committed = w.offsets[np.arange(w.size), np.maximum(w.counts - 1, 0)].tolist()
        cur = w.current_lag.tolist()
        secs = lag.seconds.tolist()
        status = parts.status.tolist()
        labels = ["cluster", "group", "topic", "partition"]
        fams = [GaugeMetricFamily(n, "h", labels=labels) for n in (
            "kafka_consumergroup_group_offset", "kafka_consumergroup_group_lag",
            "kafka_consumergroup_group_lag_seconds", "kafka_monitor_partition_status")]
        for i, (g, t, p) in enumerate(zip(d.group_ids.tolist(), d.topic_ids.tolist(),
                                          d.partitions.tolist(), strict=True)):
            lab = [self.ev.cluster, d.group_names[g], d.topic_names[t], str(p)]
            fams[0].add_metric(lab, committed[i])
            fams[1].add_metric(lab, cur[i])
            fams[2].add_metric(lab, secs[i])
            fams[3].add_metric(lab, status[i])
        return iter(fams)


def scrape_figures(evaluator: Evaluator, store: Store, partition_series: bool, now: float,
                   repeat: int) -> dict[str, Any]:
    exporter = LagExporter(evaluator, store, [], ExporterConfig(
        partition_series=partition_series))
    registry = CollectorRegistry()
    registry.register(exporter)

    def scrape() -> bytes:  # the /metrics handler's body for a client that accepts gzip
        return b"".join(gzip_stream((deflate(generate_latest(registry)), *exporter.chunks())))

    evaluator.run_once(now)  # a fresh round, then what the service does after it
    prerender, _ = best(exporter.prerender, 1)
    first, body = best(scrape, 1)
    warm, again = best(scrape, repeat)
    assert again == body
    text = gzip.decompress(body)
    held = sum(len(c.data) for c in exporter.chunks())
    evaluator.run_once(now)  # a fresh round, scraped before any pre-render
    cold, _ = best(scrape, 1)
    samples = sum(1 for line in text.split(b"\n") if line and not line.startswith(b"#"))
    return {"prerender_s": round(prerender, 4), "scrape_first_s": round(first, 4),
            "scrape_warm_s": round(warm, 4), "scrape_cold_s": round(cold, 4),
            "samples": samples, "bytes": len(text), "gzip_bytes": len(body), "held_bytes": held}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=10, help="partitions per topic")
    ap.add_argument("--groups-per-topic", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-reference", action="store_true")
    args = ap.parse_args()

    started = time.perf_counter()
    store, last = build_store(args.topics, args.partitions, args.groups_per_topic, args.rounds,
                              args.seed)
    build_s = time.perf_counter() - started
    now = last + 1
    # The offsets-topic reader is caught up to now: silent groups' clocks run (STOP).
    evaluator = Evaluator(store, store.evaluator_config, freshness=lambda _cluster: now)
    evaluation_s, results = best(lambda: evaluator.run_once(now), 1)
    ev = results[CLUSTER]
    assert ev.data is not None
    statuses = dict(sorted(ev.status_counts().items()))

    per_partition = scrape_figures(evaluator, store, True, now, args.repeat)
    per_topic = scrape_figures(evaluator, store, False, now, args.repeat)
    out: dict[str, Any] = {
        "group_partitions": int(ev.data.windows.size),
        "groups": len(ev.group_names()),
        "topic_partitions": len(store.broker_offsets(CLUSTER)),
        "group_statuses": statuses,
        "store_build_s": round(build_s, 2),
        "evaluation_s": round(evaluation_s, 4),
        **per_partition,
        "target_s": 1.0,
        "target_met": per_partition["scrape_cold_s"] <= 1.0,
        "per_topic": per_topic,
    }
    if not args.no_reference:
        registry = CollectorRegistry()
        registry.register(StandardPath(evaluator.result(CLUSTER)))  # type: ignore[arg-type]
        ref_s, _ = best(lambda: generate_latest(registry), 1)
        out["reference_standard_s"] = round(ref_s, 3)
        out["ratio_reference_vs_cold"] = round(ref_s / per_partition["scrape_cold_s"], 1)
        out["ratio_reference_vs_prerender"] = round(ref_s / per_partition["prerender_s"], 1)
    out["python"] = platform.python_version()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
