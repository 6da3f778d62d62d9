"""Lag in seconds: how long ago the log end was at a group's committed offset.

The method is kafka-lag-exporter's (a table of observed (log-end offset, time) points per
partition, interpolated), with its users' complaints fixed by construction:

* **Bursts** (#175): the log end is interpolated only between two *consecutive observations*,
  and the rightmost point at or below the committed offset is used, so a flat stretch followed
  by a burst never spreads the burst over the quiet period.
* **Drift when the log end stops** (#121): a flat run is represented by its first and last
  observation; an offset inside the rising segment before the run interpolates to the run's
  *first* point, so the estimate does not creep while a consumer catches up on a quiet topic.
* **Replays** (#496, "3 years for 45 minutes of data"): an offset below the oldest observation
  is not extrapolated with a rate we never observed. The only fact we hold is "the log end was
  already past this offset at our oldest observation", so the answer is ``now - oldest
  observation time``, flagged ``lower_bound``. It is never larger than the history's own age.
* **NaN on quiet topics** (#111): no division ever has a zero denominator (interpolation only
  between points whose offsets differ); caught up is 0; an empty history is 0 with
  ``known=False``. Never NaN, never negative.

Transactional commit markers leave a permanent gap of one offset (or a few) between a caught-up
consumer and the log end. With ``commit_times_ms`` given, a gap of at most
``marker_tolerance`` counts as caught up unless the history shows the log end moved *after*
the commit (then the gap is real data the consumer has not read yet).

History layout (struct of arrays, oldest first, left-aligned): ``offsets[P, H]``,
``times_ms[P, H]``, ``counts[P]`` (slots ``>= counts`` are ignored). Offsets and times should
be non-decreasing; a backward point (a stale leader's answer) is lifted to the running maximum
rather than trusted. Keep every observation, or at least the first and last point of every
flat run (``collapse_flat`` does that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from monitor.rules.status import GroupIndex

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

__all__ = [
    "LagSeconds",
    "LeoHistory",
    "collapse_flat",
    "group_lag_seconds",
    "lag_seconds",
]


@dataclass(frozen=True, slots=True)
class LeoHistory:
    """Observed log-end offsets per partition over time: ``offsets[P, H]``, ``times_ms[P, H]``
    (unix ms), ``counts[P]`` valid slots, oldest first. Built once per evaluation and shared by
    the lag-seconds estimate and the no-false-STOP / marker rules."""

    offsets: IntArray
    times_ms: IntArray
    counts: IntArray

    @classmethod
    def from_arrays(
        cls, offsets: npt.ArrayLike, times_ms: npt.ArrayLike, counts: npt.ArrayLike | None = None
    ) -> LeoHistory:
        """Validate shapes, coerce to int64 and repair backward points (running maximum)."""
        off = np.atleast_2d(np.asarray(offsets, dtype=np.int64))
        tim = np.atleast_2d(np.asarray(times_ms, dtype=np.int64))
        if off.shape != tim.shape:
            raise ValueError(f"offsets {off.shape} and times_ms {tim.shape} differ in shape")
        p, h = off.shape
        cnt = (
            np.full(p, h, dtype=np.int64)
            if counts is None
            else np.asarray(counts, dtype=np.int64).reshape(p)
        )
        if np.any((cnt < 0) | (cnt > h)):
            raise ValueError(f"counts must lie in [0, {h}]")
        if h:
            # Invalid slots must not lift valid ones: fill them with the smallest value first.
            valid = np.arange(h) < cnt[:, None]
            low = np.iinfo(np.int64).min
            off = np.maximum.accumulate(np.where(valid, off, low), axis=1)
            tim = np.maximum.accumulate(np.where(valid, tim, low), axis=1)
        return cls(off, tim, cnt)

    @property
    def size(self) -> int:
        return int(self.offsets.shape[0])

    def valid(self) -> BoolArray:
        return np.arange(self.offsets.shape[1]) < self.counts[:, None]

    def newest(self) -> IntArray:
        """Newest observed log end per partition (-1 where the history is empty)."""
        if self.offsets.shape[1] == 0:
            return np.full(self.size, -1, dtype=np.int64)
        last = np.clip(self.counts - 1, 0, None)[:, None]
        val = np.take_along_axis(self.offsets, last, axis=1)[:, 0]
        return np.where(self.counts > 0, val, -1)

    def log_end_at(self, t_ms: npt.ArrayLike) -> tuple[FloatArray, BoolArray]:
        """The log end at times ``t_ms`` (``[P, K]``, unix ms), interpolated between the two
        observations around each time, and where that is known: between the first and the
        last observation (inclusive). Outside, the value is 0 and ``known`` False: a log end
        is never extrapolated (a producer may have stopped or burst since the last sample)."""
        t = np.asarray(t_ms, dtype=np.int64)
        if t.ndim == 1:
            t = t.reshape(self.size, -1)
        off, tim, cnt = self.offsets, self.times_ms, self.counts
        h = off.shape[1]
        if h == 0 or t.size == 0:
            return np.zeros(t.shape), np.zeros(t.shape, dtype=bool)
        # Binary search per query for the number of observations at or before it.
        lo = np.zeros(t.shape, dtype=np.int64)
        hi = np.broadcast_to(cnt[:, None], t.shape).copy()
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) // 2
            right = active & (np.take_along_axis(tim, np.minimum(mid, h - 1), axis=1) <= t)
            lo = np.where(right, mid + 1, lo)
            hi = np.where(active & ~right, mid, hi)
        k0 = np.clip(lo - 1, 0, h - 1)
        k1 = np.clip(lo, 0, h - 1)
        o0 = np.take_along_axis(off, k0, axis=1).astype(np.float64)
        o1 = np.take_along_axis(off, k1, axis=1).astype(np.float64)
        t0 = np.take_along_axis(tim, k0, axis=1).astype(np.float64)
        t1 = np.take_along_axis(tim, k1, axis=1).astype(np.float64)
        at_last = lo == cnt[:, None]  # at or after the newest observation
        inside = (lo > 0) & ~at_last
        span = np.where(inside & (t1 > t0), t1 - t0, 1.0)
        frac = np.where(inside, (t - t0) / span, 0.0)
        value = o0 + frac * (o1 - o0)
        known = inside | (at_last & (lo > 0) & (t == t0))
        return np.where(known, value, 0.0), known

    def moved_after(self, value: IntArray, t_ms: npt.ArrayLike) -> BoolArray:
        """True where some observation later than ``t_ms`` saw the log end below ``value``:
        proof that the log end reached ``value`` only after ``t_ms``."""
        t = np.broadcast_to(np.asarray(t_ms, dtype=np.float64), (self.size,))[:, None]
        seen = self.valid() & (self.times_ms > t)
        return np.any(seen & (self.offsets < value[:, None]), axis=1)

    def last_time_at_or_below(self, value: IntArray) -> IntArray:
        """Latest observation time at which the log end was <= ``value`` (int64 min if none):
        the last moment a consumer at ``value`` is known to have had nothing to read."""
        low = np.iinfo(np.int64).min
        hit = self.valid() & (self.offsets <= value[:, None])
        return np.max(np.where(hit, self.times_ms, low), axis=1, initial=low)


@dataclass(frozen=True, slots=True)
class LagSeconds:
    """Per-partition result. ``seconds`` >= 0, finite. ``lower_bound``: the committed offset is
    older than the oldest observation, so the true lag is at least ``seconds``. ``known``:
    False where the history is empty (``seconds`` is then 0, not a guess)."""

    seconds: FloatArray
    lower_bound: BoolArray
    known: BoolArray
    exact: BoolArray | None = None  # from the record's timestamp (set by the evaluator)


def lag_seconds(
    committed: npt.ArrayLike,
    history: LeoHistory,
    now_ms: float | npt.ArrayLike,
    *,
    commit_times_ms: npt.ArrayLike | None = None,
    marker_tolerance: int = 1,
) -> LagSeconds:
    """Seconds since the log end was at each partition's committed offset, vectorised.

    ``committed[P]``; ``now_ms`` scalar or ``[P]``; ``commit_times_ms[P]`` (optional, unix ms
    of each partition's last commit) enables the marker tolerance (0 disables it).
    """
    c = np.asarray(committed, dtype=np.int64).reshape(history.size)
    off, tim, cnt = history.offsets, history.times_ms, history.counts
    p, h = off.shape
    now = np.broadcast_to(np.asarray(now_ms, dtype=np.float64), (p,))
    known = cnt > 0
    if h == 0:
        zeros = np.zeros(p, dtype=np.float64)
        return LagSeconds(zeros, np.zeros(p, dtype=bool), known)

    valid = history.valid()
    newest = history.newest()
    caught_up = c >= newest
    if commit_times_ms is not None and marker_tolerance > 0:
        ct = np.asarray(commit_times_ms, dtype=np.int64).reshape(p)
        gap = newest - c
        caught_up |= (gap <= marker_tolerance) & ~history.moved_after(newest, ct)

    # k = rightmost valid point with offset <= c (offsets are non-decreasing within counts).
    k = np.sum(valid & (off <= c[:, None]), axis=1) - 1
    before_oldest = known & (k < 0) & ~caught_up
    inside = known & (k >= 0) & ~caught_up  # then k + 1 < count because c < newest

    k0 = np.clip(k, 0, h - 1)[:, None]
    k1 = np.clip(k + 1, 0, h - 1)[:, None]
    o0 = np.take_along_axis(off, k0, axis=1)[:, 0]
    o1 = np.take_along_axis(off, k1, axis=1)[:, 0]
    t0 = np.take_along_axis(tim, k0, axis=1)[:, 0].astype(np.float64)
    t1 = np.take_along_axis(tim, k1, axis=1)[:, 0].astype(np.float64)
    span = np.where(inside, o1 - o0, 1).astype(np.float64)  # > 0 wherever used
    frac = np.where(inside, (c - o0) / span, 0.0)
    t_at = t0 + frac * (t1 - t0)

    oldest_t = tim[:, 0].astype(np.float64)
    t_at = np.where(before_oldest, oldest_t, t_at)
    seconds = np.where(inside | before_oldest, np.maximum(now - t_at, 0.0) / 1000.0, 0.0)
    return LagSeconds(seconds, before_oldest, known)


def collapse_flat(history: LeoHistory) -> LeoHistory:
    """Drop the middle points of flat runs, keeping each run's first and last observation,
    which is all ``lag_seconds`` needs: a quiet topic then costs two slots, not the whole
    table, and a fixed-size table spans the quiet period. Result stays left-aligned."""
    off, tim = history.offsets, history.times_ms
    p, h = off.shape
    if h < 3:
        return history
    valid = history.valid()
    same_prev = np.zeros((p, h), dtype=bool)
    same_prev[:, 1:] = off[:, 1:] == off[:, :-1]
    same_next = np.zeros((p, h), dtype=bool)
    same_next[:, :-1] = (off[:, :-1] == off[:, 1:]) & valid[:, 1:]
    keep = valid & ~(same_prev & same_next)
    new_cnt = keep.sum(axis=1)
    # Stable left-compaction: sort by (not keep), preserving order among kept slots.
    order = np.argsort(~keep, axis=1, kind="stable")
    return LeoHistory(
        np.take_along_axis(off, order, axis=1),
        np.take_along_axis(tim, order, axis=1),
        new_cnt.astype(np.int64),
    )


def group_lag_seconds(seconds: FloatArray, groups: GroupIndex) -> FloatArray:
    """A group's lag in seconds is its worst partition's (0 for a group with no partitions)."""
    return groups.max(seconds, empty=0.0)
