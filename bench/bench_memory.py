"""Where the service's memory goes at scale, stage by stage (tracemalloc; no Kafka).

    .venv/bin/python bench/bench_memory.py                  # 10,000 groups x 10 partitions
    .venv/bin/python bench/bench_memory.py --topics 1000    # 10k group-partitions

The store is fed as in ``bench/bench_metrics.py`` (synthetic observations, one group per topic,
10 rounds); then the service's own steps run in the order a round runs them: an evaluation
round (with the status replies of every group written to the reply table handed to the HTTP
front, as the service does behind it), the lag history, the Prometheus text pre-rendered
(kept compressed), and a second round (the first one's results are dropped when it is
published, as in the service). Printed as
one JSON object: for each stage the Python-heap growth (``tracemalloc``, numpy arrays
included) and the process's resident memory after it, the bytes per group-partition of each,
and the largest allocation sites of what stays. The reference is the process before the store
is built (``idle_rss_mb``): what the imports alone cost.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_metrics import build_store  # noqa: E402

from monitor.config import ExporterConfig  # noqa: E402
from monitor.evaluate.history import LagHistory  # noqa: E402
from monitor.evaluate.job import ClusterEvaluation, Evaluator  # noqa: E402
from monitor.runtime import tune_malloc  # noqa: E402
from monitor.serve.http.v3 import prepare_status_replies  # noqa: E402
from monitor.serve.metrics.lag import LagExporter  # noqa: E402
from monitor.serve.reply_table import TableWriter  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--top", type=int, default=12, help="allocation sites listed")
    ap.add_argument("--rss-only", action="store_true",
                    help="no tracemalloc (its own bookkeeping inflates the resident figures)")
    args = ap.parse_args()
    tune_malloc()  # as the service does
    idle = rss_mb()
    if not args.rss_only:
        tracemalloc.start(1)
    stages: dict[str, dict[str, float]] = {}
    last = [0]

    def stage(name: str) -> None:
        gc.collect()
        stages[name] = {"rss_mb": rss_mb()}
        if tracemalloc.is_tracing():
            now = tracemalloc.get_traced_memory()[0]
            stages[name]["heap_growth_mb"] = round((now - last[0]) / 2**20, 1)
            last[0] = now

    store, t = build_store(args.topics, args.partitions, 1, 10, seed=1)
    stage("store")
    now = t + 1
    evaluator = Evaluator(store, store.evaluator_config, freshness=lambda _c: now)
    tmp = tempfile.TemporaryDirectory()
    tables: list[TableWriter] = []

    def into_table(new: ClusterEvaluation, old: ClusterEvaluation | None) -> None:
        tables.append(TableWriter(Path(tmp.name) / "replies"))
        prepare_status_replies(new, old, budget=1e9, table=tables[-1], every_group=True)

    evaluator.before_publish = into_table  # as the service does behind the HTTP front
    results = evaluator.run_once(now)
    entries = tables.pop().commit()
    stage("evaluation_round_and_reply_table")
    history = LagHistory()
    for evaluation in results.values():
        history.add(evaluation)
    del results, evaluation  # the evaluator holds the round as long as it is served
    stage("lag_history")
    exporter = LagExporter(evaluator, store, [], ExporterConfig())
    exporter.prerender()
    stage("metrics_prerendered")
    evaluator.run_once(now + 5)
    tables.pop().commit()
    exporter.prerender()
    stage("second_round")
    tmp.cleanup()
    group_partitions = args.topics * args.partitions
    out: dict[str, Any] = {
        "group_partitions": group_partitions,
        "reply_table_entries": entries,
        "idle_rss_mb": idle,
        "stages": stages,
        "rss_per_group_partition_kb": round((rss_mb() - idle) * 1024 / group_partitions, 2),
    }
    if tracemalloc.is_tracing():
        total_heap = tracemalloc.get_traced_memory()[0]
        out["heap_mb"] = round(total_heap / 2**20, 1)
        out["heap_per_group_partition_kb"] = round(total_heap / 1024 / group_partitions, 2)
        out["top_sites"] = [
            {"site": f"{s.traceback[0].filename.rsplit('/monitor/', 1)[-1]}:"
                     f"{s.traceback[0].lineno}", "mb": round(s.size / 2**20, 1)}
            for s in tracemalloc.take_snapshot().statistics("lineno")[:args.top]
        ]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
