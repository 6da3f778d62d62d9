"""Tests of lag in seconds (monitor.rules.lag_seconds), including kafka-lag-exporter's
reported failures: bursts (#175), drift when the log end stops (#121), replays (#496) and NaN
on quiet topics (#111)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.rules import GroupIndex, LeoHistory, collapse_flat, group_lag_seconds, lag_seconds

S = 1000  # ms per second
T0 = 1_700_000_000 * S


def one(offsets: list[int], times_s: list[float]) -> LeoHistory:
    return LeoHistory.from_arrays([offsets], [[T0 + t * S for t in times_s]])


def secs(committed: int, hist: LeoHistory, now_s: float, **kw: object) -> float:
    return float(lag_seconds([committed], hist, T0 + now_s * S, **kw).seconds[0])  # type: ignore[arg-type]


def test_exact_interpolation() -> None:
    h = one([100, 200, 400], [0, 10, 20])
    assert secs(150, h, 30) == 25.0  # halfway between t=0 and t=10
    assert secs(300, h, 30) == 15.0  # halfway between t=10 and t=20
    assert secs(200, h, 30) == 20.0  # exactly on a point
    assert secs(100, h, 30) == 30.0  # the oldest point itself is not extrapolation


def test_caught_up_is_zero() -> None:
    h = one([100, 200, 400], [0, 10, 20])
    assert secs(400, h, 1000) == 0.0
    assert secs(401, h, 1000) == 0.0  # committed beyond a stale log end


def test_quiet_topic_does_not_drift_and_is_not_nan() -> None:
    """The log end stopped at 400 (observed at t=20 and t=1000): a consumer at 300 has been
    behind since t=15, a consumer at 400 is caught up, and nothing is NaN."""
    h = one([100, 200, 400, 400], [0, 10, 20, 1000])
    assert secs(300, h, 1000) == 985.0  # not pulled towards t=1000 (kafka-lag-exporter #121)
    assert secs(300, h, 2000) == 1985.0
    assert secs(400, h, 5000) == 0.0
    flat = one([400, 400, 400], [0, 10, 20])
    out = lag_seconds(
        [400, 399],
        LeoHistory.from_arrays(np.repeat(flat.offsets, 2, 0), np.repeat(flat.times_ms, 2, 0)),
        T0 + 30 * S,
    )
    assert np.all(np.isfinite(out.seconds)) and out.seconds[0] == 0.0
    assert out.seconds[1] == 30.0 and out.lower_bound[1]


def test_burst_after_quiet_period_is_not_spread_over_it() -> None:
    """Quiet at 1000 from t=0 to t=3600 (first and last point kept), then 10,000 records by
    t=3610: a consumer at 1001 is ~10 s behind, not ~an hour (kafka-lag-exporter #175)."""
    h = one([1000, 1000, 11000], [0, 3600, 3610])
    assert abs(secs(1001, h, 3610) - 10.0) < 0.01
    assert abs(secs(6000, h, 3610) - 5.0) < 1e-9


def test_replay_from_zero_is_bounded_by_the_oldest_observation() -> None:
    """45 minutes of history on a topic at offset 10^9: a group replaying from 0 is reported
    as at least 45 minutes behind (flagged lower_bound), never years (kafka-lag-exporter
    #496)."""
    times = list(range(0, 2701, 60))
    offsets = [10**9 + 1000 * t for t in times]
    h = LeoHistory.from_arrays([offsets] * 2, [[T0 + t * S for t in times]] * 2)
    out = lag_seconds([0, offsets[1]], h, T0 + 2700 * S)
    assert out.seconds[0] == 2700.0 and out.lower_bound[0]
    assert out.seconds[1] == 2640.0 and not out.lower_bound[1]


def test_empty_history_is_zero_and_unknown() -> None:
    h = LeoHistory.from_arrays([[0, 0]], [[0, 0]], [0])
    out = lag_seconds([5], h, T0)
    assert out.seconds[0] == 0.0 and not out.known[0] and not out.lower_bound[0]


def test_backward_point_is_not_trusted() -> None:
    """A stale leader answering 150 after 200 is lifted to 200 (flat from t=10 to t=15), so
    300 interpolates between t=15 and t=20, not back into the past."""
    h = LeoHistory.from_arrays([[100, 200, 150, 400]], [[0, 10 * S, 15 * S, 20 * S]])
    assert h.offsets.tolist() == [[100, 200, 200, 400]]
    assert float(lag_seconds([300], h, 30 * S).seconds[0]) == 12.5


def test_marker_gap_is_caught_up_unless_the_log_end_moved_after_the_commit() -> None:
    h = one([100, 200, 201, 201], [0, 10, 11, 500])  # 201 = a transaction's marker
    commit = [T0 + 12 * S]  # committed 200 at t=12, after the marker was written
    assert secs(200, h, 500, commit_times_ms=commit) == 0.0
    assert secs(200, h, 500, commit_times_ms=commit, marker_tolerance=0) == 490.0
    assert secs(200, h, 500) == 490.0  # no commit time: no proof, no tolerance
    late = one([100, 200, 200, 201], [0, 10, 20, 30])  # 201 written after a commit at t=12
    assert secs(200, late, 40, commit_times_ms=commit) > 0


def test_collapse_flat_keeps_answers() -> None:
    h = one([1, 1, 1, 5, 5, 5, 5, 9], [0, 1, 2, 3, 4, 5, 6, 7])
    c = collapse_flat(h)
    assert c.counts.tolist() == [5]
    assert c.offsets[0, :5].tolist() == [1, 1, 5, 5, 9]
    for committed in range(0, 11):
        assert secs(committed, c, 20) == secs(committed, h, 20)


def test_group_lag_seconds_is_the_worst_partition() -> None:
    groups = GroupIndex([0, 1, 0, 2], n_groups=4)
    assert group_lag_seconds(np.array([3.0, 1.0, 7.5, 0.0]), groups).tolist() == [
        7.5,
        1.0,
        0.0,
        0.0,
    ]


@st.composite
def histories(draw: st.DrawFn) -> tuple[LeoHistory, np.ndarray, float]:
    p = draw(st.integers(1, 8))
    h = draw(st.integers(1, 8))
    offs = np.zeros((p, h), dtype=np.int64)
    tims = np.zeros((p, h), dtype=np.int64)
    counts = []
    for i in range(p):
        offs[i] = np.cumsum(draw(st.lists(st.integers(0, 50), min_size=h, max_size=h)))
        tims[i] = T0 + np.cumsum(draw(st.lists(st.integers(0, 20_000), min_size=h, max_size=h)))
        counts.append(draw(st.integers(0, h)))
    committed = np.array(draw(st.lists(st.integers(-5, 400), min_size=p, max_size=p)))
    now = float(T0 + draw(st.integers(-10_000, 400_000)))
    return LeoHistory.from_arrays(offs, tims, counts), committed, now


@settings(max_examples=300, deadline=None)
@given(histories(), st.booleans())
def test_never_nan_or_negative_and_bounded(
    data: tuple[LeoHistory, np.ndarray, float], with_commit_times: bool
) -> None:
    hist, committed, now = data
    ct = np.full(hist.size, T0) if with_commit_times else None
    out = lag_seconds(committed, hist, now, commit_times_ms=ct)
    assert np.all(np.isfinite(out.seconds)) and np.all(out.seconds >= 0)
    oldest = hist.times_ms[:, 0].astype(float)
    bound = np.maximum(now - oldest, 0) / 1000
    assert np.all(out.seconds[hist.counts > 0] <= bound[hist.counts > 0] + 1e-9)
    assert np.all(out.seconds[hist.counts == 0] == 0)


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(1, 60), st.booleans())
def test_monotone_in_committed_offset(
    data: tuple[LeoHistory, np.ndarray, float], delta: int, with_commit_times: bool
) -> None:
    """A lower committed offset never yields fewer seconds."""
    hist, committed, now = data
    ct = np.full(hist.size, T0) if with_commit_times else None
    hi = lag_seconds(committed, hist, now, commit_times_ms=ct).seconds
    lo = lag_seconds(committed - delta, hist, now, commit_times_ms=ct).seconds
    assert np.all(lo >= hi - 1e-9)


@settings(max_examples=200, deadline=None)
@given(histories())
def test_batch_equals_one_by_one(data: tuple[LeoHistory, np.ndarray, float]) -> None:
    hist, committed, now = data
    whole = lag_seconds(committed, hist, now)
    for i in range(hist.size):
        single = LeoHistory(
            hist.offsets[i : i + 1], hist.times_ms[i : i + 1], hist.counts[i : i + 1]
        )
        assert lag_seconds(committed[i : i + 1], single, now).seconds[0] == whole.seconds[i]
