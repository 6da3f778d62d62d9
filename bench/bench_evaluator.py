"""Benchmark of the vectorised evaluator against a per-partition Python loop in the same run.

    .venv/bin/python bench/bench_evaluator.py                  # 100,000 groups x 10 partitions
    .venv/bin/python bench/bench_evaluator.py --groups 10000   # smaller

Generates G groups x N partitions with windows of W commits and a broker ring of B log ends
(healthy, lagging, stalled, stopped and rewound partitions mixed), then prints one JSON object:

* ``vectorised``: one pass of ``evaluate`` (partition rules + group reductions) over all
  partitions, best of ``--repeat``; ``partitions_per_s``, ``groups_per_s``; ``with_setup``
  adds building ``PartitionWindows`` and ``GroupIndex`` from the arrays.
* ``reference_loop``: the tests' plain per-partition reading of Burrow's rules
  (``tests.harness.burrow_oracle.reference_partition``) plus a dict-based group max/sum, over
  a subset of ``--loop-partitions`` partitions already held as Python lists, scaled.
* ``ratio_vectorised_vs_loop``: partitions/s of the two; ``statuses_agree``: the loop's and
  the vectorised statuses on the subset (Burrow options) are identical.
* ``memory``: bytes of the input arrays, and tracemalloc's peak during one ``evaluate``.
* ``lag_seconds``: the same partitions with a 30-point log-end history.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from monitor.rules import (  # noqa: E402
    BurrowStatus,
    GroupIndex,
    LeoHistory,
    PartitionWindows,
    RuleOptions,
    Status,
    evaluate,
    lag_seconds,
)
from tests.harness.burrow_oracle import reference_partition  # noqa: E402

NOW_MS = 1_700_000_000_000


def make_data(groups: int, per_group: int, width: int, ring: int, seed: int) -> dict[str, Any]:
    """Realistic mixes, built with array operations (no per-partition Python)."""
    rng = np.random.default_rng(seed)
    p = groups * per_group
    kind = rng.choice(5, size=p, p=[0.7, 0.12, 0.06, 0.07, 0.05])  # ok lag stall stop rewind
    gap = rng.integers(1_000, 60_000, size=p)[:, None]
    slots = np.arange(width)
    ts = NOW_MS - gap * (width - slots)  # last commit one gap ago
    ts[kind == 3] -= 3_600_000  # stopped: silent for an hour
    step = rng.integers(1, 500, size=(p, width))
    step[kind == 2] = 0  # stalled: same offset every time
    base = rng.integers(0, 10**9, size=p)[:, None]
    offsets = base + np.cumsum(step, axis=1)
    rewind_at = width // 2
    offsets[kind == 4, rewind_at:] -= 5_000
    leo = offsets[:, -1] + np.where(kind == 0, rng.integers(0, 3, size=p), 10_000)
    lags = np.maximum(leo[:, None] - offsets, 0)
    lags[kind == 1] = 10_000 + 100 * slots  # falling behind: lag grows at every commit
    lags[rng.random((p, width)) < 0.02] = -1  # unknown lag now and then
    counts = np.where(rng.random(p) < 0.05, rng.integers(0, width, size=p), width)
    broker = leo[:, None] - rng.integers(0, 200, size=(p, ring)) * (kind != 0)[:, None]
    current = np.maximum(leo - offsets[:, -1], 0)
    f = np.asfortranarray  # the layout the store hands to the evaluator
    return dict(
        offsets=f(offsets),
        timestamps_ms=f(ts),
        lags=f(lags),
        counts=counts,
        current_lag=current,
        broker_offsets=f(broker),
        group_ids=np.repeat(np.arange(groups), per_group),
        leo=leo,
    )


def best(fn: Any, repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--groups", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=10, help="partitions per group")
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--ring", type=int, default=10, help="broker log ends per partition")
    ap.add_argument("--loop-partitions", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    d = make_data(args.groups, args.partitions, args.window, args.ring, args.seed)
    p = d["offsets"].shape[0]
    options = RuleOptions.burrow()

    def build() -> tuple[PartitionWindows, GroupIndex]:
        w = PartitionWindows.from_arrays(
            d["offsets"],
            d["timestamps_ms"],
            d["lags"],
            d["counts"],
            d["current_lag"],
            d["broker_offsets"],
        )
        return w, GroupIndex(d["group_ids"], args.groups)

    w, gi = build()
    vec_s, (parts, grp) = best(lambda: evaluate(w, gi, NOW_MS, options), args.repeat)
    setup_s, _ = best(lambda: evaluate(*build(), NOW_MS, options), args.repeat)
    dflt_s, _ = best(lambda: evaluate(w, gi, NOW_MS, RuleOptions()), args.repeat)

    tracemalloc.start()
    evaluate(w, gi, NOW_MS, options)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    # The loop's data as Python lists, converted before timing (the loop is not charged).
    n = min(args.loop_partitions, p)
    rows = []
    for i in range(n):
        c = int(d["counts"][i])
        rows.append(
            (
                d["offsets"][i, :c].tolist(),
                d["timestamps_ms"][i, :c].tolist(),
                [None if x < 0 else x for x in d["lags"][i, :c].tolist()],
                int(d["current_lag"][i]),
                d["broker_offsets"][i].tolist(),
                int(d["group_ids"][i]),
            )
        )

    def loop() -> list[Status]:
        out = []
        worst: dict[int, int] = {}
        total: dict[int, int] = {}
        for offs, ts, lags, cur, broker, g in rows:
            s = reference_partition(offs, ts, lags, cur, broker, NOW_MS, 0)
            out.append(s)
            worst[g] = max(worst.get(g, 0), int(s))
            total[g] = total.get(g, 0) + cur
        return out

    loop_s, loop_status = best(loop, 1)
    agree = [int(s) for s in loop_status] == parts.status[:n].tolist()

    hist_h = 30
    step = np.linspace(0, 1, hist_h)
    h_off = (d["leo"][:, None] - 20_000 + (20_000 * step)).astype(np.int64)
    h_tim = (NOW_MS - 300_000 + 300_000 * step).astype(np.int64)[None, :].repeat(p, axis=0)
    hist = LeoHistory.from_arrays(h_off, h_tim)
    committed = d["offsets"][:, -1]
    ls_s, ls = best(lambda: lag_seconds(committed, hist, NOW_MS), args.repeat)

    inputs = sum(
        a.nbytes
        for a in (
            w.offsets,
            w.timestamps_ms,
            w.lags,
            w.counts,
            w.current_lag,
            w.broker_offsets,
            w.broker_counts,
            d["group_ids"],
        )
    )
    vec_rate = p / vec_s
    loop_rate = n / loop_s
    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "numpy": np.__version__,
                "groups": args.groups,
                "partitions": p,
                "window": args.window,
                "broker_ring": args.ring,
                "vectorised": {
                    "seconds": round(vec_s, 4),
                    "partitions_per_s": round(vec_rate),
                    "groups_per_s": round(args.groups / vec_s),
                    "with_setup_seconds": round(setup_s, 4),
                    "project_defaults_seconds": round(dflt_s, 4),
                },
                "reference_loop": {
                    "partitions": n,
                    "seconds": round(loop_s, 4),
                    "partitions_per_s": round(loop_rate),
                    "scaled_seconds_for_all": round(p / loop_rate, 2),
                },
                "ratio_vectorised_vs_loop": round(vec_rate / loop_rate, 1),
                "statuses_agree": agree,
                "status_counts": {s.name: int(np.sum(parts.status == s)) for s in Status},
                "group_status_counts_burrow": {
                    name: int(np.sum(grp.status == code))
                    for name, code in BurrowStatus.__members__.items()
                },
                "memory": {"input_array_bytes": int(inputs), "evaluate_peak_bytes": int(peak)},
                "lag_seconds": {
                    "history_points": hist_h,
                    "seconds": round(ls_s, 4),
                    "partitions_per_s": round(p / ls_s),
                    "max_seconds": float(ls.seconds.max()),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
