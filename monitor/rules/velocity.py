"""Lag velocity, time to catch up and hot partitions, per group-partition, vectorised.

* **Consumption rate**: offsets/s the group's commits advanced over the commit window (first to
  last commit, by their commit times). Not known with fewer than two commits or none moving in
  time. Taken as 0 where the status rules say STOP or STALL: nobody reads there, whatever the
  window's older commits did.
* **Production rate**: offsets/s the log end advanced over the same stretch, from the window's
  first commit (or the oldest log-end observation, if later) to the newest observation.
* **Lag velocity** = production - consumption: records/s the lag grows (> 0) or shrinks (< 0).
* **Time to catch up** = lag / (consumption - production) where the lag shrinks, from the
  evaluation time: the lag is the last log end read minus the last commit, each carried
  forward to now at its rate (a consumer committing every 5 s is up to 5 s further on than
  its commit says). Never negative or infinite: where there is none, ``reason`` says why
  (caught up, not shrinking, not consuming, rates not known yet).
* **Hot partition**: within a group of at least ``HOT_MIN_PARTITIONS``, a partition whose lag
  is at least ``hot_min_lag`` and more than ``hot_factor`` times the group's median lag: a
  skewed key or a slow member, which a group's total hides.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from monitor.rules.lag_seconds import LeoHistory

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

HOT_MIN_PARTITIONS = 3
"""Fewer partitions have no meaningful median to stand out from."""

CATCH_UP_REASONS = (
    None,
    "caught up",
    "lag not shrinking",
    "not consuming",
    "rates not known yet",
)
"""Why a partition has no time to catch up (index = ``Velocity.reason``; 0: it has one)."""


@dataclass(frozen=True, slots=True)
class Velocity:
    consumption_rate: FloatArray  # offsets/s, NaN where not known
    production_rate: FloatArray  # offsets/s, NaN where not known
    velocity: FloatArray  # production - consumption, NaN where either is not known
    time_to_catch_up: FloatArray  # seconds, NaN where there is none (see ``reason``)
    reason: npt.NDArray[np.int8]  # index into CATCH_UP_REASONS
    hot: BoolArray


def consumption_rates(
    offsets: IntArray, timestamps_ms: IntArray, counts: IntArray, idle: BoolArray
) -> FloatArray:
    """Offsets/s between the window's first and last commit; 0 where ``idle`` (STOP, STALL),
    NaN where not known (one commit, or no time between them)."""
    rows = np.arange(offsets.shape[0])
    last = np.maximum(counts - 1, 0)
    span = (timestamps_ms[rows, last] - timestamps_ms[:, 0]).astype(np.float64) / 1000.0
    moving = (counts >= 2) & (span > 0)
    rate = np.where(moving, (offsets[rows, last] - offsets[:, 0]) / np.where(moving, span, 1.0),
                    np.nan)
    return np.where(idle, 0.0, np.maximum(rate, 0.0))


def production_rates(history: LeoHistory, since_ms: IntArray) -> FloatArray:
    """Offsets/s the log end advanced from ``since_ms`` (or the oldest observation, if later)
    to the newest observation; NaN where the history spans no time."""
    n = history.size
    if history.offsets.shape[1] == 0:
        return np.full(n, np.nan)
    rows = np.arange(n)
    last = np.maximum(history.counts - 1, 0)
    t1 = history.times_ms[rows, last].astype(np.float64)
    o1 = history.offsets[rows, last].astype(np.float64)
    start = np.maximum(since_ms.astype(np.float64), history.times_ms[:, 0].astype(np.float64))
    inside = (history.counts >= 2) & (start < t1)
    o0, known = history.log_end_at(np.where(inside, start, t1).astype(np.int64)[:, None])
    ok = inside & known[:, 0]
    span = np.where(ok, (t1 - start) / 1000.0, 1.0)
    return np.where(ok, np.maximum(o1 - o0[:, 0], 0.0) / span, np.nan)


def catch_up(lag: IntArray, consumption: FloatArray, production: FloatArray, idle: BoolArray,
             commit_age_s: FloatArray | None = None, log_end_age_s: FloatArray | None = None,
             ) -> tuple[FloatArray, FloatArray, npt.NDArray[np.int8]]:
    """Lag velocity, time to catch up and the reason where there is none. ``commit_age_s``,
    ``log_end_age_s``: how old the last commit and the last log-end read are (the lag carried
    forward to now)."""
    velocity = production - consumption  # NaN where either is unknown
    known = np.isfinite(velocity)
    shrinking = known & (velocity < 0)
    behind = lag > 0
    est = behind & shrinking & ~idle
    now_lag = lag.astype(np.float64)
    if commit_age_s is not None and log_end_age_s is not None:
        with np.errstate(invalid="ignore"):
            moved = production * np.maximum(log_end_age_s, 0.0) \
                - consumption * np.maximum(commit_age_s, 0.0)
        now_lag = np.where(est, np.maximum(now_lag + moved, 0.0), now_lag)
    with np.errstate(divide="ignore", invalid="ignore"):
        ttc = np.where(est, now_lag / np.where(est, -velocity, 1.0), np.nan)
    reason = np.select([~behind, idle, ~known, ~shrinking], [1, 3, 4, 2], 0).astype(np.int8)
    return velocity, ttc, reason


def hot_partitions(
    lag: IntArray, group_ids: IntArray, factor: float, min_lag: int
) -> BoolArray:
    """Partitions whose lag is above ``min_lag`` and ``factor`` times their group's median
    (groups of at least ``HOT_MIN_PARTITIONS``)."""
    n = lag.size
    if n == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort((lag, group_ids))
    g = group_ids[order]
    v = lag[order].astype(np.float64)
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    sizes = np.diff(np.r_[starts, n])
    median = (v[starts + (sizes - 1) // 2] + v[starts + sizes // 2]) / 2.0
    seg = np.repeat(np.arange(starts.size), sizes)
    hot_sorted = (sizes[seg] >= HOT_MIN_PARTITIONS) & (v >= min_lag) & (v > factor * median[seg])
    hot = np.zeros(n, dtype=bool)
    hot[order] = hot_sorted
    return hot


def velocity(
    offsets: IntArray, timestamps_ms: IntArray, counts: IntArray, lag: IntArray,
    history: LeoHistory, idle: BoolArray, group_ids: IntArray, now_ms: float | FloatArray,
    hot_factor: float, hot_min_lag: int,
) -> Velocity:
    """Every figure of the module docstring for one round's rows (``now_ms``: per row, where
    its group's clock stands)."""
    consumption = consumption_rates(offsets, timestamps_ms, counts, idle)
    production = production_rates(history, timestamps_ms[:, 0])
    rows = np.arange(offsets.shape[0])
    last_commit = timestamps_ms[rows, np.maximum(counts - 1, 0)].astype(np.float64)
    if history.offsets.shape[1]:
        last_read = history.times_ms[rows, np.maximum(history.counts - 1, 0)]
    else:
        last_read = np.broadcast_to(np.asarray(now_ms, dtype=np.float64), rows.shape)
    vel, ttc, reason = catch_up(lag, consumption, production, idle,
                                (now_ms - last_commit) / 1000.0,
                                (now_ms - last_read.astype(np.float64)) / 1000.0)
    return Velocity(consumption, production, vel, ttc, reason,
                    hot_partitions(lag, group_ids, hot_factor, hot_min_lag))
