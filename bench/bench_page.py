"""Benchmark of the status page: what its lag history costs in memory, and how long the
overview and a group page take to render, against the ``/status`` JSON of the same groups
rendered in the same run (the reference: what the API already does per request).

    .venv/bin/python bench/bench_page.py                       # 10,000 groups x 10 partitions
    .venv/bin/python bench/bench_page.py --groups 100000 --partitions 1

The service holds ``--groups`` x ``--partitions`` group-partitions fed through the real store
and evaluation (as bench_api.py). The history is filled with a full hour (120 rounds, one per
30 s bucket), measured with tracemalloc. Printed as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_api import CLUSTER, T0, loaded_service  # noqa: E402
from monitor.evaluate.history import LagHistory  # noqa: E402
from monitor.model.status_json import status_json  # noqa: E402
from monitor.serve.page import routes, views  # noqa: E402


def timed(fn: object, repeat: int) -> float:
    """Median seconds of ``repeat`` calls."""
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    service = loaded_service(args.groups, args.partitions)
    ev = service.evaluator.result(CLUSTER)
    assert ev is not None

    # A full hour of history: 120 rounds, one per bucket, the same groups each time.
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    history = LagHistory()
    started = time.perf_counter()
    for i in range(history.slots):
        ev.evaluated_at = T0 + 30.0 * i
        history.add(ev)
    add_seconds = (time.perf_counter() - started) / history.slots
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    history_bytes = sum(s.size_diff for s in after.compare_to(before, "filename"))
    service.history = history  # type: ignore[misc]

    overview = timed(lambda: routes.render(service, "overview.html",
                                           views.overview(service, now=ev.evaluated_at)),
                     args.repeat)
    group = "group-000000"
    page = timed(lambda: routes.render(service, "group.html",
                                       views.group_page(service, CLUSTER, group,  # type: ignore[arg-type]
                                                        now=ev.evaluated_at)), args.repeat)
    g = ev.group(group)
    assert g is not None
    reference = timed(lambda: json.dumps(status_json(g, False)), args.repeat)
    print(json.dumps({
        "groups": args.groups, "partitions_per_group": args.partitions,
        "group_partitions": args.groups * args.partitions,
        "history_bytes": history_bytes,
        "history_bytes_per_group": round(history_bytes / args.groups, 1),
        "history_add_ms_per_round": round(add_seconds * 1000, 2),
        "overview_render_ms": round(overview * 1000, 1),
        "overview_rows_listed": min(args.groups, views.MAX_ROWS),
        "group_page_render_ms": round(page * 1000, 2),
        "group_lag_json_ms (reference)": round(reference * 1000, 3),
        "group_page_vs_json": round(page / reference, 1),
    }, indent=2))


if __name__ == "__main__":
    main()
